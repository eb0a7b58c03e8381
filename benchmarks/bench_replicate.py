"""Benchmark: the parallel efficiency of a replication sweep on Dask.

The same tasks (chapter 01 at ``--seeds`` fresh seeds, each a papermill run in a fresh kernel) are run
twice through :func:`tokensel_book.replication.run_sweep`, into two empty folders: on a LocalCluster of one
worker, then of ``--workers`` workers. Both runs must give the same claim values. Last line:
``replicate: t1=<s> tW=<s> workers=W speedup=<t1/tW> efficiency=<speedup/W>``.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from tokensel_book import replication as rep

ROOT = Path(__file__).resolve().parents[1]


def _sweep(out: Path, chapters, seeds, workers: int) -> float:
    t0 = time.perf_counter()
    results = rep.run_sweep(chapters, seeds, rep.SweepSettings(out=out, workers=workers), root=ROOT)
    bad = [r for r in results if r["status"] in ("crashed", "timed out")]
    if bad:
        raise SystemExit(f"replicate benchmark: tasks did not finish: {bad}")
    return time.perf_counter() - t0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--chapters", nargs="+", default=["01_model"])
    ap.add_argument("--seeds", type=int, default=4)
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args()
    seeds = rep.fresh_seeds(args.seeds)
    with tempfile.TemporaryDirectory() as tmp:
        one, many = Path(tmp) / "one", Path(tmp) / "many"
        t1 = _sweep(one, args.chapters, seeds, 1)
        tw = _sweep(many, args.chapters, seeds, args.workers)
        diffs = rep.compare(many, one, ROOT, rtol=0.0)
        if diffs:
            raise SystemExit("replicate benchmark: the two runs differ:\n" + "\n".join(diffs))
    speedup = t1 / tw
    print(f"replicate: {len(args.chapters)} chapters x {len(seeds)} seeds; identical claims in both runs")
    print(
        f"replicate: t1={t1:.1f} tW={tw:.1f} workers={args.workers} speedup={speedup:.2f} "
        f"efficiency={speedup / args.workers:.2f}"
    )


if __name__ == "__main__":
    main()
