"""tokensel.synthetic: the data models of the theory chapters."""

import numpy as np
import pytest
import torch

import tokensel as ts
from tokensel.errors import InvalidBatchError


def test_theory_pairs_hold_assumption_1_in_the_sample():
    data = ts.synthetic.theory_pairs()
    assert data.batch.n == 2 * ts.synthetic.THEORY_PAIRS["n_pairs"]
    alpha = ts.statistics.alpha(data.batch)
    irrelevant = ~data.important
    assert torch.all(alpha[irrelevant] == 0)  # exactly, by the pairing
    assert torch.equal(data.important, torch.from_numpy(data.planted != 0))
    occ = data.important_occurrences
    assert occ.shape == data.batch.ids.shape
    # exactly one important occurrence per sequence, of the label's sign
    per_seq = torch.zeros(data.batch.n, dtype=torch.long).index_add_(0, data.batch.seg, occ.long())
    assert torch.all(per_seq == 1)
    signs = torch.from_numpy(np.sign(data.planted))[data.batch.ids][occ]
    assert torch.equal(signs.long(), data.batch.labels.long())


def test_value_lead_is_the_signed_separation():
    data = ts.synthetic.theory_pairs()
    w = torch.from_numpy(data.planted.astype(np.float64))  # planted roles as values: the important token leads by 1
    lead = ts.statistics.value_lead(data.batch, w, data.important)
    assert torch.all(lead == 1.0)
    assert ts.statistics.loss_floor(data.batch, w) == pytest.approx(np.log1p(np.exp(-1.0)), rel=1e-14)
    assert torch.all(ts.statistics.best_value(data.batch, w) == 1.0)


def test_contested_pairs_have_a_finite_stationary_point():
    data = ts.synthetic.contested_pairs(3)
    a = ts.statistics.alpha(data.batch)
    assert torch.allclose(a[0::2], -a[1::2]) and bool(torch.all(a[0::2] > 0))
    m = ts.one_step(ts.AttentionModel.init(6, d=32, seed=0), data.batch, eta0=100.0)
    p_star = ts.synthetic.contested_stationary_point(m.E, m.v, m.p)
    _, grad = ts.p_gradient(m.E, p_star, m.values(), data.batch)
    assert float(grad.norm()) < 1e-10
    # p* minus p0 lies in the span of the differences, and every contested sequence has f = 0 there
    f = ts.AttentionModel(m.E, p_star, m.v).forward(data.batch)
    assert torch.allclose(f[2::4], torch.zeros(3, dtype=f.dtype), atol=1e-10)


def test_contested_stationary_point_rejects_same_sign_values():
    m = ts.AttentionModel.init(4, d=16, seed=0)
    E = m.E.clone()
    E[:, :] = 0.0
    E[:, 0] = 1.0
    v = torch.zeros(16, dtype=E.dtype)
    v[0] = 1.0
    with pytest.raises(ts.InvalidBatchError, match="u_a > 0 > u_b"):
        ts.synthetic.contested_stationary_point(E, v, m.p)


def test_assumption1_pairs_with_several_important_tokens_per_sequence():
    data = ts.synthetic.assumption1_pairs(n_pairs=30, n_important=3, n_irrelevant=10, length=6, seed=1, per_sequence=2)
    b = data.batch
    occ = data.important_occurrences
    planted = torch.from_numpy(data.planted)[b.ids]
    for i in range(b.n):
        sl = slice(int(b.offsets[i]), int(b.offsets[i + 1]))
        toks = b.ids[sl][occ[sl]]
        assert len(toks) == 2 and len(set(toks.tolist())) == 2  # two distinct important tokens
        assert bool(torch.all(planted[sl][occ[sl]] == b.labels[i]))  # of the label's sign
    a = ts.statistics.alpha(b)
    assert float(a[~data.important].abs().max()) < 1e-15  # irrelevant in the sample (up to rounding)
    # per_sequence = 1 keeps the original data of a seed
    one = ts.synthetic.assumption1_pairs(n_pairs=30, n_important=3, n_irrelevant=10, length=6, seed=1)
    assert torch.equal(one.batch.ids, ts.synthetic.assumption1_pairs(30, 3, 10, 6, 1, per_sequence=1).batch.ids)
    with pytest.raises(InvalidBatchError, match="n_important"):
        ts.synthetic.assumption1_pairs(n_pairs=5, n_important=2, n_irrelevant=4, per_sequence=3)


def test_eq15_tokens_law_and_assumption1_frequency():
    data = ts.synthetic.eq15_tokens(400, 3, 30, length=8, seed=0)
    S = 36
    assert "delta_tilde=0.9722" in data.description  # (|S| - 1) / |S| by default
    roles = data.planted[data.batch.ids.numpy()]
    labels = data.batch.labels.numpy()[data.batch.seg.numpy()]
    assert np.all((roles == 0) | (roles == labels))  # polar tokens only with their own label
    assert abs(float((roles == 0).mean()) - (S - 1) / S) < 0.02
    rep = ts.synthetic.assumption1_report(data)
    expected = 8 / S * ((S - 1) / S) ** 7  # Binomial(8, 1/36) = 1
    assert abs(rep["one_each"] - expected) < 0.06 and rep["complete"] and not rep["holds"]
    assert ts.synthetic.assumption1_report(ts.synthetic.theory_pairs())["holds"]
    freq = ts.synthetic.assumption1_frequency([0, 1, 2], n=20, n_polar=1, n_irrelevant=2, length=2, delta_tilde=0.0)
    assert list(freq.seed) == [0, 1, 2] and not freq.holds.any()  # two polar tokens per sequence
    with pytest.raises(ts.InvalidBatchError, match="seeds="):
        ts.synthetic.assumption1_frequency([0], seed=3, n=4, n_polar=1, n_irrelevant=2)
    with pytest.raises(ts.InvalidBatchError, match="planted roles"):
        ts.synthetic.assumption1_report(ts.synthetic.independent_tokens(10, 10))


def test_co_selected_layout():
    data = ts.synthetic.co_selected(8, pools=(3, 2, 2), length=5, seed=0)
    seqs, labels = data.batch.to_lists(), data.batch.labels.tolist()
    assert len(seqs) == 16 and all(len(s) == 5 for s in seqs)
    a, b, e, c = (ts.synthetic.CO_SELECTED_TOKENS[k] for k in "abec")
    assert seqs[0][0] == a and seqs[1][0] == c and seqs[2][0] == e and seqs[3][0] == b
    assert seqs[6][:2] == [a, b] == seqs[7][:2] and labels[6:8] == [1, -1] and seqs[6] == seqs[7]
    pool = {4 + k for k in range(3)}
    assert set(seqs[0][1:]) <= pool  # pool A
    alpha = ts.statistics.alpha(data.batch)
    assert float(alpha[7:].abs().max()) < 1e-15 and alpha[a] > 0 > alpha[b]
    assert ts.synthetic.assumption1_report(data)["max_alpha_irrelevant"] < 1e-15


def test_eq15_summary_rows():
    table = ts.synthetic.eq15_summary({"half": 0.5, "most": 0.9}, [0, 1], n=40, n_polar=2, n_irrelevant=6, length=4)
    assert list(table.index) == ["half", "most"]
    assert table.loc["half", "binomial"] == pytest.approx(4 * 0.5 * 0.5**3)
    assert table.loc["most", "se"] == pytest.approx(np.sqrt(0.2916 * 0.7084 / 80), rel=1e-3)
    assert (table.holds == 0).all() and (table.min_alpha_irrelevant > 0).all()
    with pytest.raises(ts.InvalidBatchError, match="delta_tildes"):
        ts.synthetic.eq15_summary({}, [0], n=4, n_polar=1, n_irrelevant=2, length=3)
