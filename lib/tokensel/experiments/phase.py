"""Chapter 04's experiments: where one gradient step and the flow of ``p`` select every important token
(:func:`phase_runs`, :func:`phase_probabilities`); the trap of too large a step, followed to its own max-margin
direction; the executed grid against the recorded sweep; and two kinds of data beyond Assumption 1."""

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
from ..validation import Bool, Choice, FilePath, Int, Numbers, Real, declare

#: the grid of chapter 04's phase diagram
WIDTHS = (32, 64, 128, 256, 512, 1024)
STEPS = (0.3, 1.0, 3.0, 10.0, 30.0, 100.0, 300.0)
#: a run whose loss stays this far above its floor at ``t_max`` has not reached it (chapter 04's threshold)
FLOOR_GAP = 1e-3
#: flow time at which a trapped run is compared with its own max-margin direction (scores grow like ``ln t``)
TRAP_T = 1e80
#: ``own_status`` of a trapped run followed to its solved max-margin direction: explicitly, implicitly, in many digits
PRECISE = "solved (implicit, many digits)"
SOLVED = ("solved", "solved (implicit)", PRECISE)
#: ``own_status`` of a trapped run no integrator took to ``trap_t`` within its budget (cosines NaN)
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


def _own_direction(m: AttentionModel, batch, trap_t: float, budget, implicit_budget, digits, followed: list):
    """Flow a trapped run on to ``trap_t``: the cosines of ``p`` at ``trap_t ** 0.25`` and ``trap_t`` with its
    selection's max-margin direction, and the status; stiff flows go on by :func:`implicit_flow` (``budget``), then in
    ``digits`` digits (``implicit_budget``), ``followed`` receiving ``(t, p)`` as plain lists (comparable ``attrs``)."""
    kept: list[torch.Tensor] = []
    records = int(round(np.log10(trap_t))) + 4  # log-spaced records, at every power of ten for trap_t = 1e80

    def keep(p):
        kept.append(p.clone())
        return {}

    solved = "solved"
    try:
        flow = dict(t_max=trap_t, records=records, monitor=keep)
        traj = gradient_flow(m, batch, rtol=1e-8, atol=1e-12, max_evaluations=budget, **flow)
    except SolverError:  # stiff: model.p is still where the flow to t_max left it
        kept.clear()
        try:
            traj = implicit_flow(m, batch, max_evaluations=implicit_budget, **flow)
            solved = "solved (implicit)"
        except SolverError:  # model.p is still where the run stood
            if digits is None:
                return float("nan"), float("nan"), STIFF
            kept.clear()
            traj = implicit_flow(m, batch, digits=digits, **flow)
            solved = PRECISE
            followed.extend((float(t), p.detach().cpu().tolist()) for t, p in zip(traj.t, kept, strict=True))
    log_t = np.log10(np.maximum(np.asarray(traj.t), 1e-300))
    mid = kept[int(np.argmin(np.abs(log_t - np.log10(trap_t) / 4)))]
    sel = statistics.selection(batch, m.scores(), tol=1e-9 * float(m.p.norm()))
    try:
        svm = max_margin_for_selection(m.E, batch, sel)
    except InfeasibleSVMError:
        return float("nan"), float("nan"), "infeasible"
    return cosine(mid, svm.p), cosine(m.p, svm.p), solved


def _stepped(batch, d: int, eta0: float, init_seed: int) -> AttentionModel:
    """The paper's initialisation at ``init_seed`` after one step of size ``eta0`` on ``E``."""
    return one_step(AttentionModel.init(batch.vocab_size, d, seed=init_seed), batch, eta0)


def _run(data, d: int, eta0: float, init_seed: int, followed: list, t_max, own_svm, **follow) -> dict:
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
    row = dict(predicted=predicted, loss_gap=loss_gap, selected=selected, full=selected == 1.0, trapped=trapped)
    row.update(mass_pos=float(mass[positive].min()), mass_neg=float(mass[~positive].min()), p_dot_v=float(m.p @ m.v))
    row.update(cos_own_mid=float("nan"), cos_own=float("nan"), own_status="")
    if trapped and own_svm:
        row["cos_own_mid"], row["cos_own"], row["own_status"] = _own_direction(m, batch, followed=followed, **follow)
    return row


@declare(
    data_seeds=Numbers(int, min=0),
    init_seeds=Numbers(int, min=0),
    widths=Numbers(int, min=1),
    steps=Numbers(float, min=0.0, min_inclusive=False),
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
    """Chapter 04's grid, run by run (data seed of :func:`tokensel.data.synthetic.theory_pairs`, width, first step,
    init seed): one step on ``E``, the flow of ``p`` to ``t_max``, one row per run (``COLUMNS``). ``trapped``: every
    important token leads in value yet the loss stays ``FLOOR_GAP`` above its floor; ``own_svm`` follows such runs to
    ``trap_t`` (``cos_own``; implicit after ``follow_evaluations``, ``digits`` digits after ``implicit_evaluations``,
    ``runs.attrs["followed"]``). Deterministic."""
    import pandas as pd

    for name, seeds in (("data_seeds", data_seeds), ("init_seeds", init_seeds)):
        if len(set(seeds)) != len(seeds):
            raise InvalidArgumentError(f"{name} must be distinct, got {seeds}")

    rows, followed = [], {}
    options = dict(t_max=t_max, own_svm=own_svm, trap_t=trap_t, budget=follow_evaluations)
    options.update(implicit_budget=implicit_evaluations, digits=digits)
    total = len(data_seeds) * len(widths) * len(steps) * len(init_seeds)
    with bar(total, "phase diagram runs", disable=None if progress is None else not progress) as pbar:
        for ds in data_seeds:
            data = synthetic.theory_pairs(seed=ds)
            for d in widths:
                for eta0 in steps:
                    for s in init_seeds:
                        path: list = []
                        row = _run(data, d, eta0, s, path, **options)
                        rows.append(dict(data_seed=ds, d=d, eta0=eta0, init_seed=s, **row))
                        if path:
                            followed[(ds, d, float(eta0), s)] = path
                        pbar.update()
    runs = pd.DataFrame(rows, columns=list(COLUMNS))
    runs.attrs["followed"] = followed
    return runs


@declare(runs=Table(*COLUMNS, what="the DataFrame of phase_runs"))
def phase_probabilities(runs):
    """Per cell ``(d, eta0)``: the runs, the shares that select every important token (``p_full``), are trapped
    or have every value lead, and the smallest cosine of a trapped run with its own max-margin direction."""
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
    """``book/recorded/phase/runs.csv`` under the book's root (``_config.yml`` above the working folder), else
    the checkout this library came from."""
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
    """The rows of a recorded sweep (default the book's), refused, naming the first problem, unless
    :func:`phase_runs`'s."""
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
    """Write one run's follow-on (``runs.attrs["followed"]``) to ``out/followed/`` under its run's name."""
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
    """``(t, P)``: the recorded follow-on of a run followed in many digits, from ``followed/`` beside the book's
    ``runs.csv`` (or ``path``), checked before use."""
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
    """A run followed in many digits against the max-margin directions of its selection (within
    ``1e-9 ||p||``) and with ties (within ``tie ||p||``: a gap staying finite as ``||p||`` grows); per recorded time
    ``cos``, ``cos_tied`` and the least ``gap``; it must reproduce the row's ``cos_own``."""
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


#: two-sided tail of a 3-sigma normal interval: the level of chapter 04's comparisons
THREE_SIGMA = 0.0027
QUANTITIES = ("full", "trapped")

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
    """The executed count of ``quantity`` runs (grid or one ``eta0``) against the sweep's prediction, for runs whose
    ``D`` data seeds share each of ``I`` initialisations (the trap depends on it): ``expected = I D mean(S)``,
    ``sigma^2 = I (D v + D (D-1) c) (1 + 1/R)``; ``S``, ``v``, ``c``: a grid's count at one data seed and
    initialisation, its variance over the sweep's ``R`` initialisations, its covariance between two data seeds;
    the variance at least ``v`` before the factor: a negative ``c`` from few seeds must not make a band vanish."""
    if eta0 is not None:
        executed, recorded = executed[executed.eta0 == eta0], recorded[recorded.eta0 == eta0]
        if executed.empty or recorded.empty:
            raise InvalidArgumentError(f"eta0 = {eta0} is not a step of both grids")
    if not _counts(executed, quantity)[0].index.equals(_counts(recorded, quantity)[0].index):
        raise InvalidArgumentError("executed and recorded must cover the same cells (d, eta0)")
    grids = [f.groupby(["init_seed", "data_seed"])[quantity].sum().unstack() for f in (executed, recorded)]
    (n_init, n_data), sweep = grids[0].shape, grids[1].astype(float)
    if sweep.isna().any().any() or sweep.shape[1] < 2:
        raise InvalidArgumentError("recorded must run every initialisation at two data seeds or more")
    v = float(sweep.var(ddof=1).mean())
    c = float(np.nanmean(np.where(np.eye(sweep.shape[1], dtype=bool), np.nan, sweep.cov().to_numpy())))
    expected, count = n_init * n_data * float(sweep.to_numpy().mean()), int(executed[quantity].sum())
    sigma = float(np.sqrt(max(n_init * (n_data * v + n_data * (n_data - 1) * c), v) * (1 + 1 / len(sweep))))
    cells = executed.groupby(["d", "eta0"]).ngroups
    return dict(count=count, expected=expected, sigma=sigma, z=(count - expected) / sigma, cells=cells)


@declare(executed=RUNS, recorded=RUNS)
def cell_agreement(executed, recorded):
    """Per cell: the executed and recorded counts of ``full`` and ``trapped`` runs and Fisher's exact p-values
    (``p_min``, to compare with ``THREE_SIGMA`` over the number of comparisons)."""
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


@declare(
    runs=RUNS,
    buried=Real(min=0.0, max=1.0),
    selected=Real(min=0.0, max=1.0),
    match=Real(min=-1.0, max=1.0),
)
def trap_anatomy(runs, buried: float = 1e-3, selected: float = 0.99, match: float = 0.99) -> dict:
    """What trapped runs share: how many bury one class (mass ``<= buried``) selecting the other (``>= selected``),
    how many drifted from the buried class along ``v``, how their own max-margin problems ended (solved, infeasible,
    stiff; cosines ``>= match``, rising from 1e20 to 1e80)."""
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
    """The smallest-width trapped run at ``eta0`` and, at its seeds, the next width's selecting run (or None)."""
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
    """One run followed along the flow: ``p_dot_v`` and each class's least mass on its important token."""
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
    """Plain GD against the flow at time ``lr * steps``: relative difference and least important-token mass."""
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


@dataclass(frozen=True)
class GeneratorRun:
    """One generator of :func:`generator_contrast`: its ``alpha`` extremes, the shares of sequences whose important
    token leads and is selected, and the max-margin problem for the best-valued tokens (a norm, or a cycle)."""

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
    """One ``k`` of :func:`several_important`: whether the selection is each sequence's best-valued tokens, and how
    the important and irrelevant tokens fare."""

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
    """Assumption 1's paired data against i.i.d. irrelevant tokens, same sizes: a :class:`GeneratorRun` each."""
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


@declare(seed=Int(min=0), ks=Numbers(int, min=1), d=Int(min=1), eta0=Real(min=0.0, min_inclusive=False))
def several_important(seed: int, ks=(2, 3), d: int = 128, eta0: float = 100.0):
    """``k`` important tokens of the label's sign per sequence, per ``k`` of ``ks``: one step, the flow to
    ``t = 1e6``, a :class:`SeveralRun` each."""
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
