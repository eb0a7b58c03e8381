"""Tables of a comparison of models (chapter 7), one row per model: the fields that claims read, keyed by model
kind (:func:`summaries`: accuracies and the two shapes' statistics; :func:`bin_noise`: how the value bins compare
with their noise), and the same numbers for display, by display name (:func:`verdicts`, :func:`value_noise`);
chapter 6's ablations side by side with their within-bin spreads (:func:`ablation_table`) and tables of
chosen words (:func:`word_table`).
"""

from __future__ import annotations

from ..analysis import shapes
from ..analysis.shapes import PER_TOKEN
from ..data.text import Words
from ..errors import InvalidParameterError
from ..validation import Instance, Numbers, Real, Text, declare
from .recipes import MODEL_NAMES, Run

RUNS = Instance(dict, what="a dict of Runs by model name (compare_variants)")


def _by_kind(runs: dict, token_values: bool = False) -> dict:
    """``runs`` (any name -> :class:`Run`) keyed by each run's model kind, in order; a run without the token
    values' bins is refused when ``token_values``, and so are two runs of one kind."""
    if not runs:
        raise InvalidParameterError("runs must be a non-empty dict of Runs (compare_variants)")
    out: dict = {}
    for name, run in runs.items():
        if not isinstance(run, Run) or (token_values and run.bins_h is None):
            raise InvalidParameterError(f"runs[{name!r}] must be a Run from run_model")
        if run.kind in out:
            raise InvalidParameterError(f"runs holds two runs of the model kind {run.kind!r}: one of each, please")
        out[run.kind] = run
    return out


def _display(table, columns: dict):
    """``table`` (indexed by model kind) for display: the index as the models' display names, ``columns``
    renamed (field -> display label) and in that order."""
    shown = table[list(columns)].rename(columns=columns)
    shown.index = [MODEL_NAMES[k] for k in table.index]
    shown.index.name = "model"
    return shown


@declare(error=InvalidParameterError, runs=RUNS)
def summaries(runs: dict):
    """One row per model of a comparison, indexed by its model kind (a key of
    :data:`~tokensel.experiments.recipes.MODEL_NAMES`: ``"one_layer"``, ``"mlp"``, ...), with the fields of
    :meth:`Run.summary` as columns: ``train_acc``, ``test_acc``, ``test_loss``, ``u_gap``, ``spearman_v``,
    ``spread_v`` and ``seconds``. A claim reads these fields (``summaries(runs).u_gap[kind]``);
    :func:`verdicts` shows them for reading.

    Introduced in chapter 07."""
    import pandas as pd

    table = pd.DataFrame.from_dict({kind: run.summary() for kind, run in _by_kind(runs).items()}, orient="index")
    table.index.name = "kind"
    return table


@declare(error=InvalidParameterError, runs=RUNS)
def verdicts(runs: dict):
    """For display: one row per model (by display name) with the accuracies, the two shape statistics of
    :func:`summaries` and whether each criterion holds (U-gap at least 1; rank correlation at least 0.9).

    Introduced in chapter 07."""
    fields = summaries(runs)
    fields = fields.assign(u_shape=fields.u_gap >= 1, monotone=fields.spearman_v >= 0.9)
    return _display(
        fields,
        {
            "train_acc": "train acc",
            "test_acc": "test acc",
            "test_loss": "test loss",
            "u_gap": "U-gap of E_s p (std)",
            "spearman_v": "Spearman of E_s v bins",
            "spread_v": "spread of E_s v bins (std)",
            "u_shape": "U-shape holds (>= 1)",
            "monotone": "values monotone (>= 0.9)",
        },
    )


#: the two readings of a model's values that :func:`bin_noise` measures: ``E_s^T v`` (``bins_v``) and the
#: token values as the model reads them (``bins_h``)
READINGS = {"values": "bins_v", "token_values": "bins_h"}


@declare(error=InvalidParameterError, runs=RUNS, z=Real(min=0.0, min_inclusive=False))
def bin_noise(runs: dict, z: float = 2.0):
    """One row per model, indexed by its model kind: how its value bins compare with the noise of a bin mean,
    for ``E_s^T v`` (columns ``values_*``) and for the token values as the model reads them
    (``token_values_*``): ``*_rho``, the rank correlation of the bin means with the gap
    (:func:`~tokensel.analysis.shapes.bin_rank_correlation`); ``*_range_se``, ``*_reversals`` and
    ``*_steps``, their range in standard errors of a bin mean and the adjacent bins whose mean falls by more
    than ``z`` standard errors of the difference, of how many (:func:`~tokensel.analysis.shapes.bin_noise_summary`);
    ``*_rise``, the slope on the positive side of the gap in standard errors
    (:func:`~tokensel.analysis.shapes.positive_side_rise`). A claim reads these fields
    (``bin_noise(runs).values_rise[kind]``); :func:`value_noise` shows them for reading.

    Introduced in chapter 07."""
    import pandas as pd

    rows = {}
    for kind, run in _by_kind(runs, token_values=True).items():
        row = {}
        for reading, attribute in READINGS.items():
            table = getattr(run, attribute)
            noise = shapes.bin_noise_summary(table, z=z)
            row[f"{reading}_rho"] = shapes.bin_rank_correlation(table)
            row[f"{reading}_range_se"] = noise["range_se"]
            row[f"{reading}_reversals"] = noise["reversals"]
            row[f"{reading}_steps"] = noise["steps"]
            row[f"{reading}_rise"] = shapes.positive_side_rise(table)
        rows[kind] = row
    table = pd.DataFrame.from_dict(rows, orient="index")
    table.index.name = "kind"
    return table


@declare(error=InvalidParameterError, runs=RUNS, z=Real(min=0.0, min_inclusive=False))
def value_noise(runs: dict, z: float = 2.0):
    """For display: the fields of :func:`bin_noise`, one row per model by display name, for ``E_s^T v`` and the
    token values: rank correlation with the gap, range in standard errors of a bin mean, reversals larger
    than ``z`` standard errors (``"k of n"``), and the rise on the positive side in standard errors.

    Introduced in chapter 07."""
    fields = bin_noise(runs, z=z)
    columns: dict[str, str] = {}
    for reading, label in (("values", "E_s v"), ("token_values", "token value")):
        fields[f"{reading}_reversals_of"] = [
            f"{r} of {n}" for r, n in zip(fields[f"{reading}_reversals"], fields[f"{reading}_steps"], strict=True)
        ]
        columns |= {
            f"{reading}_rho": f"{label}: Spearman",
            f"{reading}_range_se": f"{label}: range (SE)",
            f"{reading}_reversals_of": f"{label}: reversals > {z:g} SE",
            f"{reading}_rise": f"{label}: rise for Delta > 0 (SE)",
        }
    return _display(fields, columns)


@declare(
    error=InvalidParameterError,
    gap=PER_TOKEN,
    runs=Instance(dict, what="a dict: display name -> (model, history)"),
    reference=Text(),
)
def ablation_table(gap, runs: dict, reference: str):
    """One row per trained one-layer model (``runs``: display name -> ``(model, history)``): training and test
    accuracy, test loss, ``||p||``, ``||v||``, the within-bin spreads of ``E_s^T v`` and ``E_s^T p`` against
    ``gap`` in raw units and normalised (:func:`tokensel.analysis.shapes.spreads`), and each spread as a ratio to
    that of the model named ``reference`` (``... / ref``). Chapter 06's ablations."""
    import pandas as pd

    from .recipes import _spread_row

    if not runs:
        raise InvalidParameterError("runs must be a non-empty dict: display name -> (model, history)")
    if reference not in runs:
        raise InvalidParameterError(f"reference must name one of the runs {list(runs)}, got {reference!r}")
    rows = {}
    for name, pair in runs.items():
        if not isinstance(pair, tuple) or len(pair) != 2:
            raise InvalidParameterError(f"runs[{name!r}] must be a pair (model, history)")
        rows[name] = _spread_row(gap, *pair)
    table = pd.DataFrame(rows).T
    for key in ("values_raw", "scores_raw", "values_normalised", "scores_normalised"):
        table[f"{key} / ref"] = table[key] / table.loc[reference, key]
    return table


@declare(
    error=InvalidParameterError,
    words=Words(),
    ids=Numbers(int, min=0),
    columns=Instance(dict, what="a dict: column name -> one value per word"),
)
def word_table(words, ids, columns: dict):
    """A table of chosen words: one row per id of ``ids`` (indexed by the word, ``words[id]``), one column per
    entry of ``columns`` (name -> one value per vocabulary word, e.g. a gap or a rank). Chapter 06."""
    import pandas as pd
    import torch

    if max(ids) >= len(words):
        raise InvalidParameterError(f"ids must be a non-empty list of word ids in 0..{len(words) - 1}")
    out = {}
    for name, x in columns.items():
        x = torch.as_tensor(x)
        if x.ndim != 1 or len(x) != len(words):
            raise InvalidParameterError(f"columns[{name!r}] must hold one value per word ({len(words)})")
        out[name] = x[ids].tolist()
    return pd.DataFrame(out, index=pd.Index([words[i] for i in ids], name="word"))
