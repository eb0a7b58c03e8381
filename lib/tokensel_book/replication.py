"""Replication across fresh seeds: every chapter's claims rerun at seeds the book never used.

A *task* is one (chapter, seed): the chapter's MyST source is turned into a notebook (jupytext), its
cell tagged ``parameters`` is given ``seed`` (papermill injects the value after it) and the notebook is
executed in a fresh kernel, with failed claims reported rather than fatal (``TOKENSEL_CLAIMS=report``),
so that every claim of the chapter is measured even when one fails. Each task records its claims in a
folder of its own; its outcome (``ok``, ``claims failed``, ``crashed``, ``timed out``) is written to
``result.json`` beside them, so nothing is dropped and a stopped sweep resumes where it stopped.

Tasks run on Dask: a ``distributed.LocalCluster`` sized to the machine (one thread per worker, as many
workers as cores divided by the threads each chapter uses), or an existing cluster given by its scheduler
address. Results land in one folder::

    OUT/provenance.json                  every sweep: command, commit, versions, seeds, workers, wall time
    OUT/tasks/<chapter>/seed-<seed>/     result.json, the executed notebook, the claim records

:func:`summarize` reads such a folder: for every claim, in how many of the seeds it held, and the min /
median / max of its measured value. A claim that held in fewer than ``SEED_DEPENDENT`` (90 %) of the seeds
is *seed-dependent*. :func:`threshold_changes` compares the thresholds recorded by the sweep with those of
a build: a threshold changed after the sweep must have its reason in ``OUT/threshold_changes.json``.

Fresh seeds are ``FRESH_BASE + STRIDE * i``. A chapter derives every random choice from its ``seed``
parameter as ``seed + k`` with ``0 <= k < STRIDE`` (a test checks the chapters), and the book is built at
``seed = 0``: the seeds of the book and of any two fresh runs never meet.
"""

from __future__ import annotations

import json
import math
import os
import platform
import shlex
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from tokensel.errors import ArgumentTypeError, InvalidArgumentError
from tokensel.files import write_json_atomic
from tokensel.validation import check_int
from tokensel.version import __version__

FRESH_BASE = 1000
STRIDE = 100
SEED_DEPENDENT = 0.9
STATUSES = ("ok", "claims failed", "crashed", "timed out")
RECORDED = Path("book") / "recorded" / "replication"


def fresh_seeds(n: int, start: int = 0) -> list[int]:
    """The fresh seeds number ``start`` to ``start + n - 1``: ``FRESH_BASE + STRIDE * i``."""
    n = check_int(n, "n", min=1, max=100_000)
    start = check_int(start, "start", min=0, max=1_000_000)
    return [FRESH_BASE + STRIDE * i for i in range(start, start + n)]


@dataclass(frozen=True)
class Task:
    """One chapter executed at one seed."""

    chapter: str
    seed: int

    @property
    def key(self) -> str:
        return f"{self.chapter}/seed-{self.seed}"


@dataclass
class SweepSettings:
    """How a sweep runs: where, with how many workers, and for how long a task may run."""

    out: Path
    workers: int | None = None
    threads: int = 1
    scheduler: str | None = None
    timeout: float = 1800.0
    retry: bool = False
    memory_limit: str = "auto"
    extra_params: dict = field(default_factory=dict)


def _chapter_source(root: Path, chapter: str) -> Path:
    src = root / "book" / f"{chapter}.md"
    if not src.is_file():
        raise InvalidArgumentError(
            f"chapters: no chapter {chapter!r} ({src.name} is not in book/); "
            f"name chapters as in _toc.yml, e.g. 01_model"
        )
    return src


def code_digest(root: Path, chapter: str) -> str:
    """SHA-256 of a chapter's code cells (their source and tags), in order: what its claims depend on in the
    chapter itself. Edits to the prose leave it unchanged; a task recorded under another digest is stale."""
    import hashlib

    import jupytext

    nb = jupytext.read(_chapter_source(Path(root), chapter))
    h = hashlib.sha256()
    for cell in nb.cells:
        if cell.cell_type == "code":
            h.update(json.dumps([cell.source, sorted(cell.metadata.get("tags", []))]).encode())
            h.update(b"\0")
    return h.hexdigest()


def _task_dir(out: Path, task: Task) -> Path:
    return Path(out) / "tasks" / task.chapter / f"seed-{task.seed}"


def read_result(out: Path, task: Task) -> dict | None:
    """The recorded outcome of ``task`` in ``out``, or None when it has none (or an unreadable one)."""
    path = _task_dir(out, task) / "result.json"
    try:
        res = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if (
        not isinstance(res, dict)
        or res.get("chapter") != task.chapter
        or res.get("seed") != task.seed
        or res.get("status") not in STATUSES
    ):
        return None
    return res


def run_task(
    root: str, out: str, chapter: str, seed: int, timeout: float, threads: int = 1, extra_params: dict | None = None
) -> dict:
    """Execute ``chapter`` at ``seed`` in a fresh kernel (papermill) and record the outcome.

    Runs in a Dask worker or anywhere else: everything it needs is in its arguments, and it writes only
    inside its own task folder. Returns the outcome written to ``result.json``."""
    root_p, task = Path(root), Task(chapter, int(seed))
    folder = _task_dir(Path(out), task)
    records = folder / "records"
    if records.exists():  # a task started before and stopped: its partial records do not count
        for p in records.glob("*.json"):
            p.unlink()
    folder.mkdir(parents=True, exist_ok=True)
    src = _chapter_source(root_p, chapter)
    digest = code_digest(root_p, chapter)
    import jupytext

    nb = jupytext.read(src)
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    source_nb = folder / "source.ipynb"
    jupytext.write(nb, source_nb)
    params = {"seed": int(seed), **(extra_params or {})}
    env = {
        **os.environ,
        "TOKENSEL_RESULTS_DIR": str(records),
        "TOKENSEL_CLAIMS": "report",
        "TOKENSEL_PROGRESS": "0",
        "TOKENSEL_THREADS": str(threads),
        "MPLBACKEND": "Agg",
        "PYTHONHASHSEED": "0",
        "HF_DATASETS_DISABLE_PROGRESS_BARS": "1",
        "OMP_NUM_THREADS": str(threads),
        "NUMBA_NUM_THREADS": str(threads),
    }
    cmd = [
        sys.executable,
        "-m",
        "papermill",
        str(source_nb),
        str(folder / "executed.ipynb"),
        "-y",
        json.dumps(params),
        "-k",
        "python3",
        "--cwd",
        str(root_p / "book"),
        "--no-progress-bar",
        "--no-log-output",
        "--execution-timeout",
        str(max(1, int(timeout))),
    ]
    t0 = time.perf_counter()
    rc, tail, timed_out = _run_bounded(cmd, env, timeout)
    seconds = time.perf_counter() - t0
    source_nb.unlink(missing_ok=True)
    claims = _task_claims(records)
    finished = any(r.get("finished") for r in _records(records))
    if timed_out:
        status = "timed out"
    elif finished and all(c.get("passed") is True for c in claims):
        status = "ok" if rc == 0 else "crashed"
    elif finished:
        status = "claims failed"
    else:
        status = "crashed"
    result = dict(
        chapter=chapter,
        seed=int(seed),
        status=status,
        seconds=round(seconds, 2),
        code=digest,
        returncode=rc,
        claims=len(claims),
        failed=sum(c.get("passed") is not True for c in claims),
        host=socket.gethostname(),
        params=params,
    )
    if status in ("crashed", "timed out"):
        result["error"] = _last_error(tail)
    _keep_notebook(folder / "executed.ipynb", status)
    write_json_atomic(folder / "result.json", result)
    return result


def _run_bounded(cmd: list[str], env: dict, timeout: float) -> tuple[int | None, str, bool]:
    """Run ``cmd`` in a session of its own for at most ``timeout`` seconds; on time-out the whole session
    (papermill and its kernel) is killed. Returns (exit code or None, the end of stderr, timed out)."""
    import signal
    import tempfile

    with tempfile.TemporaryFile(mode="w+") as err:
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=err, start_new_session=True)
        try:
            rc = proc.wait(timeout=timeout)
            timed_out = False
        except subprocess.TimeoutExpired:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait()
            rc, timed_out = None, True
        err.seek(0)
        tail = err.read()[-4000:]
    if "CellTimeoutError" in tail or "Cell execution timed out" in tail:
        timed_out = True
    return rc, tail, timed_out


def _keep_notebook(path: Path, status: str) -> None:
    """Keep the executed notebook of a task that crashed or timed out, without its images (for diagnosis);
    drop it otherwise (the claim records hold what a replication reports)."""
    if not path.exists():
        return
    if status in ("ok", "claims failed"):
        path.unlink()
        return
    import nbformat

    try:
        nb = nbformat.read(path, as_version=4)
    except Exception:  # noqa: BLE001 - a half-written notebook is kept as it is
        return
    for cell in nb.cells:
        for output in cell.get("outputs", []):
            data = output.get("data")
            if data:
                for key in [k for k in data if k.startswith("image/")]:
                    del data[key]
    nbformat.write(nb, path)


def _records(records: Path) -> list[dict]:
    out = []
    for p in sorted(Path(records).glob("*.json")):
        try:
            r = json.loads(p.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(r, dict) and isinstance(r.get("checks"), list):
            out.append(r)
    return out


def _task_claims(records: Path) -> list[dict]:
    return [c for r in _records(records) for c in r["checks"] if isinstance(c, dict) and isinstance(c.get("name"), str)]


def _last_error(text: str) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    errs = [ln for ln in lines if "Error" in ln or "Exception" in ln]
    return (errs[-1] if errs else (lines[-1] if lines else "no output"))[:500]


def _git_commit(root: Path, out: Path | None = None) -> str:
    """The commit the sweep runs, marked "+uncommitted changes" when a tracked file outside the sweep's own
    output folder ``out`` differs from it (the sweep's records are its output, not a change to its code)."""
    exclude = []
    if out is not None:
        try:
            exclude = [f":(exclude){Path(out).resolve().relative_to(Path(root).resolve()).as_posix()}"]
        except ValueError:  # the output folder is outside the repository
            exclude = []
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, timeout=10)
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no", "--", ".", *exclude],
            cwd=root,
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout.strip()
        return head.stdout.strip() + ("+uncommitted changes" if dirty else "") if head.returncode == 0 else "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def _versions() -> dict:
    import importlib.metadata as md

    vs = {"python": platform.python_version(), "tokensel": __version__}
    for name in ("torch", "numpy", "dask", "distributed", "papermill", "jupytext", "numba"):
        try:
            vs[name] = md.version(name)
        except md.PackageNotFoundError:
            pass
    return vs


def default_workers(threads: int = 1) -> int:
    """Workers for a LocalCluster on this machine: cores // threads per task, at least 1."""
    return max(1, (os.cpu_count() or 1) // max(1, threads))


def _cluster(settings: SweepSettings):
    from dask.distributed import Client, LocalCluster

    if settings.scheduler:
        client = Client(settings.scheduler, timeout="30s")
        info = client.scheduler_info()
        workers = len(info.get("workers", {}))
        return client, None, f"the cluster at {settings.scheduler} ({workers} workers)", workers
    workers = settings.workers or default_workers(settings.threads)
    cluster = LocalCluster(
        n_workers=workers,
        threads_per_worker=1,
        processes=True,
        memory_limit=settings.memory_limit,
        dashboard_address=None,
    )
    client = Client(cluster)
    mem = [w.get("memory_limit") for w in client.scheduler_info().get("workers", {}).values()]
    per = f", {mem[0] / 2**30:.1f} GiB per worker" if mem and mem[0] else ""
    return client, cluster, f"a LocalCluster of {workers} workers x 1 task each{per}", workers


def run_sweep(
    chapters: list[str], seeds: list[int], settings: SweepSettings, root: Path | None = None, command: str | None = None
) -> list[dict]:
    """Run every (chapter, seed) not already finished in ``settings.out`` on Dask and return the outcomes
    of all of them (finished before or now). A task that crashes or times out is recorded as such.
    ``settings.retry`` reruns tasks recorded as crashed or timed out."""
    from tokensel.training.progress import bar

    root = Path(root or Path.cwd()).resolve()
    if not isinstance(chapters, list) or not chapters or not all(isinstance(c, str) for c in chapters):
        raise ArgumentTypeError(f"chapters must be a non-empty list of chapter names, got {chapters!r}")
    if not isinstance(seeds, list) or not seeds:
        raise ArgumentTypeError(f"seeds must be a non-empty list of integers, got {seeds!r}")
    seeds = [check_int(s, "seeds", min=0) for s in seeds]
    if len(set(seeds)) != len(seeds):
        raise InvalidArgumentError(f"seeds: each seed once, got {seeds}")
    threads = check_int(settings.threads, "threads", min=1, max=256)
    if (
        isinstance(settings.timeout, bool)
        or not isinstance(settings.timeout, (int, float))
        or not math.isfinite(settings.timeout)
        or settings.timeout <= 0
    ):
        raise InvalidArgumentError(f"timeout must be a positive number of seconds, got {settings.timeout!r}")
    if settings.workers is not None:
        check_int(settings.workers, "workers", min=1, max=10_000)
    for c in chapters:
        _chapter_source(root, c)
    out = Path(settings.out).resolve()
    tasks = [Task(c, s) for c in chapters for s in seeds]
    digests = {c: code_digest(root, c) for c in chapters}
    done, todo = {}, []
    for t in tasks:
        res = read_result(out, t)
        if res is not None and res.get("code") != digests[t.chapter]:
            res = None  # the chapter's code changed since: run it again
        if res is not None and (not settings.retry or res["status"] in ("ok", "claims failed")):
            done[t] = res
        else:
            todo.append(t)
    print(
        f"replicate: {len(tasks)} tasks ({len(chapters)} chapters x {len(seeds)} seeds), "
        f"{len(done)} already finished in {out}, {len(todo)} to run"
    )
    started, wall, where, workers = time.time(), 0.0, "nothing to run", 0
    commit = _git_commit(root, out)  # before the sweep writes anything
    if todo:
        from dask.distributed import as_completed

        client, cluster, where, workers = _cluster(settings)
        print(f"replicate: running on {where}")
        t0 = time.perf_counter()
        try:
            futures = {
                client.submit(
                    run_task,
                    str(root),
                    str(out),
                    t.chapter,
                    t.seed,
                    float(settings.timeout),
                    threads,
                    settings.extra_params,
                    key=f"replicate-{t.chapter}-{t.seed}",
                    pure=False,
                ): t
                for t in todo
            }
            with bar(len(futures), "chapters x seeds") as pbar:
                for fut in as_completed(futures):
                    t = futures[fut]
                    try:
                        res = fut.result()
                    except Exception as exc:  # the worker died: recorded, never dropped
                        res = dict(
                            chapter=t.chapter,
                            seed=t.seed,
                            status="crashed",
                            seconds=None,
                            error=f"{type(exc).__name__}: {exc}"[:500],
                            claims=0,
                            failed=0,
                        )
                        write_json_atomic(_task_dir(out, t) / "result.json", res)
                    done[t] = res
                    pbar.update(1)
                    pbar.set_postfix(last=f"{t.chapter}@{t.seed}: {res['status']}")
        finally:
            wall = time.perf_counter() - t0
            client.close()
            if cluster is not None:
                cluster.close()
    _append_provenance(
        out,
        dict(
            command=command or "python -m tokensel_book replicate",
            commit=commit,
            versions=_versions(),
            chapters=chapters,
            seeds=seeds,
            ran=[t.key for t in todo],
            wall_seconds=round(wall, 1),
            cluster=where,
            workers=workers,
            threads_per_task=threads,
            host=socket.gethostname(),
            cores=os.cpu_count(),
            started=started,
            finished=time.time(),
            timeout=settings.timeout,
        ),
    )
    return [done[t] for t in tasks]


def _append_provenance(out: Path, sweep: dict) -> None:
    from tokensel.files import lock

    path = out / "provenance.json"
    with lock(out, ".provenance.lock"):  # two sweeps into one folder (other chapters) finish without losing an entry
        try:
            prov = json.loads(path.read_text())
            if not isinstance(prov, dict) or not isinstance(prov.get("sweeps"), list):
                raise ValueError("not a provenance file")
        except (OSError, ValueError):
            prov = {"about": "tokensel replication: each (chapter, seed) executed as one task", "sweeps": []}
        prov["sweeps"].append(sweep)
        write_json_atomic(path, prov)


def load_replication(out: Path, root: Path | None = None) -> tuple[list[dict], list[dict]]:
    """The task outcomes and the claim records (each with ``chapter`` and ``seed``) of a replication folder.

    With ``root`` (the book's folder), tasks whose chapter code has changed since they ran are left out
    (:func:`stale_tasks` lists them)."""
    out = Path(out)
    if not (out / "tasks").is_dir():
        raise InvalidArgumentError(
            f"{str(out)!r} holds no replication (no tasks/ folder): run "
            f"`python -m tokensel_book replicate --out {shlex.quote(str(out))}` first"
        )
    digests: dict[str, str | None] = {}
    results, claims = [], []
    for folder in sorted((out / "tasks").glob("*/seed-*")):
        chapter, seed_s = folder.parent.name, folder.name.removeprefix("seed-")
        if not seed_s.isdigit():
            continue
        res = read_result(out, Task(chapter, int(seed_s)))
        if res is None:
            continue
        if root is not None:
            if chapter not in digests:
                try:
                    digests[chapter] = code_digest(Path(root), chapter)
                except InvalidArgumentError:
                    digests[chapter] = None
            if res.get("code") != digests[chapter]:
                continue
        results.append(res)
        for c in _task_claims(folder / "records"):
            claims.append({**c, "chapter": chapter, "seed": int(seed_s)})
    return results, claims


def stale_tasks(out: Path, root: Path) -> list[str]:
    """Tasks of ``out`` recorded on chapter code that has changed since (or on a chapter that is gone)."""
    every, _ = load_replication(out)
    current, _ = load_replication(out, root)
    keep = {(r["chapter"], r["seed"]) for r in current}
    return [f"{r['chapter']}/seed-{r['seed']}" for r in every if (r["chapter"], r["seed"]) not in keep]


def _threshold(c: dict) -> tuple:
    return (c.get("kind"), c.get("expected"), c.get("tol"))


def summarize(out: Path, root: Path | None = None):
    """One row per claim of a replication: seeds run, seeds where it held, the fraction, min / median /
    max of the measured value, and whether it is seed-dependent (held in fewer than 90 % of the seeds).

    A task that crashed or timed out counts against every claim of its chapter that it did not record
    (the claim was not shown to hold there)."""
    import numpy as np
    import pandas as pd

    results, claims = load_replication(out, root)
    seeds_by_chapter: dict[str, set] = {}
    for r in results:
        seeds_by_chapter.setdefault(r["chapter"], set()).add(r["seed"])
    rows = []
    by_claim: dict[tuple, list[dict]] = {}
    for c in claims:
        by_claim.setdefault((c["chapter"], c["name"]), []).append(c)
    for (chapter, name), cs in by_claim.items():
        seeds = seeds_by_chapter.get(chapter, set())
        held = {c["seed"] for c in cs if c.get("passed") is True}
        failed = {c["seed"] for c in cs if c.get("passed") is not True}
        held -= failed  # a claim checked several times in one run holds only if it held every time
        vals = [
            float(c["measured"])
            for c in cs
            if isinstance(c.get("measured"), (int, float)) and not isinstance(c.get("measured"), bool)
        ]
        vals = [v for v in vals if math.isfinite(v)]
        n = len(seeds)
        rows.append(
            dict(
                chapter=chapter,
                claim=name,
                seeds=n,
                held=len(held),
                fraction=len(held) / n if n else float("nan"),
                min=min(vals) if vals else None,
                median=float(np.median(vals)) if vals else None,
                max=max(vals) if vals else None,
                kind=cs[0].get("kind"),
                expected=cs[0].get("expected"),
                tol=cs[0].get("tol"),
                seed_dependent=bool(n and len(held) / n < SEED_DEPENDENT),
                failed_seeds=sorted(seeds - held),
            )
        )
    frame = pd.DataFrame(
        rows,
        columns=[
            "chapter",
            "claim",
            "seeds",
            "held",
            "fraction",
            "min",
            "median",
            "max",
            "kind",
            "expected",
            "tol",
            "seed_dependent",
            "failed_seeds",
        ],
    )
    if len(frame):
        frame = frame.sort_values(["chapter", "claim"], kind="stable").reset_index(drop=True)
    return frame


def threshold_changes(out: Path, build_claims: list[dict], root: Path | None = None) -> list[dict]:
    """Claims whose threshold (kind, expected value, tolerance) in a build differs from the one the sweep
    recorded, each with the reason from ``OUT/threshold_changes.json`` (None when none is given)."""
    _, claims = load_replication(out, root)
    swept: dict[tuple, tuple] = {}
    for c in claims:
        swept.setdefault((c["chapter"], c["name"]), _threshold(c))
    reasons = {}
    path = Path(out) / "threshold_changes.json"
    if path.exists():
        try:
            data = json.loads(path.read_text())
        except ValueError as exc:
            raise InvalidArgumentError(
                f'{str(path)!r} is not JSON ({exc}): it lists [{{"chapter": ..., "claim": ..., "reason": ...}}]'
            ) from exc
        if not isinstance(data, list) or not all(
            isinstance(d, dict) and isinstance(d.get("reason"), str) for d in data
        ):
            raise InvalidArgumentError(
                f'{str(path)!r} must be a list of {{"chapter": ..., "claim": ..., "reason": ...}}'
            )
        reasons = {(d.get("chapter"), d.get("claim")): d["reason"] for d in data}
    changed = []
    for c in build_claims:
        key = (c.get("chapter"), c.get("name"))
        if key in swept and swept[key] != _threshold(c):
            changed.append(
                dict(chapter=key[0], claim=key[1], swept=swept[key], now=_threshold(c), reason=reasons.get(key))
            )
    return changed


def chapter_times(out: Path):
    """Median seconds per task for each chapter of a replication (for planning a sweep)."""
    import pandas as pd

    results, _ = load_replication(out)
    frame = pd.DataFrame(results)
    if frame.empty:
        return frame
    return frame.groupby("chapter").seconds.median()


def _allowed(claim: dict, m: float, e: float, rtol: float) -> float:
    """How far two measurements of one claim may differ and still count as the same: ``rtol`` of their size,
    or ``10 * rtol`` of the claim's own scale (its tolerance for ``abs``, tolerance x expected for ``rel``, the
    expected value for ``le`` / ``ge``), whichever is larger: round-off in a value far below its threshold
    (an error of 1e-16 against a tolerance of 1e-13) is not a difference."""
    exp, tol, kind = claim.get("expected"), claim.get("tol"), claim.get("kind")
    scale = 0.0
    num = (int, float)
    if kind == "abs" and isinstance(tol, num):
        scale = abs(tol)
    elif kind == "rel" and isinstance(tol, num) and isinstance(exp, num):
        scale = abs(tol * exp)
    elif kind in ("le", "ge") and isinstance(exp, num):
        scale = abs(exp)
    return max(rtol * max(abs(m), abs(e)), 10 * rtol * scale)


def compare(out: Path, recorded: Path, root: Path, rtol: float = 1e-3) -> list[str]:
    """Differences between the tasks of ``out`` and the same (chapter, seed) tasks of ``recorded``, both on the
    chapters' present code: a task that did not finish, a claim recorded in one and not the other, a claim that
    held in one and failed in the other, or a measured value that differs by more than ``rtol`` of its size or of
    the claim's scale (``_allowed``). Empty when ``out`` reproduces the recorded replication."""
    got_results, got = load_replication(out, root)
    ref_results, ref = load_replication(recorded, root)
    ref_tasks = {(r["chapter"], r["seed"]) for r in ref_results}
    problems = [
        f"{r['chapter']} at seed {r['seed']}: {r['status']}: {r.get('error', '')}"
        for r in got_results
        if r["status"] in ("crashed", "timed out")
    ]
    index: dict[tuple, list[dict]] = {}
    for c in ref:
        index.setdefault((c["chapter"], c["seed"], c["name"]), []).append(c)
    seen = set()
    for c in got:
        key = (c["chapter"], c["seed"], c["name"])
        if key[:2] not in ref_tasks:
            continue
        seen.add(key)
        if key not in index:
            problems.append(f"{key[0]} at seed {key[1]}: {key[2]!r} is not in the recorded replication")
            continue
        r = index[key][0]
        if (c.get("passed") is True) != (r.get("passed") is True):
            problems.append(
                f"{key[0]} at seed {key[1]}: {key[2]!r} {'held' if c.get('passed') else 'failed'} here, "
                f"{'held' if r.get('passed') else 'failed'} in the recorded replication"
            )
        m, e = c.get("measured"), r.get("measured")
        if isinstance(m, (int, float)) and isinstance(e, (int, float)) and not isinstance(m, bool):
            if abs(m - e) > _allowed(r, m, e, rtol):
                problems.append(f"{key[0]} at seed {key[1]}: {key[2]!r} measured {m!r} here, {e!r} recorded")
    compared = {(r["chapter"], r["seed"]) for r in got_results} & ref_tasks
    for key in index:
        if key[:2] in compared and key not in seen:
            problems.append(f"{key[0]} at seed {key[1]}: {key[2]!r} recorded, missing here")
    if not compared:
        problems.append("no task of this run is in the recorded replication (other chapters, seeds or code)")
    return problems


def summary_text(out: Path) -> str:
    """The summary of a replication folder as lines for a terminal."""
    frame = summarize(out)
    results, _ = load_replication(out)
    counts = {s: sum(r["status"] == s for r in results) for s in STATUSES}
    lines = [f"replication in {out}: {len(results)} tasks: " + ", ".join(f"{v} {k}" for k, v in counts.items())]
    for r in results:
        if r["status"] in ("crashed", "timed out"):
            lines.append(f"  {r['chapter']} at seed {r['seed']}: {r['status']}: {r.get('error', '')}")
    dep = frame[frame.seed_dependent] if len(frame) else frame
    lines.append(
        f"{len(frame)} claims; held in every seed: {int((frame.fraction == 1).sum()) if len(frame) else 0}; "
        f"seed-dependent (held in < {SEED_DEPENDENT:.0%}): {len(dep)}"
    )
    for row in frame.itertuples() if len(frame) else []:
        if row.held < row.seeds:
            lines.append(
                f"  {row.chapter}: {row.claim}: held in {row.held} of {row.seeds} seeds"
                f"{' (seed-dependent)' if row.seed_dependent else ''}"
            )
    return "\n".join(lines)


def main(argv=None, root: Path | None = None, default_chapters: list[str] | None = None) -> int:
    """``python -m tokensel_book replicate``: run chapters at fresh seeds on Dask and summarise them. ``root``: the
    book's folder (default the working directory); ``default_chapters``: what runs without ``--chapters``."""
    import argparse

    ap = argparse.ArgumentParser(prog="python -m tokensel_book replicate", description=main.__doc__)
    ap.add_argument(
        "--chapters",
        nargs="+",
        metavar="CHAPTER",
        help="chapters to run (names as in _toc.yml, e.g. 01_model); default: every numbered chapter",
    )
    ap.add_argument("--seeds", type=int, default=2, help="how many fresh seeds (default 2)")
    ap.add_argument(
        "--first-seed",
        type=int,
        default=0,
        metavar="I",
        help="start at fresh seed number I (default 0: seeds 1000, 1100, ...)",
    )
    ap.add_argument("--out", default=str(RECORDED), help=f"results folder (default {RECORDED})")
    ap.add_argument("--workers", type=int, help="LocalCluster workers (default: cores / threads)")
    ap.add_argument("--threads", type=int, default=1, help="threads each chapter may use (default 1)")
    ap.add_argument("--scheduler", metavar="ADDRESS", help="use the Dask cluster at ADDRESS instead of a LocalCluster")
    ap.add_argument("--timeout", type=float, default=1800.0, help="seconds a task may run (default 1800)")
    ap.add_argument("--retry", action="store_true", help="run again the tasks recorded as crashed or timed out")
    ap.add_argument("--summary", action="store_true", help="run nothing; summarise the results folder")
    ap.add_argument(
        "--compare",
        metavar="DIR",
        help="after the run, compare every task with the same task of the replication in DIR "
        "(exit 1 on any difference)",
    )
    ap.add_argument(
        "--strict",
        action="store_true",
        help="exit 1 when a task crashed or timed out, or a chapter's claims differ between seeds in number",
    )
    args = ap.parse_args(argv)
    root = Path(root or Path.cwd())
    out = Path(args.out)
    out = out if out.is_absolute() else root / out
    if not args.summary:
        chapters = args.chapters or default_chapters
        if not chapters:
            raise InvalidArgumentError("--chapters: name the chapters to run (e.g. --chapters 01_model 02_one_step)")
        seeds = fresh_seeds(args.seeds, args.first_seed)
        settings = SweepSettings(
            out=out,
            workers=args.workers,
            threads=args.threads,
            scheduler=args.scheduler,
            timeout=args.timeout,
            retry=args.retry,
        )
        command = "python -m tokensel_book replicate " + " ".join(shlex.quote(a) for a in (argv or sys.argv[2:]))
        run_sweep(chapters, seeds, settings, root=root, command=command.strip())
    print(summary_text(out))
    if args.compare:
        ref = Path(args.compare)
        diffs = compare(out, ref if ref.is_absolute() else root / ref, root)
        for line in diffs:
            print(f"  differs: {line}")
        print(f"replicate: {'reproduces' if not diffs else 'does NOT reproduce'} the replication in {args.compare}")
        if diffs:
            return 1
    if args.strict:
        results, _ = load_replication(out)
        bad = [r for r in results if r["status"] in ("crashed", "timed out")]
        if bad:
            print(f"replicate: {len(bad)} tasks crashed or timed out", file=sys.stderr)
            return 1
    return 0


def _num(x) -> str:
    return "" if x is None or (isinstance(x, float) and not math.isfinite(x)) else f"{x:.4g}"


def status_table(claims, out: Path, root: Path | None = None):
    """For the status page: every claim of this build (``claims``, the frame of
    ``tokensel_book.status.report``) with how it fared at the fresh seeds of the replication in ``out``:
    ``held in k of N``, min / median / max of the measured value, and a verdict (``robust``: held in every
    seed; ``held in most``: in at least 90 %; ``seed-dependent``: in fewer; ``not replicated``)."""
    import pandas as pd

    summary = summarize(out, root)
    index = {(r.chapter, r.claim): r for r in summary.itertuples()} if len(summary) else {}
    rows = []
    for c in claims.itertuples():
        r = index.get((c.chapter, c.name))
        if r is None:
            rows.append(
                dict(
                    chapter=c.chapter,
                    claim=c.name,
                    **{"fresh seeds": "not replicated"},
                    min="",
                    median="",
                    max="",
                    verdict="not replicated",
                )
            )
            continue
        verdict = "robust" if r.held == r.seeds else "seed-dependent" if r.seed_dependent else "held in most"
        rows.append(
            dict(
                chapter=c.chapter,
                claim=c.name,
                **{"fresh seeds": f"held in {r.held} of {r.seeds}"},
                min=_num(r.min),
                median=_num(r.median),
                max=_num(r.max),
                verdict=verdict,
            )
        )
    return pd.DataFrame(rows, columns=["chapter", "claim", "fresh seeds", "min", "median", "max", "verdict"])


_NOTES: dict = {}


def note(root: Path, chapter: str, claim: str) -> str | None:
    """What the recorded replication of the book in ``root`` says of one claim, in words for the chapter's
    check line: ``fresh seeds: held in k of N (min .. max)``, marked *seed-dependent* below 90 %; None when
    the claim was not replicated on the chapter's present code. Read once per process and chapter."""
    key = (str(root), chapter)
    if key not in _NOTES:
        recorded = Path(root) / RECORDED
        table = {}
        try:
            if (recorded / "tasks" / chapter).is_dir():
                frame = summarize(recorded, root)
                table = {r.claim: r for r in frame.itertuples() if r.chapter == chapter}
        except (InvalidArgumentError, OSError, ValueError):
            table = {}
        _NOTES[key] = table
    r = _NOTES[key].get(claim)
    if r is None:
        return None
    spread = f"; measured {_num(r.min)} .. {_num(r.max)}" if r.min is not None else ""
    flag = ", seed-dependent" if r.seed_dependent else ""
    return f"fresh seeds: held in {r.held} of {r.seeds}{flag}{spread}"
