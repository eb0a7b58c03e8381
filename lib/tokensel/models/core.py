"""Segment operations over a ragged batch, and the exact loss gradients in closed form.

Notation (PAPER.md §1): scores ``c = E p``, values ``w = E v``; for occurrence ``t`` of sequence ``i``:
``a_t = c_{x_t}``, ``u_t = w_{x_t}``, ``q = softmax(a)``, ``f_i = sum_t q_t u_t``, ``g_i = (1/n) l'(y_i f_i) y_i``,
``l'(z) = -1/(1 + e^z)``:

    dL/dc_s = sum_{occurrences t of s} g_i q_t (u_t - f_i)      (vector ``A``)
    dL/dw_s = sum_{occurrences t of s} g_i q_t                  (vector ``B``)

so ``grad_E L = A p^T + B v^T``, ``grad_p L = E^T A`` and ``grad_v L = E^T B``. In saturation ``u_k - f`` loses every
digit; the exact identity ``u_t - f = (u_t - u_k) - sum_j q_j (u_j - u_k)`` with ``k`` a top token keeps them.
The reference (:func:`score_value_grads`, :func:`score_value_grads_multiclass`) runs on any device; the fused path
(:func:`fused_grads`, :mod:`tokensel.models.kernels`) is one compiled CPU pass."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..data.batch import Batch, RaggedBatch
from ..loss import logistic_slope, mean_logistic
from ..validation import Tensor, declare
from . import kernels

#: a flat array over the token occurrences of a batch, and one over its vocabulary
PER_OCCURRENCE = Tensor("real", shape=("tokens",))
PER_TOKEN = Tensor("float", shape=("S",))


@declare(batch=Batch(), x=PER_OCCURRENCE)
def segment_sum(x: torch.Tensor, batch: RaggedBatch) -> torch.Tensor:
    """Per-sequence sums of a flat per-token array."""
    return torch.zeros(batch.n, dtype=x.dtype, device=x.device).index_add_(0, batch.seg, x)


def segment_max(x: torch.Tensor, batch: RaggedBatch) -> torch.Tensor:
    """Per-sequence maxima of a flat per-token array."""
    out = torch.empty(batch.n, dtype=x.dtype, device=x.device)
    return out.scatter_reduce_(0, batch.seg, x, reduce="amax", include_self=False)


def scatter_tokens(x: torch.Tensor, batch: RaggedBatch) -> torch.Tensor:
    """Sum a flat per-occurrence array into a per-vocabulary-token array of length |S|."""
    return torch.zeros(batch.vocab_size, dtype=x.dtype, device=x.device).index_add_(0, batch.ids, x)


@declare(batch=Batch(), a=Tensor("float", shape=("tokens",)))
def segment_softmax(a: torch.Tensor, batch: RaggedBatch):
    """Softmax of the flat scores within each sequence. Returns ``(q, amax)``."""
    amax = segment_max(a, batch)
    e = torch.exp(a - amax[batch.seg])
    return e / segment_sum(e, batch)[batch.seg], amax


def logistic_loss(f: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Mean of ``log(1 + exp(-y f))`` (:func:`tokensel.loss.mean_logistic`)."""
    return mean_logistic(f, y)


@dataclass
class ScoreValueGrads:
    """Loss and its gradients in the scores ``c`` and values ``w``: ``f`` (n,), ``B`` (|S|,); K classes: (n, K),
    (|S|, K)."""

    loss: torch.Tensor
    f: torch.Tensor
    A: torch.Tensor  # dL/dc, length |S|
    B: torch.Tensor  # dL/dw


def _attend(batch: RaggedBatch, c: torch.Tensor, W: torch.Tensor, stable: bool):
    """``(dt, e, Z, f, u_minus_f)`` over the distinct entries for value columns ``W`` (|S| x K), stable reference
    ``k`` each sequence's last top-scoring entry."""
    dt = batch.distinct()
    seg, off = dt.seg, dt.offsets
    a, u = c[dt.ids], W[dt.ids]
    amax = torch.segment_reduce(a, "max", offsets=off)
    amax_t = amax[seg]
    e = torch.exp(a - amax_t) * dt.counts.to(c.dtype)
    Z = torch.segment_reduce(e, "sum", offsets=off)
    if stable:
        pos = torch.arange(a.numel(), device=a.device)
        top = torch.where(a == amax_t, pos, -1)
        ref = torch.full_like(amax, -1, dtype=pos.dtype).scatter_reduce_(0, seg, top, "amax")  # a top entry
        u_ref = W[dt.ids[ref]]  # u_k of that top token, n x K
        dev = u - u_ref[seg]  # u_t - u_k
        m = torch.segment_reduce(e[:, None] * dev, "sum", offsets=off, axis=0) / Z[:, None]  # f - u_k
        return dt, e, Z, u_ref + m, dev.sub_(m[seg])
    f = torch.segment_reduce(e[:, None] * u, "sum", offsets=off, axis=0) / Z[:, None]
    return dt, e, Z, f, u.sub_(f[seg])


def _scatter(dt, x: torch.Tensor, S: int) -> torch.Tensor:
    out = torch.zeros((S,) + tuple(x.shape[1:]), dtype=x.dtype, device=x.device)
    return out.index_add_(0, dt.ids, x)


def score_value_grads(batch: RaggedBatch, c: torch.Tensor, w: torch.Tensor, stable: bool = True) -> ScoreValueGrads:
    """Exact full-batch logistic-loss gradients in ``c = E p`` and ``w = E v`` over the distinct entries;
    ``stable=False`` uses the naive ``u_t - f``, to show saturation."""
    dt, e, Z, f, umf = _attend(batch, c, w[:, None], stable)
    f, umf = f[:, 0], umf[:, 0]
    y = batch.labels.to(f.dtype)
    loss = logistic_loss(f, y)
    g = logistic_slope(y * f) * y / batch.n  # dL/df_i
    h = (g / Z)[dt.seg] * e  # g_i q_t n_t
    S = batch.vocab_size
    return ScoreValueGrads(loss, f, _scatter(dt, h * umf, S), _scatter(dt, h, S))


def score_value_grads_multiclass(
    batch: RaggedBatch, c: torch.Tensor, W: torch.Tensor, stable: bool = True
) -> ScoreValueGrads:
    """Exact full-batch gradients of the softmax cross-entropy of the K-class model with respect to
    ``c = E p`` and ``W = E V`` (|S| x K); the logits are ``f_k = sum_t q_t u_{t,k}``."""
    dt, e, Z, f, umf = _attend(batch, c, W, stable)
    y = batch.labels
    logp = torch.log_softmax(f, dim=1)
    loss = -logp.gather(1, y[:, None]).mean()
    G = torch.exp(logp)
    G[torch.arange(batch.n, device=G.device), y] -= 1.0
    G /= batch.n  # dL/df_{i,k}
    h = G[dt.seg].mul_((e / Z[dt.seg])[:, None])  # (M x K): G_ik q_t n_t
    S = batch.vocab_size
    return ScoreValueGrads(loss, f, _scatter(dt, umf.mul_(h).sum(1), S), _scatter(dt, h, S))


def fused_applies(batch: RaggedBatch, c: torch.Tensor, stable: bool) -> bool:
    """Whether :func:`fused_grads` computes this evaluation: the stable form, on the CPU, in float32 or float64."""
    return (
        stable and batch.device.type == "cpu" and c.device.type == "cpu" and c.dtype in (torch.float32, torch.float64)
    )


@declare(batch=Batch())
def entry_plan(batch: RaggedBatch) -> kernels.EntryPlan:
    """The kernels' index arrays of ``batch``'s distinct entries (computed once per batch, cached)."""
    dt = batch.distinct()
    if "plan" not in dt.cache:
        dt.cache["plan"] = kernels.EntryPlan(dt.offsets.numpy(), dt.ids.numpy(), dt.counts.numpy(), batch.vocab_size)
    return dt.cache["plan"]


def fused_scores_values(E: torch.Tensor, PV: torch.Tensor) -> torch.Tensor:
    """``E PV`` in one pass over ``E`` (:func:`tokensel.models.kernels.scores_values`)."""
    return torch.from_numpy(kernels.scores_values(E.detach().numpy(), PV.detach().numpy()))


def fused_grads(batch: RaggedBatch, CW: torch.Tensor):
    """The stable score/value gradients by the fused kernel for ``CW = E [p, V]`` (|S| x (1 + K)): ``(loss, f, AB)``
    with ``AB = [A, B]``, as :func:`score_value_grads` (or its K-class twin) gives them."""
    multiclass = batch.num_classes is not None
    loss, f, AB = kernels.attention_grads(entry_plan(batch), CW.detach().numpy(), batch.labels.numpy(), multiclass)
    return loss, torch.from_numpy(f), torch.from_numpy(AB)


def fused_outputs(batch: RaggedBatch, CW: torch.Tensor) -> torch.Tensor:
    """The outputs (n,) or logits (n x K) for ``CW = E [p, V]`` by the fused kernel, without loss or gradients."""
    F = torch.from_numpy(kernels.attention_outputs(entry_plan(batch), CW.detach().numpy()))
    return F if batch.num_classes is not None else F[:, 0]
