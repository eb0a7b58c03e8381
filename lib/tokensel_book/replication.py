"""Replication across fresh seeds: every chapter's claims run again at seeds the book never used, on Dask.

A *task* is one (chapter, seed). It runs in a Dask worker's own process, in one IPython shell kept warm between
tasks (its namespace reset, the modules already imported), one task at a time per worker. It carries what the sweep
needs (its settings, the versions of the software it expects): a worker started elsewhere gets the submitting
shell's settings, and a worker whose software or hash seed differs is refused with one line. Each task writes
``OUT/tasks/<chapter>/seed-<seed>/result.json`` (sealed) and the chapter's record; a task is *current* while the
chapter's code, every project file its run imported or read, the software and the settings are the sweep's. A
resumed sweep runs the others again, and the summary counts current tasks only. Fresh seeds are
``FRESH_BASE + STRIDE * i``; a chapter draws ``seed + k`` with ``0 <= k < STRIDE``; the book is built at seed 0.
"""

from __future__ import annotations

import csv
import hashlib
import json
import math
import os
import platform
import sys
import threading
import time
from importlib.metadata import version
from pathlib import Path

from tokensel.errors import InvalidArgumentError, TokenselError
from tokensel.files import write_json_atomic

from .claims import MIME, claims_table, dependencies, record_problems, seal
from .toc import book_root, page_source

FRESH_BASE, STRIDE, SEED_DEPENDENT = 1000, 100, 0.9
RECORDED = Path("book") / "recorded" / "replication"
PACKAGES = ("torch", "numpy", "scipy", "pandas", "numba", "cvxpy", "clarabel", "datasets", "pyarrow", "regex", "sympy",
            "matplotlib", "ipython")  # fmt: skip
#: settings a task carries from the submitting shell (the rest of a worker's environment is its own)
CARRIED = ("TOKENSEL_", "HF_")
#: settings that a process fixes when it starts: a worker must have been started with the sweep's
AT_START = ("PYTHONHASHSEED",)


def fresh_seeds(n: int, start: int = 0) -> list[int]:
    return [FRESH_BASE + STRIDE * i for i in range(start, start + n)]


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """The 95 % Wilson interval of a frequency ``k / n``."""
    if n == 0:
        return (0.0, 1.0)
    p, d = k / n, 1 + z * z / n
    mid, half = (p + z * z / (2 * n)) / d, z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / d
    return (max(0.0, mid - half), min(1.0, mid + half))


def software() -> dict:
    """What a task's numbers depend on besides the project's files: Python, the packages, the hash seed."""
    return {"python": platform.python_version(), **{p: version(p) for p in PACKAGES}} | {
        k: os.environ.get(k, "") for k in AT_START
    }


def code_cells(root: Path, chapter: str) -> tuple[list[str], int]:
    """A chapter's code cells and the index of its ``parameters`` cell (a chapter without one has no seed to set)."""
    import jupytext

    cells = [c for c in jupytext.read(page_source(root, chapter)).cells if c.cell_type == "code"]
    tagged = [i for i, c in enumerate(cells) if "parameters" in c.metadata.get("tags", [])]
    if len(tagged) != 1:
        raise InvalidArgumentError(f"{chapter} needs exactly one code cell tagged `parameters` (its seed)")
    return [c.source for c in cells], tagged[0]


def code_digest(root: Path, chapter: str) -> str:
    return hashlib.sha256(json.dumps(code_cells(root, chapter)).encode()).hexdigest()


def settings_now() -> dict:
    """The settings of the submitting shell that travel with each task (data locations too)."""
    return {k: v for k, v in sorted(os.environ.items()) if k.startswith(CARRIED) and k != "TOKENSEL_CLAIMS"}


#: settings that say where things are, not what is computed (the data's content is compared instead)
WHERE = ("TOKENSEL_DATA_DIR", "TOKENSEL_CACHE_DIR", "TOKENSEL_IMDB_ARCHIVE", "TOKENSEL_PROGRESS", "HF_HOME")


def settings_key(settings: dict) -> dict:
    """What a task records of its settings: digests of the values (a value may be a secret), the places left out,
    the content of the data folder and archive in their stead."""
    from .execution import tree_digest

    key = {k: hashlib.sha256(v.encode()).hexdigest()[:16] for k, v in settings.items() if not k.startswith(WHERE)}
    for k in ("TOKENSEL_DATA_DIR", "TOKENSEL_IMDB_ARCHIVE"):
        if settings.get(k) and Path(settings[k]).exists():
            key[f"{k} content"] = tree_digest(Path(settings[k]))
    return key


def project_files(record: dict, root: Path) -> dict[str, str | None]:
    """The project files a run imported or read, relative to the book's root, with their digests."""
    n = len(base := str(Path(root)) + os.sep)
    return {f[n:]: d for f, d in record["depends"]["files"].items() if f.startswith(base)}


def _same_files(files: dict, record: dict) -> bool:
    """Whether a task's project files (relative, with digests) are exactly those its record lists under the folder
    it ran in, wherever that was: a sweep recorded in one clone is read in another."""
    deps = record["depends"]["files"]
    rel = next(iter(files), None)
    where = next((a[: -len(rel)] for a in deps if rel is not None and a.endswith("/" + rel)), None)
    return where is not None and {a[len(where) :]: d for a, d in deps.items() if a.startswith(where)} == files


# ------------------------------------------------------------------------------------------- a task, on a worker

_SHELL_LOCK = threading.Lock()  # one chapter at a time per worker process, whatever its thread count


def _execute(cells: list[str], at: int, seed: int, timeout: float) -> tuple[dict | None, str]:
    """Run a chapter's cells in this process's IPython shell (namespace reset), the parameters cell followed by
    ``seed = <seed>``; its record and the first error."""
    import matplotlib

    matplotlib.use("Agg")
    from IPython.core.interactiveshell import InteractiveShell
    from IPython.utils.capture import capture_output

    shell = InteractiveShell.instance(cache_size=0)  # no output cache: its flush in reset is a full gc, 0.2 s
    shell.reset(new_session=False)
    deadline, error = time.monotonic() + timeout, ""
    with capture_output(display=True) as shown:
        for i, cell in enumerate(cells):
            if time.monotonic() > deadline:
                error = f"timed out after {timeout:.0f} s"
                break
            result = shell.run_cell(cell + (f"\nseed = {seed}" if i == at else ""), store_history=False)
            if result.error_in_exec is not None or result.error_before_exec is not None:
                exc = result.error_in_exec or result.error_before_exec
                error = f"{type(exc).__name__}: {exc}"[:300]
                break
    import matplotlib.pyplot as plt

    plt.close("all")
    records = [o.metadata[MIME] for o in shown.outputs if MIME in (o.metadata or {})]
    return (records[-1] if records else None), error


def warm() -> None:
    """A worker's start-up before its first task: seaborn (scipy: 2 s) imported, the imported files' digests taken."""
    __import__("seaborn")
    dependencies()


def run_task(spec: dict) -> dict:
    """Run one task of a sweep (in a Dask worker) and write its result; see the module."""
    folder = Path(spec["out"]) / "tasks" / spec["chapter"] / f"seed-{spec['seed']}"
    mine = software()
    differ = [f"{k} {mine.get(k)!r} (the sweep's: {v!r})" for k, v in spec["software"].items() if mine.get(k) != v]
    result = {k: spec[k] for k in ("chapter", "seed", "code", "software")} | {
        "settings": settings_key(spec["settings"])
    }
    if differ:
        result.update(status="refused", error=f"worker {platform.node()} has {'; '.join(differ)}", seconds=0.0)
        return result
    from . import claims

    claims.REPLICATION_NOTES = False
    with _SHELL_LOCK:
        saved = dict(os.environ)
        os.environ.update(spec["settings"], TOKENSEL_CLAIMS="report", TOKENSEL_PROGRESS="0", MPLBACKEND="Agg")
        cwd, here = os.getcwd(), str(page_source(Path(spec["root"]), spec["chapter"]).parent)
        t0 = time.perf_counter()
        try:
            os.chdir(here)  # as the book runs a page: in its own folder, which it can import from
            sys.path.insert(0, here)
            record, error = _execute(spec["cells"], spec["at"], spec["seed"], spec["timeout"])
        finally:
            sys.path.remove(here)
            os.chdir(cwd)
            os.environ.clear()
            os.environ.update(saved)
        seconds, ended = time.perf_counter() - t0, time.time()  # inside the lock: the spans of a worker's tasks
    if record is not None and record.get("seed") != spec["seed"]:
        error, record = (
            f"the chapter ran at seed {record.get('seed')!r}, not {spec['seed']}: is `seed` its parameter?",
            None,
        )
    if record is not None:  # the chapter finished: end_chapter raises on a failed claim, which the record holds
        status, error = ("claims failed" if any(not c["passed"] for c in record["checks"]) else "ok"), ""
    else:
        status = "timed out" if error.startswith("timed out") else "crashed"
    result.update(status=status, error=error, seconds=round(seconds, 2), worker=platform.node(), ended=ended)
    if record is not None:
        base = str(Path(spec["root"])) + os.sep  # the project's files only: the versions cover the ~3,400 others
        record["depends"]["files"] = {f: d for f, d in record["depends"]["files"].items() if f.startswith(base)}
        record["seal"] = seal(record)
        result.update(chapter_seconds=round(record["seconds"], 2), files=project_files(record, Path(spec["root"])))
        write_json_atomic(folder / "record.json", record)
    result["seal"] = seal(result)
    write_json_atomic(folder / "result.json", result)
    return result


# ------------------------------------------------------------------------------------------- reading a sweep


#: a task's result and record are small: a larger file is not one the sweep wrote
MAX_TASK_FILE = 2**24


def _read_json(path: Path):
    if path.stat().st_size > MAX_TASK_FILE:
        raise ValueError(f"{path.name} is over {MAX_TASK_FILE} bytes")
    return json.loads(path.read_text())


def read_task(
    folder: Path, root: Path, current: dict | None = None, digest=None
) -> tuple[dict | None, dict | None, str]:
    """``(result, record, why it does not count)`` of a task folder; ``current``: the sweep's code and software,
    else what this tree has now (a task of another version, or a hand-edited one, does not count)."""
    try:
        result = _read_json(folder / "result.json")
        record = _read_json(folder / "record.json") if (folder / "record.json").is_file() else None
    except (OSError, ValueError) as exc:
        return None, None, f"unreadable ({exc})"
    if not isinstance(result, dict) or result.get("seal") != seal(result):
        return None, None, "result.json does not match its seal"
    chapter = result["chapter"]
    viewing = current is None  # what counts on a page: the code, files and packages, not the viewer's settings
    if current is None:
        current = {"code": code_digest(root, chapter), "software": software(), "settings": None}
    if result["code"] != current["code"]:
        return result, None, "the chapter's code changed"
    mine = {k: v for k, v in result["software"].items() if not (viewing and k in AT_START)}
    if mine != {k: v for k, v in current["software"].items() if not (viewing and k in AT_START)}:
        return result, None, "other software"
    if current["settings"] is not None and result["settings"] != current["settings"]:
        return result, None, "other settings"
    from .claims import file_digest

    digest = digest or file_digest
    changed = [f for f, d in (result.get("files") or {}).items() if digest(str(root / f)) != d]
    if changed:
        return result, None, f"{changed[0]} changed"
    if record is not None:
        problems = record_problems(record, claims_table(page_source(root, chapter)))
        problems = [p for p in problems if not p.startswith("claim failed")]
        if problems or record.get("seed") != result["seed"] or not _same_files(result.get("files") or {}, record):
            return None, None, f"its record cannot be trusted ({(problems or ['another seed or other files'])[0]})"
    return result, record, ""


def load(out: Path, root: Path, chapter: str = "*") -> tuple[list[dict], list[dict], list[str]]:
    """The current tasks of a sweep folder (results), their records, and why the others do not count."""
    from functools import lru_cache

    from .claims import file_digest

    found, skipped, digest = [], [], lru_cache(maxsize=None)(file_digest)  # a data file is read once, not per task
    for folder in sorted(Path(out).glob(f"tasks/{chapter}/seed-*")):
        result, record, why = read_task(folder, root, digest=digest)
        if why:
            skipped.append(f"{folder.parent.name} at {folder.name}: {why}")
        elif result is not None and result["status"] != "refused":
            found.append((folder, result, record))
    # a chapter's tasks count under one set of settings and data, its newest task's: never two sweeps mixed
    newest: dict[str, dict] = {}
    for _, r, _ in sorted(found, key=lambda t: t[1].get("ended", 0.0)):
        newest[r["chapter"]] = r["settings"]
    results, records = [], []
    for folder, r, record in found:
        if r["settings"] != newest[r["chapter"]]:
            skipped.append(f"{folder.parent.name} at {folder.name}: other settings or data than the newest task's")
            continue
        results.append(r)
        records += [record] if record is not None else []
    return results, records, skipped


def summarize(out: Path, root: Path, chapter: str = "*"):
    """One row per claim of the chapters' tables: in how many current tasks it held (``k`` of ``n``; a task that
    crashed before a claim counts against it), its 95 % interval, and min / median / max of its value."""
    import numpy as np
    import pandas as pd

    results, records, _ = load(out, root, chapter)
    by_chapter: dict[str, list] = {}
    for r in results:
        by_chapter.setdefault(r["chapter"], []).append(r)
    made: dict = {}  # per task and claim: its first failed check, else its last (a claim made k times holds if all do)
    for r in records:
        task = made.setdefault((r["chapter"], r["seed"]), {})
        for c in r["checks"]:
            if c["id"] not in task or task[c["id"]]["passed"]:
                task[c["id"]] = c
    rows = []
    for chapter, tasks in sorted(by_chapter.items()):
        for cid, row in claims_table(page_source(root, chapter)).items():
            got = [made.get((chapter, t["seed"]), {}).get(cid) for t in tasks]
            held = [t["seed"] for t, c in zip(tasks, got, strict=True) if c is not None and c["passed"]]
            values = [c["measured"] for c in got if c is not None and isinstance(c["measured"], (int, float))]
            values = [float(v) for v in values if math.isfinite(v)]
            lo, hi = wilson(len(held), len(tasks))
            rows.append(
                dict(
                    chapter=chapter, id=cid, claim=row.claim, k=len(held), n=len(tasks), low=lo, high=hi,
                    min=min(values, default=None), median=float(np.median(values)) if values else None,
                    max=max(values, default=None), seed_dependent=len(held) < SEED_DEPENDENT * len(tasks),
                    failed_seeds=" ".join(str(t["seed"]) for t in tasks if t["seed"] not in held),
                )
            )  # fmt: skip
    return pd.DataFrame(rows, columns=list(rows[0]) if rows else ["chapter", "id", "claim", "k", "n"])


_NOTES: dict = {}


def note(root: Path | None, chapter: str, claim_id: str) -> str | None:
    """What the book's recorded replication says of one claim, for its check line: its current tasks only, as the
    status page counts them (None: not replicated at this version)."""
    if root is None:
        return None
    if (root, chapter) not in _NOTES:
        frame = summarize(Path(root) / RECORDED, Path(root), chapter)
        _NOTES[(root, chapter)] = {r["id"]: r for r in frame.to_dict("records")}
    r = _NOTES[(root, chapter)].get(claim_id)
    if r is None or not r["n"]:
        return None
    flag = ", seed-dependent" if r["seed_dependent"] else ""
    return f"fresh seeds: held in {r['k']} of {r['n']} (95 % interval {r['low']:.2f}-{r['high']:.2f}){flag}"


def compare(out: Path, recorded: Path, root: Path, rtol: float = 1e-3) -> list[str]:
    """Every difference between the tasks of ``out`` and the same tasks of ``recorded`` (a verdict, a value beyond
    ``rtol`` and the claim's own tolerance, a claim made in one only)."""
    ours, theirs = (load(p, root) for p in (out, recorded))
    index = {(r["chapter"], r["seed"]): {c["id"]: c for c in r["checks"]} for r in theirs[1]}
    problems = [f"not current: {s}" for s in ours[2]]
    for r in ours[1]:
        ref = index.get((r["chapter"], r["seed"]))
        if ref is None:
            problems.append(f"{r['chapter']} at seed {r['seed']}: not in the recorded replication")
            continue
        mine = {c["id"]: c for c in r["checks"]}
        for cid in sorted(set(mine) | set(ref)):
            a, b = mine.get(cid), ref.get(cid)
            where = f"{r['chapter']} at seed {r['seed']}: {cid!r}"
            if a is None or b is None:
                problems.append(f"{where} made in one run only")
            elif a["passed"] != b["passed"]:
                problems.append(f"{where} {'held' if a['passed'] else 'failed'} here, not in the recorded run")
            elif isinstance(a["measured"], float) and isinstance(b["measured"], float):
                allowed = max(rtol * abs(b["measured"]), 1e-12, (b["tol"] or 0.0) if b["kind"] == "abs" else 0.0)
                if abs(a["measured"] - b["measured"]) > allowed:
                    problems.append(f"{where} measured {a['measured']:.6g} here, {b['measured']:.6g} recorded")
    return problems


# ------------------------------------------------------------------------------------------- a sweep


def sweep(root: Path, chapters: list[str], seeds: list[int], out: Path, scheduler: str | None = None,
          workers: int = 2, timeout: float = 1800.0) -> list[dict]:  # fmt: skip
    """Run every (chapter, seed) not current in ``out`` on a Dask cluster (``scheduler``'s, else a LocalCluster of
    ``workers`` single-threaded workers); print one line per task; write ``summary.csv`` beside the tasks."""
    from dask.distributed import Client, LocalCluster, as_completed

    root, out = Path(root), Path(out)
    for chapter in chapters:
        if not page_source(root, chapter).is_file():
            raise InvalidArgumentError(f"{chapter!r} is not a page of the book (no {page_source(root, chapter)})")
    cluster = None if scheduler else LocalCluster(n_workers=workers, threads_per_worker=1, processes=True)
    client = Client(scheduler or cluster)
    try:
        expected, settings = software(), settings_now()
        found = client.run(software)
        if not found:
            raise TokenselError(f"the cluster at {scheduler} has no worker: start one (`dask worker {scheduler}`)")
        seeds_found = {s.get("PYTHONHASHSEED") for s in found.values()}
        expected["PYTHONHASHSEED"] = max(
            seeds_found, key=lambda v: sum(s.get("PYTHONHASHSEED") == v for s in found.values())
        )
        for w, s in found.items():
            d = [k for k in expected if s.get(k) != expected[k]]
            if d:
                what = ", ".join(f"{k} ({s.get(k)!r}, not {expected[k]!r})" for k in d)
                raise TokenselError(f"worker {w} differs from the sweep in {what}: start every worker alike")
        client.run(warm)
        specs = []
        for chapter in chapters:
            (cells, at), code = code_cells(root, chapter), code_digest(root, chapter)
            current = {"code": code, "software": expected, "settings": settings_key(settings)}
            for seed in seeds:
                folder = out / "tasks" / chapter / f"seed-{seed}"
                result, _, why = (
                    read_task(folder, root, current) if (folder / "result.json").is_file() else (None, None, "new")
                )
                if why or result is None or result["status"] not in ("ok", "claims failed"):
                    specs.append(dict(root=str(root), out=str(out), chapter=chapter, seed=seed, cells=cells, at=at,
                                      code=code, software=expected, settings=settings, timeout=timeout))  # fmt: skip
        print(f"replicate: {len(specs)} tasks to run ({len(chapters) * len(seeds) - len(specs)} current)", flush=True)
        results = []
        futures = [client.submit(run_task, s, pure=False, key=f"{s['chapter']}-{s['seed']}") for s in specs]
        for future in as_completed(futures):
            r = future.result()
            results.append(r)
            print(f"  {r['chapter']} seed {r['seed']}: {r['status']} in {r['seconds']:.1f} s {r.get('error', '')}",
                  flush=True)  # fmt: skip
    finally:
        client.close()
        if cluster is not None:
            cluster.close()
    summarize(out, root).to_csv(out / "summary.csv", index=False, quoting=csv.QUOTE_MINIMAL, float_format="%.6g")
    return results


def main(argv=None, root: Path | None = None, default_chapters: list[str] | None = None) -> int:
    """``python -m tokensel_book replicate``: run chapters at fresh seeds and summarise them."""
    import argparse

    ap = argparse.ArgumentParser(prog="python -m tokensel_book replicate", description=main.__doc__)
    ap.add_argument("--chapters", nargs="+", metavar="CHAPTER", help="e.g. 01_model (default: every chapter)")
    ap.add_argument("--seeds", type=int, default=2, help="how many fresh seeds (default 2)")
    ap.add_argument("--first-seed", type=int, default=0, metavar="I", help="start at fresh seed number I")
    ap.add_argument("--out", default=str(RECORDED), help=f"results folder (default {RECORDED})")
    ap.add_argument("--workers", type=int, default=2, help="LocalCluster workers (default 2)")
    ap.add_argument("--scheduler", metavar="ADDRESS", help="the Dask scheduler of a running cluster")
    ap.add_argument("--timeout", type=float, default=1800.0, help="seconds a task may run (default 1800)")
    ap.add_argument("--compare", metavar="DIR", help="then compare every task with the same task of DIR")
    args = ap.parse_args(argv)
    from tokensel.files import existing, writable

    root = Path(root or book_root() or Path.cwd())
    out = writable(args.out, "folder", "--out (the replication's folder)", at=root)
    if args.compare is not None:
        existing(args.compare, "folder", "--compare (the replication to compare with)", at=root)
    chapters = args.chapters or default_chapters
    if not chapters:
        raise InvalidArgumentError("--chapters: name the chapters to run (e.g. --chapters 01_model 02_one_step)")
    if args.seeds < 1:
        raise InvalidArgumentError(f"--seeds must be at least 1, got {args.seeds}")
    results = sweep(root, chapters, fresh_seeds(args.seeds, args.first_seed), out, args.scheduler, args.workers,
                    args.timeout)  # fmt: skip
    bad = [r for r in results if r["status"] in ("crashed", "timed out", "refused")]
    print(
        f"replicate: {len(results)} tasks run, {len(bad)} crashed, timed out or refused; summary: {out / 'summary.csv'}"
    )
    if args.compare:
        ref = Path(args.compare) if Path(args.compare).is_absolute() else root / args.compare
        diffs = compare(out, ref, root)
        for line in diffs:
            print(f"  differs: {line}")
        print(f"replicate: {'reproduces' if not diffs else 'does NOT reproduce'} the replication in {args.compare}")
        return 1 if diffs or bad else 0
    return 1 if bad else 0
