"""Tokens binned by their posterior gap: the two shapes the book measures on trained embeddings.

* :func:`binned` — per-bin mean and spread of a token quantity against ``Delta_s`` or ``alpha_s``.
* :func:`shape_summary` — the U-gap of the scores and the rank correlation of the values with ``Delta``.
* :func:`within_bin_spread`, :func:`spreads`, :func:`values_spread`, :func:`standard_errors`,
  :func:`bin_noise_summary`, :func:`positive_side_rise` — spreads and noise of a binned table.
* :func:`shape_bootstrap`, :func:`frequency_matched` — intervals over words and the frequency-matched
  control.

Numpy and pandas on per-token arrays; the per-token statistics themselves come from
:mod:`tokensel.analysis.statistics`.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import torch

from ..errors import ArgumentTypeError, InvalidArgumentError
from ..validation import Bool, Choice, Constraint, Int, Pair, Real, RealArray, declare


class Table(Constraint):
    """A table (a pandas DataFrame) with the ``columns`` named, passed on as it is; ``what`` says which table
    (default: one from :func:`binned`); with ``nonempty``, at least one row."""

    def __init__(
        self, *columns: str, what: str = "a table from binned()", nonempty: bool = False, allow_none: bool = False
    ):
        super().__init__(allow_none=allow_none)
        self.columns, self.what, self.nonempty = columns, what, nonempty

    def describe(self) -> str:
        return f"{self.what} (columns {', '.join(self.columns)})"

    def check(self, value, name, dims):
        if not hasattr(value, "columns") or not set(self.columns) <= set(value.columns):
            raise ArgumentTypeError(f"{name} must be {self.describe()}, got {type(value).__name__}")
        if self.nonempty and len(value) == 0:
            raise InvalidArgumentError(f"{name} must be a non-empty {self.describe()}, got no rows")
        return value

    def _invalid(self, dims):
        out = [("a list", [1.0, 2.0]), ("an array", np.zeros((3, 3)))]
        return out + ([("no rows", self.example(dims).iloc[:0])] if self.nonempty else [])

    def example(self, dims):
        import pandas as pd

        if "count" in self.columns:
            return binned(np.arange(8.0), np.arange(8.0) % 3, bins=2)
        return pd.DataFrame({c: [0] for c in self.columns})


BINS = Int(min=1, max=10**6)
#: a quantity per token (NaN allowed: a token without a gap is left out)
PER_TOKEN = RealArray(ndim=1, finite=False)
CENTRAL = Real(min=0.0, min_inclusive=False)
TABLE = Table("count", "mean", "std")


@declare(
    x=RealArray(finite=False),
    y=RealArray(finite=False),
    bins=BINS,
    range_=Pair(Real(), allow_none=True),
    out_of_range=Choice("raise", "drop", "clip"),
)
def binned(x, y, bins: int = 20, range_=None, out_of_range: str = "raise"):
    """Tokens binned by ``x`` into ``bins`` equal-width bins; per bin the count, mean, std and the
    10% / 90% quantiles of ``y``. NaN entries of ``x`` or ``y`` are dropped. Returns a DataFrame.

    ``range_ = (lo, hi)`` fixes the bins' span (default: the finite ``x`` values' own range). Values of
    ``x`` outside it are handled as ``out_of_range`` says: ``"raise"`` (default) refuses them,
    ``"drop"`` leaves them out, ``"clip"`` counts them in the first or last bin.

    Introduced in chapter 06."""
    import pandas as pd

    if x.shape != y.shape:
        raise InvalidArgumentError(f"x and y must have the same shape, got {x.shape} and {y.shape}")
    keep = np.isfinite(x) & np.isfinite(y)
    x, y = x[keep], y[keep]
    if x.size == 0:
        raise InvalidArgumentError("no finite (x, y) pairs to bin")
    lo, hi = (float(x.min()), float(x.max())) if range_ is None else range_
    if not lo < hi:
        raise InvalidArgumentError(
            f"the binning range must have lo < hi, got ({lo!r}, {hi!r})"
            + ("" if range_ is not None else ": x has a single value")
        )
    outside = (x < lo) | (x > hi)
    if outside.any():
        if out_of_range == "raise":
            raise InvalidArgumentError(
                f"{int(outside.sum())} values of x lie outside range_ = ({lo!r}, {hi!r}): "
                "widen range_, or pass out_of_range='drop' or 'clip'"
            )
        if out_of_range == "drop":
            x, y = x[~outside], y[~outside]
    edges = np.linspace(lo, hi, bins + 1)
    idx = np.clip(np.searchsorted(edges, x, side="right") - 1, 0, bins - 1)
    rows = []
    for b in range(bins):
        yb = y[idx == b]
        rows.append(
            dict(
                bin=b,
                left=edges[b],
                right=edges[b + 1],
                center=(edges[b] + edges[b + 1]) / 2,
                count=yb.size,
                mean=yb.mean() if yb.size else np.nan,
                std=yb.std() if yb.size else np.nan,
                q10=np.quantile(yb, 0.1) if yb.size else np.nan,
                q90=np.quantile(yb, 0.9) if yb.size else np.nan,
            )
        )
    return pd.DataFrame(rows)


@declare(gap=PER_TOKEN, x=PER_TOKEN, bins=BINS, min_count=Int(min=2), normalize=Bool())
def within_bin_spread(gap, x, bins: int = 20, min_count: int = 5, normalize: bool = True) -> float:
    """The average over the bins of ``gap`` (:func:`binned`) holding at least ``min_count`` tokens of the
    within-bin standard deviation of ``x``. With ``normalize`` (default) ``x`` is first divided by its
    standard deviation over the binned tokens: how much tokens of similar gap differ, on a scale that does
    not depend on the size of ``x`` (1 when the bins explain nothing, near 0 when ``x`` is a function of
    the gap); without, in the units of ``x``."""
    g, v = torch.as_tensor(gap), torch.as_tensor(x)
    if g.shape != v.shape:
        raise InvalidArgumentError(f"gap and x need one entry per token each, got lengths {len(g)} and {len(v)}")
    seen = torch.isfinite(g) & torch.isfinite(v)
    scale = float(v[seen].std()) if normalize else 1.0
    if not scale > 0:
        raise InvalidArgumentError("x does not vary over the binned tokens: its spread cannot be normalised")
    table = binned(g, v / scale, bins=bins)
    kept = table[table["count"] >= min_count]
    if kept.empty:
        raise InvalidArgumentError(f"no bin holds {min_count} tokens: use fewer bins or a smaller min_count")
    return float(kept["std"].mean())


@declare(gap=PER_TOKEN, scores=PER_TOKEN, values=PER_TOKEN, bins=BINS, min_count=Int(min=2))
def spreads(gap, scores, values, bins: int = 20, min_count: int = 5) -> dict:
    """The within-bin spread (:func:`within_bin_spread`) of ``values`` (``E_s^T v``) and of ``scores``
    (``E_s^T p``) against ``gap``, in raw units (the paper's quantity) and normalised: a dict with keys
    ``values_raw``, ``values_normalised``, ``scores_raw``, ``scores_normalised``. Chapter 06."""
    out = {}
    for name, x in (("values", values), ("scores", scores)):
        out[f"{name}_raw"] = within_bin_spread(gap, x, bins=bins, min_count=min_count, normalize=False)
        out[f"{name}_normalised"] = within_bin_spread(gap, x, bins=bins, min_count=min_count)
    return out


class ShapeSummary(NamedTuple):
    """What :func:`shape_summary` returns (unpacks as ``bins_p, bins_v, u_gap, rho``): the binned tables of the
    scores and of the values, the U-gap of the scores and the rank correlation of the values' bin means."""

    bins_p: object  # pandas DataFrame from binned()
    bins_v: object
    u_gap: float
    rho: float


@declare(gap=PER_TOKEN, scores=PER_TOKEN, values=PER_TOKEN, bins=BINS, central=CENTRAL)
def shape_summary(gap, scores, values, bins: int = 20, central: float = 0.2) -> ShapeSummary:
    """The two shapes of the paper's figures, measured on tokens binned by ``gap`` (NaN entries are
    dropped): returns a :class:`ShapeSummary` ``(bins_p, bins_v, u_gap, rho)``.

    ``u_gap``: the smaller of the two end-bin means of ``scores`` minus the largest mean among the
    central bins (``|centre| < central``), in units of the standard deviation of the binned
    tokens' scores (U-shaped when clearly positive). ``rho``: Spearman rank correlation of the
    non-empty bin means of ``values`` with the bin centres (monotone when close to 1).

    Introduced in chapter 05.
    """
    g, s, v = torch.from_numpy(gap), torch.from_numpy(scores), torch.from_numpy(values)
    if not g.shape == s.shape == v.shape:
        raise InvalidArgumentError(
            f"gap, scores and values need one entry per token each, got lengths {len(g)}, {len(s)}, {len(v)}"
        )
    seen = torch.isfinite(g)
    bins_p, bins_v = binned(g, s, bins=bins), binned(g, v, bins=bins)
    fp = bins_p[bins_p["count"] > 0]
    centre = fp[fp.center.abs() < central]["mean"]
    if centre.empty or len(fp) < 2:
        raise InvalidArgumentError("too few filled bins to measure the U-shape")
    u_gap = (min(fp["mean"].iloc[0], fp["mean"].iloc[-1]) - centre.max()) / float(s[seen].std())
    return ShapeSummary(bins_p, bins_v, float(u_gap), bin_rank_correlation(bins_v))


@declare(table=Table("count", "mean", "center"))
def bin_rank_correlation(table) -> float:
    """Spearman rank correlation of the non-empty bin means of a :func:`binned` table with the bin centres
    (1 when the means increase with the binning variable)."""
    from scipy.stats import spearmanr

    filled = table[table["count"] > 0]
    if len(filled) < 3:
        raise InvalidArgumentError("fewer than 3 filled bins: a rank correlation says nothing")
    return float(spearmanr(filled.center, filled["mean"]).statistic)


@declare(bins_v=TABLE)
def values_spread(bins_v) -> float:
    """How far training moved the values across the bins: the range (max - min) of the non-empty
    bin means of ``E_s^T v``, in units of the median within-bin standard deviation. Near 1 when
    the bin means differ by no more than the token-to-token noise (as at initialisation); the
    attention-only models of chapter 07 reach 6 to 8 at paper scale."""
    filled = bins_v[bins_v["count"] > 0]
    if len(filled) < 2:
        raise InvalidArgumentError("too few filled bins to measure the spread of the values")
    scale = float(filled["std"].median())
    if not scale > 0:
        raise InvalidArgumentError("the bins' standard deviations are zero: the spread is undefined")
    return float((filled["mean"].max() - filled["mean"].min()) / scale)


@declare(table=TABLE)
def standard_errors(table):
    """The standard error of each bin mean of a :func:`binned` table, ``std / sqrt(count)`` (NaN for an empty
    bin): the noise level of a bin mean, as opposed to the token-to-token spread ``std``."""
    count = table["count"].astype(float)
    return table["std"] / np.sqrt(count.where(count > 0))


@declare(table=TABLE, z=Real(min=0.0, min_inclusive=False))
def bin_noise_summary(table, z: float = 2.0) -> dict:
    """How the bin means of a :func:`binned` table compare with their own noise (the standard error of a
    bin mean, :func:`standard_errors`): ``range_se`` is the range of the filled bins' means in units of
    their median standard error; ``reversals`` counts the adjacent filled bins whose mean *decreases* by
    more than ``z`` standard errors of the difference (``z * sqrt(se_a^2 + se_b^2)``), i.e. reversals that
    the noise of the bin means does not explain; ``steps`` is the number of adjacent pairs compared."""
    filled = table[table["count"] > 0]
    if len(filled) < 2:
        raise InvalidArgumentError("too few filled bins to compare their means")
    se = standard_errors(filled).to_numpy(float)
    mean = filled["mean"].to_numpy(float)
    scale = float(np.median(se))
    if not scale > 0:
        raise InvalidArgumentError("the bin means' standard errors are zero: their noise level is undefined")
    drop = mean[:-1] - mean[1:]
    noise = z * np.sqrt(se[:-1] ** 2 + se[1:] ** 2)
    return {
        "range_se": float((mean.max() - mean.min()) / scale),
        "reversals": int((drop > noise).sum()),
        "steps": int(len(mean) - 1),
    }


@declare(table=Table("count", "mean", "std", "center"))
def positive_side_rise(table) -> float:
    """How clearly the bin means of a :func:`binned` table rise on the positive side of the binning variable
    (the filled bins whose centre is above 0), in standard errors: the least-squares slope of the quantity
    against the bin centre over the tokens of those bins (each token at its bin's centre), divided by the
    slope's standard error (from the spread of the tokens around the fitted line: within the bins and
    between them). Positive when the quantity rises towards the positive end, negative when it falls; at
    least 2 is a rise that the noise of the tokens does not explain. Unlike the rank correlation over all
    bins it asks nothing of the negative side and tolerates reversals: the paper's "weaker, but present,
    rise on the positive side" (chapter 07).

    Introduced in chapter 07."""
    filled = table[(table["count"] > 0) & (table["center"] > 0)]
    if len(filled) < 2:
        raise InvalidArgumentError("fewer than 2 filled bins on the positive side: a slope says nothing")
    n = filled["count"].to_numpy(float)
    x, y, sd = (filled[c].to_numpy(float) for c in ("center", "mean", "std"))
    if n.sum() < 3:
        raise InvalidArgumentError("fewer than 3 tokens on the positive side: the slope has no standard error")
    xbar, ybar = np.average(x, weights=n), np.average(y, weights=n)
    sxx = float((n * (x - xbar) ** 2).sum())
    slope = float((n * (x - xbar) * (y - ybar)).sum()) / sxx
    residual = float((n * sd**2).sum() + (n * (y - ybar - slope * (x - xbar)) ** 2).sum())
    if not residual > 0:
        raise InvalidArgumentError("the tokens lie exactly on a line: the slope's noise level is undefined")
    return slope / float(np.sqrt(residual / (n.sum() - 2) / sxx))


def _shape_values(g: np.ndarray, s: np.ndarray, v: np.ndarray, bins: int, central: float) -> tuple[float, float]:
    """``(u_gap, rho)`` of :func:`shape_summary` for finite arrays, with bin counts and sums instead of tables
    (the same numbers; the bootstrap calls it hundreds of times)."""
    from scipy.stats import spearmanr

    lo, hi = float(g.min()), float(g.max())
    if not lo < hi:
        return float("nan"), float("nan")
    edges = np.linspace(lo, hi, bins + 1)
    idx = np.clip(np.searchsorted(edges, g, side="right") - 1, 0, bins - 1)
    count = np.bincount(idx, minlength=bins)
    filled = count > 0
    centers = ((edges[:-1] + edges[1:]) / 2)[filled]
    mean_s = np.bincount(idx, weights=s, minlength=bins)[filled] / count[filled]
    mean_v = np.bincount(idx, weights=v, minlength=bins)[filled] / count[filled]
    centre = mean_s[np.abs(centers) < central]
    if centre.size == 0 or filled.sum() < 3:
        return float("nan"), float("nan")
    u_gap = (min(mean_s[0], mean_s[-1]) - centre.max()) / float(s.std(ddof=1))
    return float(u_gap), float(spearmanr(centers, mean_v).statistic)


def _finite_tokens(g: np.ndarray, s: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    if not g.shape == s.shape == v.shape:
        raise InvalidArgumentError(
            f"gap, scores and values need one entry per token each, got lengths {len(g)}, {len(s)}, {len(v)}"
        )
    keep = np.isfinite(g) & np.isfinite(s) & np.isfinite(v)
    if keep.sum() < 3:
        raise InvalidArgumentError(f"only {int(keep.sum())} tokens have a finite gap, score and value: need 3")
    return g[keep], s[keep], v[keep]


@declare(
    gap=PER_TOKEN,
    scores=PER_TOKEN,
    values=PER_TOKEN,
    n_boot=Int(min=10, max=10**6),
    seed=Int(min=0),
    level=Real(min=0.0, max=1.0, min_inclusive=False, max_inclusive=False),
    bins=BINS,
    central=CENTRAL,
)
def shape_bootstrap(
    gap, scores, values, n_boot: int = 200, seed: int = 0, level: float = 0.95, bins: int = 20, central: float = 0.2
):
    """Bootstrap confidence intervals over words for the two shapes of :func:`shape_summary`.

    The tokens (those with a finite gap, score and value) are resampled with replacement ``n_boot`` times;
    each resample is binned again and its ``u_gap`` and ``rho`` measured. Returns a DataFrame indexed by
    ``u_gap`` and ``rho`` with the estimate on all tokens and the percentile interval at ``level``
    (``low``, ``high``). It says how much the shapes owe to which words happened to be in the vocabulary; it
    says nothing about the initialisation (the replication over seeds does). Chapter 06.
    """
    import pandas as pd

    g, s, v = _finite_tokens(gap, scores, values)
    estimate = _shape_values(g, s, v, bins, central)
    rng = np.random.default_rng(seed)
    draws = np.array(
        [
            _shape_values(g[i], s[i], v[i], bins, central)
            for i in (rng.integers(0, g.size, g.size) for _ in range(n_boot))
        ]
    )
    if np.isnan(draws).any():
        raise InvalidArgumentError(
            f"{int(np.isnan(draws).any(axis=1).sum())} of {n_boot} resamples left too few "
            "filled bins to measure the shapes: use fewer bins or more tokens"
        )
    q = np.quantile(draws, [(1 - level) / 2, (1 + level) / 2], axis=0)
    return pd.DataFrame({"estimate": estimate, "low": q[0], "high": q[1]}, index=["u_gap", "rho"])


@declare(gap=PER_TOKEN, counts=RealArray(ndim=1), strata=Int(min=1, max=10**6), seed=Int(min=0))
def frequency_matched(gap, counts, strata: int = 20, seed: int = 0) -> np.ndarray:
    """A control for the shapes: ``gap`` with its values permuted among words of similar frequency.

    The tokens with a finite gap are cut into ``strata`` groups of (nearly) equal size by ``counts`` (their
    number of occurrences) and the gaps permuted within each group, so that every token keeps a gap drawn
    from words about as frequent as itself. A shape that only reflects how often a word occurs (rare words
    have extreme gaps and little-trained embeddings) survives the permutation; a shape that reflects the
    word's own label statistics does not. Tokens whose gap is not finite keep it. Chapter 06.
    """
    g, c = gap, counts
    if g.shape != c.shape:
        raise InvalidArgumentError(f"gap and counts need one entry per token each, got lengths {len(g)} and {len(c)}")
    rng = np.random.default_rng(seed)
    out = g.copy()
    finite = np.flatnonzero(np.isfinite(g))
    order = finite[np.argsort(c[finite], kind="stable")]
    for group in np.array_split(order, min(strata, max(order.size, 1))):
        out[group] = g[rng.permutation(group)]
    return out
