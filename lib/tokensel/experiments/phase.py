"""Chapter 04's experiments: where, over the draws of the data and of the initialisation, one gradient step
followed by the gradient flow of ``p`` selects every important token, the trap of too large a step, and two kinds
of data beyond Assumption 1.

* :func:`phase_runs` -- every (data seed, width ``d``, first step ``eta0``, initialisation seed) of a grid run
  once: one step on ``E``, then the flow of ``p`` to ``t_max``; one row per run. A run that is *trapped*
  (every important token leads in value, yet the loss stays above its floor) is followed further and compared
  with the max-margin direction of its own final selection (the general form of Theorem 4.3).
* :func:`phase_probabilities` -- per cell of the grid: how many runs, the fraction that selected every
  important token, the trap's frequency, and the worst agreement of a trapped run with its own max-margin
  direction.
* :func:`read_runs` -- the rows of a recorded sweep (``scripts/phase_probability.py``), checked before use.
* :func:`agreement`, :func:`cell_agreement` -- a small executed grid against the recorded sweep, within
  binomial noise.
* :func:`trap_anatomy`, :func:`trap_pair`, :func:`trap_trajectory`, :func:`gd_against_flow` -- what the
  trapped runs have in common, and one of them followed along the flow and by plain gradient descent.
* :func:`generator_contrast`, :func:`several_important` -- irrelevant tokens irrelevant only in expectation;
  several important tokens per sequence (records with named fields; ``.table()`` shows them).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from ..analysis import statistics
from ..analysis.maxmargin import max_margin_for_selection
from ..analysis.shapes import Table
from ..data import synthetic
from ..errors import InfeasibleSVMError, InvalidArgumentError, SolverError
from ..models.attention import AttentionModel
from ..training.phases import cosine, gradient_flow, implicit_flow, one_step
from ..training.progress import bar
from ..validation import Bool, Choice, Constraint, FilePath, Int, Real, check_int_array, check_real, declare

#: the grid of chapter 04's phase diagram
WIDTHS = (32, 64, 128, 256, 512, 1024)
STEPS = (0.3, 1.0, 3.0, 10.0, 30.0, 100.0, 300.0)
#: a run whose loss stays this far above its floor at ``t_max`` has not reached it (chapter 04's threshold)
FLOOR_GAP = 1e-3
#: flow time at which a trapped run is compared with its own max-margin direction (scores grow like ``ln t``)
TRAP_T = 1e80
#: ``own_status`` of a trapped run followed by implicit Euler steps in many-digit arithmetic, after the explicit
#: integrator and the float64 implicit steps spent their budgets
PRECISE = "solved (implicit, many digits)"
#: ``own_status`` of a trapped run whose own max-margin problem was solved: the follow-on by the explicit integrator,
#: or by implicit Euler steps after the explicit one spent its budget (in float64, or in many digits after those
#: spent theirs)
SOLVED = ("solved", "solved (implicit)", PRECISE)
#: ``own_status`` of a trapped run that no integrator could take to ``trap_t`` within its budget of gradient
#: evaluations: its own max-margin direction is not compared (cosines NaN)
STIFF = "stiff (not followed)"

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


def _own_direction(
    m: AttentionModel,
    batch,
    tol_scale: float,
    trap_t: float,
    budget: int | None,
    implicit_budget: int | None = None,
    digits: int | None = None,
    followed: list | None = None,
) -> tuple[float, float, str]:
    """Flow a trapped run on for ``trap_t``, then the cosines of ``p`` at ``trap_t ** 0.25`` and at ``trap_t`` with
    the max-margin direction of the selection it has settled on at ``trap_t`` (``nan`` and ``'infeasible'`` when
    that selection has none). With a ``budget`` of gradient evaluations, a stiff flow that the explicit integrator
    cannot take to ``trap_t`` within it is followed by :func:`implicit_flow` from where the run stood
    (``'solved (implicit)'``); with an ``implicit_budget`` too (its evaluations count the Hessians'), a run that
    this one also cannot take to ``trap_t`` within it has NaN cosines and the status ``STIFF``, unless ``digits``
    is given: then the implicit steps start again from where the run stood, in ``digits``-digit arithmetic
    (``PRECISE``), and ``followed`` (a list) receives that follow-on as ``(t, p)`` pairs, ``p`` a list of floats
    (plain lists, so that two sweeps' ``attrs`` compare)."""
    kept: list[torch.Tensor] = []
    records = int(round(np.log10(trap_t))) + 4  # log-spaced records, at every power of ten for trap_t = 1e80

    def keep(p):
        kept.append(p.clone())
        return {}

    solved = "solved"
    try:
        traj = gradient_flow(
            m,
            batch,
            t_max=trap_t,
            records=records,
            rtol=1e-8,
            atol=1e-12,
            monitor=keep,
            max_evaluations=budget,
        )
    except SolverError:  # stiff: model.p is still where the flow to t_max left it
        kept.clear()
        try:
            traj = implicit_flow(m, batch, t_max=trap_t, records=records, monitor=keep, max_evaluations=implicit_budget)
            solved = "solved (implicit)"
        except SolverError:  # model.p is still where the run stood
            if digits is None:
                return float("nan"), float("nan"), STIFF
            kept.clear()
            traj = implicit_flow(m, batch, t_max=trap_t, records=records, monitor=keep, digits=digits)
            solved = PRECISE
            if followed is not None:
                followed.extend((float(t), p.detach().cpu().tolist()) for t, p in zip(traj.t, kept, strict=True))
    log_t = np.log10(np.maximum(np.asarray(traj.t), 1e-300))
    mid = kept[int(np.argmin(np.abs(log_t - np.log10(trap_t) / 4)))]
    sel = statistics.selection(batch, m.scores(), tol=tol_scale * float(m.p.norm()))
    try:
        svm = max_margin_for_selection(m.E, batch, sel)
    except InfeasibleSVMError:
        return float("nan"), float("nan"), "infeasible"
    return cosine(mid, svm.p), cosine(m.p, svm.p), solved


def _stepped(batch, d: int, eta0: float, init_seed: int) -> AttentionModel:
    """A run's model after its first step: the paper's initialisation at ``init_seed``, one step of size ``eta0``
    on ``E``."""
    return one_step(AttentionModel.init(batch.vocab_size, d, seed=init_seed), batch, eta0)


def _run(
    data,
    d: int,
    eta0: float,
    init_seed: int,
    t_max: float,
    own_svm: bool,
    trap_t: float,
    budget: int | None = None,
    implicit_budget: int | None = None,
    digits: int | None = None,
    followed: list | None = None,
) -> dict:
    """One run of the grid: the step, the flow to ``t_max``, and (trapped, with ``own_svm``) the follow-on."""
    batch, important = data.batch, data.important
    m = _stepped(batch, d, eta0, init_seed)
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
        row["cos_own_mid"], row["cos_own"], row["own_status"] = _own_direction(
            m, batch, 1e-9, trap_t, budget, implicit_budget, digits, followed
        )
    return row


@declare(
    data_seeds=Seeds(),
    init_seeds=Seeds(),
    widths=Grid(int),
    steps=Grid(float),
    t_max=Real(min=0.0, min_inclusive=False),
    own_svm=Bool(),
    progress=Bool(allow_none=True),
    trap_t=Real(min=1.0),
    follow_evaluations=Int(min=1, allow_none=True),
    implicit_evaluations=Int(min=1, allow_none=True),
    digits=Int(min=30, max=2000, allow_none=True),
)
def phase_runs(
    data_seeds,
    init_seeds,
    widths=WIDTHS,
    steps=STEPS,
    t_max: float = 1e6,
    own_svm: bool = True,
    progress: bool | None = None,
    trap_t: float = TRAP_T,
    follow_evaluations: int | None = None,
    implicit_evaluations: int | None = None,
    digits: int | None = None,
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
    the read-out ``v`` at ``t_max``. With ``own_svm``, every trapped run is followed on for ``trap_t`` (default
    ``TRAP_T``, ``1e80``) and ``cos_own`` is the cosine of its ``p`` with the max-margin direction of its own final
    selection, ``cos_own_mid`` the same at ``trap_t ** 0.25`` (``1e20``; ``own_status`` ``'solved'``, or
    ``'infeasible'`` when that selection has no max-margin direction); other runs have both cosines NaN and
    ``own_status`` ``''``. The follow-on is integrated by :func:`gradient_flow`, which never ends on a stiff flow
    (part of the scores settled at a finite optimum: its steps stay at that optimum's time scale); with
    ``follow_evaluations`` a follow-on that has not reached ``trap_t`` after that many gradient evaluations goes on
    by :func:`implicit_flow` from where the run stood, ``own_status`` ``'solved (implicit)'``; with
    ``implicit_evaluations`` too (the implicit steps' gradient evaluations, their Hessians' included), a run that
    neither integrator takes to ``trap_t`` within its budget has ``own_status`` ``STIFF`` and NaN cosines, unless
    ``digits`` is given: then its implicit steps start again in ``digits``-digit arithmetic, which follows such a
    flow far beyond float64's reach (``own_status`` ``PRECISE``), and ``runs.attrs["followed"]`` maps the run's
    ``(data_seed, d, eta0, init_seed)`` to that follow-on's ``(t, p)`` pairs (:func:`read_followed` reads them
    back once recorded). A run that stays within the budgets gives the same row either way.
    Runs are deterministic: the same arguments give the same rows, whatever else is run beside them.
    """
    import pandas as pd

    rows = []
    followed: dict = {}
    total = len(data_seeds) * len(widths) * len(steps) * len(init_seeds)
    with bar(total, "phase diagram runs", disable=None if progress is None else not progress) as pbar:
        for ds in data_seeds:
            data = synthetic.theory_pairs(seed=ds)
            for d in widths:
                for eta0 in steps:
                    for s in init_seeds:
                        path: list = []
                        row = _run(
                            data,
                            d,
                            eta0,
                            s,
                            t_max,
                            own_svm,
                            trap_t,
                            follow_evaluations,
                            implicit_evaluations,
                            digits,
                            path,
                        )
                        rows.append(dict(data_seed=ds, d=d, eta0=eta0, init_seed=s, **row))
                        if path:
                            followed[(ds, d, float(eta0), s)] = path
                        pbar.update()
    runs = pd.DataFrame(rows, columns=list(COLUMNS))
    runs.attrs["followed"] = followed
    return runs


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


def recorded_path():
    """Where the book's recorded sweep lies: ``book/recorded/phase/runs.csv`` under the book's root (the folder
    with ``_config.yml`` at or above the working directory), else under the checkout this library was loaded
    from."""
    from pathlib import Path

    here = Path.cwd().resolve()
    roots = [d for d in (here, *here.parents) if (d / "_config.yml").is_file()][:1]
    tail = Path("book") / "recorded" / "phase" / "runs.csv"
    for root in [*roots, Path(__file__).resolve().parents[3]]:
        if (root / tail).is_file():
            return root / tail
    return (roots or [here])[0] / tail


@declare(path=FilePath(allow_none=True))
def read_runs(path=None):
    """The rows of a recorded sweep (``runs.csv`` written by ``scripts/phase_probability.py``; default the book's,
    :func:`recorded_path`), checked before use: the columns of ``COLUMNS``, fractions and attention masses in
    [0, 1], booleans as booleans, ``full`` and ``trapped`` consistent with the other columns, cosines exactly
    where a max-margin problem was solved, no run twice, and every cell run at the same seeds. Raises
    :class:`~tokensel.errors.DataUnavailableError` naming the first problem."""
    import pandas as pd

    from ..errors import DataUnavailableError
    from ..files import check_regular_file

    path = check_regular_file(recorded_path() if path is None else path, "path", DataUnavailableError)
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


def _followed_name(key) -> str:
    data_seed, d, eta0, init_seed = key
    return f"data-{int(data_seed)}-init-{int(init_seed)}-d-{int(d)}-eta0-{float(eta0):g}.csv"


def write_followed(out, key, path_tp) -> None:
    """Write one run's follow-on (``(t, p)`` pairs, as :func:`phase_runs` keeps them in
    ``runs.attrs["followed"]``) to ``out/followed/`` under its run's name, atomically."""
    from pathlib import Path

    import pandas as pd

    folder = Path(out) / "followed"
    folder.mkdir(parents=True, exist_ok=True)
    t = np.array([a for a, _ in path_tp], dtype=np.float64)
    P = np.stack([np.asarray(p, dtype=np.float64) for _, p in path_tp])
    table = pd.DataFrame(P, columns=[f"p_{k}" for k in range(P.shape[1])])
    table.insert(0, "t", t)
    target = folder / _followed_name(key)
    tmp = target.with_suffix(".tmp")
    table.to_csv(tmp, index=False, float_format="%.17g")
    tmp.replace(target)


@declare(
    data_seed=Int(min=0),
    d=Int(min=1),
    eta0=Real(min=0.0, min_inclusive=False),
    init_seed=Int(min=0),
    path=FilePath(allow_none=True),
)
def read_followed(data_seed: int, d: int, eta0: float, init_seed: int, path=None):
    """The recorded follow-on of one run followed in many digits (``own_status`` ``PRECISE``): ``(t, P)``,
    the flow times (from 0, increasing) and ``p`` at each of them (one row per time, ``d`` columns), from
    ``followed/`` beside the book's ``runs.csv`` (or ``path``). Checked before use: its columns, finite values,
    increasing times. Raises :class:`~tokensel.errors.DataUnavailableError` naming the problem."""
    import pandas as pd

    from ..errors import DataUnavailableError
    from ..files import check_regular_file

    key = (data_seed, d, eta0, init_seed)
    if path is None:
        path = recorded_path().parent / "followed" / _followed_name(key)
    path = check_regular_file(path, "path", DataUnavailableError)
    try:
        table = pd.read_csv(path)
    except (OSError, ValueError) as err:
        raise DataUnavailableError(f"{str(path)!r} cannot be read as a follow-on: {err}") from None
    expected = ["t", *(f"p_{k}" for k in range(d))]
    values = table.to_numpy(dtype=np.float64) if list(table.columns) == expected else None
    if values is None:
        problem = f"its columns are {list(table.columns)[:4]}..., expected t, p_0, ..., p_{d - 1}"
    elif len(values) < 2 or not np.isfinite(values).all():
        problem = "it holds fewer than two times, or values that are not finite"
    elif values[0, 0] != 0.0 or (np.diff(values[:, 0]) <= 0).any():
        problem = "its times do not start at 0 and increase"
    else:
        return values[:, 0], values[:, 1:]
    raise DataUnavailableError(
        f"{str(path)!r} is not the follow-on of the run {key}: {problem}; record it again "
        "(python scripts/phase_probability.py --digits ...)"
    )


@declare(
    runs=Table(*COLUMNS, what="the DataFrame of phase_runs", nonempty=True),
    data_seed=Int(min=0),
    d=Int(min=1),
    eta0=Real(min=0.0, min_inclusive=False),
    init_seed=Int(min=0),
    tie=Real(min=0.0, max=1.0, min_inclusive=False),
    path=FilePath(allow_none=True),
)
def followed_directions(runs, data_seed: int, d: int, eta0: float, init_seed: int, tie: float = 1e-3, path=None):
    """A run followed in many digits, against two max-margin directions: that of the selection the sweep reads
    at the end (tokens within ``1e-9 ||p||`` of their sequence's top score, as :func:`phase_runs` does), and that
    of the selection in direction, with ties (within ``tie ||p||``: a score gap that stays finite while ``||p||``
    grows is a tie of the limit direction, chapter 05's co-selected tokens).

    Returns a DataFrame, one row per recorded time: ``t``, ``norm`` (``||p||``), ``cos`` and ``cos_tied`` (with
    the two directions), ``gap`` (the smallest gap between a sequence's top score and another of its scores,
    over the sequences). ``.attrs`` holds ``ties`` (occurrences the tie adds to the selection) and ``recorded``
    (the row's ``cos_own`` in ``runs``). The follow-on must reproduce the recorded row: its last ``cos`` equal to
    ``cos_own`` within 1e-9, else :class:`~tokensel.errors.DataUnavailableError`."""
    import pandas as pd

    from ..errors import DataUnavailableError
    from ..models.core import segment_max

    row = runs[(runs.data_seed == data_seed) & (runs.d == d) & (runs.eta0 == eta0) & (runs.init_seed == init_seed)]
    if len(row) != 1 or row.own_status.iloc[0] != PRECISE:
        raise InvalidArgumentError(
            f"runs holds no run ({data_seed}, {d}, {eta0}, {init_seed}) followed in many digits (own_status "
            f"{PRECISE!r}); those it holds: {runs[runs.own_status == PRECISE][list(COLUMNS[:4])].values.tolist()}"
        )
    t, P = read_followed(data_seed, d, eta0, init_seed, path)
    batch = synthetic.theory_pairs(seed=data_seed).batch
    m = _stepped(batch, d, eta0, init_seed)
    E = m.E
    last = torch.from_numpy(P[-1]).to(E.dtype)
    c = E @ last
    norm = float(last.norm())
    own = statistics.selection(batch, c, tol=1e-9 * norm)
    tied = statistics.selection(batch, c, tol=tie * norm)
    p_own = max_margin_for_selection(E, batch, own).p
    p_tied = max_margin_for_selection(E, batch, tied).p
    rows = []
    for tk, pk in zip(t, P, strict=True):
        p = torch.from_numpy(pk).to(E.dtype)
        a = (E @ p)[batch.ids]
        gaps = segment_max(a, batch)[batch.seg] - a
        rows.append(
            dict(
                t=float(tk),
                norm=float(p.norm()),
                cos=cosine(p, p_own),
                cos_tied=cosine(p, p_tied),
                gap=float(gaps[gaps > 1e-12 * max(1.0, float(p.norm()))].min()),
            )
        )
    out = pd.DataFrame(rows)
    recorded = float(row.cos_own.iloc[0])
    if abs(out.cos.iloc[-1] - recorded) > 1e-9:
        raise DataUnavailableError(
            f"the recorded follow-on of ({data_seed}, {d}, {eta0}, {init_seed}) ends at cos {out.cos.iloc[-1]:.12f} "
            f"with its own max-margin direction, but runs.csv records {recorded:.12f}: the two were not recorded "
            "together; record the run again"
        )
    out.attrs.update(ties=int((tied & ~own).sum()), recorded=recorded)
    return out


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
        if (np.abs(x[np.isfinite(x)]) > 1 + 1e-9).any() or (np.isfinite(x) != runs["own_status"].isin(SOLVED)).any():
            return f"column {col} is not a cosine exactly where own_status is solved"
    if (runs["full"] != (runs["selected"] == 1.0)).any():
        return "full disagrees with selected"
    trapped = (runs["predicted"] == 1.0) & (runs["loss_gap"] >= FLOOR_GAP)
    if (runs["trapped"] != trapped).any():
        return "trapped disagrees with predicted and loss_gap"
    if ((runs["own_status"] != "") & ~runs["trapped"]).any():
        return "a run that is not trapped has an own_status"
    if not set(runs["own_status"].astype(str)) <= {"", "infeasible", STIFF, *SOLVED}:
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


# ---------------------------------------------------------------------------------------------------------
# the executed grid against the recorded sweep

#: two-sided tail of a 3-sigma normal interval: the level of chapter 04's comparisons
THREE_SIGMA = 0.0027
QUANTITIES = ("full", "trapped")


#: the rows of :func:`phase_runs` (or of a recorded sweep, :func:`read_runs`), at least one
RUNS = Table(*COLUMNS, what="the DataFrame of phase_runs", nonempty=True)


def _counts(runs, quantity: str):
    g = runs.groupby(["d", "eta0"], sort=True)[quantity]
    return g.sum().astype(int), g.size()


@declare(
    executed=RUNS,
    recorded=RUNS,
    quantity=Choice(*QUANTITIES),
    eta0=Real(min=0.0, min_inclusive=False, allow_none=True),
)
def agreement(executed, recorded, quantity: str, eta0: float | None = None) -> dict:
    """How far the executed grid's count of ``quantity`` (``"full"`` or ``"trapped"``) runs lies from what the
    recorded sweep predicts for it, over the whole grid (or the cells of one ``eta0``). The two are independent
    samples (other seeds). With ``k_r`` of ``N`` recorded and ``n`` executed runs in cell ``c``:
    ``expected = sum_c n k_r / N``; ``sigma^2 = sum_c n p_c (1 - p_c) (1 + n / N)`` with
    ``p_c = (k_r + 1) / (N + 2)`` (the variance of the executed count plus that of the recorded estimate; the
    ``+1/+2`` keeps a cell seen 0 or N times from claiming certainty). Returns ``count`` (the executed
    ``K_e``), ``expected``, ``sigma``, ``z = (K_e - expected) / sigma`` and ``cells``."""
    if eta0 is not None:
        executed, recorded = executed[executed.eta0 == eta0], recorded[recorded.eta0 == eta0]
        if executed.empty or recorded.empty:
            raise InvalidArgumentError(f"eta0 = {eta0} is not a step of both grids")
    k_e, n_e = _counts(executed, quantity)
    k_r, n_r = _counts(recorded, quantity)
    if not k_e.index.equals(k_r.index):
        raise InvalidArgumentError("executed and recorded must cover the same cells (d, eta0)")
    p = (k_r + 1) / (n_r + 2)
    expected = float((n_e * k_r / n_r).sum())
    sigma = float(np.sqrt((n_e * p * (1 - p) * (1 + n_e / n_r)).sum()))
    count = int(k_e.sum())
    return dict(count=count, expected=expected, sigma=sigma, z=(count - expected) / sigma, cells=len(k_e))


@declare(executed=RUNS, recorded=RUNS)
def cell_agreement(executed, recorded):
    """Per cell ``(d, eta0)``: the executed and recorded counts of ``full`` and ``trapped`` runs and the
    two-sided Fisher exact p-value of each comparison (``p_full``, ``p_trapped``; the smallest as ``p_min``).
    A chapter compares ``p_min.min()`` with ``THREE_SIGMA`` divided by the number of comparisons."""
    import pandas as pd
    from scipy.stats import fisher_exact

    out = {}
    for q in QUANTITIES:
        k_e, n_e = _counts(executed, q)
        k_r, n_r = _counts(recorded, q)
        if not k_e.index.equals(k_r.index):
            raise InvalidArgumentError("executed and recorded must cover the same cells (d, eta0)")
        out[f"executed_{q}"], out[f"recorded_{q}"] = k_e, k_r
        out[f"p_{q}"] = pd.Series(
            [
                float(fisher_exact([[a, n - a], [b, m - b]]).pvalue)
                for a, n, b, m in zip(k_e, n_e, k_r, n_r, strict=True)
            ],
            index=k_e.index,
        )
        out["executed_runs"], out["recorded_runs"] = n_e, n_r
    table = pd.DataFrame(out)
    table["p_min"] = table[[f"p_{q}" for q in QUANTITIES]].min(axis=1)
    return table.reset_index()


# ---------------------------------------------------------------------------------------------------------
# the trap: what a trapped run looks like


@declare(
    runs=RUNS,
    buried=Real(min=0.0, max=1.0),
    selected=Real(min=0.0, max=1.0),
    match=Real(min=-1.0, max=1.0),
)
def trap_anatomy(runs, buried: float = 1e-3, selected: float = 0.99, match: float = 0.99) -> dict:
    """What the trapped runs of ``runs`` have in common: ``trapped`` (their number); ``one_buried`` (those in
    which one class is buried, its smallest mass on the important token ``<= buried``, and the other selected,
    ``>= selected``); ``drift_away`` (of those, the runs whose buried class has the label ``-sign(p . v)``: ``p``
    drifted away from it along the read-out); ``solved`` and ``infeasible`` (the own max-margin problem at
    ``t = 1e80``); ``stiff`` (runs neither integrator could follow to ``1e80``: not compared); ``min_cos_own``
    (the smallest cosine with the own max-margin direction at ``1e80``, NaN without a solved run), ``matched``
    (solved runs whose cosine at ``1e80`` is at least ``match``) and ``rising`` (solved runs whose cosine at
    ``1e80`` exceeds the one at ``1e20``)."""
    t = runs[runs.trapped]
    pos_buried = (t.mass_pos <= buried) & (t.mass_neg >= selected)
    neg_buried = (t.mass_neg <= buried) & (t.mass_pos >= selected)
    away = (pos_buried & (t.p_dot_v < 0)) | (neg_buried & (t.p_dot_v > 0))
    solved = t[t.own_status.isin(SOLVED)]
    return dict(
        trapped=len(t),
        one_buried=int((pos_buried | neg_buried).sum()),
        drift_away=int(away.sum()),
        solved=len(solved),
        infeasible=int((t.own_status == "infeasible").sum()),
        stiff=int((t.own_status == STIFF).sum()),
        min_cos_own=float(solved.cos_own.min()) if len(solved) else float("nan"),
        matched=int((solved.cos_own >= match).sum()),
        rising=int((solved.cos_own > solved.cos_own_mid).sum()),
    )


@declare(runs=RUNS, eta0=Real(min=0.0, min_inclusive=False))
def trap_pair(runs, eta0: float):
    """Two runs of ``runs`` at first step ``eta0`` to show the trap: the trapped run of the smallest width
    (first data and initialisation seed among equals) and, with its data and initialisation seeds, the
    selecting run (``full``) of the smallest width above it (None when there is none). Raises
    :class:`~tokensel.errors.InvalidArgumentError` when no run at ``eta0`` is trapped."""
    at = runs[runs.eta0 == eta0].sort_values(["d", "data_seed", "init_seed"])
    trapped = at[at.trapped]
    if trapped.empty:
        raise InvalidArgumentError(f"no run at eta0 = {eta0} is trapped: run more seeds (phase_runs)")
    trap = trapped.iloc[0]
    same = at[(at.data_seed == trap.data_seed) & (at.init_seed == trap.init_seed) & at.full & (at.d > trap.d)]
    return trap, (same.iloc[0] if len(same) else None)


@declare(
    data_seed=Int(min=0),
    d=Int(min=1),
    eta0=Real(min=0.0, min_inclusive=False),
    init_seed=Int(min=0),
    t_max=Real(min=0.0, min_inclusive=False),
    records=Int(min=2),
)
def trap_trajectory(data_seed: int, d: int, eta0: float, init_seed: int, t_max: float = 1e6, records: int = 40):
    """One run of the grid followed along the flow: at ``records`` log-spaced times, ``p_dot_v`` (``p``'s
    component along the read-out ``v``) and ``pos_mass`` / ``neg_mass`` (the smallest attention mass on the
    important token among the positive / negative sequences). A DataFrame (the flow's trajectory)."""
    data = synthetic.theory_pairs(seed=data_seed)
    batch, occ, positive = data.batch, data.important_occurrences, data.batch.labels > 0
    m = _stepped(batch, d, eta0, init_seed)

    def by_class(p):
        mass = statistics.selected_mass(batch, statistics.attention(batch, m.E @ p), occ)
        return {
            "p_dot_v": float(p @ m.v),
            "pos_mass": float(mass[positive].min()),
            "neg_mass": float(mass[~positive].min()),
        }

    return gradient_flow(m, batch, t_max=t_max, records=records, rtol=1e-7, atol=1e-10, monitor=by_class).to_frame()


@declare(
    data_seed=Int(min=0),
    d=Int(min=1),
    eta0=Real(min=0.0, min_inclusive=False),
    init_seed=Int(min=0),
    lr=Real(min=0.0, min_inclusive=False),
    steps=Int(min=1),
)
def gd_against_flow(data_seed: int, d: int, eta0: float, init_seed: int, lr: float = 1.0, steps: int = 3000) -> dict:
    """Plain gradient descent (``steps`` steps of size ``lr``) against the integrated flow at the same time
    ``t = lr * steps``, from the same step on ``E``: ``rel_diff`` ``|p_GD - p_flow| / |p_flow|`` and, for each,
    the smallest attention mass on the important token in either class (``gd_mass``, ``flow_mass``)."""
    from ..training.phases import train_p

    data = synthetic.theory_pairs(seed=data_seed)
    batch, occ = data.batch, data.important_occurrences
    m = _stepped(batch, d, eta0, init_seed)
    gd, flow = m.copy(), m.copy()
    train_p(gd, batch, lr=lr, steps=steps, method="gd")
    gradient_flow(flow, batch, t_max=lr * steps, rtol=1e-7, atol=1e-10)
    mass = {k: statistics.selected_mass(batch, x.attention(batch), occ) for k, x in (("gd", gd), ("flow", flow))}
    positive = batch.labels > 0
    return dict(
        rel_diff=float((gd.p - flow.p).norm() / flow.p.norm()),
        **{f"{k}_mass": float(min(v[positive].min(), v[~positive].min())) for k, v in mass.items()},
    )


# ---------------------------------------------------------------------------------------------------------
# other data: irrelevant only in expectation; several important tokens per sequence


@dataclass(frozen=True)
class GeneratorRun:
    """One generator of :func:`generator_contrast`: the largest ``|alpha|`` of an irrelevant token
    (``max_alpha_irrelevant``) and the smallest of an important one (``min_alpha_important``), the fraction of
    sequences whose important token leads in value after the step (``value_leads``) and whose important token is
    selected at ``t = 1e6`` (``selected``), and the max-margin problem for the best-valued tokens: ``svm_norm``,
    the norm of its solution, or ``None`` with ``cycle``, the tokens whose preferences contradict each other."""

    max_alpha_irrelevant: float
    min_alpha_important: float
    value_leads: float
    selected: float
    svm_norm: float | None
    cycle: tuple | None

    @property
    def svm_feasible(self) -> bool:
        """Whether the max-margin problem for the best-valued tokens has a solution."""
        return self.svm_norm is not None

    def verdict(self) -> str:
        """The max-margin problem in words, for display."""
        return (
            f"feasible, ||p_mm|| = {self.svm_norm:.3f}"
            if self.svm_feasible
            else f"infeasible: cycle {list(self.cycle) if self.cycle is not None else None}"
        )


@dataclass(frozen=True)
class GeneratorContrast:
    """:func:`generator_contrast`'s two runs: ``pairs`` (Assumption 1) and ``iid`` (irrelevant tokens i.i.d.)."""

    pairs: GeneratorRun
    iid: GeneratorRun

    def table(self):
        """The two runs as a table for display, one row per generator."""
        import pandas as pd

        rows = {"pairs (Assumption 1)": self.pairs, "i.i.d. irrelevant": self.iid}
        return pd.DataFrame(
            {
                name: {
                    "max |alpha| irrelevant": r.max_alpha_irrelevant,
                    "min |alpha| important": r.min_alpha_important,
                    "value leads": r.value_leads,
                    "selected at t=1e6": r.selected,
                    "SVM for the best-valued tokens": r.verdict(),
                }
                for name, r in rows.items()
            }
        ).T.rename_axis("data")


@dataclass(frozen=True)
class SeveralRun:
    """One ``k`` of :func:`several_important`: whether the selection is exactly each sequence's best-valued
    tokens (``exactly_best``), the shares of important and of irrelevant occurrences selected, and how many
    important tokens score below the best irrelevant one."""

    exactly_best: bool
    important_selected: float
    irrelevant_selected: float
    important_below_irrelevant: int


@dataclass(frozen=True)
class SeveralImportant:
    """:func:`several_important`'s runs by ``k`` (``result[k]``)."""

    runs: dict

    def __getitem__(self, k: int) -> SeveralRun:
        if k not in self.runs:
            raise InvalidArgumentError(
                f"k must be one of {sorted(self.runs)}, the ks this result was run at; got {k!r}"
            )
        return self.runs[k]

    def table(self):
        """The runs as a table for display, one row per ``k``."""
        import pandas as pd

        return pd.DataFrame(
            {
                k: {
                    "selection = best-valued tokens": r.exactly_best,
                    "important occurrences selected": r.important_selected,
                    "irrelevant occurrences selected": r.irrelevant_selected,
                    "important tokens scored below the best irrelevant one": r.important_below_irrelevant,
                }
                for k, r in self.runs.items()
            }
        ).T.rename_axis("important tokens per sequence")


@declare(
    seed=Int(min=0),
    n_important=Int(min=1),
    n_irrelevant=Int(min=1),
    length=Int(min=2),
    d=Int(min=1),
    eta0=Real(min=0.0, min_inclusive=False),
)
def generator_contrast(
    seed: int, n_important: int = 10, n_irrelevant: int = 10, length: int = 8, d: int = 128, eta0: float = 100.0
):
    """The paired data of Assumption 1 (``assumption1_pairs``, 50 pairs) against data whose irrelevant tokens
    are drawn i.i.d. per sequence (``iid_irrelevant``, 100 sequences), at the same sizes, width and step (data
    and initialisation drawn with ``seed``). Returns a :class:`GeneratorContrast`: per generator a
    :class:`GeneratorRun` (the largest ``|alpha|`` of an irrelevant and the smallest of an important token, the
    fraction of sequences whose important token leads in value after the step and that are selected at
    ``t = 1e6``, and the max-margin problem for the best-valued tokens: its norm, or the cycle that makes it
    infeasible); ``.table()`` shows them."""
    from ..analysis.statistics import alpha, contains, optimal_tokens, selection, value_lead

    runs = {}
    sizes = dict(n_important=n_important, n_irrelevant=n_irrelevant, length=length, seed=seed)
    draws = {
        "pairs": synthetic.assumption1_pairs(n_pairs=50, **sizes),
        "iid": synthetic.iid_irrelevant(n=100, **sizes),
    }
    for name, dd in draws.items():
        imp = torch.from_numpy(dd.planted != 0)
        a = alpha(dd.batch)
        m = _stepped(dd.batch, d, eta0, seed)
        best = optimal_tokens(dd.batch, m.values())
        norm, cycle = None, None
        try:
            norm = float(max_margin_for_selection(m.E, dd.batch, best).norm)
        except InfeasibleSVMError as err:
            cycle = tuple(err.cycle) if err.cycle is not None else None
        leads = float((value_lead(dd.batch, m.values(), imp) > 0).double().mean())
        gradient_flow(m, dd.batch, t_max=1e6, records=5, rtol=1e-6, atol=1e-9)
        sel = selection(dd.batch, m.scores(), tol=1e-9 * float(m.p.norm()))
        runs[name] = GeneratorRun(
            max_alpha_irrelevant=float(a[~imp].abs().max()),
            min_alpha_important=float(a[imp].abs().min()),
            value_leads=leads,
            selected=float(contains(dd.batch, sel, imp).double().mean()),
            svm_norm=norm,
            cycle=cycle,
        )
    return GeneratorContrast(pairs=runs["pairs"], iid=runs["iid"])


@declare(seed=Int(min=0), ks=Grid(int), d=Int(min=1), eta0=Real(min=0.0, min_inclusive=False))
def several_important(seed: int, ks=(2, 3), d: int = 128, eta0: float = 100.0):
    """Sequences holding ``k`` distinct important tokens of their label's sign (``assumption1_pairs(...,
    per_sequence=k)``, the sizes of ``THEORY_PAIRS``) for each ``k`` of ``ks``: one step, the flow to ``t = 1e6``,
    then per ``k`` a :class:`SeveralRun` (whether the selection is exactly each sequence's best-valued tokens, the
    shares of important and irrelevant occurrences selected, and how many important tokens score below the best
    irrelevant one). Returns a :class:`SeveralImportant`: ``result[k]`` is the run for ``k``, ``.table()`` shows
    them."""
    from ..analysis.statistics import optimal_tokens, selection

    runs = {}
    for k in ks:
        dk = synthetic.assumption1_pairs(**{**synthetic.THEORY_PAIRS, "seed": seed, "per_sequence": k})
        mk = _stepped(dk.batch, d, eta0, seed)
        best = optimal_tokens(dk.batch, mk.values())
        gradient_flow(mk, dk.batch, t_max=1e6, records=5, rtol=1e-6, atol=1e-9)
        sel = selection(dk.batch, mk.scores(), tol=1e-6 * float(mk.p.norm()))
        occ = dk.important_occurrences
        scores = mk.scores()
        runs[int(k)] = SeveralRun(
            exactly_best=bool(torch.equal(sel, best)),
            important_selected=float(sel[occ].double().mean()),
            irrelevant_selected=float(sel[~occ].double().mean()),
            important_below_irrelevant=int((scores[dk.important] < scores[~dk.important].max()).sum()),
        )
    return SeveralImportant(runs)
