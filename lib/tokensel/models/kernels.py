"""The fused attention pass over a batch's distinct (sequence, token) entries, compiled with numba.

:func:`tokensel.models.core.score_value_grads` (and its K-class twin) compute the loss and ``A = dL/dc``,
``B = dL/dW`` with a dozen tensor passes (gather, segment max, exp, segment sums, scatter), each one a
trip through memory over all entries. Here one kernel per sequence does all of it while the
sequence's entries sit in cache:

1. its top score and the last entry that reaches it (the stable reference ``k`` of :mod:`tokensel.models.core`);
2. ``e_t = exp(a_t - max) n_t``, ``Z = sum e_t``, ``m = sum e_t (u_t - u_k) / Z`` and ``f = u_k + m``;
3. the sequence's loss, ``g = dL/df``, and the per-entry terms ``h_t = g q_t n_t`` (for ``B``) and
   ``h_t (u_t - u_k - m)`` (for ``A``), added into its block's per-token partial sums.

The sequences are cut into a fixed number of blocks of about equal numbers of entries, processed in
parallel (``prange``); each block owns an |S| x (1 + K) table of partial sums (small enough to stay in
a core's cache), and a second kernel adds the blocks' tables per token, in block order. Every sum has
one owner and a fixed order, and the blocks do not depend on the number of threads: the result is the
same bit for bit on every run and for any thread count. Exponentials and sums are in float64 for
either input dtype (float32 inputs give float32 results).

The thread count is :func:`tokensel.config.threads` (``TOKENSEL_THREADS``), capped by numba's own
maximum. Compiled code is cached on disk (``cache=True``): next to this file when it is writable, else
in numba's per-user cache, so a fresh process (a chapter's kernel) does not recompile.
"""

from __future__ import annotations

import math
import threading

import numba
import numpy as np

from .. import config

#: blocks of sequences (fixed, so that the order of every sum is independent of the thread count)
BLOCKS = 16


class EntryPlan:
    """Index arrays of a batch's distinct entries for the kernels, computed once per batch: the
    per-sequence ``offsets``, token ``ids`` and ``counts`` (entry order), the longest sequence's number
    of entries ``max_entries`` and ``blocks``, the boundaries of at most :data:`BLOCKS` ranges of
    sequences holding about equal numbers of entries. It also keeps the blocks' tables of partial sums
    between calls (a fresh allocation on every step costs page faults), guarded by ``lock``."""

    def __init__(self, offsets: np.ndarray, ids: np.ndarray, counts: np.ndarray, vocab_size: int):
        self.offsets = np.ascontiguousarray(offsets, dtype=np.int64)
        self.ids = np.ascontiguousarray(ids, dtype=np.int64)
        self._counts = {np.dtype(np.float64): np.ascontiguousarray(counts, dtype=np.float64)}
        self.vocab_size = int(vocab_size)
        n, M = self.offsets.size - 1, self.ids.size
        self.max_entries = int(np.diff(self.offsets).max()) if n else 0
        cuts = np.searchsorted(self.offsets, np.arange(1, BLOCKS) * (M / BLOCKS))
        self.blocks = np.unique(np.concatenate([[0], np.clip(cuts, 0, n), [n]])).astype(np.int64)
        self.lock = threading.Lock()
        self._scratch: dict[int, np.ndarray] = {}

    @property
    def n(self) -> int:
        return self.offsets.size - 1

    def counts(self, dtype) -> np.ndarray:
        """The multiplicities in ``dtype`` (converted once)."""
        dtype = np.dtype(dtype)
        if dtype not in self._counts:
            self._counts[dtype] = self._counts[np.dtype(np.float64)].astype(dtype)
        return self._counts[dtype]

    def partials(self, width: int) -> np.ndarray:
        """The blocks' tables of partial sums, blocks x |S| x ``width`` float64 (hold ``lock``)."""
        if width not in self._scratch:
            self._scratch.clear()
            self._scratch[width] = np.empty((self.blocks.size - 1, self.vocab_size, width))
        return self._scratch[width]


@numba.njit(cache=True, inline="always")
def _top(ids, CW, lo, hi):
    """The largest score of entries ``lo..hi-1`` and the last entry that reaches it."""
    amax = -np.inf
    k = lo
    for t in range(lo, hi):
        a = CW[ids[t], 0]
        if a >= amax:
            amax = a
            k = t
    return amax, k


@numba.njit(cache=True, inline="always")
def _softplus(x):
    """``log(1 + e^x)`` as torch's softplus computes it (threshold 20)."""
    return x if x > 20.0 else math.log1p(math.exp(x))


@numba.njit(parallel=True, cache=True)
def _entries_binary(off, ids, counts, CW, y, blocks, max_entries, P, f, loss):  # pragma: no cover - compiled
    """Binary model: ``CW`` is |S| x 2 (``c``, ``w``); writes ``f``, the per-sequence losses and the
    blocks' partial sums ``P[b, s] = sum over the entries t of token s in block b of (h_t (u_t - f), h_t)``."""
    n = off.size - 1
    for b in numba.prange(blocks.size - 1):
        Pb = P[b]
        Pb[:, :] = 0.0
        ebuf = np.empty(max_entries)
        for i in range(blocks[b], blocks[b + 1]):
            lo, hi = off[i], off[i + 1]
            amax, k = _top(ids, CW, lo, hi)
            uk = CW[ids[k], 1]
            Z = 0.0
            s = 0.0
            for t in range(lo, hi):
                tok = ids[t]
                e = math.exp(CW[tok, 0] - amax) * counts[t]
                ebuf[t - lo] = e
                Z += e
                s += e * (CW[tok, 1] - uk)
            m = s / Z
            fi = uk + m
            yi = y[i]
            loss[i] = _softplus(-yi * fi)
            gz = -1.0 / (1.0 + math.exp(yi * fi)) * yi / n / Z  # dL/df_i / Z_i
            for t in range(lo, hi):
                tok = ids[t]
                h = gz * ebuf[t - lo]
                Pb[tok, 0] += h * ((CW[tok, 1] - uk) - m)
                Pb[tok, 1] += h
            f[i] = fi


@numba.njit(parallel=True, cache=True)
def _entries_multiclass(off, ids, counts, CW, y, blocks, max_entries, P, F, loss):  # pragma: no cover - compiled
    """K-class model: ``CW`` is |S| x (1 + K) (``c``, then ``W``); writes the logits ``F`` (n x K), the
    per-sequence losses and the blocks' partial sums of ``(sum_k h_tk (u_tk - f_k), h_t1..h_tK)`` per
    token, with ``h_tk = G_k q_t n_t`` and ``G = dL/dF``."""
    n = off.size - 1
    K = CW.shape[1] - 1
    for b in numba.prange(blocks.size - 1):
        Pb = P[b]
        Pb[:, :] = 0.0
        ebuf = np.empty(max_entries)
        m = np.empty(K)
        G = np.empty(K)
        for i in range(blocks[b], blocks[b + 1]):
            lo, hi = off[i], off[i + 1]
            amax, k = _top(ids, CW, lo, hi)
            r = ids[k]
            Z = 0.0
            m[:] = 0.0
            for t in range(lo, hi):
                tok = ids[t]
                e = math.exp(CW[tok, 0] - amax) * counts[t]
                ebuf[t - lo] = e
                Z += e
                for c in range(K):
                    m[c] += e * (CW[tok, 1 + c] - CW[r, 1 + c])
            fmax = -np.inf
            for c in range(K):
                m[c] /= Z  # f_c - u_kc
                F[i, c] = CW[r, 1 + c] + m[c]
                fmax = max(fmax, F[i, c])
            se = 0.0
            for c in range(K):
                se += math.exp(F[i, c] - fmax)
            lse = fmax + math.log(se)
            loss[i] = lse - F[i, y[i]]
            for c in range(K):
                G[c] = (math.exp(F[i, c] - lse) - (1.0 if c == y[i] else 0.0)) / n
            for t in range(lo, hi):
                tok = ids[t]
                q = ebuf[t - lo] / Z
                acc = 0.0
                for c in range(K):
                    h = G[c] * q
                    acc += ((CW[tok, 1 + c] - CW[r, 1 + c]) - m[c]) * h
                    Pb[tok, 1 + c] += h
                Pb[tok, 0] += acc


@numba.njit(parallel=True, cache=True)
def _sum_blocks(P, out):  # pragma: no cover - compiled
    """``out[s] = P[0, s] + P[1, s] + ...``, in block order."""
    for s in numba.prange(P.shape[1]):
        for c in range(P.shape[2]):
            acc = 0.0
            for b in range(P.shape[0]):
                acc += P[b, s, c]
            out[s, c] = acc


@numba.njit(parallel=True, fastmath=True, cache=True)
def _rowdot(E, PVt, out):  # pragma: no cover - compiled
    """``out = E PVt^T``: each row of ``E`` read once for all columns (fastmath lets the dot products
    vectorise; the order of each sum is fixed by the compiled code, so runs repeat bitwise)."""
    for s in numba.prange(E.shape[0]):
        for c in range(PVt.shape[0]):
            acc = 0.0
            for j in range(E.shape[1]):
                acc += E[s, j] * PVt[c, j]
            out[s, c] = acc


def scores_values(E: np.ndarray, PV: np.ndarray) -> np.ndarray:
    """``E PV`` (|S| x (1 + K)) for the d x (1 + K) matrix ``PV = [p, V]``: one pass over ``E`` (a BLAS
    product with so few columns reads it at a third of the memory bandwidth on two cores)."""
    out = np.empty((E.shape[0], PV.shape[1]), dtype=E.dtype)
    _threads()
    _rowdot(np.ascontiguousarray(E), np.ascontiguousarray(PV.T), out)
    return out


def _threads() -> None:
    # numba.config sets NUMBA_NUM_THREADS at import time (through globals()), which its stubs cannot see
    numba.set_num_threads(min(config.threads(), numba.config.NUMBA_NUM_THREADS))  # type: ignore[attr-defined]


def attention_grads(plan: EntryPlan, CW: np.ndarray, labels: np.ndarray, multiclass: bool):
    """Loss and gradients of the one-layer model over the entries of ``plan``.

    ``CW`` (|S| x (1 + K), float32 or float64) holds the scores ``c = E p`` in column 0 and the values
    ``W = E V`` after it (one column, ``w = E v``, for the binary model); ``labels`` are ±1 (binary) or
    class indices. Returns ``(loss, f, AB)``: the mean loss (a Python float), the outputs (n,) or
    logits (n x K), and ``AB`` (|S| x (1 + K)) with ``A = dL/dc`` in column 0 and ``B = dL/dW`` after it.
    """
    dtype = CW.dtype
    CW = np.ascontiguousarray(CW)
    n, width = plan.n, CW.shape[1]
    per_seq = np.empty(n, dtype=np.float64)
    AB = np.empty((plan.vocab_size, width), dtype=dtype)
    f = np.empty((n, width - 1) if multiclass else n, dtype=dtype)
    _threads()
    with plan.lock:
        P = plan.partials(width)
        args = (plan.offsets, plan.ids, plan.counts(dtype), CW)
        if multiclass:
            _entries_multiclass(
                *args, np.ascontiguousarray(labels, np.int64), plan.blocks, plan.max_entries, P, f, per_seq
            )
        else:
            _entries_binary(
                *args, np.ascontiguousarray(labels, np.float64), plan.blocks, plan.max_entries, P, f, per_seq
            )
        _sum_blocks(P, AB)
    return float(per_seq.astype(dtype).sum(dtype=dtype) / dtype.type(n)), f, AB
