"""Token statistics of a labelled batch (average signed frequency ``alpha``, posterior gap, token classes)
and what a vector's scores select, attend to or separate; tokens binned by their gap are
:mod:`tokensel.analysis.shapes`."""

from __future__ import annotations

import numpy as np
import torch

from ..data.batch import Batch, RaggedBatch
from ..errors import InvalidArgumentError
from ..loss import logistic
from ..models.core import scatter_tokens, segment_max, segment_softmax
from ..validation import Array, Choice, Real, RealArray, Tensor, declare

POSITIVE, NEGATIVE, IRRELEVANT = 1, -1, 0

#: a batch with ±1 labels (most statistics), a K-class one, and any
BINARY, CLASSES, ANY = Batch("binary"), Batch("classes"), Batch()
#: one finite value per token of the vocabulary (scores ``c``, values ``w``)
PER_TOKEN = Tensor("float", shape=("S",), finite=True)
#: a boolean mask over the vocabulary, and one over the token occurrences
TOKEN_MASK = Tensor("bool", shape=("S",))
OCCURRENCE_MASK = Tensor("bool", shape=("tokens",))
TOL = Real(min=0.0)


@declare(batch=BINARY)
def counts(batch: RaggedBatch):
    """Occurrences of every token in positive and in negative sequences: ``(pos, neg)``. Introduced in chapter 01."""
    y = batch.labels[batch.seg]
    ones = torch.ones_like(y)
    return scatter_tokens(ones * (y > 0), batch), scatter_tokens(ones * (y < 0), batch)


@declare(batch=BINARY, normalize=Choice("length", "count"))
def alpha(batch: RaggedBatch, normalize: str = "length") -> torch.Tensor:
    """Average signed frequency of every token: ``(1/n) sum_i y_i n_s(X_i) / T_i`` (``"length"``, with which the
    one-step constant is exactly ``eta0 / 2``), or positive minus negative occurrences (``"count"``).
    Introduced in chapter 01."""
    y = batch.labels
    if normalize == "length":
        per_occ = (y / batch.lengths.to(torch.float64))[batch.seg]
        return scatter_tokens(per_occ, batch) / batch.n
    return scatter_tokens(y[batch.seg], batch)


@declare(batch=BINARY, per=Choice("occurrence", "document"))
def posterior_gap(batch: RaggedBatch, per: str = "occurrence") -> torch.Tensor:
    """``P(y=+1 | s) - P(y=-1 | s)`` for every token, counting occurrences or documents; NaN for absent tokens.
    Introduced in chapter 01."""
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


@declare(batch=BINARY, tol=TOL)
def token_classes(batch: RaggedBatch, tol: float = 1e-12):
    """Boolean masks ``positive``, ``negative``, ``irrelevant`` (the sign of ``alpha_s``, to ``tol``),
    ``completely_positive``, ``completely_negative`` and ``absent``. Introduced in chapter 01."""
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


@declare(batch=ANY, c=PER_TOKEN, tol=TOL)
def selection(batch: RaggedBatch, c: torch.Tensor, tol: float = 1e-9) -> torch.Tensor:
    """``S_X(p)`` as a flat mask: occurrences with ``c_{x_t} >= max_t' c_{x_t'} - tol`` for the scores
    ``c = E p`` (``tol`` is absolute: scale it by ``||p||`` when that is large). Introduced in chapter 01."""
    a = c[batch.ids]
    return a >= segment_max(a, batch)[batch.seg] - tol


@declare(batch=BINARY, w=PER_TOKEN, tol=TOL)
def optimal_tokens(batch: RaggedBatch, w: torch.Tensor, tol: float = 1e-9) -> torch.Tensor:
    """For frozen values ``w = E v``: the occurrences maximising ``y_i u_t`` in their sequence.
    Introduced in chapter 04."""
    yu = batch.labels.to(w.dtype)[batch.seg] * w[batch.ids]
    return yu >= segment_max(yu, batch)[batch.seg] - tol


@declare(batch=ANY, c=PER_TOKEN)
def attention(batch: RaggedBatch, c: torch.Tensor) -> torch.Tensor:
    """The softmax attention of every occurrence (aligned with ``batch.ids``) under the per-token scores ``c``.
    Introduced in chapter 04."""
    return segment_softmax(c[batch.ids], batch)[0]


@declare(batch=ANY, q=Tensor("float", shape=("tokens",)), mask=OCCURRENCE_MASK)
def selected_mass(batch: RaggedBatch, q: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Per-sequence softmax mass on the occurrences in ``mask``. Introduced in chapter 04."""
    return torch.zeros(batch.n, dtype=q.dtype, device=q.device).index_add_(0, batch.seg, q * mask.to(q.dtype))


@declare(batch=ANY, c=PER_TOKEN, token_mask=TOKEN_MASK)
def attention_share(batch: RaggedBatch, c: torch.Tensor, token_mask: torch.Tensor) -> tuple[float, float]:
    """``(mass, share)``: the attention the tokens of ``token_mask`` receive under the scores ``c`` against their
    share of the occurrences, per sequence and averaged (``mass < share``: attention turns away). Chapter 06."""
    mask = token_mask.to(batch.ids.device)[batch.ids]
    mass = selected_mass(batch, attention(batch, c.to(torch.float64)), mask)
    share = selected_mass(batch, 1.0 / batch.lengths.to(torch.float64)[batch.seg], mask)
    return float(mass.mean()), float(share.mean())


@declare(
    alpha_s=RealArray(shape=("S",), finite=False),
    gap=RealArray(shape=("S",), finite=False),
    frequent=Array("bool", shape=("S",)),
    weak=Real(min=0.0, max=1.0, min_inclusive=False),
    strong=Real(min=0.0, max=1.0),
)
def alpha_gap_reversals(alpha_s, gap, frequent, weak: float = 0.1, strong: float = 0.5) -> dict:
    """Where ``|alpha|`` and the posterior gap disagree: since ``alpha_s = freq_s Delta_s``, ``|alpha|`` can rank a
    frequent, weakly polar word (``|Delta| < weak``) above a rare, strongly polar one (``>= strong``). Returns
    both groups' ids, the ``reversed`` pairs ``(f, r)`` and their share of all pairs. Chapter 06."""
    a = torch.as_tensor(alpha_s, dtype=torch.float64).cpu()
    g = torch.as_tensor(gap, dtype=torch.float64).cpu()
    f = torch.as_tensor(frequent).cpu()
    if strong < weak:
        raise InvalidArgumentError(f"strong must be >= weak = {weak}, got {strong}")
    known = torch.isfinite(g) & torch.isfinite(a)
    F = torch.nonzero(known & f & (g.abs() < weak)).flatten()
    R = torch.nonzero(known & ~f & (g.abs() >= strong)).flatten()
    if len(F) == 0 or len(R) == 0:
        raise InvalidArgumentError(
            f"{len(F)} frequent, weakly polar and {len(R)} rare, strongly polar words: both groups must be "
            "non-empty (change weak, strong or the frequency threshold)"
        )
    rev = a[F].abs()[:, None] > a[R].abs()[None, :]
    i, j = torch.nonzero(rev, as_tuple=True)
    pairs = torch.stack([F[i], R[j]], 1)
    return dict(frequent_weak=F, rare_strong=R, reversed=pairs, share_reversed=float(rev.double().mean()))


@declare(pairs=Tensor("int", shape=(None, 2)), x=RealArray(ndim=1, finite=False))
def side_with_gap(pairs: torch.Tensor, x) -> float:
    """The share of the reversed pairs ``(f, r)`` of :func:`alpha_gap_reversals` in which the token statistic
    ``x`` ranks ``r`` above ``f``: 1 when ``x`` sides with the posterior gap, 0 when with ``|alpha|``.
    Introduced in chapter 06."""
    x = torch.as_tensor(x, dtype=torch.float64).cpu()
    if len(pairs) == 0:
        raise InvalidArgumentError("pairs must be the non-empty (k, 2) 'reversed' pairs of alpha_gap_reversals")
    if x.ndim != 1 or int(pairs.max()) >= len(x) or int(pairs.min()) < 0:
        raise InvalidArgumentError(f"x needs one value per token (at least {int(pairs.max()) + 1}), got {len(x)}")
    return float((x[pairs[:, 1]] > x[pairs[:, 0]]).double().mean())


@declare(batch=ANY, mask=OCCURRENCE_MASK, token_mask=TOKEN_MASK)
def contains(batch: RaggedBatch, mask: torch.Tensor, token_mask: torch.Tensor) -> torch.Tensor:
    """Per sequence: does every occurrence of a token in ``token_mask`` lie in ``mask`` (True without one)?
    Introduced in chapter 04."""
    needed = token_mask[batch.ids]
    missing = needed & ~mask
    return torch.zeros(batch.n, dtype=torch.long, device=mask.device).index_add_(0, batch.seg, missing.long()) == 0


@declare(batch=CLASSES)
def alpha_multiclass(batch: RaggedBatch) -> torch.Tensor:
    """Class-``k`` signed frequency of every token, ``alpha_{s,k} = (1/n) sum_i (1{y_i = k} - 1/K) n_s(X_i) / T_i``.
    Introduced in chapter 02."""
    K = batch.num_classes
    assert K is not None  # the declaration
    onehot = torch.nn.functional.one_hot(batch.labels, K).to(torch.float64) - 1.0 / K  # n x K
    per_occ = (onehot / batch.lengths.to(torch.float64)[:, None])[batch.seg]
    out = torch.zeros(batch.vocab_size, K, dtype=torch.float64, device=per_occ.device)
    return out.index_add_(0, batch.ids, per_occ) / batch.n


@declare(batch=CLASSES)
def class_gap(batch: RaggedBatch) -> torch.Tensor:
    """One-vs-rest posterior gap ``P(y = k | s) - P(y != k | s)`` of every token and class; NaN for absent ones."""
    K = batch.num_classes
    assert K is not None  # the declaration
    onehot = torch.nn.functional.one_hot(batch.labels, K).to(torch.float64)[batch.seg]  # per occurrence
    per_class = torch.zeros(batch.vocab_size, K, dtype=torch.float64, device=onehot.device)
    per_class.index_add_(0, batch.ids, onehot)
    total = per_class.sum(1, keepdim=True)
    return torch.where(total > 0, (2 * per_class - total) / total.clamp(min=1), torch.nan)


@declare(batch=ANY, x=PER_TOKEN, token_mask=TOKEN_MASK)
def separation(batch: RaggedBatch, x: torch.Tensor, token_mask: torch.Tensor) -> torch.Tensor:
    """Per sequence: the least ``x`` of its marked tokens minus the largest of its others (``+inf`` without
    others, ``-inf`` without marked ones): positive when every marked token is strictly above."""
    vals = x[batch.ids].to(torch.float64)
    marked = token_mask.to(torch.bool)[batch.ids]
    inf = torch.full_like(vals, torch.inf)
    low = -segment_max(torch.where(marked, -vals, -inf), batch)
    high = segment_max(torch.where(marked, -inf, vals), batch)
    has_marked = segment_max(marked.to(torch.float64), batch) > 0
    return torch.where(has_marked, low - high, torch.full_like(low, -torch.inf))


@declare(batch=BINARY, w=PER_TOKEN, token_mask=TOKEN_MASK)
def value_lead(batch: RaggedBatch, w: torch.Tensor, token_mask: torch.Tensor) -> torch.Tensor:
    """Per sequence: :func:`separation` of the label-signed values ``y_i w``, positive when the marked token has
    the best value for its label (the hypothesis of the loss-floor argument). Introduced in chapter 03."""
    return torch.where(batch.labels > 0, separation(batch, w, token_mask), separation(batch, -w, token_mask))


@declare(batch=BINARY, w=PER_TOKEN)
def best_value(batch: RaggedBatch, w: torch.Tensor) -> torch.Tensor:
    """Per sequence: ``max_t y_i u_t``, the best label-signed value among its tokens. Introduced in chapter 04."""
    return segment_max(batch.labels.to(w.dtype)[batch.seg] * w[batch.ids], batch)


@declare(batch=BINARY, w=PER_TOKEN)
def loss_floor(batch: RaggedBatch, w: torch.Tensor) -> float:
    """``L* = (1/n) sum_i log(1 + exp(-max_t y_i u_t))``: no ``p`` gets below it, since an output averages its
    sequence's values. Introduced in chapter 03."""
    return float(logistic(best_value(batch, w)).mean())


@declare(
    t=RealArray(shape=("points",)),
    cos=RealArray(shape=("points",)),
    t_min=Real(min=1.0, min_inclusive=False),
)
def direction_rate(t, cos, t_min: float) -> tuple[float, float]:
    """``(slope, intercept)`` of ``log sqrt(2 (1 - cos))`` (the distance of the directions) against ``log ln t``
    over the points with ``t >= t_min`` and ``cos < 1``: -1 when the residual ``p_t - p* ln t`` stays bounded.
    Introduced in chapter 05."""
    if np.any(np.abs(cos) > 1 + 1e-12):
        raise InvalidArgumentError("cos must lie in [-1, 1]")
    keep = (t >= t_min) & (cos < 1)
    if keep.sum() < 3:
        raise InvalidArgumentError(f"only {int(keep.sum())} points with t >= {t_min} and cos < 1: need 3")
    dist = np.sqrt(2 * (1 - cos[keep]))
    slope, intercept = np.polyfit(np.log(np.log(t[keep])), np.log(dist), 1)
    return float(slope), float(intercept)
