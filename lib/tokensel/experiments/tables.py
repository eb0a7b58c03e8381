"""Display tables of a comparison of models (chapter 7): one row per model, its accuracies and the two
shapes' statistics (:func:`verdicts`), and how its value bins compare with their noise (:func:`value_noise`);
chapter 6's ablations side by side with their within-bin spreads (:func:`ablation_table`) and tables of
chosen words (:func:`word_table`).
"""

from __future__ import annotations

from ..analysis import shapes
from ..analysis.shapes import PER_TOKEN
from ..data.text import Words
from ..errors import InvalidParameterError
from ..validation import Instance, Numbers, Real, Text, declare
from .recipes import Run

RUNS = Instance(dict, what="a dict of Runs by model name (compare_variants)")


@declare(error=InvalidParameterError, runs=RUNS)
def verdicts(runs: dict):
    """One row per model: accuracies, the two shape statistics and whether each criterion holds
    (U-gap at least 1; rank correlation at least 0.9).

    Introduced in chapter 07."""
    import pandas as pd

    rows = []
    for name, run in runs.items():
        s = run.summary()
        rows.append(
            {
                "model": name,
                "train acc": s["train_acc"],
                "test acc": s["test_acc"],
                "test loss": s["test_loss"],
                "U-gap of E_s p (std)": s["u_gap"],
                "Spearman of E_s v bins": s["spearman_v"],
                "spread of E_s v bins (std)": s["spread_v"],
                "U-shape holds (>= 1)": s["u_gap"] >= 1,
                "values monotone (>= 0.9)": s["spearman_v"] >= 0.9,
            }
        )
    return pd.DataFrame(rows).set_index("model")


@declare(error=InvalidParameterError, runs=RUNS, z=Real(min=0.0, min_inclusive=False))
def value_noise(runs: dict, z: float = 2.0):
    """One row per model: how its value bins compare with the noise of a bin mean
    (:func:`tokensel.analysis.shapes.bin_noise_summary`), for ``E_s^T v`` and for the token values as the model
    reads them (``bins_h``): rank correlation with the gap, range in standard errors of a bin mean, and the
    number of reversals larger than ``z`` standard errors.

    Introduced in chapter 07."""
    import pandas as pd

    rows = []
    for name, run in runs.items():
        if not isinstance(run, Run) or run.bins_h is None:
            raise InvalidParameterError(f"runs[{name!r}] must be a Run from run_model")
        row = {"model": name}
        for label, table in (("E_s v", run.bins_v), ("token value", run.bins_h)):
            noise = shapes.bin_noise_summary(table, z=z)
            row[f"{label}: Spearman"] = shapes.bin_rank_correlation(table)
            row[f"{label}: range (SE)"] = noise["range_se"]
            row[f"{label}: reversals > {z:g} SE"] = f"{noise['reversals']} of {noise['steps']}"
        rows.append(row)
    return pd.DataFrame(rows).set_index("model")


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
