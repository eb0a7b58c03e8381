"""The phase diagram as probabilities (tokensel.experiments.phase): runs, per-cell probabilities, and a recorded sweep
read
back with its checks."""

import numpy as np
import pytest

import tokensel as ts
from tokensel.errors import DataUnavailableError, InvalidArgumentError


@pytest.fixture(scope="module")
def runs():
    # a tiny grid: a small step (selection fails) and the trap's step at a small width
    return ts.experiments.phase.phase_runs([0], [1, 2], widths=[32], steps=[0.3, 300.0], t_max=1e4, progress=False)


def test_one_row_per_run_with_consistent_verdicts(runs):
    assert list(runs.columns) == list(ts.experiments.phase.COLUMNS) and len(runs) == 4
    assert (runs.full == (runs.selected == 1.0)).all()
    trapped = (runs.predicted == 1.0) & (runs.loss_gap >= ts.experiments.phase.FLOOR_GAP)
    assert (runs.trapped == trapped).all()
    # a trapped run is compared with the max-margin direction of its own selection; the others are not
    assert runs[runs.trapped].own_status.isin(["solved", "infeasible"]).all()
    assert runs[~runs.trapped].cos_own.isna().all() and (runs[~runs.trapped].own_status == "").all()
    # deterministic: the same run again gives the same row
    again = ts.experiments.phase.phase_runs([0], [2], widths=[32], steps=[300.0], t_max=1e4, progress=False)
    row = runs[(runs.init_seed == 2) & (runs.eta0 == 300.0)]
    assert np.array_equal(
        again[["predicted", "selected", "loss_gap"]].to_numpy(), row[["predicted", "selected", "loss_gap"]].to_numpy()
    )


def test_probabilities_per_cell(runs):
    prob = ts.experiments.phase.phase_probabilities(runs)
    assert list(prob.d) == [32, 32] and list(prob.eta0) == [0.3, 300.0] and (prob.runs == 2).all()
    small = prob[prob.eta0 == 0.3].iloc[0]
    assert small.p_full == runs[runs.eta0 == 0.3].full.mean()
    with pytest.raises(InvalidArgumentError, match="runs must be"):
        ts.experiments.phase.phase_probabilities(runs.drop(columns="full"))


def test_a_recorded_sweep_is_checked_when_read(runs, tmp_path):
    path = tmp_path / "runs.csv"
    runs.to_csv(path, index=False, float_format="%.17g")
    back = ts.experiments.phase.read_runs(path)
    assert back.drop(columns="own_status").equals(runs.drop(columns="own_status"))
    edits = {
        "a flipped verdict": lambda r: r.assign(full=~r.full),
        "a fraction above 1": lambda r: r.assign(selected=r.selected + 2),
        "a run twice": lambda r: r.iloc[[0, 0, 1, 2, 3]],
        "a missing column": lambda r: r.drop(columns="trapped"),
        "cells at other seeds": lambda r: r.iloc[[0, 1, 2]],
    }
    for what, edit in edits.items():
        edit(runs).to_csv(path, index=False)
        with pytest.raises(DataUnavailableError, match="not a sweep of phase_runs|not a CSV"):
            ts.experiments.phase.read_runs(path)
        assert what
    with pytest.raises(DataUnavailableError, match="missing"):
        ts.experiments.phase.read_runs(tmp_path / "none.csv")


@pytest.mark.parametrize(
    "kw, match",
    [
        ({"data_seeds": []}, "data_seeds"),
        ({"init_seeds": [1, 1]}, "init_seeds"),
        ({"widths": [0]}, "widths"),
        ({"steps": [-1.0]}, "steps"),
        ({"t_max": 0.0}, "t_max"),
    ],
)
def test_bad_arguments_are_refused_before_any_run(kw, match):
    args = {"data_seeds": [0], "init_seeds": [1], "widths": [32], "steps": [1.0], "t_max": 10.0, **kw}
    with pytest.raises(ts.TokenselError, match=match):
        ts.experiments.phase.phase_runs(progress=False, **args)
