"""Error bars and controls for the shapes of chapter 7's models (the rules of chapter 6, applied to the
four rating classes and to the variant comparison), and the mirror symmetry of the MLP heads.

* :func:`class_shapes` — the trained four-class model's value bins against each class's one-vs-rest gap.
* :func:`class_controls` — per class: a bootstrap interval over words of the rank correlation and the
  frequency-matched control.
* :func:`shape_controls` — per model of a comparison: bootstrap intervals of the U-gap and the rank
  correlation, and the frequency-matched control.
* :func:`shuffled_control` — models trained on the same reviews with permuted labels, measured against the
  true gaps.
* :func:`mirror_twin` — an MLP head and its mirror image (``v`` and ``W2`` negated) trained side by side.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch

from ..analysis import shapes, statistics
from ..analysis.shapes import BINS
from ..data.batch import Batch, RaggedBatch
from ..data.reviews import REVIEW_DATA, ReviewData, shuffled_labels
from ..errors import InvalidParameterError
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
    """The four-class model's values against each class's one-vs-rest gap: ``gap`` (|S| x K), ``bins`` (one
    :func:`~tokensel.analysis.shapes.binned` table of ``E_s^T v_k`` per class) and ``rho`` (their rank
    correlations with the gap)."""

    gap: torch.Tensor
    bins: list
    rho: list


MULTICLASS_MODEL = Instance(MultiClassAttentionModel)
N_BOOT = Int(min=10, max=10**6)
STRATA = Int(min=1, max=10**6)
#: the words' occurrence counts
COUNTS = RealArray(ndim=1)


@declare(error=InvalidParameterError, model=MULTICLASS_MODEL, batch=Batch("classes"), bins=BINS)
def class_shapes(model: MultiClassAttentionModel, batch: RaggedBatch, bins: int = 20) -> ClassShapes:
    """Bin every word's class-``k`` value ``E_s^T v_k`` by its one-vs-rest gap ``Delta_{s,k}`` on ``batch``
    (:func:`tokensel.analysis.statistics.class_gap`) into ``bins`` bins, class by class. Chapter 07."""
    gap = statistics.class_gap(batch)
    with torch.no_grad():
        values = model.values().detach().cpu().double()
    if values.shape != gap.shape:
        raise InvalidParameterError(
            f"the model has {tuple(values.shape)} values but the batch {tuple(gap.shape)} class gaps"
        )
    tables = [shapes.binned(gap[:, k], values[:, k], bins=bins) for k in range(gap.shape[1])]
    return ClassShapes(gap, tables, [shapes.bin_rank_correlation(t) for t in tables])


@declare(
    error=InvalidParameterError,
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
    """Per class ``k`` (one row each): the rank correlation of the value bins (``rho``), its bootstrap interval
    over words (``rho_low``, ``rho_high``: :func:`~tokensel.analysis.shapes.shape_bootstrap`, seed ``seed + k``)
    and the rank correlation after the gaps are permuted among words of similar frequency
    (``rho_freq_matched``: :func:`~tokensel.analysis.shapes.frequency_matched` with ``counts``, the words'
    occurrence counts, seed ``seed + k``). ``bins``: as in :func:`class_shapes`. Chapter 07."""
    import pandas as pd

    _one_per_word(counts, cs.gap.shape[0])
    with torch.no_grad():
        scores = model.scores().detach().cpu().double().numpy()
        values = model.values().detach().cpu().double().numpy()
    if values.shape != tuple(cs.gap.shape):
        raise InvalidParameterError(f"cs has {tuple(cs.gap.shape)} class gaps but the model {values.shape} values")
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
        raise InvalidParameterError(f"counts needs one entry per word ({n}), got {len(counts)}")


READINGS = ("values", "token_values")


def _reading(model: Any, reading: str) -> torch.Tensor:
    """``E_s^T v`` (``"values"``) or the token values as the model reads them (``"token_values"``; the values
    themselves for the one-layer model)."""
    with torch.no_grad():
        if reading == "token_values" and isinstance(model, variants.VariantModel):
            return model.token_values().detach().cpu().double()
        return model.values().detach().cpu().double()


@declare(
    error=InvalidParameterError,
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
    """Per model of a comparison (``runs``: display name -> :class:`~tokensel.experiments.recipes.Run`, measured
    against ``gap``), one row indexed by its model kind (a key of
    :data:`~tokensel.experiments.recipes.MODEL_NAMES`, e.g. ``"one_layer"``; ``.rename(index=MODEL_NAMES)``
    shows the display names): the U-gap and rank correlation with their bootstrap intervals over words (``u_low``,
    ``u_high``, ``rho_low``, ``rho_high``; seed ``seed``), and both after the gaps are permuted among words of
    similar frequency (``u_freq_matched``, ``rho_freq_matched``; ``counts`` the words' occurrence counts, one
    permutation with seed ``seed`` for every model). ``reading``: the rank correlation of ``E_s^T v``
    (``"values"``) or of the token values as the model reads them (``"token_values"``). Chapter 07."""
    import pandas as pd

    g = gap
    _one_per_word(counts, len(g))
    if not runs:
        raise InvalidParameterError("runs must be a non-empty dict of display name -> Run (compare_variants)")
    for name, run in runs.items():
        if not isinstance(run, Run):
            raise InvalidParameterError(f"runs[{name!r}] must be a Run from run_model")
    if len({run.kind for run in runs.values()}) < len(runs):
        raise InvalidParameterError("runs holds two runs of one model kind: the rows are keyed by kind")
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


@declare(error=InvalidParameterError, **COMPARISON)
def shuffled_control(data: ReviewData, sc, kinds, seed: int = 0) -> pd.DataFrame:
    """The models ``kinds`` trained as in :func:`~tokensel.experiments.recipes.compare_variants`, on the same
    reviews with the training labels permuted (:func:`tokensel.data.reviews.shuffled_labels`, seed ``seed``),
    and measured against the *true* posterior gaps of those reviews: one row per model, indexed by its kind,
    with its test accuracy, ``u_gap``, ``rho`` (of ``E_s^T v``) and ``rho_token_values`` (of the token values
    as the model reads them). A model that learns nothing from the labels leaves both shapes near 0.

    Introduced in chapter 07."""
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
    error=InvalidParameterError,
    data=REVIEW_DATA,
    sc=SCALE,
    kind=Choice("mlp", "mlp_trained_v"),
    seed=Int(min=0),
    n_train=Int(min=2),
    steps=Int(min=1),
)
def mirror_twin(data: ReviewData, sc, kind: str = "mlp", seed: int = 0, n_train: int = 400, steps: int = 20) -> dict:
    """Train the MLP head ``kind`` (``"mlp"`` or ``"mlp_trained_v"``: ``v`` after ``W2``) and its mirror image,
    the same model with ``v`` and ``W2`` negated at initialisation, on ``n_train`` reviews of ``data`` for
    ``steps`` Adam steps (sizes otherwise those of ``sc``). The output ``v^T W2 relu(W1 z)`` is the same for
    both, so the embeddings train identically while every ``E_s^T v`` changes sign. Returns the largest
    differences: ``E`` (``E_diff``), the outputs on the training reviews (``f_diff``), and the largest
    ``|E_s^T v + E'_s^T v'|`` (``values_sum``); all three are 0 in exact arithmetic and, because negation
    commutes with rounding, in floating point too. Chapter 07."""
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
