"""Calibration at seeds nobody has seen: each claim's rate in a block of fresh seeds that the recorded replication
never ran, against its recorded rate.

    python scripts/calibrate.py BLOCK [--recorded book/recorded/replication]

BLOCK is a sweep at other seeds (``make calibrate`` runs chapters 1-5 and the pages at fresh seeds 20-29). Writes
``BLOCK/calibration.csv``: per claim the recorded ``k`` of ``n`` and its 95 % interval, the block's ``k`` of ``n``,
Fisher's exact p-value of the two and whether it is below 0.05; prints the claims that differ, and how many would
by chance alone among those that varied.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from scipy.stats import fisher_exact

from tokensel.errors import InvalidArgumentError
from tokensel_book.replication import RECORDED, load, summarize

ROOT = Path(__file__).resolve().parents[1]


def calibrate(block: Path, recorded: Path, root: Path):
    """The per-claim table (see the module); a block that shares a (chapter, seed) with ``recorded`` is refused."""
    seeds = [{(r["chapter"], r["seed"]) for r in load(p, root)[0]} for p in (block, recorded)]
    if seeds[0] & seeds[1]:
        raise InvalidArgumentError(f"the block shares {len(seeds[0] & seeds[1])} tasks with {recorded}: start it "
                                   "past the recorded seeds (replicate --first-seed)")  # fmt: skip
    ours, theirs = (summarize(p, root).set_index(["chapter", "id"]) for p in (block, recorded))
    both = theirs[["claim", "k", "n", "low", "high"]].join(ours[["k", "n"]].add_suffix("_block"), how="inner")
    both = both[(both.n > 0) & (both.n_block > 0)]
    both["p"] = [
        float(fisher_exact([[a, n - a], [b, m - b]]).pvalue)
        for a, n, b, m in zip(both.k, both.n, both.k_block, both.n_block, strict=True)
    ]
    both["differs"] = both.p < 0.05
    frame = both.reset_index()
    frame.to_csv(Path(block) / "calibration.csv", index=False, float_format="%.6g")
    return frame


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("block", type=Path)
    ap.add_argument("--recorded", type=Path, default=ROOT / RECORDED)
    args = ap.parse_args()
    frame = calibrate(args.block, args.recorded, ROOT)
    for r in frame[frame.differs].itertuples():
        print(f"  {r.chapter} {r.id}: {r.k_block} of {r.n_block} here, {r.k} of {r.n} recorded "
              f"({r.low:.2f}-{r.high:.2f}), p = {r.p:.3f}")  # fmt: skip
    varying = frame[(frame.k < frame.n) | (frame.k_block < frame.n_block)]
    print(f"calibrate: {int(frame.differs.sum())} of {len(frame)} claims differ from the recorded rate at the 5 % "
          f"level; {len(varying)} varied in either (chance alone: about {0.05 * len(varying):.1f})")  # fmt: skip


if __name__ == "__main__":
    main()
