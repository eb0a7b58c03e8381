"""tokensel_book.claims: the claims table, one-line checks, the record a run shows, and what it depended on."""

import json
import sys

import numpy as np
import pytest
import torch
from conftest import write_book

import tokensel_book as tb
from tokensel.errors import InvalidArgumentError
from tokensel_book.claims import MIME, ClaimFailedError, claims_table, dependency_changes, record_problems, seal

TABLE = """---
claims:
  lead:
    claim: "min value lead after the step"
    tests: prop-mass-bound
    threshold: "the proposition's assumption"
  err:
    claim: "err at d = {d} ({n} seeds)"
    tests: lem-rate
    threshold: "3 % at the largest width"
    preregistered: true
  flat:
    claim: "values NOT monotone"
    tests: obs-shape
    threshold: "a rank correlation of 0.9"
    deviation: true
  truth:
    claim: "every sign right"
    tests: lem-rate
    threshold: "exact"
---
# A chapter
"""


@pytest.fixture
def book(tmp_path, monkeypatch):
    """A book folder with one chapter whose table is TABLE, as the working directory."""
    write_book(tmp_path, "ch", TABLE)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_a_claim_is_one_call_and_its_line_says_what_was_claimed(book, capsys):
    tb.start_chapter("ch")
    assert tb.check("lead", torch.tensor(0.41), at_least=0.0) == torch.tensor(0.41)
    tb.check("err", np.float64(0.021), at_most=0.03, d=4096, n=5)
    tb.check("flat", 0.42, at_most=0.9)
    tb.check("truth", np.bool_(True))
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "[ok] min value lead after the step: 0.41, required at least 0 (tests prop-mass-bound)"
    assert out[1] == "[ok] err at d = 4096 (5 seeds): 0.021, required at most 0.03 (tests lem-rate)"
    assert out[2] == "[deviation] values NOT monotone: 0.42, at most 0.9 as observed: a departure from the paper" + (
        " (tests obs-shape)"
    )
    assert out[3] == "[ok] every sign right: yes (tests lem-rate)"
    record = tb.end_chapter()
    assert [c["id"] for c in record["checks"]] == ["lead", "err", "flat", "truth"]
    assert record["checks"][1]["preregistered"] and record_problems(record, claims_table(book / "book" / "ch.md")) == []


def test_each_comparison_holds_or_fails_by_its_numbers(book):
    tb.start_chapter("ch")
    for kwargs in (dict(close_to=1.0, tol=0.1), dict(close_to=1.0, rel_tol=0.06), dict(at_most=1.1)):
        tb.check("lead", 1.05, **kwargs)
    for kwargs in (dict(close_to=1.0, tol=0.01), dict(close_to=1.0, rel_tol=0.04), dict(at_least=1.1)):
        with pytest.raises(ClaimFailedError, match="what is tested: .*\n.*where the threshold comes from"):
            tb.check("lead", 1.05, **kwargs)


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: tb.check("nope", 1.0, at_least=0), "not in the claims table"),
        (lambda: tb.check("err", 1.0, at_most=2), "needs the field"),
        (lambda: tb.check("lead", 1.0, at_least=0, at_most=2), "one of at_least"),
        (lambda: tb.check("lead", 1.0, close_to=1.0), "exactly one of tol"),
        (lambda: tb.check("lead", 1.0, close_to=1.0, rel_tol=10**400), "a float can hold"),
        (lambda: tb.check("lead", 1.0, close_to=float("nan"), tol=1), "must be finite"),
        (lambda: tb.check("lead", 1.0, close_to=1.0, tol=-1), ">= 0"),
        (lambda: tb.check("lead", 1.0, at_least="0"), "real number"),
        (lambda: tb.check("lead", 1.0, tol=1), "go with close_to"),
    ],
)
def test_a_malformed_claim_is_a_clear_error_naming_what_to_fix(book, call, match):
    tb.start_chapter("ch")
    pytest.raises(InvalidArgumentError, lambda: call()).match(match)


def test_a_claim_outside_the_range_of_its_bound_is_shown_not_checked_and_the_book_refuses_it(book, capsys):
    old = 'threshold: "the proposition\'s assumption"'
    text = (book / "book" / "ch.md").read_text().replace(old, old + '\n    range: "eta0 <= 300"')
    (book / "book" / "ch.md").write_text(text)
    tb.start_chapter("ch")
    tb.check("lead", -5.0, at_least=0.0, within=False)  # a reader's eta0 = 2000: no error
    line = capsys.readouterr().out.strip()
    outside = "[outside its range] min value lead after the step: -5; the bound (at least 0) is stated for eta0 <= 300"
    assert line == outside + " (tests prop-mass-bound)"
    for cid in ("err", "flat", "truth"):
        tb.check(cid, True) if cid == "truth" else tb.check(cid, 0.0, at_most=1.0, d=1, n=1)
    record = tb.end_chapter()
    assert "outside the range" in record_problems(record, claims_table(book / "book" / "ch.md"))[0]


def test_a_failed_deviation_says_the_text_must_change(book):
    tb.start_chapter("ch")
    with pytest.raises(ClaimFailedError, match="departure from the paper no longer holds"):
        tb.check("flat", 0.95, at_most=0.9)


def test_a_measurement_that_is_not_a_finite_number_fails_and_a_truth_needs_a_boolean(book):
    tb.start_chapter("ch")
    for bad in (float("nan"), float("inf"), "0.5", [1.0]):
        pytest.raises(ClaimFailedError, tb.check, "lead", bad, at_least=0.0)
    pytest.raises(ClaimFailedError, lambda: tb.check("truth", "True")).match("required yes")


@pytest.mark.parametrize("name", ["a\x00b", "", "../x", "a b", 7])
def test_a_chapter_needs_a_plain_name(book, name):
    pytest.raises(InvalidArgumentError, lambda: tb.start_chapter(name)).match("page's name")


def test_claims_before_a_chapter_and_a_mistyped_mode_are_refused(book, monkeypatch):
    tb.claims._run.clear()
    pytest.raises(InvalidArgumentError, lambda: tb.check("lead", 1.0, at_least=0)).match("start_chapter")
    pytest.raises(InvalidArgumentError, lambda: tb.end_chapter()).match("start_chapter")
    monkeypatch.setenv("TOKENSEL_CLAIMS", "reprot")
    pytest.raises(InvalidArgumentError, lambda: tb.start_chapter("ch")).match("TOKENSEL_CLAIMS must be")


def test_in_report_mode_a_failed_claim_warns_and_end_chapter_raises(book, monkeypatch):
    monkeypatch.setenv("TOKENSEL_CLAIMS", "report")
    tb.start_chapter("ch")
    with pytest.warns(UserWarning, match="claim failed"):
        tb.check("lead", -1.0, at_least=0.0)
    pytest.raises(ClaimFailedError, lambda: tb.end_chapter()).match("1 failed")


def test_outside_a_book_a_claim_is_named_by_its_id(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    tb.start_chapter("ch")
    tb.check("anything", 2.0, close_to=2.0, tol=0.0)
    assert capsys.readouterr().out.startswith("[ok] anything: 2, required exactly 2")


@pytest.mark.parametrize(
    ("table", "match"),
    [
        ("claims: [a]", "map claim ids"),
        ("claims:\n  Bad_Id:\n    claim: x", "lower-case"),
        ("claims:\n  a:\n    threshold: x", "needs `claim"),
        ("claims:\n  a:\n    claim: x\n    bound: 3", "unknown fields"),
        ("claims:\n  a:\n    claim: x\n    deviation: 'yes'", "true or false"),
        ("claims:\n  a:\n    claim: x\n    threshold: y", "needs `tests:`"),
        ("claims:\n  a:\n    claim: x\n    tests: lem-a", "needs `threshold:`"),
        ("claims:\n  a:\n    claim: x\n    tests: 'not a label'\n    threshold: y", "statement's label"),
        ("claims:\n  a: &x\n    claim: x\n  b: *x", "aliases are not allowed"),
    ],
)
def test_a_malformed_table_is_refused(tmp_path, table, match):
    path = tmp_path / "ch.md"
    path.write_text(f"---\n{table}\n---\n")
    pytest.raises(InvalidArgumentError, lambda: claims_table(path)).match(match)


def _record(book, during=lambda: None):
    tb.start_chapter("ch")
    during()
    for cid in ("lead", "flat"):
        tb.check(cid, 0.5, at_most=0.9)
    tb.check("err", 0.01, at_most=0.03, d=1, n=1)
    tb.check("truth", True)
    seed = 1234  # noqa: F841 - end_chapter reads the chapter's seed from its caller's namespace
    return tb.end_chapter()


def test_the_record_is_sealed_and_every_edit_is_seen(book):
    record = _record(book)
    table = claims_table(book / "book" / "ch.md")
    assert record["seed"] is None  # `seed` above is a local of this function, not a global of the chapter
    assert record_problems(record, table) == []
    edits = {
        "a measured value": lambda r: r["checks"][0].update(measured=0.1),
        "a verdict, resealed": lambda r: (r["checks"][0].update(measured=5.0), r.update(seal=seal(r))),
        "a claim removed, resealed": lambda r: (r["checks"].pop(), r.update(seal=seal(r))),
        "a type, resealed": lambda r: (r["checks"][0].update(passed="true"), r.update(seal=seal(r))),
    }
    found = {}
    for what, edit in edits.items():
        r = json.loads(json.dumps(record))
        edit(r)
        found[what] = record_problems(r, table)
    assert "changed after the run" in found["a measured value"][0]
    verdict = found["a verdict, resealed"]
    assert "claim failed" in " ".join(verdict) or "but its numbers say" in verdict[0]
    assert "never made" in found["a claim removed, resealed"][0]
    assert "wrong type" in found["a type, resealed"][0]


def test_the_record_lists_what_the_run_imported_read_and_was_set_to(book, monkeypatch):
    helper = book / "helper.py"
    helper.write_text("VALUE = 1\n")
    data = book / "data.txt"
    data.write_text("1\n")
    monkeypatch.syspath_prepend(str(book))
    monkeypatch.setenv("NUMBA_OPT", "3")
    monkeypatch.delitem(sys.modules, "helper", raising=False)  # another test's helper module, imported before
    depends = _record(book, lambda: (__import__("helper"), data.read_text()))["depends"]
    sys.modules.pop("helper")
    assert str(helper.resolve()) in depends["files"] and str(data.resolve()) in depends["files"]
    assert dependency_changes(depends) == []
    helper.write_text("VALUE = 2\n")
    data.write_text("2\n")
    monkeypatch.setenv("NUMBA_OPT", "0")
    changes = dependency_changes(depends)
    assert {f"{helper.resolve()} changed", f"{data.resolve()} changed", "$NUMBA_OPT changed"} <= set(changes)
    assert all("3" not in v for k, v in depends["env"].items() if k == "NUMBA_OPT")  # values are kept as digests


def test_in_ipython_the_record_is_an_output_of_the_notebook(book):
    from IPython.core.interactiveshell import InteractiveShell
    from IPython.utils.capture import capture_output

    shell = InteractiveShell.instance()
    with capture_output() as shown:
        shell.run_cell("import tokensel_book as tb\nseed = 7\ntb.start_chapter('ch')", store_history=False)
        shell.run_cell(
            "tb.check('lead', 1, at_least=0); tb.check('err', 0.0, at_most=1, d=1, n=1)\n"
            "tb.check('flat', 0, at_most=1); tb.check('truth', True)",
            store_history=False,
        )
        shell.run_cell("tb.end_chapter();", store_history=False)
    [out] = [o for o in shown.outputs if MIME in (o.metadata or {})]
    assert out.metadata[MIME]["seed"] == 7 and out.data["text/plain"].startswith("ch: 4 claims checked, all hold")
    assert list(out.data) == ["text/plain"]  # the record is kept with the output, not shown


# ---- proofs: an exact identity proved with sympy is a claim of kind "proof" ----------------------------------

PROOFS = """---
claims:
  square:
    claim: "(x + y)^2 expanded"
    tests: eq-square
    threshold: "an identity: proved symbolically"
---
"""


@pytest.fixture
def proofs(book):
    (book / "book" / "ch.md").write_text(PROOFS)
    return book


def test_a_proof_holds_when_its_difference_simplifies_to_zero(proofs, capsys):
    import sympy as sp

    x, y = sp.symbols("x y")
    tb.start_chapter("ch")
    difference = sp.Matrix([(x + y) ** 2 - x**2 - 2 * x * y - y**2, sp.exp(2 * x) - sp.exp(x) ** 2])
    assert tb.prove("square", difference) is difference
    assert capsys.readouterr().out == "[proved] (x + y)^2 expanded: simplifies to 0 (tests eq-square)\n"
    record = tb.end_chapter()
    assert record["checks"][0]["kind"] == "proof" and record["checks"][0]["measured"] == "0"
    assert record_problems(record, claims_table(proofs / "book" / "ch.md")) == []


def test_a_planted_wrong_identity_fails_and_a_proof_needs_exact_sympy(proofs):
    import sympy as sp

    x, y = sp.symbols("x y")
    tb.start_chapter("ch")
    with pytest.raises(ClaimFailedError, match=r"\[FAILED\] .*: simplifies to x\*y, required 0"):
        tb.prove("square", (x + y) ** 2 - x**2 - x * y - y**2)  # a factor 2 dropped
    for bad in (0, 0.0, sp.Float(0.1) * x, sp.Matrix(0, 1, [])):
        pytest.raises(InvalidArgumentError, tb.prove, "square", bad).match("exact numbers")


def test_a_proof_edited_by_hand_is_refused(proofs):
    import sympy as sp

    x = sp.Symbol("x")
    tb.start_chapter("ch")
    tb.prove("square", x - x)
    record, table = tb.end_chapter(), claims_table(proofs / "book" / "ch.md")
    edits = [dict(passed=False), dict(measured="x"), dict(kind="true"), dict(measured=0.0), dict(expected=0.0, tol=0.0)]
    for what in edits:
        r = json.loads(json.dumps(record))
        r["checks"][0].update(what)
        assert "changed after the run" in record_problems(r, table)[0], what
        r["seal"] = seal(r)
        assert record_problems(r, table), what  # resealed: its own record still refuses it


def test_the_status_table_says_how_each_claim_was_established():
    from tokensel_book.status import FIELDS, table_html

    row = dict.fromkeys(FIELDS) | dict(chapter="ch", id="a", name="a", fresh=[], verdict="not replicated")
    row |= dict(commit="c", passed=True, deviation=False, preregistered=False)
    proof, check = row | dict(kind="proof", measured="0"), row | dict(kind="le", measured=0.5, expected=1.0)
    page = table_html([proof, check])
    assert "<td>simplifies to 0</td><td>proved symbolically</td>" in page
    assert "<td>at most 1</td><td>checked numerically</td>" in page


def test_the_downloadable_claims_round_trip_and_a_damaged_row_is_refused(tmp_path):
    from tokensel_book.status import FIELDS, claims_problems, table_html, write_downloads

    row = dict.fromkeys(FIELDS) | dict(chapter="ch", id="a", name="a", kind="le", measured=0.5, expected=1.0)
    row |= dict(commit="c", passed=True, deviation=False, preregistered=False, tests="lem-a", threshold="the proof")
    row |= dict(k=9, n=10, low=0.6, high=0.98, fresh=[0.4, 0.6, 1.2], verdict="held in most")
    (tmp_path / "_config.yml").write_text("title: t\nurl: https://example.org/book\n")
    data, bib = write_downloads([row], tmp_path / "out", tmp_path)
    loaded = json.loads(data.read_text())
    assert claims_problems(loaded) == [] and table_html(loaded) == table_html([row])
    assert "version = {c}" in bib.read_text() and "url = {https://example.org/book}" in bib.read_text()
    card = table_html([row])
    assert "bound from" in card and "<svg" in card and 'fill="#c22"' in card  # the seed above the bound in red
    assert claims_problems([{k: v for k, v in row.items() if k != "k"}]) and claims_problems([row | {"k": "9"}])
    with pytest.raises(InvalidArgumentError, match="schema"):
        write_downloads([row | {"passed": "yes"}], tmp_path / "bad", tmp_path)
