"""The ATT-SVM: pairs, sparse vs dense form, feasibility diagnostics."""

import dataclasses
import itertools

import cvxpy as cp
import numpy as np
import pytest
import torch

import tokensel as ts
from tokensel.errors import InfeasibleSVMError, InvalidParameterError, SolverError

#: the independent cvxpy solves, to a tolerance well inside the comparisons
TIGHT = dict(solver="CLARABEL", tol_gap_abs=1e-10, tol_gap_rel=1e-10, tol_feas=1e-10)


def _by_sequence(batch, selected):
    """Each sequence's selected and unselected tokens, by brute force."""
    sel, pos = selected.tolist(), 0
    for seq in batch.to_lists():
        flags, pos = sel[pos : pos + len(seq)], pos + len(seq)
        yield (
            sorted({s for s, f in zip(seq, flags, strict=True) if f}),
            {s for s, f in zip(seq, flags, strict=True) if not f},
        )


def _brute_pairs(batch, selected):
    return np.array(sorted({p for S, U in _by_sequence(batch, selected) for p in itertools.product(S, U)}))


def test_pairs_match_brute_force(small):
    data, model = small
    b = data.batch
    for tol in (1e-9, 0.3):
        sel = ts.statistics.selection(b, model.scores(), tol=tol)
        pairs = ts.selection_pairs(b, sel)
        assert np.array_equal(pairs, _brute_pairs(b, sel))


def test_sparse_equals_plain_dense_cvxpy(small):
    data, _ = small
    b = data.batch
    model = ts.AttentionModel.init(b.vocab_size, 30, seed=4)
    planted = torch.tensor(data.planted, dtype=torch.float64)
    sel = ts.statistics.selection(b, planted.abs())  # select the important token of each sequence
    pairs = ts.selection_pairs(b, sel)
    sparse = ts.max_margin(model.E, pairs, form="sparse")
    # an independent, straightforward formulation
    E = model.E.numpy()
    p = cp.Variable(E.shape[1])
    cons = [(E[s] - E[s2]) @ p >= 1 for s, s2 in pairs]
    cp.Problem(cp.Minimize(cp.sum_squares(p)), cons).solve(**TIGHT)
    assert np.allclose(sparse.p.numpy(), p.value, atol=1e-6)
    assert sparse.min_margin >= 1 - 1e-7 and sparse.active >= 1
    dense = ts.max_margin(model.E, pairs, form="dense")
    assert np.allclose(sparse.p.numpy(), dense.p.numpy(), atol=1e-6)


def test_cycle_is_reported():
    E = torch.eye(3, dtype=torch.float64)
    with pytest.raises(InfeasibleSVMError, match="cycle") as info:
        ts.max_margin(E, np.array([[0, 1], [1, 2], [2, 0]]))
    assert info.value.cycle[0] == info.value.cycle[-1] and len(info.value.cycle) == 4
    assert ts.find_cycle(np.array([[0, 1], [1, 2]])) is None


def test_infeasible_without_cycle_when_rank_deficient():
    # E_0 = E_1 but the pairs want c_0 - c_2 >= 1 and c_2 - c_1 >= 1: no p can do that
    E = torch.tensor([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]], dtype=torch.float64)
    pytest.raises(InfeasibleSVMError, lambda: ts.max_margin(E, np.array([[0, 2], [2, 1]]))).match("no solution")


def test_pairs_beyond_the_vocabulary():
    with pytest.raises(InvalidParameterError, match="must lie in"):
        ts.max_margin(torch.eye(3, dtype=torch.float64), np.array([[0, 5]]))


def test_self_pair_and_bad_masks(small):
    data, _ = small
    with pytest.raises(InfeasibleSVMError, match="both selected and unselected"):
        ts.max_margin(torch.eye(3, dtype=torch.float64), np.array([[1, 1]]))
    with pytest.raises(InvalidParameterError, match="empty"):
        ts.selection_pairs(data.batch, torch.zeros(data.batch.num_tokens, dtype=torch.bool))


def test_score_space_svm_matches_embedding_svm(small):
    data, _ = small
    b = data.batch
    E = ts.AttentionModel.init(b.vocab_size, 40, seed=2).E
    sel = ts.statistics.selection(b, torch.tensor(np.abs(data.planted), dtype=torch.float64))
    pairs = ts.selection_pairs(b, sel)
    direct = ts.max_margin(E, pairs)
    c, norm = ts.max_margin_scores(E @ E.T, pairs)
    assert abs(norm - direct.norm) < 1e-6
    used = torch.from_numpy(direct.tokens)
    assert torch.allclose(c[used], (E @ direct.p)[used], atol=1e-6)
    with pytest.raises(InfeasibleSVMError):
        ts.max_margin_scores(torch.eye(3, dtype=torch.float64), np.array([[0, 1], [1, 0]]))


def test_kkt_residual_small_at_the_optimum_and_large_off_it():
    data = ts.synthetic.assumption1_pairs(n_pairs=20, n_important=2, n_irrelevant=6, length=4, seed=0)
    m = ts.one_step(ts.AttentionModel.init(data.batch.vocab_size, d=32, seed=0), data.batch, eta0=50.0)
    svm = ts.max_margin_for_selection(m.E, data.batch, data.important_occurrences)
    res, lam = ts.maxmargin.kkt_residual(m.E, svm)
    assert res < 1e-5 and np.all(lam >= 0)
    # 2 p_mm is feasible but not optimal: no pair is active, so no multipliers can reproduce it
    other = svm.p * 2.0
    res2, _ = ts.maxmargin.kkt_residual(m.E, dataclasses.replace(svm, p=other))
    assert res2 > 0.1


@pytest.mark.parametrize("form", ["sparse", "dense"])
def test_two_embeddings_1e_12_apart_are_not_called_infeasible(form):
    """Feasible only at |p| ~ 1e12 is a SolverError saying so, not infeasible; identical embeddings stay infeasible."""
    E = torch.randn(4, 3, dtype=torch.float64, generator=ts.generator(0))
    E[1] = E[0] + 1e-12
    with pytest.raises(SolverError, match="feasible .* 1.73e-12 apart") as info:
        ts.max_margin(E, np.array([[0, 1], [2, 3]]), form=form)
    assert not isinstance(info.value, InfeasibleSVMError)
    E[1] = E[0]
    pytest.raises(InfeasibleSVMError, lambda: ts.max_margin(E, np.array([[0, 1], [2, 3]]), form=form))


def _brute_ties(batch, selected):
    return {(S[0], r) for S, _ in _by_sequence(batch, selected) for r in S[1:]}


def test_ties_match_brute_force(small):
    data, model = small
    b = data.batch
    for tol in (1e-9, 0.3, 5.0):
        sel = ts.statistics.selection(b, model.scores(), tol=tol)
        ties = ts.selection_ties(b, sel)
        assert {tuple(t) for t in ties.tolist()} == _brute_ties(b, sel)
        assert ties.shape[1] == 2 and np.all(ties[:, 0] < ties[:, 1])
    # one token per sequence (the important one, possibly repeated): no ties
    assert ts.selection_ties(b, data.important_occurrences).shape == (0, 2)


def test_ties_are_equality_constraints():
    """Tokens selected together get equal scores, as cvxpy with the equalities gives, unlike the problem without."""
    batch = ts.RaggedBatch.from_sequences([[0, 1, 2], [0, 3], [1, 4, 2]], [1, -1, 1], vocab_size=5)
    E = ts.AttentionModel.init(5, 8, seed=3).E
    sel = batch.ids <= 1
    svm = ts.max_margin_for_selection(E, batch, sel)
    assert svm.ties.tolist() == [[0, 1]] and svm.max_tie_gap < 1e-8
    En = E.numpy()
    p = cp.Variable(8)
    cons = [(En[s] - En[s2]) @ p >= 1 for s, s2 in svm.pairs] + [(En[0] - En[1]) @ p == 0]
    cp.Problem(cp.Minimize(cp.sum_squares(p)), cons).solve(**TIGHT)
    assert np.allclose(svm.p.numpy(), p.value, atol=1e-6)
    dense_form = ts.max_margin(E, svm.pairs, svm.ties, form="dense")
    assert np.allclose(dense_form.p.numpy(), svm.p.numpy(), atol=1e-6)
    free = ts.max_margin(E, svm.pairs)
    assert abs(float((E[0] - E[1]) @ free.p)) > 1e-3 and free.norm < svm.norm
    res, lam = ts.maxmargin.kkt_residual(E, svm)
    assert res < 1e-5 and np.all(lam >= 0)
    with pytest.raises(InvalidParameterError, match="derives the ties"):
        ts.max_margin_for_selection(E, batch, sel, ties=svm.ties)


def test_a_pair_between_tied_tokens_is_infeasible():
    E = torch.eye(4, dtype=torch.float64)
    with pytest.raises(InfeasibleSVMError, match="tied"):
        ts.max_margin(E, np.array([[0, 1], [2, 3]]), ties=np.array([[0, 1]]))
    # a cycle only through a tie: 0 > 2, 2 > 1, 1 = 0
    with pytest.raises(InfeasibleSVMError, match="cycle") as info:
        ts.max_margin(E, np.array([[0, 2], [2, 1]]), ties=np.array([[0, 1]]))
    assert info.value.cycle[0] == info.value.cycle[-1]
    with pytest.raises(InvalidParameterError, match="ties"):
        ts.max_margin(E, np.array([[0, 2]]), ties=np.array([[0, 9]]))


def test_closed_form_by_width_rows_and_trend():
    data = ts.synthetic.assumption1_pairs(n_pairs=30, n_important=2, n_irrelevant=8, length=5, seed=1)
    imp = data.important
    rows = ts.maxmargin.closed_form_by_width(data.batch, imp, [32, 512], [0, 1], eta0=60.0)
    assert list(rows.columns) == ["d", "seed", "max_dev", "imp_mean", "irr_mean", "norm"]
    assert rows[["d", "seed"]].values.tolist() == [[32, 0], [32, 1], [512, 0], [512, 1]]
    by_d = rows.groupby("d").max_dev.mean()
    assert by_d[512] < by_d[32]  # closer to the closed form when wider
    # one row by hand
    E = ts.one_step(ts.AttentionModel.init(data.batch.vocab_size, 32, seed=1), data.batch, 60.0).E
    svm = ts.max_margin_for_selection(E, data.batch, data.important_occurrences)
    assert rows.norm.iloc[1] == pytest.approx(svm.norm, rel=1e-6)
    with pytest.raises(InvalidParameterError, match="important"):
        ts.maxmargin.closed_form_by_width(data.batch, imp.numpy(), [32], [0], eta0=60.0)
