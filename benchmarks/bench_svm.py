"""Benchmark: the ATT-SVM solved in the sparse score-variable form against the dense form.

Problem (defaults): Assumption-1 data with 20 + 20 important and 600 irrelevant tokens, sequences of
20 tokens, embeddings in d = 512 after one gradient step; the selection is each sequence's
important token. That gives over 10,000 de-duplicated (important, irrelevant) pairs. Both forms are
solved by Clarabel through cvxpy (compilation included in the times) and must reach the same
optimum to 1e-6. Last line: ``svm: speedup=<x>``.
"""

from __future__ import annotations

import argparse
import time

import torch
from common import peak_rss_gb

import tokensel as ts


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pairs", type=int, default=3000, help="positive/negative sequence pairs")
    ap.add_argument("--important", type=int, default=20)
    ap.add_argument("--irrelevant", type=int, default=600)
    ap.add_argument("--length", type=int, default=20)
    ap.add_argument("--d", type=int, default=512)
    args = ap.parse_args()
    ts.seed_everything(0)
    data = ts.synthetic.assumption1_pairs(args.pairs, args.important, args.irrelevant, length=args.length, seed=0)
    b = data.batch
    m0 = ts.AttentionModel.init(b.vocab_size, args.d, seed=0)
    E = ts.one_step(m0, b, eta0=50.0).E
    important = torch.from_numpy(data.planted != 0)
    pairs = ts.selection_pairs(b, important[b.ids])
    print(
        f"{b.n} sequences, |S| = {b.vocab_size}, d = {args.d}: {len(pairs):,} de-duplicated pairs "
        f"(from {int((b.lengths - 1).sum()):,} per-sequence constraints)"
    )
    assert len(pairs) >= 10_000, "the benchmark should have at least 10,000 pairs"

    t0 = time.perf_counter()
    sparse = ts.max_margin(E, pairs, form="sparse")
    t_sparse = time.perf_counter() - t0
    print(f"sparse: {t_sparse:7.2f} s  (solver {sparse.solve_time:.2f} s)  {sparse.summary()}")
    t0 = time.perf_counter()
    dense = ts.max_margin(E, pairs, form="dense")
    t_dense = time.perf_counter() - t0
    print(f"dense:  {t_dense:7.2f} s  (solver {dense.solve_time:.2f} s)  {dense.summary()}")
    diff = float((sparse.p - dense.p).abs().max())
    print(f"max |p_sparse - p_dense| = {diff:.1e}, ||p_mm|| = {sparse.norm:.6f}")
    assert diff < 1e-6, "the two forms disagree"
    print(f"peak resident memory: {peak_rss_gb():.2f} GB")
    print(f"svm: speedup={t_dense / t_sparse:.1f}")


if __name__ == "__main__":
    main()
