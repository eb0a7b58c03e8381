"""Shared helpers for the benchmarks: timing and IMDB-scale synthetic batches."""

from __future__ import annotations

import resource
import time

import numba
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


@numba.njit(parallel=True, fastmath=True, cache=True)
def _read_rows(E):  # pragma: no cover - compiled
    """The sum of every entry of ``E`` (2-D, C-contiguous), its rows split between the threads: one read of ``E``."""
    total = 0.0
    for i in numba.prange(E.shape[0]):
        acc = 0.0
        for j in range(E.shape[1]):
            acc += E[i, j]
        total += acc
    return total


@numba.njit(parallel=True, cache=True)
def _copy_rows(src, dst):  # pragma: no cover - compiled
    """``dst[:] = src``, row by row between the threads: one read and one write."""
    for i in numba.prange(src.shape[0]):
        for j in range(src.shape[1]):
            dst[i, j] = src[i, j]


def memory_floor_passes(big: torch.Tensor, repeat: int) -> tuple[float, float]:
    """``(read, copy)``: the fastest time to read ``big`` once and to read it and write a copy of it, each the better
    of torch's own pass (``sum``, ``copy_``) and a numba pass on the kernels' threads, so that neither way of reading
    memory, nor how either's threads wait between calls, sets a floor that an implementation could beat."""
    a, dst = big.numpy(), torch.empty_like(big)
    d = dst.numpy()
    ts.models.kernels._threads()
    t_read = min(timeit(lambda: big.sum(), repeat=repeat)[0], timeit(lambda: _read_rows(a), repeat=repeat)[0])
    t_copy = min(timeit(lambda: dst.copy_(big), repeat=repeat)[0], timeit(lambda: _copy_rows(a, d), repeat=repeat)[0])
    return t_read, t_copy


def chapter_code(source) -> list[str]:
    """The code cells of a chapter's MyST source (``book/<chapter>.md``, read by jupytext), in order, each without its
    IPython magics and shell lines, as plain Python to execute in one namespace, as the book build runs them."""
    import jupytext

    cells = [c.source for c in jupytext.read(source).cells if c.cell_type == "code"]
    return ["\n".join(line for line in src.splitlines() if not line.lstrip().startswith(("%", "!"))) for src in cells]
