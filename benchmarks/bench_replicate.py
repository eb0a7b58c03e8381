"""Benchmark: what a replication task costs beyond its chapter, and how a sweep scales over workers.

Chapter 01 at ``--seeds`` fresh seeds (8 by default) is swept twice into empty folders: on one worker, then on
``--workers`` (2), each timed from its first task's start to its last task's end. Per task, the overhead is the
task's wall time minus the chapter's own execution time (its record's ``seconds``). Both sweeps must give the same
claim values. Lines::

    replicate: overhead per task <s> s (<p> % of the chapter's <s> s); tasks per hour on W workers <n>
    replicate: t1=<s> tW=<s> workers=W speedup=<t1/tW> efficiency=<speedup/W>
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from pathlib import Path

from tokensel_book import replication as rep

ROOT = Path(__file__).resolve().parents[1]


def sweep(out: Path, chapters, seeds, workers: int) -> tuple[float, list[dict]]:
    """The sweep's wall time from its first task's start to its last task's end (the cluster's start aside)."""
    results = rep.sweep(ROOT, chapters, seeds, out, workers=workers)
    bad = [r for r in results if r["status"] not in ("ok", "claims failed")]
    if bad:
        raise SystemExit(f"replicate benchmark: tasks did not finish: {bad}")
    return max(r["ended"] for r in results) - min(r["ended"] - r["seconds"] for r in results), results


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--chapters", nargs="+", default=["01_model"])
    ap.add_argument("--seeds", type=int, default=8)
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args()
    seeds = rep.fresh_seeds(args.seeds)
    with tempfile.TemporaryDirectory() as tmp:
        t1, _ = sweep(Path(tmp) / "one", args.chapters, seeds, 1)
        tw, results = sweep(Path(tmp) / "many", args.chapters, seeds, args.workers)
        diffs = rep.compare(Path(tmp) / "many", Path(tmp) / "one", ROOT, rtol=0.0)
        if diffs:
            raise SystemExit("replicate benchmark: the two sweeps differ:\n" + "\n".join(diffs))
    overhead = statistics.median(r["seconds"] - r["chapter_seconds"] for r in results)
    chapter = statistics.median(r["chapter_seconds"] for r in results)
    print(f"replicate: {len(args.chapters)} chapters x {len(seeds)} seeds; the same claims in both sweeps")
    print(
        f"replicate: overhead per task {overhead:.2f} s ({100 * overhead / chapter:.0f} % of the chapter's "
        f"{chapter:.2f} s); tasks per hour on {args.workers} workers {3600 * len(results) / tw:.0f}"
    )
    speedup = t1 / tw
    print(f"replicate: t1={t1:.1f} tW={tw:.1f} workers={args.workers} speedup={speedup:.2f} "
          f"efficiency={speedup / args.workers:.2f}")  # fmt: skip


if __name__ == "__main__":
    main()
