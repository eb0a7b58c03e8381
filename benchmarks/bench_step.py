"""Benchmark: one training step of ``train_joint`` at IMDB scale, with and without the scores that E's Adam
pass leaves for the next step, side by side in one run.

``train_joint`` updates ``p`` and ``V`` (torch's Adam), then ``E`` (``kernels.adam_low_rank``); that pass also
forms the next step's scores ``E [p, V]`` (``tokensel.training.loop.ScoresAfter``), which the next gradient uses
instead of reading ``E`` again. Here the same runs are made with those scores discarded (the gradient reads
``E`` for them, as before), alternating the two, for the binary and the K-class model. Both must end with the
same parameters, bit for bit.

    python benchmarks/bench_step.py [--steps 15] [--rounds 3]

Prints ``step <model>: with=X ms without=Y ms speedup=Y/X`` (the best of ``--rounds`` runs of each, per step,
including the run's fixed costs divided over its steps), after one untimed one-step run of each.
"""

from __future__ import annotations

import argparse
import time

import torch
from common import classes_batch, imdb_size_arguments, zipf_batch

import tokensel as ts
from tokensel.training import loop


class _Discarded(loop.ScoresAfter):
    """The scores the Adam pass leaves, never used: the next gradient reads E for them."""

    def take(self):
        super().take()
        return None


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    imdb_size_arguments(ap)
    ap.add_argument("--steps", type=int, default=15)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    batch = zipf_batch(args.n, args.mean_len, args.vocab)
    kbatch = classes_batch(batch, args.classes)
    models = {
        "binary": (batch, lambda: ts.AttentionModel.init(args.vocab, args.d, seed=0)),
        f"K-class (K = {args.classes})": (
            kbatch,
            lambda: ts.MultiClassAttentionModel.init(args.vocab, args.d, args.classes, seed=0),
        ),
    }
    settings = ts.TrainSettings(steps=args.steps, lr=3e-3, eval_every=args.steps, progress=False)
    kept = loop.ScoresAfter
    print(
        f"batch: {batch.n} sequences, {batch.num_tokens:,} tokens, |S| = {args.vocab}, d = {args.d}, "
        f"{ts.config.threads()} kernel threads; {args.steps} steps a run, best of {args.rounds} runs each"
    )
    try:
        for name, (b, make) in models.items():
            for kind in (kept, _Discarded):  # one untimed step each: the kernels loaded, the batch's plan made
                loop.ScoresAfter = kind
                ts.train_joint(make(), b, ts.TrainSettings(steps=1, lr=3e-3, progress=False), params=("E", "p"))
            best, final = {}, {}
            for _ in range(args.rounds):
                for how, kind in (("with", kept), ("without", _Discarded)):
                    loop.ScoresAfter = kind
                    model = make()
                    t0 = time.perf_counter()
                    ts.train_joint(model, b, settings, params=("E", "p"))
                    per_step = (time.perf_counter() - t0) / (args.steps + 1)
                    best[how] = min(best.get(how, float("inf")), per_step)
                    final[how] = (model.E.clone(), model.p.clone())
            same = all(torch.equal(x, y) for x, y in zip(final["with"], final["without"], strict=True))
            assert same, f"{name}: the runs with and without the Adam pass's scores differ"
            print(
                f"step {name}: with={best['with'] * 1e3:.1f}ms without={best['without'] * 1e3:.1f}ms "
                f"speedup={best['without'] / best['with']:.2f}  (the same E and p, bit for bit)"
            )
    finally:
        loop.ScoresAfter = kept


if __name__ == "__main__":
    main()
