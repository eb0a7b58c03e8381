"""Exact full-batch gradients with respect to ``E``, ``p`` and ``v`` (formulas: :mod:`tokensel.models.core`).

``grad_E L = A p^T + B v^T`` is kept factored (:class:`Gradients`): a step on ``E`` costs rank-one updates, O(|S| d).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from ..data.batch import Batch, RaggedBatch
from ..errors import InvalidParameterError
from ..validation import Bool, Instance, Real, Tensor, all_finite, declare, unchecked
from . import core, kernels
from .attention import AttentionModel, MultiClassAttentionModel

# called per training step with arguments the functions below have checked
fused_applies, fused_grads, fused_scores_values = (
    unchecked(core.fused_applies),
    unchecked(core.fused_grads),
    unchecked(core.fused_scores_values),
)
score_value_grads, score_value_grads_multiclass = (
    unchecked(core.score_value_grads),
    unchecked(core.score_value_grads_multiclass),
)


@dataclass
class Gradients:
    """The loss, outputs and gradients of one full-batch evaluation."""

    loss: float
    f: torch.Tensor  # outputs (n,), or logits (n x K) for the multi-class model
    A: torch.Tensor  # dL/dc with c = E p
    B: torch.Tensor  # dL/dw with w = E v, or dL/dW (|S| x K) with W = E V
    p: torch.Tensor  # grad_p L = E^T A
    v: torch.Tensor  # grad_v L = E^T B (d,), or grad_V L (d x K)
    _model_p: torch.Tensor
    _model_v: torch.Tensor

    @property
    def E(self) -> torch.Tensor:
        """``grad_E L = A p^T + B v^T`` materialised (|S| x d), as one (|S| x 2)(2 x d) product."""
        return self.E_into(None)

    @declare(out=Tensor("float", ndim=2, allow_none=True))
    def E_into(self, out: torch.Tensor | None) -> torch.Tensor:
        """``grad_E L`` into ``out`` (a reused buffer: no fresh |S| x d allocation per step), or a new tensor."""
        AB, PV = self.factors()
        return AB @ PV if out is None else torch.mm(AB, PV, out=out)

    def factors(self) -> tuple[torch.Tensor, torch.Tensor]:
        """``(AB, PV)`` with ``grad_E L = AB @ PV``: ``AB = [A, B]`` (|S| x (1 + K)) and ``PV = [p, V]^T``
        ((1 + K) x d; K = 1 for the binary model)."""
        B = self.B if self.B.ndim == 2 else self.B[:, None]
        V = self._model_v if self._model_v.ndim == 2 else self._model_v[:, None]
        return torch.cat([self.A[:, None], B], 1), torch.cat([self._model_p[None, :], V.T], 0)

    @declare(E=Tensor("float", ndim=2), lr=Real())
    def apply_to_E(self, E: torch.Tensor, lr: float) -> None:
        """In place: ``E <- E - lr * grad_E L`` (rank-one updates, or one low-rank product)."""
        if self.B.ndim == 1:
            E.addr_(self.A, self._model_p, alpha=-lr)
            E.addr_(self.B, self._model_v, alpha=-lr)
        else:
            E.sub_(self.E, alpha=lr)


MODEL = Instance(AttentionModel, MultiClassAttentionModel, what="an AttentionModel or MultiClassAttentionModel")


@declare(model=MODEL, batch=Batch(), stable=Bool(), fused=Bool(allow_none=True))
def gradients(model, batch: RaggedBatch, stable: bool = True, fused: bool | None = None) -> Gradients:
    """Loss and exact gradients of ``model`` (binary or multi-class) on the full ``batch``: by the fused kernel where it
    applies (:func:`tokensel.models.core.fused_applies`; ``fused=None``), else or with ``fused=False`` by the
    reference; ``fused=True`` insists on the kernel.

    Introduced in chapter 01."""
    if fused is not False and fused_applies(batch, model.E, stable):
        # a NaN or inf of E shows in the kernel's scores E p: no pass over E of its own
        model._check_batch_but_E(batch)
        return gradients_of_checked(model, batch, stable, fused, _E_checked=False)
    model.check_batch(batch)
    return gradients_of_checked(model, batch, stable, fused)


def gradients_of_checked(
    model,
    batch: RaggedBatch,
    stable: bool = True,
    fused: bool | None = None,
    _E_checked: bool = True,
    scores: torch.Tensor | None = None,
) -> Gradients:
    """:func:`gradients` unchecked, for a loop that checked once; ``scores``: ``E [p, V]`` already formed
    (:class:`tokensel.training.loop.ScoresAfter`), used by the fused path instead of reading ``E``."""
    E, p, v = model.E, model.p, model.v
    if fused and not fused_applies(batch, E, stable):
        raise InvalidParameterError(
            "fused=True needs stable=True and a float32/float64 model and batch on the "
            "CPU: use fused=None to fall back to the reference elsewhere"
        )
    multiclass = isinstance(model, MultiClassAttentionModel)
    PV = torch.cat([p[:, None], v if multiclass else v[:, None]], 1)
    fused = fused is not False and fused_applies(batch, E, stable)
    if fused:
        if scores is not None and (scores.shape != (E.shape[0], PV.shape[1]) or scores.dtype != E.dtype):
            raise InvalidParameterError(
                f"scores must be E [p, V] of shape {(E.shape[0], PV.shape[1])} and dtype {E.dtype}, got "
                f"{tuple(scores.shape)} {scores.dtype}"
            )
        # one pass over E for c = E p and W = E V (w = E v), unless the last update formed them
        CW = fused_scores_values(E, PV) if scores is None else scores
        if not _E_checked and not all_finite(CW):
            model.check_finite()  # a NaN or inf of E raises; a finite E whose scores overflow goes on, as before
        loss, f, AB = fused_grads(batch, CW)
        A, B = AB[:, 0].contiguous(), AB[:, 1:].contiguous() if multiclass else AB[:, 1].contiguous()
        gpv = torch.from_numpy(kernels.transposed_product(E.detach().numpy(), AB.numpy()))  # one pass over E
    else:
        CW = E @ PV  # one pass over E for c = E p and W = E V
        if multiclass:
            r = score_value_grads_multiclass(batch, CW[:, 0], CW[:, 1:], stable=stable)
        else:
            r = score_value_grads(batch, CW[:, 0], CW[:, 1], stable=stable)
        loss, f, A, B = float(r.loss), r.f, r.A, r.B
        gpv = torch.cat([A[None, :], B.T if multiclass else B[None, :]], 0) @ E  # one pass over E
    return Gradients(loss, f, A, B, gpv[0], gpv[1:].T if multiclass else gpv[1], p, v)


@declare(
    batch=Batch("binary"),
    E=Tensor("float", shape=("S", "d")),
    p=Tensor("float", shape=("d",)),
    w=Tensor("float", shape=("S",)),
    stable=Bool(),
)
def p_gradient(E: torch.Tensor, p: torch.Tensor, w: torch.Tensor, batch: RaggedBatch, stable: bool = True):
    """Phase 2's loss and ``grad_p L = E^T A`` with ``E`` frozen and ``w = E v`` computed once by the caller.
    Returns ``(loss, grad_p)`` (the loss a 0-d tensor).

    Introduced in chapter 03."""
    c = E @ p
    if fused_applies(batch, c, stable):
        loss, _, AB = fused_grads(batch, torch.stack([c, w], 1))
        return torch.scalar_tensor(loss, dtype=c.dtype), E.T @ AB[:, 0]
    r = score_value_grads(batch, c, w, stable=stable)
    return r.loss, E.T @ r.A


def p_gradient_of(E: torch.Tensor, w: torch.Tensor, batch: RaggedBatch, stable: bool = True):
    """:func:`p_gradient` with ``E``, ``w``, ``batch`` fixed: ``p -> (loss, grad_p)``, bitwise the same, laid out
    once for the flows' thousands of calls. ``p`` unchecked; one buffer reused: one thread at a time."""
    if not fused_applies(batch, w, stable):
        grad = unchecked(p_gradient)
        return lambda p: grad(E, p, w, batch, stable)
    plan = core.entry_plan(batch)
    CW = torch.empty((E.shape[0], 2), dtype=E.dtype).numpy()  # [c, w], as p_gradient stacks them
    CW[:, 1] = w.detach().numpy()
    labels = np.ascontiguousarray(batch.labels.numpy(), np.float64)

    def grad_p(p: torch.Tensor):
        c = E @ p
        CW[:, 0] = c.detach().numpy()
        loss, _, AB = kernels.attention_grads(plan, CW, labels, False)
        # scalar_tensor: the same 0-d tensor as torch.tensor, in less than half its time (some 100,000 calls a flow)
        return torch.scalar_tensor(loss, dtype=c.dtype), E.T @ torch.from_numpy(AB)[:, 0]

    return grad_p


@declare(model=MODEL, batch=Batch())
def autograd_gradients(model: AttentionModel, batch: RaggedBatch):
    """Reference gradients by torch.autograd on the gathered embeddings (O(#tokens d) memory, for tests and small
    batches): ``(loss, grad_E, grad_p, grad_v)``.

    Introduced in chapter 01."""
    from .core import logistic_loss, segment_softmax, segment_sum

    model.check_batch(batch)
    E = model.E.detach().clone().requires_grad_(True)
    p = model.p.detach().clone().requires_grad_(True)
    v = model.v.detach().clone().requires_grad_(True)
    X = E[batch.ids]  # (#tokens, d)
    q, _ = segment_softmax(X @ p, batch)
    if v.ndim == 2:  # multi-class: logits and cross-entropy
        f = torch.zeros(batch.n, v.shape[1], dtype=E.dtype).index_add_(0, batch.seg, q[:, None] * (X @ v))
        loss = torch.nn.functional.cross_entropy(f, batch.labels)
    else:
        f = segment_sum(q * (X @ v), batch)
        loss = logistic_loss(f, batch.labels.to(E.dtype))
    gE, gp, gv = torch.autograd.grad(loss, (E, p, v))
    return float(loss.detach()), gE, gp, gv
