"""Phase 2's implicit steps in many digits (tokensel.training.precise): the loss, its gradient and Hessian in
mpmath against float64 and finite differences, the linear solve, and implicit_flow(digits=...)."""

import re

import numpy as np
import pytest
import torch

import tokensel as ts
from tokensel.models.gradients import p_gradient
from tokensel.training.phases import implicit_flow
from tokensel.training.precise import PreciseLoss, _solve_linear


def _co_model():
    co = ts.synthetic.co_selected(16, pools=(4, 2, 2), length=5, seed=0)
    return co, ts.one_step(ts.AttentionModel.init(co.batch.vocab_size, 16, seed=0), co.batch, 100.0)


def test_the_loss_its_gradient_and_hessian_in_many_digits():
    co, m = _co_model()
    ts.gradient_flow(m, co.batch, 10.0, records=2)
    loss = PreciseLoss(m.E, m.v, co.batch, digits=50)
    p = loss.vector(m.p)
    value, grad, H = loss(p, hessian=True)
    f64_loss, f64_grad = p_gradient(m.E, m.p, m.E @ m.v, co.batch, True)
    assert abs(float(value) - float(f64_loss)) <= 1e-13 * float(f64_loss)
    assert np.allclose([float(g) for g in grad], f64_grad.numpy(), rtol=1e-10, atol=1e-15)
    # the Hessian against central differences of the gradient, in the same digits
    eps = loss.ctx.mpf("1e-20")
    for k in (0, 7):
        up, down = list(p), list(p)
        up[k] += eps
        down[k] -= eps
        fd = [(a - b) / (2 * eps) for a, b in zip(loss(up)[1], loss(down)[1], strict=True)]
        assert max(abs(float(a - H[j][k])) for j, a in enumerate(fd)) <= 1e-25
    assert all(H[a][b] == H[b][a] for a in range(16) for b in range(16))
    assert loss.evaluations == 5 and loss(p)[2] is None


def test_the_linear_solve():
    rng = np.random.default_rng(0)
    M = rng.normal(size=(6, 6))
    r = rng.normal(size=6)
    x = _solve_linear([list(row) for row in M], list(r))
    assert np.allclose(M @ np.array(x), r, atol=1e-12)
    assert _solve_linear([[1.0, 2.0], [2.0, 4.0]], [1.0, 2.0]) is None  # singular


@pytest.mark.slow(seconds=15)
def test_implicit_flow_in_many_digits_agrees_and_follows_a_stiff_flow_past_float64():
    """With ``digits`` backward Euler follows float64's path while both solve, and goes on where float64 stalls."""
    co, m = _co_model()
    u = m.values()
    a, b = m.copy(), m.copy()
    fa = implicit_flow(a, co.batch, 10.0, records=3).to_frame()
    fb = implicit_flow(b, co.batch, 10.0, records=3, digits=30).to_frame()
    assert fa.t.tolist() == fb.t.tolist()
    assert float((a.p - b.p).norm()) < 1e-10 * float(a.p.norm())
    # float64: the shared sequences' loss terms (of order 1) cancel below its 16 digits, the solves stall at t << 1e16
    f64 = m.copy()
    with pytest.raises(ts.errors.SolverError, match="reached only t =") as stalled:
        implicit_flow(f64, co.batch, 1e16, max_evaluations=3000)
    reached = float(re.search(r"reached only t = (\S+) ", str(stalled.value)).group(1))
    assert reached < 1e12  # 3000 evaluations, and its steps stay far below t
    many = m.copy()
    traj = implicit_flow(many, co.batch, 1e16, records=3, digits=30)
    assert traj.t[-1] == 1e16 and traj.method == "implicit flow (30 digits)"
    assert traj.extra["nfev"][-1] < 3000  # in fewer evaluations (the Hessians' included)
    gap = float(many.scores()[0] - many.scores()[1])
    assert abs(gap - float(torch.log(-u[1] / u[0]))) < 1e-9  # the settled gap, to many more digits than before
    assert float(many.p.norm()) > 20  # while the rest diverges like ln t
