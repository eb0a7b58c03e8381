"""Chapter execution times of book builds side by side: the status page's per-chapter seconds.

    python benchmarks/book_times.py before=/path/to/old/_build/checks after=_build/checks

Each argument is ``LABEL=FOLDER``, a build's claim-record folder (``_build/checks`` after ``make book``). A
chapter's time is the ``seconds`` of its record: from ``tokensel.start_chapter`` to the chapter's last check, as the
status page shows it. Every record is checked as it is read (a JSON object with a chapter name and a finite,
non-negative number of seconds); a file that is not such a record is named and skipped, and a chapter recorded
twice in one folder (two runs in one build) is refused. Prints one row per chapter, the sums, and each build's sum
as a share of the first build's. Compare builds made on one machine, one after the other, with nothing else
running: the same code moved by 10 % between days, and by 1.7 times between machines.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path


def read_times(folder: Path) -> dict[str, float]:
    """``{chapter: seconds}`` from the records in ``folder`` (``*.json``), each checked as it is read."""
    if not folder.is_dir():
        sys.exit(f"{folder}: not a folder; pass a build's _build/checks")
    times: dict[str, float] = {}
    for path in sorted(folder.glob("*.json")):
        try:
            record = json.loads(path.read_text())
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
            print(f"skipped {path.name}: not readable as JSON ({err})", file=sys.stderr)
            continue
        chapter = record.get("chapter") if isinstance(record, dict) else None
        seconds = record.get("seconds") if isinstance(record, dict) else None
        if not isinstance(chapter, str) or not chapter:
            print(f"skipped {path.name}: no chapter name", file=sys.stderr)
            continue
        if isinstance(seconds, bool) or not isinstance(seconds, (int, float)):
            print(f"skipped {path.name}: {chapter} has no finished time (did it run to the end?)", file=sys.stderr)
            continue
        if not math.isfinite(seconds) or seconds < 0:
            print(f"skipped {path.name}: {chapter}'s time {seconds!r} is not finite and >= 0", file=sys.stderr)
            continue
        if chapter in times:
            sys.exit(f"{folder}: {chapter} is recorded twice; use the folder of one build (make book clears it)")
        times[chapter] = float(seconds)
    if not times:
        sys.exit(f"{folder}: no chapter records; run `make book` first")
    return times


def table(builds: dict[str, dict[str, float]]) -> str:
    """A Markdown table: chapters by builds, the sums, and each sum as a share of the first."""
    labels = list(builds)
    chapters = sorted({c for times in builds.values() for c in times})
    lines = ["| chapter | " + " | ".join(labels) + " |", "|---|" + "---:|" * len(labels)]
    for c in chapters:
        cells = [f"{builds[b][c]:.1f} s" if c in builds[b] else "-" for b in labels]
        lines.append(f"| {c} | " + " | ".join(cells) + " |")
    sums = {b: sum(builds[b].values()) for b in labels}
    lines.append("| **sum** | " + " | ".join(f"**{sums[b]:.1f} s**" for b in labels) + " |")
    first = sums[labels[0]]
    lines.append(f"| share of {labels[0]} | " + " | ".join(f"{sums[b] / first:.2f}" for b in labels) + " |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("builds", nargs="+", metavar="LABEL=FOLDER", help="a label and a build's _build/checks folder")
    args = ap.parse_args()
    builds: dict[str, dict[str, float]] = {}
    for item in args.builds:
        label, sep, folder = item.partition("=")
        if not sep or not label or not folder:
            sys.exit(f"{item!r}: pass LABEL=FOLDER, e.g. after=_build/checks")
        if label in builds:
            sys.exit(f"{label!r} is used twice: give each build its own label")
        builds[label] = read_times(Path(folder))
    print(table(builds))


if __name__ == "__main__":
    main()
