"""The fused attention pass and the products with ``E``, compiled with numba (CPU, float32 and float64).

One loop per sequence does the whole pass of :mod:`tokensel.models.core` while its entries are in cache. With scores
``a_t``, values ``u_t``, counts ``n_t`` and ``k`` the last top-scored entry: ``e_t = exp(a_t - a_k) n_t``,
``Z = sum e_t``, ``m = sum e_t (u_t - u_k) / Z``, ``f = u_k + m``; with ``G = dL/df`` and ``h_tc = G_c e_t / Z``
each entry adds ``sum_c h_tc ((u_tc - u_kc) - m_c)`` to ``A`` and ``h_tc`` to ``B`` at its token.
Determinism: a fixed number of blocks (:data:`BLOCKS`), each summing into its own table, added in block order."""

from __future__ import annotations

import math
import os
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import numba
import numpy as np

from .. import config
from ..errors import InvalidBatchError

#: blocks of sequences (or rows of ``E``): fixed, so that the order of every sum is independent of the thread count
BLOCKS = 16
#: fastmath for the loops that must vectorise, without finite-math: a NaN must reach the loss, where it is looked for
_FAST = {"reassoc", "contract", "nsz", "arcp"}

# numba's own pool (OpenMP's would reset torch's thread count); one launch at a time: each holds _LAUNCH
if "NUMBA_THREADING_LAYER" not in os.environ:
    numba.config.THREADING_LAYER = "workqueue"  # type: ignore[attr-defined]
_LAUNCH = threading.RLock()


def _threads() -> None:
    # numba.config sets NUMBA_NUM_THREADS at import time (through globals()), which its stubs cannot see
    n = min(config.threads(), numba.config.NUMBA_NUM_THREADS)  # type: ignore[attr-defined]
    if numba.get_num_threads() != n:
        numba.set_num_threads(n)


_checked_cache = False


def _say_if_compiling() -> None:
    """On a fresh install the first launch compiles every kernel it calls: say so once, not a silent minute."""
    global _checked_cache
    if _checked_cache:
        return
    _checked_cache = True
    folder = _attention._cache._cache_path  # type: ignore[attr-defined]
    names = os.listdir(folder) if os.path.isdir(folder) else []
    if not any(name.startswith("kernels.") and name.endswith(".nbi") for name in names):
        print("tokensel: compiling kernels, once, about a minute", file=sys.stderr, flush=True)


@contextmanager
def _pool() -> Iterator[None]:
    """Hold the pool for one launch, on ``TOKENSEL_THREADS`` threads."""
    with _LAUNCH:
        _say_if_compiling()
        _threads()
        yield


def _blocks(cost: np.ndarray) -> np.ndarray:
    """Boundaries of at most :data:`BLOCKS` ranges of items with about equal total ``cost``."""
    cum = np.cumsum(cost, dtype=np.float64)
    total = cum[-1] if cum.size else 0.0
    cuts = np.searchsorted(cum, np.arange(1, BLOCKS) * (total / BLOCKS))
    return np.unique(np.concatenate([[0], np.clip(cuts, 0, cost.size), [cost.size]])).astype(np.int64)


class EntryPlan:
    """A batch's distinct entries as the kernels read them, made once: ``offsets``, ``ids`` and ``counts`` in 32 bits
    (half the memory traffic), the longest sequence and the :data:`BLOCKS` blocks; checked here, the kernels do not."""

    def __init__(self, offsets: np.ndarray, ids: np.ndarray, counts: np.ndarray, vocab_size: int):
        self.offsets = np.ascontiguousarray(offsets, dtype=np.int64)
        self.vocab_size = int(vocab_size)
        ids, counts, off = np.asarray(ids), np.asarray(counts), self.offsets
        M = ids.size
        if ids.shape != (M,) or counts.shape != (M,):
            raise InvalidBatchError(f"ids and counts must be one per entry, got shapes {ids.shape} and {counts.shape}")
        if ids.dtype.kind not in "iu" or (M and not (0 <= ids.min() and ids.max() < self.vocab_size)):
            raise InvalidBatchError(
                f"token ids must be integers in [0, {self.vocab_size}) (the vocabulary): build the plan from a "
                "checked RaggedBatch"
            )
        if off.size == 0 or off[0] != 0 or off[-1] != M or np.any(np.diff(off) <= 0):
            raise InvalidBatchError(
                f"offsets must rise strictly from 0 to the number of entries ({M}), no sequence empty: build the plan "
                "from a checked RaggedBatch"
            )
        self.ids = np.ascontiguousarray(ids, dtype=np.int32)
        self.counts = np.ascontiguousarray(counts, dtype=np.int32)
        if not np.array_equal(self.counts, counts):
            raise InvalidBatchError("counts must be whole numbers below 2^31")
        self.max_entries = int(np.diff(off).max()) if off.size > 1 else 0
        self.blocks = _blocks(np.diff(off))

    @property
    def n(self) -> int:
        return self.offsets.size - 1


@numba.njit(cache=True)
def _softplus(x):  # pragma: no cover - compiled
    """``log(1 + e^x)`` as torch's softplus computes it (threshold 20)."""
    return x if x > 20.0 else math.log1p(math.exp(x))


#: ``exp(x) = 2^k e^r``, ``k = round(x / ln 2)``, ``e^r`` by Taylor to degree 13, ``2^k`` from a table: it vectorises
#: (libm's exp per entry took half the attention pass), within 3e-16 of it over ``[-707, 0]``
_LOG2E, _LN2_HI, _LN2_LO = 1.4426950408889634, 6.93147180369123816490e-01, 1.90821492927058770002e-10
_EXP_C = tuple(1.0 / math.factorial(k) for k in range(14))
_POW2 = np.ldexp(1.0, np.arange(-1100, 1))  # 2^k for k from -1100 to 0
_EXP_MIN = -707.0  # exp below this is taken as 0 (it is below 1e-307)


@numba.njit(fastmath={"contract"}, cache=True)  # no reassociation: it would undo the reduction's two steps
def _exp_shifted(X, row, shift, L, e):  # pragma: no cover - compiled
    """``e[j] = exp(X[row, j] - shift)`` in float64 for ``j < L``, where ``X[row, j] <= shift`` (a NaN stays NaN)."""
    for j in range(L):
        x = np.float64(X[row, j]) - shift
        y = min(x, 0.0) if x > _EXP_MIN else _EXP_MIN  # the table's range, whatever x (a NaN included)
        k = math.floor(y * _LOG2E + 0.5)
        r = (y - k * _LN2_HI) - k * _LN2_LO
        p = _EXP_C[13]
        for i in range(12, -1, -1):
            p = p * r + _EXP_C[i]
        v = p * _POW2[int(k) + 1100]
        e[j] = v if x > _EXP_MIN else (0.0 if x <= _EXP_MIN else x)


# sums in source order (no fastmath): reassociated, compiled and cached kernels gave other bits (a test compares)
@numba.njit(cache=True)
def _weigh(e, counts, lo, L):  # pragma: no cover - compiled
    """``e_j *= counts[lo + j]`` for ``j < L``; their sum."""
    s = 0.0
    for j in range(L):
        e[j] *= counts[lo + j]
        s += e[j]
    return s


@numba.njit(cache=True)
def _weighted_sum(e, a, c, r, L):  # pragma: no cover - compiled
    """``sum_j e_j (a[c, j] - r)`` over ``j < L``."""
    s = 0.0
    for j in range(L):
        s += e[j] * (a[c, j] - r)
    return s


# no fastmath: reassociating (u_t - u_k) - m loses the stable form's digits; no _nrt: counting references took 40 %
@numba.njit(cache=True, _nrt=False)  # type: ignore[call-overload]
def _block(b, off, ids, counts, CW, y, binary, grads, blocks, P, F, loss, a, e, ref, m, f, G):  # pragma: no cover
    """Block ``b``: outputs ``F`` (n x K) from ``CW = [c, W]``; with ``grads`` each sequence's loss (logistic or
    cross-entropy) and partial sums ``P[b]`` ((1 + K) x |S|) of ``A``, ``B``. Its own function: inlined, it ran at half
    the speed."""
    n, W = off.size - 1, CW.shape[1]
    K = W - 1
    Pb = P[b]
    if grads:
        Pb[:, :] = 0.0
    for i in range(blocks[b], blocks[b + 1]):
        lo, L = off[i], off[i + 1] - off[i]
        top, k = -np.inf, 0
        for j in range(L):  # gather the entries' rows once; the last top-scored entry
            t = ids[lo + j]
            for c in range(W):
                a[c, j] = CW[t, c]
            if a[0, j] >= top:
                top, k = a[0, j], j
        _exp_shifted(a, 0, top, L, e)
        Z = _weigh(e, counts, lo, L)
        for c in range(K):
            ref[c] = a[1 + c, k]
            m[c] = _weighted_sum(e, a, 1 + c, ref[c], L) / Z
            f[c] = ref[c] + m[c]
            F[i, c] = f[c]
        if not grads:
            continue
        if binary:
            loss[i] = _softplus(-y[i] * f[0])
            G[0] = -y[i] / (1.0 + math.exp(y[i] * f[0])) / n / Z
        else:
            fmax = -np.inf
            for c in range(K):
                fmax = max(fmax, f[c])
            se = 0.0
            for c in range(K):
                se += math.exp(f[c] - fmax)
            lse = fmax + math.log(se)
            yi = int(y[i])
            loss[i] = lse - f[yi]
            for c in range(K):
                G[c] = (math.exp(f[c] - lse) - (1.0 if c == yi else 0.0)) / n / Z
        # the terms over the gathered rows, in loops over the entries that vectorise: the score terms over the scores
        # (no longer needed), h_tc over the values; then each entry's row into its token's partial sums
        for j in range(L):
            a[0, j] = 0.0
        for c in range(K):
            g, r, mc = G[c], ref[c], m[c]
            for j in range(L):
                h = g * e[j]
                a[0, j] += ((a[1 + c, j] - r) - mc) * h
                a[1 + c, j] = h
        for c in range(W):
            for j in range(L):
                Pb[c, ids[lo + j]] += a[c, j]


@numba.njit(parallel=True, cache=True)
def _attention(off, ids, counts, CW, y, binary, grads, blocks, max_entries, P, F, loss):  # pragma: no cover
    """Every block of sequences (:func:`_block`), each with its own scratch buffers."""
    K = CW.shape[1] - 1
    for b in numba.prange(blocks.size - 1):
        a, e = np.empty((1 + K, max(max_entries, 1))), np.empty(max(max_entries, 1))
        ref, m, f, G = np.empty(K), np.empty(K), np.empty(K), np.empty(K)
        _block(b, off, ids, counts, CW, y, binary, grads, blocks, P, F, loss, a, e, ref, m, f, G)


def _run(plan: EntryPlan, CW: np.ndarray, labels: np.ndarray, multiclass: bool, grads: bool):
    CW = np.ascontiguousarray(CW)
    n, width = plan.n, CW.shape[1]
    F, loss = np.empty((n, width - 1), dtype=CW.dtype), np.empty(n)
    P = np.empty((plan.blocks.size - 1, width, plan.vocab_size if grads else 1))
    y = np.ascontiguousarray(labels, np.float64)
    args = (plan.offsets, plan.ids, plan.counts, CW, y, not multiclass, grads, plan.blocks, plan.max_entries)
    with _pool():
        _attention(*args, P, F, loss)
    return F, loss, P


def attention_grads(plan: EntryPlan, CW: np.ndarray, labels: np.ndarray, multiclass: bool):
    """Loss and gradients of the one-layer model over ``plan``'s entries for ``CW = E [p, V]`` (|S| x (1 + K), float32
    or float64; K = 1 for the binary model) and ±1 labels or class indices. Returns ``(loss, f, AB)``: the mean loss
    (float), the outputs (n,) or logits (n x K), and ``AB = [dL/dc, dL/dW]`` (|S| x (1 + K)), all in ``CW``'s dtype."""
    F, loss, P = _run(plan, CW, labels, multiclass, True)
    dtype = F.dtype
    AB = np.ascontiguousarray(P.sum(axis=0).T, dtype=dtype)  # the blocks' tables in block order
    return float(loss.astype(dtype).sum(dtype=dtype) / dtype.type(plan.n)), F if multiclass else F[:, 0], AB


def attention_outputs(plan: EntryPlan, CW: np.ndarray) -> np.ndarray:
    """The outputs (n x K, ``CW``'s dtype) alone, bitwise those of :func:`attention_grads`: what an evaluation needs."""
    return _run(plan, CW, np.empty(plan.n), True, False)[0]


# ---------------------------------------------------------------- the passes over E
# A BLAS product with two to five columns reads E far below the memory bandwidth: each pass below reads E once.


@numba.njit(fastmath=_FAST, cache=True)
def _row_dot(r, PVt, out):  # pragma: no cover - compiled
    """``out[c] = r . PVt[c]`` in float64, shared by :func:`scores_values` and the Adam pass: the same bits."""
    for c in range(PVt.shape[0]):
        acc = 0.0
        for j in range(r.size):
            acc += r[j] * PVt[c, j]
        out[c] = acc


@numba.njit(parallel=True, cache=True)
def _scores(E, PVt, out):  # pragma: no cover - compiled
    for s in numba.prange(E.shape[0]):
        _row_dot(E[s], PVt, out[s])


def scores_values(E: np.ndarray, PV: np.ndarray) -> np.ndarray:
    """``E PV`` (|S| x (1 + K), ``E``'s dtype) for ``PV = [p, V]`` (d x (1 + K)) in one pass over ``E``."""
    out = np.empty((E.shape[0], PV.shape[1]), dtype=E.dtype)
    with _pool():
        _scores(np.ascontiguousarray(E), np.ascontiguousarray(PV.T), out)
    return out


@numba.njit(parallel=True, fastmath=_FAST, cache=True)
def _rows_product(E, AB, R):  # pragma: no cover - compiled
    """``R[b] = sum over the rows s of block b of AB[s]^T E[s]`` (float64)."""
    S = E.shape[0]
    nb = R.shape[0]
    for b in numba.prange(nb):
        Rb = R[b]
        Rb[:, :] = 0.0
        for s in range(b * S // nb, (b + 1) * S // nb):
            r = E[s]
            for c in range(AB.shape[1]):
                x, Rc = np.float64(AB[s, c]), Rb[c]
                for j in range(r.size):
                    Rc[j] += x * r[j]


def transposed_product(E: np.ndarray, AB: np.ndarray) -> np.ndarray:
    """``AB^T E`` ((1 + K) x d, ``E``'s dtype; ``[grad_p, grad_V]^T`` for ``AB = [A, B]``) in one pass over ``E``."""
    E, AB = np.ascontiguousarray(E), np.ascontiguousarray(AB, dtype=E.dtype)
    R = np.empty((min(BLOCKS, max(E.shape[0], 1)), AB.shape[1], E.shape[1]))
    with _pool():
        _rows_product(E, AB, R)
    return R.sum(axis=0).astype(E.dtype)  # in block order


@numba.njit(cache=True)
def _form_row(AB, PVt, s, o):  # pragma: no cover - compiled
    """``o = sum_c AB[s, c] PVt[c]`` (row ``s`` of ``grad_E``), the terms added in order of ``c``."""
    a, pv = AB[s, 0], PVt[0]
    for j in range(o.size):
        o[j] = a * pv[j]
    for c in range(1, AB.shape[1]):
        a, pv = AB[s, c], PVt[c]
        for j in range(o.size):
            o[j] += a * pv[j]


@numba.njit(parallel=True, cache=True)
def _adam(E, m, v, AB, PV, beta1, c1, beta2, c2, step_size, bc2, eps, PVn, CW, scores):  # pragma: no cover
    """Adam on ``E`` for the gradient ``AB PV``, each row's gradient formed in a buffer that stays in cache; with
    ``scores`` also ``CW[i] = E[i] PVn^T`` from each updated row (:func:`_row_dot`)."""
    S, d = E.shape
    for b in numba.prange(BLOCKS):
        g = np.empty(d, dtype=E.dtype)
        for i in range(b * S // BLOCKS, (b + 1) * S // BLOCKS):
            _form_row(AB, PV, i, g)
            for j in range(d):
                mj = m[i, j] * beta1 + g[j] * c1
                vj = v[i, j] * beta2 + g[j] * g[j] * c2
                m[i, j], v[i, j] = mj, vj
                E[i, j] = E[i, j] - step_size * mj / (math.sqrt(vj) / bc2 + eps)
            if scores:
                _row_dot(E[i], PVn, CW[i])


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
    (``A p^T + B V^T``) at ``step`` (1-based), never forming it. Torch's formula in ``E``'s dtype:
    ``m b1 + g (1 - b1)``, ``s b2 + g g (1 - b2)``, ``e - (lr / bias1) m / (sqrt(s) / sqrt(bias2) + eps)``. With
    ``scores_PV`` (updated ``[p, V]``) returns the next ``E [p, V]``, bitwise :func:`scores_values`'s."""
    dt = E.dtype.type
    beta1, beta2 = betas
    bias1, bias2 = 1.0 - beta1**step, 1.0 - beta2**step
    with np.errstate(over="ignore"):  # a huge lr overflows to inf in float32, as in torch; the loop's guard sees it
        scalars = [dt(x) for x in (beta1, 1.0 - beta1, beta2, 1.0 - beta2, lr / bias1, math.sqrt(bias2), eps)]
    scores = scores_PV is not None
    PVn = np.empty((1, 1), E.dtype) if scores_PV is None else np.ascontiguousarray(scores_PV.T, dtype=E.dtype)
    CW = np.empty((E.shape[0], PVn.shape[0]) if scores else (1, 1), dtype=E.dtype)
    AB, PV = np.ascontiguousarray(AB, dtype=E.dtype), np.ascontiguousarray(PV, dtype=E.dtype)
    args: tuple = (E, exp_avg, exp_avg_sq, AB, PV, *scalars, PVn, CW, scores)
    with _pool():
        _adam(*args)
    return CW if scores else None


# ---------------------------------------------------------------- the two-layer variants
# Per sequence ``A = softmax(K X^T)``, ``f = softmax(c + A c)^T (w + A w)`` and the closed-form backward, in cache;
# per-occurrence gradient rows are added per token in a fixed order.


class TwoLayerPlan:
    """A padded batch for the two-layer kernels: ``ids`` (n x T), ``lengths``, blocks, and the token order
    (:func:`token_order`) from the first backward; checked, the kernels do not."""

    def __init__(self, ids: np.ndarray, lengths: np.ndarray, vocab_size: int):
        self.ids = np.ascontiguousarray(ids, dtype=np.int64)
        self.lengths = np.ascontiguousarray(lengths, dtype=np.int64)
        self.vocab_size = int(vocab_size)
        if self.ids.size and not (0 <= int(self.ids.min()) and int(self.ids.max()) < self.vocab_size):
            raise InvalidBatchError(
                f"token ids must lie in [0, {self.vocab_size}) (the vocabulary), got ids from {int(self.ids.min())} "
                f"to {int(self.ids.max())}"
            )
        n = self.ids.shape[0] if self.ids.ndim == 2 else -1
        if self.lengths.shape != (n,) or np.any(self.lengths < 1) or np.any(self.lengths > self.ids.shape[-1]):
            raise InvalidBatchError(
                f"lengths must be one per row of ids ({self.ids.shape}), each from 1 to the padded length"
            )
        self.blocks = _blocks(self.lengths.astype(np.float64) ** 2)  # the cost of a sequence: T^2
        self._order: tuple[np.ndarray, np.ndarray] | None = None

    def order(self) -> tuple[np.ndarray, np.ndarray]:
        if self._order is None:
            self._order = token_order(self.ids, self.lengths, self.vocab_size)
        return self._order


@numba.njit(cache=True, fastmath=_FAST, inline="always")
def _rows(table, ids_i, L, rows):  # pragma: no cover - compiled
    """``rows[t] = table[ids_i[t]]`` for ``t < L``."""
    for t in range(L):
        for k in range(table.shape[1]):
            rows[t, k] = table[ids_i[t], k]


@numba.njit(cache=True, fastmath=_FAST, inline="always")
def _abt(A, B, m, p, K, out, upper):  # pragma: no cover - compiled
    """``out[t, k] = sum_{j < K} A[t, j] B[k, j]`` for ``t < m``, ``k < p`` (with ``upper`` only ``k >= t``)."""
    z = np.zeros(1, out.dtype)[0]
    for t in range(m):
        for k in range(t if upper else 0, p):
            acc = z
            for j in range(K):
                acc += A[t, j] * B[k, j]
            out[t, k] = acc


@numba.njit(parallel=True, fastmath=_FAST, cache=True)
def _two_layer_forward(ids, lengths, Xt, Kt, R, sym, blocks, keep, A, aux, f):  # pragma: no cover - compiled
    """Outputs ``f`` (n). Per sequence of length ``L``: ``S = K X^T`` (``X X^T`` when ``sym``), ``A`` its row-wise
    softmax (kept in ``A[i]`` with ``keep``), ``ub = A c``, ``zb = A w`` (``c, w`` the columns of ``R``), ``q =
    softmax(c + ub)``, ``f = q^T (w + zb)``; ``aux[i, t] = (ub_t, zb_t, q_t)`` for the backward."""
    n, T = ids.shape
    d = Xt.shape[1]
    for b in numba.prange(blocks.size - 1):
        Xl, Kl, Sl = np.empty((T, d), Xt.dtype), np.empty((T, d), Xt.dtype), np.empty((T, T), Xt.dtype)
        c, w, u, e = np.empty(T), np.empty(T), np.empty(T), np.empty(T)
        for i in range(blocks[b], blocks[b + 1]):
            L = lengths[i]
            ids_i = ids[i]
            _rows(Xt, ids_i, L, Xl)
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
                mx = S[t, 0]
                for j in range(1, L):
                    mx = max(mx, S[t, j])
                _exp_shifted(S, t, np.float64(mx), L, e)
                Z = 0.0
                for j in range(L):
                    Z += e[j]
                ub = 0.0
                zb = 0.0
                for j in range(L):
                    S[t, j] = e[j] / Z
                    a = np.float64(S[t, j])  # the rounded weight: the backward reads the same value
                    ub += a * c[j]
                    zb += a * w[j]
                aux[i, t, 0] = ub
                aux[i, t, 1] = zb
                u[t] = c[t] + ub
                umax = max(umax, u[t])
            # exponentials and their sum in two loops: fused, compiled and cached loops gave other bits
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
    """Per occurrence ``(i, t)`` the gradient of ``sum_i G_i f_i`` with respect to its rows: ``rows[slot[i, t]]`` holds
    ``dX_t`` (d), then ``dK_t`` (d, unless ``sym``: then ``dX_t`` includes it), then ``(dc_t, dw_t)``. With ``du = G
    q (z - f)``, ``dz = G q``: ``dc = du + A^T du``, ``dw = dz + A^T dz``, ``dS_tj = A_tj (du_t (c_j - ub_t) + dz_t
    (w_j - zb_t))``, ``dK = dS X``, ``dX = dS^T K`` (``(dS + dS^T) X`` when ``sym``)."""
    n, T = ids.shape
    d = Xt.shape[1]
    off = d if sym else 2 * d
    for b in numba.prange(blocks.size - 1):
        Xl, XT = np.empty((T, d), Xt.dtype), np.empty((d, T), Xt.dtype)
        Kl, KT = np.empty((T, d), Xt.dtype), np.empty((d, T), Xt.dtype)
        M, MT = np.empty((T, T), Xt.dtype), np.empty((T, T), Xt.dtype)
        du, dz, c, w, s0, s1 = np.empty(T), np.empty(T), np.empty(T), np.empty(T), np.empty(T), np.empty(T)
        out = np.empty((T, rows.shape[1]), Xt.dtype)
        for i in range(blocks[b], blocks[b + 1]):
            L = lengths[i]
            ids_i = ids[i]
            Ai = A[i]
            _rows(Xt, ids_i, L, Xl)
            for t in range(L):
                for k in range(d):
                    XT[k, t] = Xl[t, k]
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
                for t in range(L):
                    for k in range(d):
                        KT[k, t] = Kl[t, k]
                for t in range(L):
                    for j in range(L):
                        MT[j, t] = M[t, j]
                _abt(MT, KT, L, d, L, out, False)  # dX = dS^T K
                _abt(M, XT, L, d, L, out[:, d:], False)  # dK = dS X
            for t in range(L):
                o = slot[i, t]
                for k in range(out.shape[1]):
                    rows[o, k] = out[t, k]


@numba.njit(cache=True)
def token_order(ids, lengths, vocab_size):  # pragma: no cover - compiled
    """Occurrences of padded ``ids`` sorted by token then position: ``slot[i, t]`` is a place, ``crow[s]:crow[s + 1]``
    token ``s``'s places."""
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
    """``out[s] = rows[crow[s]] + ... + rows[crow[s + 1] - 1]`` (float64 sums, in order)."""
    for s in numba.prange(out.shape[0]):
        acc = np.zeros(rows.shape[1])
        for o in range(crow[s], crow[s + 1]):
            for c in range(acc.size):
                acc[c] += rows[o, c]
        for c in range(acc.size):
            out[s, c] = acc[c]


def two_layer_forward(plan: TwoLayerPlan, Xt: np.ndarray, Kt: np.ndarray | None, R: np.ndarray, keep: bool):
    """The two-layer read-out from the |S| x d tables ``Xt``, ``Kt`` (None: ``Xt``) and ``R = [c, w]``:
    ``(f, A, aux)``: ``f`` (n, float64), with ``keep`` the attention (n x T x T) and values (n x T x 3) for backward."""
    n, T = plan.ids.shape
    A = np.empty((n, T, T) if keep else (1, 1, 1), dtype=Xt.dtype)
    aux, f = np.empty((n, T, 3)), np.empty(n)
    with _pool():
        _two_layer_forward(
            plan.ids, plan.lengths, Xt, Xt if Kt is None else Kt, R, Kt is None, plan.blocks, keep, A, aux, f
        )
    return f, A, aux


def two_layer_backward(plan, Xt, Kt, R, A, aux, f, G):
    """Gradients of ``sum_i G_i f_i`` with respect to the tables: ``(dXt, dKt, dR)`` in the tables' dtype (``dKt``
    None when ``Kt`` is: ``dXt`` then holds both roles), summed per token in a fixed order."""
    d = Xt.shape[1]
    sym = Kt is None
    width = (d if sym else 2 * d) + 2
    crow, slot = plan.order()
    rows = np.empty((crow[-1], width), dtype=Xt.dtype)
    out = np.empty((plan.vocab_size, width), dtype=Xt.dtype)
    f, G = np.ascontiguousarray(f, dtype=np.float64), np.ascontiguousarray(G, dtype=np.float64)
    with _pool():
        _two_layer_backward(
            plan.ids, plan.lengths, Xt, Xt if sym else Kt, R, sym, plan.blocks, A, aux, f, G, slot, rows
        )
        _sum_by_token(rows, crow, out)
    return out[:, :d], None if sym else out[:, d : 2 * d], out[:, width - 2 :]
