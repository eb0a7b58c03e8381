"""tokensel.errors: one base class, and each error also the built-in exception a caller would catch."""

import inspect

import pytest

from tokensel import errors


def test_every_error_is_a_tokensel_error_and_a_builtin():
    classes = [c for _, c in inspect.getmembers(errors, inspect.isclass) if c.__module__ == errors.__name__]
    assert len(classes) >= 12
    for cls in classes:
        assert issubclass(cls, errors.TokenselError)
        if cls is not errors.TokenselError:
            assert any(
                issubclass(cls, b)
                for b in (
                    ValueError,
                    TypeError,
                    KeyError,
                    FileNotFoundError,
                    RuntimeError,
                    ArithmeticError,
                    AssertionError,
                    OSError,
                )
            ), cls


def test_divergence_error_carries_its_step():
    with pytest.raises(ArithmeticError) as exc:
        raise errors.DivergenceError("diverged at step 3", step=3)
    assert exc.value.step == 3
