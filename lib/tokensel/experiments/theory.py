"""The theory chapters' runs on synthetic data (chapters 01 and 02), their sizes as arguments: each returns a
table with one row per run, on whose columns the chapters check their claims."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from ..data.batch import Batch, RaggedBatch
from ..errors import InvalidArgumentError
from ..models.attention import AttentionModel, MultiClassAttentionModel
from ..training.phases import one_step
from ..validation import Either, Int, Numbers, Real, RealArray, Tensor, declare

#: a step size, widths and a seed of the theory's runs
STEP = Real(min=0.0, min_inclusive=False)
WIDTHS = Numbers(int, min=1)
SEED = Int(min=0)


@declare(
    batch=Batch(),
    selected=Tensor("bool", shape=("tokens",)),
    planted=RealArray(shape=("S",), finite=False),
)
def selection_table(batch: RaggedBatch, selected: torch.Tensor, planted) -> pd.DataFrame:
    """Per sequence: its label, its tokens with the ``selected`` ones in brackets, and its first important token.
    Chapter 1."""
    rows, pos = [], 0
    for i, seq in enumerate(batch.to_lists()):
        marks = [f"[{s}]" if selected[pos + t] else str(s) for t, s in enumerate(seq)]
        important = [s for s in seq if planted[s] != 0]
        rows.append(
            {
                "y": int(batch.labels[i]),
                "tokens ([selected])": " ".join(marks),
                "important": important[0] if important else None,
            }
        )
        pos += len(seq)
    return pd.DataFrame(rows)


@declare(
    alpha=Tensor("real", ndim=1),
    eta0=STEP,
    d=Either(Real(min=1.0), RealArray(nonempty=True), what="a width >= 1 or an array of them"),
)
def gram_bound(alpha: torch.Tensor, eta0: float, d) -> np.ndarray | float:
    """``b(eta0, d) = 1.5 (2 + sqrt(2) eta0 max|alpha|) sqrt(log|S| / d)``, the bound on the Gram remainder after
    one step (eq-gram-bound; 1.5 allows for a maximum of Gaussians and lower-order terms), at one or more ``d``."""
    if alpha.numel() < 2:
        raise InvalidArgumentError("alpha must be a 1-d tensor of the tokens' signed frequencies (two or more)")
    widths = np.asarray(d, dtype=float)
    if widths.size == 0 or not np.all(widths >= 1):
        raise InvalidArgumentError(f"d must be a width >= 1 or an array of them, got {d!r}")
    amax = float(alpha.abs().max())
    return 1.5 * (2 + np.sqrt(2) * eta0 * amax) * np.sqrt(np.log(alpha.numel()) / widths)


def _gram_deviation(model: AttentionModel, alpha: torch.Tensor, eta0: float) -> float:
    S = model.E.shape[0]
    R = model.E @ model.E.T - torch.eye(S, dtype=torch.float64) - eta0**2 / 4 * torch.outer(alpha, alpha)
    return float(R.abs().max())


@declare(batch=Batch(), eta0=STEP, d=Int(min=1), seed=SEED)
def one_step_error(batch: RaggedBatch, eta0: float, d: int, seed: int) -> float:
    """The relative error ``||E1 - E0 - (eta0/2) alpha v^T||_F / ||(eta0/2) alpha v^T||_F`` of one step
    (eq-one-step-err)."""
    return float(one_step_errors(batch, eta0, [d], [seed]).err.iloc[0])


@declare(batch=Batch(), eta0=STEP, dims=WIDTHS, seeds=Numbers(int, min=0))
def one_step_errors(batch: RaggedBatch, eta0: float, dims, seeds) -> pd.DataFrame:
    """One step per width and seed: the relative error of eq-one-step-err and the Gram deviation. Chapter 2."""
    from ..analysis.statistics import alpha as signed_frequency

    alpha = signed_frequency(batch)
    rows = []
    for d in dims:
        for s in seeds:
            m0 = AttentionModel.init(batch.vocab_size, d, seed=s)
            m1 = one_step(m0, batch, eta0)
            target = torch.outer(eta0 / 2 * alpha, m0.v)
            err = float((m1.E - m0.E - target).norm() / target.norm())
            rows.append(dict(d=d, seed=s, err=err, gram_dev=_gram_deviation(m1, alpha, eta0)))
    return pd.DataFrame(rows)


@declare(batch=Batch(), steps=Numbers(float, min=0.0, min_inclusive=False), dims=WIDTHS, seed=SEED)
def one_step_ranking(batch: RaggedBatch, steps, dims, seed: int) -> pd.DataFrame:
    """One step per size and width: the values' correlation with ``alpha``, and the share of the strong tokens
    (signal ``eta0/2 |alpha_s|`` above three noise maxima ``sqrt(2 log|S| / d)``) whose value has ``alpha``'s
    sign. Chapter 2."""
    from ..analysis.statistics import alpha as signed_frequency

    alpha = signed_frequency(batch)
    rows = []
    for step in steps:
        for d in dims:
            m1 = one_step(AttentionModel.init(batch.vocab_size, d, seed=seed), batch, step)
            w = m1.values()
            strong = step / 2 * alpha.abs() > 3 * np.sqrt(2 * np.log(batch.vocab_size) / d)
            right = (torch.sign(w[strong]) == torch.sign(alpha[strong])).double()
            rows.append(
                dict(
                    eta0=step,
                    d=d,
                    gram_dev=_gram_deviation(m1, alpha, step),
                    correlation=float(np.corrcoef(w, alpha)[0, 1]),
                    strong_tokens=int(strong.sum()),
                    right_sign=float(right.mean()) if strong.any() else np.nan,
                )
            )
    return pd.DataFrame(rows)


@dataclass(frozen=True)
class MulticlassStep:
    """Per width ``rel_err`` and ``min_corr``, and the class values' change ``(E1 - E0) V`` at the largest width."""

    table: pd.DataFrame
    changes: torch.Tensor


@declare(batch=Batch("classes"), eta0=STEP, dims=WIDTHS, seed=SEED)
def multiclass_step(batch: RaggedBatch, eta0: float, dims, seed: int) -> MulticlassStep:
    """One step of the ``K``-class model from ``p = 0`` per width against ``eta0 * alpha_k``. Chapter 2."""
    from ..analysis.statistics import alpha_multiclass

    alpha_k = alpha_multiclass(batch)
    K = alpha_k.shape[1]
    rows, dW = [], None
    for d in dims:
        m0 = MultiClassAttentionModel.init(batch.vocab_size, d, K, seed=seed, p_init="zero")
        dW = (one_step(m0, batch, eta0).E - m0.E) @ m0.V
        rows.append(
            dict(
                d=d,
                rel_err=float((dW - eta0 * alpha_k).norm() / (eta0 * alpha_k).norm()),
                min_corr=min(float(np.corrcoef(dW[:, k], alpha_k[:, k])[0, 1]) for k in range(K)),
            )
        )
    assert dW is not None
    largest = int(np.argmax(dims))
    if largest != len(dims) - 1:  # the changes at the largest width, whatever the order of dims
        m0 = MultiClassAttentionModel.init(batch.vocab_size, dims[largest], K, seed=seed, p_init="zero")
        dW = (one_step(m0, batch, eta0).E - m0.E) @ m0.V
    return MulticlassStep(pd.DataFrame(rows), dW)
