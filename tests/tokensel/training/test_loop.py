"""tokensel.training.loop: the one Adam loop every model trains through (evaluation, divergence, gradients)."""

import math

import numpy as np
import pytest
import torch

import tokensel as ts
from tokensel.errors import DivergenceError, InvalidParameterError
from tokensel.training import loop, phases


class _Quadratic:
    """A stand-in model: minimise ||p - 1||^2 / 2 by Adam through the loop's step-function interface."""

    def __init__(self):
        self.p = torch.zeros(3, dtype=torch.float64)

    def loss(self, batch):
        return float(((self.p - 1) ** 2).sum() / 2)

    def accuracy(self, batch):
        return 0.5

    def validate(self):
        return self


def _step(model, blow_up_at=None):
    calls = []

    def step(take_grad):
        calls.append(take_grad)
        loss = float(((model.p.detach() - 1) ** 2).sum() / 2)
        if blow_up_at is not None and len(calls) > blow_up_at:
            loss = math.inf
        if take_grad:
            model.p.grad = (model.p - 1).detach()
        return loop.StepResult(loss, 1.0, float((model.p.detach() - 1).norm()), True)

    return step, calls


def test_adam_records_evaluates_and_clears_gradients():
    model = _Quadratic()
    step, calls = _step(model)
    settings = ts.TrainSettings(steps=40, lr=0.1, eval_every=10, progress=False)
    traj = loop.adam(model, [model.p], step, settings, method="adam", label="q", test_batch=object(), autograd=True)
    assert traj.step == [0, 10, 20, 30, 40] and traj.loss[-1] < traj.loss[0]
    assert traj.extra["test_loss"][-1] == pytest.approx(traj.loss[-1]) and traj.extra["train_acc"] == [1.0] * 5
    assert calls == [True] * 40 + [False]  # no gradient for the final evaluation
    assert model.p.grad is None and not model.p.requires_grad


def test_a_diverging_step_stops_before_the_update():
    model = _Quadratic()
    step, _ = _step(model, blow_up_at=5)
    settings = ts.TrainSettings(steps=40, lr=0.1, eval_every=10, progress=False)
    with pytest.raises(DivergenceError, match="diverged at step 5") as info:
        loop.adam(model, [model.p], step, settings, method="adam", label="q", autograd=True)
    assert model.p.grad is None and not model.p.requires_grad and info.value.step == 5
    # the parameters of step 5: five updates of p <- p - 0.1 * Adam's direction (each coordinate moved by <= 0.1)
    assert torch.all((model.p > 0.3) & (model.p <= 0.5 + 1e-12))


def test_a_joint_step_whose_loss_or_E_gradient_is_not_finite_stops_before_the_update():
    batch = ts.synthetic.independent_tokens(80, 30, length=8, delta=0.8, seed=1).batch
    model = ts.AttentionModel.init(30, 8, seed=0, dtype=torch.float32)
    with torch.no_grad():
        model.v.fill_(3e38)  # finite, but the values E v are not
    E0, p0 = model.E.clone(), model.p.clone()
    with pytest.raises(DivergenceError, match="diverged at step 0: the loss or its gradient is not finite"):
        ts.train_joint(model, batch, ts.TrainSettings(steps=5, progress=False), params=("E", "p"))
    assert torch.equal(model.E, E0) and torch.equal(model.p, p0)
    # E's gradient A p^T + B v^T is never formed: the bound on its factors is what says it would overflow
    big, small = torch.full((3,), 1e20), torch.full((2, 4), 1e10)
    assert not phases._finite_product_bound((big, big), (small, small)) and phases._finite_product_bound((small, small))
    assert not phases._finite_product_bound((torch.tensor([float("nan")]), small))


# --- issue 25: E's Adam step from the gradient's factors, never forming the |S| x d gradient -----------------


@pytest.mark.parametrize("rank", [2, 5])  # the binary model's A p^T + B v^T; the four-class model's
@pytest.mark.parametrize("dtype, tol", [(torch.float64, 1e-14), (torch.float32, 1e-6)])
def test_the_low_rank_adam_step_is_torchs_fused_adam_on_the_formed_gradient(dtype, tol, rank):
    g = torch.Generator().manual_seed(0)
    E0 = torch.randn(60, 17, generator=g, dtype=dtype)
    formed, factored = E0.clone(), E0.clone()
    o1 = torch.optim.Adam([formed], lr=3e-2, fused=True)
    o2 = torch.optim.Adam([factored], lr=3e-2, fused=True)
    for _ in range(30):
        AB, PV = torch.randn(60, rank, generator=g, dtype=dtype), torch.randn(rank, 17, generator=g, dtype=dtype)
        formed.grad = AB @ PV
        o1.step()
        loop.low_rank_adam(o2, factored, AB, PV)
    scale = float(formed.abs().max())
    assert float((formed - factored).abs().max()) <= tol * scale
    s1, s2 = o1.state_dict()["state"][0], o2.state_dict()["state"][0]
    assert s1.keys() == s2.keys() and s1["step"].dtype == s2["step"].dtype and float(s2["step"]) == 30
    for k in ("exp_avg", "exp_avg_sq"):
        assert float((s1[k] - s2[k]).abs().max()) <= tol * float(s1[k].abs().max())


def test_train_joint_from_the_factors_equals_the_formed_gradient(monkeypatch):
    batch = ts.synthetic.assumption1_pairs(40, 3, 20, length=6, seed=0).batch
    settings = ts.TrainSettings(steps=25, lr=3e-2, eval_every=5, progress=False)
    runs = {}
    for factored in (True, False):
        monkeypatch.setattr(loop, "low_rank_applies", (lambda E: True) if factored else (lambda E: False))
        model = ts.AttentionModel.init(batch.vocab_size, 16, seed=1)
        traj = ts.train_joint(model, batch, settings, params=("E", "p", "v"))
        runs[factored] = (model, traj.to_frame())
    (m1, h1), (m2, h2) = runs[True], runs[False]
    assert float((m1.E - m2.E).abs().max()) <= 1e-12 * float(m2.E.abs().max())
    assert float((m1.p - m2.p).abs().max()) <= 1e-12 * float(m2.p.abs().max())
    assert (h1.loss - h2.loss).abs().max() <= 1e-12


@pytest.mark.parametrize("rank", [2, 5])
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_the_adam_pass_leaves_the_next_scores_bit_for_bit(dtype, rank):
    """A ScoresAfter leaves E's update unchanged and gives E_new [p, V] bitwise as scores_values does."""
    g = torch.Generator().manual_seed(3)
    E0 = torch.randn(70, 19, generator=g, dtype=dtype)
    plain, fused = E0.clone(), E0.clone()
    o1, o2 = (torch.optim.Adam([t], lr=3e-2, fused=True) for t in (plain, fused))
    for _ in range(4):
        AB, PV = torch.randn(70, rank, generator=g, dtype=dtype), torch.randn(rank, 19, generator=g, dtype=dtype)
        nxt = torch.randn(19, rank, generator=g, dtype=dtype)
        after = loop.ScoresAfter(lambda nxt=nxt: nxt)
        loop.low_rank_adam(o1, plain, AB, PV)
        loop.low_rank_adam(o2, fused, AB, PV, after)
        assert torch.equal(plain, fused)
        expected = ts.models.kernels.scores_values(fused.numpy(), nxt.numpy())
        got = after.take()
        assert got is not None and got.dtype == dtype and np.array_equal(got.numpy(), expected)
        assert after.take() is None  # used once
    for k in ("exp_avg", "exp_avg_sq"):
        assert torch.equal(o1.state[plain][k], o2.state[fused][k])


@pytest.mark.parametrize("classes", [None, 4])
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_train_joint_with_the_scores_of_the_adam_pass_is_bitwise_the_same(monkeypatch, dtype, classes):
    """Scores formed by E's Adam pass replace the next pass over E without changing a bit of the run."""
    data = ts.synthetic.assumption1_pairs(60, 3, 20, length=6, seed=0).batch
    batch = data
    if classes is not None:
        batch = ts.RaggedBatch(
            data.ids, data.offsets, torch.arange(data.n) % classes, data.vocab_size, num_classes=classes
        )
    settings = ts.TrainSettings(steps=12, lr=3e-2, eval_every=4, progress=False)
    runs, used = {}, []

    class Unused(loop.ScoresAfter):
        def take(self):
            super().take()
            return None

    class Counted(loop.ScoresAfter):
        def take(self):
            value = super().take()
            used.append(value is not None)
            return value

    for kind in (Counted, Unused):
        monkeypatch.setattr(loop, "ScoresAfter", kind)
        model = ts.AttentionModel.init(batch.vocab_size, 16, seed=1, dtype=dtype)
        if classes is not None:
            model = ts.MultiClassAttentionModel.init(batch.vocab_size, 16, classes, seed=1, dtype=dtype)
        traj = ts.train_joint(model, batch, settings, params=("E", "p", "v"), test_batch=batch)
        runs[kind] = (model, traj.to_frame())
    (m1, h1), (m2, h2) = runs[Counted], runs[Unused]
    assert used == [False] + [True] * settings.steps  # every step after the first read the Adam pass's scores
    for name in ("E", "p", "v"):
        assert torch.equal(getattr(m1, name), getattr(m2, name)), name
    assert h1.equals(h2)


@pytest.mark.parametrize("K", [None, 3])
def test_the_evaluation_finds_a_nan_of_E_in_its_scores_and_agrees_with_loss_and_accuracy(K):
    """The evaluation skips E's finiteness pass on the fused path yet refuses a NaN in E by name."""
    g = np.random.default_rng(1)
    seqs = [g.integers(0, 20, size=g.integers(1, 9)) for _ in range(30)]
    y = g.choice([-1, 1], size=30) if K is None else g.integers(0, K, size=30)
    batch = ts.RaggedBatch.from_sequences(seqs, y, vocab_size=20, num_classes=K)
    model = ts.AttentionModel.init(20, 8, seed=0) if K is None else ts.MultiClassAttentionModel.init(20, 8, K, seed=0)
    loss, acc = loop._evaluate(model, batch)
    assert loss == pytest.approx(model.loss(batch), rel=1e-12) and acc == pytest.approx(model.accuracy(batch))
    model.E[7, 3] = float("nan")
    pytest.raises(InvalidParameterError, lambda: loop._evaluate(model, batch)).match("E contains NaN or inf")
