"""The check helper: a false claim raises, every claim is recorded."""

import json

import pytest

import tokensel as ts
from tokensel.errors import ClaimFailedError


def test_checks_record_and_fail(tmp_path, monkeypatch):
    monkeypatch.setenv("TOKENSEL_RESULTS_DIR", str(tmp_path))
    ts.start_chapter("demo")
    ts.check("abs", 1.0005, 1.0, tol=1e-3)
    ts.check("rel", 101.0, 100.0, tol=0.02, kind="rel")
    ts.check("le", 0.1, 0.2, kind="le")
    ts.check("ge", 3, 2, kind="ge")
    ts.check("truth", True, kind="true")
    with pytest.raises(ClaimFailedError, match="claim failed in chapter 'demo'.*wrong"):
        ts.check("wrong", 2.0, 1.0, tol=0.5)
    with pytest.raises(ClaimFailedError):
        ts.check("nan", float("nan"), 1.0, tol=10.0)
    rec = json.loads((tmp_path / "demo.json").read_text())
    assert [c["passed"] for c in rec["checks"]] == [True] * 5 + [False, False]
    ts.end_chapter()
    assert ts.checks.load_results(tmp_path)[0]["seconds"] >= 0


@pytest.mark.parametrize("kwargs, message", [
    (dict(kind="approx"), "kind must be"),
    (dict(kind="abs"), "tolerance"),
    (dict(kind="le", tol=None, expected=None), "expected value"),
])
def test_check_bad_arguments(kwargs, message):
    args = dict(name="x", measured=1.0, expected=1.0, tol=None)
    args.update(kwargs)
    with pytest.raises(ValueError, match=message):
        ts.check(**args)


def test_report_requires_every_chapter_from_this_build(tmp_path, monkeypatch):
    monkeypatch.setenv("TOKENSEL_RESULTS_DIR", str(tmp_path))
    ts.start_chapter("old")
    ts.end_chapter()
    ts.checks.mark_build_start()
    with pytest.raises(RuntimeError, match="old: no record"):
        ts.checks.report(["old"])
    ts.start_chapter("a")
    ts.check("x", 1.0, 1.0, tol=0.0)
    with pytest.raises(RuntimeError, match="a: started but did not finish"):
        ts.checks.report(["a"])
    ts.end_chapter()
    claims, chapters = ts.checks.report(["a"])
    assert claims["name"].tolist() == ["x"] and chapters["claims"].tolist() == [1]


def test_toc_chapters(tmp_path):
    (tmp_path / "_toc.yml").write_text("format: jb-book\nroot: book/intro\nchapters:\n"
                                      "  - file: book/01_model\n    sections:\n      - file: book/01a\n"
                                      "  - file: book/status\n")
    assert ts.checks.toc_chapters(tmp_path) == ["intro", "01_model", "01a", "status"]
