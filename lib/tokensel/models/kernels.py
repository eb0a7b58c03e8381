"""The fused attention pass over a batch's distinct (sequence, token) entries, compiled with numba.

:func:`tokensel.models.core.score_value_grads` (and its K-class twin) compute the loss and ``A = dL/dc``,
``B = dL/dW`` with a dozen tensor passes (gather, segment max, exp, segment sums, scatter), each one a
trip through memory over all entries. Here one kernel per sequence does all of it while the
sequence's entries sit in cache:

1. its entries' rows of ``[c, W]`` gathered once, its top score and the last entry that reaches it (the
   stable reference ``k`` of :mod:`tokensel.models.core`);
2. ``e_t = exp(a_t - max) n_t`` (a vectorised exponential), ``Z = sum e_t``, ``m = sum e_t (u_t - u_k) / Z`` (each
   sum in four interleaved partial sums, a fixed order) and ``f = u_k + m``;
3. the sequence's loss, ``g = dL/df``, and the per-entry terms ``h_t = g q_t n_t`` (for ``B``) and
   ``h_t (u_t - u_k - m)`` (for ``A``), added into its block's per-token partial sums.

The sequences are cut into a fixed number of blocks of about equal numbers of entries, which the threads
take one at a time (an atomic counter: a thread slowed by other work takes fewer); each block owns an
|S| x (1 + K) table of partial sums (small enough to stay in a core's cache), and a second kernel adds the
blocks' tables per token, in block order. Every sum has one owner and a fixed order, and the blocks do not
depend on the number of threads: the result is the same bit for bit on every run and for any thread count.
Exponentials and sums are in float64 for either input dtype (float32 inputs give float32 results).

The products with ``E`` are numba passes too: ``E [p, V]`` (:func:`scores_values`), ``[A, B]^T E``
(:func:`transposed_product`, fixed blocks of rows with float64 partial sums, optionally writing ``grad_E`` in
the same pass) and ``grad_E = [A, B] [p, V]^T`` written once (:func:`low_rank_product`): a BLAS product with
two to five columns runs far below the memory bandwidth.

The thread count is :func:`tokensel.config.threads` (``TOKENSEL_THREADS``), capped by numba's own
maximum. Compiled code is cached on disk (``cache=True``): next to this file when it is writable, else
in numba's per-user cache, so a fresh process (a chapter's kernel) does not recompile.
"""

from __future__ import annotations

import math
import os
import platform
import threading

import numba
import numpy as np
from llvmlite import ir
from numba.core import cgutils, types
from numba.extending import intrinsic

from .. import config
from ..errors import ArgumentTypeError, InvalidArgumentError, InvalidBatchError
from .lanes import LANES, add_lane_sums, add_scaled_four, four_lane_sum, lanes_total, prefetch_row, weigh_and_sum

#: blocks of sequences (fixed, so that the order of every sum is independent of the thread count)
BLOCKS = 16
#: a batch with fewer distinct entries runs its blocks in one thread: launching the pool costs more than it
#: saves there (the flows of chapters 3-5 evaluate such a gradient some 100,000 times). The blocks and
#: every sum are the same either way, so the result is bitwise the same.
SERIAL_BELOW = 50_000
#: a table ``E`` (or ``grad_E``) with fewer entries has its products (:func:`scores_values`,
#: :func:`transposed_product`, :func:`low_rank_product`) computed on one thread, by kernels compiled without numba's
#: parallel loops: waking the pool costs more than the product there (the small models of chapters 1-5), and a
#: parallel kernel takes several times as long to compile (``[A, B]^T E``: 4.3 against 1.7 s, a fresh install's
#: first gradient). The rows, blocks and sums are the same either way, so the result is bitwise the same.
SERIAL_E_BELOW = 2**16
#: the number of classes whose one-layer kernels are written out class by class (chapter 07's four rating
#: classes): one loop over the entries for the gradient terms, one for the scatter, where other K take one pass per
#: class. The binary model's gather is written out too unless this is 0. The operations and their order are the same, so
#: the results are bitwise the same (a test sets 0, the general loops everywhere, and compares); written out, the
#: four-class attention pass takes about two thirds of the time, the binary one four fifths.
UNROLLED_CLASSES = 4

# numba's own thread pool ("workqueue") unless the user chose one: its OpenMP pool would share the
# OpenMP runtime that torch has loaded and set that runtime's thread count to numba's default, so torch
# would ignore TOKENSEL_THREADS (and a torch.set_num_threads) after the first kernel. The workqueue pool
# takes one launch at a time: every launch holds _LAUNCH.
if "NUMBA_THREADING_LAYER" not in os.environ:
    numba.config.THREADING_LAYER = "workqueue"  # type: ignore[attr-defined]
_LAUNCH = threading.RLock()


class EntryPlan:
    """Index arrays of a batch's distinct entries for the kernels, computed once per batch: the
    per-sequence ``offsets``, token ``ids`` and ``counts`` (entry order), the longest sequence's number
    of entries ``max_entries`` and ``blocks``, the boundaries of at most :data:`BLOCKS` ranges of
    sequences holding about equal numbers of entries. It also keeps the blocks' tables of partial sums
    between calls (a fresh allocation on every step costs page faults), guarded by ``lock``.

    The ids, and the counts where they are whole numbers up to 2^24, are kept as 32-bit integers: at IMDB's size the
    two arrays take 24 instead of 48 MB, which every training step reads again after its passes over ``E`` have pushed
    them out of the cache (the binary attention pass 10.7 -> 8.6 ms there). Such counts are exact in float32 and
    float64, which the kernels multiply by, so the results are bitwise those of counts in the model's dtype; other
    counts are kept in each dtype (:meth:`counts_for`), as before."""

    def __init__(self, offsets: np.ndarray, ids: np.ndarray, counts: np.ndarray, vocab_size: int):
        self.offsets = np.ascontiguousarray(offsets, dtype=np.int64)
        self.vocab_size = int(vocab_size)
        ids, counts = np.asarray(ids), np.asarray(counts)
        n, M = self.offsets.size - 1, ids.size
        if ids.shape != (M,) or counts.shape != (M,):
            raise InvalidBatchError(f"ids and counts must be one per entry, got shapes {ids.shape} and {counts.shape}")
        if ids.dtype.kind not in "iu" and not (ids.dtype.kind == "f" and np.array_equal(ids, np.floor(ids))):
            raise InvalidBatchError("token ids must be whole numbers: build the plan from a checked RaggedBatch")
        # the kernels index with the ids as unsigned numbers (no wraparound of negative indices, no bounds check)
        if M and not (0 <= ids.min() and ids.max() < self.vocab_size):
            raise InvalidBatchError(
                f"token ids must lie in [0, {self.vocab_size}) (the vocabulary), got ids from {ids.min():g} "
                f"to {ids.max():g}: build the plan from a checked RaggedBatch"
            )
        self.ids = np.ascontiguousarray(ids, dtype=np.int32 if self.vocab_size <= 2**31 else np.int64)
        exact = counts.size == 0 or (
            counts.min() >= 0 and counts.max() <= 2**24 and np.array_equal(counts, np.floor(counts))
        )
        self.counts: np.ndarray | None = np.ascontiguousarray(counts, dtype=np.int32) if exact else None
        self._float_counts = {} if exact else {np.dtype(np.float64): np.ascontiguousarray(counts, dtype=np.float64)}
        # every sequence holds at least one entry: the kernels read its top-scored entry
        off = self.offsets
        if off.size == 0 or off[0] != 0 or off[-1] != M or np.any(np.diff(off) <= 0):
            raise InvalidBatchError(
                f"offsets must rise strictly from 0 to the number of entries ({M}), no sequence empty: build the plan "
                "from a checked RaggedBatch"
            )
        self.max_entries = int(np.diff(self.offsets).max()) if n else 0
        cuts = np.searchsorted(self.offsets, np.arange(1, BLOCKS) * (M / BLOCKS))
        self.blocks = np.unique(np.concatenate([[0], np.clip(cuts, 0, n), [n]])).astype(np.int64)
        self.lock = threading.Lock()
        self._scratch: dict[int, np.ndarray] = {}

    @property
    def n(self) -> int:
        return self.offsets.size - 1

    def counts_for(self, dtype) -> np.ndarray:
        """The multiplicities the kernels multiply by for a model of ``dtype``: the 32-bit counts, or where they are
        not whole numbers up to 2^24, the counts in ``dtype`` (converted once)."""
        if self.counts is not None:
            return self.counts
        dtype = np.dtype(dtype)
        if dtype not in self._float_counts:
            self._float_counts[dtype] = self._float_counts[np.dtype(np.float64)].astype(dtype)
        return self._float_counts[dtype]

    def partials(self, width: int) -> np.ndarray:
        """The blocks' tables of partial sums, blocks x |S| x ``width`` float64 (hold ``lock``)."""
        if width not in self._scratch:
            self._scratch.clear()
            self._scratch[width] = np.empty((self.blocks.size - 1, self.vocab_size, width))
        return self._scratch[width]


@intrinsic
def _fetch_add(typingctx, counter, i):  # pragma: no cover - compiled
    """Atomically ``counter[i] += 1`` (an int64 array); the value before."""
    sig = types.int64(counter, i)

    def codegen(context, builder, signature, args):
        aty = signature.args[0]
        ary = context.make_array(aty)(context, builder, args[0])
        ptr = cgutils.get_item_pointer(context, builder, aty, ary, [args[1]])
        return builder.atomic_rmw("add", ptr, context.get_constant(types.int64, 1), "monotonic")

    return sig, codegen


@numba.njit(cache=True, inline="always")
def _softplus(x):
    """``log(1 + e^x)`` as torch's softplus computes it (threshold 20)."""
    return x if x > 20.0 else math.log1p(math.exp(x))


# The one-layer kernels below index ``ids`` and the tables with ``np.uint64`` numbers: numba then leaves out its
# wraparound of negative indices (three instructions per index), a tenth of the binary attention pass at IMDB's size.
# Every id and offset of an EntryPlan is checked when the plan is built.
@numba.njit(cache=True, inline="always")
def _attend(ids, counts, CW, lo, hi, a, e, m, unroll):  # pragma: no cover - compiled
    """One sequence's attention sums, shared by every one-layer kernel (so that their outputs agree bit for bit).
    Its entries ``t = lo + j`` are gathered once, ``a[:, j] = CW[ids[t]]`` (in float64: the score, then the K
    values); then ``e[j] = exp(c_t - c_max) n_t`` (vectorised, :func:`_exp_shifted`), ``Z = sum_j e_j``, and with
    ``r`` the token of the last top-scored entry (the stable reference of :mod:`tokensel.models.core`)
    ``m[0, c] = sum_j e_j (u_tc - u_rc) / Z`` and ``m[1, c] = u_rc``, the sums in the fixed order of
    :func:`tokensel.models.lanes.four_lane_sum`. With ``unroll`` = K, and for the binary model (K = 1) with any
    ``unroll`` but 0, the gather is written out column by column (the same values). Returns ``(Z, r)``."""
    L = hi - lo
    W = CW.shape[1]
    amax = -np.inf
    k = 0
    if W == 5 and unroll == 4:  # four classes: the gather written out
        for j in range(L):
            t = np.uint64(ids[np.uint64(lo + j)])
            x = np.float64(CW[t, 0])
            a[0, j] = x
            a[1, j] = CW[t, 1]
            a[2, j] = CW[t, 2]
            a[3, j] = CW[t, 3]
            a[4, j] = CW[t, 4]
            if x >= amax:
                amax = x
                k = j
    elif W == 2 and unroll != 0:  # the binary model: the gather written out too (a fifth faster at IMDB's size)
        for j in range(L):
            t = np.uint64(ids[np.uint64(lo + j)])
            x = np.float64(CW[t, 0])
            a[0, j] = x
            a[1, j] = CW[t, 1]
            if x >= amax:
                amax = x
                k = j
    else:
        for j in range(L):
            t = np.uint64(ids[np.uint64(lo + j)])
            x = np.float64(CW[t, 0])
            a[0, j] = x
            for c in range(1, W):
                a[c, j] = CW[t, c]
            if x >= amax:
                amax = x
                k = j
    _exp_shifted(a, 0, amax, L, e)
    for c in range(W - 1):
        m[1, c] = a[1 + c, k]
    # the weights e_j n_t, Z and the values' sums in one loop (four classes, the binary model), in four_lane_sum's
    # order; other K: the first value's sum with Z, the others one by one
    if W == 5 and unroll == 4:
        Z, s1, s2, s3, s4 = weigh_and_sum(e, counts, lo, a, m[1], L, 4)
        m[0, 0], m[0, 1], m[0, 2], m[0, 3] = s1 / Z, s2 / Z, s3 / Z, s4 / Z
        return Z, ids[lo + k]
    Z, s1 = weigh_and_sum(e, counts, lo, a, m[1], L, 1)
    m[0, 0] = s1 / Z
    for c in range(1, W - 1):
        m[0, c] = four_lane_sum(e, a, 1 + c, m[1, c], L) / Z
    return Z, ids[lo + k]


# Compiled without numba's reference counting (_nrt=False, as numba compiles its own hot helpers): it allocates
# nothing, and with it every inlined _attend counted six references up and down per sequence, atomically, on arrays
# both threads share; a third of the time of chapters 3-5's small batches (their flows call it 100,000 times), a
# twentieth at IMDB's size.
@numba.njit(cache=True, _nrt=False)  # type: ignore[call-overload]  # numba's own option, not in its stubs
def _block(b, off, ids, counts, CW, y, binary, blocks, P, F, loss, a, e, m, G, unroll):  # pragma: no cover
    """Block ``b`` of sequences: for each, the logits ``F[i] = u_r + m`` (n x K; K = 1 for the binary model), its
    loss (``binary``: ``y`` holds ±1 labels and the loss is the logistic loss of ``F[i, 0]``; else ``y`` holds
    class indices and the loss is the cross-entropy), and the block's partial sums ``P[b, s] = sum over the
    entries t of token s of (sum_c h_tc ((u_tc - u_rc) - m_c), h_t1..h_tK)`` with ``h_tc = (G_c / Z) e_t`` and
    ``G = dL/dF_i``; ``a``, ``e``, ``m``, ``G`` are scratch buffers (:func:`_scratch`)."""
    n = off.size - 1
    K = CW.shape[1] - 1
    Pb = P[b]
    Pb[:, :] = 0.0
    for i in range(blocks[b], blocks[b + 1]):
        lo, hi = off[i], off[i + 1]
        Z, _ = _attend(ids, counts, CW, lo, hi, a, e, m, unroll)
        if binary:  # the logistic loss of f = F[i, 0]; its gradient's terms in one loop
            fi = m[1, 0] + m[0, 0]
            F[i, 0] = fi
            loss[i] = _softplus(-y[i] * fi)
            gz = -1.0 / (1.0 + math.exp(y[i] * fi)) * y[i] / n / Z
            ur, mi = m[1, 0], m[0, 0]
            for j in range(hi - lo):
                tok = np.uint64(ids[np.uint64(lo + j)])
                h = gz * e[j]
                Pb[tok, 0] += h * ((a[1, j] - ur) - mi)
                Pb[tok, 1] += h
            continue
        fmax = -np.inf
        for c in range(K):
            F[i, c] = m[1, c] + m[0, c]
            fmax = max(fmax, F[i, c])
        se = 0.0
        for c in range(K):
            se += math.exp(F[i, c] - fmax)
        lse = fmax + math.log(se)
        yi = int(y[i])
        loss[i] = lse - F[i, yi]
        for c in range(K):
            G[c] = (math.exp(F[i, c] - lse) - (1.0 if c == yi else 0.0)) / n / Z
        if K == 4 and unroll == 4:  # four classes written out: the same operations in the same order
            g1, g2, g3, g4 = G[0], G[1], G[2], G[3]
            r1, r2, r3, r4 = m[1, 0], m[1, 1], m[1, 2], m[1, 3]
            m1, m2, m3, m4 = m[0, 0], m[0, 1], m[0, 2], m[0, 3]
            # the score terms of every entry first (over the scores, a[0], no longer needed): a loop that vectorises,
            # entries side by side, each term's operations in its own order; then the scatter alone, which forms the
            # value terms h_tc = G_c e_t again, as one vector (add_scaled_four: the same products and sums)
            for j in range(hi - lo):
                ej = e[j]
                h1, h2, h3, h4 = g1 * ej, g2 * ej, g3 * ej, g4 * ej
                s = 0.0
                s += ((a[1, j] - r1) - m1) * h1
                s += ((a[2, j] - r2) - m2) * h2
                s += ((a[3, j] - r3) - m3) * h3
                s += ((a[4, j] - r4) - m4) * h4
                a[0, j] = s
            for j in range(hi - lo):
                tok = np.uint64(ids[np.uint64(lo + j)])
                Pb[tok, 0] += a[0, j]
                add_scaled_four(Pb, tok, G, e[j])
            continue
        # other K in two stages, each loop with its constants in registers: per class, the terms h_tc (written over
        # the values a[1 + c], each read just before) and the score terms' sums over the classes (over the scores,
        # a[0], no longer needed); then per entry, its token's row of partial sums
        for j in range(hi - lo):
            a[0, j] = 0.0
        for c in range(K):
            g, ur, mc = G[c], m[1, c], m[0, c]
            for j in range(hi - lo):
                h = g * e[j]
                a[0, j] += ((a[1 + c, j] - ur) - mc) * h
                a[1 + c, j] = h
        for j in range(hi - lo):
            tok = np.uint64(ids[np.uint64(lo + j)])
            Pb[tok, 0] += a[0, j]
            for c in range(K):
                Pb[tok, 1 + c] += a[1 + c, j]


@numba.njit(cache=True, inline="always")
def _scratch(max_entries, K):  # pragma: no cover - compiled
    """One worker's buffers for :func:`_block`."""
    L = max(max_entries, 1)
    return np.empty((1 + K, L)), np.empty(L), np.empty((2, K)), np.empty(K)


@numba.njit(parallel=True, cache=True)
def _entries(
    off, ids, counts, CW, y, binary, blocks, max_entries, P, F, loss, unroll, workers, taken
):  # pragma: no cover
    """Every block (:func:`_block`), on ``workers`` threads that each take the next block not yet taken
    (``taken[0]``, zero on entry, counts them): a thread slowed by other work on the machine takes fewer blocks,
    and which thread runs a block changes nothing in its sums."""
    for _ in numba.prange(workers):
        a, e, m, G = _scratch(max_entries, CW.shape[1] - 1)
        b = _fetch_add(taken, 0)
        while b < blocks.size - 1:
            _block(b, off, ids, counts, CW, y, binary, blocks, P, F, loss, a, e, m, G, unroll)
            b = _fetch_add(taken, 0)


@numba.njit(cache=True)
def _entries_serial(off, ids, counts, CW, y, binary, blocks, max_entries, P, F, loss, unroll):  # pragma: no cover
    """Every block, one after the other (a small batch: no thread launch)."""
    a, e, m, G = _scratch(max_entries, CW.shape[1] - 1)
    for b in range(blocks.size - 1):
        _block(b, off, ids, counts, CW, y, binary, blocks, P, F, loss, a, e, m, G, unroll)


@numba.njit(parallel=True, cache=True)
def _entries_outputs(off, ids, counts, CW, blocks, max_entries, F, unroll):  # pragma: no cover - compiled
    """Outputs only (no loss, no gradient): ``F[i] = u_r + m`` per sequence, the same sums in the same order as
    the gradient kernel (``CW`` is |S| x (1 + K), ``F`` n x K)."""
    K = CW.shape[1] - 1
    for b in numba.prange(blocks.size - 1):
        a, e, m, _ = _scratch(max_entries, K)
        for i in range(blocks[b], blocks[b + 1]):
            _attend(ids, counts, CW, off[i], off[i + 1], a, e, m, unroll)
            for c in range(K):
                F[i, c] = m[1, c] + m[0, c]


@numba.njit(cache=True)
def _sum_token(P, out, s):  # pragma: no cover - compiled
    """``out[s] = P[0, s] + P[1, s] + ...``, in block order."""
    for c in range(P.shape[2]):
        acc = 0.0
        for b in range(P.shape[0]):
            acc += P[b, s, c]
        out[s, c] = acc


@numba.njit(parallel=True, cache=True)
def _sum_blocks(P, out):  # pragma: no cover - compiled
    """:func:`_sum_token` for every token, in parallel."""
    for s in numba.prange(P.shape[1]):
        _sum_token(P, out, s)


@numba.njit(cache=True)
def _sum_blocks_serial(P, out):  # pragma: no cover - compiled
    """:func:`_sum_token` for every token, one after the other."""
    for s in range(P.shape[1]):
        _sum_token(P, out, s)


#: fastmath flags of the kernels with d-long dot products: reassociation lets them vectorise; no
#: assumption that values are finite (a NaN must reach the loss, where the training loop sees it, and a NaN or
#: inf of ``E`` must reach ``E p``, where :func:`tokensel.gradients` looks for it)
_FAST = {"reassoc", "contract", "nsz", "arcp"}


@numba.njit(fastmath=_FAST, cache=True)
def _row_scores_loop(r, PVt, out):  # pragma: no cover - compiled
    """``out[c] = r . PVt[c]`` for one row ``r`` of ``E``, the compiler's vectorised loop (fastmath lets it
    vectorise): :func:`_row_scores` where ``d`` is not a multiple of :data:`~tokensel.models.lanes.LANES`. A NaN or
    inf in ``r`` makes ``out`` NaN or inf (no flag lets the compiler assume finite values)."""
    for c in range(PVt.shape[0]):
        acc = 0.0
        for j in range(r.size):
            acc += r[j] * PVt[c, j]
        out[c] = acc


@numba.njit(fastmath=_FAST, cache=True)
def _two_rows_scores(r0, r1, PVt, o0, o1):  # pragma: no cover - compiled
    """:func:`_row_scores_loop` for two rows at once: each entry of ``PVt`` is loaded once for two dot products. Each
    sum is the same loop as there, compiled the same way, so the bits are the same (a test checks it)."""
    for c in range(PVt.shape[0]):
        pc = PVt[c]
        acc0 = 0.0
        acc1 = 0.0
        for j in range(r0.size):
            acc0 += r0[j] * pc[j]
            acc1 += r1[j] * pc[j]
        o0[c] = acc0
        o1[c] = acc1


@numba.njit(cache=True)
def _row_scores(r, PVt, out, acc):  # pragma: no cover - compiled
    """``out[c] = r . PVt[c]`` for one row ``r`` of ``E``: where ``d`` is a multiple of
    :data:`~tokensel.models.lanes.LANES`, the lane sums of :mod:`tokensel.models.lanes` (``acc``, at least
    columns x 16 float64, is scratch), else :func:`_row_scores_loop`. One function for the Adam pass that leaves the
    next step's scores (:func:`adam_low_rank`) and, row by row, what :func:`scores_values` computes a block of rows at
    a time, so both give the same bits."""
    if r.size % LANES:
        _row_scores_loop(r, PVt, out)
        return
    a = acc[: PVt.shape[0]]
    a[:, :] = 0.0
    add_lane_sums(r, PVt, a, 0, r.size)
    lanes_total(a, out, r.itemsize == 8)


#: rows of ``E`` per block of ``_score_rows`` (:func:`scores_values`), and entries of each row per step: a step's 128
#: entries of up to five columns of ``[p, V]`` (5 KB in float64) stay in the level-1 cache while the block's rows pass
#: over them (the whole of ``[p, V]``, 80 KB at IMDB's size, does not: read once per row, it made the pass bound by the
#: level-2 cache)
SCORE_ROWS = 16
SCORE_CHUNK = 128


@numba.njit(cache=True, inline="always")
def _score_block(b, E, PVt, out, acc):  # pragma: no cover - compiled
    """Rows ``[16 b, 16 b + 16)`` of ``out = E PVt^T`` (``d`` a multiple of 16): each row's lane sums
    (:func:`~tokensel.models.lanes.add_lane_sums`) over :data:`SCORE_CHUNK` entries at a time, the block's rows
    in turn for each chunk, then added up (:func:`~tokensel.models.lanes.lanes_total`): row by row the sums of
    :func:`_row_scores`, in its order. Each chunk of a row asks for the same chunk of the row a block further on
    (:func:`~tokensel.models.lanes.prefetch_row`): in a training step ``E`` comes from memory, and the next block then
    arrives while this one is computed (``E [p, V]`` in the four-class step at IMDB's size: 7.4-7.8 -> 5.6-6.1 ms)."""
    S, d = E.shape
    lo, hi = b * SCORE_ROWS, min(S, (b + 1) * SCORE_ROWS)
    acc[:, :, :] = 0.0
    for j0 in range(0, d, SCORE_CHUNK):
        j1 = min(d, j0 + SCORE_CHUNK)
        for s in range(lo, hi):
            add_lane_sums(E[s], PVt, acc[s - lo], j0, j1)
            if s + SCORE_ROWS < S:
                prefetch_row(E, s + SCORE_ROWS, j0, j1)
    for s in range(lo, hi):
        lanes_total(acc[s - lo], out[s], E.itemsize == 8)


@numba.njit(parallel=True, cache=True)
def _score_rows(E, PVt, out):  # pragma: no cover - compiled
    """``out = E PVt^T`` in blocks of :data:`SCORE_ROWS` rows (:func:`_score_block`) between the threads."""
    for b in numba.prange((E.shape[0] + SCORE_ROWS - 1) // SCORE_ROWS):
        _score_block(b, E, PVt, out, np.empty((SCORE_ROWS, PVt.shape[0], LANES)))


@numba.njit(cache=True)
def _score_rows_serial(E, PVt, out):  # pragma: no cover - compiled
    """:func:`_score_rows` on one thread (a small ``E``): the same blocks, the same bits."""
    acc = np.empty((SCORE_ROWS, PVt.shape[0], LANES))
    for b in range((E.shape[0] + SCORE_ROWS - 1) // SCORE_ROWS):
        _score_block(b, E, PVt, out, acc)


@numba.njit(parallel=True, cache=True)
def _rowdot(E, PVt, out):  # pragma: no cover - compiled
    """``out = E PVt^T`` where ``d`` is not a multiple of 16: each row of ``E`` read once for all columns, two rows at
    a time (:func:`_two_rows_scores`, bitwise :func:`_row_scores_loop`; the order of each sum is fixed by the
    compiled code, so runs repeat bitwise)."""
    S = E.shape[0]
    for h in numba.prange(S // 2):
        _two_rows_scores(E[2 * h], E[2 * h + 1], PVt, out[2 * h], out[2 * h + 1])
    if S % 2:
        _row_scores_loop(E[S - 1], PVt, out[S - 1])


@numba.njit(cache=True)
def _rowdot_serial(E, PVt, out):  # pragma: no cover - compiled
    """:func:`_rowdot` on one thread (a small ``E``): the same rows, two at a time, the same bits."""
    S = E.shape[0]
    for h in range(S // 2):
        _two_rows_scores(E[2 * h], E[2 * h + 1], PVt, out[2 * h], out[2 * h + 1])
    if S % 2:
        _row_scores_loop(E[S - 1], PVt, out[S - 1])


def scores_values(E: np.ndarray, PV: np.ndarray) -> np.ndarray:
    """``E PV`` (|S| x (1 + K)) for the d x (1 + K) matrix ``PV = [p, V]``: one pass over ``E`` (a BLAS
    product with so few columns reads it at a third of the memory bandwidth on two cores), in blocks of rows where
    ``d`` is a multiple of 16 (each dot product in the lane sums of ``tokensel.models.lanes``), else two rows at a
    time. Row by row the bits of the one-row function the Adam pass uses (:func:`adam_low_rank`)."""
    out = np.empty((E.shape[0], PV.shape[1]), dtype=E.dtype)
    E, PVt = np.ascontiguousarray(E), np.ascontiguousarray(PV.T)
    lanes = E.shape[1] % LANES == 0
    if E.size < SERIAL_E_BELOW:
        (_score_rows_serial if lanes else _rowdot_serial)(E, PVt, out)
        return out
    with _LAUNCH:
        _threads()
        (_score_rows if lanes else _rowdot)(E, PVt, out)
    return out


#: fixed blocks of E's rows for ``E^T [A, B]``: each block adds its rows' terms into its own partial sums, and
#: the blocks' sums are added in block order, so the result does not depend on the thread count
ROW_BLOCKS = 16


@numba.njit(cache=True, inline="always")
def _form_row(AB, PVt, s, o):  # pragma: no cover - compiled
    """``o = sum_c AB[s, c] PVt[c]`` (row ``s`` of ``grad_E = AB PVt``), the terms added in order of ``c``, as
    :func:`_adam_low_rank` forms them."""
    if AB.shape[1] == 5:  # four classes: the same terms in the same order, in one loop
        a0, a1, a2, a3, a4 = AB[s, 0], AB[s, 1], AB[s, 2], AB[s, 3], AB[s, 4]
        p0, p1, p2, p3, p4 = PVt[0], PVt[1], PVt[2], PVt[3], PVt[4]
        for j in range(o.size):
            o[j] = (((a0 * p0[j] + a1 * p1[j]) + a2 * p2[j]) + a3 * p3[j]) + a4 * p4[j]
        return
    if AB.shape[1] == 2:  # the binary model, likewise
        a0, a1, p0, p1 = AB[s, 0], AB[s, 1], PVt[0], PVt[1]
        for j in range(o.size):
            o[j] = a0 * p0[j] + a1 * p1[j]
        return
    a, pv = AB[s, 0], PVt[0]
    for j in range(o.size):
        o[j] = a * pv[j]
    for c in range(1, AB.shape[1]):
        a, pv = AB[s, c], PVt[c]
        for j in range(o.size):
            o[j] += a * pv[j]


@numba.njit(cache=True, inline="always")
def _rows_block(b, E, AB, PVt, out, write, R):  # pragma: no cover - compiled
    """Block ``b`` of :func:`_rows_product`: ``R[b, c] = sum over the rows s of the block of AB[s, c] E[s]``
    (float64); with ``write`` also row ``s`` of ``grad_E = AB PVt`` into ``out[s]`` (:func:`_form_row`) while
    ``E[s]`` is in cache."""
    S = E.shape[0]
    nb = R.shape[0]
    Rb = R[b]
    Rb[:, :] = 0.0
    s, hi = b * S // nb, (b + 1) * S // nb
    written_out = AB.shape[1] == 5 or AB.shape[1] == 2
    while s < hi:  # eight or four rows at a time (each partial sum loaded and stored once for their terms), then one
        q = 8 if s + 8 <= hi and written_out else (4 if s + 4 <= hi else 1)
        if q == 8:
            _add_eight_rows(Rb, AB, E, s)
        elif q == 4 and written_out:
            _add_four_rows(Rb, AB, E, s)
        else:
            _add_rows(Rb, AB, E, s, q)
        if write:
            for t in range(s, s + q):
                _form_row(AB, PVt, t, out[t])
        s += q


@numba.njit(parallel=True, cache=True)
def _rows_product(E, AB, PVt, out, write, R, workers, taken):  # pragma: no cover - compiled
    """One pass over ``E`` (|S| x d): the :data:`ROW_BLOCKS` blocks of :func:`_rows_block` taken by ``workers``
    threads as in :func:`_entries`."""
    nb = R.shape[0]
    for _ in numba.prange(workers):
        b = _fetch_add(taken, 0)
        while b < nb:
            _rows_block(b, E, AB, PVt, out, write, R)
            b = _fetch_add(taken, 0)


@numba.njit(cache=True)
def _rows_product_serial(E, AB, PVt, out, write, R):  # pragma: no cover - compiled
    """:func:`_rows_product` on one thread (a small ``E``): the same blocks in order, the same bits."""
    for b in range(R.shape[0]):
        _rows_block(b, E, AB, PVt, out, write, R)


@numba.njit(cache=True, inline="always")
def _add_four_rows(Rb, AB, E, s):  # pragma: no cover - compiled
    """``Rb[c] += (AB[s, c] E[s] + AB[s + 1, c] E[s + 1]) + (AB[s + 2, c] E[s + 2] + AB[s + 3, c] E[s + 3])`` for every
    column ``c`` of ``AB`` (two or five: the binary and the four-class model) in one loop over the row: each entry
    of the four rows is loaded once for all columns. Element by element the operations of :func:`_add_rows`, in
    its order (no reassociation), so the bits are the same."""
    r0, r1, r2, r3 = E[s], E[s + 1], E[s + 2], E[s + 3]
    R0, R1 = Rb[0], Rb[1]
    a0, b0, c0, d0 = np.float64(AB[s, 0]), np.float64(AB[s + 1, 0]), np.float64(AB[s + 2, 0]), np.float64(AB[s + 3, 0])
    a1, b1, c1, d1 = np.float64(AB[s, 1]), np.float64(AB[s + 1, 1]), np.float64(AB[s + 2, 1]), np.float64(AB[s + 3, 1])
    if AB.shape[1] == 2:
        for j in range(R0.size):
            e0, e1, e2, e3 = r0[j], r1[j], r2[j], r3[j]
            R0[j] += (a0 * e0 + b0 * e1) + (c0 * e2 + d0 * e3)
            R1[j] += (a1 * e0 + b1 * e1) + (c1 * e2 + d1 * e3)
        return
    R2, R3, R4 = Rb[2], Rb[3], Rb[4]
    a2, b2, c2, d2 = np.float64(AB[s, 2]), np.float64(AB[s + 1, 2]), np.float64(AB[s + 2, 2]), np.float64(AB[s + 3, 2])
    a3, b3, c3, d3 = np.float64(AB[s, 3]), np.float64(AB[s + 1, 3]), np.float64(AB[s + 2, 3]), np.float64(AB[s + 3, 3])
    a4, b4, c4, d4 = np.float64(AB[s, 4]), np.float64(AB[s + 1, 4]), np.float64(AB[s + 2, 4]), np.float64(AB[s + 3, 4])
    for j in range(R0.size):
        e0, e1, e2, e3 = r0[j], r1[j], r2[j], r3[j]
        R0[j] += (a0 * e0 + b0 * e1) + (c0 * e2 + d0 * e3)
        R1[j] += (a1 * e0 + b1 * e1) + (c1 * e2 + d1 * e3)
        R2[j] += (a2 * e0 + b2 * e1) + (c2 * e2 + d2 * e3)
        R3[j] += (a3 * e0 + b3 * e1) + (c3 * e2 + d3 * e3)
        R4[j] += (a4 * e0 + b4 * e1) + (c4 * e2 + d4 * e3)


@numba.njit(cache=True)  # a call the compiler inlines (numba's own inlining trips its parallel analysis on tuples)
def _four_of(AB, s, c):  # pragma: no cover - compiled
    """``AB[s : s + 4, c]`` as four float64 numbers."""
    return np.float64(AB[s, c]), np.float64(AB[s + 1, c]), np.float64(AB[s + 2, c]), np.float64(AB[s + 3, c])


@numba.njit(cache=True)  # a call the compiler inlines (numba's own inlining trips its parallel analysis on tuples)
def _four_terms(x, e0, e1, e2, e3):  # pragma: no cover - compiled
    """``(x0 e0 + x1 e1) + (x2 e2 + x3 e3)``: the terms of four rows, as :func:`_add_four_rows` adds them."""
    return (x[0] * e0 + x[1] * e1) + (x[2] * e2 + x[3] * e3)


@numba.njit(cache=True, inline="always")
def _add_eight_rows(Rb, AB, E, s):  # pragma: no cover - compiled
    """:func:`_add_four_rows` for rows ``s`` to ``s + 3`` and then for rows ``s + 4`` to ``s + 7``, in one loop over the
    row: ``Rb[c] = (Rb[c] + terms of the first four) + terms of the next four``, each partial sum loaded and stored once
    for eight rows (the pass was bound by moving them through the level-2 cache). The same additions in the same order
    as two calls of :func:`_add_four_rows`, so the bits are the same."""
    r0, r1, r2, r3, r4, r5, r6, r7 = E[s], E[s + 1], E[s + 2], E[s + 3], E[s + 4], E[s + 5], E[s + 6], E[s + 7]
    R0, R1 = Rb[0], Rb[1]
    x0, x1, y0, y1 = _four_of(AB, s, 0), _four_of(AB, s, 1), _four_of(AB, s + 4, 0), _four_of(AB, s + 4, 1)
    if AB.shape[1] == 2:
        for j in range(R0.size):
            e0, e1, e2, e3, f0, f1, f2, f3 = r0[j], r1[j], r2[j], r3[j], r4[j], r5[j], r6[j], r7[j]
            R0[j] = (R0[j] + _four_terms(x0, e0, e1, e2, e3)) + _four_terms(y0, f0, f1, f2, f3)
            R1[j] = (R1[j] + _four_terms(x1, e0, e1, e2, e3)) + _four_terms(y1, f0, f1, f2, f3)
        return
    R2, R3, R4 = Rb[2], Rb[3], Rb[4]
    x2, x3, x4 = _four_of(AB, s, 2), _four_of(AB, s, 3), _four_of(AB, s, 4)
    y2, y3, y4 = _four_of(AB, s + 4, 2), _four_of(AB, s + 4, 3), _four_of(AB, s + 4, 4)
    for j in range(R0.size):
        e0, e1, e2, e3, f0, f1, f2, f3 = r0[j], r1[j], r2[j], r3[j], r4[j], r5[j], r6[j], r7[j]
        R0[j] = (R0[j] + _four_terms(x0, e0, e1, e2, e3)) + _four_terms(y0, f0, f1, f2, f3)
        R1[j] = (R1[j] + _four_terms(x1, e0, e1, e2, e3)) + _four_terms(y1, f0, f1, f2, f3)
        R2[j] = (R2[j] + _four_terms(x2, e0, e1, e2, e3)) + _four_terms(y2, f0, f1, f2, f3)
        R3[j] = (R3[j] + _four_terms(x3, e0, e1, e2, e3)) + _four_terms(y3, f0, f1, f2, f3)
        R4[j] = (R4[j] + _four_terms(x4, e0, e1, e2, e3)) + _four_terms(y4, f0, f1, f2, f3)


@numba.njit(cache=True, inline="always")
def _add_rows(Rb, AB, E, s, q):  # pragma: no cover - compiled
    """``Rb[c] += sum over the q rows t from s of AB[t, c] E[t]`` (q is 4 or 1), column by column; four rows as
    ``(x0 r0 + x1 r1) + (x2 r2 + x3 r3)``."""
    for c in range(AB.shape[1]):
        Rc, x0, r0 = Rb[c], np.float64(AB[s, c]), E[s]
        if q == 4:
            x1, x2, x3 = np.float64(AB[s + 1, c]), np.float64(AB[s + 2, c]), np.float64(AB[s + 3, c])
            r1, r2, r3 = E[s + 1], E[s + 2], E[s + 3]
            for j in range(Rc.size):
                Rc[j] += (x0 * r0[j] + x1 * r1[j]) + (x2 * r2[j] + x3 * r3[j])
        else:
            for j in range(Rc.size):
                Rc[j] += x0 * r0[j]


@numba.njit(parallel=True, cache=True)
def _low_rank_rows(AB, PVt, out):  # pragma: no cover - compiled
    """``out = AB PVt`` row by row (:func:`_form_row`): ``grad_E`` written once, nothing of size |S| x d read."""
    for s in numba.prange(out.shape[0]):
        _form_row(AB, PVt, s, out[s])


@numba.njit(cache=True)
def _low_rank_rows_serial(AB, PVt, out):  # pragma: no cover - compiled
    """:func:`_low_rank_rows` on one thread (a small ``grad_E``): the same rows, the same bits."""
    for s in range(out.shape[0]):
        _form_row(AB, PVt, s, out[s])


@numba.njit(parallel=True, cache=True)
def _low_rank_rows_streamed(AB, PVt, out):  # pragma: no cover - compiled
    """:func:`_low_rank_rows` with each row formed in a buffer that stays in cache (the same :func:`_form_row`, so the
    same bits) and written by non-temporal stores (:func:`_stream_row`), in :data:`BLOCKS` blocks of rows."""
    S, d = out.shape
    for blk in numba.prange(BLOCKS):
        row = np.empty(d, dtype=out.dtype)
        for s in range(blk * S // BLOCKS, (blk + 1) * S // BLOCKS):
            _form_row(AB, PVt, s, row)
            _stream_row(out, s, row)
        _fence()


def transposed_product(E: np.ndarray, AB: np.ndarray, PVt: np.ndarray | None = None, out: np.ndarray | None = None):
    """``AB^T E`` ((1 + K) x d, ``E``'s dtype: ``grad_p`` and ``grad_V^T`` for ``AB = [A, B]``) in one pass over ``E``,
    summed in fixed blocks of rows in float64 (the same bits for any thread count); with ``out`` (|S| x d) also
    ``out = AB PVt`` (``grad_E = A p^T + B V^T`` for ``PVt = [p, V]^T``) in the same pass."""
    E, AB = np.ascontiguousarray(E), np.ascontiguousarray(AB, dtype=E.dtype)
    write = out is not None
    PVt = np.ascontiguousarray(PVt, dtype=E.dtype) if write else np.empty((AB.shape[1], 1), E.dtype)
    R = np.empty((min(ROW_BLOCKS, max(E.shape[0], 1)), AB.shape[1], E.shape[1]))
    args = (E, AB, PVt, out if write else np.empty((1, 1), E.dtype), write, R)
    if E.size < SERIAL_E_BELOW:
        _rows_product_serial(*args)
    else:
        with _LAUNCH:
            _threads()
            _rows_product(*args, numba.get_num_threads(), np.zeros(1, np.int64))
    return R.sum(axis=0).astype(E.dtype)  # in block order


def _last_level_cache(base: str = "/sys/devices/system/cpu/cpu0/cache") -> int | None:
    """The size in bytes of the CPU's level-3 cache as Linux reports it (``base``), or None where it is not known."""
    try:
        for index in sorted(os.listdir(base)):
            with open(f"{base}/{index}/level") as fh:
                if fh.read().strip() != "3":
                    continue
            with open(f"{base}/{index}/size") as fh:
                text = fh.read().strip()
            scale = {"K": 2**10, "M": 2**20, "G": 2**30}.get(text[-1:].upper(), 1)
            size = int(text.rstrip("KMGkmg")) * scale
            return size if size > 0 else None
    except (OSError, ValueError):
        return None
    return None


_CACHE = _last_level_cache()
#: ``grad_E`` from this size on (bytes) is written by non-temporal stores (:func:`low_rank_product`): 3/8 of the
#: level-3 cache, 32 MiB where its size is not known. Below it the written rows and ``E`` fit in the cache together,
#: and ordinary stores are faster: on a 260 MiB cache, ``grad_E`` at IMDB's size took 6.6 ms streamed against
#: 8.9-10.5 ms in float64 (122 MB), and 2.6 ms streamed against 2.1-2.4 ms in float32 (61 MB; benchmarks/PROFILE.md).
STREAM_FROM = 3 * _CACHE // 8 if _CACHE else 32 * 2**20


def _stream_layout(out) -> str | None:
    """Why non-temporal stores cannot write ``out``, or None where they can: a writeable, C-contiguous 2-D float32 or
    float64 array whose rows start on 64-byte boundaries (torch allocates so; numpy's large arrays often start 16
    bytes off) and hold a whole number of 64 bytes."""
    if not isinstance(out, np.ndarray):
        return f"out must be a numpy array, got {type(out).__name__}"
    if out.ndim != 2 or out.dtype not in (np.float32, np.float64):
        return f"out must be a 2-D float32 or float64 array, got {out.ndim}-D {out.dtype}"
    if not (out.flags.c_contiguous and out.flags.writeable):
        return "out must be C-contiguous and writeable"
    if out.ctypes.data % 64:
        off = out.ctypes.data % 64
        return f"out must start on a 64-byte boundary, it starts {off} bytes past one (allocate it with torch)"
    if (out.shape[1] * out.itemsize) % 64:
        return f"out's rows must hold a whole number of 64 bytes, they hold {out.shape[1] * out.itemsize}"
    return None


def streams(out) -> bool:
    """Whether :func:`low_rank_product` writes ``out`` by non-temporal stores by default: at least
    :data:`STREAM_FROM` bytes, laid out for them."""
    return isinstance(out, np.ndarray) and out.nbytes >= STREAM_FROM and _stream_layout(out) is None


def low_rank_product(AB: np.ndarray, PVt: np.ndarray, out: np.ndarray, stream: bool | None = None) -> np.ndarray:
    """``out = AB PVt`` (|S| x d, C-contiguous, ``AB`` |S| x r and ``PVt`` r x d of its dtype, r small): each row formed
    in one loop per term, written once (a BLAS product with so few columns runs far below the memory bandwidth).

    A large ``out`` (:func:`streams`; ``stream`` None) is written by non-temporal stores: not read into the cache
    before it is written (a third of the write's time at IMDB's size), and not pushing ``E`` and the batch's index
    arrays out of it, which the next gradient reads again. The values are the same bits either way. ``stream=True``
    insists (``out`` must then meet :func:`streams`' layout conditions, whatever its size); ``False`` never streams."""
    if stream is not None and not isinstance(stream, bool):
        raise ArgumentTypeError(f"stream must be True, False or None, got {stream!r}")
    if stream is None:
        stream = streams(out)
    elif stream and (why := _stream_layout(out)) is not None:
        raise InvalidArgumentError(f"stream=True: {why}; or pass stream=None, which streams only where it can")
    AB, PVt = np.ascontiguousarray(AB, dtype=out.dtype), np.ascontiguousarray(PVt, dtype=out.dtype)
    if not stream and out.size < SERIAL_E_BELOW:
        _low_rank_rows_serial(AB, PVt, out)
        return out
    with _LAUNCH:
        _threads()
        (_low_rank_rows_streamed if stream else _low_rank_rows)(AB, PVt, out)
    return out


def _fma_in_hardware() -> bool:
    """Whether numba compiles for this host's own CPU and that CPU fuses multiply-adds (x86's FMA3, every CPU with
    AVX2; ARM's NEON): then ``llvm.fma`` is one instruction, else a library call or an unknown target."""
    if numba.config.CPU_NAME or numba.config.CPU_FEATURES:  # type: ignore[attr-defined]
        return False
    try:
        from llvmlite import binding

        features = binding.get_host_cpu_features()
    except Exception:  # noqa: BLE001 - no feature list: divide, as before
        return False
    return bool(features.get("fma", False) or features.get("neon", False))


#: whether Adam's pass (:func:`adam_low_rank`) divides by its bias correction by multiplying with the reciprocal and
#: correcting once (two fused multiply-adds): the correctly rounded quotient, the bits of the division, at a fraction
#: of a division's cost
FMA = _fma_in_hardware()


@intrinsic
def _fma(typingctx, a, b, c):  # pragma: no cover - compiled
    """``a * b + c`` rounded once (``llvm.fma``), for three floats of one type."""
    if not (isinstance(a, types.Float) and a == b == c):
        return None
    sig = a(a, b, c)

    def codegen(context, builder, signature, args):
        t = context.get_value_type(signature.return_type)
        name = "llvm.fma.f64" if t == ir.DoubleType() else "llvm.fma.f32"
        return builder.call(cgutils.get_or_insert_function(builder.module, ir.FunctionType(t, [t, t, t]), name), args)

    return sig, codegen


@numba.njit(inline="always", cache=True)
def _over(x, c, inv):  # pragma: no cover - compiled
    """``x / c`` for ``x >= 0`` (or NaN) and a divisor ``c`` fixed over a pass, given ``inv``, the correctly rounded
    ``1 / c``: with :data:`FMA`, ``q = x inv`` corrected once by its exact residual ``r = x - q c``, ``q + r inv``
    rounded once. Markstein's theorem makes that the correctly rounded quotient (``q`` is within an ulp of ``x / c``,
    ``inv`` within half an ulp of ``1 / c``) unless ``r`` underflows, which needs ``x`` below about 2^-969 (float64;
    2^-102 in float32), far below the square root of any positive float (2^-537; 2^-75). An infinite or NaN ``q`` is
    returned as it is, as the division gives it (a zero ``c`` has an infinite ``inv``)."""
    if not FMA:
        return x / c
    q = x * inv
    q1 = _fma(_fma(-q, c, x), inv, q)
    return q1 if math.isfinite(q) else q


@numba.njit(inline="always", cache=True)
def _adam_entry(e, m, s, g, beta1, c1, beta2, c2, step_size, bc2_sqrt, inv_bc2_sqrt, eps):  # pragma: no cover
    """Adam on one entry ``e`` with moments ``m``, ``s`` and gradient ``g``, in the order of :func:`adam_low_rank`'s
    formula: the new ``(e, m, s)``. Of its two divisions, the one by the bias correction ``bc2_sqrt`` (the same for
    every entry) is :func:`_over`'s: the same bits in a fifth less time in float64, where the divider bounds the
    pass (IMDB's size: 22-24 -> 19-21 ms; the division by each entry's own denominator and the square root stay)."""
    m = m * beta1 + g * c1
    s = s * beta2 + g * g * c2
    return e - step_size * m / (_over(math.sqrt(s), bc2_sqrt, inv_bc2_sqrt) + eps), m, s


@numba.njit(parallel=True, cache=True)
def _adam_rank2(
    E, m, s, AB, PV, beta1, c1, beta2, c2, step_size, bc2_sqrt, inv_bc2_sqrt, eps, PVn, CW, scores
):  # pragma: no cover - compiled
    """Adam on ``E`` for the gradient ``A p^T + B v^T`` (``AB`` |S| x 2, ``PV`` 2 x d), each entry formed where
    it is used (the binary model; one loop over the row, which vectorises); with ``scores`` also
    ``CW[i] = E[i] PVn^T`` from each updated row while it is in cache (:func:`_row_scores`)."""
    p, v = PV[0], PV[1]
    S = E.shape[0]
    for blk in numba.prange(BLOCKS):
        acc = np.empty((PVn.shape[0], LANES))
        for i in range(blk * S // BLOCKS, (blk + 1) * S // BLOCKS):
            a, b = AB[i, 0], AB[i, 1]
            Ei, mi, si = E[i], m[i], s[i]
            for j in range(Ei.size):
                g = a * p[j] + b * v[j]
                Ei[j], mi[j], si[j] = _adam_entry(
                    Ei[j], mi[j], si[j], g, beta1, c1, beta2, c2, step_size, bc2_sqrt, inv_bc2_sqrt, eps
                )
            if scores:
                _row_scores(Ei, PVn, CW[i], acc)


@numba.njit(parallel=True, cache=True)
def _adam_low_rank(
    E, m, s, AB, PV, beta1, c1, beta2, c2, step_size, bc2_sqrt, inv_bc2_sqrt, eps, PVn, CW, scores
):  # pragma: no cover
    """Adam on ``E`` for the gradient ``AB PV`` of any small rank: each row's gradient formed in a buffer that
    stays in cache (the K-class model), then :func:`_adam_entry` along it; ``scores`` as in :func:`_adam_rank2`."""
    S, d = E.shape
    for blk in numba.prange(BLOCKS):
        g, acc = np.empty(d, dtype=E.dtype), np.empty((PVn.shape[0], LANES))
        for i in range(blk * S // BLOCKS, (blk + 1) * S // BLOCKS):
            _form_row(AB, PV, i, g)
            Ei, mi, si = E[i], m[i], s[i]
            for j in range(d):
                Ei[j], mi[j], si[j] = _adam_entry(
                    Ei[j], mi[j], si[j], g[j], beta1, c1, beta2, c2, step_size, bc2_sqrt, inv_bc2_sqrt, eps
                )
            if scores:
                _row_scores(Ei, PVn, CW[i], acc)


def adam_low_rank(
    E: np.ndarray,
    exp_avg: np.ndarray,
    exp_avg_sq: np.ndarray,
    AB: np.ndarray,
    PV: np.ndarray,
    step: int,
    lr: float,
    betas: tuple[float, float],
    eps: float,
    scores_PV: np.ndarray | None = None,
) -> np.ndarray | None:
    """In place: Adam's update of ``E`` (|S| x d, C-contiguous) and its moments for the gradient ``AB @ PV``
    (``AB`` |S| x r, ``PV`` r x d, r small: the one-layer model's ``grad_E = A p^T + B V^T``), at Adam step
    ``step`` (1 for the first). One pass over ``E`` and its two moments; the |S| x d gradient is never formed.
    Element for element Adam's update as torch states it (bias corrections in float64, then every scalar in ``E``'s
    dtype; ``m b1 + g (1 - b1)``, ``s b2 + g g (1 - b2)``, ``e - (lr / bias1) m / (sqrt(s) / sqrt(bias2) + eps)``,
    each operation rounded in that order, a test compares it bitwise with numpy). Torch's fused CPU kernel rounds
    some entries of the moments otherwise, and its product forms the gradient in its own order, so the two agree to
    rounding, not bit for bit (tests: 1e-14 of the largest entry in float64, 1e-6 in float32).

    With ``scores_PV`` (d x (1 + K), the parameters ``[p, V]`` after their own update) the same pass returns the
    next step's ``E [p, V]`` from the updated rows while they are in cache: bit for bit what
    :func:`scores_values` would give on the updated ``E``, without its pass over ``E``. Else returns None."""
    dt = E.dtype.type
    beta1, beta2 = betas
    bias1, bias2 = 1.0 - beta1**step, 1.0 - beta2**step
    with np.errstate(over="ignore"):  # a huge lr overflows to inf in float32, as in torch; the loop's guard sees it
        scalars = [dt(x) for x in (beta1, 1.0 - beta1, beta2, 1.0 - beta2, lr / bias1, math.sqrt(bias2), eps)]
    with np.errstate(divide="ignore"):  # bias2 is 0 only for beta2 = 1: inv infinite, as a division by 0 gives
        scalars.insert(6, dt(1) / scalars[5])  # the correctly rounded 1 / bc2_sqrt in E's dtype (_over)
    scores = scores_PV is not None
    PVn = np.ascontiguousarray(scores_PV.T, dtype=E.dtype) if scores_PV is not None else np.empty((1, 1), E.dtype)
    CW = np.empty((E.shape[0], PVn.shape[0]), dtype=E.dtype) if scores else np.empty((1, 1), E.dtype)
    AB, PV = np.ascontiguousarray(AB, dtype=E.dtype), np.ascontiguousarray(PV, dtype=E.dtype)
    args: tuple = (E, exp_avg, exp_avg_sq, AB, PV, *scalars, PVn, CW, scores)
    with _LAUNCH:
        _threads()
        (_adam_rank2 if AB.shape[1] == 2 else _adam_low_rank)(*args)
    return CW if scores else None


def _threads() -> None:
    # numba.config sets NUMBA_NUM_THREADS at import time (through globals()), which its stubs cannot see
    n = min(config.threads(), numba.config.NUMBA_NUM_THREADS)  # type: ignore[attr-defined]
    if numba.get_num_threads() != n:
        numba.set_num_threads(n)


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
    F = np.empty((n, width - 1), dtype=dtype)
    serial = plan.ids.size < SERIAL_BELOW
    with _LAUNCH, plan.lock:
        if not serial:
            _threads()
        P = plan.partials(width)
        y = np.ascontiguousarray(labels, np.float64)
        args: tuple = (plan.offsets, plan.ids, plan.counts_for(dtype), CW, y, not multiclass, plan.blocks)
        args += (plan.max_entries, P, F, per_seq, UNROLLED_CLASSES)
        if serial:
            _entries_serial(*args)
            _sum_blocks_serial(P, AB)
        else:
            pool: tuple = (numba.get_num_threads(), np.zeros(1, np.int64))  # workers, the count of blocks taken
            _entries(*(args + pool))
            _sum_blocks(P, AB)
    return float(per_seq.astype(dtype).sum(dtype=dtype) / dtype.type(n)), F if multiclass else F[:, 0], AB


def attention_outputs(plan: EntryPlan, CW: np.ndarray) -> np.ndarray:
    """The one-layer model's outputs over the entries of ``plan`` (n x K, ``CW``'s dtype; K = 1 for the
    binary model), without the loss or its gradients: what an evaluation needs."""
    CW = np.ascontiguousarray(CW)
    F = np.empty((plan.n, CW.shape[1] - 1), dtype=CW.dtype)
    with _LAUNCH:
        _threads()
        counts = plan.counts_for(CW.dtype)
        args = (plan.offsets, plan.ids, counts, CW, plan.blocks, plan.max_entries, F, UNROLLED_CLASSES)
        _entries_outputs(*args)
    return F


# ---------------------------------------------------------------- the two-layer variants
# One kernel per sequence for the two-layer models of :mod:`tokensel.models.variants` (the layer-1
# attention ``A = softmax(K X^T)`` over the sequence, the read-out ``f = softmax(u)^T z`` with
# ``u = c + A c`` and ``z = w + A w``), and one for its closed-form backward. A sequence's rows of ``X``
# and ``K`` (T x d) and its T x T attention stay in cache; nothing of size n x T x d is formed except the
# per-occurrence gradient rows, which a third kernel adds per token in a fixed order (the occurrences
# sorted by token, then by position): bitwise the same result for any thread count.


def sequence_blocks(lengths: np.ndarray, work: np.ndarray | None = None) -> np.ndarray:
    """Boundaries of at most :data:`BLOCKS` ranges of sequences with about equal ``work`` (default the
    squared lengths, the two-layer models' cost), fixed by the batch alone (not by the thread count)."""
    n = lengths.size
    cost = np.cumsum(lengths.astype(np.float64) ** 2 if work is None else work)
    total = cost[-1] if n else 0.0
    cuts = np.searchsorted(cost, np.arange(1, BLOCKS) * (total / BLOCKS))
    return np.unique(np.concatenate([[0], np.clip(cuts, 0, n), [n]])).astype(np.int64)


@numba.njit(cache=True)
def token_order(ids, lengths, vocab_size):  # pragma: no cover - compiled
    """The real occurrences of padded ``ids`` (n x T; the first ``lengths[i]`` of row ``i``) sorted by token
    and then by position (a counting sort): ``slot[i, t]`` is the place of occurrence ``(i, t)`` in that
    order, and ``crow[s]:crow[s + 1]`` are the places of token ``s``."""
    n, T = ids.shape
    crow = np.zeros(vocab_size + 1, np.int64)
    for i in range(n):
        for t in range(lengths[i]):
            crow[ids[i, t] + 1] += 1
    for s in range(vocab_size):
        crow[s + 1] += crow[s]
    pos = crow[:-1].copy()
    slot = np.zeros((n, T), np.int64)
    for i in range(n):
        for t in range(lengths[i]):
            s = ids[i, t]
            slot[i, t] = pos[s]
            pos[s] += 1
    return crow, slot


@numba.njit(parallel=True, cache=True)
def _sum_by_token(rows, crow, out):  # pragma: no cover - compiled
    """``out[s] = rows[crow[s]] + rows[crow[s] + 1] + ... + rows[crow[s + 1] - 1]`` (float64 sums, in order)."""
    W = rows.shape[1]
    for s in numba.prange(out.shape[0]):
        acc = np.zeros(W)
        for o in range(crow[s], crow[s + 1]):
            for c in range(W):
                acc[c] += rows[o, c]
        for c in range(W):
            out[s, c] = acc[c]


#: ``exp`` by ``2^k e^r`` with ``|r| <= ln(2)/2`` and its Taylor polynomial to degree 13 (relative error
#: below 5e-16 over the range used), in operations that vectorise, unlike a call to the C library's exp
_LOG2E = 1.4426950408889634
_SHIFT = 6755399441055744.0  # 1.5 * 2^52: x + _SHIFT rounds x to an integer held in the low bits
_LN2_HI = 6.93147180369123816490e-01
_LN2_LO = 1.90821492927058770002e-10
_EXP_C = tuple(1.0 / math.factorial(k) for k in range(14))
_EXP_MIN = -707.0  # exp below this is taken as 0 (it is below 1e-307)


@intrinsic
def _bits(typingctx, x):  # pragma: no cover - compiled
    """The bits of a float64 as an int64."""
    sig = types.int64(types.float64)

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], context.get_value_type(types.int64))

    return sig, codegen


@intrinsic
def _from_bits(typingctx, x):  # pragma: no cover - compiled
    """The float64 with the bits of an int64."""
    sig = types.float64(types.int64)

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], context.get_value_type(types.float64))

    return sig, codegen


@intrinsic
def _stream_row(typingctx, dst, i, src):  # pragma: no cover - compiled
    """``dst[i, :n] = src[:n]`` (``n = src.size``) by non-temporal stores of 64 bytes each: the row goes to memory
    without being read into the cache first and without pushing anything out of it. The caller guarantees what the
    stores assume: ``dst`` C-contiguous, its rows 64-byte aligned, ``n`` entries a whole number of 64 bytes."""
    if not (isinstance(dst, types.Array) and dst.mutable and isinstance(src, types.Array) and dst.dtype == src.dtype):
        return None
    sig = types.void(dst, i, src)

    def codegen(context, builder, signature, args):
        dty, _, sty = signature.args
        d = context.make_array(dty)(context, builder, args[0])
        s = context.make_array(sty)(context, builder, args[2])
        zero = context.get_constant(types.intp, 0)
        dptr = cgutils.get_item_pointer(context, builder, dty, d, [args[1], zero], wraparound=False)
        elt = context.get_data_type(dty.dtype)
        width = 64 // context.get_abi_sizeof(elt)
        vty = ir.VectorType(elt, width)
        n = builder.extract_value(s.shape, 0)
        nontemporal = builder.module.add_metadata([ir.Constant(ir.IntType(32), 1)])
        with cgutils.for_range(builder, builder.udiv(n, context.get_constant(types.intp, width))) as loop:
            at = builder.mul(loop.index, context.get_constant(types.intp, width))
            src_at = builder.gep(s.data, [at], source_etype=elt)
            v = builder.load(builder.bitcast(src_at, vty.as_pointer()), align=8, typ=vty)
            store = builder.store(
                v, builder.bitcast(builder.gep(dptr, [at], source_etype=elt), vty.as_pointer()), align=64
            )
            store.set_metadata("nontemporal", nontemporal)
        return context.get_dummy_value()

    return sig, codegen


#: the host's instruction set: x86 orders non-temporal stores by ``sfence``
_X86 = platform.machine().lower() in ("x86_64", "amd64", "i386", "i686", "x86")


@intrinsic
def _fence(typingctx):  # pragma: no cover - compiled
    """After a thread's non-temporal stores: on x86 an ``sfence``, the fence its manuals give for them; elsewhere a
    sequentially consistent fence. The threads' join afterwards then sees them written."""
    sig = types.void()

    def codegen(context, builder, signature, args):
        if _X86:
            fn = cgutils.get_or_insert_function(
                builder.module, ir.FunctionType(ir.VoidType(), []), "llvm.x86.sse.sfence"
            )
            builder.call(fn, [])
        else:
            builder.fence("seq_cst")
        return context.get_dummy_value()

    return sig, codegen


@numba.njit(cache=True, fastmath={"contract"})
def _exp_shifted(S, t, m, L, e):  # pragma: no cover - compiled
    """``e[j] = exp(S[t, j] - m)`` in float64 for ``j < L`` (``S[t, j] <= m``; a NaN stays NaN). Compiled without
    reassociation, which would undo the rounding by ``_SHIFT``."""
    c = _EXP_C
    for j in range(L):
        x = np.float64(S[t, j]) - m
        y = max(x, _EXP_MIN)
        kd = y * _LOG2E + _SHIFT
        nk = kd - _SHIFT
        r = (y - nk * _LN2_HI) - nk * _LN2_LO
        r2 = r * r
        r4 = r2 * r2
        q0 = (c[0] + c[1] * r) + (c[2] + c[3] * r) * r2
        q1 = (c[4] + c[5] * r) + (c[6] + c[7] * r) * r2
        q2 = (c[8] + c[9] * r) + (c[10] + c[11] * r) * r2
        p = (q0 + q1 * r4) + (q2 + (c[12] + c[13] * r) * r4) * (r4 * r4)
        v = _from_bits(_bits(p) + (_bits(kd) << 52))  # times 2^round(y / ln 2)
        e[j] = v if x > _EXP_MIN else (0.0 if x <= _EXP_MIN else x)  # a NaN stays NaN


@numba.njit(cache=True, fastmath=_FAST, inline="always")
def _rows(table, ids_i, L, rows):  # pragma: no cover - compiled
    """``rows[t] = table[ids_i[t]]`` for ``t < L``, element by element (a loop the compiler vectorises; a row view
    would cost numba's reference counting per row)."""
    for t in range(L):
        s = np.uint64(ids_i[t])
        for k in range(table.shape[1]):
            rows[t, k] = table[s, k]


@numba.njit(cache=True, fastmath=_FAST, inline="always")
def _transpose(rows, L, cols):  # pragma: no cover - compiled
    """``cols[:, t] = rows[t]`` for ``t < L``, from rows already in cache: the backward reads the gathered rows
    only transposed (a gather straight into the transpose reads the table element by element)."""
    for t in range(L):
        for k in range(rows.shape[1]):
            cols[k, t] = rows[t, k]


@numba.njit(cache=True, fastmath=_FAST, inline="always")
def _abt(A, B, m, p, K, out, upper):  # pragma: no cover - compiled
    """``out[t, k] = sum_{j < K} A[t, j] B[k, j]`` for ``t < m``, ``k < p``: dot products of rows, four rows
    of ``A`` at a time (each row of ``B`` is read once for four sums, which vectorise over ``j``). With
    ``upper`` only ``k >= t`` (rounded down to the block of four) is computed, for a symmetric product."""
    z = np.zeros(1, out.dtype)[0]
    t = 0
    while t + 4 <= m:
        for k in range(t if upper else 0, p):
            a0 = z
            a1 = z
            a2 = z
            a3 = z
            for j in range(K):
                b = B[k, j]
                a0 += A[t, j] * b
                a1 += A[t + 1, j] * b
                a2 += A[t + 2, j] * b
                a3 += A[t + 3, j] * b
            out[t, k] = a0
            out[t + 1, k] = a1
            out[t + 2, k] = a2
            out[t + 3, k] = a3
        t += 4
    while t < m:
        for k in range(t if upper else 0, p):
            a0 = z
            for j in range(K):
                a0 += A[t, j] * B[k, j]
            out[t, k] = a0
        t += 1


@numba.njit(parallel=True, fastmath=_FAST, cache=True)
def _two_layer_forward(ids, lengths, Xt, Kt, R, sym, blocks, keep, A, aux, f):  # pragma: no cover - compiled
    """Outputs ``f`` (n) of the two-layer read-out. Per sequence ``i`` of length ``L``: ``S = K X^T`` (rows
    of ``Kt`` and ``Xt``; the upper half of ``X X^T`` when ``sym``), ``A = softmax`` of each row (kept in
    ``A[i]`` when ``keep``), ``ub = A c``, ``zb = A w`` (``c, w`` the two columns of ``R``), ``q = softmax(c +
    ub)``, ``f = q^T (w + zb)``; ``aux[i, t]`` keeps ``(ub_t, zb_t, q_t)`` for the backward."""
    n, T = ids.shape
    d = Xt.shape[1]
    for b in numba.prange(blocks.size - 1):
        Xl = np.empty((T, d), Xt.dtype)
        Kl = np.empty((T, d), Xt.dtype)
        Sl = np.empty((T, T), Xt.dtype)
        c = np.empty(T)
        w = np.empty(T)
        u = np.empty(T)
        e = np.empty(T)
        for i in range(blocks[b], blocks[b + 1]):
            L = lengths[i]
            ids_i = ids[i]
            _rows(Xt, ids_i, L, Xl)  # the forward reads the rows only as rows
            for t in range(L):
                c[t] = R[ids_i[t], 0]
                w[t] = R[ids_i[t], 1]
            S = A[i] if keep else Sl
            if sym:
                _abt(Xl, Xl, L, L, d, S, True)
                for t in range(L):
                    for j in range(t):
                        S[t, j] = S[j, t]
            else:
                _rows(Kt, ids_i, L, Kl)
                _abt(Kl, Xl, L, L, d, S, False)
            umax = -np.inf
            for t in range(L):
                m = S[t, 0]
                for j in range(1, L):
                    m = max(m, S[t, j])
                _exp_shifted(S, t, np.float64(m), L, e)
                Z = 0.0
                for j in range(L):
                    Z += e[j]
                r = 1.0 / Z
                ub = 0.0
                zb = 0.0
                for j in range(L):
                    S[t, j] = e[j] * r
                    a = np.float64(S[t, j])  # the rounded weight: the backward reads the same value
                    ub += a * c[j]
                    zb += a * w[j]
                aux[i, t, 0] = ub
                aux[i, t, 1] = zb
                u[t] = c[t] + ub
                umax = max(umax, u[t])
            # the exponentials and their sum in two loops: in one, the loop compiled in a process gave other bits
            # than the same loop loaded from numba's cache (a test compiles it both ways and compares)
            for t in range(L):
                u[t] = math.exp(u[t] - umax)
            Zq = 0.0
            for t in range(L):
                Zq += u[t]
            fi = 0.0
            for t in range(L):
                q = u[t] / Zq
                aux[i, t, 2] = q
                fi += q * (w[t] + aux[i, t, 1])
            f[i] = fi


@numba.njit(parallel=True, fastmath=_FAST, cache=True)
def _two_layer_backward(ids, lengths, Xt, Kt, R, sym, blocks, A, aux, f, G, slot, rows):  # pragma: no cover - compiled
    """Per real occurrence ``(i, t)`` the gradient of ``sum_i G_i f_i`` with respect to its rows: ``rows[slot[i,
    t]]`` holds ``dX_t`` (d), then ``dK_t`` (d, unless ``sym``: then ``X`` is also the key and ``dX_t``
    includes it), then ``(dc_t, dw_t)``. With ``du = G q (z - f)``, ``dz = G q``:
    ``dc = du + A^T du``, ``dw = dz + A^T dz``, ``dS_tj = A_tj (du_t (c_j - ub_t) + dz_t (w_j - zb_t))``,
    ``dK = dS X``, ``dX = dS^T K`` (``(dS + dS^T) X`` when ``sym``)."""
    n, T = ids.shape
    d = Xt.shape[1]
    off = d if sym else 2 * d
    for b in numba.prange(blocks.size - 1):
        Xl = np.empty((T, d), Xt.dtype)
        XT = np.empty((d, T), Xt.dtype)
        Kl = np.empty((T, d), Xt.dtype)
        KT = np.empty((d, T), Xt.dtype)
        M = np.empty((T, T), Xt.dtype)
        MT = np.empty((T, T), Xt.dtype)
        du = np.empty(T)
        dz = np.empty(T)
        c = np.empty(T)
        w = np.empty(T)
        s0 = np.empty(T)
        s1 = np.empty(T)
        out = np.empty((T, rows.shape[1]), Xt.dtype)
        for i in range(blocks[b], blocks[b + 1]):
            L = lengths[i]
            ids_i = ids[i]
            Ai = A[i]
            _rows(Xt, ids_i, L, Xl)
            _transpose(Xl, L, XT)
            g = G[i]
            for t in range(L):
                c[t] = R[ids_i[t], 0]
                w[t] = R[ids_i[t], 1]
                gq = g * aux[i, t, 2]
                du[t] = gq * (w[t] + aux[i, t, 1] - f[i])
                dz[t] = gq
            for j in range(L):
                s0[j] = du[j]
                s1[j] = dz[j]
            for t in range(L):
                dut = du[t]
                dzt = dz[t]
                sh = dut * aux[i, t, 0] + dzt * aux[i, t, 1]
                for j in range(L):
                    a = Ai[t, j]
                    s0[j] += a * dut
                    s1[j] += a * dzt
                    M[t, j] = a * (dut * c[j] + dzt * w[j] - sh)
            for j in range(L):
                out[j, off] = s0[j]
                out[j, off + 1] = s1[j]
            if sym:
                for t in range(L):
                    for j in range(t, L):
                        x = M[t, j] + M[j, t]
                        MT[t, j] = x
                        MT[j, t] = x
                _abt(MT, XT, L, d, L, out, False)  # dX = (dS + dS^T) X
            else:
                _rows(Kt, ids_i, L, Kl)
                _transpose(Kl, L, KT)
                for t in range(L):
                    for j in range(L):
                        MT[j, t] = M[t, j]
                _abt(MT, KT, L, d, L, out, False)  # dX = dS^T K
                _abt(M, XT, L, d, L, out[:, d:], False)  # dK = dS X
            for t in range(L):
                o = slot[i, t]
                for k in range(out.shape[1]):
                    rows[o, k] = out[t, k]


class TwoLayerPlan:
    """A padded batch for the two-layer kernels: token ``ids`` (n x T, int64), ``lengths`` (n), the
    vocabulary size and the blocks of sequences (:func:`sequence_blocks`); the occurrences sorted by token
    (:func:`token_order`) are computed on the first backward."""

    def __init__(self, ids: np.ndarray, lengths: np.ndarray, vocab_size: int):
        self.ids = np.ascontiguousarray(ids, dtype=np.int64)
        self.lengths = np.ascontiguousarray(lengths, dtype=np.int64)
        self.vocab_size = int(vocab_size)
        # the kernels gather rows by the ids as unsigned numbers, without a bounds check
        if self.ids.size and not (0 <= int(self.ids.min()) and int(self.ids.max()) < self.vocab_size):
            raise InvalidBatchError(
                f"token ids must lie in [0, {self.vocab_size}) (the vocabulary), got ids from {int(self.ids.min())} "
                f"to {int(self.ids.max())}"
            )
        if (
            self.ids.ndim != 2
            or self.lengths.shape != (self.ids.shape[0],)
            or np.any(self.lengths < 1)
            or np.any(self.lengths > self.ids.shape[1])
        ):
            raise InvalidBatchError(
                f"lengths must be one per row of ids ({self.ids.shape}), each from 1 to the padded length"
            )
        self.blocks = sequence_blocks(self.lengths)
        self._order: tuple[np.ndarray, np.ndarray] | None = None

    def order(self) -> tuple[np.ndarray, np.ndarray]:
        if self._order is None:
            self._order = token_order(self.ids, self.lengths, self.vocab_size)
        return self._order


def two_layer_forward(plan: TwoLayerPlan, Xt: np.ndarray, Kt: np.ndarray | None, R: np.ndarray, keep: bool):
    """Outputs of the two-layer read-out over ``plan`` from the |S| x d tables ``Xt`` (values and keys) and
    ``Kt`` (queries; None: ``Xt``, a symmetric score matrix) and the |S| x 2 read-out table ``R = [c, w]``,
    all of one dtype. Returns ``(f, A, aux)``: ``f`` (n, float64), and with ``keep`` the
    attention ``A`` (n x T x T) and per-position values ``aux`` (n x T x 3, float64) the backward needs."""
    n, T = plan.ids.shape
    sym = Kt is None
    A = np.empty((n, T, T) if keep else (1, 1, 1), dtype=Xt.dtype)
    aux = np.empty((n, T, 3))
    f = np.empty(n)
    with _LAUNCH:
        _threads()
        _two_layer_forward(plan.ids, plan.lengths, Xt, Xt if sym else Kt, R, sym, plan.blocks, keep, A, aux, f)
    return f, A, aux


def two_layer_backward(plan, Xt, Kt, R, A, aux, f, G):
    """Gradients of ``sum_i G_i f_i`` (``f`` as :func:`two_layer_forward` returned it, in float64) with
    respect to the tables: ``(dXt, dKt, dR)`` (``dKt`` None when ``Kt`` is None: then ``dXt`` holds both
    roles), each |S| x width in the tables' dtype, summed per token in a fixed order."""
    n, T = plan.ids.shape
    d = Xt.shape[1]
    sym = Kt is None
    width = (d if sym else 2 * d) + 2
    crow, slot = plan.order()
    rows = np.empty((crow[-1], width), dtype=Xt.dtype)
    out = np.empty((plan.vocab_size, width), dtype=Xt.dtype)
    with _LAUNCH:
        _threads()
        _two_layer_backward(
            plan.ids,
            plan.lengths,
            Xt,
            Xt if sym else Kt,
            R,
            sym,
            plan.blocks,
            A,
            aux,
            np.ascontiguousarray(f, dtype=np.float64),
            np.ascontiguousarray(G, dtype=np.float64),
            slot,
            rows,
        )
        _sum_by_token(rows, crow, out)
    return out[:, :d], None if sym else out[:, d : 2 * d], out[:, width - 2 :]
