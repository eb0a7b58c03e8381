"""The theory's phases: one step on ``E`` (:func:`one_step`), then ``p`` trained with ``E`` frozen (:func:`train_p`,
:func:`train_p_v`, :func:`gradient_flow`, :func:`implicit_flow`), and joint Adam (:func:`train_joint`), all with the
closed-form gradients of :mod:`tokensel.models.gradients`, recording a :class:`~tokensel.training.loop.Trajectory`."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TypeVar

import numpy as np
import torch

from ..data.batch import Batch, RaggedBatch
from ..errors import InvalidParameterError, SolverError
from ..models.attention import AttentionModel, MultiClassAttentionModel
from ..models.core import fused_applies, fused_grads, score_value_grads
from ..models.gradients import MODEL, gradients, gradients_of_checked, p_gradient, p_gradient_of
from ..validation import (
    MAX_STEPS,
    Bool,
    Choice,
    Function,
    Instance,
    Int,
    Real,
    Subset,
    Tensor,
    Text,
    all_finite,
    declare,
    unchecked,
)
from . import loop
from .loop import StepResult, Trajectory
from .progress import bar
from .settings import SETTINGS, TrainSettings

POSITIVE = Real(min=0.0, min_inclusive=False)
BINARY_MODEL = Instance(AttentionModel, what="an AttentionModel")
#: a direction the run is compared with (such as ``p_mm``), or None
REFERENCE = Tensor("float", ndim=1, finite=True, allow_none=True)
MONITOR = Function("a function p -> dict of floats", allow_none=True)
RECORDS = Int(min=1, max=10**7)

#: flows this small run torch on one thread: their many microsecond calls would each wait for a sleeping thread
SMALL_E = 2**16
SMALL_BATCH = 50_000


@contextmanager
def _one_thread_if_small(E: torch.Tensor, batch: RaggedBatch) -> Iterator[None]:
    """torch on one thread while a small flow runs, the caller's thread count restored after."""
    threads = torch.get_num_threads()
    if threads == 1 or E.numel() > SMALL_E or batch.ids.numel() >= SMALL_BATCH:
        yield
        return
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


@declare(a=Tensor("float", shape=("d",)), b=Tensor("float", shape=("d",)))
def cosine(a: torch.Tensor, b: torch.Tensor) -> float:
    """``<a, b> / (||a|| ||b||)``; NaN when either vector is zero.

    Introduced in chapter 05."""
    na, nb = float(a.norm()), float(b.norm())
    if na == 0.0 or nb == 0.0:
        return float("nan")
    return float(a @ b) / (na * nb)


def record_steps(steps: int, count: int = 200) -> np.ndarray:
    """About ``count`` log-spaced step indices in ``0..steps``, both ends included."""
    if steps < 1:
        return np.array([0])
    pts = np.unique(np.round(np.logspace(0, np.log10(steps), count)).astype(np.int64))
    return np.unique(np.concatenate([[0], pts, [steps]]))


def _prepare(model, batch: RaggedBatch, reference):
    """The parameters and batch checked together, and ``reference`` returned in ``p``'s dtype and device."""
    model.validate()
    model.check_batch(batch)
    if reference is None:
        return None
    if reference.shape != model.p.shape:
        raise InvalidParameterError(
            f"reference must have the shape of p, {tuple(model.p.shape)} (a direction such as p_mm), "
            f"got {tuple(reference.shape)}"
        )
    return reference.to(device=model.p.device, dtype=model.p.dtype)


_Model = TypeVar("_Model", AttentionModel, MultiClassAttentionModel)


@declare(model=MODEL, batch=Batch(), eta0=POSITIVE, stable=Bool())
def one_step(model: _Model, batch: RaggedBatch, eta0: float, stable: bool = True) -> _Model:
    """Phase 1: a copy of ``model`` after one full-batch gradient step of size ``eta0`` on ``E`` (``p`` and ``v``
    unchanged; with ``p = 0`` the update is exactly ``-eta0 * B v^T``).

    Introduced in chapter 02."""
    _prepare(model, batch, None)
    out = model.copy()
    gradients(model, batch, stable=stable).apply_to_E(out.E, eta0)
    return out


@declare(
    model=BINARY_MODEL,
    batch=Batch(),
    lr=POSITIVE,
    steps=Int(min=1, max=MAX_STEPS),
    method=Choice("gd", "normalized"),
    reference=REFERENCE,
    stable=Bool(),
    records=RECORDS,
    max_norm=Real(min=0.0, min_inclusive=False, allow_none=True),
    progress=Bool(allow_none=True),
    monitor=MONITOR,
)
def train_p(
    model: AttentionModel,
    batch: RaggedBatch,
    lr: float,
    steps: int,
    method: str = "gd",
    reference: torch.Tensor | None = None,
    stable: bool = True,
    records: int = 200,
    max_norm: float | None = None,
    progress: bool | None = None,
    monitor=None,
) -> Trajectory:
    """Phase 2: ``model.p`` trained in place, ``E`` and ``v`` frozen, by plain gradient descent (``method="gd"``,
    gradient-flow time ``t = lr * step``) or normalised GD (``p <- p - lr * grad / ||grad||``). Records about
    ``records`` log-spaced steps: the cosine to ``reference`` (e.g. ``p_mm``) when given, and ``monitor(p)`` (a
    dict of floats). Stops early when the gradient underflows to zero or ``||p||`` exceeds ``max_norm``.

    Introduced in chapter 03."""
    ref = _prepare(model, batch, reference)
    E, p = model.E, model.p
    grad_p, cos = p_gradient_of(E, E @ model.v, batch, stable), unchecked(cosine)  # checked here, once
    rec = set(record_steps(int(steps), records).tolist())
    traj = Trajectory(method=method)

    def record(step, loss, gnorm):
        cos_ref = cos(p, ref) if ref is not None else float("nan")
        t = lr * step if method == "gd" else step
        traj.append(step, t, loss, p.norm(), gnorm, cos_ref, **(monitor(p) if monitor else {}))

    with (
        bar(steps, f"train p ({method})", None if progress is None else not progress) as pb,
        _one_thread_if_small(E, batch),
    ):
        for step in range(int(steps) + 1):
            loss, grad = grad_p(p)
            gnorm = float(grad.norm())
            too_far = max_norm is not None and float(p.norm()) > max_norm
            stop = "underflow" if gnorm == 0.0 else "max_norm" if too_far else None
            if step in rec or step == steps or stop:
                record(step, loss, gnorm)
            if stop or step == steps:
                traj.stopped = stop or "steps"
                break
            p.sub_(grad, alpha=lr if method == "gd" else lr / gnorm)
            pb.update(1)
    model.validate()
    return traj


@declare(
    model=BINARY_MODEL,
    batch=Batch(),
    lr=POSITIVE,
    steps=Int(min=1, max=MAX_STEPS),
    train_v=Bool(),
    records=RECORDS,
    progress=Bool(allow_none=True),
)
def train_p_v(
    model: AttentionModel,
    batch: RaggedBatch,
    lr: float,
    steps: int,
    train_v: bool = True,
    records: int = 50,
    progress: bool | None = None,
) -> Trajectory:
    """Phase 2 with the read-out trained too: normalised GD on ``p`` and ``v`` jointly (``(p, v) <- (p, v) - lr g /
    ||g||``), ``E`` frozen, in place; with ``train_v=False`` only ``p`` moves. Records the loss, ``||p||``, ``||v||``
    and the training accuracy. Chapter 06 asks whether training ``v`` changes the direction ``p`` converges to."""
    model.check_batch(batch)
    y = batch.labels.to(model.E.dtype)
    rec = set(record_steps(int(steps), records).tolist())
    traj = Trajectory(method="normalized" + (" (p, v)" if train_v else " (p)"))
    desc = f"train p{', v' if train_v else ''} (normalised GD)"
    with bar(steps, desc, None if progress is None else not progress) as pb, _one_thread_if_small(model.E, batch):
        for step in range(int(steps) + 1):
            gr = gradients(model, batch)
            g_p, g_v = gr.p, (gr.v if train_v else torch.zeros_like(gr.v))
            gnorm = float(torch.sqrt(g_p.square().sum() + g_v.square().sum()))
            if step in rec or step == steps or gnorm == 0.0:
                acc = float((gr.f * y > 0).double().mean())
                traj.append(step, step, gr.loss, model.p.norm(), gnorm, norm_v=float(model.v.norm()), train_acc=acc)
            if gnorm == 0.0:
                traj.stopped = "underflow"
                break
            if step == steps:
                break
            model.p.sub_(g_p, alpha=lr / gnorm)
            if train_v:
                model.v.sub_(g_v, alpha=lr / gnorm)
            pb.update(1)
    model.validate()
    return traj


class _Budget(Exception):
    """Raised inside the integrator's right-hand side when :func:`gradient_flow`'s evaluation budget is spent."""


@declare(
    model=BINARY_MODEL,
    batch=Batch(),
    t_max=POSITIVE,
    reference=REFERENCE,
    records=RECORDS,
    rtol=POSITIVE,
    atol=POSITIVE,
    stable=Bool(),
    monitor=MONITOR,
    on_failure=Choice("raise", "stop"),
    max_evaluations=Int(min=1, allow_none=True),
)
def gradient_flow(
    model: AttentionModel,
    batch: RaggedBatch,
    t_max: float,
    reference=None,
    records: int = 100,
    rtol: float = 1e-8,
    atol: float = 1e-10,
    stable: bool = True,
    monitor=None,
    on_failure: str = "raise",
    max_evaluations: int | None = None,
) -> Trajectory:
    """Phase 2 by integrating ``dp/dt = -grad_p L`` with scipy's adaptive RK45 up to ``t_max``: the steps grow as the
    gradient decays, so decades of flow time cost hundreds of evaluations. ``model.p`` is set to ``p(t_max)``;
    recorded at ``t = 0`` and ``records`` log-spaced times in ``[1e-3, t_max]``.

    A stiff flow (:func:`implicit_flow`) raises :class:`~tokensel.errors.SolverError`, or with ``on_failure="stop"``
    ends where ``stopped`` says; ``max_evaluations`` bounds the gradient evaluations (``model.p`` then unchanged).
    Introduced in chapter 03."""
    from scipy.integrate import solve_ivp

    ref = _prepare(model, batch, reference)
    E = model.E
    dtype, device = model.p.dtype, model.p.device
    grad_p = p_gradient_of(E, E @ model.v, batch, stable)  # checked here, once
    evaluations = [0, 0.0]  # gradient evaluations, and the time of the last

    def rhs(t, y):
        evaluations[0] += 1
        evaluations[1] = t
        if max_evaluations is not None and evaluations[0] > max_evaluations:
            raise _Budget
        return -grad_p(torch.from_numpy(y).to(device=device, dtype=dtype))[1].cpu().numpy().astype(np.float64)

    t_eval = np.logspace(-3, np.log10(t_max), records)
    t_eval = np.unique(np.concatenate([[0.0], t_eval[t_eval < t_max], [float(t_max)]]))
    p0 = model.p.detach().cpu().numpy().astype(np.float64)
    try:
        with _one_thread_if_small(E, batch):
            sol = solve_ivp(rhs, (0.0, float(t_max)), p0, method="RK45", t_eval=t_eval, rtol=rtol, atol=atol)
    except _Budget:
        raise SolverError(
            f"gradient-flow integration reached only t = {evaluations[1]:.3g} of {t_max:.3g} in {max_evaluations} "
            "gradient evaluations: the flow is probably stiff (part of the scores settled at a finite optimum); "
            "use implicit_flow, or a larger max_evaluations"
        ) from None
    if sol.status < 0 and (on_failure == "raise" or sol.t.size == 0):
        raise SolverError(f"gradient-flow integration failed: {sol.message}: try a smaller rtol/atol or t_max")
    traj = Trajectory(method="flow")
    for k, t in enumerate(sol.t):
        p = torch.from_numpy(sol.y[:, k]).to(device=device, dtype=dtype)
        loss, grad = grad_p(p)
        cos_ref = cosine(p, ref) if ref is not None else float("nan")
        traj.append(k, t, loss, p.norm(), grad.norm(), cos_ref, **(monitor(p) if monitor else {}))
    traj.extra["nfev"] = [float(sol.nfev)] * len(traj)
    traj.stopped = "t_max" if sol.status >= 0 else f"solver failed after t = {sol.t[-1]:.3g}: {sol.message}"
    model.p.copy_(torch.from_numpy(sol.y[:, -1]).to(device=device, dtype=dtype))
    model.validate()
    return traj


def _finite_product_bound(*pairs) -> bool:
    """Whether the sum of the products ``a b^T`` of the pairs is certainly finite (E's gradient, never formed)."""
    total = 0.0
    for a, b in pairs:
        if not (all_finite(a) and all_finite(b)):
            return False
        width = b.shape[1] if b.ndim == 2 else 1  # a (K-column) product sums K terms per entry
        total += width * float(a.abs().max()) * float(b.abs().max())
    return total < float(torch.finfo(pairs[0][0].dtype).max) / 4


@declare(
    model=MODEL,
    batch=Batch(),
    settings=SETTINGS,
    params=Subset("E", "p", "v"),
    test_batch=Batch(dims=(), allow_none=True),
    recipe=Text(),
)
def train_joint(
    model: AttentionModel | MultiClassAttentionModel,
    batch: RaggedBatch,
    settings: TrainSettings | None = None,
    params: tuple = ("E", "p"),
    test_batch: RaggedBatch | None = None,
    recipe: str = "train_joint",
) -> Trajectory:
    """``params`` (of ``"E", "p", "v"``) trained jointly with full-batch Adam, in place, with the exact closed-form
    gradients (never O(#tokens x d)) and the steps, learning rate, evaluation cadence, checkpoint and progress bar
    of ``settings`` (None: the defaults of :class:`~tokensel.training.settings.TrainSettings`). Records the training
    loss and accuracy (and the test loss and accuracy with ``test_batch``).

    A non-finite step raises :class:`~tokensel.errors.DivergenceError`, the model as before it; a killed run with
    ``settings.checkpoint`` resumes to the uninterrupted result, refusing another run's checkpoint.
    Introduced in chapter 05."""
    settings = loop._prologue(model, batch, test_batch, settings)
    tensors = {name: getattr(model, name) for name in params}
    multiclass = isinstance(model, MultiClassAttentionModel)
    y = batch.labels if multiclass else batch.labels.to(model.E.dtype)
    # E updated from its gradient's factors in one pass where the kernel applies (loop.low_rank_adam)
    low_rank = "E" in tensors and loop.low_rank_applies(model.E)
    gE_buffer = torch.empty_like(model.E) if "E" in tensors and not low_rank else None
    # that pass also forms the next step's scores E [p, V] where the next gradient is the fused one: a pass less
    after = None
    if low_rank and fused_applies(batch, model.E, True):
        V = (lambda: model.v) if multiclass else (lambda: model.v[:, None])
        after = loop.ScoresAfter(lambda: torch.cat([model.p[:, None], V()], 1))

    def step(take_grad: bool) -> StepResult:
        # the arguments are checked above; a non-finite E makes the loss or grad_p so, which is checked here
        gr = gradients_of_checked(model, batch, scores=None if after is None else after.take())
        finite = bool(
            np.isfinite(gr.loss)
            and all_finite(gr.p)
            and all_finite(gr.v)
            and _finite_product_bound((gr.A, model.p), (gr.B, model.v))
        )
        factors = None
        if take_grad and finite:
            for name, t in tensors.items():
                if name != "E":
                    t.grad = getattr(gr, name)
                elif low_rank:
                    factors = (t, *gr.factors(), after)
                else:
                    t.grad = gr.E_into(gE_buffer)
        correct = (gr.f.argmax(1) == y) if multiclass else (gr.f * y > 0)
        return StepResult(gr.loss, float(correct.double().mean()), float(gr.p.norm()), finite, factors)

    return loop.adam(
        model,
        list(tensors.values()),
        step,
        settings,
        method="adam",
        label="train (Adam)",
        test_batch=test_batch,
        run=(recipe, tuple(params), batch, test_batch, model.E, model.p, model.v),
    )


def _score_gradient(batch: RaggedBatch, c: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """``A = dL/dc`` (|S|) at the scores ``c`` with the values ``w`` frozen (the stable formula)."""
    if fused_applies(batch, c, True):
        return fused_grads(batch, torch.stack([c, w], 1))[2][:, 0]
    return score_value_grads(batch, c, w, stable=True).A


def _float64(p) -> torch.Tensor:
    """``p`` as a float64 tensor (the many-digit steps keep it as a list of mpmath numbers)."""
    return p if isinstance(p, torch.Tensor) else torch.tensor([float(a) for a in p], dtype=torch.float64)


def _float64_step(E: torch.Tensor, w: torch.Tensor, batch: RaggedBatch):
    """``(step, evaluations)``: the backward Euler step of size ``h`` in float64 (None if Newton stalls), solved
    in the scores ``c = E p`` (``c' = c - h G A(c')``, ``G = E E^T``), Hessian by central differences, line search."""
    G = E @ E.T
    S = G.shape[0]
    gnorm = float(torch.linalg.matrix_norm(G, 2))
    eye = torch.eye(S, dtype=torch.float64)
    nfev = [0]

    def A(c):
        nfev[0] += 1
        return _score_gradient(batch, c, w)

    def hessian(c):
        eps = 1e-5
        J = torch.empty(S, S, dtype=torch.float64)
        for j in range(S):
            e = torch.zeros(S, dtype=torch.float64)
            e[j] = eps
            J[:, j] = (A(c + e) - A(c - e)) / (2 * eps)
        return (J + J.T) / 2

    def solve(c, h):
        x, F = c.clone(), h * (G @ A(c))
        M = None
        for it in range(40):
            fn, scale = float(F.norm()), 1.0 + float(x.norm())
            if fn <= 1e-10 * scale + 1e-17 * h * gnorm:
                return x
            if M is None or it % 4 == 0:
                M = eye + h * (G @ hessian(x))
            dx = -torch.linalg.solve(M, F)
            lam = 1.0
            while lam > 1e-6:
                x2 = x + lam * dx
                F2 = x2 - c + h * (G @ A(x2))
                if float(F2.norm()) < (1 - 1e-4 * lam) * fn:
                    break
                lam /= 2
            else:
                return x if fn <= 1e-6 * scale else None
            x, F = x2, F2
        return None

    def step(p, h):
        x = solve(E @ p, h)
        return None if x is None else p - h * (E.T @ A(x))

    return step, lambda: nfev[0]


@declare(
    model=BINARY_MODEL,
    batch=Batch(),
    t_max=POSITIVE,
    reference=REFERENCE,
    records=RECORDS,
    first_step=POSITIVE,
    growth=Real(min=1.0, min_inclusive=False, max=16.0),
    monitor=MONITOR,
    max_evaluations=Int(min=1, allow_none=True),
    digits=Int(min=30, max=2000, allow_none=True),
)
def implicit_flow(
    model: AttentionModel,
    batch: RaggedBatch,
    t_max: float,
    reference=None,
    records: int = 100,
    first_step: float = 1e-2,
    growth: float = 2.0,
    monitor=None,
    max_evaluations: int | None = None,
    digits: int | None = None,
) -> Trajectory:
    """Phase 2's gradient flow by backward (implicit) Euler steps, for *stiff* flows (part of the scores settles at a
    finite optimum while the rest diverges), which :func:`gradient_flow` cannot take to large ``t``.

    Each step solves ``p' = p - h grad L(p')`` by Newton; ``h`` from ``first_step`` grows up to ``(growth - 1) t``, cut
    by 4 on failure; first order, settled scores and divergence direction exact. Needs ``|S| <= 4000``;
    ``max_evaluations`` as :func:`gradient_flow`. float64 fails from ``t ~ 1e16``; ``digits`` solves in that many digits
    (:mod:`tokensel.training.precise`, slow) up to ``t ~ 10 ** (3 * digits / 4)``. Introduced in chapter 05."""
    reference = _prepare(model, batch, reference)
    if model.vocab_size > 4000:
        raise InvalidParameterError(
            f"implicit_flow forms the |S| x |S| Gram matrix: |S| = {model.vocab_size} > 4000; use gradient_flow"
        )
    dtype, device = model.p.dtype, model.p.device
    E = model.E.detach().to(torch.float64).cpu()
    cpu = batch.to("cpu")
    w = E @ model.v.detach().to(torch.float64).cpu()
    ref = None if reference is None else reference.detach().to(torch.float64).cpu()
    p = model.p.detach().to(torch.float64).cpu().clone()
    if digits is None:
        advance, evaluations = _float64_step(E, w, cpu)
    else:
        from .precise import implicit_steps

        advance, evaluations = implicit_steps(E, model.v, cpu, digits)
    what = "implicit_flow" + ("" if digits is None else f" ({digits} digits)")
    traj = Trajectory(method="implicit flow" + ("" if digits is None else f" ({digits} digits)"))

    def record(step, t, x):
        x = _float64(x)
        value, grad = p_gradient(E, x, w, cpu, True)
        cos_ref = cosine(x, ref) if ref is not None else float("nan")
        extra = monitor(x.to(device=device, dtype=dtype)) if monitor else {}
        traj.append(step, t, value, x.norm(), grad.norm(), cos_ref, **extra)

    grid = np.logspace(-3, np.log10(t_max), records)
    marks = [float(x) for x in grid[grid < t_max]] + [float(t_max)]
    with _one_thread_if_small(E, cpu):
        record(0, 0.0, p)
        t, h, step = 0.0, first_step, 0
        while t < t_max:
            if max_evaluations is not None and evaluations() > max_evaluations:
                raise SolverError(
                    f"{what} reached only t = {t:.3g} of {t_max:.3g} in {max_evaluations} gradient evaluations, "
                    f"with steps of {h:.3g}: its solves failed at larger steps"
                )
            last = h >= t_max - t
            h = min(h, t_max - t)
            x = advance(p, h)
            if x is None:
                h /= 4
                if h < first_step * 1e-6:
                    raise SolverError(
                        f"{what}: Newton's method stalls at t = {t:.3g} even with a step of {h:.3g}: the flow may "
                        "have left the scores' range, more digits may be needed, or the data are degenerate"
                    )
                continue
            p, t, step = x, t_max if last else t + h, step + 1
            if t >= marks[0]:
                while marks and marks[0] <= t:
                    marks.pop(0)
                record(step, t, p)
            h = min(2 * h, max((growth - 1) * t, first_step))
    traj.extra["nfev"] = [float(evaluations())] * len(traj)
    traj.stopped = "t_max"
    model.p.copy_(_float64(p).to(device=device, dtype=dtype))
    model.validate()
    return traj
