"""Benchmark: one full-batch gradient of each variant of chapter 7, the training path against the
implementation it replaced, side by side in one run.

Sizes (defaults): chapter 7's comparison (``experiments.SCALES["reduced"]``): 3,000 IMDB-like reviews
truncated to 48 tokens, |S| = 7,900, d = 64, float32, one chunk; ``--n``, ``--max-len``, ``--d`` change them.
For each model the loss and the gradients with respect to E, p and its matrices are computed by autograd
through the training path (``forward_prepared``) and through its reference:

* two-layer models: the compiled kernels (:mod:`tokensel.models.kernels`, one kernel per sequence and
  direction, closed-form backward) against the batched tensor products over the padded batch they
  replaced (``_forward_tensors``);
* MLP head: its CSR products over the distinct (sequence, token) entries (:mod:`tokensel.models.mixing`)
  against the padded gather ``E[ids]`` (``forward_reference``). A fused kernel for this path (attention,
  mixture and backward per sequence, gradient rows per token) was measured and left out: the path is bound
  by the gathers of embedding rows, and PyTorch's CSR products did them as fast (0.97x at these sizes, 0.77x
  at d = 256 and 256 tokens; benchmarks/PROFILE.md);

the two must agree (checked in float64 on the first 500 reviews, relative 1e-12). Each gradient is timed
alternately, ``--repeat`` times after a warm-up, and the best of each is kept: CPU time of the process
(``time.process_time``; with one thread, the work itself) and wall-clock time. The one-off preparation
(padding, the entries' pattern) is not timed.

Lines ``variants <model>: ... speedup_vs_reference=Y`` (Y = reference CPU time / training path's CPU time) and last
``variants: ... speedup_vs_reference=Y`` for the three models together (a step of each, as chapter 7
trains them).
"""

from __future__ import annotations

import argparse
import time

import torch
from common import zipf_batch

import tokensel as ts

MODELS = ("mlp", "two_layer", "two_layer_wkq")


def gradient(model, prepared, y, forward):
    """Loss and gradients of the mean logistic loss over one prepared batch."""
    params = [model.E, model.p, *model.matrices.values()]
    for t in params:
        t.grad = None
    loss = ts.loss.logistic(y * forward(*prepared)).sum() / y.numel()
    loss.backward()
    return float(loss.detach()), [t.grad.clone() for t in params]


def paths(model, batch):
    """``{name: (prepared, forward)}``: the training path and the implementation it replaced (see the
    module's docstring), each with its one-off preparation of ``batch`` done."""
    fast = (model.prepare(batch), model.forward_prepared)
    if isinstance(model, ts.models.variants.MLPHead):
        return {"path": fast, "reference": (ts.models.variants.padded(batch), model.forward_reference)}
    return {"path": fast, "reference": (fast[0], model._forward_tensors)}


def make(kind, vocab, d, dtype):
    model = ts.models.variants.make(kind, vocab, d, seed=0, dtype=dtype)
    with torch.no_grad():  # away from the identity start, so that W_KQ's matrices matter
        for w in model.matrices.values():
            w.add_(0.05 * torch.randn(w.shape, generator=torch.Generator().manual_seed(1), dtype=dtype))
    for t in [model.E, model.p, *model.matrices.values()]:
        t.requires_grad_(True)
    return model


def agreement(kind, batch, vocab, d):
    """Largest relative difference of the loss and gradients of the two paths, in float64."""
    sub = batch.subset(torch.arange(min(500, batch.n)))
    model = make(kind, vocab, d, torch.float64)
    y = sub.labels.to(torch.float64)
    (l1, g1), (l2, g2) = (gradient(model, prepared, y, fwd) for prepared, fwd in paths(model, sub).values())
    err = max(float((a - b).abs().max() / b.abs().max()) for a, b in zip(g1, g2, strict=True))
    return max(abs(l1 - l2) / abs(l2), err)


def timed(*args):
    """CPU and wall-clock seconds of one :func:`gradient` call with these arguments."""
    c0, w0 = time.process_time(), time.perf_counter()
    gradient(*args)
    return time.process_time() - c0, time.perf_counter() - w0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=3_000)
    ap.add_argument("--mean-len", type=int, default=230)
    ap.add_argument("--max-len", type=int, default=48)
    ap.add_argument("--vocab", type=int, default=7_900)
    ap.add_argument("--d", type=int, default=64)
    ap.add_argument("--repeat", type=int, default=5, help="timed repetitions of each path after one warm-up")
    ap.add_argument("--models", default=",".join(MODELS), help="comma-separated, from " + ", ".join(MODELS))
    args = ap.parse_args()
    ts.seed_everything(0)
    kinds = [k for k in args.models.split(",") if k]
    batch = zipf_batch(args.n, args.mean_len, args.vocab).truncate(args.max_len)
    print(
        f"batch: {batch.n:,} sequences, {batch.num_tokens:,} tokens (at most {args.max_len} each), "
        f"{batch.distinct().ids.numel():,} distinct (sequence, token) entries, |S| = {args.vocab}, d = {args.d}, "
        f"float32, {torch.get_num_threads()} threads"
    )
    totals = {"path": [0.0, 0.0], "reference": [0.0, 0.0]}
    for kind in kinds:
        err = agreement(kind, batch, args.vocab, args.d)
        assert err < 1e-12, f"{kind}: the training path and the reference disagree in float64 (relative {err:.1e})"
        model = make(kind, args.vocab, args.d, torch.float32)
        y = batch.labels.to(torch.float32)
        ways = paths(model, batch)
        best = {name: [float("inf"), float("inf")] for name in ways}
        for prepared, fwd in ways.values():  # warm-up (compilation, first allocations)
            gradient(model, prepared, y, fwd)
        for _ in range(args.repeat):  # alternately, so that both see the same load
            for name, (prepared, fwd) in ways.items():
                cpu, wall = timed(model, prepared, y, fwd)
                best[name] = [min(best[name][0], cpu), min(best[name][1], wall)]
        for name in ways:
            totals[name] = [t + b for t, b in zip(totals[name], best[name], strict=True)]
        k, r = best["path"], best["reference"]
        what = "CSR products vs padded gather" if kind.startswith("mlp") else "kernels vs batched tensors"
        print(
            f"variants {kind} ({what}): {1e3 * k[0]:.1f} ms CPU ({1e3 * k[1]:.1f} ms wall), reference "
            f"{1e3 * r[0]:.1f} ms CPU ({1e3 * r[1]:.1f} ms wall), float64 agreement {err:.1e}, "
            f"speedup_vs_reference={r[0] / k[0]:.2f}"
        )
    k, r = totals["path"], totals["reference"]
    print(
        f"variants: {'+'.join(kinds)} one gradient each, {1e3 * k[0]:.1f} ms CPU, reference "
        f"{1e3 * r[0]:.1f} ms CPU (wall {r[1] / k[1]:.2f}x), speedup_vs_reference={r[0] / k[0]:.2f}"
    )


if __name__ == "__main__":
    main()
