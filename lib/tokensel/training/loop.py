"""The one training loop: full-batch Adam with evaluation, divergence check, checkpoints and a progress bar.

A model plugs in a step function ``step(take_grad) -> StepResult`` that evaluates the full-batch loss and leaves
the gradients in ``.grad`` (:func:`tokensel.train_joint`: closed form, :func:`tokensel.train_variant`: autograd)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import torch

from ..errors import DivergenceError
from ..loss import mean_logistic
from ..models import core, kernels
from ..models.attention import AttentionModel, MultiClassAttentionModel
from ..models.variants import VariantModel
from ..validation import all_finite
from . import checkpoints
from .optimiser import FusedAdam
from .progress import bar
from .settings import TrainSettings


@dataclass
class Trajectory:
    """Recorded quantities of a run, one entry per recorded step.

    ``t``: gradient-flow time (``lr * step`` for GD, the step for normalised GD and Adam); ``stopped``: ``"steps"``,
    ``"t_max"``, ``"underflow"`` (zero gradient) or ``"max_norm"``."""

    method: str
    step: list = field(default_factory=list)
    t: list = field(default_factory=list)
    loss: list = field(default_factory=list)
    norm_p: list = field(default_factory=list)
    grad_norm: list = field(default_factory=list)
    cos_ref: list = field(default_factory=list)
    extra: dict = field(default_factory=dict)
    stopped: str = "steps"

    def append(self, step, t, loss, norm_p, grad_norm, cos_ref=float("nan"), **extra):
        self.step.append(int(step))
        self.t.append(float(t))
        self.loss.append(float(loss))
        self.norm_p.append(float(norm_p))
        self.grad_norm.append(float(grad_norm))
        self.cos_ref.append(float(cos_ref))
        for k, val in extra.items():
            self.extra.setdefault(k, []).append(float(val))

    def to_frame(self):
        import pandas as pd

        columns = ("step", "t", "loss", "norm_p", "grad_norm", "cos_ref")
        return pd.DataFrame({**{c: getattr(self, c) for c in columns}, **self.extra})

    def __len__(self):
        return len(self.step)


@dataclass
class StepResult:
    """A step's loss, accuracy, ``p``-gradient norm (NaN if not computed) and finiteness; ``low_rank`` is
    ``(E, AB, PV[, ScoresAfter])`` when ``E``'s gradient ``AB @ PV`` was left for :func:`low_rank_adam`."""

    loss: float
    train_acc: float
    grad_norm_p: float
    finite: bool
    low_rank: tuple | None = None


class ScoresAfter:
    """Request that the Adam pass over ``E`` also form the next step's scores ``E [p, V]`` (``PV()`` after the
    update), saving the next gradient a read of ``E``; taken once (``take``)."""

    def __init__(self, PV: Callable[[], torch.Tensor]):
        self.PV = PV
        self.value: torch.Tensor | None = None

    def take(self) -> torch.Tensor | None:
        value, self.value = self.value, None
        return value


def _prologue(model, batch, test_batch, settings: TrainSettings | None) -> TrainSettings:
    """The trainer's checks before anything changes: the model's parameters, and the batches against the model."""
    model.validate()
    model.check_batch(batch)
    if test_batch is not None:
        model.check_batch(test_batch)
    return TrainSettings() if settings is None else settings


def _evaluate(model, batch) -> tuple[float, float]:
    """``(loss, accuracy)`` on ``batch`` in one forward pass (the fused kernel where it applies, NaN-checking ``E``)."""
    with torch.no_grad():
        if isinstance(model, (AttentionModel, MultiClassAttentionModel)):
            if core.fused_applies(batch, model.E, True):
                model._check_batch_but_E(batch)
                multiclass = isinstance(model, MultiClassAttentionModel)
                PV = torch.cat([model.p[:, None], model.v if multiclass else model.v[:, None]], 1)
                CW = core.fused_scores_values(model.E, PV)
                if not all_finite(CW):
                    model.check_finite()
                f = core.fused_outputs(batch, CW)
            else:
                model.check_batch(batch)
                f = model.forward(batch)
        elif isinstance(model, VariantModel):
            f = model.forward(batch)
        else:
            return model.loss(batch), model.accuracy(batch)
        if batch.num_classes is not None:
            loss = torch.nn.functional.cross_entropy(f, batch.labels)
            return float(loss), float((f.argmax(1) == batch.labels).double().mean())
        y = batch.labels.to(f.dtype)
        return float(mean_logistic(f, y)), float((f * y > 0).double().mean())


def low_rank_applies(E: torch.Tensor) -> bool:
    """Whether :func:`low_rank_adam` can update ``E``: a C-contiguous float32 or float64 tensor on the CPU."""
    return E.device.type == "cpu" and E.dtype in (torch.float32, torch.float64) and E.is_contiguous()


def low_rank_adam(
    opt: FusedAdam | torch.optim.Adam,
    E: torch.Tensor,
    AB: torch.Tensor,
    PV: torch.Tensor,
    scores: ScoresAfter | None = None,
) -> None:
    """``opt``'s Adam step on ``E`` for the gradient ``AB @ PV`` in one pass
    (:func:`tokensel.models.kernels.adam_low_rank`), never forming it;
    moments in ``opt.state[E]`` as torch keeps them; ``scores`` receives the new ``E [p, V]``."""
    group = next(g for g in opt.param_groups if any(q is E for q in g["params"]))
    state = opt.state[E]
    if not state:
        state["step"] = torch.zeros((), dtype=torch.float32)  # as torch's fused Adam keeps it
        state["exp_avg"] = torch.zeros_like(E, memory_format=torch.preserve_format)
        state["exp_avg_sq"] = torch.zeros_like(E, memory_format=torch.preserve_format)
    state["step"] += 1
    after = kernels.adam_low_rank(
        E.detach().numpy(),
        state["exp_avg"].numpy(),
        state["exp_avg_sq"].numpy(),
        AB.detach().numpy(),
        PV.detach().numpy(),
        int(state["step"].item()),
        float(group["lr"]),
        tuple(group["betas"]),
        float(group["eps"]),
        None if scores is None else scores.PV().detach().numpy(),
    )
    if scores is not None:
        scores.value = torch.from_numpy(after)


def adam(
    model,
    trained: list,
    step_fn: Callable[[bool], StepResult],
    settings: TrainSettings,
    *,
    method: str,
    label: str,
    test_batch=None,
    run: tuple = (),
    autograd: bool = False,
) -> Trajectory:
    """Full-batch Adam on the ``trained`` tensors of ``model``, in place.

    Records loss, accuracy, ``||p||`` and its gradient norm (and ``test_batch``'s) every ``settings.eval_every`` steps;
    a non-finite step raises :class:`~tokensel.errors.DivergenceError` before its update; ``settings.checkpoint`` saves
    and resumes the same ``run`` (:func:`tokensel.training.checkpoints.identity`); ``autograd`` only during the run."""
    steps, lr = settings.steps, settings.lr
    opt = FusedAdam(trained, lr)  # one element-wise pass over each tensor per step: deterministic

    traj, start = Trajectory(method=method), 0
    path, key = settings.checkpoint, ""
    if path is not None:
        key = checkpoints.identity(method, lr, steps, settings.eval_every, *run)
        state = checkpoints.load(path, key, trained[0].device)
        if state is not None:
            with torch.no_grad():
                for t, saved in zip(trained, state["tensors"], strict=True):
                    t.copy_(saved)
            opt.load_state_dict(state["opt"])
            traj, start = Trajectory(**state["traj"]), state["step"] + 1

    def save(step: int) -> None:
        tensors = [t.detach() for t in trained]
        state = dict(key=key, step=step, tensors=tensors, opt=opt.state_dict(), traj=dataclasses.asdict(traj))
        assert path is not None  # save() is called only for a run with a checkpoint
        checkpoints.save(path, state)

    try:
        for t in trained:
            t.requires_grad_(autograd)
        with bar(steps, label, disable=None if settings.progress is None else not settings.progress) as pb:
            pb.update(start)
            for step in range(start, steps + 1):
                last = step == steps
                r = step_fn(not last)
                if not (r.finite and np.isfinite(r.loss)):
                    raise DivergenceError(
                        f"training diverged at step {step}: the loss or its gradient is not finite. The model holds "
                        f"the parameters of step {step}; lr={lr:g} is probably too large: try a smaller lr.",
                        step=step,
                    )
                if step % settings.eval_every == 0 or last:
                    extra = {"train_acc": r.train_acc}
                    if test_batch is not None:
                        extra["test_loss"], extra["test_acc"] = _evaluate(model, test_batch)
                    traj.append(step, step, r.loss, float(model.p.detach().norm()), r.grad_norm_p, **extra)
                if last:
                    if path is not None:
                        save(step)
                    break
                opt.step()
                if r.low_rank is not None:
                    low_rank_adam(opt, *r.low_rank)
                pb.update(1)
                if path is not None and (step + 1) % settings.checkpoint_every == 0:
                    save(step)
    finally:
        for t in trained:
            t.requires_grad_(False)
            t.grad = None
    model.validate()
    return traj
