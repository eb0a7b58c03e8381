"""The check helper: a false claim raises, every claim is recorded, and a recorded failure fails the
verification of a build however the exception was handled."""

import json
import multiprocessing
import subprocess
import sys

import numpy as np
import pytest
import torch

import tokensel as ts
from tokensel.errors import ArgumentTypeError, ClaimFailedError, InvalidArgumentError


def _records(d, chapter):
    return [json.loads(p.read_text()) for p in sorted(d.glob(f"{chapter}@*.json"))]


def test_checks_record_and_fail(tmp_path, monkeypatch):
    monkeypatch.setenv("TOKENSEL_RESULTS_DIR", str(tmp_path))
    ts.start_chapter("demo")
    ts.check("abs", 1.0005, 1.0, tol=1e-3)
    ts.check("rel", 101.0, 100.0, tol=0.02, kind="rel")
    ts.check("le", 0.1, 0.2, kind="le")
    ts.check("ge", 3, 2, kind="ge")
    ts.check("truth", True, kind="true")
    ts.check("numpy truth", np.bool_(True), kind="true")
    ts.check("tensor", torch.tensor(1.0), 1.0, tol=0.0)
    with pytest.raises(ClaimFailedError, match="claim failed in chapter 'demo'.*wrong"):
        ts.check("wrong", 2.0, 1.0, tol=0.5)
    with pytest.raises(ClaimFailedError):
        ts.check("nan", float("nan"), 1.0, tol=10.0)
    [rec] = _records(tmp_path, "demo")
    assert [c["passed"] for c in rec["checks"]] == [True] * 7 + [False, False]
    with pytest.raises(ClaimFailedError, match="2 of 9 claims failed"):
        ts.end_chapter()
    assert ts.checks.load_results(tmp_path)[0]["seconds"] >= 0


@pytest.mark.parametrize("measured", [float("nan"), "False", "True", [False], [True], 1, 0.0, None,
                                      np.array([True, True]), torch.tensor([True])],
                         ids=["nan", "str False", "str True", "list False", "list True", "int 1", "float 0",
                              "None", "bool array", "1-element tensor"])
def test_truth_claims_need_a_real_boolean(tmp_path, monkeypatch, measured):
    monkeypatch.setenv("TOKENSEL_RESULTS_DIR", str(tmp_path))
    ts.start_chapter("truth")
    with pytest.raises(ClaimFailedError, match="needs a boolean|single number"):
        ts.check("is it", measured, kind="true")
    [rec] = _records(tmp_path, "truth")
    assert rec["checks"][0]["passed"] is False and rec["checks"][0]["reason"]


@pytest.mark.parametrize("measured", [float("inf"), -float("inf"), "1.0", None, [1.0], True])
def test_numeric_claims_refuse_non_numbers(tmp_path, monkeypatch, measured):
    monkeypatch.setenv("TOKENSEL_RESULTS_DIR", str(tmp_path))
    ts.start_chapter("numbers")
    with pytest.raises(ClaimFailedError):
        ts.check("x", measured, 1.0, tol=1e9)
    assert not _records(tmp_path, "numbers")[0]["checks"][0]["passed"]


@pytest.mark.parametrize("kwargs, error, message", [
    (dict(kind="approx"), InvalidArgumentError, "kind must be"),
    (dict(kind="abs"), InvalidArgumentError, "tolerance"),
    (dict(kind="abs", tol=float("nan")), InvalidArgumentError, "tolerance"),
    (dict(kind="abs", tol=-1.0), InvalidArgumentError, "tolerance"),
    (dict(kind="le", tol=None, expected=None), InvalidArgumentError, "expected value"),
    (dict(kind="le", expected=float("nan")), InvalidArgumentError, "expected must be finite"),
    (dict(kind="le", expected="1"), ArgumentTypeError, "expected must be a real number"),
    (dict(kind="le", tol=0.1), InvalidArgumentError, "takes no tolerance"),
    (dict(kind="true", expected=True), InvalidArgumentError, "takes no expected value"),
])
def test_check_bad_arguments(kwargs, error, message):
    args = dict(name="x", measured=1.0, expected=1.0, tol=None)
    args.update(kwargs)
    with pytest.raises(error, match=message):
        ts.check(**args)


def test_report_requires_every_chapter_from_this_build(tmp_path, monkeypatch):
    monkeypatch.setenv("TOKENSEL_RESULTS_DIR", str(tmp_path))
    ts.start_chapter("old")
    ts.end_chapter()
    ts.checks.mark_build_start()
    with pytest.raises(ClaimFailedError, match="old: no record"):
        ts.checks.report(["old"])
    ts.start_chapter("a")
    ts.check("x", 1.0, 1.0, tol=0.0)
    with pytest.raises(ClaimFailedError, match="a: started but did not finish"):
        ts.checks.report(["a"])
    ts.end_chapter()
    claims, chapters = ts.checks.report(["a"])
    assert claims["name"].tolist() == ["x"] and chapters["claims"].tolist() == [1]


@pytest.mark.slow
def test_a_caught_failure_still_fails_verification(tmp_path, monkeypatch):
    """A claim that failed inside try/except (or a cell tagged raises-exception) is on record: the
    status page and the build's verification both refuse it, naming the claim."""
    monkeypatch.setenv("TOKENSEL_RESULTS_DIR", str(tmp_path))
    ts.checks.mark_build_start()
    ts.start_chapter("sly")
    try:
        ts.check("a hidden false claim", 1.0, 2.0, tol=0.1)
    except ClaimFailedError:
        pass
    with pytest.raises(ClaimFailedError):
        ts.end_chapter()
    with pytest.raises(ClaimFailedError, match="a hidden false claim"):
        ts.checks.verify(tmp_path, expected=["sly"])
    with pytest.raises(ClaimFailedError, match="a hidden false claim"):
        ts.checks.report(["sly"])
    out = subprocess.run([sys.executable, "-m", "tokensel", "verify", str(tmp_path)],
                         capture_output=True, text=True)
    assert out.returncode == 1 and "a hidden false claim" in out.stderr


def test_verify_names_unfinished_and_missing_chapters(tmp_path, monkeypatch):
    monkeypatch.setenv("TOKENSEL_RESULTS_DIR", str(tmp_path))
    ts.checks.mark_build_start()
    ts.start_chapter("half")
    ts.check("fine", 1.0, 1.0, tol=0.0)
    with pytest.raises(ClaimFailedError, match="(?s)gone: no record.*half: started but did not finish"):
        ts.checks.verify(tmp_path, expected=["half", "gone"])
    ts.end_chapter()
    assert ts.checks.verify(tmp_path, expected=["half"]) == (1, 1)


def _run_chapter(args):
    directory, k = args
    import os

    os.environ["TOKENSEL_RESULTS_DIR"] = directory
    for i in range(30):
        ts.check(f"claim {k}.{i}", float(i), float(i), tol=0.0) if i else ts.start_chapter("shared")
    ts.end_chapter()
    return k


@pytest.mark.slow
def test_two_processes_recording_the_same_chapter_lose_nothing(tmp_path):
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(2) as pool:
        assert sorted(pool.map(_run_chapter, [(str(tmp_path), 0), (str(tmp_path), 1)])) == [0, 1]
    recs = _records(tmp_path, "shared")
    names = {c["name"] for r in recs for c in r["checks"]}
    # each process's record is complete (a later start replaces only finished records)
    assert {f"claim {k}.{i}" for k in (0, 1) for i in range(1, 30)} <= names or len(recs) == 1
    assert all("finished" in r and len(r["checks"]) == 29 for r in recs)
    assert not list(tmp_path.glob("*.tmp")) and not list(tmp_path.glob(".*.tmp"))


def test_a_crashed_run_is_replaced_by_the_next(tmp_path, monkeypatch):
    monkeypatch.setenv("TOKENSEL_RESULTS_DIR", str(tmp_path))
    dead = {"schema": 2, "chapter": "c", "run": "dead", "pid": 2**22 + 12345,
            "host": __import__("socket").gethostname(), "started": 1.0, "checks": []}
    (tmp_path / "c@dead.json").write_text(json.dumps(ts.checks._sealed(dead)))
    ts.start_chapter("c")
    ts.end_chapter()
    assert [r["run"] for r in _records(tmp_path, "c")] != ["dead"] and len(_records(tmp_path, "c")) == 1


def test_a_chapter_restarted_in_the_same_process_replaces_its_unfinished_record(tmp_path, monkeypatch):
    monkeypatch.setenv("TOKENSEL_RESULTS_DIR", str(tmp_path))
    ts.checks.mark_build_start()
    ts.start_chapter("again")  # interrupted: never finished
    ts.check("x", 1.0, 1.0, tol=0.0)
    ts.start_chapter("again")
    ts.end_chapter()
    assert len(_records(tmp_path, "again")) == 1
    assert ts.checks.verify(tmp_path, expected=["again"]) == (0, 1)


def test_toc_chapters(tmp_path):
    (tmp_path / "_toc.yml").write_text("format: jb-book\nroot: book/intro\nchapters:\n"
                                      "  - file: book/01_model\n    sections:\n      - file: book/01a\n"
                                      "  - file: book/status\n")
    assert ts.checks.toc_chapters(tmp_path) == ["intro", "01_model", "01a", "status"]


def test_report_mode_shows_a_failure_runs_on_and_fails_at_the_end(tmp_path, monkeypatch):
    """TOKENSEL_CLAIMS=report (make lab): a reader who breaks a lemma sees it break, and the rest runs."""
    monkeypatch.setenv("TOKENSEL_RESULTS_DIR", str(tmp_path))
    monkeypatch.setenv("TOKENSEL_CLAIMS", "report")
    ts.start_chapter("demo")
    with pytest.warns(ts.checks.ClaimFailedWarning, match=r"\[FAILED\] broken: 2, required within 0.1 of 1"):
        assert ts.check("broken", 2.0, 1.0, tol=0.1) == 2.0
    ts.check("fine", 1.0, 1.0, tol=0.1)  # the notebook runs on
    rec = _records(tmp_path, "demo")[0]
    assert [c["passed"] for c in rec["checks"]] == [False, True]
    with pytest.raises(ClaimFailedError, match="1 of 2 claims failed: \\['broken'\\]"):
        ts.end_chapter()
    with pytest.raises(ClaimFailedError, match="broken"):
        ts.checks.verify(tmp_path, expected=["demo"])


def test_claims_table_shows_each_relation():
    import pandas as pd

    claims = pd.DataFrame([dict(chapter="a", name="x", measured=0.1234567891, expected=0.1, tol=0.05, kind="rel",
                                passed=True),
                           dict(chapter="a", name="y", measured=True, expected=None, tol=None, kind="true",
                                passed=False)])
    t = ts.checks.claims_table(claims)
    assert t.loc[0, "measured"] == "0.123457" and t.loc[0, "claim"] == "= expected ± tol·|expected|"
    assert t.loc[1, "expected"] == "" and t.loc[1, "status"] == "FAILED" and t.loc[1, "claim"] == "holds"
    assert t.loc[0, "status"] == "holds"
    marked = claims.assign(deviation=[True, False])
    assert ts.checks.claims_table(marked).loc[0, "status"] == "deviation"
    assert list(ts.checks.claims_table(marked, deviations=True).name) == ["x"]
    assert list(ts.checks.claims_table(marked, deviations=False).name) == ["y"]
    assert list(t.threshold) == ["with a run in view"] * 2
    pre = ts.checks.claims_table(claims.assign(preregistered=[True, False]))
    assert list(pre.threshold) == ["before the first run", "with a run in view"]
    assert ts.checks.claims_table(claims, links=True).loc[0, "chapter"] == '<a href="a.html">a</a>'
    with pytest.raises(TypeError, match="links"):
        ts.checks.claims_table(claims, links="yes")


def test_a_preregistered_threshold_is_recorded(tmp_path):
    ts.start_chapter("pre")
    ts.check("fixed in advance", 0.5, 0.9, kind="le", preregistered=True)
    ts.check("set later", 0.5, 0.9, kind="le")
    with pytest.raises(TypeError, match="preregistered"):
        ts.check("x", 1.0, 1.0, tol=0.1, preregistered=1)
    recs = ts.checks.load_results(tmp_path / "checks")[0]["checks"]
    assert [c.get("preregistered") for c in recs] == [True, None, None]
    assert recs[2]["malformed"] and not recs[2]["passed"]  # the malformed claim is on record, as failed
    with pytest.raises(ClaimFailedError, match="1 of 3 claims failed"):
        ts.end_chapter()


def test_a_deviation_is_recorded_as_such_and_still_a_tripwire(tmp_path, capsys):
    ts.start_chapter("dev")
    ts.check("values NOT monotone here (observed)", 0.5, 0.9, kind="le", deviation=True)
    assert "[deviation] values NOT monotone" in capsys.readouterr().out
    with pytest.raises(ts.ClaimFailedError):  # the paper's behaviour came back: the text must change
        ts.check("values NOT monotone elsewhere (observed)", 0.95, 0.9, kind="le", deviation=True)
    with pytest.raises(TypeError, match="deviation"):
        ts.check("x", 1.0, 1.0, tol=0.1, deviation="yes")
    recs = ts.checks.load_results(tmp_path / "checks")[0]["checks"]
    assert [c.get("deviation") for c in recs] == [True, True, None] and recs[2]["malformed"]


def test_build_info_names_the_commit_and_the_time(tmp_path):
    import re

    info = ts.checks.build_info()
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d UTC", info["built"])
    assert info["commit"] == "unknown" or re.match(r"[0-9a-f]{12}", info["commit"])
    assert ts.checks.build_info(tmp_path)["commit"] == "unknown"  # not a git checkout


def test_paper_claims_table_maps_claims_to_checks():
    import pandas as pd

    claims = pd.DataFrame([dict(chapter="a", name="x: one", passed=True, deviation=False),
                           dict(chapter="a", name="x: two", passed=True, deviation=True),
                           dict(chapter="b", name="y: one", passed=False, deviation=False)])
    t = ts.checks.paper_claims_table(claims, {"X": ("chapter a", [("a", "x:")]), "Y": ("b", [("b", "y:")]),
                                              "Z": ("c", [("c", "z:")])}).set_index("the paper's claim")
    assert t.loc["X", "checks"] == 2 and t.loc["X", "status"] == "holds in part (1 of 2 checks record deviations)"
    assert t.loc["Y", "status"] == "FAILED" and t.loc["Z", "status"] == "not checked"
    only = ts.checks.paper_claims_table(claims, {"X2": ("a", [("a", "x: two")])})
    assert only.loc[0, "status"] == "deviates"
    with pytest.raises(ValueError, match="claim_map"):
        ts.checks.paper_claims_table(claims, {"X": ("a", [])})
