"""A chapter's execution time under two versions of the code, side by side, and whether their claims agree.

    python benchmarks/chapter_ab.py 06_real_data before=/path/to/old/clone after=. [--rounds 2]

Each version is ``LABEL=ROOT``, a checkout of this repository (its ``lib/`` and ``book/``). The chapter's code cells,
read from each version's own ``book/<chapter>.md``, run in a fresh process per run with that version's ``lib/`` first
on ``PYTHONPATH`` (working directory ``book/``, progress bars off, no profiler), and the versions alternate: A B, then
B A, and so on for ``--rounds`` rounds, so that a machine that slows down or speeds up during the comparison weighs on
both alike. Each version's kernels are compiled into its numba cache first (``scripts/compile_kernels.py``; skip with
``--no-compile``), so that no timed run compiles, and the first version runs once untimed before the series (skip
with ``--no-warmup``): the first run of a series reads the data from disk, which took 20 s more in chapter 6.

Prints every run's seconds (the chapter's, as its claim record gives them and the status page shows them: from
``tb.start_chapter`` to its last check; the code cells' time where no record has them), each version's median and its
ratio to the first version's, and whether every run
recorded the same claim values, to the last digit, as the first version's first run (the claims each run records with
``tb.check``, in a folder of its own). On this project's shared two-core machines one build of each version does not
resolve a change of a few seconds (a chapter moved by 20 s between two builds of code that gave the same bits); this
does, within the spread it prints.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve()


def _run_chapter(chapter: str, root: Path) -> float:
    """In the child: execute the chapter's code cells in one namespace; the seconds they took."""
    import tokensel

    lib = (root / "lib").resolve()
    if lib not in Path(tokensel.__file__).resolve().parents:
        sys.exit(f"imported tokensel from {tokensel.__file__}, not from {lib}: is another copy installed first?")
    import matplotlib
    from common import chapter_code

    matplotlib.use("Agg")
    cells = chapter_code(root / "book" / f"{chapter}.md")
    os.chdir(root / "book")
    namespace = {"__name__": "__main__"}
    t0 = time.perf_counter()
    for i, code in enumerate(cells):
        exec(compile(code, f"{chapter}[cell {i}]", "exec"), namespace)
    return time.perf_counter() - t0


def _claims(folder: Path) -> tuple[dict, float | None]:
    """From the claim records a run wrote into ``folder``: ``{(chapter, claim, site): measured}``, each value as
    JSON text (so that a NaN equals a NaN), and the chapter's seconds as its record gives them (from
    ``tb.start_chapter`` to its last check, the status page's measure), or None where no record has them."""
    values, seconds = {}, None
    for path in sorted(folder.glob("*.json")):
        record = json.loads(path.read_text())
        if not isinstance(record, dict) or not isinstance(record.get("checks"), list):
            continue
        for check in record["checks"]:
            values[(record.get("chapter"), check.get("name"), check.get("site"))] = json.dumps(check.get("measured"))
        took = record.get("seconds")
        if isinstance(took, (int, float)) and not isinstance(took, bool):
            seconds = float(took)
    return values, seconds


def _version(spec: str, chapter: str) -> tuple[str, Path]:
    label, sep, path = spec.partition("=")
    if not sep or not label or not path:
        sys.exit(f"{spec!r}: a version is LABEL=ROOT, e.g. before=/path/to/old/clone")
    root = Path(path).expanduser().resolve()
    if not (root / "lib" / "tokensel" / "__init__.py").is_file():
        sys.exit(f"{label}: {root} has no lib/tokensel: pass the root of a checkout of this repository")
    if not (root / "book" / f"{chapter}.md").is_file():
        sys.exit(f"{label}: {root} has no book/{chapter}.md")
    return label, root


def _env(root: Path, results: Path | None = None) -> dict:
    env = {**os.environ, "PYTHONPATH": str(root / "lib"), "TOKENSEL_PROGRESS": "0", "MPLBACKEND": "Agg"}
    if results is not None:
        env["TOKENSEL_RESULTS_DIR"] = str(results)
    return env


def compare(chapter: str, versions: list[tuple[str, Path]], rounds: int, compile_kernels: bool, warmup: bool) -> int:
    """Run the comparison and print it; 0 when every run recorded the first run's claim values, else 1."""
    if compile_kernels:
        for label, root in versions:
            t0 = time.perf_counter()
            done = subprocess.run(
                [sys.executable, str(root / "scripts" / "compile_kernels.py")],
                env=_env(root),
                capture_output=True,
                text=True,
            )
            if done.returncode:
                sys.exit(f"{label}: compiling the kernels failed:\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
            print(
                f"{label}: kernels compiled or found in numba's cache in {time.perf_counter() - t0:.0f} s", flush=True
            )
    seconds: dict[str, list[float]] = {label: [] for label, _ in versions}
    reference, same = None, True
    with tempfile.TemporaryDirectory(prefix="chapter_ab_") as tmp:
        plan = [(r, label, root) for r in range(rounds) for label, root in (versions if r % 2 == 0 else versions[::-1])]
        if warmup:  # the first run of a series reads the data from disk and pays for it: it is not timed
            plan.insert(0, (-1, *versions[0]))
        for r, label, root in plan:
            results = Path(tmp) / f"{label}-{r + 1}"
            results.mkdir()
            done = subprocess.run(
                [sys.executable, str(HERE), "--child", chapter, str(root)],
                env=_env(root, results),
                capture_output=True,
                text=True,
            )
            if done.returncode:
                sys.exit(f"{label}, round {r + 1}: the chapter failed:\n{done.stdout[-3000:]}{done.stderr[-3000:]}")
            values, took = _claims(results)
            if took is None:  # no finished chapter record: the code cells' own time
                took = float(done.stdout.strip().splitlines()[-1])
            if r < 0:
                print(f"warm-up: {label} {took:.1f} s (not counted)", flush=True)
                continue
            seconds[label].append(took)
            if reference is None:
                reference = values
            agrees = values == reference and bool(values)
            same &= agrees
            print(
                f"round {r + 1}: {label} {took:.1f} s, {len(values)} claims, "
                f"{'the same values' if agrees else 'OTHER VALUES than the first run'}",
                flush=True,
            )
    first = statistics.median(seconds[versions[0][0]])
    print(f"\n{chapter}, {rounds} run{'' if rounds == 1 else 's'} each, alternating:")
    for label, _ in versions:
        runs = ", ".join(f"{s:.1f}" for s in seconds[label])
        med = statistics.median(seconds[label])
        print(f"  {label}: median {med:.1f} s (runs {runs}); {med / first:.3f} of {versions[0][0]}")
    print("claim values: " + ("the same in every run" if same else "NOT the same in every run (see above)"))
    return 0 if same else 1


def main() -> int:
    if len(sys.argv) == 4 and sys.argv[1] == "--child":
        took = _run_chapter(sys.argv[2], Path(sys.argv[3]))
        print(f"\n{took!r}")
        return 0
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("chapter", help="chapter file name without .md, e.g. 06_real_data")
    ap.add_argument("versions", nargs="+", help="LABEL=ROOT, a checkout of this repository; two or more")
    ap.add_argument("--rounds", type=int, default=2, help="runs of each version (default 2: A B B A)")
    ap.add_argument("--no-compile", action="store_true", help="do not compile each version's kernels first")
    ap.add_argument("--no-warmup", action="store_true", help="time the first run too (it reads the data from disk)")
    args = ap.parse_args()
    if args.rounds < 1:
        ap.error(f"--rounds must be at least 1, got {args.rounds}")
    versions = [_version(spec, args.chapter) for spec in args.versions]
    labels = [label for label, _ in versions]
    if len(versions) < 2 or len(set(labels)) != len(labels):
        ap.error(f"pass two or more versions with different labels, got {labels}")
    return compare(args.chapter, versions, args.rounds, not args.no_compile, not args.no_warmup)


if __name__ == "__main__":
    sys.exit(main())
