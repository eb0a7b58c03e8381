"""tokensel.training.loop: the one Adam loop every model trains through (evaluation, divergence, gradients)."""

import math

import pytest
import torch

import tokensel as ts
from tokensel.errors import DivergenceError, InvalidParameterError
from tokensel.training import loop


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
    settings = ts.TrainSettings(steps=40, lr=0.1, eval_every=10, checkpoint=None, checkpoint_every=10, progress=False)
    traj = loop.adam(model, [model.p], step, settings, method="adam", label="q", test_batch=object())
    assert traj.step == [0, 10, 20, 30, 40] and traj.loss[-1] < traj.loss[0]
    assert traj.extra["test_loss"][-1] == pytest.approx(traj.loss[-1]) and traj.extra["train_acc"] == [1.0] * 5
    assert calls == [True] * 40 + [False]  # no gradient for the final evaluation
    assert model.p.grad is None and not model.p.requires_grad


def test_a_diverging_step_stops_before_the_update():
    model = _Quadratic()
    step, _ = _step(model, blow_up_at=5)
    settings = ts.TrainSettings(steps=40, lr=0.1, eval_every=10, checkpoint=None, checkpoint_every=10, progress=False)
    with pytest.raises(DivergenceError, match="diverged at step 5"):
        loop.adam(model, [model.p], step, settings, method="adam", label="q")
    assert model.p.grad is None


def test_autograd_flag_is_undone_however_the_run_ends(tmp_path):
    model = _Quadratic()
    step, _ = _step(model, blow_up_at=2)
    settings = ts.TrainSettings(steps=5, lr=0.1, eval_every=1, checkpoint=None, checkpoint_every=1, progress=False)
    with pytest.raises(DivergenceError):
        loop.adam(model, [model.p], step, settings, method="adam", label="q", autograd=True)
    assert not model.p.requires_grad


def test_settings_are_checked():
    with pytest.raises(InvalidParameterError, match="lr"):
        ts.TrainSettings(steps=5, lr=0.0, eval_every=1, checkpoint=None, checkpoint_every=1, progress=None)
    with pytest.raises(InvalidParameterError, match="steps"):
        ts.TrainSettings(steps=0, lr=0.1, eval_every=1, checkpoint=None, checkpoint_every=1, progress=None)
    with pytest.raises(InvalidParameterError, match="eval_every"):
        ts.TrainSettings(steps=5, lr=0.1, eval_every=0, checkpoint=None, checkpoint_every=1, progress=None)


def test_trajectory_frame():
    traj = ts.Trajectory("adam")
    traj.append(0, 0.0, 1.0, 2.0, 3.0, acc=0.5)
    frame = traj.to_frame()
    assert list(frame.columns) == ["step", "t", "loss", "norm_p", "grad_norm", "cos_ref", "acc"] and len(traj) == 1


def test_an_update_that_overflows_is_undone_and_the_model_keeps_its_last_finite_parameters():
    """README: a run whose loss or gradient stops being finite raises DivergenceError and keeps the
    parameters of its last finite step. A finite gradient times lr = 1.7e308 used to leave inf in E."""
    import torch

    import tokensel as ts
    from tokensel.errors import DivergenceError

    batch = ts.synthetic.independent_tokens(80, 30, length=8, delta=0.8, seed=1).batch
    for dtype, lr in ((torch.float64, 1.7e308), (torch.float32, 3e38)):
        model = ts.AttentionModel.init(30, 8, seed=0, dtype=dtype)
        E0 = model.E.clone()
        with pytest.raises(DivergenceError, match="step 0: the update of the parameters is not finite") as info:
            ts.train_joint(
                model, batch, ts.TrainSettings(steps=5, lr=lr, eval_every=1, progress=False), params=("E", "p", "v")
            )
        assert info.value.step == 0
        model.validate()
        assert torch.equal(model.E, E0), "the parameters of step 0 are the initial ones"
    variant = ts.models.variants.make("mlp", 30, 8, seed=0)
    with pytest.raises(DivergenceError):
        ts.train_variant(variant, batch, ts.TrainSettings(steps=5, lr=1.7e308, eval_every=1, progress=False))
    variant.validate()


def test_the_overflow_guard_is_off_for_ordinary_learning_rates():
    """The guard costs a copy of the parameters per step, so it is taken only where an update can overflow."""
    import torch

    from tokensel.training.loop import may_overflow

    x = [torch.ones(4, 3, dtype=torch.float64, requires_grad=True)]
    opt = torch.optim.Adam(x, lr=1.0)
    assert not may_overflow(opt, x, 1.0, 10**6)
    assert may_overflow(opt, x, 1e300, 10**6)
    assert may_overflow(opt, [torch.ones(2, dtype=torch.float32, requires_grad=True)], 1e36, 100)


def test_a_checkpointed_run_without_what_to_save_is_refused_before_any_step(tmp_path):
    for saved, fingerprint in [(None, {"recipe": "q"}), ({"p": torch.zeros(3)}, None)]:
        model = _Quadratic()
        step, calls = _step(model)
        settings = ts.TrainSettings(
            steps=5, lr=0.1, eval_every=1, checkpoint=tmp_path / "run.ckpt", checkpoint_every=1, progress=False
        )
        with pytest.raises(InvalidParameterError, match="saved .* and fingerprint"):
            loop.adam(model, [model.p], step, settings, method="adam", label="q", saved=saved, fingerprint=fingerprint)
        assert calls == [] and not (tmp_path / "run.ckpt").exists()
