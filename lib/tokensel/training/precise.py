"""Phase 2's implicit steps in many-digit arithmetic (mpmath), for stiff flows followed to very large ``t``.

On a stiff flow (:func:`tokensel.implicit_flow`) the settled sequences' loss terms cancel while the gradient along
the diverging direction falls like ``1/t``: past ``t`` of about ``1e16`` it drowns in float64's rounding and Newton's
method stalls at any step. With ``digits`` digits the flow is followed to ``t`` of about ``10 ** (3 * digits / 4)``.
Pure Python (a Hessian at d = 32, |S| = 36 takes about 0.6 s): small problems only.
"""

from __future__ import annotations

import numpy as np
import torch

from ..data.batch import RaggedBatch


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

    def __call__(self, p: list, hessian: bool = False):
        """``(loss, grad, H)``: the loss, its gradient in ``p`` (a list) and, with ``hessian``, its Hessian (a list
        of rows; else None)."""
        self.evaluations += 1
        ctx, S, d = self.ctx, self.S, self.d
        fsum, exp = ctx.fsum, ctx.exp
        c = [fsum(e * x for e, x in zip(row, p, strict=True)) for row in self.E]
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


def implicit_steps(E: torch.Tensor, v: torch.Tensor, batch: RaggedBatch, digits: int):
    """``(step, evaluations)`` for :func:`tokensel.implicit_flow` in ``digits`` digits: ``step(p, h)`` solves ``(p' -
    p) / h + grad L(p') = 0`` by Newton's method with the closed-form Hessian, to a residual of ``10 ** -(digits /
    4)`` of the gradient (at most ``1e-30``), and returns ``p'`` (this context's numbers; ``p`` may be a float64
    tensor), or None when it does not converge; ``evaluations()`` counts the gradients and Hessians."""
    loss = PreciseLoss(E, v, batch, digits)
    ctx = loss.ctx
    tol = ctx.mpf(10) ** (-min(30, ctx.dps // 4))

    def step(p, h: float):
        p = loss.vector(p) if isinstance(p, torch.Tensor) else p
        inv_h, x = 1 / ctx.mpf(h), list(p)
        for _ in range(12):
            _, g, H = loss(x, hessian=True)
            R = [(a - b) * inv_h + gi for a, b, gi in zip(x, p, g, strict=True)]
            if ctx.fsum(r * r for r in R) <= tol**2 * ctx.fsum(gi * gi for gi in g):
                return x
            for k in range(loss.d):
                H[k][k] += inv_h
            dx = _solve_linear(H, [-r for r in R])
            if dx is None:
                return None
            x = [a + b for a, b in zip(x, dx, strict=True)]
        return None

    return step, lambda: loss.evaluations
