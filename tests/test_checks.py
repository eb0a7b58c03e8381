"""The check helper: a false claim raises, every claim is recorded, and a recorded failure fails the
verification of a build however the exception was handled."""

import json
import multiprocessing
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import tokensel as ts
import tokensel_book as tb
from tokensel.errors import ArgumentTypeError, InvalidArgumentError
from tokensel_book.checks import ClaimFailedError


def _records(d, chapter):
    return [json.loads(p.read_text()) for p in sorted(d.glob(f"{chapter}@*.json"))]


def test_checks_record_and_fail(tmp_path, monkeypatch):
    monkeypatch.setenv("TOKENSEL_RESULTS_DIR", str(tmp_path))
    tb.start_chapter("demo")
    tb.check("abs", 1.0005, 1.0, tol=1e-3)
    tb.check("rel", 101.0, 100.0, tol=0.02, kind="rel")
    tb.check("le", 0.1, 0.2, kind="le")
    tb.check("ge", 3, 2, kind="ge")
    tb.check("truth", True, kind="true")
    tb.check("numpy truth", np.bool_(True), kind="true")
    tb.check("tensor", torch.tensor(1.0), 1.0, tol=0.0)
    with pytest.raises(ClaimFailedError, match="claim failed in chapter 'demo'.*wrong"):
        tb.check("wrong", 2.0, 1.0, tol=0.5)
    with pytest.raises(ClaimFailedError):
        tb.check("nan", float("nan"), 1.0, tol=10.0)
    [rec] = _records(tmp_path, "demo")
    assert [c["passed"] for c in rec["checks"]] == [True] * 7 + [False, False]
    with pytest.raises(ClaimFailedError, match="2 of 9 claims failed"):
        tb.end_chapter()
    assert tb.records.load_results(tmp_path)[0]["seconds"] >= 0


@pytest.mark.parametrize(
    "measured",
    [float("nan"), "False", "True", [False], [True], 1, 0.0, None, np.array([True, True]), torch.tensor([True])],
    ids=[
        "nan",
        "str False",
        "str True",
        "list False",
        "list True",
        "int 1",
        "float 0",
        "None",
        "bool array",
        "1-element tensor",
    ],
)
def test_truth_claims_need_a_real_boolean(tmp_path, monkeypatch, measured):
    monkeypatch.setenv("TOKENSEL_RESULTS_DIR", str(tmp_path))
    tb.start_chapter("truth")
    with pytest.raises(ClaimFailedError, match="needs a boolean|single number"):
        tb.check("is it", measured, kind="true")
    [rec] = _records(tmp_path, "truth")
    assert rec["checks"][0]["passed"] is False and rec["checks"][0]["reason"]


@pytest.mark.parametrize("measured", [float("inf"), -float("inf"), "1.0", None, [1.0], True])
def test_numeric_claims_refuse_non_numbers(tmp_path, monkeypatch, measured):
    monkeypatch.setenv("TOKENSEL_RESULTS_DIR", str(tmp_path))
    tb.start_chapter("numbers")
    with pytest.raises(ClaimFailedError):
        tb.check("x", measured, 1.0, tol=1e9)
    assert not _records(tmp_path, "numbers")[0]["checks"][0]["passed"]


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        (dict(kind="approx"), InvalidArgumentError, "kind must be"),
        (dict(kind="abs"), InvalidArgumentError, "tolerance"),
        (dict(kind="abs", tol=float("nan")), InvalidArgumentError, "tolerance"),
        (dict(kind="abs", tol=-1.0), InvalidArgumentError, "tolerance"),
        (dict(kind="le", tol=None, expected=None), InvalidArgumentError, "expected value"),
        (dict(kind="le", expected=float("nan")), InvalidArgumentError, "expected must be finite"),
        (dict(kind="le", expected="1"), ArgumentTypeError, "expected must be a real number"),
        (dict(kind="le", tol=0.1), InvalidArgumentError, "takes no tolerance"),
        (dict(kind="true", expected=True), InvalidArgumentError, "takes no expected value"),
    ],
)
def test_check_bad_arguments(kwargs, error, message):
    args = dict(name="x", measured=1.0, expected=1.0, tol=None)
    args.update(kwargs)
    with pytest.raises(error, match=message):
        tb.check(**args)


def test_report_requires_every_chapter_from_this_build(tmp_path, monkeypatch):
    monkeypatch.setenv("TOKENSEL_RESULTS_DIR", str(tmp_path))
    tb.start_chapter("old")
    tb.end_chapter()
    tb.records.mark_build_start()
    with pytest.raises(ClaimFailedError, match="old: no record"):
        tb.status.report(["old"])
    tb.start_chapter("a")
    tb.check("x", 1.0, 1.0, tol=0.0)
    with pytest.raises(ClaimFailedError, match="a: started but did not finish"):
        tb.status.report(["a"])
    tb.end_chapter()
    claims, chapters = tb.status.report(["a"])
    assert claims["name"].tolist() == ["x"] and chapters["claims"].tolist() == [1]


@pytest.mark.slow
def test_a_caught_failure_still_fails_verification(tmp_path, monkeypatch):
    """A claim that failed inside try/except (or a cell tagged raises-exception) is on record: the
    status page and the build's verification both refuse it, naming the claim."""
    monkeypatch.setenv("TOKENSEL_RESULTS_DIR", str(tmp_path))
    tb.records.mark_build_start()
    tb.start_chapter("sly")
    try:
        tb.check("a hidden false claim", 1.0, 2.0, tol=0.1)
    except ClaimFailedError:
        pass
    with pytest.raises(ClaimFailedError):
        tb.end_chapter()
    with pytest.raises(ClaimFailedError, match="a hidden false claim"):
        tb.verification.verify(tmp_path, expected=["sly"])
    with pytest.raises(ClaimFailedError, match="a hidden false claim"):
        tb.status.report(["sly"])
    out = subprocess.run(
        [sys.executable, "-m", "tokensel_book", "verify", str(tmp_path)], capture_output=True, text=True
    )
    assert out.returncode == 1 and "a hidden false claim" in out.stderr


def test_verify_names_unfinished_and_missing_chapters(tmp_path, monkeypatch):
    monkeypatch.setenv("TOKENSEL_RESULTS_DIR", str(tmp_path))
    tb.records.mark_build_start()
    tb.start_chapter("half")
    tb.check("fine", 1.0, 1.0, tol=0.0)
    with pytest.raises(ClaimFailedError, match="(?s)gone: no record.*half: started but did not finish"):
        tb.verification.verify(tmp_path, expected=["half", "gone"])
    tb.end_chapter()
    assert tb.verification.verify(tmp_path, expected=["half"]) == (1, 1)


def _record_runs(directory, chapter, runs, claims, barrier, out):
    """A process recording ``runs`` complete runs of ``chapter`` into ``directory`` (its run ids go to ``out``)."""
    import os

    os.environ["TOKENSEL_RESULTS_DIR"] = directory
    try:
        barrier.wait(timeout=60)
        done = []
        for _ in range(runs):
            tb.start_chapter(chapter)
            for i in range(claims):
                tb.check(f"{chapter} claim {i}", float(i), close_to=float(i), tol=0.0)
            tb.end_chapter()
            done.append(tb.checks._state["run"])
        out.put(("ok", chapter, done))
    except BaseException as exc:  # noqa: BLE001 - reported to the test
        out.put(("error", chapter, repr(exc)))


def _race(directory, chapters, runs=3, claims=15):
    """Processes (one per entry of ``chapters``) recording at once into ``directory``: ``{run id: chapter}``
    of every run they finished. Forked, so no process imports tokensel again (a few seconds in all)."""
    ctx = multiprocessing.get_context("fork")
    barrier, out = ctx.Barrier(len(chapters)), ctx.Queue()
    procs = [ctx.Process(target=_record_runs, args=(str(directory), ch, runs, claims, barrier, out)) for ch in chapters]
    for p in procs:
        p.start()
    results = [out.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(timeout=60)
    assert all(r[0] == "ok" for r in results), results
    return {run: ch for _, ch, done in results for run in done}


def _complete(directory, runs, claims):
    """Every run of ``runs`` ({run id: chapter}) has its record in ``directory``, finished, with every claim."""
    recs = tb.records.load_results(directory)
    assert {r["run"]: r["chapter"] for r in recs} == runs
    for r in recs:
        assert "finished" in r and [c["name"] for c in r["checks"]] == [
            f"{r['chapter']} claim {i}" for i in range(claims)
        ]
    assert not list(directory.glob("*.tmp")) and not list(directory.glob(".*.tmp"))


@pytest.mark.slow
def test_two_processes_recording_the_same_chapter_lose_nothing(tmp_path):
    """Records are per run: a start never removes another run's record, live or finished (each process
    records three runs, so each start follows finished runs of its own and of the other process)."""
    d = tmp_path / "checks"
    tb.records.mark_build_start(d)
    runs = _race(d, ["shared", "shared"])
    assert len(runs) == 6
    _complete(d, runs, 15)
    assert tb.verification.verify(d, expected={"shared": None}) == (90, 1)


@pytest.mark.slow
def test_two_processes_recording_different_chapters_into_one_folder_lose_nothing(tmp_path):
    d = tmp_path / "checks"
    tb.records.mark_build_start(d)
    runs = _race(d, ["a", "b"])
    assert sorted(runs.values()) == ["a"] * 3 + ["b"] * 3
    _complete(d, runs, 15)
    assert tb.verification.verify(d, expected={"a": None, "b": None}) == (90, 2)


def _record_until(directory, stop, out):
    """Record complete runs of chapter "rec" until ``stop`` is set, then one more: ``[(run, started)]``."""
    import os

    os.environ["TOKENSEL_RESULTS_DIR"] = directory
    try:
        done, last = [], False
        while not last:
            last = stop.is_set()
            tb.start_chapter("rec")
            for i in range(10):
                tb.check(f"rec claim {i}", float(i), close_to=float(i), tol=0.0)
            tb.end_chapter()
            done.append((tb.checks._state["run"], tb.checks._state["started"]))
        out.put(("ok", done))
    except BaseException as exc:  # noqa: BLE001 - reported to the test
        out.put(("error", repr(exc)))


def _build_until(directory, carried, stop, out):
    """Start builds and carry a record over into each, again and again, until ``stop`` is set."""
    try:
        n = 0
        while not stop.is_set():
            tb.records.mark_build_start(directory)
            tb.records.carry_over([carried], directory)
            n += 1
        out.put(("ok", n))
    except BaseException as exc:  # noqa: BLE001 - reported to the test
        out.put(("error", repr(exc)))


def _archived(folder, chapter="carried"):
    rec = tb.records._sealed(
        {
            "schema": tb.records.SCHEMA,
            "chapter": chapter,
            "run": "old",
            "pid": 1,
            "host": "elsewhere",
            "started": 100.0,
            "finished": 101.0,
            "seconds": 1.0,
            "checks": [dict(name="kept", measured=1.0, expected=1.0, tol=0.0, kind="abs", passed=True)],
        }
    )
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{chapter}@old.json").write_text(json.dumps(rec))
    return folder / f"{chapter}@old.json"


@pytest.mark.slow
def test_build_starts_and_carry_overs_racing_with_a_recording_process_lose_nothing(tmp_path):
    """One process records runs, another starts builds and carries a record over into each, and this one
    reads the folder all the while: no reader ever fails (a record cleared while it is listed was not
    there), and after the last build start exactly the runs started since count, each complete, with the
    record carried into it."""
    import time

    d, carried = tmp_path / "checks", _archived(tmp_path / "archive")
    tb.records.mark_build_start(d)
    ctx = multiprocessing.get_context("fork")
    stop_rec, stop_build, out_rec, out_build = ctx.Event(), ctx.Event(), ctx.Queue(), ctx.Queue()
    rec = ctx.Process(target=_record_until, args=(str(d), stop_rec, out_rec))
    build = ctx.Process(target=_build_until, args=(str(d), carried, stop_build, out_build))
    rec.start()
    build.start()
    reads, t0 = 0, time.monotonic()
    while time.monotonic() - t0 < 2.0:
        tb.records.load_results(d)  # every record in the folder is valid: none may fail to read
        tb.records.this_build(d)
        tb.verification.problems({"rec": {}, "carried": {}}, d)
        reads += 1
    stop_build.set()
    built = out_build.get(timeout=60)
    build.join(timeout=60)
    tb.records.mark_build_start(d)  # the last build: started while a run may be in progress
    tb.records.carry_over([carried], d)
    stamp = tb.records._stamp(d)
    stop_rec.set()
    recorded = out_rec.get(timeout=60)
    rec.join(timeout=60)
    assert built[0] == "ok" and built[1] > 0 and recorded[0] == "ok", (built, recorded)
    since = {run for run, started in recorded[1] if started >= stamp}
    assert since and reads > 0
    this = tb.records.this_build(d)
    assert {r["run"] for r in this if r["chapter"] == "rec"} == since
    assert all("finished" in r and len(r["checks"]) == 10 for r in this if r["chapter"] == "rec")
    assert [r["run"] for r in this if r["chapter"] == "carried"] == ["old"]
    assert tb.verification.verify(d, expected={"rec": None, "carried": None}) == (10 * len(since) + 1, 2)


def test_a_record_cleared_while_it_is_read_was_not_there(tmp_path, monkeypatch):
    """The window the race above hits by chance, made certain: a record listed, then removed by another
    process's build start before it is opened."""
    p = _one_passing_record(tmp_path)
    real = tb.records.check_regular_file

    def cleared_meanwhile(path, what):
        Path(path).unlink(missing_ok=True)
        return real(path, what)

    monkeypatch.setattr(tb.records, "check_regular_file", cleared_meanwhile)
    assert tb.records.load_results(p.parent) == [] and tb.records.this_build(p.parent) == []
    with pytest.raises(ClaimFailedError, match="t: no record from this build"):
        tb.verification.verify(p.parent, expected={"t": None})


def test_a_record_cleared_and_written_again_while_it_is_read_is_read_again(tmp_path, monkeypatch):
    """The other window of the race above: a record found missing (a build start cleared it) and there again
    a moment later (its run wrote it again) is read again, not refused."""
    p = _one_passing_record(tmp_path)
    data = p.read_bytes()
    real = tb.records.check_regular_file
    looks = []

    def cleared_and_rewritten(path, what):
        if Path(path) != p:  # the build stamp
            return real(path, what)
        looks.append(path)
        if len(looks) == 1:
            Path(path).unlink()
            try:
                return real(path, what)
            finally:
                Path(path).write_bytes(data)
        return real(path, what)

    monkeypatch.setattr(tb.records, "check_regular_file", cleared_and_rewritten)
    assert [r["_file"] for r in tb.records.this_build(p.parent)] == [p.name] and len(looks) == 2


def test_a_crashed_run_is_replaced_by_the_next(tmp_path, monkeypatch):
    monkeypatch.setenv("TOKENSEL_RESULTS_DIR", str(tmp_path))
    dead = {
        "schema": 2,
        "chapter": "c",
        "run": "dead",
        "pid": 2**22 + 12345,
        "host": __import__("socket").gethostname(),
        "started": 1.0,
        "checks": [],
    }
    (tmp_path / "c@dead.json").write_text(json.dumps(tb.records._sealed(dead)))
    tb.start_chapter("c")
    tb.end_chapter()
    assert [r["run"] for r in _records(tmp_path, "c")] != ["dead"] and len(_records(tmp_path, "c")) == 1


def test_a_chapter_restarted_in_the_same_process_replaces_its_unfinished_record(tmp_path, monkeypatch):
    monkeypatch.setenv("TOKENSEL_RESULTS_DIR", str(tmp_path))
    tb.records.mark_build_start()
    tb.start_chapter("again")  # interrupted: never finished
    tb.check("x", 1.0, 1.0, tol=0.0)
    tb.start_chapter("again")
    tb.end_chapter()
    assert len(_records(tmp_path, "again")) == 1
    assert tb.verification.verify(tmp_path, expected=["again"]) == (0, 1)


def test_toc_chapters(tmp_path):
    (tmp_path / "_toc.yml").write_text(
        "format: jb-book\nroot: book/intro\nchapters:\n"
        "  - file: book/01_model\n    sections:\n      - file: book/01a\n"
        "  - file: book/status\n"
    )
    assert tb.toc.toc_chapters(tmp_path) == ["intro", "01_model", "01a", "status"]


def test_report_mode_shows_a_failure_runs_on_and_fails_at_the_end(tmp_path, monkeypatch):
    """TOKENSEL_CLAIMS=report (make lab): a reader who breaks a lemma sees it break, and the rest runs."""
    monkeypatch.setenv("TOKENSEL_RESULTS_DIR", str(tmp_path))
    monkeypatch.setenv("TOKENSEL_CLAIMS", "report")
    tb.start_chapter("demo")
    with pytest.warns(tb.checks.ClaimFailedWarning, match=r"\[FAILED\] broken: 2, required within 0.1 of 1"):
        assert tb.check("broken", 2.0, 1.0, tol=0.1) == 2.0
    tb.check("fine", 1.0, 1.0, tol=0.1)  # the notebook runs on
    rec = _records(tmp_path, "demo")[0]
    assert [c["passed"] for c in rec["checks"]] == [False, True]
    with pytest.raises(ClaimFailedError, match="1 of 2 claims failed: \\['broken'\\]"):
        tb.end_chapter()
    with pytest.raises(ClaimFailedError, match="broken"):
        tb.verification.verify(tmp_path, expected=["demo"])


def test_claims_table_shows_each_relation():
    import pandas as pd

    claims = pd.DataFrame(
        [
            dict(chapter="a", name="x", measured=0.1234567891, expected=0.1, tol=0.05, kind="rel", passed=True),
            dict(chapter="a", name="y", measured=True, expected=None, tol=None, kind="true", passed=False),
        ]
    )
    t = tb.status.claims_table(claims)
    assert t.loc[0, "measured"] == "0.123457" and t.loc[0, "claim"] == "= expected ± tol·|expected|"
    assert t.loc[1, "expected"] == "" and t.loc[1, "status"] == "FAILED" and t.loc[1, "claim"] == "holds"
    assert t.loc[0, "status"] == "holds"
    marked = claims.assign(deviation=[True, False])
    assert tb.status.claims_table(marked).loc[0, "status"] == "deviation"
    assert list(tb.status.claims_table(marked, deviations=True).name) == ["x"]
    assert list(tb.status.claims_table(marked, deviations=False).name) == ["y"]
    assert list(t.threshold) == ["with a run in view"] * 2
    pre = tb.status.claims_table(claims.assign(preregistered=[True, False]))
    assert list(pre.threshold) == ["before the first run", "with a run in view"]
    assert tb.status.claims_table(claims, links=True).loc[0, "chapter"] == '<a href="a.html">a</a>'
    with pytest.raises(TypeError, match="links"):
        tb.status.claims_table(claims, links="yes")


def test_a_preregistered_threshold_is_recorded(tmp_path):
    tb.start_chapter("pre")
    tb.check("fixed in advance", 0.5, 0.9, kind="le", preregistered=True)
    tb.check("set later", 0.5, 0.9, kind="le")
    with pytest.raises(TypeError, match="preregistered"):
        tb.check("x", 1.0, 1.0, tol=0.1, preregistered=1)
    recs = tb.records.load_results(tmp_path / "checks")[0]["checks"]
    assert [c.get("preregistered") for c in recs] == [True, None, None]
    assert recs[2]["malformed"] and not recs[2]["passed"]  # the malformed claim is on record, as failed
    with pytest.raises(ClaimFailedError, match="1 of 3 claims failed"):
        tb.end_chapter()


def test_a_threshold_phrase_is_recorded_shown_and_said_when_the_claim_fails(tmp_path, monkeypatch):
    """``threshold=`` says where a claim's threshold comes from: recorded with the claim, on the status
    page's table, and in a failed claim's message instead of the generic sentence (kept without it)."""
    from tokensel_book.wording import THRESHOLD_ORIGIN

    monkeypatch.setenv("TOKENSEL_RESULTS_DIR", str(tmp_path))
    tb.records.mark_build_start()
    tb.start_chapter("thr")
    lemma = "the 30 % bound of Lemma 2.1 at eta0 = 30"
    tb.check("held", 0.5, at_most=0.9, threshold=lemma)
    tb.check("plain", 0.5, at_most=0.9)
    tb.end_chapter()
    claims, _ = tb.status.report(["thr"])
    assert claims["source"].tolist() == [lemma, ""]
    table = tb.status.claims_table(claims)
    assert table["threshold"].tolist() == [f"with a run in view: {lemma}", "with a run in view"]
    html = tb.status.claims_table(claims.assign(source=["a < b", None]), links=True)
    assert html["threshold"][0] == "with a run in view: a &lt; b"

    tb.start_chapter("thr-failed")
    with pytest.raises(ClaimFailedError) as failed:
        tb.check("broken", 0.95, at_most=0.9, threshold="preregistered before the sweep", preregistered=True)
    assert "where the threshold comes from: preregistered before the sweep" in str(failed.value)
    assert THRESHOLD_ORIGIN[True] not in str(failed.value)
    with pytest.raises(ClaimFailedError) as generic:
        tb.check("broken without a phrase", 0.95, at_most=0.9)
    assert f"where the threshold comes from: {THRESHOLD_ORIGIN[False]}" in str(generic.value)
    recs = tb.records.load_results(tmp_path, chapter="thr-failed")[0]["checks"]
    assert [c.get("threshold") for c in recs] == ["preregistered before the sweep", None]
    with pytest.raises(ClaimFailedError, match="2 of 2 claims failed"):
        tb.end_chapter()
    with pytest.raises(ClaimFailedError, match="thr-failed: claim failed: 'broken'"):
        tb.verification.verify(tmp_path, expected={"thr": None, "thr-failed": None})


@pytest.mark.parametrize("threshold", ["", "   ", "x" * 201, "two\nlines", 3, b"Lemma 2.1", ["Lemma 2.1"]])
def test_a_threshold_that_is_not_a_phrase_is_recorded_as_malformed_and_raises(tmp_path, threshold):
    tb.start_chapter("thr-bad")
    with pytest.raises(InvalidArgumentError, match="threshold must be"):
        tb.check("held otherwise", 0.5, at_most=0.9, threshold=threshold)
    [claim] = tb.records.load_results(tmp_path / "checks")[0]["checks"]
    assert claim["malformed"] and not claim["passed"] and "threshold" in claim["reason"]
    assert "threshold" not in claim  # a value that is not a phrase is not kept as one
    with pytest.raises(ClaimFailedError):
        tb.end_chapter()
    with pytest.raises(ClaimFailedError, match="claim failed: 'held otherwise'"):
        tb.verification.verify(tmp_path / "checks", expected={"thr-bad": None})


def test_a_deviation_is_recorded_as_such_and_still_a_tripwire(tmp_path, capsys):
    tb.start_chapter("dev")
    tb.check("values NOT monotone here (observed)", 0.5, 0.9, kind="le", deviation=True)
    assert "[deviation] values NOT monotone" in capsys.readouterr().out
    with pytest.raises(ClaimFailedError):  # the paper's behaviour came back: the text must change
        tb.check("values NOT monotone elsewhere (observed)", 0.95, 0.9, kind="le", deviation=True)
    with pytest.raises(TypeError, match="deviation"):
        tb.check("x", 1.0, 1.0, tol=0.1, deviation="yes")
    recs = tb.records.load_results(tmp_path / "checks")[0]["checks"]
    assert [c.get("deviation") for c in recs] == [True, True, None] and recs[2]["malformed"]


def test_build_info_names_the_commit_and_the_time(tmp_path):
    import re

    info = tb.status.build_info()
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d UTC", info["built"])
    assert info["commit"] == "unknown" or re.match(r"[0-9a-f]{12}", info["commit"])
    assert tb.status.build_info(tmp_path)["commit"] == "unknown"  # not a git checkout


def test_paper_claims_table_maps_claims_to_checks():
    import pandas as pd

    claims = pd.DataFrame(
        [
            dict(chapter="a", name="x: one", passed=True, deviation=False),
            dict(chapter="a", name="x: two", passed=True, deviation=True),
            dict(chapter="b", name="y: one", passed=False, deviation=False),
        ]
    )
    t = tb.status.paper_claims_table(
        claims, {"X": ("chapter a", [("a", "x:")]), "Y": ("b", [("b", "y:")]), "Z": ("c", [("c", "z:")])}
    ).set_index("the paper's claim")
    assert t.loc["X", "checks"] == 2 and t.loc["X", "status"] == "holds in part (1 of 2 checks record deviations)"
    assert t.loc["Y", "status"] == "FAILED" and t.loc["Z", "status"] == "not checked"
    only = tb.status.paper_claims_table(claims, {"X2": ("a", [("a", "x: two")])})
    assert only.loc[0, "status"] == "deviates"
    with pytest.raises(ValueError, match="claim_map"):
        tb.status.paper_claims_table(claims, {"X": ("a", [])})


# --- issue 24 (1): every call of check is on record before anything can raise ---------------------------------


@pytest.mark.parametrize(
    "args, kwargs, error",
    [
        (("", 1.0, 1.0), dict(tol=0.1), InvalidArgumentError),
        ((None, 1.0, 1.0), dict(tol=0.1), InvalidArgumentError),
        (("x", 1.0, 1.0), dict(kind="approx"), InvalidArgumentError),
        (("x", 1.0, 1.0), dict(tol=float("nan")), InvalidArgumentError),
        (("x", 1.0, 1.0), dict(tol=-1.0), InvalidArgumentError),
        (("x", 1.0, float("nan")), dict(kind="le"), InvalidArgumentError),
        (("x", 1.0, "1"), dict(kind="le"), ArgumentTypeError),
        (("flag given an expected value", False, True), dict(kind="true"), InvalidArgumentError),
        (("x", 1.0, 10**400), dict(tol=0.1), None),  # converted exactly: a false claim, recorded as such
        (("x", 10**400, 1.0), dict(tol=0.1), None),
        (("x", 10**5000, 1.0), dict(tol=0.1), None),  # too large to record exactly: recorded as failed
        (("x", torch.empty((), device="meta"), 1.0), dict(tol=0.1), None),
        (("x", 1.0, 1.0), dict(tol=torch.empty((), device="meta")), InvalidArgumentError),
        (("x", 1.0, 1.0), dict(tol=0.1, deviation="yes"), ArgumentTypeError),
    ],
    ids=[
        "empty name",
        "no name",
        "unknown kind",
        "nan tol",
        "negative tol",
        "nan expected",
        "str expected",
        "true with expected",
        "400-digit expected",
        "400-digit measured",
        "5000-digit measured",
        "meta measured",
        "meta tol",
        "deviation not bool",
    ],
)
def test_a_malformed_or_unconvertible_claim_is_recorded_before_it_raises(tmp_path, args, kwargs, error):
    """Caught by try/except, the claim must still fail verification: it is on record as failed."""
    tb.records.mark_build_start(tmp_path / "checks")
    tb.start_chapter("bad")
    with pytest.raises(error or ClaimFailedError):
        tb.check(*args, **kwargs)
    with pytest.raises(ClaimFailedError, match="1 of 1 claims failed"):
        tb.end_chapter()
    [rec] = _records(tmp_path / "checks", "bad")
    [c] = rec["checks"]
    assert c["passed"] is False and tb.records.record_problems(rec) == []
    assert c.get("reason") or c["measured"] in (10**400, 1.0)  # a well-formed false claim needs no reason
    with pytest.raises(ClaimFailedError, match="claim failed"):
        tb.verification.verify(tmp_path / "checks", expected=["bad"])


def test_a_claim_checked_before_start_chapter_is_recorded_and_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(tb.checks, "_state", {"chapter": None, "checks": []})
    tb.records.mark_build_start(tmp_path / "checks")
    tb.check("too early", 1.0, 1.0, tol=0.0)
    tb.start_chapter("late")
    tb.end_chapter()
    with pytest.raises(ClaimFailedError, match=r"before start_chapter\(\).*too early"):
        tb.verification.verify(tmp_path / "checks", expected=["late"])
    with pytest.raises(InvalidArgumentError, match="plain name"):
        tb.start_chapter(tb.records.NO_CHAPTER)


# --- issue 24 (3): start_chapter never erases a failure ------------------------------------------------------


def test_start_chapter_run_twice_keeps_a_failed_record(tmp_path):
    tb.records.mark_build_start(tmp_path / "checks")
    tb.start_chapter("twice")
    with pytest.raises(ClaimFailedError):
        tb.check("false the first time", 1.0, 2.0, tol=0.1)
    tb.start_chapter("twice")  # a setup cell run again, or a copied start_chapter
    tb.check("fine", 1.0, 1.0, tol=0.0)
    tb.end_chapter()
    assert len(_records(tmp_path / "checks", "twice")) == 2
    with pytest.raises(ClaimFailedError, match="false the first time"):
        tb.verification.verify(tmp_path / "checks", expected=["twice"])


def _page(root, name, cells, toc_extra=""):
    """A one-page book under ``root`` whose page holds ``cells`` (code cell sources)."""
    (root / "_config.yml").write_text("title: t\n")
    (root / "_toc.yml").write_text(f"format: jb-book\nroot: {name}\n{toc_extra}")
    body = "".join(f"\n```{{code-cell}} ipython3\n{c}\n```\n" for c in cells)
    (root / f"{name}.md").write_text(
        "---\njupytext:\n  text_representation:\n    format_name: myst\n"
        "kernelspec:\n  name: python3\n  display_name: Python 3\n---\n# Page\n" + body
    )


def test_a_chapter_is_expected_however_start_chapter_is_written(tmp_path):
    _page(
        tmp_path,
        "kw",
        [
            'import tokensel as ts\nimport tokensel_book as tb\ntb.start_chapter(chapter="kw-name")',
            'tb.check("a", 1, 1, tol=0)',
        ],
    )
    sites, issues = tb.verification.expected_claims(tmp_path)
    assert list(sites) == ["kw-name"] and len(sites["kw-name"]) == 1 and issues == []
    assert tb.verification.checked_chapters(tmp_path) == ["kw-name"]
    _page(
        tmp_path,
        "dyn",
        [
            'import tokensel as ts\nimport tokensel_book as tb\nname = "x"\ntb.start_chapter(name)',
            'tb.check("a", 1, 1, tol=0)',
        ],
    )
    assert any("string literal" in i for i in tb.verification.expected_claims(tmp_path)[1])
    _page(tmp_path, "none", ['import tokensel as ts\nimport tokensel_book as tb\ntb.check("a", 1, 1, tol=0)'])
    assert any("never calls start_chapter" in i for i in tb.verification.expected_claims(tmp_path)[1])


# --- issue 24 (2): verify knows the claims each chapter's source makes ------------------------------------

CELLS = [
    'import tokensel as ts\nimport tokensel_book as tb\ntb.start_chapter("sites")',
    'x = 2\ntb.check("first", x, 2, kind="ge")',
    'for k in range(3):\n    tb.check(f"loop {k}", k, 0, kind="ge")\ntb.check("last", 1.0, 1.0, tol=0.0)',
    "tb.end_chapter()",
]


def _run_cells(cells):
    """Execute ``cells`` in an IPython shell, as a kernel does (each cell's code in linecache)."""
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    for c in cells:
        shell.run_cell(c)


@pytest.mark.parametrize("order", ["as written", "parameters inserted", "cells reordered"])
def test_every_check_call_site_of_the_source_is_recorded(tmp_path, monkeypatch, order):
    _page(tmp_path, "sites", CELLS)
    monkeypatch.chdir(tmp_path)
    tb.records.mark_build_start(tmp_path / "checks")
    cells = {
        "as written": CELLS,
        "parameters inserted": CELLS[:1] + ["# Parameters\nn = 3\n"] + CELLS[1:],
        "cells reordered": [CELLS[0], CELLS[2], CELLS[1], CELLS[3]],
    }[order]
    _run_cells(cells)
    [rec] = _records(tmp_path / "checks", "sites")
    assert all(c["site"] for c in rec["checks"]) and len(rec["checks"]) == 5
    assert tb.verification.verify(tmp_path / "checks") == (5, 1)
    out = subprocess.run(
        [sys.executable, "-m", "tokensel_book", "verify", str(tmp_path / "checks")],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stderr


@pytest.mark.parametrize("damage", ["crash before a check", "check replaced", "record deleted"])
def test_a_claim_missing_from_the_record_fails_verify(tmp_path, monkeypatch, damage):
    _page(tmp_path, "sites", CELLS)
    monkeypatch.chdir(tmp_path)
    tb.records.mark_build_start(tmp_path / "checks")
    if damage == "crash before a check":
        cells = [CELLS[0], 'raise RuntimeError("boom")\n' + CELLS[1], CELLS[2], CELLS[3]]
    elif damage == "check replaced":
        cells = [CELLS[0] + "\ntb.check = lambda *a, **k: None", CELLS[1], CELLS[2], CELLS[3]]
    else:
        cells = CELLS
    monkeypatch.setattr(tb, "check", tb.check)  # put back after the test, whatever the cells do
    _run_cells(cells)
    if damage == "record deleted":  # a claim removed from the record, its digest made to match again
        p = next((tmp_path / "checks").glob("sites@*.json"))
        rec = json.loads(p.read_text())
        rec["checks"] = [c for c in rec["checks"] if c["name"] != "first"]
        p.write_text(json.dumps(tb.records._sealed(rec)))
    with pytest.raises(ClaimFailedError, match=r"sites\.md, code cell 2, line 2: tb\.check\(\"first\".*never recorded"):
        tb.verification.verify(tmp_path / "checks")


LOOP = 'for k in range(3):\n    tb.check(f"loop {k}", k, at_least=0)\n'


@pytest.mark.parametrize(
    "cell, why",
    [
        ("from tokensel import check as claim\nclaim('a', 1, at_least=0)", "imports check as 'claim'"),
        ("claim = tb.check\nclaim('a', 1, at_least=0)", "names check without calling it"),
        ("list(map(tb.check, ['a'], [1], [0]))", "names check without calling it"),
        ("def claim(k):\n    tb.check(f'a {k}', k, at_least=0)\nclaim(1)", "inside FunctionDef"),
        (
            "for k in range(3):\n    try:\n        tb.check(f'{k}', 1 / (k - 1), at_least=-9)\n"
            "    except ZeroDivisionError:\n        pass",
            "inside Try",
        ),
        (
            "for k in range(3):\n    try:\n        v = 1 / (k - 1)\n    except ZeroDivisionError:\n"
            "        continue\n    tb.check(f'{k}', v, at_least=-9)",
            "has a continue in a loop that makes claims",
        ),
        ("for k in range(3):\n    tb.check(f'{k}', k, at_least=0)\n    if k:\n        break", "has a break"),
        ("for k in range(3):\n    if k != 1:\n        tb.check(f'{k}', k, at_least=0)", "inside If"),
        (
            "import contextlib\nwith contextlib.suppress(KeyError):\n    tb.check('a', {}['x'], at_least=0)",
            "inside With",
        ),
        ("for k in range(3):\n    pass\nelse:\n    tb.check('a', 1, at_least=0)", "inside a loop's else"),
        ("[tb.check(f'{k}', k, at_least=0) for k in range(3) if k != 1]", "inside ListComp"),
        ("x = tb.check('a', 1, at_least=0) if False else None", "inside IfExp"),
        ("x = False and tb.check('a', 1, at_least=0)", "inside BoolOp"),
        ("assert tb.check('a', 1, at_least=0)", "calls check in Assert"),
        ("f = lambda: tb.check('a', 1, at_least=0)\nf()", "inside Lambda"),
    ],
)
def test_a_claim_the_build_could_not_count_is_refused_in_the_source(tmp_path, monkeypatch, cell, why):
    """Every form in which a claim could be made without the build knowing it must be on record (an alias, a
    wrapper, a claim under a condition, a try or a with, a loop that can skip an iteration) fails verify,
    naming the page, cell and line; the same page written in the countable form passes."""
    _page(
        tmp_path,
        "forms",
        ['import tokensel as ts\nimport tokensel_book as tb\ntb.start_chapter("forms")', cell, "tb.end_chapter()"],
    )
    sites, issues = tb.verification.expected_claims(tmp_path)
    assert any(why in i and "forms.md: code cell 2" in i for i in issues), issues
    monkeypatch.chdir(tmp_path)
    tb.records.mark_build_start(tmp_path / "checks")
    with pytest.raises(ClaimFailedError, match=why.replace("(", r"\(").replace(")", r"\)")):
        tb.verification.verify(tmp_path / "checks")
    _page(
        tmp_path,
        "forms",
        ['import tokensel as ts\nimport tokensel_book as tb\ntb.start_chapter("forms")', LOOP, "tb.end_chapter()"],
    )
    assert tb.verification.expected_claims(tmp_path)[1] == []


def test_a_claim_in_a_cell_tagged_raises_exception_is_refused(tmp_path):
    _page(tmp_path, "tagged", ['import tokensel as ts\nimport tokensel_book as tb\ntb.start_chapter("tagged")'])
    page = tmp_path / "tagged.md"
    page.write_text(
        page.read_text()
        + '\n```{code-cell} ipython3\n:tags: [raises-exception]\ntb.check("a", 1, at_least=0)\nraise ValueError\n```\n'
    )
    issues = tb.verification.expected_claims(tmp_path)[1]
    assert any("raises-exception" in i for i in issues), issues


@pytest.mark.parametrize("how", ["try/except around the claim", "continue in the handler"])
def test_a_loop_iterations_claim_skipped_by_try_except_fails_verify(tmp_path, monkeypatch, how):
    """The audit's case: one iteration of a claiming loop raises before its check and the exception is
    caught; the loop's call site is recorded by the other iterations, yet verify fails."""
    loop = {
        "try/except around the claim": "for k in range(3):\n    try:\n"
        '        tb.check(f"loop {k}", 1 / (k - 1), at_least=-9)\n    except ZeroDivisionError:\n        pass',
        "continue in the handler": "for k in range(3):\n    try:\n        v = 1 / (k - 1)\n"
        '    except ZeroDivisionError:\n        continue\n    tb.check(f"loop {k}", v, at_least=-9)',
    }[how]
    cells = ['import tokensel as ts\nimport tokensel_book as tb\ntb.start_chapter("skip")', loop, "tb.end_chapter()"]
    _page(tmp_path, "skip", cells)
    monkeypatch.chdir(tmp_path)
    tb.records.mark_build_start(tmp_path / "checks")
    _run_cells(cells)
    [rec] = _records(tmp_path / "checks", "skip")
    assert [c["name"] for c in rec["checks"]] == ["loop 0", "loop 2"] and "finished" in rec  # one claim vanished
    with pytest.raises(ClaimFailedError, match="skip.md: code cell 2"):
        tb.verification.verify(tmp_path / "checks")


def test_a_claiming_cell_that_stops_with_an_error_fails_verify_even_where_execution_goes_on(tmp_path, monkeypatch):
    """Iteration 2 of a loop raises: its claim and the next ones are never made, though the loop's site is
    recorded. An executed build stops there (allow_errors: false); where execution goes on (cells run by hand,
    a cell the static rules did not see), the run records the error and verify refuses it."""
    cells = [
        'import tokensel as ts\nimport tokensel_book as tb\ntb.start_chapter("stops")',
        'for k in range(4):\n    tb.check(f"loop {k}", 1 / (k - 2), at_least=-9)',
        "tb.end_chapter()",
    ]
    _page(tmp_path, "stops", cells)
    monkeypatch.chdir(tmp_path)
    tb.records.mark_build_start(tmp_path / "checks")
    _run_cells(cells)
    [rec] = _records(tmp_path / "checks", "stops")
    assert len(rec["checks"]) == 2 and "finished" in rec and rec["interrupted"][0].startswith("ZeroDivisionError")
    with pytest.raises(ClaimFailedError, match="a cell that makes claims stopped with an error"):
        tb.verification.verify(tmp_path / "checks")


@pytest.mark.parametrize("how", ["an alias the source does not show", "a wrapper in another module"])
def test_a_claim_made_other_than_at_a_call_site_of_the_page_fails_verify(tmp_path, monkeypatch, how):
    """What no reading of the source can see (``getattr(ts, "che" + "ck")``, a helper module's wrapper) is
    caught at run time: the claim's recorded site is not one of its page's."""
    (tmp_path / "helper.py").write_text(
        "import tokensel as ts\nimport tokensel_book as tb\n\n\ndef claim(k):\n    tb.check(f'h {k}', k, at_least=0)\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    made = {
        "an alias the source does not show": 'claim = getattr(tb, "che" + "ck")\nclaim("hidden", 1, at_least=0)',
        "a wrapper in another module": "import helper\nhelper.claim(1)",
    }[how]
    cells = [
        'import tokensel as ts\nimport tokensel_book as tb\ntb.start_chapter("where")',
        'tb.check("seen", 1, at_least=0)\n' + made,
    ]
    cells.append("tb.end_chapter()")
    _page(tmp_path, "where", cells)
    assert tb.verification.expected_claims(tmp_path)[1] == []  # the source looks fine
    monkeypatch.chdir(tmp_path)
    tb.records.mark_build_start(tmp_path / "checks")
    _run_cells(cells)
    [rec] = _records(tmp_path / "checks", "where")
    assert len(rec["checks"]) == 2 and rec["checks"][0]["site"] and "finished" in rec
    with pytest.raises(ClaimFailedError, match=r"1 claim\(s\) made elsewhere than at a check\(\.\.\.\) call"):
        tb.verification.verify(tmp_path / "checks")


def test_the_books_pages_make_every_claim_in_a_form_the_build_counts():
    root = Path(__file__).resolve().parents[1]
    for page in sorted((root / "book").glob("*.md")):
        bad = [i for i in tb.verification.page_claims(page)[2] if "check" in i]
        assert bad == [], bad


# --- issue 24 (4): integers are compared exactly -------------------------------------------------------------


def test_integers_above_2_to_the_53_are_compared_exactly(tmp_path):
    tb.start_chapter("ints")
    with pytest.raises(ClaimFailedError):
        tb.check("exact", 2**53 + 1, 2**53, tol=0)
    with pytest.raises(ClaimFailedError):
        tb.check("exact, numpy", np.int64(2**62 + 1), 2**62, tol=0)
    with pytest.raises(ClaimFailedError):
        tb.check("le", 2**60 + 1, 2**60, kind="le")
    tb.check("ge", 2**60 + 1, 2**60, kind="ge")
    tb.check("huge", 10**400 + 1, 10**400, tol=1)
    recs = _records(tmp_path / "checks", "ints")[0]["checks"]
    assert [c["passed"] for c in recs] == [False, False, False, True, True]
    assert recs[0]["measured"] == 2**53 + 1 and recs[4]["measured"] == 10**400 + 1


# --- issue 24 (5): records are checked strictly and are tamper-evident ----------------------------------------


def _one_passing_record(d):
    d = d / "checks"
    tb.records.mark_build_start(d)
    tb.start_chapter("t")
    tb.check("holds", 1.0, 1.0, tol=0.0)
    tb.check("flag", True, kind="true")
    tb.end_chapter()
    return next(d.glob("t@*.json"))


@pytest.mark.parametrize(
    "edit, reseal, message",
    [
        (lambda r: r["checks"][0].update(passed="false"), False, "passed must be"),
        (lambda r: r["checks"][0].update(passed="false"), True, "passed must be"),
        (lambda r: r["checks"][0].update(measured=5.0), False, "digest"),
        (lambda r: r["checks"][0].update(measured=5.0), True, "passed is True but its recorded values say False"),
        (lambda r: r["checks"][1].update(measured=False), True, "passed is True but"),
        (lambda r: r["checks"][0].update(kind="approx"), True, "kind 'approx'"),
        (lambda r: r["checks"][0].update(tol=-1.0), True, "tol must be"),
        (lambda r: r.update(finished="yes"), True, "finished must be"),
        (lambda r: r.update(pid=True), True, "pid must be"),
        (lambda r: r["checks"].append("a claim"), True, "not a JSON object"),
        (lambda r: r.pop("digest"), False, "digest is missing"),
    ],
    ids=[
        "passed as a string",
        "passed as a string, resealed",
        "value edited",
        "value edited, resealed",
        "flag edited, resealed",
        "unknown kind",
        "negative tol",
        "finished not a number",
        "pid a boolean",
        "claim not an object",
        "no digest",
    ],
)
def test_an_edited_record_fails_verify(tmp_path, capsys, edit, reseal, message):
    from tokensel_book.__main__ import main

    p = _one_passing_record(tmp_path)
    tmp_path = p.parent
    assert tb.verification.verify(tmp_path, expected=["t"]) == (2, 1)
    rec = json.loads(p.read_text())
    edit(rec)
    p.write_text(json.dumps(tb.records._sealed(rec) if reseal else rec))
    with pytest.raises(ClaimFailedError, match=message):
        tb.verification.verify(tmp_path, expected=["t"])
    # the command line says so in one line (the entry point itself runs in a process of its own below)
    capsys.readouterr()
    assert main(["verify", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert message.split()[0] in err and "Traceback" not in err


def test_a_record_rewritten_consistently_and_resealed_is_accepted_as_the_readme_says(tmp_path):
    """The stated limit of the records (README, ``records._digest``): the digest is not keyed, so a record
    whose numbers are rewritten to other numbers that satisfy the claim, and resealed, is accepted; what the
    records detect is an edit left unsealed, a wrong type, or a verdict the numbers contradict (above)."""
    p = _one_passing_record(tmp_path)
    rec = json.loads(p.read_text())
    rec["checks"][0]["measured"] = rec["checks"][0]["expected"] = 7.0
    p.write_text(json.dumps(tb.records._sealed(rec)))
    assert tb.records.record_problems(json.loads(p.read_text())) == []
    assert tb.verification.verify(tmp_path / "checks", expected={"t": None}) == (2, 1)


def test_the_verify_command_fails_an_edited_record_in_a_process_of_its_own(tmp_path):
    p = _one_passing_record(tmp_path)
    rec = json.loads(p.read_text())
    rec["checks"][0].update(measured=5.0)
    p.write_text(json.dumps(tb.records._sealed(rec)))
    out = subprocess.run(
        [sys.executable, "-m", "tokensel_book", "verify", str(p.parent)], capture_output=True, text=True
    )
    assert out.returncode == 1 and "Traceback" not in out.stderr
    assert "passed is True but its recorded values say False" in out.stdout + out.stderr


# --- issue 28 (13): a chapter run by hand records in a scratch folder ----------------------------------------


def test_a_chapter_run_by_hand_records_in_the_scratch_folder(tmp_path, monkeypatch):
    (tmp_path / "_config.yml").write_text("title: t\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TOKENSEL_RESULTS_DIR", str(tmp_path / "_build" / "checks"))
    tb.records.mark_build_start()
    tb.start_chapter("book")
    tb.check("holds", 1.0, 1.0, tol=0.0)
    tb.end_chapter()
    monkeypatch.delenv("TOKENSEL_RESULTS_DIR")
    assert tb.records.results_dir() == tmp_path / "_build" / "scratch" / "checks"
    assert tb.records.book_results_dir() == tmp_path / "_build" / "checks"
    tb.start_chapter("book")  # an exploratory rerun by hand, with a false claim
    with pytest.raises(ClaimFailedError):
        tb.check("holds", 2.0, 1.0, tol=0.0)
    assert len(list((tmp_path / "_build" / "scratch" / "checks").glob("book@*.json"))) == 1
    assert tb.verification.verify(expected=["book"]) == (1, 1)  # the book's folder is untouched
    with pytest.raises(ClaimFailedError):
        tb.verification.verify(tmp_path / "_build" / "scratch" / "checks", expected=["book"])


def test_the_keyword_forms_say_the_comparison(tmp_path, monkeypatch):
    monkeypatch.setenv("TOKENSEL_RESULTS_DIR", str(tmp_path))
    tb.start_chapter("forms")
    assert tb.check("at least", 2.0, at_least=1.0) == 2.0
    tb.check("at most", 1, at_most=1)
    tb.check("close abs", 1.05, close_to=1.0, tol=0.1)
    tb.check("close rel", 105.0, close_to=100.0, rel_tol=0.1)
    tb.check("a truth", True)
    tb.check("legacy abs", 1.0, 1.05, 0.1)
    tb.end_chapter()
    kinds = {c["name"]: c["kind"] for c in tb.records.load_results(tmp_path)[0]["checks"]}
    assert kinds == {
        "at least": "ge",
        "at most": "le",
        "close abs": "abs",
        "close rel": "rel",
        "a truth": "true",
        "legacy abs": "abs",
    }


@pytest.mark.parametrize(
    "kw",
    [
        dict(at_least=1.0, at_most=2.0),
        dict(at_least=1.0, tol=0.1),
        dict(close_to=1.0),
        dict(close_to=1.0, tol=0.1, rel_tol=0.1),
        dict(expected=1.0, at_least=0.5),
        dict(at_least=1.0, kind="ge"),
        dict(rel_tol=0.1),
    ],
)
def test_mixed_or_incomplete_forms_are_recorded_as_malformed_and_raise(tmp_path, monkeypatch, kw):
    monkeypatch.setenv("TOKENSEL_RESULTS_DIR", str(tmp_path))
    tb.start_chapter("mixed")
    with pytest.raises(ts.TokenselError):
        tb.check("mixed claim", 1.5, **kw)
    recs = tb.records.load_results(tmp_path)[0]["checks"]
    assert len(recs) == 1 and recs[0]["passed"] is False and recs[0]["kind"] == "malformed"


def test_a_false_flag_fails_in_the_short_form(tmp_path, monkeypatch):
    monkeypatch.setenv("TOKENSEL_RESULTS_DIR", str(tmp_path))
    tb.start_chapter("flag")
    with pytest.raises(ClaimFailedError):
        tb.check("flag", False)
    with pytest.raises(ClaimFailedError):
        tb.check("a number is not a truth", 1.0)


# --- issue 24 (9): recording claims where the file system refuses is one StorageError ------------------------


def _refuse_creating_in(folder, monkeypatch, err):
    """Make the file system refuse to create anything in ``folder`` with ``err`` (an errno): what a read-only
    folder (for a user whom modes stop; root is not stopped by them) or a full disk does."""
    import errno
    import os

    real = os.open

    def refuse(path, flags, *args, **kwargs):
        if Path(os.fsdecode(path)).parent == folder and flags & (os.O_CREAT | os.O_WRONLY | os.O_RDWR):
            raise OSError(err, os.strerror(err), os.fsdecode(path))
        return real(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", refuse)
    assert err in (errno.EACCES, errno.ENOSPC)


@pytest.mark.parametrize(
    "damage, message",
    [
        ("the results folder is a file", "cannot be used as a folder|is not a folder"),
        ("the lock path is a folder", r"\.records\.lock' is a folder"),
        ("the results folder is unwritable", "Permission denied"),
        ("the disk is full", "No space left on device"),
    ],
)
def test_recording_where_the_file_system_refuses_is_a_storage_error_at_once(tmp_path, monkeypatch, damage, message):
    """start_chapter, a claim before it, mark_build_start and carry_over take the folder's lock through
    tokensel.files: a StorageError naming the path, at once (never a raw OSError or filelock's error, never
    after the lock's 120 s timeout)."""
    import errno
    import os
    import time

    from tokensel.errors import StorageError

    d = tmp_path / "checks"
    if damage == "the results folder is a file":
        d.write_text("not a folder")
    else:
        d.mkdir()
    if damage == "the lock path is a folder":
        (d / ".records.lock").mkdir()
    elif damage == "the results folder is unwritable":
        d.chmod(0o555)
        if os.geteuid() == 0:
            _refuse_creating_in(d, monkeypatch, errno.EACCES)
    elif damage == "the disk is full":
        _refuse_creating_in(d, monkeypatch, errno.ENOSPC)
    t0 = time.monotonic()
    with pytest.raises(StorageError, match=message):
        tb.start_chapter("refused")
    with pytest.raises(StorageError, match=message):
        tb.records.mark_build_start(d)
    with pytest.raises(StorageError, match=message):
        tb.records.carry_over([], d)
    assert time.monotonic() - t0 < 10
    d.chmod(0o755) if d.is_dir() else None
    if damage == "the results folder is a file":  # and reading it back is refused, not read as empty
        with pytest.raises(StorageError, match="is not a folder"):
            tb.records.load_results(d)
        with pytest.raises(StorageError, match="is not a folder"):
            tb.verification.verify(d, expected={"refused": None})


def test_a_full_disk_while_recording_claims_is_a_storage_error_and_loses_no_claim(tmp_path, monkeypatch):
    """The disk fills up while a chapter records: each write raises StorageError and leaves the record
    as it was (no temporary file); the claims made meanwhile stay in the run and are written, the failed one
    too, as soon as there is room again."""
    import errno
    import os

    from tokensel.errors import StorageError

    d = tmp_path / "checks"
    tb.records.mark_build_start(d)
    tb.start_chapter("full")
    tb.check("before", 1.0, close_to=1.0, tol=0.0)

    def full(*a, **k):
        raise OSError(errno.ENOSPC, "No space left on device")

    with monkeypatch.context() as m:
        m.setattr(os, "fsync", full)
        with pytest.raises(StorageError, match="No space left on device"):
            tb.check("while full, false", 2.0, close_to=1.0, tol=0.1)
        with pytest.raises(StorageError, match="No space left on device"):
            tb.check("while full, true", 1.0, close_to=1.0, tol=0.1)
    [rec] = _records(d, "full")
    assert [c["name"] for c in rec["checks"]] == ["before"] and "finished" not in rec
    assert sorted(p.name for p in d.iterdir() if p.suffix == ".tmp" or p.name.endswith(".tmp")) == []
    with pytest.raises(ClaimFailedError, match="started but did not finish"):
        tb.verification.verify(d, expected={"full": None})
    tb.check("after", 1.0, close_to=1.0, tol=0.0)
    with pytest.raises(ClaimFailedError, match=r"1 of 4 claims failed: \['while full, false'\]"):
        tb.end_chapter()
    [rec] = _records(d, "full")
    assert [c["name"] for c in rec["checks"]] == ["before", "while full, false", "while full, true", "after"]
    with pytest.raises(ClaimFailedError, match="while full, false"):
        tb.verification.verify(d, expected={"full": None})


def test_special_files_in_the_results_folder_are_refused_without_being_opened(tmp_path):
    """A FIFO where a record, the build stamp or the carried-over list belongs would block a reader: each is
    refused by its kind, as is a folder in its place."""
    import os

    p = _one_passing_record(tmp_path)
    d = p.parent
    os.mkfifo(d / "x@fifo.json")
    with pytest.raises(InvalidArgumentError, match="is a FIFO"):
        tb.records.load_results(d)
    with pytest.raises(ClaimFailedError, match="is a FIFO"):
        tb.verification.verify(d, expected={"t": None})
    (d / "x@fifo.json").unlink()
    (d / "y@folder.json").mkdir()
    with pytest.raises(InvalidArgumentError, match="is a folder"):
        tb.records.load_results(d)
    (d / "y@folder.json").rmdir()
    for name in (tb.records.STAMP, tb.records.CARRIED):
        saved = (d / name).read_bytes() if (d / name).exists() else None
        (d / name).unlink(missing_ok=True)
        os.mkfifo(d / name)
        with pytest.raises(InvalidArgumentError, match="is a FIFO"):
            tb.records.this_build(d)
        (d / name).unlink()
        if saved is not None:
            (d / name).write_bytes(saved)
    assert tb.verification.verify(d, expected={"t": None}) == (2, 1)


# --- issue 24 (2): no page of _toc.yml is ever skipped -----------------------------------------------------------


def _book_with(root, extra_toc, make=None):
    """A book whose root page records chapter "sites" (CELLS), with ``extra_toc`` appended to its _toc.yml;
    ``make(root)`` adds what the test needs."""
    _page(root, "sites", CELLS, toc_extra=extra_toc)
    if make is not None:
        make(root)


def _notebook(root):
    (root / "nb.ipynb").write_text('{"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}')


def _fifo(root):
    import os

    os.mkfifo(root / "fifo.md")


@pytest.mark.parametrize(
    "toc, make, message",
    [
        (
            "chapters:\n  - file: gone\n",
            None,
            r"_toc\.yml' lists pages whose source cannot be read: 'gone' has no source gone\.md",
        ),
        (
            "chapters:\n  - file: nb.ipynb\n",
            _notebook,
            r"_toc\.yml' lists pages.*'nb' is a notebook \(nb\.ipynb\).*jupytext --to myst",
        ),
        (
            "chapters:\n  - file: folder\n",
            lambda r: (r / "folder.md").mkdir(),
            r"_toc\.yml' lists pages.*'folder'.*is a folder",
        ),
        ("chapters:\n  - file: fifo\n", _fifo, r"_toc\.yml' lists pages.*'fifo'.*is a FIFO"),
        (
            "chapters:\n  - file: bytes\n",
            lambda r: (r / "bytes.md").write_bytes(b"# x\n\xff\xfe\n"),
            r"_toc\.yml' lists pages whose source cannot be read: 'bytes\.md' cannot be read as a MyST page",
        ),
        ("chapters:\n  - glob: book/*\n", None, r"_toc\.yml'.*`glob: book/\*` entry; list each page with `file:`"),
        ("chapters:\n  - book/01\n", None, r"_toc\.yml'.*must be a list of entries"),
        ("chapters:\n  - title: x\n", None, r"_toc\.yml'.*neither `file:` nor `url:`"),
        ("chapters: [\n", None, r"_toc\.yml' is not valid YAML"),
    ],
    ids=["missing", "notebook", "folder", "fifo", "not utf-8", "glob", "not a mapping", "no file", "not yaml"],
)
def test_a_page_of_the_toc_that_cannot_be_read_fails_verification(tmp_path, monkeypatch, capsys, toc, make, message):
    """expected_claims used to skip such a page (and _expectations swallowed a toc it could not read, then
    checked no call site): now verify fails, naming _toc.yml, the page and the fix, whatever `expected` is."""
    from tokensel.errors import TokenselError

    _book_with(tmp_path, toc, make)
    monkeypatch.chdir(tmp_path)
    tb.records.mark_build_start(tmp_path / "checks")
    _run_cells(CELLS)  # the chapter's run is complete: only the unreadable page can fail the build
    for expected in (None, ["sites"]):
        with pytest.raises(TokenselError, match=message):
            tb.verification.verify(tmp_path / "checks", expected=expected)
    with pytest.raises(TokenselError, match=message):
        tb.verification.checked_chapters(tmp_path)
    from tokensel_book.__main__ import main

    capsys.readouterr()
    assert main(["verify", str(tmp_path / "checks")]) == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err and "_toc.yml" in err and len(err.strip().splitlines()) == 1, err


def test_verify_outside_a_book_is_a_tokensel_error_naming_the_missing_toc(tmp_path, monkeypatch):
    from tokensel.errors import StorageError

    monkeypatch.chdir(tmp_path)
    tb.records.mark_build_start(tmp_path / "checks")
    with pytest.raises(StorageError, match=r"no _toc\.yml in .*run from the book's folder"):
        tb.verification.verify(tmp_path / "checks")
    (tmp_path / "_toc.yml").mkdir()  # something else in its place is refused, not read as no book
    with pytest.raises(StorageError, match=r"_toc\.yml' is a folder"):
        tb.verification.verify(tmp_path / "checks", expected=["x"])
