"""Where a chapter's execution time goes: run its code cells under cProfile.

    python benchmarks/profile_chapter.py 06_real_data [--top 25]

Reads ``book/<chapter>.md`` through jupytext, executes the code cells in order in one namespace
(working directory ``book/``, progress bars off, as in the book build), and prints the wall time of
every cell and the functions with the largest cumulative and own time. The full table is written to
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
    args = ap.parse_args()
    import jupytext
    import matplotlib

    matplotlib.use("Agg")
    source = ROOT / "book" / f"{args.chapter}.md"
    if not source.is_file():
        sys.exit(f"no chapter {source}")
    os.environ.setdefault("TOKENSEL_PROGRESS", "0")
    os.environ.setdefault("TOKENSEL_RESULTS_DIR", str(ROOT / "benchmarks" / "results" / "checks"))
    cells = [c.source for c in jupytext.read(source).cells if c.cell_type == "code"]
    os.chdir(ROOT / "book")
    namespace = {"__name__": "__main__"}
    prof = cProfile.Profile()
    times = []
    for i, src in enumerate(cells):
        code = "\n".join(line for line in src.splitlines() if not line.lstrip().startswith(("%", "!")))
        t0 = time.perf_counter()
        prof.enable()
        exec(compile(code, f"{args.chapter}[cell {i}]", "exec"), namespace)
        prof.disable()
        times.append((time.perf_counter() - t0, i, src.strip().splitlines()[0][:70] if src.strip() else ""))
    total = sum(t for t, _, _ in times)
    import resource

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    lines = [
        f"{args.chapter}: {total:.1f} s in {len(cells)} code cells, peak resident memory {peak:.2f} GB",
        "",
        "slowest cells:",
    ]
    lines += [f"  {t:7.1f} s  cell {i:2d}  {first}" for t, i, first in sorted(times, reverse=True)[:10]]
    for key in ("cumulative", "tottime"):
        buf = io.StringIO()
        pstats.Stats(prof, stream=buf).strip_dirs().sort_stats(key).print_stats(args.top)
        lines += ["", f"top {args.top} by {key}:", buf.getvalue()]
    text = "\n".join(lines)
    out = ROOT / "benchmarks" / "results" / f"profile_{args.chapter}.txt"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)
    print(text)
    print(f"written to {out}")


if __name__ == "__main__":
    main()
