"""Training loops: phase-2 GD and normalised GD, the ODE integrator, joint Adam."""

import numpy as np
import pytest
import torch

import tokensel as ts
from tokensel.training import phases
from tokensel.training.phases import cosine, implicit_flow


def _phase1(seed=0, d=24):
    data = ts.synthetic.assumption1_pairs(60, 2, 10, length=6, seed=seed)
    m0 = ts.AttentionModel.init(data.batch.vocab_size, d, seed=seed)
    return data, ts.one_step(m0, data.batch, eta0=20.0)


def test_train_p_decreases_loss_and_grows_norm():
    data, m = _phase1()
    traj = ts.train_p(m, data.batch, lr=1.0, steps=400, progress=False)
    assert traj.loss[-1] < traj.loss[0]
    assert np.all(np.diff(traj.loss) <= 1e-12)  # small-step GD on a smooth loss never goes up
    assert traj.norm_p[-1] > traj.norm_p[0] and traj.t[-1] == pytest.approx(400.0) and traj.stopped == "steps"
    df = traj.to_frame()
    assert list(df.columns[:6]) == ["step", "t", "loss", "norm_p", "grad_norm", "cos_ref"]


def test_normalized_gd_moves_lr_per_step():
    data, m = _phase1()
    p0 = m.p.clone()
    ts.train_p(m, data.batch, lr=0.5, steps=1, method="normalized", progress=False)
    assert float((m.p - p0).norm()) == pytest.approx(0.5)


def test_gradient_flow_matches_small_step_gd():
    data, m = _phase1(d=16)
    m_gd, m_flow = m.copy(), m.copy()
    ts.train_p(m_gd, data.batch, lr=0.01, steps=2000, progress=False)  # t = 20
    traj = ts.gradient_flow(m_flow, data.batch, t_max=20.0)
    assert ts.cosine(m_gd.p, m_flow.p) > 1 - 1e-6 and float((m_gd.p - m_flow.p).norm() / m_flow.p.norm()) < 1e-3
    assert traj.t[-1] == pytest.approx(20.0)


def test_underflow_stops_cleanly():
    data, m = _phase1()
    sel = ts.statistics.selection(data.batch, torch.tensor(np.abs(data.planted), dtype=torch.float64))
    svm = ts.max_margin(m.E, ts.selection_pairs(data.batch, sel))
    m.p.copy_(svm.p * 800)  # score gaps >= 800: every off-top softmax weight underflows
    traj = ts.train_p(m, data.batch, lr=1.0, steps=100, progress=False)
    assert traj.stopped == "underflow" and len(traj) == 1 and np.isfinite(traj.loss[-1])


def test_max_norm_stop_and_reference_cosine():
    data, m = _phase1()
    ref = m.p.clone() + 1.0
    traj = ts.train_p(m, data.batch, lr=50.0, steps=10_000, max_norm=3.0, reference=ref, progress=False)
    assert traj.stopped == "max_norm" and traj.norm_p[-1] > 3.0 and np.isfinite(traj.cos_ref).all()


def test_train_joint_reduces_loss():
    data = ts.synthetic.independent_tokens(200, 30, length=10, delta=0.8, seed=1)
    m = ts.AttentionModel.init(30, 16, seed=0)
    test = ts.synthetic.independent_tokens(100, 30, length=10, delta=0.8, seed=2).batch
    settings = ts.TrainSettings(steps=60, lr=0.05, eval_every=20, progress=False)
    traj = ts.train_joint(m, data.batch, settings, test_batch=test)
    assert traj.loss[-1] < 0.5 * traj.loss[0]
    assert traj.step == [0, 20, 40, 60] and traj.extra["test_acc"][-1] > 0.8
    assert m.E.grad is None


def test_record_steps():
    r = ts.training.phases.record_steps(10_000, 50)
    assert r[0] == 0 and r[-1] == 10_000 and np.all(np.diff(r) > 0) and len(r) <= 52


def test_monitor_records_extra_columns():
    data, m = _phase1()
    traj = ts.gradient_flow(m.copy(), data.batch, t_max=10.0, records=5, monitor=lambda p: {"p0": p[0]})
    df = traj.to_frame()
    assert "p0" in df and len(df) == len(traj)
    traj = ts.train_p(m, data.batch, lr=0.1, steps=10, records=3, monitor=lambda p: {"n": p.norm()}, progress=False)
    assert np.allclose(traj.extra["n"], traj.norm_p)


def test_implicit_flow_follows_the_flow_and_settles_the_stiff_part():
    data = ts.synthetic.assumption1_pairs(20, 2, 8, length=5, seed=0)
    m = ts.one_step(ts.AttentionModel.init(data.batch.vocab_size, 24, seed=0), data.batch, 50.0)
    a, b = m.copy(), m.copy()
    fa = implicit_flow(a, data.batch, 1e6, records=4).to_frame()
    ts.gradient_flow(b, data.batch, 1e6, records=4)
    assert cosine(a.p, b.p) > 0.999 and abs(float(a.p.norm()) / float(b.p.norm()) - 1) < 0.05
    assert fa.t.iloc[-1] == 1e6 and fa.loss.is_monotonic_decreasing
    # two tokens selected together: their score gap settles at ln(-u_b / u_a), where the shared sequences' output is 0
    co = ts.synthetic.co_selected(16, pools=(4, 2, 2), length=5, seed=0)
    m = ts.one_step(ts.AttentionModel.init(co.batch.vocab_size, 16, seed=0), co.batch, 100.0)
    u = m.values()
    implicit_flow(m, co.batch, 1e6, records=2)
    assert abs(float(m.scores()[0] - m.scores()[1]) - float(torch.log(-u[1] / u[0]))) < 1e-4
    assert float(m.p.norm()) > 5
    # a budget of gradient evaluations: spent, it raises, naming how far the flow came, and p is left as it was
    p0 = m.p.clone()
    with pytest.raises(ts.errors.SolverError, match=r"reached only t = .* in 50 gradient evaluations"):
        implicit_flow(m, co.batch, 1e6, max_evaluations=50)
    assert torch.equal(m.p, p0)


def test_gradient_flow_stops_where_the_integrator_fails_when_asked(monkeypatch):
    """A flow the integrator cannot follow raises; on_failure="stop" ends it at the last time, reason in ``stopped``."""
    import scipy.integrate

    real = scipy.integrate.solve_ivp

    def failing(*args, **kwargs):
        sol = real(*args, **kwargs)
        half = len(sol.t) // 2
        sol.t, sol.y, sol.status, sol.message = sol.t[:half], sol.y[:, :half], -1, "simulated failure"
        return sol

    monkeypatch.setattr(scipy.integrate, "solve_ivp", failing)
    data, model = _phase1()
    batch = data.batch
    with pytest.raises(ts.errors.SolverError, match="simulated failure"):
        ts.gradient_flow(model.copy(), batch, t_max=1e6, records=20)
    traj = ts.gradient_flow(model, batch, t_max=1e6, records=20, on_failure="stop")
    frame = traj.to_frame()
    assert traj.stopped.startswith("solver failed after t = ") and "simulated failure" in traj.stopped
    assert 0 < frame.t.iloc[-1] < 1e6
    assert float(model.p.norm()) == pytest.approx(frame.norm_p.iloc[-1], rel=1e-12)


def test_gradient_flow_stops_a_crawling_integration_at_its_evaluation_budget():
    """``max_evaluations`` makes a crawling flow a SolverError, p left as it was; a budget kept changes nothing."""
    data, model = _phase1()
    p0 = model.p.clone()
    with pytest.raises(ts.errors.SolverError, match="in 30 gradient evaluations: the flow is probably stiff"):
        ts.gradient_flow(model, data.batch, t_max=1e6, records=20, max_evaluations=30)
    assert torch.equal(model.p, p0)
    free = ts.gradient_flow(model.copy(), data.batch, t_max=1e6, records=20)
    within = model.copy()
    bounded = ts.gradient_flow(within, data.batch, t_max=1e6, records=20, max_evaluations=10**6)
    assert free.to_frame().equals(bounded.to_frame())


def test_small_flows_run_torch_on_one_thread_and_restore_its_thread_count(monkeypatch):
    """A small flow runs torch on one thread and gives the caller's count back (also on error); same trajectory."""
    data, m = _phase1()
    seen = []

    def threads(p):
        seen.append(torch.get_num_threads())
        return {}

    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        a, b = m.copy(), m.copy()
        fa = ts.train_p(a, data.batch, lr=1.0, steps=50, monitor=threads, progress=False).to_frame()
        assert set(seen) == {1} and torch.get_num_threads() == 2
        seen.clear()
        phases.implicit_flow(m.copy(), data.batch, 10.0, records=3, monitor=threads)
        assert set(seen) == {1} and torch.get_num_threads() == 2
        seen.clear()
        monkeypatch.setattr(phases, "SMALL_E", m.E.numel() - 1)  # this E counted as large
        fb = ts.train_p(b, data.batch, lr=1.0, steps=50, monitor=threads, progress=False).to_frame()
        assert set(seen) == {2} and torch.get_num_threads() == 2
        assert fa.equals(fb) and torch.equal(a.p, b.p)
        monkeypatch.undo()
        with pytest.raises(ZeroDivisionError), phases._one_thread_if_small(m.E, data.batch):
            assert torch.get_num_threads() == 1
            raise ZeroDivisionError
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)
