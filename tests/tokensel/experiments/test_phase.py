"""The phase diagram as probabilities (tokensel.experiments.phase): runs, cells, and a recorded sweep read back."""

import numpy as np
import pandas as pd
import pytest

import tokensel as ts
from tokensel.errors import DataUnavailableError, InvalidArgumentError

# a tiny grid: a step where selection fails, the trap's (init 1 is trapped), followed on to 1e8 (the book: 1e80)
GRID = dict(widths=[64], steps=[0.3, 300.0], t_max=1e4, trap_t=1e8, progress=False)


@pytest.fixture(scope="module")
def runs():
    return ts.experiments.phase.phase_runs([0], [1, 2], **GRID)


def test_one_row_per_run_with_consistent_verdicts(runs):
    assert list(runs.columns) == list(ts.experiments.phase.COLUMNS) and len(runs) == 4
    assert (runs.full == (runs.selected == 1.0)).all()
    trapped = (runs.predicted == 1.0) & (runs.loss_gap >= ts.experiments.phase.FLOOR_GAP)
    assert (runs.trapped == trapped).all()
    # a trapped run is compared with the max-margin direction of its own selection; the others are not
    assert runs.trapped.any(), "the fixture holds a trapped run"
    assert runs[runs.trapped].own_status.isin(["solved", "infeasible"]).all()
    solved = runs[runs.own_status == "solved"]
    assert ((solved.cos_own.abs() <= 1) & (solved.cos_own_mid.abs() <= 1)).all()
    assert runs[~runs.trapped].cos_own.isna().all() and (runs[~runs.trapped].own_status == "").all()
    # deterministic: the same run again gives the same row
    again = ts.experiments.phase.phase_runs([0], [2], widths=[64], steps=[300.0], t_max=1e4, own_svm=False)
    row, cols = runs[(runs.init_seed == 2) & (runs.eta0 == 300.0)], ["predicted", "selected", "loss_gap"]
    assert np.array_equal(again[cols].to_numpy(), row[cols].to_numpy())


def test_a_trapped_run_the_explicit_integrator_cannot_follow_goes_to_implicit_steps(runs, tmp_path):
    """A stiff follow-on is finished by implicit_flow and marked so; the runs within the budget are unchanged."""
    phase = ts.experiments.phase
    within = phase.phase_runs([0], [1, 2], follow_evaluations=10**6, **GRID)
    assert within.equals(runs)  # a budget that no follow-on reaches changes nothing
    again = phase.phase_runs([0], [1, 2], follow_evaluations=20, **GRID)
    stiff = again.trapped & (again.own_status != "infeasible")
    assert stiff.any() and (again[stiff].own_status == "solved (implicit)").all()
    assert ((again[stiff].cos_own.abs() <= 1) & (again[stiff].cos_own_mid.abs() <= 1)).all()
    same = ["predicted", "selected", "loss_gap", "trapped", "mass_pos", "mass_neg", "p_dot_v"]
    assert again[same].equals(runs[same])  # the follow-on changes nothing before it
    anatomy = phase.trap_anatomy(again)
    assert anatomy["solved"] == int(stiff.sum())  # counted as solved, with its own cosines
    again.to_csv(tmp_path / "runs.csv", index=False, float_format="%.17g")  # and a recorded sweep may hold it
    assert phase.read_runs(tmp_path / "runs.csv").own_status.tolist() == again.own_status.tolist()


def test_a_trapped_run_neither_integrator_can_follow_is_recorded_as_stiff(runs, tmp_path):
    """Both budgets spent: the run is kept as STIFF (NaN cosines), reads back, and is counted apart from solved ones."""
    phase = ts.experiments.phase
    spent = phase.phase_runs([0], [1, 2], follow_evaluations=1, implicit_evaluations=1, **GRID)
    stiff = spent.trapped & (spent.own_status != "infeasible")
    assert stiff.any() and (spent[stiff].own_status == phase.STIFF).all()
    assert spent[stiff].cos_own.isna().all() and spent[stiff].cos_own_mid.isna().all()
    same = ["predicted", "selected", "loss_gap", "full", "trapped", "mass_pos", "mass_neg", "p_dot_v"]
    assert spent[same].equals(runs[same])
    anatomy = phase.trap_anatomy(spent)
    assert anatomy["stiff"] == int(stiff.sum()) and anatomy["solved"] == 0
    spent.to_csv(tmp_path / "runs.csv", index=False, float_format="%.17g")
    assert phase.read_runs(tmp_path / "runs.csv").own_status.tolist() == spent.own_status.tolist()
    # a stiff run with a cosine, or a status on a run that is not trapped, is not a sweep's
    for edit in (
        lambda r: r.assign(cos_own=np.where(stiff, 0.5, r.cos_own)),
        lambda r: r.assign(own_status=np.where(~r.trapped, phase.STIFF, r.own_status)),
    ):
        edit(spent).to_csv(tmp_path / "runs.csv", index=False, float_format="%.17g")
        with pytest.raises(DataUnavailableError, match="not a sweep of phase_runs"):
            phase.read_runs(tmp_path / "runs.csv")


def test_probabilities_per_cell(runs):
    prob = ts.experiments.phase.phase_probabilities(runs)
    assert list(prob.d) == [64, 64] and list(prob.eta0) == [0.3, 300.0] and (prob.runs == 2).all()
    small = prob[prob.eta0 == 0.3].iloc[0]
    assert small.p_full == runs[runs.eta0 == 0.3].full.mean()
    with pytest.raises(InvalidArgumentError, match="runs must be"):
        ts.experiments.phase.phase_probabilities(runs.drop(columns="full"))


def test_a_recorded_sweep_is_checked_when_read(runs, tmp_path):
    path = tmp_path / "runs.csv"
    runs.to_csv(path, index=False, float_format="%.17g")
    back = ts.experiments.phase.read_runs(path)
    assert back.drop(columns="own_status").equals(runs.drop(columns="own_status"))
    # a flipped verdict, values above 1, a run twice, a column missing, other seeds, a cosine without its problem
    for edited in (
        runs.assign(full=~runs.full), runs.assign(selected=runs.selected + 2), runs.assign(mass_neg=runs.mass_neg + 2),
        runs.iloc[[0, 0, 1, 2, 3]], runs.drop(columns="trapped"), runs.iloc[[0, 1, 2]],
        runs.assign(cos_own=0.5, own_status=""),
    ):  # fmt: skip
        edited.to_csv(path, index=False)
        with pytest.raises(DataUnavailableError, match="not a sweep of phase_runs|not a CSV"):
            ts.experiments.phase.read_runs(path)
    pytest.raises(DataUnavailableError, lambda: ts.experiments.phase.read_runs(tmp_path / "none.csv")).match("missing")


def test_a_seed_twice_is_refused_before_any_run():
    with pytest.raises(ts.TokenselError, match="init_seeds"):
        ts.experiments.phase.phase_runs([0], [1, 1], widths=[32], steps=[1.0], t_max=10.0, progress=False)


def _frame(cells, data_seed=0):
    """Hand-made phase runs: ``cells`` maps (d, eta0) to a list of (full, trapped) per initialisation."""
    rest = dict(mass_pos=1.0, mass_neg=1.0, p_dot_v=0.0, cos_own_mid=np.nan, cos_own=np.nan, own_status="")
    rows = [
        dict(data_seed=data_seed, d=d, eta0=eta0, init_seed=i, full=full, trapped=trapped, **rest)
        | dict(predicted=1.0 if trapped else 0.5, loss_gap=0.1 if trapped else 0.0, selected=1.0 if full else 0.5)
        for (d, eta0), runs in cells.items()
        for i, (full, trapped) in enumerate(runs)
    ]
    return pd.DataFrame(rows, columns=list(ts.experiments.phase.COLUMNS))


def test_agreement_counts_against_the_recorded_prediction_for_runs_that_share_their_initialisation():
    phase = ts.experiments.phase
    # the sweep: two data seeds, four initialisations; initialisations 0 and 1 select everywhere, 2 and 3 nowhere
    runs = [(True, False)] * 2 + [(False, True)] * 2
    recorded = pd.concat([_frame({(32, 1.0): runs, (64, 1.0): runs}, seed) for seed in (0, 1)])
    executed = pd.concat([_frame({(32, 1.0): [(True, False)], (64, 1.0): [(False, True)]}, seed) for seed in (7, 8)])
    a = phase.agreement(executed, recorded, "full")
    # S (a grid's count) is 2, 2, 0, 0 at both data seeds: v = c = 4/3; one initialisation shared by two data seeds
    assert a["count"] == 2 and a["cells"] == 2 and a["expected"] == pytest.approx(2.0)
    assert a["sigma"] == pytest.approx(np.sqrt((2 * 4 / 3 + 2 * 4 / 3) * (1 + 1 / 4)))  # independent: half of it
    assert a["z"] == 0.0
    t = phase.agreement(executed, recorded, "trapped", eta0=1.0)
    assert t["count"] == 2 and t["expected"] == pytest.approx(2.0)
    pytest.raises(InvalidArgumentError, phase.agreement, executed[executed.d == 32], recorded, "full").match("same")
    pytest.raises(InvalidArgumentError, lambda: phase.agreement(executed, recorded, "full", eta0=3.0)).match("eta0")
    one_seed = recorded[recorded.data_seed == 0]
    pytest.raises(InvalidArgumentError, phase.agreement, executed, one_seed, "full").match("two data seeds")
    pytest.raises(InvalidArgumentError, phase.agreement, executed.drop(columns="full"), recorded, "full").match("exec")


def test_cell_agreement_flags_only_a_contradicted_cell():
    phase = ts.experiments.phase
    recorded = _frame({(32, 1.0): [(False, False)] * 60, (64, 1.0): [(True, False)] * 30 + [(False, False)] * 30})
    same = _frame({(32, 1.0): [(False, False)] * 3, (64, 1.0): [(True, False), (False, False), (True, False)]})
    table = phase.cell_agreement(same, recorded)
    assert list(table.d) == [32, 64] and (table.executed_runs == 3).all() and (table.recorded_runs == 60).all()
    assert table.p_min.min() > phase.THREE_SIGMA / 4
    contradicted = _frame({(32, 1.0): [(True, False)] * 3, (64, 1.0): [(True, False)] * 3})
    table = phase.cell_agreement(contradicted, recorded)
    # never selected in 60 recorded runs, always in the page's 3: p = 1 / C(63, 3)
    assert table.p_full.iloc[0] == pytest.approx(1 / 39711)
    assert table.p_min.min() < phase.THREE_SIGMA / 4 < table.p_full.iloc[1]


def test_trap_anatomy_and_the_pair_shown():
    phase = ts.experiments.phase
    runs = _frame({(32, 300.0): [(False, True)] * 3 + [(True, False)], (64, 300.0): [(True, False)] * 4})
    runs.loc[0, ["mass_pos", "mass_neg", "p_dot_v"]] = [1e-9, 1.0, -2.0]  # positives buried, p along -v
    runs.loc[1, ["mass_pos", "mass_neg", "p_dot_v"]] = [1.0, 1e-9, -2.0]  # negatives buried, p along -v
    runs.loc[2, ["mass_pos", "mass_neg"]] = [0.5, 0.5]  # neither buried
    runs.loc[0, ["cos_own_mid", "cos_own", "own_status"]] = [0.9, 0.999, "solved"]
    runs.loc[1, ["cos_own_mid", "cos_own", "own_status"]] = [0.99, 0.95, "solved"]
    runs.loc[2, "own_status"] = "infeasible"
    a = phase.trap_anatomy(runs)
    want = dict(trapped=3, one_buried=2, drift_away=1, solved=2, infeasible=1, stiff=0, min_cos_own=0.95, matched=1)
    assert a == want | dict(rising=1)
    trap, escape = phase.trap_pair(runs, 300.0)
    assert (trap.d, trap.init_seed) == (32, 0) and (escape.d, escape.init_seed) == (64, 0)
    pytest.raises(InvalidArgumentError, lambda: phase.trap_pair(runs[~runs.trapped], 300.0)).match("no run at eta0")


def test_trap_trajectory_and_gd_against_the_flow():
    phase = ts.experiments.phase
    tr = phase.trap_trajectory(0, 32, 300.0, 1, t_max=10.0, records=4)
    assert {"t", "p_dot_v", "pos_mass", "neg_mass"} <= set(tr.columns) and tr.t.iloc[-1] == 10.0
    assert ((tr.pos_mass >= 0) & (tr.pos_mass <= 1)).all()
    v = phase.gd_against_flow(0, 32, 300.0, 1, lr=0.01, steps=100)
    assert set(v) == {"rel_diff", "gd_mass", "flow_mass"}
    assert v["rel_diff"] < 1e-2  # plain GD with a small step follows the flow


def test_generator_contrast_and_several_important_tokens():
    phase = ts.experiments.phase
    noise = phase.generator_contrast(0, d=32, eta0=100.0)
    # the paired data have alpha = 0 for every irrelevant token, by construction
    assert noise.pairs.max_alpha_irrelevant < 1e-12
    assert noise.iid.max_alpha_irrelevant > 0
    for run in (noise.pairs, noise.iid):
        # feasible exactly when no cycle was found, and the display says the same
        assert run.svm_feasible == (run.svm_norm is not None)
        assert run.verdict().startswith("feasible" if run.svm_feasible else "infeasible")
        assert 0 <= run.selected <= 1 and 0 <= run.value_leads <= 1
    table = noise.table()
    assert list(table.index) == ["pairs (Assumption 1)", "i.i.d. irrelevant"]
    assert table.loc["i.i.d. irrelevant", "max |alpha| irrelevant"] == noise.iid.max_alpha_irrelevant
    several = phase.several_important(0, ks=(2,), d=32)
    assert 0 < several[2].important_selected <= 1
    assert list(several.table().index) == [2]
    assert several.table().loc[2, "important occurrences selected"] == several[2].important_selected
    pytest.raises(ts.TokenselError, lambda: several[3]).match("k must be one of")


def test_the_recorded_sweep_is_found_from_the_book_root(tmp_path, monkeypatch):
    (tmp_path / "_config.yml").write_text("title: x\n")
    target = tmp_path / "book" / "recorded" / "phase" / "runs.csv"
    target.parent.mkdir(parents=True)
    target.write_text("")
    (tmp_path / "book" / "sub").mkdir()
    monkeypatch.chdir(tmp_path / "book" / "sub")
    assert ts.experiments.phase.recorded_path() == target.resolve()
    pytest.raises(DataUnavailableError, lambda: ts.experiments.phase.read_runs()).match("not a CSV|not a sweep")


def test_the_recorded_follow_on_of_the_stiff_run_is_read_back_and_checked(tmp_path):
    """The stiff run's recorded follow-on reads back, matches its cosine and shows the tie; another run's is refused."""
    phase = ts.experiments.phase
    runs = phase.read_runs()
    precise = runs[runs.own_status == phase.PRECISE]
    assert len(precise) == 1 and not runs.own_status.eq(phase.STIFF).any()
    r = precise.iloc[0]
    key = (int(r.data_seed), int(r.d), float(r.eta0), int(r.init_seed))
    follow = phase.followed_directions(runs, *key)
    assert follow.t.iloc[0] == 0.0 and follow.t.iloc[-1] == phase.TRAP_T
    assert abs(follow.cos.iloc[-1] - r.cos_own) <= 1e-9 and follow.attrs["ties"] > 0
    assert follow.cos_tied.iloc[-1] > follow.cos.iloc[-1]
    t, P = phase.read_followed(*key)
    assert P.shape == (len(t), key[1])
    # another p at the end: not recorded together with runs.csv
    moved = P.copy()
    moved[-1, 0] += 1.0
    phase.write_followed(tmp_path, key, list(zip(t, moved, strict=True)))
    (written,) = (tmp_path / "followed").iterdir()
    with pytest.raises(DataUnavailableError, match="not recorded together"):
        phase.followed_directions(runs, *key, path=written)
    # a column missing, or times out of order
    table = written.read_text().splitlines()
    header = table[0].rsplit(",", 1)[0]
    written.write_text("\n".join([header, *(line.rsplit(",", 1)[0] for line in table[1:])]) + "\n")
    pytest.raises(DataUnavailableError, lambda: phase.read_followed(*key, path=written)).match("columns")
    written.write_text("\n".join([table[0], table[2], table[1], *table[3:]]) + "\n")
    pytest.raises(DataUnavailableError, lambda: phase.read_followed(*key, path=written)).match("increase")
    # a run that was not followed in many digits
    other = runs[runs.own_status == "solved"].iloc[0]
    with pytest.raises(InvalidArgumentError, match="followed in many digits"):
        phase.followed_directions(runs, int(other.data_seed), int(other.d), float(other.eta0), int(other.init_seed))


@pytest.mark.slow(seconds=10)
def test_a_follow_on_in_many_digits_is_kept_and_written(tmp_path):
    """Both float64 budgets spent, a run goes on in many digits and its follow-on is kept and written for reading."""
    phase = ts.experiments.phase
    co = ts.synthetic.co_selected(16, pools=(4, 2, 2), length=5, seed=0)
    m = ts.one_step(ts.AttentionModel.init(co.batch.vocab_size, 16, seed=0), co.batch, 100.0)
    followed: list = []
    cos_mid, cos_end, status = phase._own_direction(m, co.batch, 1e8, 1, 1, 40, followed)
    assert status == phase.PRECISE and abs(cos_mid) <= 1 and abs(cos_end) <= 1
    assert followed[0][0] == 0.0 and followed[-1][0] == 1e8 and all(type(x) is float for x in followed[-1][1])
    assert followed[-1][1] == m.p.tolist()  # the model is left at the follow-on's end
    key = (0, 16, 100.0, 0)
    phase.write_followed(tmp_path, key, followed)
    t, P = phase.read_followed(*key, path=tmp_path / "followed" / "data-0-init-0-d-16-eta0-100.csv")
    assert t.tolist() == [x for x, _ in followed] and P.tolist() == [p for _, p in followed]
