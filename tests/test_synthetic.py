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
    import tokensel as ts

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
    import tokensel as ts

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
