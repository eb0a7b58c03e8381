"""The exact identities proved with sympy: every derivation simplifies to 0, also on another small case, and a
planted error does not."""

import pytest

from tokensel.analysis import symbolic
from tokensel_book.claims import residual


@pytest.mark.parametrize("label", sorted(symbolic.DERIVATIONS))
def test_each_derivation_simplifies_to_zero(label):
    assert residual(symbolic.DERIVATIONS[label]()) == "0"


def test_the_closed_forms_hold_on_another_small_case(monkeypatch):
    monkeypatch.setattr(symbolic, "SEQUENCES", ((2, 2), (0, 1, 2, 1)))
    for derivation in (symbolic.gradient, symbolic.one_step, symbolic.one_step_multiclass):
        assert residual(derivation()) == "0"


def test_a_derivative_off_by_a_factor_of_two_is_not_proved(monkeypatch):
    exact = symbolic._grad
    monkeypatch.setattr(symbolic, "_grad", lambda loss, M: exact(loss, M) / 2)
    assert residual(symbolic.one_step()) != "0"
    assert residual(symbolic.one_step_multiclass()) != "0"
