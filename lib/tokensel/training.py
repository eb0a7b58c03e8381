"""Training: the one-step update on ``E``, phase-2 training of ``p``, and joint training.

* :func:`one_step` — phase 1 of the theory: one full-batch gradient step of size ``eta0`` on ``E``.
* :func:`train_p` — phase 2: ``p`` trained with ``E`` frozen, by plain gradient descent in
  gradient-flow mode (small steps; the flow time is ``t = lr * steps``) or by normalised GD
  (``p <- p - lr * grad / ||grad||``).
* :func:`gradient_flow` — phase 2 by an adaptive ODE integrator (scipy ``solve_ivp``), to follow
  the flow over many decades of ``t``.
* :func:`train_joint` — ``E`` and ``p`` (optionally ``v``) together with full-batch Adam, for the
  real-data experiments.

All use the exact closed-form gradients of :mod:`tokensel.gradients`, and record a
:class:`Trajectory`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from .core import score_value_grads
from .data import RaggedBatch
from .errors import InvalidParameterError
from .gradients import gradients
from .model import AttentionModel
from .progress import bar


@dataclass
class Trajectory:
    """Recorded quantities of a training run, one entry per recorded step.

    ``t`` is the gradient-flow time (``lr * step`` for plain GD, the integrator's time for
    :func:`gradient_flow`, the step count for normalised GD and Adam). ``stopped`` says why the run
    ended: ``"steps"``, ``"t_max"``, ``"underflow"`` (the float gradient became exactly zero),
    ``"max_norm"`` or ``"loss_flat"``.
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

        data = dict(step=self.step, t=self.t, loss=self.loss, norm_p=self.norm_p,
                    grad_norm=self.grad_norm, cos_ref=self.cos_ref, **self.extra)
        return pd.DataFrame(data)

    def __len__(self):
        return len(self.step)


def cosine(a: torch.Tensor, b: torch.Tensor) -> float:
    """``<a, b> / (||a|| ||b||)``; NaN when either vector is zero."""
    na, nb = float(a.norm()), float(b.norm())
    if na == 0.0 or nb == 0.0:
        return float("nan")
    return float(a @ b) / (na * nb)


def record_steps(steps: int, count: int = 200) -> np.ndarray:
    """About ``count`` log-spaced step indices in ``0..steps``, always including both ends."""
    if steps < 1:
        return np.array([0])
    pts = np.unique(np.round(np.logspace(0, np.log10(steps), count)).astype(np.int64))
    return np.unique(np.concatenate([[0], pts, [steps]]))


def _check_positive(name, value):
    if not (isinstance(value, (int, float)) and np.isfinite(value) and value > 0):
        raise InvalidParameterError(f"{name} must be a positive finite number, got {value!r}")


def one_step(model: AttentionModel, batch: RaggedBatch, eta0: float, stable: bool = True) -> AttentionModel:
    """Phase 1: a copy of ``model`` after one full-batch gradient step of size ``eta0`` on ``E``.

    ``p`` and ``v`` are unchanged. With ``p = 0`` the update is exactly ``-eta0 * B v^T``.
    """
    _check_positive("eta0", eta0)
    out = model.copy()
    gradients(model, batch, stable=stable).apply_to_E(out.E, eta0)
    return out


def train_p(model: AttentionModel, batch: RaggedBatch, lr: float, steps: int, method: str = "gd",
            reference: torch.Tensor | None = None, stable: bool = True, records: int = 200,
            max_norm: float | None = None, progress: bool | None = None, monitor=None) -> Trajectory:
    """Phase 2: train ``model.p`` in place with ``E`` and ``v`` frozen.

    ``method="gd"`` is plain gradient descent (gradient-flow mode: ``t = lr * step``);
    ``method="normalized"`` is normalised GD, ``p <- p - lr * grad / ||grad||``. With a
    ``reference`` direction (e.g. ``p_mm``) the cosine to it is recorded. The run stops early when
    the gradient underflows to exactly zero, or when ``||p||`` exceeds ``max_norm``.
    ``monitor(p)``, if given, returns a dict of floats recorded with every record.
    """
    if method not in ("gd", "normalized"):
        raise InvalidParameterError(f"method must be 'gd' or 'normalized', got {method!r}")
    _check_positive("lr", lr)
    if isinstance(steps, bool) or not isinstance(steps, (int, np.integer)) or steps < 1:
        raise InvalidParameterError(f"steps must be an int >= 1, got {steps!r}")
    model.check_batch(batch)
    E, p, v = model.E, model.p, model.v
    w = E @ v
    rec = set(record_steps(int(steps), records).tolist())
    traj = Trajectory(method=method)
    ref = None if reference is None else reference.to(device=p.device, dtype=p.dtype)
    with bar(steps, f"train p ({method})", disable=None if progress is None else not progress) as pb:
        for step in range(int(steps) + 1):
            r = score_value_grads(batch, E @ p, w, stable=stable)
            grad = E.T @ r.A
            gnorm = float(grad.norm())
            last = step == steps
            if step in rec or last or gnorm == 0.0:
                t = lr * step if method == "gd" else step
                traj.append(step, t, r.loss, p.norm(), gnorm, cosine(p, ref) if ref is not None else float("nan"),
                            **(monitor(p) if monitor else {}))
            if gnorm == 0.0:
                traj.stopped = "underflow"
                break
            if max_norm is not None and float(p.norm()) > max_norm:
                traj.stopped = "max_norm"
                if step not in rec:
                    traj.append(step, lr * step if method == "gd" else step, r.loss, p.norm(), gnorm,
                                cosine(p, ref) if ref is not None else float("nan"),
                                **(monitor(p) if monitor else {}))
                break
            if last:
                break
            p.sub_(grad, alpha=lr if method == "gd" else lr / gnorm)
            pb.update(1)
    model.validate()
    return traj


def gradient_flow(model: AttentionModel, batch: RaggedBatch, t_max: float, reference=None,
                  records: int = 100, rtol: float = 1e-8, atol: float = 1e-10, stable: bool = True,
                  monitor=None) -> Trajectory:
    """Phase 2 by integrating ``dp/dt = -grad_p L`` with scipy's adaptive RK45 up to ``t_max``.

    The step size grows with ``t`` as the gradient decays, so decades of flow time cost only
    hundreds of gradient evaluations. ``model.p`` is set to ``p(t_max)``; recorded at ``records``
    log-spaced times in ``[1e-3, t_max]`` (and ``t = 0``); ``monitor(p)``, if given, returns a dict
    of floats recorded at each of those times.
    """
    from scipy.integrate import solve_ivp

    _check_positive("t_max", t_max)
    model.check_batch(batch)
    E, v = model.E, model.v
    w = E @ v
    dtype, device = model.p.dtype, model.p.device

    def rhs(_t, y):
        p = torch.from_numpy(y).to(device=device, dtype=dtype)
        return -(E.T @ score_value_grads(batch, E @ p, w, stable=stable).A).cpu().numpy().astype(np.float64)

    t_eval = np.logspace(-3, np.log10(t_max), records)
    t_eval = np.unique(np.concatenate([[0.0], t_eval[t_eval < t_max], [float(t_max)]]))
    sol = solve_ivp(rhs, (0.0, float(t_max)), model.p.detach().cpu().numpy().astype(np.float64),
                    method="RK45", t_eval=t_eval, rtol=rtol, atol=atol)
    if sol.status < 0:
        raise RuntimeError(f"gradient-flow integration failed: {sol.message}")
    traj = Trajectory(method="flow")
    ref = None if reference is None else reference.to(device=device, dtype=dtype)
    for k, t in enumerate(sol.t):
        p = torch.from_numpy(sol.y[:, k]).to(device=device, dtype=dtype)
        r = score_value_grads(batch, E @ p, w, stable=stable)
        traj.append(k, t, r.loss, p.norm(), (E.T @ r.A).norm(), cosine(p, ref) if ref is not None else float("nan"),
                    **(monitor(p) if monitor else {}))
    traj.extra["nfev"] = [float(sol.nfev)] * len(traj)
    traj.stopped = "t_max"
    model.p.copy_(torch.from_numpy(sol.y[:, -1]).to(device=device, dtype=dtype))
    model.validate()
    return traj


def save_checkpoint(path, tensors: dict, opt, step: int, traj: Trajectory, meta: dict) -> None:
    """Write ``tensors``, the optimiser state, the step and the trajectory to ``path`` atomically:
    a run killed while saving keeps its previous checkpoint."""
    import dataclasses
    from pathlib import Path

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    torch.save({"tensors": dict(tensors), "opt": opt.state_dict(), "step": step,
                "traj": dataclasses.asdict(traj), "meta": meta}, tmp)
    tmp.replace(path)


def resume_checkpoint(path, tensors: dict, opt, meta: dict):
    """If ``path`` holds a checkpoint of this configuration (``meta``), load it into ``tensors`` and
    ``opt`` and return ``(next step, trajectory)``; without a checkpoint return ``None``. A
    checkpoint of another configuration is refused with a clear error."""
    from pathlib import Path

    if path is None or not Path(path).exists():
        return None
    try:
        state = torch.load(path, weights_only=False)
    except Exception as exc:  # noqa: BLE001 - a truncated or foreign file
        raise InvalidParameterError(f"checkpoint {str(path)!r} cannot be read ({exc}): remove it to start "
                                    "the run afresh") from exc
    if not isinstance(state, dict) or "tensors" not in state:
        raise InvalidParameterError(f"checkpoint {str(path)!r} is not a tokensel checkpoint of this version: "
                                    "remove it to start the run afresh")
    if state.get("meta") != meta:
        raise InvalidParameterError(
            f"checkpoint {str(path)!r} belongs to another run ({state.get('meta')}); "
            f"this run is {meta}: remove it or pass another path")
    with torch.no_grad():
        for name, t in tensors.items():
            t.copy_(state["tensors"][name])
    opt.load_state_dict(state["opt"])
    return state["step"] + 1, Trajectory(**state["traj"])


def train_joint(model: AttentionModel, batch: RaggedBatch, steps: int, lr: float = 1e-2,
                params: tuple = ("E", "p"), test_batch: RaggedBatch | None = None, eval_every: int = 10,
                progress: bool | None = None, checkpoint=None, checkpoint_every: int = 50) -> Trajectory:
    """Train ``params`` (a subset of ``"E", "p", "v"``) jointly with full-batch Adam, in place.

    Gradients are the exact closed forms (never O(#tokens x d)). Records the training loss and
    accuracy, and the test loss and accuracy when ``test_batch`` is given, every ``eval_every``
    steps and at the end.

    With ``checkpoint`` (a file path) the parameters, the optimiser state and the trajectory are
    saved every ``checkpoint_every`` steps and at the end; a run started with an existing
    checkpoint of the same configuration resumes from it, and finishes with exactly the result of
    an uninterrupted run.
    """
    bad = set(params) - {"E", "p", "v"}
    if bad or not params:
        raise InvalidParameterError(f"params must be a non-empty subset of ('E', 'p', 'v'), got {params!r}")
    _check_positive("lr", lr)
    if isinstance(steps, bool) or not isinstance(steps, (int, np.integer)) or steps < 1:
        raise InvalidParameterError(f"steps must be an int >= 1, got {steps!r}")
    model.check_batch(batch)
    if test_batch is not None:
        model.check_batch(test_batch)
    tensors = {name: getattr(model, name) for name in params}
    # the fused kernel: one pass over each tensor per step (7x faster than the default on the
    # IMDB-size E on 2 CPU cores; see benchmarks/PROFILE.md); element-wise, so deterministic
    opt = torch.optim.Adam(list(tensors.values()), lr=lr, fused=True)
    traj = Trajectory(method="adam")
    y = batch.labels.to(model.E.dtype)
    gE_buffer = torch.empty_like(model.E) if "E" in tensors else None
    meta = {"params": tuple(params), "lr": lr, "steps": int(steps), "eval_every": eval_every,
            "shape": tuple(model.E.shape), "n": batch.n, "tokens": batch.num_tokens}
    saved = {"E": model.E, "p": model.p, "v": model.v}
    start, traj = resume_checkpoint(checkpoint, saved, opt, meta) or (0, traj)
    with bar(steps, "train (Adam)", disable=None if progress is None else not progress) as pb:
        pb.update(start)
        for step in range(start, int(steps) + 1):
            gr = gradients(model, batch)
            if step % eval_every == 0 or step == steps:
                extra = {"train_acc": float((gr.f * y > 0).double().mean())}
                if test_batch is not None:
                    extra["test_loss"] = model.loss(test_batch)
                    extra["test_acc"] = model.accuracy(test_batch)
                traj.append(step, step, gr.loss, model.p.norm(), gr.p.norm(), **extra)
            if step == steps:
                if checkpoint is not None:
                    save_checkpoint(checkpoint, saved, opt, step, traj, meta)
                break
            for name, t in tensors.items():
                t.grad = gr.E_into(gE_buffer) if name == "E" else getattr(gr, name)
            opt.step()
            pb.update(1)
            if checkpoint is not None and (step + 1) % checkpoint_every == 0:
                save_checkpoint(checkpoint, saved, opt, step, traj, meta)
    for t in tensors.values():
        t.grad = None
    model.validate()
    return traj
