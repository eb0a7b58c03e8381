"""The max-margin problem for a token selection (ATT-SVM, PAPER.md R5): ``p_mm = argmin ||p||`` subject to
``p^T (E_s - E_s') >= 1`` for every selected ``s`` and unselected ``s'`` of a sequence. The constraints depend on
token pairs only (:func:`selection_pairs`: at most |S|^2, whatever ``n``). Two distinct tokens selected in one
sequence also tie, ``p^T (E_s - E_r) = 0`` (:func:`selection_ties`): the flow's limit solves the problem with
these equalities (chapter 05), without which it may select ``s`` alone. The pairs alone are infeasible iff
their graph ``s -> s'`` has a cycle (:func:`find_cycle`), which the error names; cvxpy's verdict is checked
otherwise (:class:`~tokensel.errors.InfeasibleSVMError`)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
import torch

from ..data.batch import Batch, RaggedBatch
from ..errors import InfeasibleSVMError, InvalidArgumentError, SolverError
from ..validation import (
    Bool,
    Choice,
    Constraint,
    Instance,
    Numbers,
    Real,
    Tensor,
    Text,
    check_int_array,
    declare,
    unchecked,
)


class Pairs(Constraint):
    """Token pairs ``(s, s')``: a ``(k, 2)`` int64 array, non-empty unless ``empty`` (then any empty array is
    passed on as a ``(0, 2)`` one)."""

    def __init__(self, *, empty: bool = False, allow_none: bool = False):
        super().__init__(allow_none=allow_none)
        self.empty = empty
        self.what = f"a {'' if empty else 'non-empty '}(k, 2) array of token ids"

    def check(self, value, name, dims):
        pairs = check_int_array(value, name)
        if self.empty and pairs.size == 0:
            return np.zeros((0, 2), dtype=np.int64)
        if pairs.ndim != 2 or pairs.shape[1] != 2 or len(pairs) == 0:
            raise InvalidArgumentError(f"{name} must be {self.describe()}, got shape {pairs.shape}")
        return pairs


PAIRS = Pairs()
#: pairs of tied tokens (:func:`selection_ties`): none is fine
TIES = Pairs(empty=True, allow_none=True)
#: token embeddings (|S| x d), finite
EMBEDDINGS = Tensor("float", ndim=2, finite=True)
SELECTED = Tensor("bool", shape=("tokens",))


@dataclass
class SVMResult:
    """Solution of the max-margin problem and its diagnostics."""

    p: torch.Tensor  # p_mm, same dtype/device as E
    norm: float  # ||p_mm||
    pairs: np.ndarray  # (k, 2) de-duplicated (selected, unselected) token pairs
    tokens: np.ndarray  # the used tokens U
    status: str  # cvxpy status
    form: str
    solve_time: float  # seconds in the solver (cvxpy's solver_stats), excluding compilation
    total_time: float  # seconds including cvxpy's problem compilation
    min_margin: float  # min over pairs of p_mm^T (E_s - E_s')
    active: int  # pairs with margin within 1e-6 of 1
    ties: np.ndarray = field(default_factory=lambda: np.zeros((0, 2), dtype=np.int64))  # (m, 2) tied tokens
    max_tie_gap: float = 0.0  # max over ties of |p_mm^T (E_s - E_r)| (0 up to the solver's accuracy)

    def summary(self) -> str:
        tied = f", {len(self.ties)} ties" if len(self.ties) else ""
        return (
            f"ATT-SVM ({self.form}): {len(self.pairs)} pairs{tied} over {len(self.tokens)} tokens, "
            f"status {self.status}, ||p_mm|| = {self.norm:.6g}, min margin {self.min_margin:.6f}, "
            f"{self.active} active constraints, {self.total_time:.2f} s"
        )


@declare(batch=Batch(), selected=SELECTED)
def selection_pairs(batch: RaggedBatch, selected: torch.Tensor) -> np.ndarray:
    """The sorted, de-duplicated token pairs ``(s, s')``, ``s`` selected and ``s'`` not in a common sequence, of a
    flat mask over the occurrences (:func:`tokensel.analysis.statistics.selection`). Introduced in chapter 05."""
    S = batch.vocab_size
    seg, ids, selected = batch.seg.cpu(), batch.ids.cpu(), selected.cpu()
    key_sel = torch.unique(seg[selected] * S + ids[selected])  # sorted by sequence
    key_uns = torch.unique(seg[~selected] * S + ids[~selected])
    if key_sel.numel() == 0:
        raise InvalidArgumentError("the selection is empty: every sequence needs a selected token")
    sel_seq, sel_tok = key_sel // S, key_sel % S
    uns_seq, uns_tok = key_uns // S, key_uns % S
    k = torch.bincount(sel_seq, minlength=batch.n)
    if torch.any(k == 0):
        raise InvalidArgumentError(f"sequence {int(torch.nonzero(k == 0)[0])} has no selected token")
    start = torch.cumsum(k, 0) - k
    reps = k[uns_seq]
    rel = torch.arange(int(reps.sum())) - torch.repeat_interleave(torch.cumsum(reps, 0) - reps, reps)
    s = sel_tok[torch.repeat_interleave(start[uns_seq], reps) + rel]
    s2 = torch.repeat_interleave(uns_tok, reps)
    pair_key = torch.unique(s * S + s2)
    return torch.stack([pair_key // S, pair_key % S], 1).numpy()


@declare(batch=Batch(), selected=SELECTED)
def selection_ties(batch: RaggedBatch, selected: torch.Tensor) -> np.ndarray:
    """The ties ``p^T (E_s - E_r) = 0``: sorted pairs ``(s, r)``, ``s < r``, tying every token a sequence selects to
    the smallest one it selects (the others follow); none when each sequence selects one token."""
    selection_pairs(batch, selected)  # the same checks of batch and mask
    S = batch.vocab_size
    seg, ids = batch.seg.cpu()[selected.cpu()], batch.ids.cpu()[selected.cpu()]
    key = torch.unique(seg * S + ids)  # sorted: by sequence, then token
    seq, tok = key // S, key % S
    first = torch.ones_like(seq, dtype=torch.bool)
    first[1:] = seq[1:] != seq[:-1]
    start = torch.cummax(torch.where(first, torch.arange(len(seq)), 0), 0).values
    # tie every selected token of a sequence to its smallest one: enough, since equality is transitive
    later = ~first
    a, b = tok[start[later]], tok[later]
    if a.numel() == 0:
        return np.zeros((0, 2), dtype=np.int64)
    pair_key = torch.unique(torch.minimum(a, b) * S + torch.maximum(a, b))
    return torch.stack([pair_key // S, pair_key % S], 1).numpy()


def _tie_groups(ties: np.ndarray, size: int) -> np.ndarray:
    """The representative of every token after merging tied tokens (union-find): ``root[s]``."""
    root = np.arange(size)

    def find(x: int) -> int:
        while root[x] != x:
            root[x] = root[root[x]]
            x = root[x]
        return x

    for a, b in ties.tolist():
        ra, rb = find(a), find(b)
        if ra != rb:
            root[max(ra, rb)] = min(ra, rb)
    return np.array([find(x) for x in range(size)])


@declare(pairs=PAIRS)
def find_cycle(pairs: np.ndarray):
    """A directed cycle ``[s0, s1, ..., s0]`` in the graph of pairs ``s -> s'``, or None."""
    succ: dict[int, list[int]] = {}
    for a, b in pairs.tolist():
        succ.setdefault(a, []).append(b)
    state: dict[int, int] = {}  # 1 = on stack, 2 = done
    for root in list(succ):
        if state.get(root):
            continue
        stack = [(root, iter(succ.get(root, ())))]
        path = [root]
        state[root] = 1
        while stack:
            node, it = stack[-1]
            nxt = next(it, None)
            if nxt is None:
                state[node] = 2
                stack.pop()
                path.pop()
            elif state.get(nxt) == 1:
                return path[path.index(nxt) :] + [nxt]
            elif not state.get(nxt):
                state[nxt] = 1
                stack.append((nxt, iter(succ.get(nxt, ()))))
                path.append(nxt)
    return None


def _merged_pairs(ties: np.ndarray, pairs: np.ndarray, size: int) -> np.ndarray:
    """The pairs mapped to the tied groups' representatives; infeasible when a pair orders two tied tokens."""
    if len(ties) and (ties.min() < 0 or ties.max() >= size):
        raise InvalidArgumentError(f"ties: token ids must lie in 0..{size - 1}")
    root = _tie_groups(ties, size)
    merged = root[pairs]
    inside = merged[:, 0] == merged[:, 1]
    if np.any(inside):
        s, s2 = (int(t) for t in pairs[inside][0])
        raise InfeasibleSVMError(
            f"the selection is infeasible: tokens {s} and {s2} are tied (both selected in one sequence) but the "
            f"pair ({s}, {s2}) asks c_{s} - c_{s2} >= 1 (one selected and the other not in another sequence)",
            cycle=[s, s2, s],
        )
    return merged


@declare(solver=Text())
def installed_solver(solver: str) -> str:
    """The cvxpy name of ``solver`` (``"clarabel"``, say) when installed, else a SolverError naming those that are."""
    import cvxpy as cp

    if solver.upper() not in cp.installed_solvers():
        raise SolverError(
            f"the solver {solver!r} is not installed; installed: {cp.installed_solvers()}: "
            "install it (pip install ...) or pass one of those"
        )
    return solver.upper()


def _solve(prob, solver: str, **opts) -> None:
    """``prob.solve`` with solver failures (a crash, an unknown option) as :class:`SolverError`."""
    import cvxpy as cp

    try:
        prob.solve(solver=solver, **opts)
    except cp.error.SolverError as exc:
        raise SolverError(f"the solver {solver} failed ({exc}): try another solver (solver='SCS')") from exc
    except (TypeError, ValueError) as exc:
        raise SolverError(f"the solver {solver} refused its options {sorted(opts)} ({exc})") from exc


def _confirm_infeasible(
    En: np.ndarray, pairs: np.ndarray, ties: np.ndarray, solver: str, solver_opts: dict, d: int
) -> None:
    """Check a solver's "infeasible" on the scale-free form (unit rows ``m_k / |m_k|``): embeddings 1e-12 apart
    make the problem feasible only with ``|p| >= 1e12``, beyond any solver: a SolverError, not infeasibility."""
    import cvxpy as cp

    M = En[pairs[:, 0]] - En[pairs[:, 1]]
    norms = np.linalg.norm(M, axis=1)
    if np.any(norms == 0):  # two identical embeddings: p^T 0 >= 1 is impossible, exactly
        return
    q = cp.Variable(d)
    cons = [(M / norms[:, None]) @ q >= 1]
    if len(ties):
        cons.append((En[ties[:, 0]] - En[ties[:, 1]]) @ q == 0)
    unit = cp.Problem(cp.Minimize(cp.sum_squares(q)), cons)
    _solve(unit, solver, verbose=False, **solver_opts)
    if unit.status in ("optimal", "optimal_inaccurate") and q.value is not None:
        raise SolverError(
            f"the ATT-SVM is feasible (its scale-free form has a solution), but two embeddings of a pair are only "
            f"{norms.min():.3g} apart, so its solution needs |p| >= {1 / norms.min():.3g}: beyond what the solver "
            f"{solver} resolves (it reported the problem infeasible). Rescale E or drop near-duplicate tokens."
        )


@declare(
    E=EMBEDDINGS,
    pairs=PAIRS,
    ties=TIES,
    form=Choice("sparse", "dense"),
    solver=Text(),
    verbose=Bool(),
)
def max_margin(
    E: torch.Tensor,
    pairs: np.ndarray,
    ties: np.ndarray | None = None,
    form: str = "sparse",
    solver: str = "CLARABEL",
    verbose: bool = False,
    **solver_opts,
) -> SVMResult:
    """Solve the ATT-SVM for the token ``pairs`` with the ``ties`` (none by default) with cvxpy: ``form="sparse"``
    has the token scores as variables (two non-zeros per pair), ``"dense"`` one row ``(E_s - E_s')^T`` per pair.
    An infeasible problem raises :class:`~tokensel.errors.InfeasibleSVMError`, naming a cycle when there is one.
    Introduced in chapter 05."""
    import cvxpy as cp

    solver = installed_solver(solver)
    S, d = E.shape
    if pairs.min() < 0 or pairs.max() >= S:
        raise InvalidArgumentError(f"pair token ids must lie in 0..{S - 1}")
    if np.any(pairs[:, 0] == pairs[:, 1]):
        raise InfeasibleSVMError(
            "a pair has s == s' (p^T 0 >= 1 is impossible): a token is both selected and unselected",
            cycle=[int(pairs[pairs[:, 0] == pairs[:, 1]][0, 0])] * 2,
        )
    ties = np.zeros((0, 2), dtype=np.int64) if ties is None else ties
    merged = _merged_pairs(ties, pairs, S)
    cycle = unchecked(find_cycle)(merged)
    if cycle is not None:
        raise InfeasibleSVMError(
            f"the selection is infeasible: the pair constraints around the cycle {cycle} of tokens "
            + ("(tied tokens merged) " if len(ties) else "")
            + f"add up to 0 >= {len(cycle) - 1}",
            cycle=cycle,
        )
    En = E.detach().cpu().numpy().astype(np.float64)
    tokens = np.unique(np.concatenate([pairs.ravel(), ties.ravel()]))
    p = cp.Variable(d)
    if form == "sparse":
        local, tl = np.searchsorted(tokens, pairs), np.searchsorted(tokens, ties)
        c = cp.Variable(len(tokens))
        constraints = [En[tokens] @ p == c, _difference(local, len(tokens)) @ c >= 1]
        if len(ties):
            constraints.append(_difference(tl, len(tokens)) @ c == 0)
    else:
        constraints = [(En[pairs[:, 0]] - En[pairs[:, 1]]) @ p >= 1]
        if len(ties):
            constraints.append((En[ties[:, 0]] - En[ties[:, 1]]) @ p == 0)
    prob = cp.Problem(cp.Minimize(cp.sum_squares(p)), constraints)
    if solver == "CLARABEL":
        for key in ("tol_gap_abs", "tol_gap_rel", "tol_feas"):
            solver_opts.setdefault(key, 1e-10)
    t0 = time.perf_counter()
    _solve(prob, solver, verbose=verbose, **solver_opts)
    total = time.perf_counter() - t0
    if prob.status in ("infeasible", "infeasible_inaccurate"):
        _confirm_infeasible(En, pairs, ties, solver, solver_opts, d)
        raise InfeasibleSVMError(
            f"the ATT-SVM has no solution (solver status {prob.status!r}) for {len(pairs)} pairs over "
            f"{len(tokens)} tokens in d = {d}: the required score order cannot be realised by any p"
        )
    if prob.status not in ("optimal", "optimal_inaccurate") or p.value is None:
        raise SolverError(
            f"the solver {solver} stopped with status {prob.status!r} on the ATT-SVM "
            f"({len(pairs)} pairs, {len(tokens)} tokens, d = {d}): feasibility is unknown; "
            "try another solver (solver='SCS') or a larger iteration limit (max_iter=...)"
        )
    pv = np.asarray(p.value, dtype=np.float64)
    margins = (En[pairs[:, 0]] - En[pairs[:, 1]]) @ pv
    tie_gaps = np.abs((En[ties[:, 0]] - En[ties[:, 1]]) @ pv) if len(ties) else np.zeros(0)
    stats = prob.solver_stats
    solve_time = float(stats.solve_time) if stats is not None and stats.solve_time is not None else total
    return SVMResult(
        p=torch.from_numpy(pv).to(dtype=E.dtype, device=E.device),
        norm=float(np.linalg.norm(pv)),
        pairs=pairs,
        tokens=tokens,
        status=prob.status,
        form=form,
        solve_time=solve_time,
        total_time=total,
        min_margin=float(margins.min()),
        active=int(np.sum(margins < 1 + 1e-6)),
        ties=ties,
        max_tie_gap=float(tie_gaps.max()) if len(tie_gaps) else 0.0,
    )


def _difference(local: np.ndarray, m: int):
    """The sparse (k x m) matrix whose row ``j`` is ``e_{local[j, 0]} - e_{local[j, 1]}``."""
    import scipy.sparse as sp

    k = len(local)
    rows = np.r_[np.arange(k), np.arange(k)]
    return sp.csr_matrix((np.r_[np.ones(k), -np.ones(k)], (rows, np.r_[local[:, 0], local[:, 1]])), shape=(k, m))


@declare(batch=Batch(), E=EMBEDDINGS, selected=SELECTED)
def max_margin_for_selection(E: torch.Tensor, batch: RaggedBatch, selected: torch.Tensor, **kw) -> SVMResult:
    """:func:`max_margin` for the pairs and ties of a flat selection mask. Introduced in chapter 03."""
    if "ties" in kw:
        raise InvalidArgumentError(
            "max_margin_for_selection derives the ties from the selection: pass no ties (or call max_margin)"
        )
    return max_margin(E, selection_pairs(batch, selected), selection_ties(batch, selected), **kw)


@declare(gram=Tensor("float", ndim=2, finite=True), pairs=PAIRS, solver=Text())
def max_margin_scores(gram: torch.Tensor, pairs: np.ndarray, solver: str = "CLARABEL") -> tuple[torch.Tensor, float]:
    """The ATT-SVM in score space, ``min c^T G^{-1} c`` subject to ``c_s - c_s' >= 1``, for a Gram matrix
    ``G = E E^T`` of independent rows: solvable for an idealised ``G`` (the infinite-width limit) without
    embeddings. Returns the scores (NaN for tokens in no pair) and ``||p||``. Introduced in chapter 05."""
    import cvxpy as cp

    solver = installed_solver(solver)
    G = gram.detach().cpu().numpy().astype(np.float64)
    if G.shape[0] != G.shape[1] or pairs.max() >= G.shape[0] or pairs.min() < 0:
        raise InvalidArgumentError("gram must be square and cover every token of the pairs")
    cycle = unchecked(find_cycle)(pairs)
    if cycle is not None:
        raise InfeasibleSVMError(f"the selection is infeasible: cycle {cycle}", cycle=cycle)
    tokens = np.unique(pairs)
    local = np.searchsorted(tokens, pairs)
    sub = G[np.ix_(tokens, tokens)]
    if not np.allclose(sub, sub.T, rtol=1e-10, atol=1e-12 * max(1.0, float(np.abs(sub).max()))):
        raise InvalidArgumentError("gram must be symmetric (a Gram matrix E E^T)")
    try:
        Ginv = np.linalg.inv(sub)
        Ginv = (Ginv + Ginv.T) / 2
        L = np.linalg.cholesky(Ginv)  # c^T Ginv c = ||L^T c||^2
    except np.linalg.LinAlgError:
        raise InvalidArgumentError(
            "gram is singular or not positive definite on the tokens of the pairs: the score-space form needs "
            "linearly independent embeddings (d >= the number of tokens); use max_margin on E instead"
        ) from None
    c = cp.Variable(len(tokens))
    prob = cp.Problem(cp.Minimize(cp.sum_squares(L.T @ c)), [c[local[:, 0]] - c[local[:, 1]] >= 1])
    opts = dict(tol_gap_abs=1e-10, tol_gap_rel=1e-10, tol_feas=1e-10) if solver == "CLARABEL" else {}
    _solve(prob, solver, **opts)
    if prob.status not in ("optimal", "optimal_inaccurate"):
        raise SolverError(f"the score-space SVM solve stopped with status {prob.status!r}: try solver='SCS'")
    out = np.full(G.shape[0], np.nan)
    out[tokens] = c.value
    return torch.from_numpy(out), float(np.sqrt(max(prob.value, 0.0)))


@declare(
    E=EMBEDDINGS,
    result=Instance(SVMResult, what="an SVMResult from max_margin"),
    active_tol=Real(min=0.0, max=1.0, min_inclusive=False, max_inclusive=False),
)
def kkt_residual(E: torch.Tensor, result: SVMResult, active_tol: float = 1e-6) -> tuple[float, np.ndarray]:
    """``(relative residual, lambda)`` of the KKT conditions at ``result.p``: ``p_mm`` as a non-negative combination
    of the active pairs' rows plus any combination of the ties', fitted by non-negative least squares. Near 0 at
    the optimum, of order one for a feasible ``p`` that is not optimal. Introduced in chapter 05."""
    from scipy.optimize import nnls

    if E.shape[1] != result.p.shape[0] or E.shape[0] <= int(result.pairs.max()):
        raise InvalidArgumentError("E must be the |S| x d matrix the SVM was solved for")
    En = E.detach().cpu().numpy().astype(np.float64)
    pv = result.p.detach().cpu().numpy().astype(np.float64)
    M = En[result.pairs[:, 0]] - En[result.pairs[:, 1]]
    active = M @ pv < 1 + active_tol
    if not active.any():
        return 1.0, np.zeros(0)
    Tm = En[result.ties[:, 0]] - En[result.ties[:, 1]] if len(result.ties) else np.zeros((0, En.shape[1]))
    k = int(active.sum())
    coef, resid = nnls(np.vstack([M[active], Tm, -Tm]).T, pv)
    return float(resid / np.linalg.norm(pv)), coef[:k]


@declare(
    batch=Batch(),
    important=Tensor("bool", shape=("S",)),
    widths=Numbers(int, min=1),
    seeds=Numbers(int, min=0),
    eta0=Real(min=0.0, min_inclusive=False),
)
def closed_form_by_width(batch: RaggedBatch, important, widths, seeds, eta0: float):
    """How close ``E_s^T p_mm`` comes to chapter 05's closed form as the width grows: per width and seed, one
    step of size ``eta0`` and :func:`max_margin` for the ``important`` tokens' selection; one row each with
    ``max_dev``, the mean scores ``imp_mean``, ``irr_mean`` and ``norm``."""
    import pandas as pd

    from ..models.attention import AttentionModel
    from ..training.phases import one_step

    m_imp, m_irr = int(important.sum()), int((~important).sum())
    if m_imp == 0 or m_irr == 0:
        raise InvalidArgumentError("important must mark some tokens and leave some irrelevant")
    closed = torch.where(important, m_irr / (m_imp + m_irr), -m_imp / (m_imp + m_irr)).double()
    pairs = selection_pairs(batch, important.to(batch.device)[batch.ids])
    rows = []
    for d in widths:
        for s in seeds:
            E = one_step(AttentionModel.init(batch.vocab_size, d, seed=s), batch, eta0).E
            res = max_margin(E, pairs)
            c = E @ res.p
            rows.append(
                dict(
                    d=d,
                    seed=s,
                    max_dev=float((c - closed).abs().max()),
                    imp_mean=float(c[important].mean()),
                    irr_mean=float(c[~important].mean()),
                    norm=res.norm,
                )
            )
    return pd.DataFrame(rows)
