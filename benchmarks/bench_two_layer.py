"""Benchmark: one full-batch gradient of the two-layer models (with and without trainable W_KQ).

Two implementations of the same loss, gradients by autograd, accumulated over chunks of reviews:

* fast (``TwoLayer.forward_prepared``): never forms ``H = X + A X`` (n x T x d); the read-out needs only
  ``H p'`` and ``H v``, i.e. ``A`` times an (n x T x 2) tensor, and ``W1`` is applied to the |S| rows of E
  once instead of to every position. Optionally the layer-1 scores in bfloat16 (``--scores-dtype bf16``);
* reference (``TwoLayer.forward_reference``): the models as written.

Defaults: chapter 07's CI size on the CPU (3,000 reviews, 48 tokens, d = 64); with ``--paper`` the paper's
size (25,000 reviews, 256 tokens, d = 2048; a GPU). Reports seconds per full-batch gradient, peak memory,
and on a GPU the achieved TFLOP/s of the score products (6 n T^2 d per step, padded T per chunk; the
chunks group reviews of similar length, as ``train_variant`` does) against
the card's peak. Both paths must agree (checked in float64 on a small batch before timing).
Last line: ``two_layer: speedup=<x>`` (reference time / fast time, two_layer, float32).
"""

from __future__ import annotations

import argparse
import time

import torch
from common import peak_rss_gb, timeit, zipf_batch

import tokensel as ts

PEAK_TFLOPS = {"bf16": 989.0, "fp32": 67.0}  # H100 SXM dense (float32 without TF32), for the utilisation column


def gradient(model, parts, n, forward):
    params = [model.E, model.p, *model.matrices.values()]
    for t in params:
        t.grad = None
    total = 0.0
    for (ids, mask), y in parts:
        loss = ts.loss.logistic(y * forward(ids, mask)).sum() / n
        loss.backward()
        total += float(loss.detach())
    return total, [t.grad.clone() for t in params]


def check_agreement(kind):
    data = ts.synthetic.independent_tokens(40, 30, length=(2, 20), delta=0.8, seed=0)
    m = ts.models.variants.make(kind, 30, 16, seed=0, dtype=torch.float64)
    for w in m.matrices.values():
        w.add_(0.1)
    for t in [m.E, m.p, *m.matrices.values()]:
        t.requires_grad_(True)
    parts = [(ts.models.variants.padded(data.batch), data.batch.labels)]
    l1, g1 = gradient(m, parts, 40, m.forward_prepared)
    l2, g2 = gradient(m, parts, 40, m.forward_reference)
    err = max(float((a - b).abs().max() / b.abs().max()) for a, b in zip(g1, g2, strict=True))
    assert abs(l1 - l2) < 1e-12 and err < 1e-10, (kind, l1, l2, err)
    return err


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--paper", action="store_true", help="25,000 reviews, 256 tokens, d = 2048")
    ap.add_argument("--max-len", type=int, default=None)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--reference", action="store_true", help="time the reference path at paper size too")
    ap.add_argument("--repeat", type=int, default=2)
    args = ap.parse_args()
    ts.seed_everything(0)
    n, T, d, chunk = (25_000, 256, 2048, 2_500) if args.paper else (3_000, 48, 64, 3_000)
    T = args.max_len or T
    gpu = args.device.startswith("cuda")
    sync = torch.cuda.synchronize if gpu else None
    for kind in ("two_layer", "two_layer_wkq"):
        print(
            f"{kind}: fast path equals the written model in float64 (max rel. gradient diff "
            f"{check_agreement(kind):.1e})"
        )
    batch = zipf_batch(n, 230 if args.paper else 150, 7_900, device=args.device).truncate(T)
    chunks = ts.models.variants.length_chunks(batch, chunk)
    parts = [(ts.models.variants.padded(batch.subset(ix)), batch.labels[ix.to(batch.device)].float()) for ix in chunks]
    flop = sum(6.0 * ids.shape[0] * ids.shape[1] ** 2 * d for (ids, _), _ in parts)
    print(
        f"batch: {batch.n:,} reviews, {batch.num_tokens:,} tokens (at most {T}), |S| = 7,900, d = {d}, "
        f"chunks of {chunk}, device {torch.cuda.get_device_name() if gpu else 'cpu'}, "
        f"{torch.get_num_threads()} threads; score products {flop / 1e12:.1f} TFLOP a step"
    )
    speed = None
    for kind in ("two_layer", "two_layer_wkq"):
        model = ts.models.variants.make(kind, 7_900, d, seed=0, device=args.device)
        for t in [model.E, model.p, *model.matrices.values()]:
            t.requires_grad_(True)
        runs = [("fast float32", model.forward_prepared, "fp32")]
        if gpu:
            runs.append(
                (
                    "fast bf16 scores",
                    lambda i, m, model=model: model.forward_prepared(i, m, scores_dtype=torch.bfloat16),
                    "bf16",
                )
            )
        if not args.paper or args.reference:
            runs.append(("reference float32", model.forward_reference, "fp32"))
        times = {}
        for label, fwd, peak in runs:
            if gpu:
                torch.cuda.reset_peak_memory_stats()
            t0 = time.perf_counter()
            try:
                sec, _ = timeit(
                    lambda model=model, fwd=fwd: gradient(model, parts, batch.n, fwd), repeat=args.repeat, sync=sync
                )
            except torch.OutOfMemoryError:
                print(f"  {kind:14s} {label:18s} out of memory")
                continue
            times[label] = sec
            mem = torch.cuda.max_memory_allocated() / 2**30 if gpu else peak_rss_gb()
            util = (
                f", {flop / sec / 1e12:6.1f} TFLOP/s ({flop / sec / 1e12 / PEAK_TFLOPS[peak]:.0%} of {peak} peak)"
                if gpu
                else ""
            )
            print(
                f"  {kind:14s} {label:18s} {sec:7.3f} s a step, peak {'GPU' if gpu else 'resident'} memory "
                f"{mem:5.1f} GiB{util} (timed in {time.perf_counter() - t0:.0f} s)",
                flush=True,
            )
        if "reference float32" in times:
            print(f"  {kind}: speed-up of the fast path {times['reference float32'] / times['fast float32']:.1f}x")
            if kind == "two_layer":
                speed = times["reference float32"] / times["fast float32"]
    if speed is not None:
        print(f"two_layer: speedup={speed:.1f}")


if __name__ == "__main__":
    main()
