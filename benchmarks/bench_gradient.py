"""Benchmark: one exact full-batch gradient at IMDB scale, the fused kernel against the reference, and
both against the memory floor measured in the same run.

Sizes (defaults): 25,000 sequences of about 230 tokens (5.75 M token occurrences), |S| = 7,800,
d = 2048, float64, the paper's IMDB setting; the K-class model (K = 4, chapter 7's four rating
classes) on the same sequences. Every method computes the loss and the full gradients with respect to
E (materialised into a reused buffer, as in training), p and v, and they must agree.

* fused: ``tokensel.gradients`` (the attention pass in one compiled kernel per sequence,
  :mod:`tokensel.models.kernels`; ``E [p, V]`` and ``[A, B]^T E`` one pass over E each; grad_E written once);
* reference: ``tokensel.gradients(..., fused=False)``, the previous implementation (a dozen tensor
  passes over the entries, :func:`tokensel.models.core.score_value_grads`);
* ``--autograd``: also a straightforward PyTorch implementation (gather ``E[ids]`` per minibatch of
  sequences and call ``backward``), checked against the reference.

The floor is what any implementation must move through memory: two reads and one write of E (one
read timed by summing a tensor of E's size, one read plus one write by copying it, each the faster of torch's pass
and a numba pass on the kernels' threads: ``common.memory_floor_passes``) plus one pass over the distinct entries
(summing their token ids and counts, 32-bit integers as the kernels keep them), all measured in this run.
Lines ``gradient: ... bound_ratio=X speedup_vs_reference=Y`` (X = step / floor, Y = reference / fused)
and ``gradient K-class: ...`` the same for the K-class model.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch
from common import classes_batch, imdb_size_arguments, memory_floor_passes, peak_rss_gb, timeit, zipf_batch

import tokensel as ts


def autograd_full_batch(model: ts.AttentionModel, batch: ts.RaggedBatch, chunk: int):
    """Loss and (grad_E, grad_p) by autograd over minibatches of ``chunk`` sequences."""
    E = model.E.detach().clone().requires_grad_(True)
    p = model.p.detach().clone().requires_grad_(True)
    v = model.v
    total = 0.0
    for start in range(0, batch.n, chunk):
        sub = batch.subset(torch.arange(start, min(start + chunk, batch.n)))
        X = E[sub.ids]  # (tokens in chunk) x d: the O(tokens x d) gather
        q, _ = ts.models.core.segment_softmax(X @ p, sub)
        f = ts.models.core.segment_sum(q * (X @ v), sub)
        loss = ts.loss.logistic(sub.labels.to(E.dtype) * f).sum() / batch.n
        loss.backward()
        total += float(loss.detach())
    return total, E.grad, p.grad


def step(model, batch, out, fused):
    g = ts.gradients(model, batch, fused=fused)
    return g.loss, g.E_into(out), g.p, g.v


def compare(name, model, batch, floor, repeat, tol):
    """Time the fused and the reference gradient of ``model``, check that they agree, print the line."""
    buf = torch.empty_like(model.E)
    t0 = time.perf_counter()
    step(model, batch, buf, True)
    print(
        f"{name}: first fused call (compiles, or loads the compiled kernels from numba's cache): "
        f"{time.perf_counter() - t0:.2f} s"
    )
    t_new, (l1, gE1, gp1, gv1) = timeit(lambda: step(model, batch, buf, True), repeat=repeat)
    gE1 = gE1.clone()
    t_ref, (l2, gE2, gp2, gv2) = timeit(lambda: step(model, batch, buf, False), repeat=repeat)
    err = max(float((a - b).abs().max() / b.abs().max()) for a, b in ((gE1, gE2), (gp1, gp2), (gv1, gv2)))
    assert abs(l1 - l2) <= tol * abs(l2) and err <= tol, (
        f"{name}: fused and reference disagree: loss {l1} vs {l2}, max relative gradient difference {err:.1e}"
    )
    print(
        f"{name}: fused {t_new * 1e3:.1f} ms, reference {t_ref * 1e3:.1f} ms; agreement: relative loss "
        f"difference {abs(l1 - l2) / abs(l2):.1e}, max gradient difference / max |gradient| {err:.1e}"
    )
    ratio, speedup = t_new / floor, t_ref / t_new
    met = "met" if ratio <= 3 and speedup >= 3 else "NOT met"
    print(
        f"{name}: step={t_new * 1e3:.1f}ms floor={floor * 1e3:.1f}ms reference={t_ref * 1e3:.1f}ms "
        f"bound_ratio={ratio:.2f} speedup_vs_reference={speedup:.2f}  (targets <= 3 and >= 3: {met})"
    )
    return l2, gE2, gp2


def parts(name, model, batch, floor, repeat):
    """Print the fused step's four passes timed one by one, each beside its share of the floor: ``E [p, V]`` and
    ``[A, B]^T E`` (one read of E each), the attention pass over the entries, ``grad_E`` written (one write)."""
    k = ts.models.kernels
    E = model.E.numpy()
    PV = torch.cat([model.p[:, None], model.v if model.v.ndim == 2 else model.v[:, None]], 1).numpy()
    plan = ts.models.core.entry_plan(batch)
    multiclass = batch.num_classes is not None
    CW = k.scores_values(E, PV)
    _, _, AB = k.attention_grads(plan, CW, batch.labels.numpy(), multiclass)
    ABt, PVt = torch.from_numpy(AB), torch.from_numpy(np.ascontiguousarray(PV.T))
    out, labels = torch.empty_like(model.E), batch.labels.numpy()  # grad_E into a reused buffer, as E_into
    times = {
        "E [p, V]": timeit(lambda: k.scores_values(E, PV), repeat=repeat)[0],
        "attention pass": timeit(lambda: k.attention_grads(plan, CW, labels, multiclass), repeat=repeat)[0],
        "[A, B]^T E": timeit(lambda: k.transposed_product(E, AB), repeat=repeat)[0],
        "grad_E written": timeit(lambda: torch.mm(ABt, PVt, out=out), repeat=repeat)[0],
    }
    print(
        f"{name}: the step's passes one by one: "
        + ", ".join(f"{key} {t * 1e3:.1f} ms" for key, t in times.items())
        + f" (floor {floor * 1e3:.1f} ms)"
    )


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    imdb_size_arguments(ap)
    ap.add_argument("--repeat", type=int, default=5, help="timed calls after one warm-up (the best is kept)")
    ap.add_argument("--autograd", action="store_true", help="also check the reference against autograd")
    ap.add_argument("--chunk", type=int, default=200, help="sequences per autograd minibatch")
    ap.add_argument("--dtype", default="float64", choices=["float64", "float32"])
    args = ap.parse_args()
    ts.seed_everything(0)
    dtype = getattr(torch, args.dtype)
    tol = 1e-10 if dtype == torch.float64 else 1e-4  # sums over up to 25,000 entries per token, other orders

    batch = zipf_batch(args.n, args.mean_len, args.vocab)
    model = ts.AttentionModel.init(args.vocab, args.d, seed=0, dtype=dtype)
    model.p.copy_(torch.randn(args.d, generator=ts.seeding.generator(1), dtype=torch.float64).to(dtype))
    print(
        f"batch: {batch.n} sequences, {batch.num_tokens:,} tokens, |S| = {args.vocab}, d = {args.d}, "
        f"{args.dtype}, {torch.get_num_threads()} torch threads, {ts.config.threads()} kernel threads"
    )
    t0 = time.perf_counter()
    dt = batch.distinct()
    ts.models.core.entry_plan(batch)
    M = dt.ids.numel()
    print(
        f"distinct (sequence, token) entries: {M:,} ({M / batch.num_tokens:.0%} of the occurrences), found and "
        f"indexed once per batch in {(time.perf_counter() - t0) * 1e3:.0f} ms (not in the per-step times)"
    )

    # the floor, measured in this run
    big = torch.randn(args.vocab, args.d, dtype=dtype)
    t_read, t_copy = memory_floor_passes(big, args.repeat)
    # the entries as the kernels keep them (tokensel.models.kernels.EntryPlan: 32-bit ids and counts), read as
    # 64-bit words: torch sums int32 far below the memory bandwidth, which would raise the floor
    words = torch.cat([dt.ids.to(torch.int32), dt.counts.to(torch.int32), torch.zeros(1, dtype=torch.int32)])
    words = words[: words.numel() // 2 * 2].view(torch.int64)
    t_pass, _ = timeit(lambda: words.sum(), repeat=args.repeat)
    nbytes = big.numel() * big.element_size()
    floor = t_read + t_copy + t_pass
    print(
        f"floor: E is {nbytes / 2**20:.0f} MiB; read once {t_read * 1e3:.1f} ms ({nbytes / t_read / 1e9:.1f} GB/s), "
        f"read+write once {t_copy * 1e3:.1f} ms, one pass over the entries (ids, counts) {t_pass * 1e3:.1f} ms: "
        f"{floor * 1e3:.1f} ms"
    )
    del big

    loss, gE, gp = compare("gradient", model, batch, floor, args.repeat, tol)
    peak = peak_rss_gb()
    print(f"peak resident memory (data, model, gradients): {peak:.2f} GB (target <= 4 GB)")
    if args.autograd:
        t0 = time.perf_counter()
        l3, gE3, gp3 = autograd_full_batch(model, batch, args.chunk)
        t_auto = time.perf_counter() - t0
        err = max(float((gE - gE3).abs().max()), float((gp - gp3).abs().max())) / float(gE3.abs().max())
        assert abs(loss - l3) < tol and err < tol, f"reference and autograd disagree: loss {loss} vs {l3}, {err}"
        print(
            f"autograd baseline {t_auto * 1e3:.0f} ms (minibatches of {args.chunk}), agrees with the reference "
            f"to {err:.1e}"
        )
    del gE

    kbatch = classes_batch(batch, args.classes)
    kmodel = ts.MultiClassAttentionModel.init(args.vocab, args.d, args.classes, seed=0, dtype=dtype)
    kmodel.p.copy_(model.p)
    del model
    compare(f"gradient K-class (K = {args.classes})", kmodel, kbatch, floor, args.repeat, tol)
    parts(f"gradient K-class (K = {args.classes})", kmodel, kbatch, floor, args.repeat)
    assert peak <= 4.0, f"the IMDB-scale gradient needs {peak:.2f} GB, over the 4 GB target"


if __name__ == "__main__":
    main()
