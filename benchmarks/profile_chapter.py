"""Where a chapter's execution time goes: run its code cells under cProfile.

    python benchmarks/profile_chapter.py 06_real_data [--top 25]

Reads ``book/<chapter>.md`` through jupytext, executes the code cells in order in one namespace
(working directory ``book/``, progress bars off, as in the book build), and prints the wall-clock and
CPU time (``time.process_time``: all threads of the process; with ``TOKENSEL_THREADS=1`` the work itself,
little disturbed by other load on the machine) of every cell and the functions with the largest
cumulative and own time (``--cpu``: measured in CPU time too). The full table is written to
``benchmarks/results/profile_<chapter>.txt``. See ``PROFILE.md`` for the last measured profile.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("chapter", help="chapter file name without .md, e.g. 06_real_data")
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--cpu", action="store_true", help="the function tables in CPU time instead of wall-clock time")
    args = ap.parse_args()
    import matplotlib
    from common import chapter_code

    matplotlib.use("Agg")
    source = ROOT / "book" / f"{args.chapter}.md"
    if not source.is_file():
        sys.exit(f"no chapter {source}")
    os.environ.setdefault("TOKENSEL_PROGRESS", "0")
    os.environ.setdefault("TOKENSEL_RESULTS_DIR", str(ROOT / "benchmarks" / "results" / "checks"))
    cells = chapter_code(source)
    os.chdir(ROOT / "book")
    namespace = {"__name__": "__main__"}
    prof = cProfile.Profile(time.process_time) if args.cpu else cProfile.Profile()
    times = []
    for i, code in enumerate(cells):
        t0, c0 = time.perf_counter(), time.process_time()
        prof.enable()
        exec(compile(code, f"{args.chapter}[cell {i}]", "exec"), namespace)
        prof.disable()
        first = code.strip().splitlines()[0][:70] if code.strip() else ""
        times.append((time.perf_counter() - t0, time.process_time() - c0, i, first))
    total, cpu = sum(t[0] for t in times), sum(t[1] for t in times)
    import resource

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    lines = [
        f"{args.chapter}: {total:.1f} s wall, {cpu:.1f} s CPU in {len(cells)} code cells, "
        f"peak resident memory {peak:.2f} GB",
        "",
        "slowest cells (wall, CPU):",
    ]
    lines += [
        f"  {t:7.1f} s {c:7.1f} s  cell {i:2d}  {first}"
        for t, c, i, first in sorted(times, key=lambda x: x[1], reverse=True)[:10]
    ]
    clock = "CPU" if args.cpu else "wall-clock"
    for key in ("cumulative", "tottime"):
        buf = io.StringIO()
        pstats.Stats(prof, stream=buf).strip_dirs().sort_stats(key).print_stats(args.top)
        lines += ["", f"top {args.top} by {key} ({clock} time):", buf.getvalue()]
    text = "\n".join(lines)
    out = ROOT / "benchmarks" / "results" / f"profile_{args.chapter}.txt"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)
    print(text)
    print(f"written to {out}")


if __name__ == "__main__":
    main()
