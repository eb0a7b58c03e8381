"""A chapter's record, however it is edited, is refused unless it is the original, or (resealed by someone who
recomputes the unkeyed seal) every claim in it truly holds by its own numbers: verify never counts a false claim."""

import copy
import json
import math

import pytest
import sympy
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tokensel_book as tb
from tokensel_book.claims import claims_table, record_problems, seal

TABLE = """---
claims:
  abs: {claim: a, tests: lem-a, threshold: x}
  rel: {claim: b, tests: lem-a, threshold: x}
  le: {claim: c, tests: lem-a, threshold: x}
  ge: {claim: d, tests: lem-a, threshold: x}
  truth: {claim: e, tests: lem-a, threshold: x}
  proof: {claim: f, tests: lem-a, threshold: x}
---
"""


@pytest.fixture(scope="module")
def original(tmp_path_factory):
    root = tmp_path_factory.mktemp("fuzz")
    (root / "_config.yml").write_text("title: t\n")
    (root / "_toc.yml").write_text("root: book/ch\n")
    (root / "book").mkdir()
    (root / "book" / "ch.md").write_text(TABLE)
    mp = pytest.MonkeyPatch()
    mp.chdir(root)
    tb.start_chapter("ch")
    tb.check("abs", 1.0005, close_to=1.0, tol=1e-3)
    tb.check("rel", 101.0, close_to=100.0, rel_tol=0.02)
    tb.check("le", 0.1, at_most=0.2)
    tb.check("ge", 3, at_least=2)
    tb.check("truth", True)
    x = sympy.Symbol("x")
    tb.prove("proof", (x + 1) ** 2 - x**2 - 2 * x - 1)
    record = tb.end_chapter()
    mp.undo()
    return json.loads(json.dumps(record)), claims_table(root / "book" / "ch.md")


def truly_holds(record) -> bool:
    """Every claim holds by its own numbers, judged here in plain arithmetic with strict JSON types."""

    def num(x):
        return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)

    for c in record["checks"]:
        m, e, t, kind = c.get("measured"), c.get("expected"), c.get("tol"), c.get("kind")
        if c.get("passed") is not True:
            return False
        if kind == "true":
            ok = m is True
        elif kind == "proof":
            ok = m == "0" and e is None and t is None
        elif kind in ("abs", "rel"):
            ok = num(m) and num(e) and num(t) and t >= 0 and abs(m - e) <= t * (abs(e) if kind == "rel" else 1)
        elif kind in ("le", "ge"):
            ok = num(m) and num(e) and (m <= e if kind == "le" else m >= e)
        else:
            ok = False
        if not ok:
            return False
    return True


VALUES = st.one_of(
    st.none(), st.booleans(), st.integers(-10, 10**20), st.floats(allow_nan=True), st.text(max_size=5),
    st.lists(st.integers(), max_size=2),
)  # fmt: skip


@settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
@given(claim=st.integers(0, 5), field=st.sampled_from(["measured", "expected", "tol", "kind", "passed", "id"]),
       value=VALUES, resealed=st.booleans())  # fmt: skip
def test_an_edited_record_is_refused_or_truly_holds(original, claim, field, value, resealed):
    record, table = original
    edited = copy.deepcopy(record)
    edited["checks"][claim][field] = value
    if resealed:
        edited["seal"] = seal(edited)
    if record_problems(edited, table) == []:
        assert edited == record or (resealed and truly_holds(edited)), edited["checks"][claim]


def test_the_original_is_valid_and_its_claims_hold(original):
    record, table = original
    assert record_problems(record, table) == [] and truly_holds(record)
