"""tokensel_book.wording: what a check line says, in words a reader reads."""

import pytest

from tokensel.errors import InvalidArgumentError
from tokensel_book.wording import THRESHOLD_ORIGIN, claim_line, percent, requirement


def test_conditions_in_words():
    assert requirement("rel", 0.5, 0.3) == "within 30 % of 0.5"
    assert requirement("rel", 2.0, 0.005) == "within 0.5 % of 2"
    assert requirement("abs", -0.5, 0.1) == "within 0.1 of -0.5"
    assert requirement("abs", 0.0, 0.0) == "exactly 0"
    assert requirement("le", 3.0) == "at most 3"
    assert requirement("ge", 0.99) == "at least 0.99"
    assert requirement("true") == "" and percent(0.3) == "30 %"
    with pytest.raises(InvalidArgumentError, match="kind"):
        requirement("about", 1.0, 0.1)


def test_a_line_that_holds_says_what_was_required_and_never_true_holds():
    line = claim_line("err at d = 16384", 0.0117035, 0.00955585, 0.3, "rel", True)
    assert line == "[ok] err at d = 16384: 0.0117035, required within 30 % of 0.00955585 (off by 22 %)"
    assert claim_line("corr", 0.998958, 0.99, None, "ge", True) == "[ok] corr: 0.998958, required at least 0.99"
    truth = claim_line("every strong token has the sign of alpha", True, None, None, "true", True)
    assert truth == "[ok] every strong token has the sign of alpha: yes"
    for said in (line, truth):
        assert "True holds" not in said and "(relative)" not in said and "±" not in said
    dev = claim_line("values not monotone", 0.4, 0.5, None, "le", True, deviation=True)
    assert dev.startswith("[deviation] values not monotone: 0.4, required at most 0.5") and "departure" in dev


def test_a_failed_line_names_the_statement_and_the_origin_of_its_threshold():
    line = claim_line("rate", 1.5, 1.0, 0.05, "rel", False, statement="Lemma 3.1 (divergence)", preregistered=True)
    head, tested, origin = line.splitlines()
    assert head == "[FAILED] rate: 1.5, required within 5 % of 1 (off by 50 %)"
    assert tested.strip() == "what is tested: Lemma 3.1 (divergence)"
    assert origin.strip() == "where the threshold comes from: " + THRESHOLD_ORIGIN[True]
    plain = claim_line("flag", False, None, None, "true", False, threshold="the paper's Figure 2")
    assert plain.splitlines()[0] == "[FAILED] flag: no, required yes"
    assert plain.splitlines()[1].strip() == "what is tested: flag" and "Figure 2" in plain.splitlines()[2]
    assert "not finite" in claim_line("x", float("nan"), 1.0, 0.1, "abs", False, reason="not finite")
    with pytest.raises(InvalidArgumentError, match="name"):
        claim_line("", 1.0, 1.0, 0.1, "abs", True)
    with pytest.raises(InvalidArgumentError, match="kind"):
        claim_line("x", 1.0, 1.0, 0.1, "approx", True)
