"""The ATT-SVM and normalised gradient descent on dense features, in the notation of the max-margin attention
literature (Tarzanagh, Li, Zhang and Oymak, 2023; Tarzanagh, Li, Thrampoulidis and Oymak, 2023): a sequence is a
matrix ``X_i`` of ``T`` features (an array ``(n, T, d)``, ``mask`` marking the real positions), its output
``f(X_i) = v^T X_i^T softmax(X_i p)``. As for tokens (:mod:`tokensel.analysis.maxmargin`), two selected
positions of one sequence tie, and an infeasible problem names a set of conflicting sequences found by a
Farkas certificate (a linear programme), ``error.sequences``."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np
import torch

from ..errors import DivergenceError, InfeasibleSVMError, InvalidArgumentError, SolverError
from ..validation import Array, Choice, Either, Int, IntArray, Real, RealArray, Text, declare
from .maxmargin import _solve, installed_solver

#: features of ``n`` sequences of ``T`` positions in dimension ``d``, the real positions, and a selection
FEATURES = RealArray(shape=("n", "T", "d"), nonempty=True)
MASK = Array("bool", shape=("n", "T"), allow_none=True)
SELECTED = Either(
    Array("bool", shape=("n", "T")),
    IntArray(shape=("n",)),
    what="a boolean array of shape (n, T) or one position index per sequence, shape (n,)",
)


@dataclass
class DenseSVMResult:
    """The solution ``p`` (``W`` for :func:`att_svm_kq`) and diagnostics: ``active`` sequences have a gap within
    1e-6 of 1, ``same_selection`` says whether the solution selects what was asked, ``constraints`` counts the
    (selected, unselected) pairs the problem stands for."""

    p: torch.Tensor
    norm: float
    min_margin: float
    active: int
    same_selection: bool
    constraints: int
    status: str
    solve_time: float


def _positions(mask, shape) -> np.ndarray:
    """The real positions (all when ``mask`` is None); every sequence needs one."""
    if mask is None:
        return np.ones(shape, dtype=bool)
    m = mask
    empty = np.flatnonzero(~m.any(1))
    if empty.size:
        raise InvalidArgumentError(f"mask leaves sequence {int(empty[0])} without a position: drop that sequence")
    return m


def _selection(s: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """``selected`` (a mask, or the index ``opt_i`` of one position per sequence) as a mask within ``mask``."""
    n, T = mask.shape
    if s.dtype == np.bool_:
        out = s.copy()
    else:
        if s.min() < 0 or s.max() >= T:
            raise InvalidArgumentError(
                f"selected holds position indices in 0..{T - 1}, got {int(s.min())}..{int(s.max())}"
            )
        out = np.zeros((n, T), dtype=bool)
        out[np.arange(n), s] = True
    outside = np.argwhere(out & ~mask)
    if outside.size:
        i, t = outside[0]
        raise InvalidArgumentError(f"selected marks position {int(t)} of sequence {int(i)}, which mask leaves out")
    none = np.flatnonzero(~out.any(1))
    if none.size:
        raise InvalidArgumentError(f"sequence {int(none[0])} has no selected position: every sequence needs one")
    return out


def _farkas_conflict(F: np.ndarray, sel: np.ndarray, uns: np.ndarray):
    """The sequences whose constraints cannot hold together, or None when feasible: those with non-zero
    multipliers in a non-negative combination of (selected minus unselected) features that is zero (Farkas;
    the selected features' affine hull, since their scores are tied rather than bounded)."""
    import scipy.sparse as sp
    from scipy.optimize import linprog

    n, T, D = F.shape
    (si, st), (ui, ut) = np.nonzero(sel), np.nonzero(uns)
    k_s, k_u = len(si), len(ui)
    # variables: lambda (selected positions, free sign: their scores are tied, not bounded), mu (unselected)
    # >= 0; sum_i sum_t lambda x - sum mu x = 0 (D rows); per sequence sum lambda - sum mu = 0; sum mu = 1
    geo = sp.hstack([sp.csr_matrix(F[si, st].T), sp.csr_matrix(-F[ui, ut].T)])
    per_seq = sp.hstack(
        [
            sp.csr_matrix((np.ones(k_s), (si, np.arange(k_s))), shape=(n, k_s)),
            sp.csr_matrix((-np.ones(k_u), (ui, np.arange(k_u))), shape=(n, k_u)),
        ]
    )
    total = sp.csr_matrix(np.r_[np.zeros(k_s), np.ones(k_u)][None, :])
    A = sp.vstack([geo, per_seq, total]).tocsr()
    b = np.r_[np.zeros(D + n), 1.0]
    scale = max(1.0, float(np.abs(F).max()))
    res = linprog(
        np.zeros(k_s + k_u),
        A_eq=A,
        b_eq=b * 1.0,
        bounds=[(None, None)] * k_s + [(0, None)] * k_u,
        method="highs",
        options={"primal_feasibility_tolerance": 1e-9 * scale},
    )
    if res.status == 2:  # the certificate does not exist: the SVM is feasible
        return None
    if res.status != 0:
        raise SolverError(f"the feasibility test of the ATT-SVM stopped ({res.message}): feasibility is unknown")
    weight = np.zeros(n)
    np.add.at(weight, ui, res.x[k_s:])
    np.add.at(weight, si, np.abs(res.x[:k_s]))
    return np.flatnonzero(weight > 1e-9).tolist()


def _svm(F: np.ndarray, sel: np.ndarray, mask: np.ndarray, shape, norm: str, solver: str, solver_opts: dict):
    """The ATT-SVM on features ``F`` (n, T, D), reshaped to ``shape``: a variable per sequence for its selected
    positions' common score and one for its highest unselected score give O(n T) constraints, not one per pair."""
    import cvxpy as cp

    scale = float(np.abs(F[mask]).max())  # solved on features of unit size: small features would stall the solver
    F = F / scale if scale > 0 else F
    uns = mask & ~sel
    rows = np.flatnonzero(uns.any(1))
    if rows.size == 0:
        raise InvalidArgumentError("no sequence has an unselected position: the problem has no constraint")
    pairs = int((sel.sum(1) * uns.sum(1)).sum())
    # sequences with two or more selected positions tie them even without an unselected position
    keep = np.flatnonzero(uns.any(1) | (sel.sum(1) > 1))
    conflict = _farkas_conflict(F[keep], sel[keep], uns[keep])
    if conflict is not None:
        seqs = [int(keep[i]) for i in conflict]
        raise InfeasibleSVMError(
            f"the ATT-SVM has no solution: sequences {seqs} conflict (a combination of their selected minus "
            "unselected features is zero, so no p puts every selected position above every unselected one with "
            "the selected positions of each sequence tied); change the selection of these sequences or drop them",
            sequences=seqs,
        )
    (si, st), (ui, ut) = np.nonzero(sel), np.nonzero(uns)
    local = np.full(len(sel), -1)
    local[rows] = np.arange(rows.size)
    p = cp.Variable(F.shape[2])
    top, hi = cp.Variable(len(sel)), cp.Variable(rows.size)
    constraints = [F[si, st] @ p == top[si], F[ui, ut] @ p <= hi[local[ui]], top[rows] - hi >= 1]
    if norm == "nuc":
        objective = cp.normNuc(cp.reshape(p, shape, order="C"))
    else:
        objective = cp.sum_squares(p)
    prob = cp.Problem(cp.Minimize(objective), constraints)
    if solver == "CLARABEL":
        for key in ("tol_gap_abs", "tol_gap_rel", "tol_feas"):
            solver_opts.setdefault(key, 1e-10)
    t0 = time.perf_counter()
    _solve(prob, solver, **solver_opts)
    seconds = time.perf_counter() - t0
    if prob.status not in ("optimal", "optimal_inaccurate") or p.value is None:
        raise SolverError(
            f"the solver {solver} stopped with status {prob.status!r} on the dense ATT-SVM "
            f"({rows.size} sequences, dimension {F.shape[2]}): try solver='SCS'"
        )
    pv = np.asarray(p.value, dtype=np.float64)
    scores = F @ pv
    pv = pv / scale if scale > 0 else pv
    gap = np.where(sel, scores, np.inf).min(1) - np.where(uns, scores, -np.inf).max(1)
    gap = gap[rows]
    chosen = mask & (np.where(mask, scores, -np.inf) >= np.where(mask, scores, -np.inf).max(1, keepdims=True) - 1e-6)
    W = pv.reshape(shape)
    size = float(np.linalg.norm(W, "nuc")) if norm == "nuc" else float(np.linalg.norm(pv))
    return DenseSVMResult(
        p=torch.from_numpy(W.copy()),
        norm=size,
        min_margin=float(gap.min()),
        active=int(np.sum(gap < 1 + 1e-6)),
        same_selection=bool(np.array_equal(chosen, sel)),
        constraints=pairs,
        status=prob.status,
        solve_time=seconds,
    )


@declare(X=FEATURES, selected=SELECTED, mask=MASK, solver=Text())
def att_svm_dense(X, selected, mask=None, solver: str = "CLARABEL", **solver_opts) -> DenseSVMResult:
    """``min ||p||`` s.t. ``p^T (x_{i,t} - x_{i,t'}) >= 1`` for every selected ``t`` and unselected ``t'`` of each
    sequence, ``selected`` a boolean ``(n, T)`` array or one position index per sequence; with ``X = E[ids]``
    the problem :func:`tokensel.max_margin` solves on token pairs."""
    mask = _positions(mask, X.shape[:2])
    sel = _selection(selected, mask)
    solver = installed_solver(solver)
    return _svm(X, sel, mask, (X.shape[2],), "fro", solver, solver_opts)


@declare(
    X=FEATURES,
    selected=SELECTED,
    Z=RealArray(shape=("n", None), nonempty=True),
    mask=MASK,
    norm=Choice("fro", "nuc"),
    solver=Text(),
)
def att_svm_kq(X, selected, Z, mask=None, norm: str = "fro", solver: str = "CLARABEL", **solver_opts) -> DenseSVMResult:
    """The ATT-SVM for a key-query matrix ``W`` with scores ``x_{i,t}^T W z_i`` (``Z``: a query per sequence),
    solved for ``p = vec(W)`` on the features ``vec(x_{i,t} z_i^T)``. ``norm="fro"`` is the bias of gradient
    descent on ``W``; ``"nuc"`` that of a factorised ``W = K Q^T`` (Tarzanagh et al., 2023)."""
    mask = _positions(mask, X.shape[:2])
    sel = _selection(selected, mask)
    solver = installed_solver(solver)
    lifted = (X[:, :, :, None] * Z[:, None, None, :]).reshape(X.shape[0], X.shape[1], -1)  # vec(x z^T), row-major
    return _svm(lifted, sel, mask, (X.shape[2], Z.shape[1]), norm, solver, solver_opts)


@dataclass
class NormalizedGD:
    """The final ``p`` and, per recorded step, the loss, ``||p||`` and the cosine with ``reference`` (or NaN)."""

    p: torch.Tensor
    step: list
    loss: list
    norm_p: list
    cos_ref: list


@declare(
    X=FEATURES,
    labels=RealArray(shape=("n",)),
    v=RealArray(shape=("d",)),
    steps=Int(min=1, max=10**8),
    lr=Real(min=0.0, min_inclusive=False),
    p0=RealArray(shape=("d",), allow_none=True),
    mask=MASK,
    reference=RealArray(shape=("d",), allow_none=True),
    records=Int(min=1),
)
def normalized_gd(
    X, labels, v, steps: int, lr: float = 0.1, p0=None, mask=None, reference=None, records: int = 50
) -> NormalizedGD:
    """Normalised gradient descent ``p <- p - lr * g / ||g||`` on the mean logistic loss of ``f``, in float64: the
    step :func:`tokensel.train_p` takes with ``method="normalized"``, on any features. Its gradient sums
    ``q_t q_s (u_t - u_s) x_t`` over pairs of positions, accurate when the attention is nearly one-hot."""
    X = torch.from_numpy(X)
    n, T, d = X.shape
    m = torch.from_numpy(_positions(mask, (n, T)))
    y = torch.from_numpy(labels)
    if not bool(((y == 1) | (y == -1)).all()):
        raise InvalidArgumentError(
            f"labels must hold one label of +1 or -1 per sequence, shape ({n},): map 0/1 "
            "labels with tokensel.labels_from_01"
        )
    v = torch.from_numpy(v)
    p = torch.zeros(d, dtype=torch.float64) if p0 is None else torch.from_numpy(p0).clone()
    ref = None if reference is None else torch.from_numpy(reference)
    if ref is not None and not float(ref.norm()) > 0:
        raise InvalidArgumentError(f"reference must be a non-zero vector of shape ({d},)")
    u = X @ v  # (n, T) values
    diff = u[:, :, None] - u[:, None, :]  # u_t - u_s
    rec = set(np.unique(np.linspace(0, steps, min(records, steps + 1)).round().astype(int)).tolist())
    out = NormalizedGD(p, [], [], [], [])
    for step in range(steps + 1):
        q = torch.softmax((X @ p).masked_fill(~m, -torch.inf), dim=1)
        f = (q * u).sum(1)
        # u_t - f = sum_s q_s (u_t - u_s), summed from the differences: no cancellation once q is near one-hot
        centred = (diff * q[:, None, :]).sum(2)
        dldf = -y * torch.sigmoid(-y * f) / n
        g = torch.einsum("n,nt,ntd->d", dldf, q * centred, X)
        gnorm = float(g.norm())
        if step in rec or step == steps or gnorm == 0.0:
            out.step.append(step)
            out.loss.append(float(torch.nn.functional.softplus(-y * f).mean()))
            out.norm_p.append(float(p.norm()))
            cos = float(p @ ref / (p.norm() * ref.norm())) if ref is not None and float(p.norm()) > 0 else float("nan")
            out.cos_ref.append(cos)
        if not (math.isfinite(out.loss[-1] if out.loss else 0.0) and math.isfinite(gnorm)):
            raise DivergenceError(
                f"normalised GD left the finite numbers at step {step} (loss or gradient not finite): start nearer "
                "0 (p0) or scale the features down",
                step=step,
            )
        if step == steps or gnorm == 0.0:
            break
        p = p - lr * g / gnorm
    out.p = p
    return out


__all__ = ["DenseSVMResult", "NormalizedGD", "att_svm_dense", "att_svm_kq", "normalized_gd"]
