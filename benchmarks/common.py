"""Shared helpers for the benchmarks: timing and IMDB-scale synthetic batches."""

from __future__ import annotations

import resource
import time

import numpy as np
import torch

import tokensel as ts


def timeit(fn, repeat: int = 3, sync=None):
    """Best wall-clock time of ``repeat`` calls (after one warm-up call) and the last result."""
    out = fn()
    if sync:
        sync()
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        if sync:
            sync()
        best = min(best, time.perf_counter() - t0)
    return best, out


def peak_rss_gb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


def zipf_batch(n: int, mean_len: int, vocab: int, seed: int = 0, device="cpu") -> ts.RaggedBatch:
    """Random reviews with IMDB-like statistics: lengths ~ mean_len (geometric-ish spread) and
    Zipf(1.1)-distributed token ids over ``vocab`` tokens, labels ±1 balanced."""
    g = np.random.default_rng(seed)
    lengths = np.clip(g.gamma(2.0, mean_len / 2.0, size=n).astype(np.int64), 5, 4 * mean_len)
    ranks = np.arange(1, vocab + 1, dtype=np.float64)
    probs = ranks**-1.1
    probs /= probs.sum()
    ids = g.choice(vocab, size=int(lengths.sum()), p=probs)
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    labels = np.where(np.arange(n) % 2 == 0, 1.0, -1.0)
    return ts.RaggedBatch(torch.from_numpy(ids), torch.from_numpy(offsets), torch.from_numpy(labels), vocab).to(device)


def imdb_size_arguments(ap) -> None:
    """The sizes of an IMDB-scale benchmark on the command line (defaults: the paper's IMDB setting):
    ``--n``, ``--mean-len``, ``--vocab``, ``--d`` and ``--classes`` (K of the K-class model)."""
    ap.add_argument("--n", type=int, default=25_000)
    ap.add_argument("--mean-len", type=int, default=230)
    ap.add_argument("--vocab", type=int, default=7_800)
    ap.add_argument("--d", type=int, default=2048)
    ap.add_argument("--classes", type=int, default=4, help="K of the K-class model")


def classes_batch(batch: ts.RaggedBatch, classes: int) -> ts.RaggedBatch:
    """The same sequences with ``classes`` labels, in turn (chapter 7's four rating classes, at benchmark scale)."""
    return ts.RaggedBatch(
        batch.ids, batch.offsets, torch.arange(batch.n) % classes, batch.vocab_size, num_classes=classes
    )
