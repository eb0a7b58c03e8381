"""Tables of a comparison of models (chapter 07), one row per model: keyed by model kind for claims
(:func:`summaries`, :func:`bin_noise`), by display name for reading (:func:`verdicts`, :func:`value_noise`);
chapter 06's ablations side by side (:func:`ablation_table`) and tables of chosen words."""

from __future__ import annotations

from ..analysis import shapes
from ..analysis.shapes import PER_TOKEN
from ..data.text import Words
from ..errors import InvalidArgumentError
from ..validation import Instance, Numbers, Real, Text, declare
from .recipes import MODEL_NAMES, Run

RUNS = Instance(dict, what="a dict of Runs by model name (compare_variants)")


def _by_kind(runs: dict, token_values: bool = False) -> dict:
    """``runs`` keyed by each run's model kind; two runs of one kind (or without ``bins_h`` when ``token_values``)
    are refused."""
    if not runs:
        raise InvalidArgumentError("runs must be a non-empty dict of Runs (compare_variants)")
    out: dict = {}
    for name, run in runs.items():
        if not isinstance(run, Run) or (token_values and run.bins_h is None):
            raise InvalidArgumentError(f"runs[{name!r}] must be a Run from run_model")
        if run.kind in out:
            raise InvalidArgumentError(f"runs holds two runs of the model kind {run.kind!r}: one of each, please")
        out[run.kind] = run
    return out


def _display(table, columns: dict):
    """``table`` by display name, ``columns`` (field -> label) renamed and in that order."""
    shown = table[list(columns)].rename(columns=columns)
    shown.index = [MODEL_NAMES[k] for k in table.index]
    shown.index.name = "model"
    return shown


@declare(runs=RUNS)
def summaries(runs: dict):
    """:meth:`Run.summary` per model kind, for claims (``summaries(runs).u_gap[kind]``). Introduced in chapter 07."""
    import pandas as pd

    table = pd.DataFrame.from_dict({kind: run.summary() for kind, run in _by_kind(runs).items()}, orient="index")
    table.index.name = "kind"
    return table


@declare(runs=RUNS)
def verdicts(runs: dict):
    """:func:`summaries` for reading, with whether each shape holds (U-gap >= 1, rank correlation >= 0.9).
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


#: the two readings of a model's values: ``E_s^T v`` and the token values as the model reads them
READINGS = {"values": "bins_v", "token_values": "bins_h"}


@declare(runs=RUNS, z=Real(min=0.0, min_inclusive=False))
def bin_noise(runs: dict, z: float = 2.0):
    """Per model kind, for both readings of the values: the bins' rank correlation, their noise
    (:func:`~tokensel.analysis.shapes.bin_noise_summary`) and their rise
    (:func:`~tokensel.analysis.shapes.positive_side_rise`), for claims. Introduced in chapter 07."""
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


@declare(runs=RUNS, z=Real(min=0.0, min_inclusive=False))
def value_noise(runs: dict, z: float = 2.0):
    """:func:`bin_noise` for reading, by display name. Introduced in chapter 07."""
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
    gap=PER_TOKEN,
    runs=Instance(dict, what="a dict: display name -> (model, history)"),
    reference=Text(),
)
def ablation_table(gap, runs: dict, reference: str):
    """Chapter 06's ablations: per model (``name -> (model, history)``) accuracies, norms and within-bin spreads
    against ``gap``, each spread also as a ratio to the ``reference`` model's."""
    import pandas as pd

    from .recipes import _spread_row

    if not runs:
        raise InvalidArgumentError("runs must be a non-empty dict: display name -> (model, history)")
    if reference not in runs:
        raise InvalidArgumentError(f"reference must name one of the runs {list(runs)}, got {reference!r}")
    rows = {}
    for name, pair in runs.items():
        if not isinstance(pair, tuple) or len(pair) != 2:
            raise InvalidArgumentError(f"runs[{name!r}] must be a pair (model, history)")
        rows[name] = _spread_row(gap, *pair)
    table = pd.DataFrame(rows).T
    for key in ("values_raw", "scores_raw", "values_normalised", "scores_normalised"):
        table[f"{key} / ref"] = table[key] / table.loc[reference, key]
    return table


@declare(
    words=Words(),
    ids=Numbers(int, min=0),
    columns=Instance(dict, what="a dict: column name -> one value per word"),
)
def word_table(words, ids, columns: dict):
    """One row per word of ``ids``, one column per entry of ``columns`` (one value per word). Chapter 06."""
    import pandas as pd
    import torch

    if max(ids) >= len(words):
        raise InvalidArgumentError(f"ids must be a non-empty list of word ids in 0..{len(words) - 1}")
    out = {}
    for name, x in columns.items():
        x = torch.as_tensor(x)
        if x.ndim != 1 or len(x) != len(words):
            raise InvalidArgumentError(f"columns[{name!r}] must hold one value per word ({len(words)})")
        out[name] = x[ids].tolist()
    return pd.DataFrame(out, index=pd.Index([words[i] for i in ids], name="word"))
