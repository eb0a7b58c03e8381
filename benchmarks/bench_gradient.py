"""Benchmark: one exact full-batch gradient at IMDB scale, closed form against autograd.

Sizes (defaults): 25,000 sequences of about 230 tokens (5.75 M token occurrences), |S| = 7,800,
d = 2048, float64, the paper's IMDB setting. Both methods compute the loss and the full gradients
with respect to E (materialised, |S| x d) and p, and must agree.

* ours: ``tokensel.grads.gradients`` — gather/scatter over token ids plus O(|S| d) matrix-vector work;
* baseline: a straightforward PyTorch implementation — gather the embeddings of every occurrence
  (``E[ids]``), compute scores, a segment softmax and the outputs, and call ``backward``; processed
  in minibatches of sequences so the gathered (tokens x d) tensor fits in memory.

Prints both times, the speed-up, and how far our time is from the memory-bandwidth bound of touching
the |S| x d floats of E once (bandwidth measured in the same run by summing a tensor of that size).
Last line: ``gradient: speedup=<x>``. ``--device cuda`` runs both on a GPU.
"""

from __future__ import annotations

import argparse
import time

import torch

import tokensel as ts
from common import peak_rss_gb, timeit, zipf_batch


def autograd_full_batch(model: ts.AttentionModel, batch: ts.RaggedBatch, chunk: int):
    """Loss and (grad_E, grad_p) by autograd over minibatches of ``chunk`` sequences."""
    E = model.E.detach().clone().requires_grad_(True)
    p = model.p.detach().clone().requires_grad_(True)
    v = model.v
    total = 0.0
    for start in range(0, batch.n, chunk):
        sub = batch.subset(torch.arange(start, min(start + chunk, batch.n)))
        X = E[sub.ids]  # (tokens in chunk) x d: the O(tokens x d) gather
        q, _ = ts.core.segment_softmax(X @ p, sub)
        f = ts.core.segment_sum(q * (X @ v), sub)
        loss = ts.loss.logistic(sub.labels.to(E.dtype) * f).sum() / batch.n
        loss.backward()
        total += float(loss.detach())
    return total, E.grad, p.grad


def ours(model, batch, out=None):
    g = ts.gradients(model, batch)
    return g.loss, g.E_into(out), g.p


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=25_000)
    ap.add_argument("--mean-len", type=int, default=230)
    ap.add_argument("--vocab", type=int, default=7_800)
    ap.add_argument("--d", type=int, default=2048)
    ap.add_argument("--chunk", type=int, default=200, help="sequences per autograd minibatch")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--dtype", default="float64", choices=["float64", "float32"])
    args = ap.parse_args()
    ts.seed_everything(0)
    dtype = getattr(torch, args.dtype)
    sync = torch.cuda.synchronize if args.device.startswith("cuda") else None

    batch = zipf_batch(args.n, args.mean_len, args.vocab, device=args.device)
    model = ts.AttentionModel.init(args.vocab, args.d, seed=0, dtype=dtype, device=args.device)
    print(f"batch: {batch.n} sequences, {batch.num_tokens:,} tokens, |S| = {args.vocab}, d = {args.d}, "
          f"{args.dtype}, device {args.device}, {torch.get_num_threads()} threads")

    t0 = time.perf_counter()
    dt = batch.distinct()
    if sync:
        sync()
    t_distinct = time.perf_counter() - t0
    print(f"distinct (sequence, token) entries: {dt.ids.numel():,} ({dt.ids.numel() / batch.num_tokens:.0%} of the "
          f"occurrences), computed once per batch in {t_distinct * 1e3:.0f} ms (not in the per-step times)")
    t_ours, (l1, gE1, gp1) = timeit(lambda: ours(model, batch), repeat=5, sync=sync)
    print(f"ours (closed form):     {t_ours * 1e3:9.1f} ms  (grad_E in a fresh allocation)")
    buf = torch.empty_like(model.E)
    t_buf, _ = timeit(lambda: ours(model, batch, buf), repeat=5, sync=sync)
    print(f"ours, reused buffer:    {t_buf * 1e3:9.1f} ms  (grad_E into a preallocated buffer, as in training)")
    peak_ours = peak_rss_gb()
    print(f"peak resident memory with ours (data, model, gradients): {peak_ours:.2f} GB (target <= 4 GB)")
    t0 = time.perf_counter()
    l2, gE2, gp2 = autograd_full_batch(model, batch, args.chunk)
    if sync:
        sync()
    t_base = time.perf_counter() - t0
    print(f"autograd baseline:      {t_base * 1e3:9.1f} ms  (minibatches of {args.chunk} sequences)")

    scale = float(gE2.abs().max())
    err = max(float((gE1 - gE2).abs().max()), float((gp1 - gp2).abs().max())) / scale
    tol = 1e-8 if dtype == torch.float64 else 1e-3  # float32 sums of 5.7 M terms in different orders
    assert abs(l1 - l2) < tol and err < tol, f"gradients disagree: loss {l1} vs {l2}, rel err {err}"
    print(f"agreement: |loss diff| = {abs(l1 - l2):.1e}, max gradient diff / max |grad_E| = {err:.1e}")

    # memory-bandwidth bound: touching |S| x d floats once
    big = torch.randn(args.vocab, args.d, dtype=dtype, device=args.device)
    t_read, _ = timeit(lambda: big.sum(), repeat=5, sync=sync)
    dst = torch.empty_like(big)
    t_copy, _ = timeit(lambda: dst.copy_(big), repeat=5, sync=sync)
    nbytes = big.numel() * big.element_size()
    print(f"|S| x d = {big.numel():,} floats ({nbytes / 2**20:.0f} MiB): read once {t_read * 1e3:.1f} ms "
          f"({nbytes / t_read / 1e9:.1f} GB/s), read+write once {t_copy * 1e3:.1f} ms")
    print(f"ours (reused buffer) / (one read of E) = {t_buf / t_read:.1f}x;  "
          f"/ (one read+write of E) = {t_buf / t_copy:.1f}x  (the step reads E twice and writes grad_E once)")
    print(f"peak resident memory of the whole run (with the autograd baseline): {peak_rss_gb():.2f} GB")
    assert peak_ours <= 4.0, f"the IMDB-scale gradient needs {peak_ours:.2f} GB, over the 4 GB target"
    print(f"speed-up with a fresh allocation: {t_base / t_ours:.0f}x; with a reused buffer: {t_base / t_buf:.0f}x")
    print(f"gradient: speedup={t_base / t_ours:.0f}")


if __name__ == "__main__":
    main()
