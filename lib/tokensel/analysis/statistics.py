"""Token statistics of a labelled batch, and the selection made by a ``<cls>`` vector.

* :func:`alpha` — average signed frequency ``alpha_s = (1/n) sum_i y_i n_s(X_i) / T_i`` (``"length"``
  normalisation, with which the one-step constant is exactly ``eta0 / 2``), or the poster's count
  ``sum_i y_i n_s(X_i)`` (``"count"``).
* :func:`posterior_gap` — ``Delta_s = P(y=+1 | s) - P(y=-1 | s)``, per occurrence or per document.
* :func:`token_classes` — positive / negative / irrelevant by the sign of ``alpha_s``; completely
  positive / negative when ``s`` occurs only in positive / negative sequences.
* :func:`selection` — ``S_X(p)``: the occurrences whose score is within ``tol`` of their sequence's
  maximum.
* :func:`optimal_tokens` — for frozen ``E``, the occurrences with the best value ``y_i u_t``.
* :func:`direction_rate` — the rate at which ``p_t / ||p_t||`` approaches its limit.

Tokens binned by their posterior gap (the two shapes) are :mod:`tokensel.analysis.shapes`.
"""

from __future__ import annotations

import numpy as np
import torch

from ..data.batch import Batch, RaggedBatch
from ..errors import InvalidBatchError, InvalidParameterError
from ..loss import logistic
from ..models.core import scatter_tokens, segment_max, segment_softmax
from ..validation import Choice, Real, RealArray, Tensor, declare

POSITIVE, NEGATIVE, IRRELEVANT = 1, -1, 0

#: a batch with ±1 labels (most statistics), a K-class one, and any
BINARY, CLASSES, ANY = Batch("binary"), Batch("classes"), Batch()
#: one finite value per token of the vocabulary (scores ``c``, values ``w``)
PER_TOKEN = Tensor("float", shape=("S",), finite=True)
#: a boolean mask over the vocabulary, and one over the token occurrences
TOKEN_MASK = Tensor("bool", shape=("S",))
OCCURRENCE_MASK = Tensor("bool", shape=("tokens",))
TOL = Real(min=0.0)


@declare(error=InvalidBatchError, batch=BINARY)
def counts(batch: RaggedBatch):
    """Occurrence counts of every token in positive and in negative sequences: ``(pos, neg)``."""
    y = batch.labels[batch.seg]
    ones = torch.ones_like(y)
    return scatter_tokens(ones * (y > 0), batch), scatter_tokens(ones * (y < 0), batch)


@declare(error=InvalidBatchError, batch=BINARY, normalize=Choice("length", "count"))
def alpha(batch: RaggedBatch, normalize: str = "length") -> torch.Tensor:
    """Average signed frequency of every token (float64, length |S|).

    ``normalize="length"``: ``(1/n) sum_i y_i n_s(X_i) / T_i``. ``normalize="count"``: occurrences
    in positive minus occurrences in negative sequences.
    """
    y = batch.labels
    if normalize == "length":
        per_occ = (y / batch.lengths.to(torch.float64))[batch.seg]
        return scatter_tokens(per_occ, batch) / batch.n
    return scatter_tokens(y[batch.seg], batch)


@declare(error=InvalidBatchError, batch=BINARY, per=Choice("occurrence", "document"))
def posterior_gap(batch: RaggedBatch, per: str = "occurrence") -> torch.Tensor:
    """``P(y=+1 | s) - P(y=-1 | s)`` for every token; NaN for tokens that never occur.

    ``per="occurrence"`` counts occurrences; ``per="document"`` counts the documents containing ``s``.
    """
    y = batch.labels
    if per == "occurrence":
        pos, neg = counts(batch)
    else:
        # one entry per distinct (sequence, token) pair
        key = torch.unique(batch.seg * batch.vocab_size + batch.ids)
        seq, tok = key // batch.vocab_size, key % batch.vocab_size
        yy = y[seq]
        pos = torch.zeros(batch.vocab_size, dtype=torch.float64, device=y.device).index_add_(0, tok, (yy > 0).double())
        neg = torch.zeros(batch.vocab_size, dtype=torch.float64, device=y.device).index_add_(0, tok, (yy < 0).double())
    tot = pos + neg
    gap = (pos - neg) / tot
    return torch.where(tot > 0, gap, torch.full_like(gap, float("nan")))


@declare(error=InvalidBatchError, batch=BINARY, tol=TOL)
def token_classes(batch: RaggedBatch, tol: float = 1e-12):
    """Classes of every token: a dict of boolean tensors ``positive``, ``negative``, ``irrelevant``
    (by the sign of ``alpha_s`` with tolerance ``tol``), ``completely_positive``,
    ``completely_negative`` and ``absent`` (tokens that never occur)."""
    a = alpha(batch)
    pos, neg = counts(batch)
    return {
        "positive": a > tol,
        "negative": a < -tol,
        "irrelevant": a.abs() <= tol,
        "completely_positive": (pos > 0) & (neg == 0),
        "completely_negative": (neg > 0) & (pos == 0),
        "absent": (pos + neg) == 0,
    }


@declare(error=InvalidBatchError, batch=ANY, c=PER_TOKEN, tol=TOL)
def selection(batch: RaggedBatch, c: torch.Tensor, tol: float = 1e-9) -> torch.Tensor:
    """``S_X(p)`` as a flat boolean mask: occurrences with ``c_{x_t} >= max_t' c_{x_t'} - tol``.

    ``c = E p`` holds the token scores. The tolerance is absolute; use a relative one
    (``tol * ||p||``) when ``||p||`` is large.
    """
    a = c[batch.ids]
    return a >= segment_max(a, batch)[batch.seg] - tol


@declare(error=InvalidBatchError, batch=BINARY, w=PER_TOKEN, tol=TOL)
def optimal_tokens(batch: RaggedBatch, w: torch.Tensor, tol: float = 1e-9) -> torch.Tensor:
    """For frozen values ``w = E v``: occurrences maximising ``y_i u_t`` in their sequence (flat mask)."""
    yu = batch.labels.to(w.dtype)[batch.seg] * w[batch.ids]
    return yu >= segment_max(yu, batch)[batch.seg] - tol


@declare(error=InvalidBatchError, batch=ANY, c=PER_TOKEN)
def attention(batch: RaggedBatch, c: torch.Tensor) -> torch.Tensor:
    """The softmax attention ``q_t`` of every token occurrence (flat, aligned with ``batch.ids``) for the
    per-token scores ``c`` (e.g. ``E @ p`` for any ``p``; :meth:`~tokensel.AttentionModel.attention` for
    the model's own ``p``)."""
    return segment_softmax(c[batch.ids], batch)[0]


@declare(error=InvalidBatchError, batch=ANY, q=Tensor("float", shape=("tokens",)), mask=OCCURRENCE_MASK)
def selected_mass(batch: RaggedBatch, q: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Per-sequence softmax mass on the occurrences in ``mask``."""
    return torch.zeros(batch.n, dtype=q.dtype, device=q.device).index_add_(0, batch.seg, q * mask.to(q.dtype))


@declare(error=InvalidBatchError, batch=ANY, mask=OCCURRENCE_MASK, token_mask=TOKEN_MASK)
def contains(batch: RaggedBatch, mask: torch.Tensor, token_mask: torch.Tensor) -> torch.Tensor:
    """Per sequence: does every occurrence of a token in ``token_mask`` (|S| bools) lie in ``mask``?

    Sequences without such a token count as True.
    """
    needed = token_mask[batch.ids]
    missing = needed & ~mask
    return torch.zeros(batch.n, dtype=torch.long, device=mask.device).index_add_(0, batch.seg, missing.long()) == 0


@declare(error=InvalidBatchError, batch=CLASSES)
def alpha_multiclass(batch: RaggedBatch) -> torch.Tensor:
    """Class-``k`` signed frequency of every token, (|S| x K):
    ``alpha_{s,k} = (1/n) sum_i (1{y_i = k} - 1/K) n_s(X_i) / T_i``
    ``= (1/n) sum_i [((K-1)/K) 1{y_i = k} - (1/K) 1{y_i != k}] n_s(X_i) / T_i``."""
    K = batch.num_classes
    assert K is not None  # the declaration
    onehot = torch.nn.functional.one_hot(batch.labels, K).to(torch.float64) - 1.0 / K  # n x K
    per_occ = (onehot / batch.lengths.to(torch.float64)[:, None])[batch.seg]
    out = torch.zeros(batch.vocab_size, K, dtype=torch.float64, device=per_occ.device)
    return out.index_add_(0, batch.ids, per_occ) / batch.n


@declare(error=InvalidBatchError, batch=CLASSES)
def class_gap(batch: RaggedBatch) -> torch.Tensor:
    """One-vs-rest posterior gap of every token and class, (|S| x K), per occurrence:
    ``P(y = k | s) - P(y != k | s)``; NaN for tokens that never occur. With two classes it is
    :func:`posterior_gap` for class 1 (and its negative for class 0)."""
    K = batch.num_classes
    assert K is not None  # the declaration
    onehot = torch.nn.functional.one_hot(batch.labels, K).to(torch.float64)[batch.seg]  # per occurrence
    per_class = torch.zeros(batch.vocab_size, K, dtype=torch.float64, device=onehot.device)
    per_class.index_add_(0, batch.ids, onehot)
    total = per_class.sum(1, keepdim=True)
    return torch.where(total > 0, (2 * per_class - total) / total.clamp(min=1), torch.nan)


@declare(error=InvalidBatchError, batch=ANY, x=PER_TOKEN, token_mask=TOKEN_MASK)
def separation(batch: RaggedBatch, x: torch.Tensor, token_mask: torch.Tensor) -> torch.Tensor:
    """Per sequence: ``min`` of ``x`` over its tokens in ``token_mask`` minus ``max`` over its other
    tokens (``x`` and ``token_mask`` are per vocabulary token). Positive means every marked token is
    strictly above every unmarked one; ``+inf`` when a sequence has no unmarked token, ``-inf``
    when it has no marked token."""
    vals = x[batch.ids].to(torch.float64)
    marked = token_mask.to(torch.bool)[batch.ids]
    inf = torch.full_like(vals, torch.inf)
    low = -segment_max(torch.where(marked, -vals, -inf), batch)
    high = segment_max(torch.where(marked, -inf, vals), batch)
    has_marked = segment_max(marked.to(torch.float64), batch) > 0
    return torch.where(has_marked, low - high, torch.full_like(low, -torch.inf))


@declare(error=InvalidBatchError, batch=BINARY, w=PER_TOKEN, token_mask=TOKEN_MASK)
def value_lead(batch: RaggedBatch, w: torch.Tensor, token_mask: torch.Tensor) -> torch.Tensor:
    """Per sequence: ``y_i u`` of its marked tokens (the lowest of them) minus the best ``y_i u`` of its
    other tokens, with ``u = w`` the values (:func:`separation` of ``y_i w``). Positive when the marked
    token has the best value for its sequence's label: the hypothesis of the loss-floor argument."""
    return torch.where(batch.labels > 0, separation(batch, w, token_mask), separation(batch, -w, token_mask))


@declare(error=InvalidBatchError, batch=BINARY, w=PER_TOKEN)
def best_value(batch: RaggedBatch, w: torch.Tensor) -> torch.Tensor:
    """Per sequence: ``max_t y_i u_t``, the best label-signed value among its tokens (``u = w``)."""
    return segment_max(batch.labels.to(w.dtype)[batch.seg] * w[batch.ids], batch)


@declare(error=InvalidBatchError, batch=BINARY, w=PER_TOKEN)
def loss_floor(batch: RaggedBatch, w: torch.Tensor) -> float:
    """``L* = (1/n) sum_i log(1 + exp(-max_t y_i u_t))``: no ``p`` gets the loss below this, since
    every output is an average of its sequence's values (``w = E v``)."""
    return float(logistic(best_value(batch, w)).mean())


@declare(
    error=InvalidParameterError,
    t=RealArray(shape=("points",)),
    cos=RealArray(shape=("points",)),
    t_min=Real(min=1.0, min_inclusive=False),
)
def direction_rate(t, cos, t_min: float) -> tuple[float, float]:
    """The rate of directional convergence: slope of ``log ||p_t/|p_t| - p*/|p*| ||`` against ``log ln t``.

    ``||a/|a| - b/|b| || = sqrt(2 (1 - cos))``; for separable logistic problems it decays like ``1/ln t``
    (slope -1) when the residual ``p_t - p* ln t`` stays bounded. Fits the points with ``t >= t_min``
    (``t_min > 1``) and ``cos < 1``; returns ``(slope, intercept)``. Raises when fewer than three points
    remain.
    """
    if np.any(np.abs(cos) > 1 + 1e-12):
        raise InvalidParameterError("cos must lie in [-1, 1]")
    keep = (t >= t_min) & (cos < 1)
    if keep.sum() < 3:
        raise InvalidParameterError(f"only {int(keep.sum())} points with t >= {t_min} and cos < 1: need 3")
    dist = np.sqrt(2 * (1 - cos[keep]))
    slope, intercept = np.polyfit(np.log(np.log(t[keep])), np.log(dist), 1)
    return float(slope), float(intercept)


# --- uncertainty and controls for the shapes (chapter 06) ------------------------------------------------------
