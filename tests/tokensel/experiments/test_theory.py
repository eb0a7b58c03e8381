"""tokensel.experiments.theory: the theory chapters' tables and sweeps, against direct computations."""

import numpy as np
import pytest
import torch

import tokensel as ts
from tokensel.errors import ArgumentTypeError, InvalidArgumentError
from tokensel.experiments import theory


@pytest.fixture(scope="module")
def data():
    return ts.synthetic.independent_tokens(n=120, vocab_size=20, length=6, delta=0.8, seed=1)


def test_one_step_errors_are_the_relative_error_and_the_gram_deviation(data):
    batch = data.batch
    runs = theory.one_step_errors(batch, 5.0, [16, 64], [3, 4])
    assert list(runs.columns) == ["d", "seed", "err", "gram_dev"] and len(runs) == 4
    assert runs[["d", "seed"]].values.tolist() == [[16, 3], [16, 4], [64, 3], [64, 4]]
    alpha = ts.statistics.alpha(batch)
    m0 = ts.AttentionModel.init(batch.vocab_size, 64, seed=4)
    m1 = ts.one_step(m0, batch, 5.0)
    target = torch.outer(2.5 * alpha, m0.v)
    assert runs.err.iloc[3] == pytest.approx(float((m1.E - m0.E - target).norm() / target.norm()), rel=1e-12)
    R = m1.E @ m1.E.T - torch.eye(batch.vocab_size, dtype=torch.float64) - 6.25 * torch.outer(alpha, alpha)
    assert runs.gram_dev.iloc[3] == pytest.approx(float(R.abs().max()), rel=1e-12)
    assert theory.one_step_error(batch, 5.0, 64, 4) == runs.err.iloc[3]
    # the error shrinks with the width (the lemma's d^{-1/2})
    wide = theory.one_step_errors(batch, 5.0, [16, 4096], [0])
    assert wide.err.iloc[1] < wide.err.iloc[0] / 4


def test_ranking_counts_strong_tokens_and_their_signs(data):
    batch = data.batch
    table = theory.one_step_ranking(batch, steps=[1.0, 500.0], dims=[64], seed=2)
    assert list(table.eta0) == [1.0, 500.0] and list(table.d) == [64, 64]
    weak, strong = table.iloc[0], table.iloc[1]
    assert weak.strong_tokens == 0 and np.isnan(weak.right_sign)
    assert strong.strong_tokens > 0 and strong.right_sign == 1.0 and strong.correlation > 0.9


def test_multiclass_step_matches_eta0_alpha_k_and_returns_the_largest_widths_changes():
    mdata = ts.synthetic.independent_tokens_multiclass(n=210, vocab_size=30, num_classes=3, length=8, delta=0.8, seed=0)
    out = theory.multiclass_step(mdata.batch, 2.0, dims=[2048, 64], seed=1)
    assert list(out.table.d) == [2048, 64] and out.changes.shape == (30, 3)
    assert out.table.rel_err.iloc[0] < out.table.rel_err.iloc[1]
    m0 = ts.MultiClassAttentionModel.init(30, 2048, 3, seed=1, p_init="zero")
    expected = (ts.one_step(m0, mdata.batch, 2.0).E - m0.E) @ m0.V
    assert torch.allclose(out.changes, expected)


def test_gram_bound_is_the_formula_and_takes_arrays():
    alpha = torch.tensor([0.1, -0.2, 0.0, 0.05], dtype=torch.float64)
    b = theory.gram_bound(alpha, 10.0, 100)
    assert b == pytest.approx(1.5 * (2 + np.sqrt(2) * 10.0 * 0.2) * np.sqrt(np.log(4) / 100))
    assert np.allclose(theory.gram_bound(alpha, 10.0, np.array([100, 400])), [b, b / 2])


def test_selection_table_marks_the_selected_tokens():
    small = ts.synthetic.assumption1_pairs(n_pairs=3, n_important=2, n_irrelevant=4, length=4, seed=0)
    model = ts.AttentionModel.init(small.batch.vocab_size, d=8, seed=0)
    sel = ts.statistics.selection(small.batch, model.scores())
    table = theory.selection_table(small.batch, sel, small.planted)
    assert len(table) == small.batch.n and list(table.columns) == ["y", "tokens ([selected])", "important"]
    assert sum(row.count("[") for row in table["tokens ([selected])"]) == int(sel.sum())
    assert all(small.planted[i] != 0 for i in table.important)


def test_a_gram_bound_of_one_token_is_refused():
    pytest.raises((InvalidArgumentError, ArgumentTypeError), lambda: theory.gram_bound(torch.zeros(1), 1.0, 8))
