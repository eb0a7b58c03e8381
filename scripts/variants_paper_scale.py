"""Paper-scale run of the model variants on IMDB (GPU when present; never needed by CI).

    python scripts/variants_paper_scale.py --device cuda --d 2048 --out results/variants

Trains the one-layer model and the three variants of ``tokensel.variants`` on the full IMDB
training split (25,000 reviews, truncated to --max-len tokens for the O(n T^2 d) two-layer models),
evaluates on the full test split, and writes per variant the 20-bin means of ``E_s^T p`` and
``E_s^T v`` against the posterior gap, the accuracies, and the U-shape / monotonicity statistics
(CSV + a summary on stdout). The book's chapter runs the same code at CI size.

Where it runs: at d = 2048 on one H100 the four models train in about seven minutes (one layer 13 s,
MLP head 31 s, two layers 168 s, two layers + W_KQ 196 s, in float32; see
book/recorded/variants_paper_scale/README.md). On a CPU the one-layer model and the MLP head take
minutes; the two-layer models need a GPU.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import torch

import tokensel as ts


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--d", type=int, default=2048)
    ap.add_argument("--max-len", type=int, default=256)
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--chunk", type=int, default=2500, help="sequences per gradient-accumulation chunk")
    ap.add_argument("--n-train", type=int, default=None, help="subsample the training split")
    ap.add_argument("--only", nargs="*", default=None,
                    help="models to run (one_layer mlp two_layer two_layer_wkq); each two-layer model needs "
                         "several minutes on an H100 at the defaults, so run them one per command there")
    ap.add_argument("--scores-dtype", choices=("float32", "bfloat16"), default="float32",
                    help="dtype of the two-layer models' layer-1 score products during training (bfloat16: the "
                         "GPU setting; softmax, parameters and evaluation stay float32)")
    ap.add_argument("--commit", default=None, help="the library commit, recorded with the results")
    ap.add_argument("--out", default="results/variants")
    ap.add_argument("--checkpoints", default=None,
                    help="folder for the runs' checkpoints (default: <out>/checkpoints); a killed run started "
                         "again with the same settings resumes where it was and ends with the same result")
    args = ap.parse_args()
    ts.seed_everything(0)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    imdb = ts.reviews.prepare_reviews("imdb")
    train, test = imdb.train.truncate(args.max_len), imdb.test.truncate(args.max_len)
    if args.n_train:
        train = train.subset(np.sort(np.random.default_rng(0).choice(train.n, args.n_train, replace=False)))
    gap = ts.statistics.posterior_gap(imdb.train)
    print(f"IMDB {train.n} train / {test.n} test reviews, max length {args.max_len}, d = {args.d}, "
          f"device {args.device}", flush=True)
    ckdir = Path(args.checkpoints) if args.checkpoints else out / "checkpoints"
    summary = {}
    for kind in ("one_layer",) + ts.variants.KINDS:
        if args.only and kind not in args.only:
            continue
        t0 = time.time()
        if kind == "one_layer":
            model = ts.AttentionModel.init(len(imdb.vocab), args.d, seed=0, dtype=torch.float32, device=args.device)
            hist = ts.train_joint(model, train.to(args.device), steps=args.steps, lr=args.lr,
                                  test_batch=test.to(args.device), eval_every=50, checkpoint=ckdir / f"{kind}.pt")
        else:
            model = ts.variants.VariantModel.init(kind, len(imdb.vocab), args.d, seed=0, device=args.device)
            hist = ts.variants.train_variant(model, train.to(args.device), steps=args.steps, lr=args.lr,
                                             test_batch=test.to(args.device), eval_every=50, chunk=args.chunk,
                                             checkpoint=ckdir / f"{kind}.pt",
                                             scores_dtype=torch.bfloat16 if args.scores_dtype == "bfloat16" else None)
        frame = hist.to_frame()
        bp, bv, u, rho = ts.statistics.shape_summary(gap, model.scores().detach(), model.values().detach())
        bp.assign(mean_v=bv["mean"], std_v=bv["std"]).to_csv(out / f"bins_{kind}.csv", index=False)
        summary[kind] = dict(train_acc=frame.train_acc.iloc[-1], test_acc=frame.test_acc.iloc[-1],
                             test_loss=frame.test_loss.iloc[-1], u_gap=u, spearman_v=rho, seconds=time.time() - t0)
        print(kind, json.dumps({k: round(v, 4) for k, v in summary[kind].items()}), flush=True)
        summary[kind].update(steps=args.steps, d=args.d, max_len=args.max_len, lr=args.lr, n_train=train.n,
                             scores_dtype=args.scores_dtype if kind in ("two_layer", "two_layer_wkq") else "float32",
                             commit=args.commit, command=" ".join(sys.argv),
                             spread_v=ts.statistics.values_spread(bv),
                             device=torch.cuda.get_device_name() if args.device.startswith("cuda") else args.device,
                             torch=torch.__version__)
        (out / f"summary_{kind}.json").write_text(json.dumps(summary[kind], indent=1))


if __name__ == "__main__":
    main()
