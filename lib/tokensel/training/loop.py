"""The one training loop: full-batch Adam with evaluation, checkpoint/resume, divergence checks and a
progress bar, for every model (:func:`tokensel.train_joint` with closed-form gradients,
:func:`tokensel.training.variants.train_variant` with autograd).

A model plugs in through a *step function* ``step(take_grad) -> StepResult``: it evaluates the loss
on the full training batch and, when ``take_grad`` is true, leaves the gradient of every trained
tensor in its ``.grad``. The loop owns everything else, so that evaluation, checkpoints and the
handling of a diverging run are written once.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import cast

import numpy as np
import torch

from ..errors import DivergenceError, InvalidParameterError
from ..loss import mean_logistic
from ..models import core, kernels
from ..models.attention import AttentionModel, MultiClassAttentionModel
from ..models.variants import VariantModel
from ..validation import Duck, Instance, all_finite
from . import checkpoints
from .optimiser import FusedAdam
from .progress import bar
from .settings import TrainSettings

#: what the loop needs of a model: its parameters' check, and its loss and accuracy on a test batch
TRAINED_MODEL = Duck("validate", "check_batch", what="a model (with validate and check_batch)")
TENSORS = Instance(list, what="a list of the trained tensors")


@dataclass
class Trajectory:
    """Recorded quantities of a training run, one entry per recorded step.

    ``t`` is the gradient-flow time (``lr * step`` for plain GD, the integrator's time for
    :func:`~tokensel.training.phases.gradient_flow`, the step count for normalised GD and Adam). ``stopped``
    says why the run ended: ``"steps"``, ``"t_max"``, ``"underflow"`` (the float gradient became
    exactly zero), ``"max_norm"`` or ``"loss_flat"``.
    """

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

        data = dict(
            step=self.step,
            t=self.t,
            loss=self.loss,
            norm_p=self.norm_p,
            grad_norm=self.grad_norm,
            cos_ref=self.cos_ref,
            **self.extra,
        )
        return pd.DataFrame(data)

    def __len__(self):
        return len(self.step)


@dataclass
class StepResult:
    """What a step function reports: the full-batch training loss and accuracy, the norm of the
    gradient in ``p`` (NaN when not computed) and whether the loss and gradients are finite."""

    loss: float
    train_acc: float
    grad_norm_p: float
    finite: bool
    #: ``(E, AB, PV)`` when the gradient of the trained tensor ``E`` is the low-rank ``AB @ PV`` and was not
    #: formed (``E.grad`` is None): :func:`adam` updates ``E`` from the factors (:func:`low_rank_adam`); a fourth
    #: item, a :class:`ScoresAfter`, asks that pass for the next step's scores
    low_rank: tuple | None = None


class ScoresAfter:
    """A step function's request for the scores ``E [p, V]`` at the parameters after the update: the Adam pass over
    ``E`` (:func:`low_rank_adam`) forms them from each row it has just updated and leaves them in ``value``, so the
    next step's gradient need not read ``E`` again for them. ``PV`` gives the d x (1 + K) matrix ``[p, V]`` as it is
    when that pass runs (after the update of ``p`` and ``V``). The step that uses them takes them (:meth:`take`):
    scores are used once, by the step right after the update that formed them."""

    def __init__(self, PV: Callable[[], torch.Tensor]):
        self.PV = PV
        self.value: torch.Tensor | None = None

    def take(self) -> torch.Tensor | None:
        """The scores left by the last update (None when there are none), forgotten here."""
        value, self.value = self.value, None
        return value


def prologue(model, batch, test_batch, settings) -> TrainSettings:
    """What every trainer does before its first step: ``settings`` checked (None gives the defaults of
    :class:`~tokensel.training.settings.TrainSettings`), the model's parameters validated, the training batch and
    the test batch (when given) checked against the model. Nothing is changed."""
    settings = TrainSettings() if settings is None else settings
    model.validate()
    model.check_batch(batch)
    if test_batch is not None:
        model.check_batch(test_batch)
    return settings


def diverged(step: int, lr: float, what: str) -> DivergenceError:
    """The error of a run whose loss or gradient stopped being finite at ``step``."""
    return DivergenceError(
        f"training diverged at step {step}: {what} is not finite. The model holds the parameters of step "
        f"{step} (before the failing update); lr={lr:g} is probably too large: try a smaller lr.",
        step=step,
    )


def _finite(tensors: list) -> bool:
    return all(all_finite(t) for t in tensors)


def may_overflow(opt, trained: list, lr: float, updates: int) -> bool:
    """Whether ``updates`` Adam steps of size ``lr`` could carry a parameter past the largest float.

    Adam moves each entry by ``lr |m̂|/(sqrt(v̂) + eps)``, and by Cauchy-Schwarz ``|m̂|/sqrt(v̂) <=
    ((1 - b1)/(1 - b1^t)) sqrt((1 - b2^t)/((1 - b2)(1 - b1^2/b2))) <= 1/sqrt((1 - b2)(1 - b1^2/b2))`` (73 for
    the defaults) whatever the gradients: so ``max |x| + updates * lr * 2 * bound`` below a quarter of the
    dtype's largest value means no update can overflow, and the loop need not keep a copy of the
    parameters to undo one."""
    b1, b2 = opt.param_groups[0]["betas"]
    if not 0 <= b1 < 1 or not 0 < b2 < 1 or b1 * b1 >= b2:
        return True
    bound = 2.0 / math.sqrt((1 - b2) * (1 - b1 * b1 / b2))
    top = max((float(t.detach().abs().max()) for t in trained if t.numel()), default=0.0)
    largest = min(torch.finfo(t.dtype).max for t in trained) if trained else math.inf
    return top + updates * lr * bound >= largest / 4


def _evaluate(model, batch) -> tuple[float, float]:
    """``(model.loss(batch), model.accuracy(batch))`` from one forward pass instead of two; for the one-layer
    models the outputs come from the fused kernel where it applies (no gradient terms), as in training."""
    with torch.no_grad():
        if isinstance(model, (AttentionModel, MultiClassAttentionModel)):
            if core.fused_applies(batch, model.E, True):
                # as in tokensel.gradients: a NaN or inf of E is found in the scores E [p, V], without a pass of its own
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
    """``opt``'s Adam step on ``E`` (one of its parameters, with no ``.grad``) for the gradient ``AB @ PV``, by
    :func:`tokensel.models.kernels.adam_low_rank`: one pass over ``E`` and its moments instead of forming the
    |S| x d gradient and passing over it again. The moments and the step count live in ``opt.state[E]`` as
    torch's fused Adam keeps them, so a checkpoint (``opt.state_dict()``) is the same either way. With ``scores``
    the same pass leaves the updated ``E [p, V]`` in ``scores.value`` (``scores.PV()`` read now, after the update of
    ``p`` and ``V``)."""
    group = next(g for g in opt.param_groups if any(q is E for q in g["params"]))
    if group["weight_decay"] or group["amsgrad"] or group["maximize"]:
        raise InvalidParameterError("low_rank_adam implements plain Adam: no weight decay, amsgrad or maximize")
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
    saved: dict | None = None,
    fingerprint: dict | None = None,
    autograd: bool = False,
) -> Trajectory:
    """Full-batch Adam on the ``trained`` tensors of ``model``, in place.

    Every ``settings.eval_every`` steps and at the end the loss, the training accuracy, the norm of
    ``p`` and of its gradient (and, with ``test_batch``, ``model.loss`` and ``model.accuracy`` on it)
    are recorded. A step whose loss or gradient is not finite raises
    :class:`~tokensel.errors.DivergenceError` before the update. With ``settings.checkpoint`` the
    ``saved`` tensors, the optimiser state and the trajectory are written every
    ``settings.checkpoint_every`` steps and at the end; an update that makes a parameter non-finite (a
    finite gradient times a huge ``lr``) is undone before the error, so a diverged model always holds the
    parameters of its last finite step; a run whose ``fingerprint``
    (:func:`tokensel.training.checkpoints.fingerprint`) equals the file's resumes from it. With ``autograd`` the
    trained tensors require gradients during the run (after a resume has written into them), and never
    after it, however it ends.
    """
    steps, lr = settings.steps, settings.lr
    if settings.checkpoint is not None and (not isinstance(saved, dict) or not isinstance(fingerprint, dict)):
        raise InvalidParameterError(
            "a run with a checkpoint needs saved (the tensors to save, by name) and fingerprint (what the run is, "
            "from tokensel.training.checkpoints.fingerprint): pass both, or no checkpoint"
        )
    # the fused kernel: one pass over each tensor per step (7x faster than the default on the
    # IMDB-size E on 2 CPU cores; see benchmarks/PROFILE.md); element-wise, so deterministic; torch's own, without
    # the optimiser class that imports torch._dynamo (FusedAdam)
    opt = FusedAdam(trained, lr)
    traj = Trajectory(method=method)
    start = 0
    # what a checkpoint holds: both are dicts whenever settings.checkpoint is set (checked above)
    to_save, meta = cast(dict, saved), cast(dict, fingerprint)
    try:
        if settings.checkpoint is not None:
            start, traj = checkpoints.resume(settings.checkpoint, to_save, opt, meta, Trajectory) or (0, traj)
        for t in trained:
            t.requires_grad_(autograd)
        guard = may_overflow(opt, trained, lr, steps - start)  # a huge lr: undo an update that overflows
        backup = [torch.empty_like(t, requires_grad=False) for t in trained] if guard else []
        with bar(steps, label, disable=None if settings.progress is None else not settings.progress) as pb:
            pb.update(start)
            for step in range(start, steps + 1):
                last = step == steps
                r = step_fn(not last)
                if not (r.finite and np.isfinite(r.loss)):
                    raise diverged(step, lr, "the loss or its gradient")
                if step % settings.eval_every == 0 or last:
                    extra = {"train_acc": r.train_acc}
                    if test_batch is not None:
                        extra["test_loss"], extra["test_acc"] = _evaluate(model, test_batch)
                    traj.append(step, step, r.loss, float(model.p.detach().norm()), r.grad_norm_p, **extra)
                if last:
                    if settings.checkpoint is not None:
                        checkpoints.save(settings.checkpoint, to_save, opt, step, traj, meta)
                    break
                if guard:
                    with torch.no_grad():  # the last finite parameters, kept until the update is known finite
                        for b, t in zip(backup, trained, strict=True):
                            b.copy_(t)
                opt.step()
                if r.low_rank is not None:
                    low_rank_adam(opt, *r.low_rank)
                if guard and not _finite(trained):  # finite gradients, but an update that overflowed
                    with torch.no_grad():
                        for b, t in zip(backup, trained, strict=True):
                            t.copy_(b)
                    raise diverged(step, lr, "the update of the parameters")
                pb.update(1)
                if settings.checkpoint is not None and (step + 1) % settings.checkpoint_every == 0:
                    checkpoints.save(settings.checkpoint, to_save, opt, step, traj, meta)
    finally:
        for t in trained:
            t.requires_grad_(False)
            t.grad = None
    model.validate()
    return traj
