"""Runs stored in a folder and read back, checked: the recorded paper-scale runs chapter 07 shows
(:func:`write_run`, :func:`read_runs`) and chapter 06's recorded one-step sweep (:func:`write_sweep`,
:func:`read_sweep`)."""

from __future__ import annotations

import json

from ..analysis.shapes import Table
from ..errors import DataUnavailableError
from ..files import write_json_atomic
from ..validation import Either, FilePath, Instance, declare
from .recipes import MODEL_NAMES, Run


@declare(run=Instance(Run, what="a Run from run_model"), folder=FilePath())
def write_run(run: Run, folder, **provenance) -> None:
    """Store ``run`` in ``folder``: its bins and :meth:`Run.summary` with ``provenance``."""
    folder.mkdir(parents=True, exist_ok=True)
    run.bins_p.assign(mean_v=run.bins_v["mean"], std_v=run.bins_v["std"]).to_csv(
        folder / f"bins_{run.kind}.csv", index=False
    )
    write_json_atomic(folder / f"summary_{run.kind}.json", {**run.summary(), **provenance})


@declare(folder=FilePath())
def read_runs(folder):
    """``(summary, bins)`` by display name, as :func:`write_run` stored them. Introduced in chapter 07."""
    import pandas as pd

    if not folder.is_dir():
        raise DataUnavailableError(f"no recorded runs at {folder}")
    rows, bins = [], {}
    for kind, name in MODEL_NAMES.items():
        summary, table = folder / f"summary_{kind}.json", folder / f"bins_{kind}.csv"
        if not (summary.is_file() and table.is_file()):
            continue
        try:
            values = json.loads(summary.read_text())
            bp = pd.read_csv(table)
            bv = bp[["bin", "left", "right", "center", "count"]].assign(mean=bp["mean_v"], std=bp["std_v"])
        except (ValueError, KeyError) as err:
            raise DataUnavailableError(
                f"{summary.name} / {table.name} in {folder} cannot be read ({err}): "
                "write them again with tokensel.experiments.write_run"
            ) from err
        missing = {"train_acc", "test_acc", "test_loss", "u_gap", "spearman_v"} - set(values)
        if missing:
            raise DataUnavailableError(f"{summary} lacks {sorted(missing)}: write it again with write_run")
        rows.append({"model": name, **values})
        bins[name] = (bp.drop(columns=["mean_v", "std_v"]), bv)
    if not rows:
        raise DataUnavailableError(f"no summary_<kind>.json / bins_<kind>.csv pairs in {folder}")
    return pd.DataFrame(rows).set_index("model"), bins


#: what a recorded one-step sweep (:func:`tokensel.experiments.recipes.one_step_sweep`) must hold
SWEEP_COLUMNS = (
    "run",
    "multiple",
    "eta0",
    "values_raw",
    "scores_raw",
    "values_normalised",
    "scores_normalised",
    "test_acc",
    "test_loss",
    "norm_p",
    "norm_v",
)


@declare(
    rows=Either(Table(what="a DataFrame"), Instance(list, tuple), what="a DataFrame or a list of row dicts"),
    folder=FilePath(),
)
def write_sweep(rows, folder, **provenance) -> None:
    """Store a one-step sweep's rows (a frame or row dicts) and ``provenance`` in ``folder``."""
    import pandas as pd

    folder.mkdir(parents=True, exist_ok=True)
    table = rows if isinstance(rows, pd.DataFrame) else pd.DataFrame(list(rows))
    table.to_csv(folder / "sweep.csv", index=False)
    write_json_atomic(folder / "provenance.json", provenance)


@declare(folder=FilePath())
def read_sweep(folder):
    """``(table, provenance)`` as :func:`write_sweep` stored them, checked, with the ratios to the full model (the
    first row). Introduced in chapter 06."""
    import pandas as pd

    table_file, prov_file = folder / "sweep.csv", folder / "provenance.json"
    if not (table_file.is_file() and prov_file.is_file()):
        raise DataUnavailableError(
            f"no recorded sweep at {folder} (sweep.csv and provenance.json): run scripts/one_step_sweep.py"
        )
    try:
        table = pd.read_csv(table_file)
        provenance = json.loads(prov_file.read_text())
    except ValueError as err:
        raise DataUnavailableError(f"the recorded sweep at {folder} cannot be read ({err})") from err
    missing = set(SWEEP_COLUMNS) - set(table.columns)
    if missing or table.empty or not pd.isna(table["multiple"].iloc[0]):
        raise DataUnavailableError(
            f"the recorded sweep at {folder} lacks {sorted(missing) or 'its full model as first row'}: "
            "record it again with scripts/one_step_sweep.py"
        )
    wrong = _sweep_provenance_problem(provenance)
    if wrong:
        raise DataUnavailableError(
            f"the recorded sweep's provenance at {folder} {wrong}: record it again with scripts/one_step_sweep.py"
        )
    for key in ("values_raw", "scores_raw", "values_normalised", "scores_normalised"):
        table[f"ratio_{key}"] = table[key] / table[key].iloc[0]
    return table, provenance


#: what a recorded sweep's provenance must say of its runs: the settings a chapter quotes and compares
SWEEP_PROVENANCE: dict[str, type | tuple[type, ...]] = dict(seed=int, d=int, steps=int, lr=(int, float), precision=str)
#: the precisions a sweep can be recorded in (its models' dtype)
SWEEP_PRECISIONS = ("float32", "float64")


def _sweep_provenance_problem(provenance) -> str | None:
    """What is wrong with a recorded sweep's provenance, or None."""
    if not isinstance(provenance, dict):
        return f"is a {type(provenance).__name__}, not a JSON object"
    missing = sorted(set(SWEEP_PROVENANCE) - set(provenance))
    if missing:
        return f"lacks {missing}"
    for key, kind in SWEEP_PROVENANCE.items():
        value = provenance[key]
        if isinstance(value, bool) or not isinstance(value, kind):
            return f"has {key} = {value!r}, not a {kind.__name__ if isinstance(kind, type) else 'number'}"
    if provenance["precision"] not in SWEEP_PRECISIONS:
        return f"has precision = {provenance['precision']!r}, not one of {SWEEP_PRECISIONS}"
    return None
