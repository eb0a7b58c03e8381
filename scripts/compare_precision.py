"""Compare two paper-scale runs of the two-layer models (e.g. bfloat16 layer-1 scores against float32)
with the tolerances fixed in book/recorded/variants_paper_scale/PRECISION.md before the float32 run was
made; the second folder is the reference (the bin tolerance is relative to its range).

    python scripts/compare_precision.py FIRST_FOLDER SECOND_FOLDER

Prints one line per model and quantity and exits 1 if any tolerance is exceeded.
"""

from __future__ import annotations

import sys

import numpy as np

import tokensel as ts

TOL = {
    "train_acc": ("abs", 0.01),
    "test_acc": ("abs", 0.01),
    "test_loss": ("rel", 0.05),
    "u_gap": ("abs", 0.15),
    "spearman_v": ("abs", 0.02),
}
BIN_TOL = 0.05  # each bin mean within 5% of the float32 bin means' range


def main(low, full) -> int:
    a, abins = ts.experiments.read_runs(low)
    b, bbins = ts.experiments.read_runs(full)
    bad = 0
    for name in ("two layers", "two layers + W_KQ"):
        for key, (kind, tol) in TOL.items():
            diff = abs(a.loc[name, key] - b.loc[name, key])
            limit = tol * abs(b.loc[name, key]) if kind == "rel" else tol
            ok = diff <= limit
            bad += not ok
            print(
                f"{'ok ' if ok else 'BAD'} {name:18s} {key:10s} first {a.loc[name, key]:8.4f} second "
                f"{b.loc[name, key]:8.4f} |diff| {diff:.4f} <= {limit:.4f}"
            )
        for which, col in (("E_s^T p", 0), ("E_s^T v", 1)):
            x, y = abins[name][col]["mean"].to_numpy(), bbins[name][col]["mean"].to_numpy()
            keep = np.isfinite(y)
            scale = BIN_TOL * (np.nanmax(y) - np.nanmin(y))
            worst = float(np.max(np.abs(x[keep] - y[keep])))
            ok = worst <= scale
            bad += not ok
            print(f"{'ok ' if ok else 'BAD'} {name:18s} {which} bin means: max |diff| {worst:.4f} <= {scale:.4f}")
    print(f"precision check: {'all within tolerance' if not bad else f'{bad} outside tolerance'}")
    return 1 if bad else 0


if __name__ == "__main__":
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        raise SystemExit(2)
    raise SystemExit(main(sys.argv[1], sys.argv[2]))
