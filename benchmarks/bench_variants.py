"""Benchmark: one full-batch gradient of the MLP-head variant at IMDB's size with a reduced width.

Sizes (defaults): 25,000 IMDB-like reviews truncated to 256 tokens (as ``experiments.SCALES["paper"]``),
|S| = 7,900, d = 256 (the paper and the paper-scale runs use d = 2048: ``--d 2048``), float32, gradients
accumulated over chunks of 2,500 reviews.
Both paths compute the loss and the gradients with respect to E, p, W1 and W2 by autograd and must
agree (checked in float64 on the first chunk):

* sparse (``MLPHead.forward_entries``): the attention mixture ``z = Q E`` as CSR products over
  the distinct (sequence, token) entries (:mod:`tokensel.models.mixing`);
* padded (``MLPHead.forward_reference``): gather ``E[ids]`` into an (n x T x d) tensor per chunk,
  the straightforward implementation (the two-layer models' fast path also pads).

The one-off preparation of each path (padding, or the entries' sparse pattern) is timed apart.
Last line: ``variants: speedup=<x>``.
"""

from __future__ import annotations

import argparse
import time

import torch
from common import peak_rss_gb, timeit, zipf_batch

import tokensel as ts


def gradient(model, parts, n, forward):
    """Loss and gradients of the mean logistic loss, accumulated over the prepared chunks."""
    params = [model.E, model.p, *model.matrices.values()]
    for t in params:
        t.grad = None
    total = 0.0
    for prepared, y in parts:
        loss = ts.loss.logistic(y * forward(*prepared)).sum() / n
        loss.backward()
        total += float(loss.detach())
    return total, [t.grad.clone() for t in params]


def hidden_preactivation(model, batch, path):
    """``W1 z`` of the MLP head for every review of ``batch``, by the sparse or the padded path."""
    if path == "entries":
        plan = ts.models.mixing.MixPlan(batch)
        z = ts.models.mixing.mix(ts.models.mixing.entry_attention(model.E @ model.p, plan), model.E, plan)
    else:
        ids, mask = ts.models.variants.padded(batch)
        X = model.E[ids]
        z = torch.einsum("nt,ntd->nd", torch.softmax((X @ model.p).masked_fill(~mask, -torch.inf), -1), X)
    return z @ model.W1.T


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=25_000)
    ap.add_argument("--mean-len", type=int, default=230)
    ap.add_argument("--max-len", type=int, default=256)
    ap.add_argument("--vocab", type=int, default=7_900)
    ap.add_argument("--d", type=int, default=256)
    ap.add_argument("--chunk", type=int, default=2_500)
    ap.add_argument("--repeat", type=int, default=1, help="timed repetitions after one warm-up")
    ap.add_argument("--device", default="cpu")
    args = ap.parse_args()
    ts.seed_everything(0)
    sync = torch.cuda.synchronize if args.device.startswith("cuda") else None

    batch = zipf_batch(args.n, args.mean_len, args.vocab, device=args.device).truncate(args.max_len)
    model = ts.models.variants.make("mlp", args.vocab, args.d, seed=0, device=args.device)
    for t in [model.E, model.p, *model.matrices.values()]:
        t.requires_grad_(True)
    print(
        f"batch: {batch.n} sequences, {batch.num_tokens:,} tokens (at most {args.max_len} each), "
        f"|S| = {args.vocab}, d = {args.d}, float32, device {args.device}, {torch.get_num_threads()} threads"
    )
    chunks = [torch.arange(s, min(s + args.chunk, batch.n)) for s in range(0, batch.n, args.chunk)]
    labels = [batch.labels[ix].to(torch.float32) for ix in chunks]

    t0 = time.perf_counter()
    sparse_parts = [(model.prepare(batch.subset(ix)), y) for ix, y in zip(chunks, labels, strict=True)]
    t_prep_sparse = time.perf_counter() - t0
    t0 = time.perf_counter()
    padded_parts = [(ts.models.variants.padded(batch.subset(ix)), y) for ix, y in zip(chunks, labels, strict=True)]
    t_prep_padded = time.perf_counter() - t0
    entries = sum(int(p[0][1].entries.ids.numel()) for p in sparse_parts)
    print(
        f"preparation, once per batch: sparse pattern of {entries:,} distinct entries {t_prep_sparse:.1f} s; "
        f"padding {t_prep_padded:.1f} s"
    )

    t_sparse, (l1, g1) = timeit(
        lambda: gradient(model, sparse_parts, batch.n, model.forward_entries), repeat=max(args.repeat, 3), sync=sync
    )
    peak_sparse = peak_rss_gb()
    print(f"sparse (CSR products):  {t_sparse:8.2f} s  (peak resident memory so far {peak_sparse:.2f} GB)")
    t_padded, (l2, g2) = timeit(
        lambda: gradient(model, padded_parts, batch.n, model.forward_reference), repeat=args.repeat, sync=sync
    )
    print(f"padded gather baseline: {t_padded:8.2f} s  (peak resident memory of the whole run {peak_rss_gb():.2f} GB)")

    err32 = max(float((a - b).abs().max() / b.abs().max()) for a, b in zip(g1, g2, strict=True))
    print(
        f"float32 difference between the paths: |loss diff| = {abs(l1 - l2):.1e}, max over E, p, W1, W2 of "
        f"max |diff| / max |grad| = {err32:.1e} (float32 rounding; the float64 check follows)"
    )
    # the two paths must compute the same gradient: check it in float64 on the first chunk
    m64 = ts.models.variants.make("mlp", args.vocab, args.d, seed=0, dtype=torch.float64, device=args.device)
    for t in [m64.E, m64.p, *m64.matrices.values()]:
        t.requires_grad_(True)
    sub, y = batch.subset(chunks[0]), labels[0].to(torch.float64)
    l1, g1 = gradient(m64, [(m64.prepare(sub), y)], sub.n, m64.forward_entries)
    l2, g2 = gradient(m64, [(ts.models.variants.padded(sub), y)], sub.n, m64.forward_reference)
    err = max(float((a - b).abs().max() / b.abs().max()) for a, b in zip(g1, g2, strict=True))
    assert abs(l1 - l2) < 1e-12 and err < 1e-10, f"gradients disagree: loss {l1} vs {l2}, rel err {err}"
    print(
        f"agreement in float64 on the first {sub.n:,} reviews: |loss diff| = {abs(l1 - l2):.1e}, "
        f"max |diff| / max |grad| = {err:.1e}"
    )
    # how far is each float32 path from the exact gradient? (same chunk, float64 as the reference)
    e32 = gradient(model, [sparse_parts[0]], sub.n, model.forward_entries)[1]
    p32 = gradient(model, [padded_parts[0]], sub.n, model.forward_reference)[1]

    def off(g):
        return max(float((a.double() - b).abs().max() / b.abs().max()) for a, b in zip(g, g1, strict=True))

    with torch.no_grad():  # hidden ReLU units on the other side of 0 than in float64
        ref = hidden_preactivation(m64, sub, "entries") > 0
        flips = [int(((hidden_preactivation(model, sub, path) > 0) != ref).sum()) for path in ("entries", "padded")]
    print(
        f"float32 against float64 on those reviews (max |diff| / max |grad|): sparse {off(e32):.1e}, "
        f"padded {off(p32):.1e}; hidden ReLU units on the other side of 0 than in float64: sparse "
        f"{flips[0]}, padded {flips[1]} of {ref.numel():,} (the gradient jumps at a ReLU kink)"
    )
    print(f"speed-up of a full-batch gradient: {t_padded / t_sparse:.1f}x")
    print(f"variants: speedup={t_padded / t_sparse:.1f}")


if __name__ == "__main__":
    main()
