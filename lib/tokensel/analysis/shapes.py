"""Tokens binned by their posterior gap: the two shapes the book measures on trained embeddings (the U of the
scores, the monotone rise of the values), their spreads and noise, intervals over words and the
frequency-matched control. Numpy and pandas on per-token arrays from :mod:`tokensel.analysis.statistics`."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import torch

from ..errors import ArgumentTypeError, InvalidArgumentError
from ..validation import Bool, Choice, Constraint, Int, Numbers, Real, RealArray, declare


class Table(Constraint):
    """A pandas DataFrame with the ``columns`` named (with ``nonempty``, and a row), passed on as it is."""

    def __init__(
        self, *columns: str, what: str = "a table from binned()", nonempty: bool = False, allow_none: bool = False
    ):
        super().__init__(allow_none=allow_none)
        self.columns, self.nonempty = columns, nonempty
        self.what = f"{what} (columns {', '.join(columns)})"

    def check(self, value, name, dims):
        if not hasattr(value, "columns") or not set(self.columns) <= set(value.columns):
            raise ArgumentTypeError(f"{name} must be {self.describe()}, got {type(value).__name__}")
        if self.nonempty and len(value) == 0:
            raise InvalidArgumentError(f"{name} must be a non-empty {self.describe()}, got no rows")
        return value


BINS = Int(min=1, max=10**6)
#: a quantity per token (NaN allowed: a token without a gap is left out)
PER_TOKEN = RealArray(ndim=1, finite=False)
CENTRAL = Real(min=0.0, min_inclusive=False)
TABLE = Table("count", "mean", "std")


@declare(
    x=RealArray(finite=False),
    y=RealArray(finite=False),
    bins=BINS,
    range_=Numbers(float, length=2, allow_none=True),
    out_of_range=Choice("raise", "drop", "clip"),
)
def binned(x, y, bins: int = 20, range_=None, out_of_range: str = "raise"):
    """Tokens binned by ``x`` into ``bins`` equal-width bins over ``range_`` (default: the finite ``x``'s own):
    per bin the count, mean, std and 10 % / 90 % quantiles of ``y``, NaN dropped. Values outside ``range_`` are
    refused, dropped or clipped into the end bins, as ``out_of_range`` says. Introduced in chapter 06."""
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
    """The within-bin standard deviation of ``x`` averaged over the bins of ``gap`` with ``min_count`` tokens:
    how much tokens of similar gap differ; with ``normalize``, in units of ``x``'s spread (1 when the bins
    explain nothing)."""
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
    """:func:`within_bin_spread` of ``values`` and ``scores`` against ``gap``, raw (the paper's) and normalised.
    Chapter 06."""
    out = {}
    for name, x in (("values", values), ("scores", scores)):
        out[f"{name}_raw"] = within_bin_spread(gap, x, bins=bins, min_count=min_count, normalize=False)
        out[f"{name}_normalised"] = within_bin_spread(gap, x, bins=bins, min_count=min_count)
    return out


class ShapeSummary(NamedTuple):
    """The binned scores and values, the U-gap of the scores and the rank correlation of the values."""

    bins_p: object  # pandas DataFrame from binned()
    bins_v: object
    u_gap: float
    rho: float


@declare(gap=PER_TOKEN, scores=PER_TOKEN, values=PER_TOKEN, bins=BINS, central=CENTRAL)
def shape_summary(gap, scores, values, bins: int = 20, central: float = 0.2) -> ShapeSummary:
    """The two shapes of the paper's figures on tokens binned by ``gap``: ``u_gap``, the lower end-bin mean of
    ``scores`` minus the highest central one (``|centre| < central``) in units of the scores' spread (a U when
    clearly positive), and ``rho``, the rank correlation of the bin means of ``values`` with the centres.
    Introduced in chapter 05."""
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
    """Spearman rank correlation of the filled bins' means with their centres (1: increasing)."""
    from scipy.stats import spearmanr

    filled = table[table["count"] > 0]
    if len(filled) < 3:
        raise InvalidArgumentError("fewer than 3 filled bins: a rank correlation says nothing")
    return float(spearmanr(filled.center, filled["mean"]).statistic)


@declare(bins_v=TABLE)
def values_spread(bins_v) -> float:
    """The range of the values' bin means in units of the median within-bin spread: near 1 at initialisation,
    6 to 8 for chapter 07's attention-only models at paper scale."""
    filled = bins_v[bins_v["count"] > 0]
    if len(filled) < 2:
        raise InvalidArgumentError("too few filled bins to measure the spread of the values")
    scale = float(filled["std"].median())
    if not scale > 0:
        raise InvalidArgumentError("the bins' standard deviations are zero: the spread is undefined")
    return float((filled["mean"].max() - filled["mean"].min()) / scale)


@declare(table=TABLE)
def standard_errors(table):
    """The standard error ``std / sqrt(count)`` of each bin mean (NaN for an empty bin)."""
    count = table["count"].astype(float)
    return table["std"] / np.sqrt(count.where(count > 0))


@declare(table=TABLE, z=Real(min=0.0, min_inclusive=False))
def bin_noise_summary(table, z: float = 2.0) -> dict:
    """The bin means against their own noise: ``range_se``, their range in median standard errors, and
    ``reversals``, the adjacent pairs (of ``steps``) whose mean falls by more than ``z`` standard errors of
    the difference: reversals the noise does not explain."""
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
    """The least-squares slope of the bin means over the tokens of the bins above 0, in standard errors (at least
    2: a rise the noise does not explain). Unlike the rank correlation it asks nothing of the negative side: the
    book's reading of a rise on the positive side only. Introduced in chapter 07."""
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
    """``(u_gap, rho)`` of :func:`shape_summary` from bin counts and sums (the bootstrap calls it hundreds of
    times)."""
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
    """Percentile intervals at ``level`` for ``u_gap`` and ``rho`` over ``n_boot`` resamples of the words: how much
    the shapes owe to which words are in the vocabulary (not to the initialisation). Chapter 06."""
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
    """A control: ``gap`` permuted within ``strata`` groups of words of similar ``counts``. A shape that only
    reflects how often a word occurs survives it; one that reflects its label statistics does not. Chapter 06."""
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
