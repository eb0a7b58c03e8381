"""The fused attention pass over a batch's distinct (sequence, token) entries, compiled with numba.

:func:`tokensel.core.score_value_grads` (and its K-class twin) compute the loss and ``A = dL/dc``,
``B = dL/dW`` with a dozen tensor passes (gather, segment max, exp, segment sums, scatter), each one a
trip through memory over all entries. Here one kernel per sequence does all of it while the
sequence's entries sit in cache:

1. its top score and the last entry that reaches it (the stable reference ``k`` of :mod:`tokensel.core`);
2. ``e_t = exp(a_t - max) n_t``, ``Z = sum e_t``, ``m = sum e_t (u_t - u_k) / Z`` and ``f = u_k + m``;
3. the sequence's loss, ``g = dL/df``, and the per-entry terms ``h_t = g q_t n_t`` (for ``B``) and
   ``h_t (u_t - u_k - m)`` (for ``A``), written at the entry's place in a token-sorted order.

A second kernel sums those terms per token, over the token-sorted (CSR) order computed once per batch.
Both are parallel (``prange``: sequences in the first, balanced ranges of tokens in the second) and
deterministic: every sum has one owner and a fixed order, so the result is the same bit for bit on
every run and for any number of threads. Exponentials and sums are in float64 for either input dtype
(float32 inputs give float32 results).

The thread count is :func:`tokensel.config.threads` (``TOKENSEL_THREADS``), capped by numba's own
maximum. Compiled code is cached on disk (``cache=True``): next to this file when it is writable, else
in numba's per-user cache, so a fresh process (a chapter's kernel) does not recompile.
"""

from __future__ import annotations

import math

import numba
import numpy as np

from . import config

#: ranges of tokens per thread for the per-token sums (balanced by entry counts)
_TOKEN_RANGES = 64


class EntryPlan:
    """Index arrays of a batch's distinct entries for the kernels, computed once per batch: the
    per-sequence ``offsets``, token ``ids`` and ``counts`` (entry order), each entry's place ``pos``
    in the token-sorted order, the token-sorted CSR row pointer ``token_ptr`` (|S| + 1) and
    ``token_ranges``, boundaries of ranges of tokens holding about equal numbers of entries."""

    def __init__(self, offsets: np.ndarray, ids: np.ndarray, counts: np.ndarray, vocab_size: int):
        self.offsets = np.ascontiguousarray(offsets, dtype=np.int64)
        self.ids = np.ascontiguousarray(ids, dtype=np.int64)
        self._counts = {np.dtype(np.float64): np.ascontiguousarray(counts, dtype=np.float64)}
        self.vocab_size = int(vocab_size)
        M = self.ids.size
        order = np.argsort(self.ids, kind="stable")  # by token, then by sequence
        self.pos = np.empty(M, dtype=np.int64)
        self.pos[order] = np.arange(M, dtype=np.int64)
        per_token = np.bincount(self.ids, minlength=self.vocab_size)
        self.token_ptr = np.concatenate([[0], np.cumsum(per_token)]).astype(np.int64)
        cuts = np.searchsorted(self.token_ptr, np.arange(1, _TOKEN_RANGES) * (M / _TOKEN_RANGES))
        self.token_ranges = np.unique(np.concatenate([[0], cuts, [self.vocab_size]])).astype(np.int64)

    @property
    def n(self) -> int:
        return self.offsets.size - 1

    def counts(self, dtype) -> np.ndarray:
        """The multiplicities in ``dtype`` (converted once)."""
        dtype = np.dtype(dtype)
        if dtype not in self._counts:
            self._counts[dtype] = self._counts[np.dtype(np.float64)].astype(dtype)
        return self._counts[dtype]


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
def _entries_binary(off, ids, counts, CW, y, pos, H, f, loss):  # pragma: no cover - compiled
    """Binary model: ``CW`` is |S| x 2 (``c``, ``w``); writes ``f`` and the per-sequence losses, and
    ``H[pos_t] = (h_t (u_t - f), h_t)`` for every entry."""
    n = off.size - 1
    for i in numba.prange(n):
        lo, hi = off[i], off[i + 1]
        amax, k = _top(ids, CW, lo, hi)
        uk = CW[ids[k], 1]
        Z = 0.0
        s = 0.0
        for t in range(lo, hi):
            tok = ids[t]
            e = math.exp(CW[tok, 0] - amax) * counts[t]
            H[pos[t], 1] = e
            Z += e
            s += e * (CW[tok, 1] - uk)
        m = s / Z
        fi = uk + m
        yi = y[i]
        loss[i] = _softplus(-yi * fi)
        gz = -1.0 / (1.0 + math.exp(yi * fi)) * yi / n / Z  # dL/df_i / Z_i
        for t in range(lo, hi):
            j = pos[t]
            h = gz * H[j, 1]
            H[j, 0] = h * ((CW[ids[t], 1] - uk) - m)
            H[j, 1] = h
        f[i] = fi


@numba.njit(parallel=True, cache=True)
def _entries_multiclass(off, ids, counts, CW, y, pos, H, F, G, loss):  # pragma: no cover - compiled
    """K-class model: ``CW`` is |S| x (1 + K) (``c``, then ``W``); writes the logits ``F`` (n x K),
    ``G = dL/dF`` (n x K), the per-sequence losses and ``H[pos_t] = (sum_k h_tk (u_tk - f_k), h_t1..h_tK)``
    with ``h_tk = G_k q_t n_t``."""
    n = off.size - 1
    K = CW.shape[1] - 1
    for i in numba.prange(n):
        lo, hi = off[i], off[i + 1]
        amax, k = _top(ids, CW, lo, hi)
        r = ids[k]
        Z = 0.0
        for c in range(K):
            F[i, c] = 0.0
        for t in range(lo, hi):
            tok = ids[t]
            e = math.exp(CW[tok, 0] - amax) * counts[t]
            H[pos[t], 0] = e
            Z += e
            for c in range(K):
                F[i, c] += e * (CW[tok, 1 + c] - CW[r, 1 + c])
        fmax = -np.inf
        for c in range(K):
            F[i, c] /= Z  # m_c = f_c - u_kc, kept in G until the logits are known
            G[i, c] = F[i, c]
            F[i, c] += CW[r, 1 + c]
            fmax = max(fmax, F[i, c])
        se = 0.0
        for c in range(K):
            se += math.exp(F[i, c] - fmax)
        lse = fmax + math.log(se)
        loss[i] = lse - F[i, y[i]]
        for t in range(lo, hi):
            j = pos[t]
            q = H[j, 0] / Z
            acc = 0.0
            for c in range(K):
                gc = (math.exp(F[i, c] - lse) - (1.0 if c == y[i] else 0.0)) / n
                h = gc * q
                acc += ((CW[ids[t], 1 + c] - CW[r, 1 + c]) - G[i, c]) * h
                H[j, 1 + c] = h
            H[j, 0] = acc
        for c in range(K):
            G[i, c] = (math.exp(F[i, c] - lse) - (1.0 if c == y[i] else 0.0)) / n


@numba.njit(parallel=True, cache=True)
def _per_token(token_ptr, token_ranges, H, out):  # pragma: no cover - compiled
    """``out[s] = sum of the rows of H`` in token ``s``'s range of the token-sorted order, in order."""
    width = H.shape[1]
    for r in numba.prange(token_ranges.size - 1):
        for s in range(token_ranges[r], token_ranges[r + 1]):
            for c in range(width):
                acc = 0.0
                for j in range(token_ptr[s], token_ptr[s + 1]):
                    acc += H[j, c]
                out[s, c] = acc


def _threads() -> None:
    numba.set_num_threads(min(config.threads(), numba.config.NUMBA_NUM_THREADS))


def attention_grads(plan: EntryPlan, CW: np.ndarray, labels: np.ndarray, multiclass: bool):
    """Loss and gradients of the one-layer model over the entries of ``plan``.

    ``CW`` (|S| x (1 + K), float32 or float64) holds the scores ``c = E p`` in column 0 and the values
    ``W = E V`` after it (one column, ``w = E v``, for the binary model); ``labels`` are ±1 (binary) or
    class indices. Returns ``(loss, f, AB)``: the mean loss (a Python float), the outputs (n,) or
    logits (n x K), and ``AB`` (|S| x (1 + K)) with ``A = dL/dc`` in column 0 and ``B = dL/dW`` after it.
    """
    dtype = CW.dtype
    CW = np.ascontiguousarray(CW)
    n, M, width = plan.n, plan.ids.size, CW.shape[1]
    H = np.empty((M, width), dtype=dtype)
    per_seq = np.empty(n, dtype=np.float64)
    _threads()
    if multiclass:
        f = np.empty((n, width - 1), dtype=dtype)
        G = np.empty((n, width - 1), dtype=dtype)
        _entries_multiclass(plan.offsets, plan.ids, plan.counts(dtype), CW, np.ascontiguousarray(labels, np.int64),
                            plan.pos, H, f, G, per_seq)
    else:
        f = np.empty(n, dtype=dtype)
        _entries_binary(plan.offsets, plan.ids, plan.counts(dtype), CW, np.ascontiguousarray(labels, np.float64),
                        plan.pos, H, f, per_seq)
    AB = np.empty((plan.vocab_size, width), dtype=dtype)
    _per_token(plan.token_ptr, plan.token_ranges, H, AB)
    return float(per_seq.astype(dtype).sum(dtype=dtype) / dtype.type(n)), f, AB
