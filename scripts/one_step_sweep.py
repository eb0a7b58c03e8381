"""Chapter 06's ablation "one step, then freeze" over a range of step sizes, recorded (never needed by CI).

    python scripts/one_step_sweep.py --out book/recorded/one_step_sweep

A command line over ``tokensel.experiments.one_step_sweep``: the full model of chapter 06 (IMDB, d = 2048,
``E``, ``p`` and ``v`` trained by 300 steps of full-batch Adam, seed 0, in float32 unless ``--precision
float64``) and the ablation (one gradient step on ``E`` of size ``eta0``, then ``p`` and ``v`` trained the same
way) at ``eta0 = m * one_step_eta`` for each multiple ``m`` (default 1, 4, 16, 64, 256; ``m`` is the largest
value shift ``(eta0/2) max|alpha_s|``). Each
row (spreads raw and normalised, accuracies, norms, seconds) is written as soon as it is measured, with the
settings, library commit, versions and command; the chapter reads them with ``read_sweep``. Six trainings:
a few minutes on two CPU cores when nothing else runs.
"""

from __future__ import annotations

import argparse
import platform
import subprocess
import sys
import time

import torch

import tokensel as ts
from tokensel import experiments as ex


def _commit() -> str:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=True)
        return out.stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--multiples", type=float, nargs="+", default=list(ex.ETA_MULTIPLES))
    ap.add_argument("--d", type=int, default=ex.PAPER_D)
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--precision",
        choices=("float32", "float64"),
        default="float32",
        help="the models' floating-point type (default float32, chapter 06's)",
    )
    ap.add_argument("--out", default="results/one_step_sweep")
    args = ap.parse_args()
    ts.seed_everything(args.seed)
    imdb = ts.reviews.prepare_reviews("imdb")
    settings = ts.TrainSettings(steps=args.steps, lr=args.lr)
    rows: list[dict] = []
    started = time.time()
    provenance = dict(
        command=" ".join(sys.argv),
        commit=_commit(),
        tokensel=ts.__version__,
        torch=torch.__version__,
        python=platform.python_version(),
        threads=torch.get_num_threads(),
        d=args.d,
        steps=args.steps,
        lr=args.lr,
        seed=args.seed,
        precision=args.precision,
        multiples=args.multiples,
        one_step_eta=ex.one_step_eta(imdb),
        data=imdb.source,
    )

    def record(row):
        rows.append(row)
        ex.write_sweep(rows, args.out, **provenance, seconds=round(time.time() - started, 1))
        print({k: (round(v, 4) if isinstance(v, float) else v) for k, v in row.items()}, flush=True)

    dtype = getattr(torch, args.precision)
    ex.one_step_sweep(imdb, args.multiples, settings, d=args.d, seed=args.seed, progress=record, dtype=dtype)


if __name__ == "__main__":
    main()
