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

from ..analysis import statistics
from ..analysis.maxmargin import max_margin_for_selection
from ..analysis.shapes import Table
from ..data import synthetic
from ..errors import InfeasibleSVMError, InvalidArgumentError
from ..models.attention import AttentionModel
from ..training.phases import cosine, gradient_flow, one_step
from ..training.progress import bar
from ..validation import Bool, Constraint, FilePath, Real, check_int_array, check_real, declare

#: the grid of chapter 04's phase diagram
WIDTHS = (32, 64, 128, 256, 512, 1024)
STEPS = (0.3, 1.0, 3.0, 10.0, 30.0, 100.0, 300.0)
#: a run whose loss stays this far above its floor at ``t_max`` has not reached it (chapter 04's threshold)
FLOOR_GAP = 1e-3
#: flow time at which a trapped run is compared with its own max-margin direction (scores grow like ``ln t``)
TRAP_T = 1e80

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
    "cos_own",
    "own_status",
)


class Seeds(Constraint):
    """Seeds of a grid: distinct non-negative integers, at least one; passed on as a list of ints."""

    def describe(self) -> str:
        return "distinct non-negative integers, at least one"

    def check(self, value, name, dims):
        arr = check_int_array(value, name)
        if arr.ndim != 1 or arr.size == 0 or (arr < 0).any() or len(set(arr.tolist())) != arr.size:
            raise InvalidArgumentError(f"{name} must be {self.describe()}, got {value!r}")
        return [int(s) for s in arr]

    def _invalid(self, dims):
        return [("none", []), ("twice", [1, 1]), ("negative", [-1]), ("floats", [0.5])]

    def example(self, dims):
        return [0]


class Grid(Constraint):
    """A grid axis: a non-empty list of positive numbers, integers (``kind=int``) or reals; passed on as a list."""

    def __init__(self, kind: type, *, allow_none: bool = False):
        super().__init__(allow_none=allow_none)
        self.kind = kind

    def describe(self) -> str:
        return f"a non-empty list of positive {'integers' if self.kind is int else 'numbers'}"

    def check(self, value, name, dims):
        if isinstance(value, (str, bytes)) or not hasattr(value, "__len__") or len(value) == 0:
            raise InvalidArgumentError(f"{name} must be {self.describe()}, got {value!r}")
        if self.kind is int:
            arr = check_int_array(np.asarray(value), name, ndim=1)
            if (arr < 1).any():
                raise InvalidArgumentError(f"{name} must be {self.describe()}, got {value!r}")
            return [int(x) for x in arr]
        return [check_real(x, f"{name}[{i}]", min=0.0, min_inclusive=False) for i, x in enumerate(value)]

    def _invalid(self, dims):
        return [("empty", []), ("zero", [0]), ("a str", "1"), ("NaN", [float("nan")])]

    def example(self, dims):
        return [1]


def _own_direction(m: AttentionModel, batch, tol_scale: float) -> tuple[float, str]:
    """Flow a trapped run on to ``TRAP_T``, then the cosine of ``p`` with the max-margin direction of the
    selection it has settled on (``nan`` and ``'infeasible'`` when that selection has none)."""
    gradient_flow(m, batch, t_max=TRAP_T, records=2, rtol=1e-8, atol=1e-12)
    sel = statistics.selection(batch, m.scores(), tol=tol_scale * float(m.p.norm()))
    try:
        svm = max_margin_for_selection(m.E, batch, sel)
    except InfeasibleSVMError:
        return float("nan"), "infeasible"
    return cosine(m.p, svm.p), "solved"


@declare(
    data_seeds=Seeds(),
    init_seeds=Seeds(),
    widths=Grid(int),
    steps=Grid(float),
    t_max=Real(min=0.0, min_inclusive=False),
    own_svm=Bool(),
    progress=Bool(allow_none=True),
)
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
    whether all are; ``trapped``, whether every value leads yet ``loss_gap >= FLOOR_GAP``. With ``own_svm``,
    every trapped run is followed on to ``t = 1e80`` and ``cos_own`` is the cosine of its ``p`` with the
    max-margin direction of its own final selection (``own_status`` ``'solved'``, or ``'infeasible'`` when
    that selection has no max-margin direction); other runs have ``cos_own`` NaN and ``own_status`` ``''``.
    Runs are deterministic: the same arguments give the same rows, whatever else is run beside them.
    """
    import pandas as pd

    rows = []
    total = len(data_seeds) * len(widths) * len(steps) * len(init_seeds)
    with bar(total, "phase diagram runs", disable=None if progress is None else not progress) as pbar:
        for ds in data_seeds:
            data = synthetic.theory_pairs(seed=ds)
            batch, important = data.batch, data.important
            for d in widths:
                for eta0 in steps:
                    for s in init_seeds:
                        m = one_step(AttentionModel.init(batch.vocab_size, d, seed=s), batch, eta0)
                        lead = statistics.value_lead(batch, m.values(), important)
                        predicted = float((lead > 0).double().mean())
                        floor = statistics.loss_floor(batch, m.values())
                        gradient_flow(m, batch, t_max=t_max, records=5, rtol=1e-6, atol=1e-9)
                        sel = statistics.selection(batch, m.scores(), tol=1e-9 * float(m.p.norm()))
                        selected = float(statistics.contains(batch, sel, important).double().mean())
                        loss_gap = m.loss(batch) - floor
                        trapped = predicted == 1.0 and loss_gap >= FLOOR_GAP
                        cos_own, status = float("nan"), ""
                        if trapped and own_svm:
                            cos_own, status = _own_direction(m, batch, 1e-9)
                        rows.append(
                            dict(
                                data_seed=ds,
                                d=d,
                                eta0=eta0,
                                init_seed=s,
                                predicted=predicted,
                                loss_gap=loss_gap,
                                selected=selected,
                                full=selected == 1.0,
                                trapped=trapped,
                                cos_own=cos_own,
                                own_status=status,
                            )
                        )
                        pbar.update()
    return pd.DataFrame(rows, columns=list(COLUMNS))


@declare(runs=Table(*COLUMNS, what="the DataFrame of phase_runs"))
def phase_probabilities(runs):
    """Per cell ``(d, eta0)`` of :func:`phase_runs`' rows: ``runs``, ``p_full`` (the fraction of runs that
    selected every important token), ``p_trapped`` (the trap's frequency), ``mean_selected``,
    ``p_predicted`` (the fraction of runs in which every value leads after the step), ``mean_predicted`` (the
    fraction of sequences whose important token leads, averaged over the runs) and ``min_cos_own``
    (the smallest cosine of a trapped run with its own max-margin direction; NaN without trapped runs)."""
    import pandas as pd

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


@declare(path=FilePath())
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
    for col in ("predicted", "selected"):
        x = runs[col].to_numpy(float)
        if not (np.isfinite(x).all() and (x >= 0).all() and (x <= 1).all()):
            return f"column {col} has values outside [0, 1]"
    if not np.isfinite(runs["loss_gap"].to_numpy(float)).all():
        return "column loss_gap is not finite"
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
