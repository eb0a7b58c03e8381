"""Training: the one-step update on ``E``, phase-2 training of ``p``, and joint training.

* :func:`one_step` — phase 1 of the theory: one full-batch gradient step of size ``eta0`` on ``E``.
* :func:`train_p` — phase 2: ``p`` trained with ``E`` frozen, by plain gradient descent in
  gradient-flow mode (small steps; the flow time is ``t = lr * steps``) or by normalised GD
  (``p <- p - lr * grad / ||grad||``).
* :func:`gradient_flow` — phase 2 by an adaptive ODE integrator (scipy ``solve_ivp``), to follow
  the flow over many decades of ``t``; :func:`implicit_flow` — the same flow by implicit steps, for
  stiff flows (two tokens selected together).
* :func:`train_joint` — ``E`` and ``p`` (optionally ``v``) together with full-batch Adam, for the
  real-data experiments.

All use the exact closed-form gradients of :mod:`tokensel.models.gradients`, and record a
:class:`Trajectory`.
"""

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
from . import checkpoints, loop
from .loop import StepResult, Trajectory
from .progress import bar
from .settings import SETTINGS, TrainSettings

POSITIVE = Real(min=0.0, min_inclusive=False)
#: phase 2 trains the binary model's ``p``
BINARY_MODEL = Instance(AttentionModel, what="an AttentionModel")
#: a direction the run is compared with (such as ``p_mm``), or None
REFERENCE = Tensor("float", ndim=1, finite=True, allow_none=True)
MONITOR = Function("a function p -> dict of floats", allow_none=True)
RECORDS = Int(min=1, max=10**7)


#: a flow (:func:`train_p`, :func:`train_p_v`, :func:`gradient_flow`, :func:`implicit_flow`) whose ``E`` has at most
#: this many entries, and whose batch has fewer than ``SMALL_BATCH`` tokens, runs torch on one thread (its thread count
#: restored after): on more, each of its many small calls may wait for a sleeping thread to wake
SMALL_E = 2**16
SMALL_BATCH = 50_000


@contextmanager
def _one_thread_if_small(E: torch.Tensor, batch: RaggedBatch) -> Iterator[None]:
    """torch on one thread for the duration, where ``E`` and ``batch`` are small (a flow's ten to hundred thousand
    gradient evaluations of a few microseconds each), and its thread count restored after.

    On two threads, torch splits some of these small operations between them (``E p`` and ``E^T A`` for ``d`` of 512
    and more at ``|S| = 36``; ``exp`` over a few thousand entries), and every such call then waits for the second
    thread to wake: about 0.1 ms where idle threads sleep (``OMP_WAIT_POLICY=PASSIVE``, as the Makefile has them),
    twenty times the work."""
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


@declare(steps=Int(min=0, max=MAX_STEPS), count=Int(min=1, max=10**7))
def record_steps(steps: int, count: int = 200) -> np.ndarray:
    """About ``count`` log-spaced step indices in ``0..steps``, always including both ends."""
    if steps < 1:
        return np.array([0])
    pts = np.unique(np.round(np.logspace(0, np.log10(steps), count)).astype(np.int64))
    return np.unique(np.concatenate([[0], pts, [steps]]))


def _prepare(model, batch: RaggedBatch, reference):
    """What phase 2 checks of its arguments together before it starts: the model's parameters (changed in place
    since it was made?), the batch against the model, the reference's length against ``p``. Returns the
    reference in the dtype and on the device of ``p``."""
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


@declare(error=InvalidParameterError, model=MODEL, batch=Batch(), eta0=POSITIVE, stable=Bool())
def one_step(model: _Model, batch: RaggedBatch, eta0: float, stable: bool = True) -> _Model:
    """Phase 1: a copy of ``model`` after one full-batch gradient step of size ``eta0`` on ``E``.

    ``p`` and ``v`` are unchanged. With ``p = 0`` the update is exactly ``-eta0 * B v^T``.

    Introduced in chapter 02.
    """
    _prepare(model, batch, None)
    out = model.copy()
    gradients(model, batch, stable=stable).apply_to_E(out.E, eta0)
    return out


@declare(
    error=InvalidParameterError,
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
    """Phase 2: train ``model.p`` in place with ``E`` and ``v`` frozen.

    ``method="gd"`` is plain gradient descent (gradient-flow mode: ``t = lr * step``);
    ``method="normalized"`` is normalised GD, ``p <- p - lr * grad / ||grad||``. With a
    ``reference`` direction (e.g. ``p_mm``) the cosine to it is recorded. The run stops early when
    the gradient underflows to exactly zero, or when ``||p||`` exceeds ``max_norm``.
    ``monitor(p)``, if given, returns a dict of floats recorded with every record.

    Introduced in chapter 03.
    """
    ref = _prepare(model, batch, reference)
    E, p, v = model.E, model.p, model.v
    w = E @ v
    grad_p, cos = p_gradient_of(E, w, batch, stable), unchecked(cosine)  # checked here, once
    rec = set(record_steps(int(steps), records).tolist())
    traj = Trajectory(method=method)
    disable = None if progress is None else not progress
    with bar(steps, f"train p ({method})", disable=disable) as pb, _one_thread_if_small(E, batch):
        for step in range(int(steps) + 1):
            loss, grad = grad_p(p)
            gnorm = float(grad.norm())
            last = step == steps
            if step in rec or last or gnorm == 0.0:
                t = lr * step if method == "gd" else step
                traj.append(
                    step,
                    t,
                    loss,
                    p.norm(),
                    gnorm,
                    cos(p, ref) if ref is not None else float("nan"),
                    **(monitor(p) if monitor else {}),
                )
            if gnorm == 0.0:
                traj.stopped = "underflow"
                break
            if max_norm is not None and float(p.norm()) > max_norm:
                traj.stopped = "max_norm"
                if step not in rec:
                    traj.append(
                        step,
                        lr * step if method == "gd" else step,
                        loss,
                        p.norm(),
                        gnorm,
                        cos(p, ref) if ref is not None else float("nan"),
                        **(monitor(p) if monitor else {}),
                    )
                break
            if last:
                break
            p.sub_(grad, alpha=lr if method == "gd" else lr / gnorm)
            pb.update(1)
    model.validate()
    return traj


@declare(
    error=InvalidParameterError,
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
    """Phase 2 with the read-out trained too: normalised gradient descent on ``p`` and ``v`` jointly
    (``(p, v) <- (p, v) - lr * g / ||g||``, ``g`` the gradient of both), ``E`` frozen; with ``train_v=False``
    only ``p`` moves (the normalised GD of :func:`train_p`). In place; records the loss, ``||p||``, ``||v||`` and
    the training accuracy. Chapter 06 asks whether training ``v`` changes the direction ``p`` converges to."""
    model.check_batch(batch)
    y = batch.labels.to(model.E.dtype)
    rec = set(record_steps(int(steps), records).tolist())
    traj = Trajectory(method="normalized" + (" (p, v)" if train_v else " (p)"))
    desc = f"train p{', v' if train_v else ''} (normalised GD)"
    disable = None if progress is None else not progress
    with bar(steps, desc, disable=disable) as pb, _one_thread_if_small(model.E, batch):
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
    error=InvalidParameterError,
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
    """Phase 2 by integrating ``dp/dt = -grad_p L`` with scipy's adaptive RK45 up to ``t_max``.

    The step size grows with ``t`` as the gradient decays, so decades of flow time cost only
    hundreds of gradient evaluations. ``model.p`` is set to ``p(t_max)``; recorded at ``records``
    log-spaced times in ``[1e-3, t_max]`` (and ``t = 0``); ``monitor(p)``, if given, returns a dict
    of floats recorded at each of those times.

    A flow the integrator cannot follow (a stiff one, where part of the scores settles at a finite optimum
    while the rest diverges: :func:`implicit_flow`) raises :class:`~tokensel.errors.SolverError`; with
    ``on_failure="stop"`` it ends instead at the last recorded time the integrator reached, with ``model.p``
    set there and ``stopped`` saying where and why (``t_max`` when it got there). A stiff flow may also crawl
    on without failing (its steps held at the settled scores' time scale while ``t`` is far from ``t_max``):
    with ``max_evaluations`` the integration stops after that many gradient evaluations with a
    :class:`~tokensel.errors.SolverError` (whatever ``on_failure`` says), ``model.p`` unchanged.

    Introduced in chapter 03.
    """
    from scipy.integrate import solve_ivp

    ref = _prepare(model, batch, reference)
    E, v = model.E, model.v
    w = E @ v
    dtype, device = model.p.dtype, model.p.device
    grad_p = p_gradient_of(E, w, batch, stable)  # checked here, once

    evaluations = [0, 0.0]  # gradient evaluations, and the time of the last

    def rhs(t, y):
        evaluations[0] += 1
        evaluations[1] = t
        if max_evaluations is not None and evaluations[0] > max_evaluations:
            raise _Budget
        p = torch.from_numpy(y).to(device=device, dtype=dtype)
        return -grad_p(p)[1].cpu().numpy().astype(np.float64)

    t_eval = np.logspace(-3, np.log10(t_max), records)
    t_eval = np.unique(np.concatenate([[0.0], t_eval[t_eval < t_max], [float(t_max)]]))
    try:
        with _one_thread_if_small(E, batch):
            sol = solve_ivp(
                rhs,
                (0.0, float(t_max)),
                model.p.detach().cpu().numpy().astype(np.float64),
                method="RK45",
                t_eval=t_eval,
                rtol=rtol,
                atol=atol,
            )
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
        traj.append(
            k,
            t,
            loss,
            p.norm(),
            grad.norm(),
            cosine(p, ref) if ref is not None else float("nan"),
            **(monitor(p) if monitor else {}),
        )
    traj.extra["nfev"] = [float(sol.nfev)] * len(traj)
    traj.stopped = "t_max" if sol.status >= 0 else f"solver failed after t = {sol.t[-1]:.3g}: {sol.message}"
    model.p.copy_(torch.from_numpy(sol.y[:, -1]).to(device=device, dtype=dtype))
    model.validate()
    return traj


def _finite_product_bound(*pairs) -> bool:
    """Whether every ``a b^T`` of the ``(a, b)`` pairs, summed, is certainly finite (no overflow)."""
    total = 0.0
    for a, b in pairs:
        if not (all_finite(a) and all_finite(b)):
            return False
        width = b.shape[1] if b.ndim == 2 else 1  # a (K-column) product sums K terms per entry
        total += width * float(a.abs().max()) * float(b.abs().max())
    return total < float(torch.finfo(pairs[0][0].dtype).max) / 4


@declare(
    error=InvalidParameterError,
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
    """Train ``params`` (a subset of ``"E", "p", "v"``) jointly with full-batch Adam, in place, with the steps,
    learning rate, evaluation cadence, checkpoint and progress bar of ``settings`` (a
    :class:`~tokensel.training.settings.TrainSettings`; None: its defaults).

    Gradients are the exact closed forms (never O(#tokens x d)). Records the training loss and
    accuracy, and the test loss and accuracy when ``test_batch`` is given, every ``settings.eval_every``
    steps and at the end.

    Every argument is checked before the model changes. A step whose loss or gradient is not finite
    stops the run with :class:`~tokensel.errors.DivergenceError`, the model left as it was before it.

    With ``settings.checkpoint`` (a file path) the parameters, the optimiser state and the trajectory are
    saved every ``settings.checkpoint_every`` steps and at the end; a run started with an existing
    checkpoint of the same run (same ``recipe``, data, initial parameters, dtype and settings; see
    :mod:`tokensel.training.checkpoints`) resumes from it, and finishes with exactly the result of an
    uninterrupted run. A checkpoint of another run is refused.

    Introduced in chapter 05.
    """
    settings = loop.prologue(model, batch, test_batch, settings)
    tensors = {name: getattr(model, name) for name in params}
    multiclass = isinstance(model, MultiClassAttentionModel)
    y = batch.labels if multiclass else batch.labels.to(model.E.dtype)
    # E's update from the gradient's factors, in one pass (loop.low_rank_adam), where the kernel applies; else
    # the gradient formed in a reused buffer (a fresh |S| x d allocation per step costs page faults)
    low_rank = "E" in tensors and loop.low_rank_applies(model.E)
    gE_buffer = torch.empty_like(model.E) if "E" in tensors and not low_rank else None

    # the arguments are checked above, once; a non-finite E makes the loss or grad_p so, which step() checks
    grads = gradients_of_checked
    # E's Adam pass also forms the next step's scores E [p, V] (at p and V after their update), where the step's
    # gradient is the fused one that reads them: one pass over E fewer per step, the same bits
    after = None
    if low_rank and fused_applies(batch, model.E, True):
        V = (lambda: model.v) if multiclass else (lambda: model.v[:, None])
        after = loop.ScoresAfter(lambda: torch.cat([model.p[:, None], V()], 1))

    def step(take_grad: bool) -> StepResult:
        gr = grads(model, batch, scores=None if after is None else after.take())
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

    saved = {"E": model.E, "p": model.p, "v": model.v}
    meta = (
        None
        if settings.checkpoint is None
        else checkpoints.fingerprint(
            recipe,
            batch,
            saved,
            dict(params=tuple(params), lr=settings.lr, steps=settings.steps, eval_every=settings.eval_every),
            test_batch,
        )
    )
    return loop.adam(
        model,
        list(tensors.values()),
        step,
        settings,
        method="adam",
        label="train (Adam)",
        test_batch=test_batch,
        saved=saved,
        fingerprint=meta,
    )


def _score_gradient(batch: RaggedBatch, c: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """``A = dL/dc`` (|S|) at the scores ``c`` with the values ``w`` frozen (the stable formula)."""
    if fused_applies(batch, c, True):
        return fused_grads(batch, torch.stack([c, w], 1))[2][:, 0]
    return score_value_grads(batch, c, w, stable=True).A


@declare(
    error=InvalidParameterError,
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
    """Phase 2's gradient flow ``dp/dt = -grad_p L`` by backward (implicit) Euler steps, for flows that are
    *stiff*: when part of the scores settles at a finite optimum (two tokens selected together, their score
    gap held by the loss) while the rest diverges, an explicit integrator (:func:`gradient_flow`) must keep its
    steps below that optimum's time scale and cannot reach large ``t``.

    The flow moves the scores ``c = E p`` by ``dc/dt = -G A(c)`` with ``G = E E^T`` and ``A = dL/dc``. Each step
    solves ``c' = c - h G A(c')`` by Newton's method (the Hessian ``dA/dc`` by central differences, token by
    token, so that the settled and the diverging scores do not mix; a backtracking line search on the
    residual) and moves ``p`` by ``-h E^T A(c')``; the step ``h`` starts at ``first_step`` and grows to
    ``(growth - 1) t``, and is cut by 4 after a failed solve. Backward Euler is first order: the path at
    moderate ``t`` is the flow's up to ``O(h)``, while the settled scores (a fixed point of the step) and the
    direction the scores diverge in are the flow's. Records as :func:`gradient_flow` (at the first step past
    each of ``records`` log-spaced times; ``t`` is the step's time). Needs ``|S| <= 4000`` (``G`` is |S| x |S|).
    With ``max_evaluations``, the integration stops after that many gradient evaluations (the Hessians' included)
    with a :class:`~tokensel.errors.SolverError` naming the time and step it reached, ``model.p`` unchanged: a
    bound for flows whose steps stop growing (the solves keep failing at steps far below ``t``).

    In float64 the solves fail from ``t`` of about ``1e16`` on a stiff flow: the settled scores' loss terms cancel
    there below float64's 16 digits, and the diverging direction's gradient (of order ``1/t``) drowns in their
    rounding. With ``digits``, every step is solved in ``digits``-digit arithmetic instead, in ``p`` with the
    Hessian in closed form (``tokensel.training.precise``; each gradient and each Hessian counts as one
    evaluation): slow, for small problems, but it follows such a flow to ``t`` of about ``10 ** (3 * digits / 4)``.

    Introduced in chapter 05.
    """
    reference = _prepare(model, batch, reference)
    if model.vocab_size > 4000:
        raise InvalidParameterError(
            f"implicit_flow forms the |S| x |S| Gram matrix: |S| = {model.vocab_size} > 4000; use gradient_flow"
        )
    if digits is not None:
        return _implicit_flow_precise(
            model, batch, t_max, reference, records, first_step, growth, monitor, max_evaluations, digits
        )
    dtype, device = model.p.dtype, model.p.device
    E = model.E.detach().to(torch.float64).cpu()
    cpu = batch.to("cpu")
    w = E @ model.v.detach().to(torch.float64).cpu()
    G = E @ E.T
    S = G.shape[0]
    gnorm = float(torch.linalg.matrix_norm(G, 2))
    eye = torch.eye(S, dtype=torch.float64)
    nfev = 0

    def A(c):
        nonlocal nfev
        nfev += 1
        return _score_gradient(cpu, c, w)

    def hessian(c):
        eps = 1e-5
        J = torch.empty(S, S, dtype=torch.float64)
        for j in range(S):
            e = torch.zeros(S, dtype=torch.float64)
            e[j] = eps
            J[:, j] = (A(c + e) - A(c - e)) / (2 * eps)
        return (J + J.T) / 2

    def solve(c, h):
        """``c'`` with ``c' - c + h G A(c') = 0``, or None when Newton's method stalls."""
        x, Ax = c.clone(), A(c)
        F = h * (G @ Ax)
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
                A2 = A(x2)
                F2 = x2 - c + h * (G @ A2)
                if float(F2.norm()) < (1 - 1e-4 * lam) * fn:
                    break
                lam /= 2
            else:
                return x if fn <= 1e-6 * scale else None
            x, Ax, F = x2, A2, F2
        return None

    p = model.p.detach().to(torch.float64).cpu().clone()
    grid = np.logspace(-3, np.log10(t_max), records)
    marks = [float(x) for x in grid[grid < t_max]] + [float(t_max)]
    traj = Trajectory(method="implicit flow")
    ref = None if reference is None else reference.detach().to(torch.float64).cpu()

    def record(step, t):
        loss, grad = p_gradient(E, p, w, cpu, True)
        pt = p.to(device=device, dtype=dtype)
        traj.append(
            step,
            t,
            loss,
            p.norm(),
            grad.norm(),
            cosine(p, ref) if ref is not None else float("nan"),
            **(monitor(pt) if monitor else {}),
        )

    with _one_thread_if_small(E, cpu):
        record(0, 0.0)
        t, h, step = 0.0, first_step, 0
        while t < t_max:
            if max_evaluations is not None and nfev > max_evaluations:
                raise SolverError(
                    f"implicit_flow reached only t = {t:.3g} of {t_max:.3g} in {max_evaluations} gradient evaluations, "
                    f"with steps of {h:.3g}: its solves failed at larger steps"
                )
            h = min(h, t_max - t)
            c = E @ p
            x = solve(c, h)
            if x is None:
                h /= 4
                if h < first_step * 1e-6:
                    raise SolverError(
                        f"implicit_flow: Newton's method stalls at t = {t:.3g} even with a step of {h:.3g}: "
                        "the flow may have left the scores' range (overflow) or the data are degenerate"
                    )
                continue
            p = p - h * (E.T @ A(x))
            t += h
            step += 1
            if t >= marks[0] or t >= t_max:
                while marks and marks[0] <= t:
                    marks.pop(0)
                record(step, t)
            h = min(2 * h, max((growth - 1) * t, first_step))
    traj.extra["nfev"] = [float(nfev)] * len(traj)
    traj.stopped = "t_max"
    model.p.copy_(p.to(device=device, dtype=dtype))
    model.validate()
    return traj


def _implicit_flow_precise(
    model, batch, t_max, reference, records, first_step, growth, monitor, max_evaluations, digits
) -> Trajectory:
    """:func:`implicit_flow`'s steps in ``digits``-digit arithmetic (its arguments checked there)."""
    from .precise import PreciseLoss, backward_euler

    dtype, device = model.p.dtype, model.p.device
    E = model.E.detach().to(torch.float64).cpu()
    cpu = batch.to("cpu")
    w = E @ model.v.detach().to(torch.float64).cpu()
    loss = PreciseLoss(E, model.v, cpu, digits)
    grid = np.logspace(-3, np.log10(t_max), records)
    marks = [float(x) for x in grid[grid < t_max]] + [float(t_max)]
    traj = Trajectory(method=f"implicit flow ({digits} digits)")
    ref = None if reference is None else reference.detach().to(torch.float64).cpu()

    def record(step, t, p_np):
        p = torch.from_numpy(p_np)
        lval, grad = p_gradient(E, p, w, cpu, True)
        traj.append(
            step,
            t,
            lval,
            p.norm(),
            grad.norm(),
            cosine(p, ref) if ref is not None else float("nan"),
            **(monitor(p.to(device=device, dtype=dtype)) if monitor else {}),
        )

    p0 = model.p.detach().to(torch.float64).cpu().numpy()
    record(0, 0.0, p0.copy())
    final = backward_euler(loss, p0, t_max, marks, record, first_step, growth, max_evaluations)
    traj.extra["nfev"] = [float(loss.evaluations)] * len(traj)
    traj.stopped = "t_max"
    model.p.copy_(torch.tensor([float(a) for a in final], dtype=dtype, device=device))
    model.validate()
    return traj
