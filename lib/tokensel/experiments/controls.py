"""Error bars and controls for the shapes of chapter 07's models (chapter 06's rules, applied to the four rating
classes and the variant comparison): bootstrap intervals over words, the frequency-matched and shuffled-label
controls, and the mirror symmetry of the MLP heads."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch

from ..analysis import shapes, statistics
from ..analysis.shapes import BINS
from ..data.batch import Batch, RaggedBatch
from ..data.reviews import REVIEW_DATA, ReviewData, shuffled_labels
from ..errors import InvalidArgumentError
from ..models import variants
from ..models.attention import MultiClassAttentionModel
from ..training.settings import TrainSettings
from ..training.variants import train_variant
from ..validation import Choice, Instance, Int, RealArray, declare
from .recipes import COMPARISON, SCALE, Run, compare_variants, scale, variant_batches

if TYPE_CHECKING:
    import pandas as pd


@dataclass
class ClassShapes:
    """Per class, the binned values ``E_s^T v_k`` against the one-vs-rest gap and their rank correlation."""

    gap: torch.Tensor
    bins: list
    rho: list


MULTICLASS_MODEL = Instance(MultiClassAttentionModel)
N_BOOT = Int(min=10, max=10**6)
STRATA = Int(min=1, max=10**6)
#: the words' occurrence counts
COUNTS = RealArray(ndim=1)


@declare(model=MULTICLASS_MODEL, batch=Batch("classes"), bins=BINS)
def class_shapes(model: MultiClassAttentionModel, batch: RaggedBatch, bins: int = 20) -> ClassShapes:
    """Every word's class-``k`` value binned by its one-vs-rest gap on ``batch``, class by class. Chapter 07."""
    gap = statistics.class_gap(batch)
    with torch.no_grad():
        values = model.values().detach().cpu().double()
    if values.shape != gap.shape:
        raise InvalidArgumentError(
            f"the model has {tuple(values.shape)} values but the batch {tuple(gap.shape)} class gaps"
        )
    tables = [shapes.binned(gap[:, k], values[:, k], bins=bins) for k in range(gap.shape[1])]
    return ClassShapes(gap, tables, [shapes.bin_rank_correlation(t) for t in tables])


@declare(
    model=MULTICLASS_MODEL,
    cs=Instance(ClassShapes, what="a ClassShapes (from class_shapes)"),
    counts=COUNTS,
    n_boot=N_BOOT,
    strata=STRATA,
    bins=BINS,
    seed=Int(min=0),
)
def class_controls(
    model: MultiClassAttentionModel,
    cs: ClassShapes,
    counts,
    n_boot: int = 200,
    strata: int = 20,
    bins: int = 20,
    seed: int = 0,
) -> pd.DataFrame:
    """Per class ``k``: the rank correlation, its bootstrap interval over words and its value after the
    frequency-matched permutation (``counts``: the words' occurrences; seed ``seed + k``). Chapter 07."""
    import pandas as pd

    _one_per_word(counts, cs.gap.shape[0])
    with torch.no_grad():
        scores = model.scores().detach().cpu().double().numpy()
        values = model.values().detach().cpu().double().numpy()
    if values.shape != tuple(cs.gap.shape):
        raise InvalidArgumentError(f"cs has {tuple(cs.gap.shape)} class gaps but the model {values.shape} values")
    rows = []
    for k in range(cs.gap.shape[1]):
        g = cs.gap[:, k].numpy()
        # only the rank correlation is reported: every bin counts as central, so that the U-gap (unused) never
        # leaves a resample unmeasured when no class-k gap falls near 0
        ci = shapes.shape_bootstrap(g, scores, values[:, k], n_boot=n_boot, seed=seed + k, bins=bins, central=2.0)
        matched = shapes.frequency_matched(g, counts, strata=strata, seed=seed + k)
        rows.append(
            dict(
                rho=float(cs.rho[k]),
                rho_low=float(ci.loc["rho", "low"]),
                rho_high=float(ci.loc["rho", "high"]),
                rho_freq_matched=float(shapes.shape_summary(matched, scores, values[:, k], bins=bins, central=2.0).rho),
            )
        )
    return pd.DataFrame(rows)


def _one_per_word(counts, n: int) -> None:
    if len(counts) != n:
        raise InvalidArgumentError(f"counts needs one entry per word ({n}), got {len(counts)}")


READINGS = ("values", "token_values")


def _reading(model: Any, reading: str) -> torch.Tensor:
    """``E_s^T v``, or the token values as the model reads them (the same for the one-layer model)."""
    with torch.no_grad():
        if reading == "token_values" and isinstance(model, variants.VariantModel):
            return model.token_values().detach().cpu().double()
        return model.values().detach().cpu().double()


@declare(
    gap=RealArray(ndim=1, finite=False),
    runs=Instance(dict, what="a dict of display name -> Run (compare_variants)"),
    counts=COUNTS,
    n_boot=N_BOOT,
    strata=STRATA,
    seed=Int(min=0),
    reading=Choice(*READINGS),
)
def shape_controls(
    gap, runs: dict, counts, n_boot: int = 200, strata: int = 20, seed: int = 0, reading: str = "values"
) -> pd.DataFrame:
    """Per model kind of a comparison: the U-gap and rank correlation (of the ``reading`` of the values) with their
    bootstrap intervals over words, and both after one frequency-matched permutation of ``gap``. Chapter 07."""
    import pandas as pd

    g = gap
    _one_per_word(counts, len(g))
    if not runs:
        raise InvalidArgumentError("runs must be a non-empty dict of display name -> Run (compare_variants)")
    for name, run in runs.items():
        if not isinstance(run, Run):
            raise InvalidArgumentError(f"runs[{name!r}] must be a Run from run_model")
    if len({run.kind for run in runs.values()}) < len(runs):
        raise InvalidArgumentError("runs holds two runs of one model kind: the rows are keyed by kind")
    matched = shapes.frequency_matched(g, counts, strata=strata, seed=seed)
    rows = {}
    for run in runs.values():
        model: Any = run.model  # an AttentionModel or a VariantModel: both have scores() and values()
        with torch.no_grad():
            s = model.scores().detach().cpu().double().numpy()
        v = _reading(model, reading).numpy()
        ci = shapes.shape_bootstrap(g, s, v, n_boot=n_boot, seed=seed)
        fm = shapes.shape_summary(matched, s, v)
        rows[run.kind] = dict(
            u_gap=float(ci.loc["u_gap", "estimate"]),
            u_low=float(ci.loc["u_gap", "low"]),
            u_high=float(ci.loc["u_gap", "high"]),
            rho=float(ci.loc["rho", "estimate"]),
            rho_low=float(ci.loc["rho", "low"]),
            rho_high=float(ci.loc["rho", "high"]),
            u_freq_matched=float(fm.u_gap),
            rho_freq_matched=float(fm.rho),
        )
    return pd.DataFrame.from_dict(rows, orient="index")


@declare(**COMPARISON)
def shuffled_control(data: ReviewData, sc, kinds, seed: int = 0) -> pd.DataFrame:
    """The models ``kinds`` trained on the reviews with permuted labels, measured against the *true* gaps: one that
    learns nothing from the labels leaves both shapes near 0. Introduced in chapter 07."""
    import pandas as pd

    sc = scale(sc)
    true_train, _ = variant_batches(data, sc, seed=seed)
    gap = statistics.posterior_gap(true_train)
    runs = compare_variants(shuffled_labels(data, seed=seed), sc, kinds=kinds, seed=seed)
    rows = {}
    for run in runs.values():
        model: Any = run.model
        with torch.no_grad():
            s = model.scores().detach().cpu().double()
        summary = shapes.shape_summary(gap, s, _reading(model, "values"))
        read = shapes.shape_summary(gap, s, _reading(model, "token_values"))
        rows[run.kind] = dict(
            test_acc=run.summary()["test_acc"],
            u_gap=float(summary.u_gap),
            rho=float(summary.rho),
            rho_token_values=float(read.rho),
        )
    return pd.DataFrame.from_dict(rows, orient="index")


@declare(
    data=REVIEW_DATA,
    sc=SCALE,
    kind=Choice("mlp", "mlp_trained_v"),
    seed=Int(min=0),
    n_train=Int(min=2),
    steps=Int(min=1),
)
def mirror_twin(data: ReviewData, sc, kind: str = "mlp", seed: int = 0, n_train: int = 400, steps: int = 20) -> dict:
    """An MLP head and its mirror image (``v`` and ``W2`` negated) trained side by side: the output is the same, so
    ``E`` trains identically while every ``E_s^T v`` changes sign. The largest differences of ``E``, of the
    outputs and of the values' sum: 0, even in floating point (negation commutes with rounding). Chapter 07."""
    small = scale(sc, n_train=n_train, n_test=n_train)
    train, _ = variant_batches(data, small, seed=seed)
    one, two = (variants.make(kind, train.vocab_size, small.d, seed=seed) for _ in range(2))
    assert isinstance(two, variants.MLPHead)  # "mlp" and "mlp_trained_v" are MLPHead classes
    two.v.neg_()
    two.W2.neg_()
    settings = TrainSettings(steps=steps, lr=small.train.lr, eval_every=steps, progress=False)
    for m in (one, two):
        train_variant(m, train, settings)
    with torch.no_grad():
        return dict(
            E_diff=float((one.E - two.E).abs().max()),
            f_diff=float((one.forward(train) - two.forward(train)).abs().max()),
            values_sum=float((one.values() + two.values()).abs().max()),
        )


__all__ = [
    "ClassShapes",
    "class_shapes",
    "class_controls",
    "shape_controls",
    "shuffled_control",
    "mirror_twin",
]
