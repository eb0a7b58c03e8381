"""Phase 2's implicit steps in many-digit arithmetic (mpmath), for stiff flows followed to very large ``t``.

Where part of the scores settles at a finite optimum while the rest diverges (:func:`implicit_flow`), the settled
sequences keep loss terms of order 1 whose gradients cancel, while the gradient along the diverging direction
falls like ``1/t``. In float64 that direction's gradient drowns in the rounding of the cancelling terms once
``t`` passes about ``1e16``: Newton's method for an implicit step can no longer reduce its residual, at any step
size. With ``digits`` significant digits the cancellation is exact to that many digits, and the flow can be
followed to ``t`` of about ``10 ** (3 * digits / 4)`` (``1e90`` with 120 digits): Newton's residual is asked to be
``10 ** -(digits / 4)`` of the gradient (at most ``1e-30``).

Each backward Euler step solves ``(p' - p) / h + grad L(p') = 0`` for ``p'`` by Newton's method, with the
Hessian of the loss in ``p`` in closed form (``E^T H_c E``, ``H_c`` the Hessian in the scores, sequence by
sequence). Pure Python: a gradient of 1,600 entries takes about 0.1 s, a Hessian (d = 32, |S| = 36) about
0.6 s, so this is for small problems only (chapter 4's synthetic data).

Introduced in chapter 04.
"""

from __future__ import annotations

import numpy as np
import torch

from ..data.batch import RaggedBatch
from ..errors import SolverError


class PreciseLoss:
    """The binary model's phase-2 loss ``L(p)`` (E and v frozen) and its first two derivatives in ``p``, in
    ``digits``-digit arithmetic; ``E``, ``v`` and the counts are converted exactly from their float64 values."""

    def __init__(self, E: torch.Tensor, v: torch.Tensor, batch: RaggedBatch, digits: int):
        import mpmath

        self.ctx = mpmath.MPContext()
        self.ctx.dps = digits
        mpf = self.ctx.mpf
        E64 = E.detach().to(torch.float64).cpu().numpy()
        v64 = v.detach().to(torch.float64).cpu().numpy()
        self.S, self.d = E64.shape
        self.E = [[mpf(float(x)) for x in row] for row in E64]
        vv = [mpf(float(x)) for x in v64]
        self.w = [self.ctx.fsum(e * x for e, x in zip(row, vv, strict=True)) for row in self.E]
        dt = batch.to("cpu").distinct()
        ids, counts = dt.ids.tolist(), dt.counts.tolist()
        offsets = [*dt.offsets.tolist(), len(ids)]
        labels = batch.labels.tolist()
        self.seqs = [
            (ids[offsets[i] : offsets[i + 1]], [mpf(float(c)) for c in counts[offsets[i] : offsets[i + 1]]], labels[i])
            for i in range(batch.n)
        ]
        self.inv_n = mpf(1) / batch.n
        self.evaluations = 0

    def vector(self, x) -> list:
        """A float64 array (or tensor) as a list of this context's numbers."""
        return [self.ctx.mpf(float(a)) for a in np.asarray(x, dtype=np.float64).ravel()]

    def scores(self, p: list) -> list:
        fsum = self.ctx.fsum
        return [fsum(e * x for e, x in zip(row, p, strict=True)) for row in self.E]

    def __call__(self, p: list, hessian: bool = False):
        """``(loss, grad, H)``: the loss, its gradient in ``p`` (a list) and, with ``hessian``, its Hessian (a list
        of rows; else None)."""
        self.evaluations += 1
        ctx, S, d = self.ctx, self.S, self.d
        fsum, exp = ctx.fsum, ctx.exp
        c = self.scores(p)
        w = self.w
        A = [ctx.zero] * S
        H: list = [[ctx.zero] * S for _ in range(S)] if hessian else []
        losses = []
        for tok, cnt, y in self.seqs:
            cs = [c[s] for s in tok]
            top = max(cs)
            e = [k * exp(x - top) for k, x in zip(cnt, cs, strict=True)]
            Z = fsum(e)
            q = [x / Z for x in e]
            f = fsum(a * w[s] for a, s in zip(q, tok, strict=True))
            z = y * f
            ez = exp(z)
            losses.append(ctx.log1p(1 / ez))  # log(1 + e^-z)
            l1 = -1 / (1 + ez)  # the loss's derivative in z
            g = [a * (w[s] - f) for a, s in zip(q, tok, strict=True)]  # df / dc
            for j, s in enumerate(tok):
                A[s] += self.inv_n * l1 * y * g[j]
            if hessian:
                l2 = ez / (1 + ez) ** 2
                for j, sj in enumerate(tok):
                    uj = w[sj] - f
                    Hj = H[sj]
                    for k, sk in enumerate(tok):
                        dg = -q[j] * q[k] * (uj + w[sk] - f)  # d g_j / d c_k
                        if j == k:
                            dg += q[j] * uj
                        Hj[sk] += self.inv_n * (l2 * g[j] * g[k] + l1 * y * dg)
        grad = [fsum(self.E[s][k] * A[s] for s in range(S) if A[s]) for k in range(d)]
        if not hessian:
            return fsum(losses) * self.inv_n, grad, None
        HE = [[fsum(Hs[r] * self.E[r][k] for r in range(S) if Hs[r]) for k in range(d)] for Hs in H]
        Hp = [[ctx.zero] * d for _ in range(d)]
        for a in range(d):
            for b in range(a, d):
                Hp[a][b] = Hp[b][a] = fsum(self.E[s][a] * HE[s][b] for s in range(S))
        return fsum(losses) * self.inv_n, grad, Hp


def _solve_linear(M: list, r: list) -> list | None:
    """``x`` with ``M x = r`` by Gaussian elimination with partial pivoting (``M`` and ``r`` are overwritten);
    None when ``M`` is singular."""
    n = len(r)
    for k in range(n):
        piv = max(range(k, n), key=lambda i: abs(M[i][k]))
        if not M[piv][k]:
            return None
        if piv != k:
            M[k], M[piv] = M[piv], M[k]
            r[k], r[piv] = r[piv], r[k]
        Mk, inv = M[k], 1 / M[k][k]
        for i in range(k + 1, n):
            Mi = M[i]
            f = Mi[k] * inv
            if f:
                for j in range(k + 1, n):
                    Mi[j] -= f * Mk[j]
                r[i] -= f * r[k]
    x = [r[0]] * n
    for k in range(n - 1, -1, -1):
        x[k] = (r[k] - sum((M[k][j] * x[j] for j in range(k + 1, n)), r[k] * 0)) / M[k][k]
    return x


def backward_euler(
    loss: PreciseLoss,
    p0,
    t_max: float,
    marks: list[float],
    record,
    first_step: float,
    growth: float,
    max_evaluations: int | None,
) -> list:
    """Backward Euler steps of ``dp/dt = -grad L`` from ``p0`` (float64) to ``t_max``: the step ``h`` starts at
    ``first_step``, doubles up to ``(growth - 1) t``, and is cut by 4 after a solve that fails. ``record(step, t,
    p)`` is called with ``p`` in float64 at the first step past each of ``marks`` (increasing). Returns ``p``
    at ``t_max`` (this context's numbers)."""
    ctx = loss.ctx
    mpf = ctx.mpf
    d = loss.d
    tol = mpf(10) ** (-min(30, ctx.dps // 4))  # Newton's residual, relative to the gradient

    def solve(p, h):
        x = list(p)
        for _ in range(12):
            _, g, H = loss(x, hessian=True)
            R = [(a - b) / h + gi for a, b, gi in zip(x, p, g, strict=True)]
            if ctx.fsum(r * r for r in R) <= tol**2 * ctx.fsum(gi * gi for gi in g):
                return x
            inv_h = 1 / h
            for k in range(d):
                H[k][k] += inv_h
            dx = _solve_linear(H, [-r for r in R])
            if dx is None:
                return None
            x = [a + b for a, b in zip(x, dx, strict=True)]
        return None

    p = loss.vector(p0)
    t, h, step = mpf(0), mpf(first_step), 0
    T = mpf(t_max)
    marks = list(marks)
    while t < T:
        if max_evaluations is not None and loss.evaluations > max_evaluations:
            raise SolverError(
                f"implicit_flow ({ctx.dps} digits) reached only t = {float(t):.3g} of {t_max:.3g} in "
                f"{max_evaluations} evaluations, with steps of {float(h):.3g}"
            )
        h = min(h, T - t)
        x = solve(p, h)
        if x is None:
            h /= 4
            if h < first_step * 1e-6:
                raise SolverError(
                    f"implicit_flow ({ctx.dps} digits): Newton's method stalls at t = {float(t):.3g} even with a "
                    f"step of {float(h):.3g}: more digits may be needed, or the data are degenerate"
                )
            continue
        p, t, step = x, t + h, step + 1
        if marks and (t >= marks[0] or t >= T):
            while marks and marks[0] <= t:
                marks.pop(0)
            record(step, float(t), np.array([float(a) for a in p]))
        h = min(2 * h, max((growth - 1) * t, mpf(first_step)))
    return p
