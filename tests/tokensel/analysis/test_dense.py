"""Dense token features: the ATT-SVM for p and for a key-query W, normalised GD, infeasibility reports."""

import cvxpy as cp
import numpy as np
import pytest
import torch

import tokensel as ts
from tokensel.errors import DivergenceError, InfeasibleSVMError, InvalidArgumentError


def _features(E, batch):
    """The batch's dense features, padded with zeros, and the mask of the real positions."""
    T = int(batch.lengths.max())
    pos = torch.arange(batch.num_tokens) - batch.offsets[:-1][batch.seg]
    X = torch.zeros(batch.n, T, E.shape[1], dtype=torch.float64)
    mask = torch.zeros(batch.n, T, dtype=torch.bool)
    X[batch.seg, pos], mask[batch.seg, pos] = E.to(torch.float64)[batch.ids], True
    return X, mask


@pytest.fixture(scope="module")
def planted():
    """The phase-1 model of one-important-token data, its dense features and the important tokens' selection."""
    data = ts.synthetic.assumption1_pairs(60, 2, 10, length=6, seed=0)
    m = ts.one_step(ts.AttentionModel.init(data.batch.vocab_size, 24, seed=0), data.batch, eta0=20.0)
    sel = ts.statistics.selection(data.batch, torch.tensor(np.abs(data.planted), dtype=torch.float64))
    X, mask = _features(m.E, data.batch)
    sel_dense = torch.zeros_like(mask)
    sel_dense[mask] = sel  # row-major order of the mask is the batch's occurrence order
    return data, m, sel, X, mask, sel_dense


def test_dense_svm_agrees_with_token_pairs(planted):
    data, m, sel, X, mask, sel_dense = planted
    token = ts.max_margin_for_selection(m.E, data.batch, sel)
    res = ts.att_svm_dense(X, sel_dense, mask=mask)
    assert float((res.p - token.p).norm()) < 1e-6 * token.norm
    assert res.norm == pytest.approx(token.norm, rel=1e-8)
    assert res.min_margin == pytest.approx(1.0, abs=1e-7) and res.active >= 1 and res.same_selection
    # one selected position per sequence given as indices opt_i (the literature's convention)
    opt = sel_dense.to(torch.int64).argmax(1)
    assert bool((sel_dense.sum(1) == 1).all())
    res_idx = ts.att_svm_dense(X.numpy(), opt.numpy(), mask=mask.numpy())
    assert float((res_idx.p - res.p).norm()) < 1e-8
    assert res.constraints == int((mask.sum(1) - 1).sum())


def test_normalized_gd_direction_approaches_the_svm(planted):
    data, m, _, X, mask, sel_dense = planted
    svm = ts.att_svm_dense(X, sel_dense, mask=mask)
    run = ts.normalized_gd(X, data.batch.labels, m.v, steps=1500, lr=0.5, mask=mask, reference=svm.p, records=30)
    cos = np.array(run.cos_ref[1:])
    assert cos[-1] > 0.9999
    late = cos[np.array(run.norm_p[1:]) >= 20]
    assert len(late) > 5 and np.all(np.diff(late) > 0)
    assert run.loss[-1] < run.loss[0]


def test_normalized_gd_takes_train_p_step(planted):
    data, m, _, X, mask, _ = planted
    ref = m.copy()
    ts.train_p(ref, data.batch, lr=0.5, steps=40, method="normalized", progress=False)
    run = ts.normalized_gd(X, data.batch.labels, m.v, steps=40, lr=0.5, mask=mask, p0=m.p)
    assert float((run.p - ref.p).norm()) < 1e-10 * float(ref.p.norm())


def test_infeasible_problem_names_the_conflicting_sequences():
    rng = np.random.default_rng(0)
    d = 12  # generic features of 5 sequences of 3 positions give 10 constraints: feasible in 12 dimensions
    a, b = np.eye(d)[0], np.eye(d)[1]
    X = rng.normal(size=(5, 3, d))
    X[1, :2], X[3, :2] = (a, b), (b, a)  # sequence 1 wants a above b, sequence 3 b above a
    sel = np.zeros((5, 3), dtype=bool)
    sel[:, 0] = True
    with pytest.raises(InfeasibleSVMError) as err:
        ts.att_svm_dense(X, sel)
    assert err.value.sequences == [1, 3]
    assert "[1, 3]" in str(err.value)
    # one sequence alone: the same features selected and unselected
    X2 = rng.normal(size=(4, 3, 10))
    X2[2, 1] = X2[2, 0]
    with pytest.raises(InfeasibleSVMError) as err:
        ts.att_svm_dense(X2, np.zeros(4, dtype=np.int64))
    assert err.value.sequences == [2]
    # without the conflict, the same problem is solved
    X[3, :2] = (a, -b)
    assert ts.att_svm_dense(X, sel).min_margin == pytest.approx(1.0, abs=1e-7)


def test_key_query_svm_matches_a_direct_matrix_formulation():
    rng = np.random.default_rng(1)
    n, T, d, dz = 4, 3, 6, 2  # 8 constraints on the 12 entries of W
    X, Z = rng.normal(size=(n, T, d)), rng.normal(size=(n, dz))
    opt = rng.integers(0, T, size=n)
    res = ts.att_svm_kq(X, opt, Z)
    W = cp.Variable((d, dz))
    cons = [(X[i, opt[i]] - X[i, t]) @ W @ Z[i] >= 1 for i in range(n) for t in range(T) if t != opt[i]]
    cp.Problem(cp.Minimize(cp.sum_squares(W)), cons).solve(solver="CLARABEL")
    assert res.p.shape == (d, dz)
    assert np.allclose(res.p.numpy(), W.value, atol=1e-6)
    gaps = [(X[i, opt[i]] - X[i, t]) @ res.p.numpy() @ Z[i] for i in range(n) for t in range(T) if t != opt[i]]
    assert min(gaps) == pytest.approx(1.0, abs=1e-7)
    nuc = ts.att_svm_kq(X, opt, Z, norm="nuc")
    assert nuc.norm <= np.linalg.norm(res.p.numpy(), "nuc") + 1e-6
    # a query of ones in one dimension is the ATT-SVM for p
    one = ts.att_svm_kq(X[:2], opt[:2], np.ones((2, 1)))
    assert np.allclose(one.p.numpy()[:, 0], ts.att_svm_dense(X[:2], opt[:2]).p.numpy(), atol=1e-8)


def test_two_selected_positions_tie():
    """A tie (chapter 05's equality constraints): scores 1, 1, 0 at p = (1, -1), not (1, 0), which picks one."""
    X = np.array([[[2.0, 1.0], [1.0, 0.0], [0.0, 0.0]]])
    sel = np.array([[True, True, False]])
    res = ts.att_svm_dense(X, sel)
    assert np.allclose(res.p.numpy(), [1.0, -1.0], atol=1e-6)
    assert res.same_selection and res.norm == pytest.approx(2**0.5, rel=1e-6)
    scores = X[0] @ res.p.numpy()
    assert (scores >= scores.max() - 1e-6).tolist() == [True, True, False]  # the selection asked for
    # by hand: min ||p||^2 s.t. 2 p1 + p2 = p1 and p1 >= 1 gives p2 = -p1, p1 = 1


def test_ties_can_make_the_problem_infeasible():
    # (3, 0) and (1, 0) tie only when p1 = 0, but the second must beat (0, 0) by 1: p1 >= 1
    X = np.array([[[3.0, 0.0], [1.0, 0.0], [0.0, 0.0]]])
    with pytest.raises(InfeasibleSVMError) as info:
        ts.att_svm_dense(X, np.array([[True, True, False]]))
    assert info.value.sequences == [0]
    # the same positions, one selected each, are feasible
    assert ts.att_svm_dense(X, np.array([0])).same_selection


def test_a_fully_selected_sequence_still_ties():
    # sequence 1 selects both its positions: they must tie, which forces p2 = 0 (features (1, 1) and (1, 0))
    X = np.array([[[1.0, 1.0], [0.0, 0.0]], [[1.0, 1.0], [1.0, 0.0]]])
    res = ts.att_svm_dense(X, np.array([[True, False], [True, True]]))
    assert np.allclose(res.p.numpy(), [1.0, 0.0], atol=1e-6)


def test_dense_and_token_problems_agree_on_ties():
    # token 0 and 1 selected together in every sequence, token 2 unselected
    batch = ts.RaggedBatch.from_sequences([[0, 1, 2], [1, 0, 2, 2]], [1, -1], vocab_size=3)
    E = torch.tensor([[2.0, 1.0, 0.0], [1.0, 0.0, 0.5], [0.0, 0.0, 0.0]], dtype=torch.float64)
    sel = batch.ids < 2
    token = ts.max_margin_for_selection(E, batch, sel)
    X, mask = _features(E, batch)
    sel_dense = torch.zeros_like(mask)
    sel_dense[mask] = sel
    res = ts.att_svm_dense(X, sel_dense, mask=mask)
    assert float((res.p - token.p).norm()) < 1e-6 and token.max_tie_gap < 1e-7


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda X: ts.att_svm_dense(X[:, :, 0], np.zeros(3, dtype=np.int64)), "X"),
        (lambda X: ts.att_svm_dense(X, np.zeros(2, dtype=np.int64)), "selected"),
        (lambda X: ts.att_svm_dense(X, np.zeros((3, 4))), "selected"),
        (lambda X: ts.att_svm_dense(X, np.full(3, 7)), "position indices"),
        (lambda X: ts.att_svm_dense(X, np.zeros((3, 4), dtype=bool)), "no selected position"),
        (lambda X: ts.att_svm_dense(X, np.ones((3, 4), dtype=bool)), "no constraint"),
        (lambda X: ts.att_svm_dense(X, np.full(3, 3), mask=np.arange(4) < np.full((3, 1), 3)), "mask leaves out"),
        (lambda X: ts.normalized_gd(X, [0, 1, 1], np.ones(2), steps=3), "labels_from_01"),
        (lambda X: ts.att_svm_dense(np.where(X > 0, np.nan, X), np.zeros(3, dtype=np.int64)), "X"),
    ],
)
def test_bad_arguments_are_named(call, match):
    X = np.random.default_rng(0).normal(size=(3, 4, 2))
    pytest.raises(InvalidArgumentError, lambda: call(X)).match(match)


@pytest.mark.parametrize("scale", [1.0, 1e-4, 1e-8])
def test_a_feasible_svm_of_small_features_is_solved_at_every_scale(scale):
    """Issue 48 (7): features of size 1e-6 stalled the solver (an inaccurate margin, or "infeasible")."""
    X = np.random.default_rng(0).normal(size=(6, 4, 30))
    sel = np.zeros((6, 4), bool)
    sel[:, 0] = True
    unit = ts.att_svm_dense(X, sel)
    small = ts.att_svm_dense(X * scale, sel)
    assert small.status == "optimal" and abs(small.min_margin - 1) < 1e-6
    assert abs(small.norm * scale - unit.norm) < 1e-6 * unit.norm


def test_normalized_gd_that_leaves_the_finite_numbers_says_so():
    """Issue 48 (7): a start far out gave NaN losses without a word."""
    X = np.random.default_rng(0).normal(size=(6, 4, 3))
    y, v = np.array([1, -1, 1, -1, 1, -1.0]), np.ones(3)
    with pytest.raises(DivergenceError, match="scale the features down"):
        ts.normalized_gd(X, y, v, steps=5, p0=np.full(3, 1e308))
