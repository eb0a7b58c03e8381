"""The variant comparison of chapter 07 at the paper's size (GPU when present; never needed by CI).

    python scripts/variants_paper_scale.py --device cuda --out results/variants

A command line over ``tokensel.experiments``: the chapter runs ``compare_variants(imdb, "reduced")``, this
runs the same models with ``SCALES["paper"]`` (full IMDB splits truncated to 256 words, d = 2048, 300
steps of full-batch Adam, gradients accumulated over chunks of 2,500 reviews), binning every model's
``E_s^T p`` and ``E_s^T v`` by the posterior gap of the training reviews it saw. Each model's result is
written as soon as it is trained (``experiments.write_run``; the chapter reads them with ``read_runs``),
with its settings, device, library commit and command. A killed run started again with the same
settings resumes from its checkpoints and ends with the result of an uninterrupted run.

Where it runs: at d = 2048 on one H100 the four models train in about seven minutes (see
book/recorded/variants_paper_scale/README.md). On a CPU the one-layer model and the MLP head take
minutes; the two-layer models need a GPU.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

import tokensel as ts
from tokensel import experiments as ex


def main():
    paper = ex.SCALES["paper"]
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--scale", choices=tuple(ex.SCALES), default="paper", help="the sizes (default: the paper's)")
    ap.add_argument("--d", type=int, default=None, help=f"embedding width (paper: {paper.d})")
    ap.add_argument("--max-len", type=int, default=None, help=f"words kept per review (paper: {paper.max_len})")
    ap.add_argument("--steps", type=int, default=None, help=f"Adam steps (paper: {paper.train.steps})")
    ap.add_argument("--lr", type=float, default=None, help=f"learning rate (paper: {paper.train.lr})")
    ap.add_argument("--chunk", type=int, default=None, help=f"reviews per gradient chunk (paper: {paper.chunk})")
    ap.add_argument("--n-train", type=int, default=None, help="draw this many training reviews (default: all)")
    ap.add_argument(
        "--only",
        nargs="*",
        default=None,
        choices=tuple(ex.MODEL_NAMES),
        help="models to run; each two-layer model needs several minutes on an H100 at the paper's "
        "size, so run them one per command there",
    )
    ap.add_argument(
        "--scores-dtype",
        choices=("float32", "bfloat16"),
        default="float32",
        help="dtype of the two-layer models' layer-1 score products during training (bfloat16: the "
        "GPU setting; softmax, parameters and evaluation stay float32)",
    )
    ap.add_argument("--commit", default=None, help="the library commit, recorded with the results")
    ap.add_argument("--out", default="results/variants")
    ap.add_argument("--checkpoints", default=None, help="folder for the runs' checkpoints (default: <out>/checkpoints)")
    args = ap.parse_args()
    changes = {
        k: v
        for k, v in dict(
            d=args.d, max_len=args.max_len, steps=args.steps, lr=args.lr, chunk=args.chunk, n_train=args.n_train
        ).items()
        if v is not None
    }
    sc = ex.scale(args.scale, **changes)
    kinds = ex.check_kinds(args.only) if args.only else tuple(ex.MODEL_NAMES)
    ts.seed_everything(0)
    out = Path(args.out)
    ckdir = Path(args.checkpoints) if args.checkpoints else out / "checkpoints"
    imdb = ts.reviews.prepare_reviews("imdb")
    train, test = ex.variant_batches(imdb, sc)
    print(f"IMDB {train.n} train / {test.n} test reviews, {sc}, device {args.device}", flush=True)
    device = torch.cuda.get_device_name() if args.device.startswith("cuda") else args.device
    for kind in kinds:
        low = args.scores_dtype == "bfloat16" and kind in ("two_layer", "two_layer_wkq")
        run = ex.run_model(
            kind,
            train,
            test,
            sc,
            device=args.device,
            checkpoint=ckdir / f"{kind}.pt",
            scores_dtype=torch.bfloat16 if low else None,
        )
        ex.write_run(
            run,
            out,
            steps=sc.train.steps,
            d=sc.d,
            max_len=sc.max_len,
            lr=sc.train.lr,
            n_train=train.n,
            scores_dtype="bfloat16" if low else "float32",
            commit=args.commit,
            command=" ".join(sys.argv),
            device=device,
            torch=torch.__version__,
        )
        print(kind, {k: round(v, 4) for k, v in run.summary().items()}, flush=True)


if __name__ == "__main__":
    main()
