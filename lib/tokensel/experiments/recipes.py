"""The book's named experiments on real reviews, with their settings: what chapters 06 and 07 run, and
``scripts/variants_paper_scale.py`` at the paper's size, through the same calls. Every recipe takes a reader's
own data too (:func:`tokensel.data.reviews.prepare_texts`), except the rating classes, which need IMDB's
stars. A :class:`Scale` fixes the sizes of the variant comparison (``SCALES["reduced"]``, the chapter's;
``SCALES["paper"]``)."""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np
import torch

from ..analysis import shapes, statistics
from ..data.batch import Batch, RaggedBatch
from ..data.reviews import REVIEW_DATA, Column, ReviewData, Source, from_frame, prepare_texts
from ..errors import DataUnavailableError, InvalidArgumentError
from ..models import variants
from ..models.attention import DTYPE, AttentionModel, MultiClassAttentionModel
from ..training.phases import cosine, one_step, train_joint, train_p_v
from ..training.settings import SETTINGS, TrainSettings
from ..training.variants import train_variant
from ..validation import (
    MAX_STEPS,
    Bool,
    Choice,
    Device,
    Either,
    FilePath,
    Function,
    Instance,
    Int,
    Numbers,
    Real,
    Subset,
    Text,
    check_int_array,
    declare,
)

if TYPE_CHECKING:
    import pandas as pd

PAPER_D = 2048


#: what every recipe on real reviews takes
RECIPE = dict(data=REVIEW_DATA, settings=SETTINGS, d=Int(min=1), seed=Int(min=0))
#: ... and what the binary recipes that train take besides: the model's dtype
TRAINED = dict(RECIPE, dtype=DTYPE)
SPLIT = Choice("train", "test")


def _train_from_init(data, settings, d, seed, params: tuple, recipe: str, dtype: torch.dtype):
    """A fresh model trained on ``data`` with ``train_joint``: ``(model, frame)``."""
    model = AttentionModel.init(len(data.vocab), d, seed=seed, dtype=dtype)
    traj = train_joint(model, data.train, settings, params=params, test_batch=data.test, recipe=recipe)
    return model, traj.to_frame()


def _final_scores(history) -> dict:
    """The last row of a training history: training and test accuracy, test loss."""
    last = history.iloc[-1]
    return dict(train_acc=float(last.train_acc), test_acc=float(last.test_acc), test_loss=float(last.test_loss))


@declare(**TRAINED)
def train_full(
    data: ReviewData, settings: TrainSettings | None = None, d: int = PAPER_D, seed: int = 0, dtype=torch.float64
):
    """The theory's setup: ``E`` and ``p`` trained jointly with full-batch Adam, ``v`` a fixed unit vector (our
    protocol trains ``v`` too: :func:`train_all`); ``(model, trajectory frame)``. Introduced in chapter 06."""
    return _train_from_init(data, settings, d, seed, ("E", "p"), "full", dtype)


@declare(**TRAINED)
def train_all(
    data: ReviewData, settings: TrainSettings | None = None, d: int = PAPER_D, seed: int = 0, dtype=torch.float64
):
    """Our protocol: :func:`train_full` with ``v`` trained too. Chapter 06's main model."""
    return _train_from_init(data, settings, d, seed, ("E", "p", "v"), "full_v", dtype)


@declare(**TRAINED)
def train_frozen(
    data: ReviewData, settings: TrainSettings | None = None, d: int = PAPER_D, seed: int = 0, dtype=torch.float64
):
    """Ablation: ``E`` frozen at its initialisation, ``p`` and ``v`` trained. Introduced in chapter 06."""
    return _train_from_init(data, settings, d, seed, ("p", "v"), "frozen_E", dtype)


@declare(data=REVIEW_DATA)
def one_step_eta(data: ReviewData) -> float:
    """The one-step size whose largest value shift ``(eta0/2) max|alpha_s|`` is 1. Introduced in chapter 06."""
    return float(2.0 / statistics.alpha(data.train).abs().max())


@declare(eta0=Real(min=0.0, min_inclusive=False, allow_none=True), **TRAINED)
def train_one_step_then_freeze(
    data: ReviewData,
    settings: TrainSettings | None = None,
    d: int = PAPER_D,
    seed: int = 0,
    eta0: float | None = None,
    dtype=torch.float64,
):
    """Ablation: one gradient step on ``E`` (``eta0``, default :func:`one_step_eta`), then ``E`` frozen and ``p``,
    ``v`` trained. Introduced in chapter 06."""
    eta0 = one_step_eta(data) if eta0 is None else eta0
    model = one_step(AttentionModel.init(len(data.vocab), d, seed=seed, dtype=dtype), data.train, eta0)
    traj = train_joint(
        model,
        data.train,
        settings,
        params=("p", "v"),
        test_batch=data.test,
        recipe=f"one_step_then_freeze(eta0={eta0!r})",
    )
    return model, traj.to_frame()


#: the step sizes of chapter 06's sweep, as multiples of :func:`one_step_eta`
ETA_MULTIPLES = (1.0, 4.0, 16.0, 64.0, 256.0)
MULTIPLES = Numbers(float, min=0.0, min_inclusive=False)


@declare(data=REVIEW_DATA, multiples=MULTIPLES, d=Int(min=1), seed=Int(min=0))
def one_step_shifts(data: ReviewData, multiples=ETA_MULTIPLES, d: int = PAPER_D, seed: int = 0):
    """What one step on ``E`` of size ``m * one_step_eta(data)`` does before anything else is trained (linear in
    the size: one gradient serves every multiple ``m``): per size (0 first), the share of words whose value
    moved by more than the initial within-bin spread (``moved``), the spreads raw and against the initial ones,
    and the values' rank correlation with the gap. Introduced in chapter 06."""
    import pandas as pd

    multiples = tuple(multiples)
    base = one_step_eta(data)
    m0 = AttentionModel.init(len(data.vocab), d, seed=seed)
    gap = statistics.posterior_gap(data.train)
    step = m0.E - one_step(m0, data.train, 1.0).E  # eta0 = 1; E^1 = E^0 - eta0 * step
    w0, c0 = m0.E @ m0.v, m0.E @ m0.p
    dw, dc = step @ m0.v, step @ m0.p
    del step
    seen = torch.isfinite(gap)
    rows = []
    for m in (0.0, *multiples):
        eta0 = m * base
        w, c = w0 - eta0 * dw, c0 - eta0 * dc
        sp = shapes.spreads(gap, c, w)
        rows.append(
            dict(
                multiple=m,
                eta0=eta0,
                moved=float("nan"),
                values_raw=sp["values_raw"],
                scores_raw=sp["scores_raw"],
                rho_values=shapes.bin_rank_correlation(shapes.binned(gap, w)),
                _w=w,
            )
        )
    noise = rows[0]["values_raw"]
    for row in rows:
        row["moved"] = float(((row.pop("_w") - w0)[seen].abs() > noise).double().mean())
        row["values_vs_initial"] = row["values_raw"] / noise
        row["scores_vs_initial"] = row["scores_raw"] / rows[0]["scores_raw"]
    return pd.DataFrame(rows)


def _spread_row(gap, model: AttentionModel, history) -> dict:
    """One row of a comparison: the model's within-bin spreads, final scores and norms."""
    with torch.no_grad():
        sp = shapes.spreads(gap, model.scores().cpu(), model.values().cpu())
    return dict(**sp, **_final_scores(history), norm_p=float(model.p.norm()), norm_v=float(model.v.norm()))


@declare(
    data=REVIEW_DATA,
    multiples=MULTIPLES,
    d=Int(min=1),
    seed=Int(min=0),
    dtype=DTYPE,
    progress=Function("a function of one row (a dict)", allow_none=True),
)
def one_step_sweep(
    data: ReviewData,
    multiples=ETA_MULTIPLES,
    settings: TrainSettings | None = None,
    d: int = PAPER_D,
    seed: int = 0,
    reference: tuple | None = None,
    progress=None,
    dtype=torch.float64,
):
    """:func:`train_one_step_then_freeze` at every multiple ``m`` of :func:`one_step_eta` against
    :func:`train_all` (or ``reference = (model, history)``): per run its spreads, their ratios to the full
    model's, accuracies and seconds; ``progress(row)`` gets each row as it is measured. Chapter 06 shows it
    recorded (``scripts/one_step_sweep.py``)."""
    import pandas as pd

    multiples = tuple(multiples)
    if reference is not None and (
        not isinstance(reference, tuple) or len(reference) != 2 or not isinstance(reference[0], AttentionModel)
    ):
        raise InvalidArgumentError(
            f"reference must be (model, history) as train_all returns, or None; got a {type(reference).__name__}"
        )
    if reference is not None and reference[0].E.dtype != dtype:
        ref = reference[0].E.dtype
        raise InvalidArgumentError(f"reference is a {ref} model and the sweep trains in {dtype}: pass dtype={ref}")
    gap = statistics.posterior_gap(data.train)
    t0 = time.time()
    model, history = train_all(data, settings, d=d, seed=seed, dtype=dtype) if reference is None else reference
    full = dict(run="full training", multiple=float("nan"), eta0=float("nan"), **_spread_row(gap, model, history))
    full["seconds"] = time.time() - t0
    rows = [full]
    if progress is not None:
        progress(full)
    base = one_step_eta(data)
    for m in multiples:
        t0 = time.time()
        abl, hist = train_one_step_then_freeze(data, settings, d=d, seed=seed, eta0=m * base, dtype=dtype)
        row = dict(run=f"one step (x{m:g}), then freeze", multiple=m, eta0=m * base, **_spread_row(gap, abl, hist))
        row["seconds"] = time.time() - t0
        rows.append(row)
        if progress is not None:
            progress(row)
    table = pd.DataFrame(rows)
    for key in ("values_raw", "scores_raw", "values_normalised", "scores_normalised"):
        table[f"ratio_{key}"] = table[key] / full[key]
    return table


@dataclass
class ImplicitBias:
    """Per run (``v fixed``, ``v trained``) the cosine of ``p`` to the max-margin direction of its own selection
    and the run's sizes; the cosine between the two ``p`` and the share of reviews selecting the same words."""

    table: pd.DataFrame
    cos_between: float
    same_selection: float
    n: int
    tokens: int
    d: int
    eta0: float


def _compact(batch: RaggedBatch) -> RaggedBatch:
    """``batch`` over its own used tokens only (ids renumbered ``0..|U|-1``)."""
    _, local = torch.unique(batch.ids, return_inverse=True)
    return RaggedBatch(local, batch.offsets, batch.labels, int(local.max()) + 1)


@declare(
    data=Either(
        Batch("binary"),
        REVIEW_DATA,
        what="a ReviewData (tokensel.data.reviews.prepare_reviews) or a RaggedBatch with ±1 labels",
    ),
    n=Int(min=2),
    max_len=Int(min=2),
    d=Int(min=1),
    shift=Real(min=0.0, min_inclusive=False),
    lr=Real(min=0.0, min_inclusive=False),
    steps=Int(min=1, max=MAX_STEPS),
    seed=Int(min=0),
)
def implicit_bias_with_v(
    data: ReviewData | RaggedBatch,
    n: int = 400,
    max_len: int = 32,
    d: int = 512,
    shift: float = 8.0,
    lr: float = 0.5,
    steps: int = 2000,
    seed: int = 0,
) -> ImplicitBias:
    """Does training ``v`` change the direction ``p`` converges to, with ``E`` frozen after one step (largest value
    shift ``shift``)? ``p`` is trained by normalised GD twice from the same start, with ``v`` fixed and trained,
    on ``n`` reviews of ``data`` (truncated to ``max_len``) or on a batch, and compared with the max-margin
    direction of its own selection. Introduced in chapter 06."""
    import pandas as pd

    from ..analysis.maxmargin import max_margin_for_selection

    if isinstance(data, RaggedBatch):
        batch: RaggedBatch = data
    else:
        if n > data.train.n:
            raise InvalidArgumentError(f"n must be an int <= {data.train.n} (the training reviews), got {n}")
        rng = np.random.default_rng(seed)
        batch = _compact(data.train.subset(np.sort(rng.choice(data.train.n, n, replace=False))).truncate(max_len))
    eta0 = 2.0 * shift / float(statistics.alpha(batch).abs().max())
    start = one_step(AttentionModel.init(batch.vocab_size, d, seed=seed), batch, eta0)
    rows, final = [], {}
    for name, train_v in (("v fixed", False), ("v trained", True)):
        model = start.copy()
        traj = train_p_v(model, batch, lr, steps, train_v=train_v).to_frame()
        c = model.scores()
        selected = statistics.selection(batch, c, tol=1e-9 * max(1.0, float(model.p.norm())))
        svm = max_margin_for_selection(model.E, batch, selected)
        final[name] = (model.p.clone(), selected)
        row = dict(run=name, cos_pmm=cosine(model.p, svm.p), norm_p=float(model.p.norm()), norm_v=float(model.v.norm()))
        row.update(loss=float(traj.loss.iloc[-1]), train_acc=float(traj.train_acc.iloc[-1]))
        rows.append(dict(row, pairs=len(svm.pairs), norm_pmm=svm.norm))
    (pa, sa), (pb, sb) = final["v fixed"], final["v trained"]
    differs = torch.zeros(batch.n, dtype=torch.float64).index_add_(0, batch.seg, (sa != sb).double())
    same = float((differs == 0).double().mean())
    return ImplicitBias(pd.DataFrame(rows).set_index("run"), cosine(pa, pb), same, batch.n, batch.vocab_size, d, eta0)


#: IMDB's star ratings 1-2, 3-4, 7-8 and 9-10 as classes 0..3 (``np.digitize`` edges)
RATING_EDGES = (3, 5, 9)


@declare(data=REVIEW_DATA, split=SPLIT)
def rating_classes(data: ReviewData, split: str = "train") -> RaggedBatch:
    """The reviews of ``split`` with four rating classes (1-2, 3-4, 7-8, 9-10 stars). Introduced in chapter 07."""
    batch, ratings = (data.train, data.train_ratings) if split == "train" else (data.test, data.test_ratings)
    if ratings is None:
        raise DataUnavailableError(
            f"{data.name} has no star ratings: the four rating classes need IMDB's "
            "ratings (the original archive carries them)"
        )
    ratings = check_int_array(ratings, f"{split}_ratings", ndim=1)
    if len(ratings) != batch.n:
        raise InvalidArgumentError(f"{split}_ratings has {len(ratings)} entries for {batch.n} reviews")
    labels = batch.labels.cpu().numpy()
    outside = (
        (ratings < 1)
        | (ratings > 10)
        | ((ratings > 4) & (ratings < 7))
        | ((labels < 0) & (ratings > 4))
        | ((labels > 0) & (ratings < 7))
    )
    if outside.any():
        i = int(np.flatnonzero(outside)[0])
        raise InvalidArgumentError(
            f"{split}_ratings[{i}] = {int(ratings[i])} is not an IMDB rating of its review "
            "(negative reviews are rated 1-4, positive 7-10): it is not binned into a class"
        )
    classes = np.digitize(ratings, RATING_EDGES)
    return RaggedBatch(
        batch.ids, batch.offsets, torch.from_numpy(classes), len(data.vocab), num_classes=len(RATING_EDGES) + 1
    )


@declare(dtype=DTYPE, train_v=Bool(), **RECIPE)
def train_multiclass(
    data: ReviewData,
    settings: TrainSettings | None = None,
    d: int = PAPER_D,
    seed: int = 0,
    dtype=torch.float32,
    train_v: bool = False,
):
    """The four rating classes trained as :func:`train_full` trains the binary model, the orthonormal read-outs
    ``V`` fixed unless ``train_v`` (float32: the statistics read from it, rank correlations of bin means, are far
    above its rounding). Introduced in chapter 07."""
    train, test = rating_classes(data, "train"), rating_classes(data, "test")
    assert train.num_classes is not None  # rating_classes sets it
    model = MultiClassAttentionModel.init(len(data.vocab), d, train.num_classes, seed=seed, dtype=dtype)
    params = ("E", "p", "v") if train_v else ("E", "p")
    traj = train_joint(model, train, settings, params=params, test_batch=test, recipe="multiclass")
    return model, traj.to_frame()


@dataclass
class OneStepMulticlass:
    """One step of the K-class model from ``p = 0``: ``alpha`` (|S| x K), ``eta0`` and the values' change ``dW``."""

    alpha: torch.Tensor
    eta0: float
    dW: torch.Tensor

    @property
    def relative_error(self) -> float:
        """``||dW - eta0 alpha|| / ||eta0 alpha||`` over all tokens and classes (Lemma 2.3 predicts 0 as d grows)."""
        return float((self.dW - self.eta0 * self.alpha).norm() / (self.eta0 * self.alpha).norm())

    @property
    def correlations(self) -> list:
        """Per class ``k``, the correlation over tokens of the value change ``dW[:, k]`` with ``alpha[:, k]``."""
        return [float(np.corrcoef(self.dW[:, k], self.alpha[:, k])[0, 1]) for k in range(self.alpha.shape[1])]


@declare(batch=Batch("classes"), d=Int(min=1), seed=Int(min=0))
def one_step_multiclass(batch: RaggedBatch, d: int = PAPER_D, seed: int = 0) -> OneStepMulticlass:
    """One step of size ``2 / max|alpha_{s,k}|`` on the K-class model with ``p = 0``. Introduced in chapter 07."""
    alpha = statistics.alpha_multiclass(batch)
    eta0 = 2.0 / float(alpha.abs().max())
    assert batch.num_classes is not None  # alpha_multiclass refuses a batch without classes
    m0 = MultiClassAttentionModel.init(batch.vocab_size, d, batch.num_classes, seed=seed, p_init="zero")
    return OneStepMulticlass(alpha, eta0, (one_step(m0, batch, eta0).E - m0.E) @ m0.V)


@dataclass
class Fit:
    """:func:`fit_texts`' data, model and history, the posterior gap of every word and the two shapes."""

    data: ReviewData
    model: AttentionModel
    history: pd.DataFrame
    gap: torch.Tensor
    shapes: shapes.ShapeSummary

    @declare(split=SPLIT)
    def selection(self, split: str = "test"):
        """Per document of ``split``: its label, the words ``p`` selects, their mean gap, and whether its sign is
        the label's."""
        import pandas as pd

        batch = self.data.train if split == "train" else self.data.test
        with torch.no_grad():
            chosen = statistics.selection(batch, self.model.scores().detach().cpu().double())
        words, gap_list = [], []
        for seq, flags in zip(batch.to_lists(), torch.split(chosen, batch.lengths.tolist()), strict=True):
            ids = sorted({s for s, f in zip(seq, flags.tolist(), strict=True) if f})
            words.append(" ".join(self.data.vocab.words[s] for s in ids))
            gap_list.append(float(self.gap[ids].mean()))
        label = batch.labels.cpu().numpy()
        gaps = np.array(gap_list)
        return pd.DataFrame(
            {"label": label.astype(int), "selected": words, "gap of selected": gaps, "agrees": np.sign(gaps) == label}
        )

    def summary(self) -> dict:
        """Final accuracies, the two shapes, the words binned and the share of test selections that agree."""
        return dict(
            **_final_scores(self.history),
            u_gap=float(self.shapes.u_gap),
            rho=float(self.shapes.rho),
            words=int(torch.isfinite(self.gap).sum()),
            selection_agrees=float(self.selection("test")["agrees"].mean()),
        )


@declare(
    source=Either(
        REVIEW_DATA,
        Source(),
        Column(texts=True),
        what="a ReviewData, a list of texts (with labels), a CSV path, a pandas frame or a datasets.Dataset",
    ),
    labels=Column(allow_none=True),
    d=Int(min=1),
    settings=SETTINGS,
    seed=Int(min=0),
    text=Text(),
    label=Text(),
)
def fit_texts(
    source,
    labels=None,
    d: int = 512,
    settings: TrainSettings | None = None,
    seed: int = 0,
    text: str = "text",
    label: str = "label",
    **prepare,
) -> Fit:
    """The theory's model (:func:`train_full`, ``v`` fixed: the model the selection results are stated for) on
    labelled texts (a list with ``labels``, a CSV path, a frame or a ``datasets.Dataset``; ``prepare`` goes to
    :func:`tokensel.data.reviews.prepare_texts`), with the two shapes and the selection measured."""
    if isinstance(source, ReviewData):
        if labels is not None or prepare:
            raise InvalidArgumentError("source is already a ReviewData: pass no labels and no preparation options")
        data = source
    elif labels is not None:
        data = prepare_texts(source, labels, **prepare)
    else:
        data = from_frame(source, text=text, label=label, **prepare)
    model, history = train_full(data, settings, d=d, seed=seed)
    gap = statistics.posterior_gap(data.train)
    with torch.no_grad():
        summary = shapes.shape_summary(gap, model.scores().cpu(), model.values().cpu())
    return Fit(data, model, history, gap, summary)


@declare(
    name=Text(),
    d=Int(min=1),
    train=Instance(TrainSettings, what="a tokensel.TrainSettings"),
    n_train=Int(min=1, allow_none=True),
    n_test=Int(min=1, allow_none=True),
    max_len=Int(min=1),
    chunk=Int(min=1, allow_none=True),
    one_layer_dtype=DTYPE,
)
@dataclass(frozen=True)
class Scale:
    """Sizes and settings of the variant comparison: reviews drawn per split (None: all), words kept, reviews per
    gradient-accumulation chunk of the variants (None: one), and the one-layer model's dtype."""

    name: str
    d: int
    train: TrainSettings
    n_train: int | None
    n_test: int | None
    max_len: int
    chunk: int | None
    one_layer_dtype: torch.dtype


SCALES = {
    "reduced": Scale(
        "reduced",
        d=64,
        train=TrainSettings(steps=150, eval_every=50),
        n_train=3000,
        n_test=3000,
        max_len=48,
        chunk=None,
        one_layer_dtype=torch.float64,
    ),
    "paper": Scale(
        "paper",
        d=PAPER_D,
        train=TrainSettings(steps=300, eval_every=50),
        n_train=None,
        n_test=None,
        max_len=256,
        chunk=2500,
        one_layer_dtype=torch.float32,
    ),
}

#: every model of the comparison by short name, with its display name
MODEL_NAMES = {"one_layer": "one layer", **{k: cls.name for k, cls in variants.MODELS.items()}}
SCALE = Either(
    Instance(Scale),
    Choice(*SCALES),
    what=f"a Scale, or the name of a scale in SCALES {tuple(SCALES)}",
)


@declare(which=SCALE)
def scale(which, **changes) -> Scale:
    """``SCALES[which]`` with ``changes`` (``d=512``; ``steps=50`` changes its ``train``). Introduced in chapter 07."""
    base = which if isinstance(which, Scale) else SCALES[which]
    training = {k: changes.pop(k) for k in list(changes) if k in TrainSettings.__dataclass_fields__}
    unknown = sorted(set(changes) - set(base.__dataclass_fields__))
    if unknown:
        raise InvalidArgumentError(
            f"unknown Scale setting in {unknown}: the settings are {', '.join(base.__dataclass_fields__)}"
        )
    if training:
        changes["train"] = base.train.replace(**training)
    return replace(base, **changes)


SCALE_OBJECT = Instance(Scale, what="a Scale (tokensel.experiments.scale('reduced'))")


@declare(data=REVIEW_DATA, sc=SCALE_OBJECT, seed=Int(min=0))
def variant_batches(data: ReviewData, sc: Scale, seed: int = 0) -> tuple[RaggedBatch, RaggedBatch]:
    """The comparison's reviews: ``sc.n_train`` and ``sc.n_test`` drawn by ``seed``, truncated to ``sc.max_len``.
    Introduced in chapter 07."""
    rng = np.random.default_rng(seed)
    train, test = data.train, data.test
    for split, want, have in (("n_train", sc.n_train, train.n), ("n_test", sc.n_test, test.n)):
        if want is not None and want > have:
            raise InvalidArgumentError(
                f"the scale {sc.name!r} draws {split} = {want} documents but {data.name} holds "
                f"{have}: pass scale({sc.name!r}, {split}=None) to take them all, or fewer"
            )
    if sc.n_train is not None:
        train = train.subset(np.sort(rng.choice(train.n, sc.n_train, replace=False)))
    if sc.n_test is not None:
        test = test.subset(np.sort(rng.choice(test.n, sc.n_test, replace=False)))
    return train.truncate(sc.max_len), test.truncate(sc.max_len)


@dataclass
class Run:
    """One model of the comparison: its history and the binned scores, values and token values as the model
    reads them (``bins_h``: not ``E_s^T v`` for the MLP heads) against the training reviews' gap."""

    kind: str
    model: object
    history: pd.DataFrame
    bins_p: pd.DataFrame
    bins_v: pd.DataFrame
    u_gap: float
    spearman_v: float
    seconds: float
    words: int  # words with a posterior gap on the training reviews (the binned ones)
    bins_h: pd.DataFrame | None = None

    @property
    def name(self) -> str:
        return MODEL_NAMES[self.kind]

    def summary(self) -> dict:
        """Final accuracies, the two shapes, the values' spread and the training seconds."""
        return dict(
            **_final_scores(self.history),
            u_gap=float(self.u_gap),
            spearman_v=float(self.spearman_v),
            spread_v=shapes.values_spread(self.bins_v),
            seconds=float(self.seconds),
        )


@declare(
    kind=Choice(*MODEL_NAMES),
    train=Batch(dims=()),
    test=Batch(dims=()),
    sc=SCALE_OBJECT,
    seed=Int(min=0),
    device=Device(),
    scores_dtype=variants.SCORES_DTYPE,
    checkpoint=FilePath(allow_none=True),
    progress=Bool(allow_none=True),
)
def run_model(
    kind: str,
    train: RaggedBatch,
    test: RaggedBatch,
    sc: Scale,
    seed: int = 0,
    device="cpu",
    scores_dtype: torch.dtype | None = None,
    checkpoint=None,
    progress: bool | None = None,
) -> Run:
    """Train model ``kind`` on ``train`` with ``sc``'s settings and measure the two shapes against ``train``'s gap."""
    settings = sc.train.replace(checkpoint=checkpoint, progress=progress)
    gap = statistics.posterior_gap(train)
    t0 = time.time()
    train_d, test_d = train.to(device), test.to(device)
    model: AttentionModel | variants.VariantModel
    if kind == "one_layer":
        model = AttentionModel.init(train.vocab_size, sc.d, seed=seed, dtype=sc.one_layer_dtype, device=device)
        traj = train_joint(model, train_d, settings, test_batch=test_d)
    else:
        model = variants.make(kind, train.vocab_size, sc.d, seed=seed, device=device)
        traj = train_variant(model, train_d, settings, test_batch=test_d, chunk=sc.chunk, scores_dtype=scores_dtype)
    seconds = time.time() - t0
    with torch.no_grad():
        scores, values = model.scores().cpu(), model.values().cpu()
        # kind "one_layer" is the AttentionModel, every other kind a VariantModel (variants.make)
        token_values = model.token_values().cpu() if isinstance(model, variants.VariantModel) else values
    bp, bv, u, rho = shapes.shape_summary(gap, scores, values)
    words, bins_h = int(torch.isfinite(gap).sum()), shapes.binned(gap, token_values)
    return Run(kind, model, traj.to_frame(), bp, bv, u, rho, seconds, words, bins_h=bins_h)


KINDS = Subset(*MODEL_NAMES)
#: the arguments of a comparison of models (:func:`compare_variants` and the controls that retrain one)
COMPARISON = dict(data=REVIEW_DATA, sc=SCALE, kinds=Subset(*MODEL_NAMES, allow_none=True), seed=Int(min=0))


@declare(**COMPARISON)
def compare_variants(data: ReviewData, sc="reduced", kinds=None, seed: int = 0, **run_kw) -> dict:
    """:func:`run_model` for every model of ``kinds`` (default: the one-layer model and
    :data:`tokensel.models.variants.COMPARED`) on :func:`variant_batches`: ``{name: Run}``. Introduced in chapter 07."""
    sc = scale(sc)
    kinds = ("one_layer", *variants.COMPARED) if kinds is None else kinds
    train, test = variant_batches(data, sc, seed=seed)
    return {MODEL_NAMES[k]: run_model(k, train, test, sc, seed=seed, **run_kw) for k in kinds}


@declare(kinds=KINDS)
def check_kinds(kinds) -> tuple:
    """``kinds`` as a tuple of distinct model short names (keys of ``MODEL_NAMES``)."""
    return kinds
