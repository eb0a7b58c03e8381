"""Chapter 04's phase diagram as probabilities: where, over the draws of the data and of the initialisation,
one gradient step followed by the gradient flow of ``p`` selects every important token.

* :func:`phase_runs` -- every (data seed, width ``d``, first step ``eta0``, initialisation seed) of a grid run
  once: one step on ``E``, then the flow of ``p`` to ``t_max``; one row per run. A run that is *trapped*
  (every important token leads in value, yet the loss stays above its floor) is followed further and compared
  with the max-margin direction of its own final selection (the general form of Theorem 4.3).
* :func:`phase_probabilities` -- per cell of the grid: how many runs, the fraction that selected every
  important token, the trap's frequency, and the worst agreement of a trapped run with its own max-margin
  direction.
* :func:`read_runs` -- the rows of a recorded sweep (``scripts/phase_probability.py``), checked before use.
"""

from __future__ import annotations

import numpy as np
import torch

from ..analysis import statistics
from ..analysis.maxmargin import max_margin_for_selection
from ..data import synthetic
from ..errors import InfeasibleSVMError, InvalidArgumentError
from ..models.attention import AttentionModel
from ..training.phases import cosine, gradient_flow, one_step
from ..training.progress import bar
from ..validation import check_bool, check_int_array, check_real

#: the grid of chapter 04's phase diagram
WIDTHS = (32, 64, 128, 256, 512, 1024)
STEPS = (0.3, 1.0, 3.0, 10.0, 30.0, 100.0, 300.0)
#: a run whose loss stays this far above its floor at ``t_max`` has not reached it (chapter 04's threshold)
FLOOR_GAP = 1e-3
#: flow time at which a trapped run is compared with its own max-margin direction (scores grow like ``ln t``)
TRAP_T = 1e80
#: an earlier time of that follow-on, to see the cosine still rising
TRAP_MID = 1e20

COLUMNS = (
    "data_seed",
    "d",
    "eta0",
    "init_seed",
    "predicted",
    "loss_gap",
    "selected",
    "full",
    "trapped",
    "mass_pos",
    "mass_neg",
    "p_dot_v",
    "cos_own_mid",
    "cos_own",
    "own_status",
)


def _seeds(value, name: str) -> list[int]:
    arr = check_int_array(value, name, ndim=1)
    if arr.size == 0 or (arr < 0).any() or len(set(arr.tolist())) != arr.size:
        raise InvalidArgumentError(f"{name} must be distinct non-negative integers, at least one, got {value!r}")
    return [int(s) for s in arr]


def _grid(value, name: str, kind) -> list:
    if isinstance(value, (str, bytes)) or not hasattr(value, "__len__") or len(value) == 0:
        raise InvalidArgumentError(f"{name} must be a non-empty list of numbers, got {value!r}")
    if kind is int:
        arr = check_int_array(np.asarray(value), name, ndim=1)
        if (arr < 1).any():
            raise InvalidArgumentError(f"{name} must be positive integers, got {value!r}")
        return [int(x) for x in arr]
    return [check_real(x, f"{name}[{i}]", min=0.0, min_inclusive=False) for i, x in enumerate(value)]


def _own_direction(m: AttentionModel, batch, tol_scale: float) -> tuple[float, float, str]:
    """Flow a trapped run on to ``TRAP_T``, then the cosines of ``p`` at ``TRAP_MID`` and at ``TRAP_T`` with the
    max-margin direction of the selection it has settled on at ``TRAP_T`` (``nan`` and ``'infeasible'`` when that
    selection has none)."""
    kept: list[torch.Tensor] = []
    records = int(round(np.log10(TRAP_T))) + 4  # log-spaced records at every power of ten from 1e-3 on

    def keep(p):
        kept.append(p.clone())
        return {}

    traj = gradient_flow(m, batch, t_max=TRAP_T, records=records, rtol=1e-8, atol=1e-12, monitor=keep)
    mid = kept[int(np.argmin(np.abs(np.log10(np.maximum(traj.t, 1e-300)) - np.log10(TRAP_MID))))]
    sel = statistics.selection(batch, m.scores(), tol=tol_scale * float(m.p.norm()))
    try:
        svm = max_margin_for_selection(m.E, batch, sel)
    except InfeasibleSVMError:
        return float("nan"), float("nan"), "infeasible"
    return cosine(mid, svm.p), cosine(m.p, svm.p), "solved"


def _run(data, d: int, eta0: float, init_seed: int, t_max: float, own_svm: bool) -> dict:
    """One run of the grid: the step, the flow to ``t_max``, and (trapped, with ``own_svm``) the follow-on."""
    batch, important = data.batch, data.important
    m = one_step(AttentionModel.init(batch.vocab_size, d, seed=init_seed), batch, eta0)
    lead = statistics.value_lead(batch, m.values(), important)
    predicted = float((lead > 0).double().mean())
    floor = statistics.loss_floor(batch, m.values())
    gradient_flow(m, batch, t_max=t_max, records=5, rtol=1e-6, atol=1e-9)
    sel = statistics.selection(batch, m.scores(), tol=1e-9 * float(m.p.norm()))
    selected = float(statistics.contains(batch, sel, important).double().mean())
    loss_gap = m.loss(batch) - floor
    trapped = predicted == 1.0 and loss_gap >= FLOOR_GAP
    mass = statistics.selected_mass(batch, m.attention(batch), data.important_occurrences)
    positive = batch.labels > 0
    row = dict(
        predicted=predicted,
        loss_gap=loss_gap,
        selected=selected,
        full=selected == 1.0,
        trapped=trapped,
        mass_pos=float(mass[positive].min()),
        mass_neg=float(mass[~positive].min()),
        p_dot_v=float(m.p @ m.v),
        cos_own_mid=float("nan"),
        cos_own=float("nan"),
        own_status="",
    )
    if trapped and own_svm:
        row["cos_own_mid"], row["cos_own"], row["own_status"] = _own_direction(m, batch, 1e-9)
    return row


def phase_runs(
    data_seeds,
    init_seeds,
    widths=WIDTHS,
    steps=STEPS,
    t_max: float = 1e6,
    own_svm: bool = True,
    progress: bool | None = None,
):
    """Chapter 04's grid, run by run: for every data seed (:func:`tokensel.data.synthetic.theory_pairs`), width ``d``
    in ``widths``, first step ``eta0`` in ``steps`` and initialisation seed, one gradient step on ``E`` from
    ``AttentionModel.init(..., seed=init_seed)``, then the gradient flow of ``p`` to ``t_max``.

    Returns a DataFrame with one row per run (columns ``COLUMNS``): ``predicted``, the fraction of
    sequences whose important token leads in value after the step; ``loss_gap``, the loss minus its floor
    ``L*`` at ``t_max``; ``selected``, the fraction of sequences whose important token is selected; ``full``,
    whether all are; ``trapped``, whether every value leads yet ``loss_gap >= FLOOR_GAP``; ``mass_pos`` and
    ``mass_neg``, the smallest attention mass on the important token among the positive and among the negative
    sequences at ``t_max`` (a class is *buried* when its mass is tiny); ``p_dot_v``, ``p``'s component along
    the read-out ``v`` at ``t_max``. With ``own_svm``, every trapped run is followed on to ``t = 1e80``
    (``TRAP_T``) and ``cos_own`` is the cosine of its ``p`` with the max-margin direction of its own final
    selection, ``cos_own_mid`` the same at ``t = 1e20`` (``own_status`` ``'solved'``, or ``'infeasible'`` when
    that selection has no max-margin direction); other runs have both cosines NaN and ``own_status`` ``''``.
    Runs are deterministic: the same arguments give the same rows, whatever else is run beside them.
    """
    import pandas as pd

    data_seeds = _seeds(data_seeds, "data_seeds")
    init_seeds = _seeds(init_seeds, "init_seeds")
    widths = _grid(widths, "widths", int)
    steps = _grid(steps, "steps", float)
    t_max = check_real(t_max, "t_max", min=0.0, min_inclusive=False)
    check_bool(own_svm, "own_svm")
    rows = []
    total = len(data_seeds) * len(widths) * len(steps) * len(init_seeds)
    with bar(total, "phase diagram runs", disable=None if progress is None else not progress) as pbar:
        for ds in data_seeds:
            data = synthetic.theory_pairs(seed=ds)
            for d in widths:
                for eta0 in steps:
                    for s in init_seeds:
                        row = _run(data, d, eta0, s, t_max, own_svm)
                        rows.append(dict(data_seed=ds, d=d, eta0=eta0, init_seed=s, **row))
                        pbar.update()
    return pd.DataFrame(rows, columns=list(COLUMNS))


def phase_probabilities(runs):
    """Per cell ``(d, eta0)`` of :func:`phase_runs`' rows: ``runs``, ``p_full`` (the fraction of runs that
    selected every important token), ``p_trapped`` (the trap's frequency), ``mean_selected``,
    ``p_predicted`` (the fraction of runs in which every value leads after the step), ``mean_predicted`` (the
    fraction of sequences whose important token leads, averaged over the runs) and ``min_cos_own``
    (the smallest cosine of a trapped run with its own max-margin direction; NaN without trapped runs)."""
    import pandas as pd

    if not isinstance(runs, pd.DataFrame) or not set(COLUMNS) <= set(runs.columns):
        raise InvalidArgumentError(f"runs must be the DataFrame of phase_runs (columns {', '.join(COLUMNS)})")
    if runs.empty:
        raise InvalidArgumentError("runs holds no run")
    g = runs.groupby(["d", "eta0"], sort=True)
    out = pd.DataFrame(
        {
            "runs": g.size(),
            "p_full": g["full"].mean(),
            "p_trapped": g["trapped"].mean(),
            "mean_selected": g["selected"].mean(),
            "p_predicted": g["predicted"].apply(lambda x: float((x == 1.0).mean())),
            "mean_predicted": g["predicted"].mean(),
            "min_cos_own": g["cos_own"].min(),
        }
    )
    return out.reset_index()


def read_runs(path):
    """The rows of a recorded sweep (``runs.csv`` written by ``scripts/phase_probability.py``), checked before
    use: the columns of ``COLUMNS``, fractions in [0, 1], booleans as booleans, ``full`` and ``trapped``
    consistent with the other columns, no run twice, and every cell run at the same seeds. Raises
    :class:`~tokensel.errors.DataUnavailableError` naming the first problem."""
    import pandas as pd

    from ..errors import DataUnavailableError
    from ..files import check_regular_file

    path = check_regular_file(path, "path", DataUnavailableError)
    try:
        runs = pd.read_csv(path, keep_default_na=False, na_values=["", "nan", "NaN"])
    except (ValueError, OSError) as exc:
        raise DataUnavailableError(f"{str(path)!r} is not a CSV table of phase runs: {exc}") from None
    if "own_status" in runs.columns:
        status = runs["own_status"]  # an empty status is read back as missing
        runs["own_status"] = status.astype(object).where(status.notna(), "")
    bad = _problem(runs)
    if bad:
        raise DataUnavailableError(
            f"{str(path)!r} is not a sweep of phase_runs: {bad}; run the sweep again "
            "(python scripts/phase_probability.py)"
        )
    return runs


def _problem(runs) -> str | None:
    if list(runs.columns) != list(COLUMNS):
        return f"its columns are {list(runs.columns)}, expected {list(COLUMNS)}"
    if runs.empty:
        return "it holds no run"
    for col in ("full", "trapped"):
        if runs[col].dtype != bool:
            return f"column {col} is not true/false"
    for col in ("predicted", "selected", "mass_pos", "mass_neg"):
        x = runs[col].to_numpy(float)
        if not (np.isfinite(x).all() and (x >= 0).all() and (x <= 1).all()):
            return f"column {col} has values outside [0, 1]"
    for col in ("loss_gap", "p_dot_v"):
        if not np.isfinite(runs[col].to_numpy(float)).all():
            return f"column {col} is not finite"
    for col in ("cos_own_mid", "cos_own"):
        x = runs[col].to_numpy(float)
        if (np.abs(x[np.isfinite(x)]) > 1 + 1e-9).any() or (np.isfinite(x) != (runs["own_status"] == "solved")).any():
            return f"column {col} is not a cosine exactly where own_status is solved"
    if (runs["full"] != (runs["selected"] == 1.0)).any():
        return "full disagrees with selected"
    trapped = (runs["predicted"] == 1.0) & (runs["loss_gap"] >= FLOOR_GAP)
    if (runs["trapped"] != trapped).any():
        return "trapped disagrees with predicted and loss_gap"
    if not set(runs["own_status"].astype(str)) <= {"", "solved", "infeasible"}:
        return "own_status has an unknown value"
    keys = ["data_seed", "d", "eta0", "init_seed"]
    if runs.duplicated(keys).any():
        return "a run appears twice"
    seeds = runs.groupby(["d", "eta0"])[["data_seed", "init_seed"]].apply(
        lambda g: tuple(sorted(zip(g.data_seed, g.init_seed, strict=True)))
    )
    if seeds.nunique() != 1:
        return "the cells were not run at the same seeds"
    return None
