"""Synthetic data for the theory chapters, each a :class:`SyntheticData` (a batch and every token's planted
role). Token ids are laid out as ``[positive important | negative important | irrelevant]`` where roles are
planted. :func:`assumption1_pairs` makes Assumption 1 hold *in the sample* (``alpha_s = 0`` exactly for
irrelevant tokens); the other generators show what breaks when it does not."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import torch

from ..errors import InvalidArgumentError
from ..seeding import rng
from ..validation import Either, Instance, Int, Numbers, Real, Tensor, declare
from .batch import RaggedBatch

if TYPE_CHECKING:
    import pandas as pd

POSITIVE, NEGATIVE, IRRELEVANT = 1, -1, 0


@dataclass(frozen=True)
class SyntheticData:
    """A synthetic batch and each token's planted role: +1, -1 or 0 (irrelevant), or for
    :func:`independent_tokens` its bias ``b_s`` (``planted_gap = delta * b_s`` is its expected posterior gap)."""

    batch: RaggedBatch
    planted: np.ndarray
    description: str
    planted_gap: np.ndarray | None = None

    @property
    def important(self) -> torch.Tensor:
        """Boolean mask of the tokens with a planted role (``planted != 0``), one entry per token."""
        return torch.from_numpy(np.asarray(self.planted) != 0)

    @property
    def important_occurrences(self) -> torch.Tensor:
        """Boolean mask of the important token occurrences, aligned with ``batch.ids``."""
        return self.important.to(self.batch.device)[self.batch.ids]


MAX_SIZE = 10**8  # sequences, tokens per sequence or vocabulary: more would not fit in memory
COUNT = Int(min=1, max=MAX_SIZE)


def _length(least: int) -> Either:
    """A sequence length: an int, or an inclusive range ``(lo, hi)`` of them."""
    n = Int(min=least, max=MAX_SIZE)
    return Either(n, Numbers(int, min=least, max=MAX_SIZE, length=2), what=f"an int >= {least} or a (lo, hi) pair")


LENGTH = _length(2)
FRACTION = Real(min=0.0, max=1.0, max_inclusive=False)
SEEDS = Numbers(int, min=0, max=MAX_SIZE)


def _lengths(length, count, gen):
    """``count`` sequence lengths: ``length``, or drawn from the range ``(lo, hi)``."""
    if isinstance(length, (tuple, list)):
        lo, hi = length
        if lo > hi:
            raise InvalidArgumentError(f"length range is empty: lo={lo} > hi={hi}")
        return gen.integers(lo, hi + 1, size=count)
    return np.full(count, length)


def _planted_roles(n_important, n_irrelevant):
    return np.concatenate(
        [np.full(n_important, POSITIVE), np.full(n_important, NEGATIVE), np.full(n_irrelevant, IRRELEVANT)]
    ).astype(np.int64)


@declare(
    n_pairs=COUNT,
    n_important=COUNT,
    n_irrelevant=COUNT,
    length=LENGTH,
    seed=Int(min=0),
    per_sequence=COUNT,
)
def assumption1_pairs(
    n_pairs: int, n_important: int, n_irrelevant: int, length=8, seed: int = 0, per_sequence: int = 1
) -> SyntheticData:
    """Assumption-1 data with ``alpha_s = 0`` exactly for irrelevant tokens: each pair of sequences shares its
    irrelevant tokens and holds a positive (negative) important token in its positive (negative) sequence, same place;
    ``per_sequence > 1`` puts that many of the label's sign in each (beyond Assumption 1). Introduced in chapter 01."""
    if per_sequence > n_important:
        raise InvalidArgumentError(
            f"per_sequence={per_sequence} distinct important tokens need n_important >= it, got {n_important}"
        )
    g = rng(seed)
    T = _lengths(length, n_pairs, g)
    if per_sequence > 1 and T.min() <= per_sequence:
        raise InvalidArgumentError(f"length must exceed per_sequence={per_sequence} (room for irrelevant tokens)")
    P = n_important
    seqs, labels = [], []
    for k in range(n_pairs):
        if per_sequence == 1:  # the original draw order, so that seeds keep their data
            irr = 2 * P + g.integers(0, n_irrelevant, size=T[k] - 1)
            pos = g.integers(0, T[k])
            s_pos, s_neg = g.integers(0, P), P + g.integers(0, P)
            seqs.append(np.insert(irr, pos, s_pos))
            seqs.append(np.insert(irr, pos, s_neg))
        else:
            irr = 2 * P + g.integers(0, n_irrelevant, size=T[k] - per_sequence)
            pos = np.sort(g.choice(T[k], size=per_sequence, replace=False))
            imp_pos = g.choice(P, size=per_sequence, replace=False)
            imp_neg = P + g.choice(P, size=per_sequence, replace=False)
            for imp in (imp_pos, imp_neg):
                seq = irr.copy()
                for j, at in enumerate(pos):
                    seq = np.insert(seq, at, imp[j])
                seqs.append(seq)
        labels += [1, -1]
    vocab = 2 * P + n_irrelevant
    batch = RaggedBatch.from_sequences(seqs, labels, vocab_size=vocab)
    return SyntheticData(
        batch,
        _planted_roles(P, n_irrelevant),
        f"Assumption-1 pairs: {n_pairs} pairs, {P}+{P} important and "
        f"{n_irrelevant} irrelevant tokens, length {length}"
        + (f", {per_sequence} important tokens per sequence" if per_sequence > 1 else ""),
    )


#: the Assumption-1 data that chapters 03-05 share
THEORY_PAIRS = dict(n_pairs=100, n_important=3, n_irrelevant=30, length=8, seed=0)


@declare(seed=Int(min=0))
def theory_pairs(seed: int = 0) -> SyntheticData:
    """``assumption1_pairs(**THEORY_PAIRS)`` at ``seed``: the data chapters 03-05 share."""
    return assumption1_pairs(**{**THEORY_PAIRS, "seed": seed})


@declare(
    n=Int(min=2, max=MAX_SIZE),
    n_important=COUNT,
    n_irrelevant=COUNT,
    length=LENGTH,
    seed=Int(min=0),
)
def iid_irrelevant(n: int, n_important: int, n_irrelevant: int, length=8, seed: int = 0) -> SyntheticData:
    """Assumption-1 data whose irrelevant tokens are drawn independently for every sequence (``n`` even, labels
    balanced): irrelevant only in expectation, their ``alpha_s`` is about ``1 / sqrt(n * n_irrelevant)``.
    Introduced in chapter 04."""
    if n % 2:
        raise InvalidArgumentError(f"n must be even (balanced labels), got {n}")
    g = rng(seed)
    T = _lengths(length, n, g)
    P = n_important
    labels = np.array([1, -1] * (n // 2))
    seqs = []
    for i in range(n):
        irr = 2 * P + g.integers(0, n_irrelevant, size=T[i] - 1)
        imp = g.integers(0, P) if labels[i] == 1 else P + g.integers(0, P)
        seqs.append(np.insert(irr, g.integers(0, T[i]), imp))
    batch = RaggedBatch.from_sequences(seqs, labels, vocab_size=2 * P + n_irrelevant)
    return SyntheticData(
        batch,
        _planted_roles(P, n_irrelevant),
        f"i.i.d. irrelevant tokens: n={n}, {P}+{P} important and {n_irrelevant} irrelevant tokens, length {length}",
    )


@declare(vocab_size=Int(min=2, max=MAX_SIZE), frac_irrelevant=FRACTION)
def token_biases(vocab_size: int, frac_irrelevant: float = 0.5) -> np.ndarray:
    """Biases ``b_s`` for :func:`independent_tokens`: zero for a fraction of tokens, the rest
    evenly spaced in ``[-1, -h] ∪ [h, 1]`` (symmetric, so they sum to zero)."""
    m = vocab_size - int(round(frac_irrelevant * vocab_size))
    m -= m % 2
    if m < 2:
        raise InvalidArgumentError("too few relevant tokens: lower frac_irrelevant or raise vocab_size")
    half = np.linspace(1.0, 0.0, m // 2, endpoint=False)[::-1]  # (0, 1], evenly spaced
    b = np.zeros(vocab_size)
    b[: m // 2] = half
    b[m // 2 : m] = -half
    return b


@declare(
    n=Int(min=2, max=MAX_SIZE),
    vocab_size=Int(min=2, max=MAX_SIZE),
    length=LENGTH,
    delta=Real(min=0.0, max=1.0),
    frac_irrelevant=FRACTION,
    seed=Int(min=0),
)
def independent_tokens(
    n: int, vocab_size: int, length=20, delta: float = 1.0, frac_irrelevant: float = 0.5, seed: int = 0
) -> SyntheticData:
    """Tokens drawn i.i.d. given the (balanced) label: ``P(x_t = s | y) = (1 + delta * y * b_s) / |S|``
    (:func:`token_biases`), so token ``s`` has expected posterior gap ``delta * b_s``. Introduced in chapter 01."""
    if n % 2:
        raise InvalidArgumentError(f"n must be even (balanced labels), got {n}")
    b = token_biases(vocab_size, frac_irrelevant)
    g = rng(seed)
    T = _lengths(length, n, g)
    labels = np.array([1, -1] * (n // 2))
    probs = {y: (1 + delta * y * b) / vocab_size for y in (1, -1)}
    for y in probs:
        probs[y] = probs[y] / probs[y].sum()
    seqs = [g.choice(vocab_size, size=T[i], p=probs[labels[i]]) for i in range(n)]
    batch = RaggedBatch.from_sequences(seqs, labels, vocab_size=vocab_size)
    return SyntheticData(
        batch,
        b,
        f"independent tokens: n={n}, |S|={vocab_size}, length {length}, "
        f"delta={delta}, {frac_irrelevant:.0%} irrelevant",
        planted_gap=delta * b,
    )


@declare(
    n=Int(min=2, max=MAX_SIZE),
    vocab_size=Int(min=2, max=MAX_SIZE),
    num_classes=Int(min=2, max=MAX_SIZE),
    length=LENGTH,
    delta=Real(min=0.0, max=1.0),
    frac_irrelevant=FRACTION,
    seed=Int(min=0),
)
def independent_tokens_multiclass(
    n: int,
    vocab_size: int,
    num_classes: int,
    length=20,
    delta: float = 1.0,
    frac_irrelevant: float = 0.5,
    seed: int = 0,
) -> SyntheticData:
    """K-class :func:`independent_tokens`: ``P(x_t = s | y = k) ∝ 1 + delta * b_{s,k}`` with ``b = 1`` for a
    relevant token's home class (round robin), ``-1/(K-1)`` for the others; ``planted`` is the home class (-1
    for irrelevant tokens). Introduced in chapter 02."""
    K = num_classes
    if vocab_size < K:
        raise InvalidArgumentError(f"vocab_size must be at least num_classes={K} (a token per class), got {vocab_size}")
    if n % K:
        raise InvalidArgumentError(f"n must be a multiple of num_classes={K} (balanced labels), got {n}")
    m = vocab_size - int(round(frac_irrelevant * vocab_size))
    home = np.full(vocab_size, -1)
    home[:m] = np.arange(m) % K
    b = np.zeros((vocab_size, K))
    for s in range(m):
        b[s] = -1.0 / (K - 1)
        b[s, home[s]] = 1.0
    probs = 1 + delta * b  # vocab x K
    probs = probs / probs.sum(0, keepdims=True)
    g = rng(seed)
    T = _lengths(length, n, g)
    labels = np.arange(n) % K
    seqs = [g.choice(vocab_size, size=T[i], p=probs[:, labels[i]]) for i in range(n)]
    batch = RaggedBatch.from_sequences(seqs, labels, vocab_size=vocab_size, num_classes=K)
    return SyntheticData(
        batch,
        home,
        f"independent tokens, {K} classes: n={n}, |S|={vocab_size}, "
        f"length {length}, delta={delta}, {frac_irrelevant:.0%} irrelevant",
    )


@declare(n_pairs=COUNT)
def contested_pairs(n_pairs: int) -> SyntheticData:
    """Data with a finite stationary point of the phase-2 loss: per pair, tokens ``a = 2k`` (+1) and
    ``b = 2k + 1`` (-1) in ``(a, a)+``, ``(b, b)-`` and ``(a, b)`` with both labels, whose loss
    ``l(f) + l(-f)`` is least at the finite gap ``c_a - c_b = ln(-u_b / u_a)``. Introduced in chapter 03."""
    seqs, labels = [], []
    for k in range(n_pairs):
        a, b = 2 * k, 2 * k + 1
        seqs += [[a, a], [b, b], [a, b], [a, b]]
        labels += [1, -1, 1, -1]
    batch = RaggedBatch.from_sequences(seqs, labels, vocab_size=2 * n_pairs)
    planted = np.tile(np.array([POSITIVE, NEGATIVE], dtype=np.int64), n_pairs)
    return SyntheticData(
        batch,
        planted,
        f"contested pairs: {n_pairs} token pairs (a, b), sequences (a, a)+, (b, b)-, (a, b)+ and (a, b)-",
    )


@declare(
    E=Tensor("float", shape=(None, "d"), finite=True),
    v=Tensor("float", shape=("d",), finite=True),
    p0=Tensor("float", shape=("d",), finite=True),
)
def contested_stationary_point(E: torch.Tensor, v: torch.Tensor, p0: torch.Tensor) -> torch.Tensor:
    """The stationary point the flow from ``p0`` reaches on :func:`contested_pairs` data: it stays in
    ``p0 + span(D)``, ``D_k = E_{2k} - E_{2k+1}``, and is stationary where ``D_k^T p = ln(-u_b / u_a)`` (which
    needs ``u_a > 0 > u_b`` and independent ``D_k``). Introduced in chapter 03."""
    if E.shape[0] % 2:
        raise InvalidArgumentError(f"E must have 2 * n_pairs rows (two tokens per pair), got {E.shape[0]}")
    u = E @ v
    ua, ub = u[0::2], u[1::2]
    if not (bool(torch.all(ua > 0)) and bool(torch.all(ub < 0))):
        raise InvalidArgumentError(
            "every pair needs u_a > 0 > u_b for a finite stationary point; take a larger first step eta0"
        )
    D = E[0::2] - E[1::2]
    target = torch.log(-ub / ua) - D @ p0
    G = D @ D.T
    if torch.linalg.matrix_rank(G) < G.shape[0]:
        raise InvalidArgumentError("the differences E_a - E_b are linearly dependent: take d >= n_pairs")
    return p0 + D.T @ torch.linalg.solve(G, target)


@declare(
    n=Int(min=2, max=MAX_SIZE),
    n_polar=COUNT,
    n_irrelevant=COUNT,
    length=_length(1),
    delta_tilde=Real(min=0.0, max=1.0, allow_none=True),
    seed=Int(min=0),
)
def eq15_tokens(
    n: int, n_polar: int, n_irrelevant: int, length=8, delta_tilde: float | None = None, seed: int = 0
) -> SyntheticData:
    """Our reconstruction of the paper's Eq. 15 (which we do not have): each position is irrelevant with
    probability ``delta_tilde`` (default the paper's ``(|S| - 1) / |S|``), else a uniform polar token of the
    label's class; so a sequence of length ``T`` holds Binomial(T, 1 - delta_tilde) polar tokens."""
    if n % 2:
        raise InvalidArgumentError(f"n must be even (balanced labels), got {n}")
    P = n_polar
    vocab = 2 * P + n_irrelevant
    if delta_tilde is None:
        delta_tilde = (vocab - 1) / vocab
    g = rng(seed)
    T = _lengths(length, n, g)
    labels = np.array([1, -1] * (n // 2))
    seqs = []
    for i in range(n):
        irrelevant = g.random(T[i]) < delta_tilde
        polar = g.integers(0, P, size=T[i]) + (0 if labels[i] == 1 else P)
        seqs.append(np.where(irrelevant, 2 * P + g.integers(0, n_irrelevant, size=T[i]), polar))
    batch = RaggedBatch.from_sequences(seqs, labels, vocab_size=vocab)
    return SyntheticData(
        batch,
        _planted_roles(P, n_irrelevant),
        f"Eq. 15 (reconstructed): n={n}, {P}+{P} polar and {n_irrelevant} irrelevant tokens, length {length}, "
        f"delta_tilde={delta_tilde:.4g}",
    )


@declare(data=Instance(SyntheticData))
def assumption1_report(data: SyntheticData) -> dict:
    """Whether data with planted roles (+1, -1, 0) satisfy Assumption 1 in the sample: ``one_each`` (the share of
    sequences with exactly one important token, of their sign), ``complete`` (every important token only in
    sequences of its sign), ``max_alpha_irrelevant`` and ``holds`` (all three, ``alpha_s = 0`` to 1e-12)."""
    role = np.asarray(data.planted)
    if not np.isin(role, (POSITIVE, NEGATIVE, IRRELEVANT)).all():
        raise InvalidArgumentError(
            "assumption1_report needs planted roles +1, -1, 0 (not the biases of independent_tokens)"
        )
    b = data.batch
    ids, seg = b.ids.cpu().numpy(), b.seg.cpu().numpy()
    y = b.labels.cpu().numpy()[seg]
    r = role[ids]
    own = np.bincount(seg, weights=(r == y).astype(float), minlength=b.n)
    other = np.bincount(seg, weights=(r == -y).astype(float), minlength=b.n)
    one_each = (own == 1) & (other == 0)
    complete = bool(np.all((r == 0) | (r == y)))
    weight = y / b.lengths.cpu().numpy()[seg]
    alpha = np.bincount(ids, weights=weight, minlength=b.vocab_size) / b.n
    max_irr = float(np.abs(alpha[role == IRRELEVANT]).max()) if (role == IRRELEVANT).any() else 0.0
    return dict(
        one_each=float(one_each.mean()),
        complete=complete,
        max_alpha_irrelevant=max_irr,
        holds=bool(one_each.all() and complete and max_irr <= 1e-12),
    )


@declare(seeds=SEEDS)
def assumption1_frequency(seeds, **eq15) -> pd.DataFrame:
    """:func:`assumption1_report` of :func:`eq15_tokens` (``eq15``: its other arguments) per seed of ``seeds``."""
    import pandas as pd

    if "seed" in eq15:
        raise InvalidArgumentError("pass the seeds as seeds=[...], not seed=")
    return pd.DataFrame([dict(seed=s, **assumption1_report(eq15_tokens(seed=s, **eq15))) for s in seeds])


#: the tokens of :func:`co_selected`: two partly polar tokens ``a``, ``b`` and two completely polar ones
CO_SELECTED_TOKENS = {"a": 0, "b": 1, "e": 2, "c": 3}


@declare(
    n_pairs=Int(min=4, max=MAX_SIZE),
    pools=Numbers(int, min=1, max=MAX_SIZE, length=3),
    length=Int(min=3, max=MAX_SIZE),
    seed=Int(min=0),
)
def co_selected(n_pairs: int, pools=(12, 4, 4), length: int = 6, seed: int = 0) -> SyntheticData:
    """Data on which the flow selects two tokens of one sequence together: partly polar ``a`` (+, 0), ``b`` (-, 1),
    completely polar ``e`` (+, 2), ``c`` (-, 3), irrelevant pools A, B, C (sizes ``pools``); pairs cycle through
    ``(a, A)+ (c, A)-``, ``(e, B)+ (b, B)-``, ``(a, C)+ (b, C)-`` and ``(a, b, C)`` with both labels, least at a finite
    ``a``-``b`` gap, so the flow ties them; with ``m_A != m_B`` untied max-margin ranks them apart (chapter 05)."""
    sizes, T = list(pools), length
    a, b, e, c = (CO_SELECTED_TOKENS[k] for k in "abec")
    start = np.cumsum([4, *sizes])  # pool A starts at 4, B after A, C after B
    kinds = [(a, c, 0, 1), (e, b, 1, 1), (a, b, 2, 1), (None, None, 2, 2)]  # positive, negative, pool, polar count
    g = rng(seed)
    seqs, labels = [], []
    for k in range(n_pairs):
        pos, neg, pool, polar = kinds[k % 4]
        irr = start[pool] + g.integers(0, sizes[pool], size=T - polar)
        if pos is None:
            seqs += [np.r_[a, b, irr], np.r_[a, b, irr]]
        else:
            seqs += [np.r_[pos, irr], np.r_[neg, irr]]
        labels += [1, -1]
    planted = np.zeros(4 + sum(sizes), dtype=np.int64)
    planted[[a, e]], planted[[b, c]] = POSITIVE, NEGATIVE
    batch = RaggedBatch.from_sequences(seqs, labels, vocab_size=len(planted))
    return SyntheticData(
        batch,
        planted,
        f"co-selected tokens: {n_pairs} pairs, partly polar a, b and polar e, c, irrelevant pools "
        f"{sizes[0]}, {sizes[1]}, {sizes[2]}, length {T}",
    )


@declare(
    delta_tildes=Instance(dict, what="a dict label -> delta_tilde"),
    seeds=SEEDS,
    n=Int(min=2, max=MAX_SIZE),
    n_polar=COUNT,
    n_irrelevant=COUNT,
    length=Int(min=2, max=MAX_SIZE),
)
def eq15_summary(delta_tildes: dict, seeds, n: int, n_polar: int, n_irrelevant: int, length: int) -> pd.DataFrame:
    """:func:`assumption1_frequency` per ``delta_tilde`` of ``delta_tildes`` (label -> value), one row each:
    ``holds`` (share of draws), ``one_each`` with its binomial prediction ``T (1 - dt) dt^(T - 1)`` and standard
    error ``se``, and the range of ``max_alpha_irrelevant``. Introduced in chapter 05."""
    import pandas as pd

    if not delta_tildes:
        raise InvalidArgumentError("delta_tildes must be a non-empty dict label -> delta_tilde, got {}")
    T = length
    rows = {}
    for label, dt in delta_tildes.items():
        draws = assumption1_frequency(seeds, n=n, n_polar=n_polar, n_irrelevant=n_irrelevant, length=T, delta_tilde=dt)
        p_one = T * (1 - dt) * dt ** (T - 1)
        row = dict(delta_tilde=float(dt), holds=float(draws.holds.mean()), one_each=float(draws.one_each.mean()))
        row.update(binomial=float(p_one), se=float(np.sqrt(p_one * (1 - p_one) / (n * len(draws)))))
        alpha = draws.max_alpha_irrelevant
        rows[label] = dict(row, min_alpha_irrelevant=float(alpha.min()), max_alpha_irrelevant=float(alpha.max()))
    return pd.DataFrame.from_dict(rows, orient="index")
