"""tokensel_book.replication: fresh seeds on Dask, warm workers, settings that travel, resume keyed on what the
runs depended on, Wilson intervals, and a real cluster of separate scheduler and worker processes."""

import json
import os
import runpy
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import MYST_FRONT_MATTER, write_book

from tokensel.errors import InvalidArgumentError
from tokensel_book import replication as rep

ROOT = Path(__file__).resolve().parents[2]
CHAPTER = (
    MYST_FRONT_MATTER[:-4]
    + """claims:
  small: {claim: "a draw below 0.8", tests: lem-draw, threshold: "a uniform draw is below 0.8 four times in five"}
  setting: {claim: "the sweep's setting reached the worker", tests: lem-draw, threshold: "exact"}
---
# A chapter

```{code-cell} ipython3
import os
import numpy as np
import tokensel_book as tb
import helper
tb.start_chapter("ch")
```

```{code-cell} ipython3
:tags: [parameters]
seed = 0
```

```{code-cell} ipython3
tb.check("small", float(np.random.default_rng(seed).random()) * helper.SCALE, at_most=0.8)
tb.check("setting", os.environ.get("TOKENSEL_TEST_SETTING") == "on")
tb.end_chapter()
```
"""
)


def tiny_book(root: Path) -> Path:
    write_book(root, "ch", CHAPTER)
    (root / "book" / "helper.py").write_text("SCALE = 1.0\n")
    return root


def task(root: Path, out: Path, seed: int, software=None) -> dict:
    """What the sweep hands a worker to run chapter ``ch`` of ``root`` at ``seed``."""
    (cells, at), code = rep.code_cells(root, "ch"), rep.code_digest(root, "ch")
    return dict(root=str(root), out=str(out), chapter="ch", seed=seed, cells=cells, at=at, code=code,
                software=software or rep.software(), settings={}, timeout=60)  # fmt: skip


def test_wilson_intervals_and_fresh_seeds():
    assert rep.wilson(0, 0) == (0.0, 1.0)
    lo, hi = rep.wilson(20, 20)
    assert hi == 1.0 and abs(lo - 0.8389) < 1e-3
    lo, hi = rep.wilson(9, 20)
    assert abs(lo - 0.258) < 1e-3 and abs(hi - 0.658) < 1e-3
    assert rep.fresh_seeds(3, 1) == [1100, 1200, 1300]


@pytest.mark.slow(seconds=60)
def test_a_sweep_counts_current_tasks_only_and_reruns_what_changed(tmp_path, monkeypatch):
    root = tiny_book(tmp_path)
    out = root / rep.RECORDED  # where the book keeps its sweep: a task never reads the sweep it belongs to
    monkeypatch.setenv("TOKENSEL_TEST_SETTING", "on")
    seeds = rep.fresh_seeds(4)
    first = rep.sweep(root, ["ch"], seeds, out, workers=2)
    assert sorted(r["seed"] for r in first) == seeds and {r["status"] for r in first} <= {"ok", "claims failed"}
    assert not [f for r in first for f in r["files"] if f.startswith(str(rep.RECORDED))]
    frame = rep.summarize(out, root).set_index("id")
    records = [json.loads((out / f"tasks/ch/seed-{s}/record.json").read_text()) for s in seeds]
    kept = [f for r in records for f in r["depends"]["files"]]
    assert kept and all(f.startswith(str(root)) for f in kept)  # the project's files only, not site-packages
    assert frame.loc["small", "k"] == sum(r["checks"][0]["passed"] for r in records) and frame.loc["small", "n"] == 4
    assert frame.loc["setting", "k"] == 4  # the shell's setting travelled with every task
    assert (frame.loc["small", "low"], frame.loc["small", "high"]) == rep.wilson(frame.loc["small", "k"], 4)
    assert (out / "summary.csv").read_text().startswith("chapter,id,claim,k,n,low,high")
    assert rep.sweep(root, ["ch"], seeds, out, workers=2) == []  # resumed: everything current
    shutil.copytree(root, tmp_path / "clone")  # the sweep read in another clone of the book
    assert len(rep.load(tmp_path / "clone" / rep.RECORDED, tmp_path / "clone")[0]) == 4
    (root / "book" / "helper.py").write_text("SCALE = 2.0\n")  # a file the runs imported
    assert len(rep.load(out, root)[0]) == 0 and "helper.py changed" in rep.load(out, root)[2][0]
    assert len(rep.sweep(root, ["ch"], seeds[:2], out, workers=2)) == 2
    assert rep.summarize(out, root).set_index("id").loc["small", "n"] == 2  # never two versions together
    monkeypatch.setenv("TOKENSEL_TEST_SETTING", "off")
    assert len(rep.sweep(root, ["ch"], seeds[:1], out, workers=2)) == 1
    assert rep.summarize(out, root).set_index("id").loc["setting", "n"] == 1  # nor two settings
    assert any("other settings" in why for why in rep.load(out, root)[2])
    seeds = seeds[:1]
    record = out / f"tasks/ch/seed-{seeds[0]}/record.json"
    edited = json.loads(record.read_text())
    edited["checks"][0]["passed"] = not edited["checks"][0]["passed"]
    record.write_text(json.dumps(edited))
    assert "cannot be trusted" in rep.load(out, root)[2][0]


def test_a_chapter_without_a_parameters_cell_is_refused_and_one_whose_tag_moved_is_not_counted(tmp_path, monkeypatch):
    root = tiny_book(tmp_path)
    text = (root / "book" / "ch.md").read_text().replace(":tags: [parameters]\n", "")
    (root / "book" / "ch.md").write_text(text)
    with pytest.raises(InvalidArgumentError, match="tagged `parameters`"):
        rep.sweep(root, ["ch"], [1000], tmp_path / "out")
    (root / "book" / "ch.md").write_text(text.replace("```{code-cell} ipython3\nimport os", "```{code-cell} ipython3\n"
                                                      ":tags: [parameters]\nimport os"))  # fmt: skip
    monkeypatch.setenv("PYTHONHASHSEED", "0")
    result = rep.run_task(task(root, tmp_path / "out", 1000))
    assert result["status"] == "crashed" and "ran at seed 0, not 1000" in result["error"]


@pytest.mark.slow(seconds=40)
def test_a_worker_with_two_threads_runs_one_task_at_a_time(tmp_path):
    from dask.distributed import Client, LocalCluster

    root = tiny_book(tmp_path)
    with LocalCluster(n_workers=1, threads_per_worker=2, processes=True) as cluster, Client(cluster) as client:
        [software] = client.run(rep.software).values()  # the worker's own hash seed
        specs = [task(root, tmp_path / "out", s, software) for s in rep.fresh_seeds(3)]
        done = client.gather([client.submit(rep.run_task, spec, pure=False) for spec in specs])
    assert all(r["status"] in ("ok", "claims failed") for r in done), [r.get("error") for r in done]
    spans = sorted((r["ended"] - r["seconds"], r["ended"]) for r in done)
    assert all(a[1] <= b[0] + 0.01 for a, b in zip(spans, spans[1:], strict=False)), spans  # seconds: to 0.01 s


def start(program: str, *args, env: dict) -> subprocess.Popen:
    """A Dask scheduler or worker process, without its dashboard and with ``env`` alone."""
    cmd = [sys.executable, "-m", f"distributed.cli.{program}", *args, "--no-dashboard"]
    return subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def wait_for(address: str, n: int) -> None:
    from dask.distributed import Client

    with Client(address, timeout=60) as client:
        client.wait_for_workers(n, timeout=60)


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow(seconds=60)
def test_a_cluster_of_separate_scheduler_and_workers_runs_the_sweep_and_refuses_a_worker_that_differs(tmp_path):
    """A bare loopback cluster gets the sweep's settings; a worker with another hash seed is refused in one line."""
    root, port = tiny_book(tmp_path), _port()
    bare = {"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", "/tmp"), "PYTHONHASHSEED": "0"}
    bare |= {"PYTHONPATH": os.environ["PYTHONPATH"]} if os.environ.get("PYTHONPATH") else {}
    procs = []
    try:
        address = f"tcp://127.0.0.1:{port}"
        procs.append(start("dask_scheduler", "--host", "127.0.0.1", "--port", str(port), env=bare))
        procs += [start("dask_worker", address, "--nthreads", "1", env=bare) for _ in range(2)]
        env = dict(os.environ, TOKENSEL_TEST_SETTING="on", PYTHONHASHSEED="0")
        cmd = [sys.executable, "-m", "tokensel_book", "replicate", "--chapters", "ch", "--seeds", "2", "--out",
               str(tmp_path / "out"), "--scheduler", address]  # fmt: skip
        wait_for(address, 2)
        done = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode in (0, 1) and "2 tasks run" in done.stdout, done.stdout + done.stderr
        frame = rep.summarize(tmp_path / "out", root).set_index("id")
        assert frame.loc["setting", "k"] == 2 and {r["worker"] for r in rep.load(tmp_path / "out", root)[0]}
        procs.append(start("dask_worker", address, "--nthreads", "1", "--no-nanny", env=dict(bare, PYTHONHASHSEED="1")))
        wait_for(address, 3)
        refused = subprocess.run([*cmd, "--first-seed", "2"], cwd=root, env=env, capture_output=True, text=True,
                                 timeout=120)  # fmt: skip
        errors = [ln for ln in refused.stderr.splitlines() if ln.startswith("error:")]
        assert refused.returncode == 1 and len(errors) == 1 and "PYTHONHASHSEED ('1', not '6640')" in errors[0], refused
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:  # a worker slow to close on a loaded machine
                p.kill()


def test_a_disjoint_block_of_seeds_calibrates_each_claims_rate(tmp_path, monkeypatch):
    root = tiny_book(tmp_path)
    monkeypatch.setenv("PYTHONHASHSEED", "0")
    monkeypatch.delitem(sys.modules, "helper", raising=False)  # this book's helper, not another test's
    for out, seeds in (("rec", (1017, 1025, 1028, 1029)), ("block", (5000, 5001, 5002, 5003))):  # above 0.8, below
        assert {rep.run_task(task(root, tmp_path / out, s))["status"] for s in seeds} == {"claims failed"}
    calibrate = runpy.run_path(str(ROOT / "scripts" / "calibrate.py"))["calibrate"]
    frame = calibrate(tmp_path / "block", tmp_path / "rec", root).set_index("id")
    assert frame.loc["small", ["k", "n", "k_block", "n_block"]].tolist() == [0, 4, 4, 4]
    assert frame.p.tolist() == [pytest.approx(2 / 70), 1.0] and frame.differs.tolist() == [True, False]
    assert (tmp_path / "block" / "calibration.csv").is_file()
    pytest.raises(InvalidArgumentError, calibrate, tmp_path / "rec", tmp_path / "rec", root).match("shares 4")


def test_a_claim_no_fresh_seed_reached_counts_as_failed_at_every_seed(tmp_path, monkeypatch):
    """Issue 48 (2): a claim whose cell crashes at every fresh seed showed as "not replicated"; it failed there."""
    root = tiny_book(tmp_path)
    text = (root / "book" / "ch.md").read_text().replace('tb.check("small"', 'assert seed == 0\ntb.check("small"')
    (root / "book" / "ch.md").write_text(text)
    monkeypatch.setenv("PYTHONHASHSEED", "0")
    for seed in (1000, 1100):
        assert rep.run_task(task(root, tmp_path / "out", seed))["status"] == "crashed"
    frame = rep.summarize(tmp_path / "out", root).set_index("id")
    assert frame.loc["small", "k"] == 0 and frame.loc["small", "n"] == 2 and frame.loc["small", "seed_dependent"]
    assert frame.loc["small", "failed_seeds"] == "1000 1100"
    # a claim made twice in a run holds there only if both hold: one failure counts against it
    twice = text.replace('assert seed == 0\ntb.check("small"', 'tb.check("small", 0.9, at_most=0.8)\ntb.check("small"')
    (root / "book" / "ch.md").write_text(twice)
    monkeypatch.delitem(sys.modules, "helper", raising=False)  # this book's helper, not another test's
    assert rep.run_task(task(root, tmp_path / "twice", 1000))["status"] == "claims failed"
    assert rep.summarize(tmp_path / "twice", root).set_index("id").loc["small", "k"] == 0
    from tokensel_book.status import fresh_verdict

    assert fresh_verdict(0, 2) == "failed at every fresh seed"  # on the status page, not "seed-dependent"
    assert [fresh_verdict(k, 20) for k in (20, 18, 17)] == ["robust", "held in most", "seed-dependent"]
    assert fresh_verdict(0, 0) == "not replicated"


def test_a_task_file_larger_than_a_sweep_writes_is_not_read(tmp_path):
    (folder := tmp_path / "tasks" / "ch" / "seed-1000").mkdir(parents=True)
    with open(folder / "result.json", "wb") as fh:
        fh.truncate(rep.MAX_TASK_FILE + 1)  # sparse: nothing is read into memory
    assert rep.read_task(folder, tmp_path)[2].startswith("unreadable (result.json is over")
