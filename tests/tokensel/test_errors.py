"""tokensel.errors: one base class, one family for bad arguments, and each error also the built-in exception a
caller would catch."""

import inspect

import pytest

from tokensel import errors


def test_every_error_is_a_tokensel_error_and_a_builtin():
    classes = {c for _, c in inspect.getmembers(errors, inspect.isclass) if c.__module__ == errors.__name__}
    assert len(classes) == 10, sorted(c.__name__ for c in classes)
    builtins = (ValueError, TypeError, KeyError, FileNotFoundError, RuntimeError, ArithmeticError, OSError)
    for cls in classes - {errors.TokenselError}:
        assert issubclass(cls, errors.TokenselError) and issubclass(cls, builtins), cls


def test_one_family_for_bad_arguments():
    """A bad value is a ValueError, a wrong type also a TypeError; the family's older names are one class."""
    assert issubclass(errors.InvalidArgumentError, ValueError)
    assert not issubclass(errors.InvalidArgumentError, TypeError)
    assert issubclass(errors.ArgumentTypeError, TypeError)
    assert issubclass(errors.ArgumentTypeError, errors.InvalidArgumentError)
    assert errors.InvalidBatchError is errors.InvalidParameterError is errors.InvalidArgumentError
    assert issubclass(errors.InfeasibleSVMError, errors.InvalidArgumentError)
    assert not issubclass(errors.SolverError, errors.InvalidArgumentError)


def test_divergence_error_carries_its_step():
    with pytest.raises(ArithmeticError) as exc:
        raise errors.DivergenceError("diverged at step 3", step=3)
    assert exc.value.step == 3
