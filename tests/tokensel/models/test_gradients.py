"""Exact gradients: autograd agreement, the p=0 one-step closed form, and saturation stability."""

import mpmath
import numpy as np
import pytest
import torch
from conftest import random_batch
from hypothesis import given, settings
from hypothesis import strategies as st

import tokensel as ts
from tokensel.errors import InvalidBatchError, InvalidParameterError


@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    n=st.integers(1, 9),
    vocab=st.integers(1, 13),
    max_len=st.integers(1, 8),
    d=st.integers(1, 9),
    scale=st.sampled_from([0.1, 1.0, 5.0]),
)
def test_closed_form_matches_autograd(seed, n, vocab, max_len, d, scale):
    batch = random_batch(seed, n=n, vocab=vocab, max_len=max_len)
    model = ts.AttentionModel.init(vocab, d, seed=seed)
    model.p.mul_(scale)
    g = ts.gradients(model, batch)
    loss, gE, gp, gv = ts.autograd_gradients(model, batch)
    assert abs(g.loss - loss) <= 1e-12
    assert torch.allclose(g.E, gE, atol=1e-10, rtol=0)
    assert torch.allclose(g.p, gp, atol=1e-10, rtol=0)
    assert torch.allclose(g.v, gv, atol=1e-10, rtol=0)
    naive = ts.models.core.score_value_grads(batch, model.scores(), model.values(), stable=False)
    assert torch.allclose(naive.A, g.A, atol=1e-12, rtol=0)


def test_apply_to_E_equals_materialised_step(small):
    data, model = small
    g = ts.gradients(model, data.batch)
    E = model.E.clone()
    g.apply_to_E(E, 0.3)
    assert torch.allclose(E, model.E - 0.3 * g.E, atol=1e-14)


def test_one_step_closed_form_with_p_zero(small):
    data, _ = small
    b = data.batch
    m0, eta0, y = ts.AttentionModel.init(b.vocab_size, 32, seed=2, p_init="zero"), 2.5, b.labels
    m1, f0 = ts.one_step(m0, b, eta0), m0.forward(b)
    # (eta0/n) sum_i sigma(-y_i f_i) y_i n_s(X_i)/T_i, per token
    coef = torch.sigmoid(-y * f0) * y / b.lengths.double()
    expected = eta0 / b.n * torch.zeros(b.vocab_size, dtype=torch.float64).index_add_(0, b.ids, coef[b.seg])
    assert torch.allclose(m1.E - m0.E, torch.outer(expected, m0.v), atol=1e-14)
    assert torch.equal(m1.p, m0.p) and torch.equal(m1.v, m0.v)


def _mp_grad_p(E, p, v, batch, digits=120):
    """grad_p L in multi-precision arithmetic, straight from the definitions."""
    mpmath.mp.dps = digits
    En = [[mpmath.mpf(float(x)) for x in row] for row in E.tolist()]
    pn, vn = ([mpmath.mpf(float(x)) for x in t.tolist()] for t in (p, v))
    d = len(pn)
    grad = [mpmath.mpf(0)] * d
    for i, seq in enumerate(batch.to_lists()):
        y = int(batch.labels[i])
        a = [sum(En[s][k] * pn[k] for k in range(d)) for s in seq]
        u = [sum(En[s][k] * vn[k] for k in range(d)) for s in seq]
        e = [mpmath.exp(x - max(a)) for x in a]
        q = [x / sum(e) for x in e]
        f = sum(qt * ut for qt, ut in zip(q, u, strict=True))
        g = -y / (1 + mpmath.exp(y * f)) / batch.n
        for t, s in enumerate(seq):
            for k in range(d):
                grad[k] += g * q[t] * (u[t] - f) * En[s][k]
    return np.array([float(x) for x in grad])


def _cos(a, b):
    return float(np.dot(a, b) / np.linalg.norm(a) / np.linalg.norm(b))


def test_stable_formula_keeps_direction_in_saturation():
    # the softmax is saturated at ||p|| = 1e3: off-top weights ~ e^-50, far above underflow
    g = np.random.default_rng(0)
    seqs = [list(g.choice(8, size=5, replace=False)) for _ in range(6)]
    batch = ts.RaggedBatch.from_sequences(seqs, [1, -1, 1, -1, 1, -1], vocab_size=8)
    model = ts.AttentionModel.init(8, 64, seed=8)
    model.p.copy_(model.p / model.p.norm() * 1e3)
    gaps = []
    for seq in seqs:
        a = sorted(model.scores()[seq].tolist(), reverse=True)
        gaps.append(a[0] - a[1])
    # every off-top weight is below machine epsilon (gap > 37) but far from underflow (gap < 700)
    assert min(gaps) > 40 and max(gaps) < 700
    ref = _mp_grad_p(model.E, model.p, model.v, batch)
    stable = ts.gradients(model, batch, stable=True).p.numpy()
    naive = ts.gradients(model, batch, stable=False).p.numpy()
    assert _cos(stable, ref) > 1 - 1e-10
    assert np.allclose(stable, ref, rtol=1e-8, atol=0)
    assert _cos(naive, ref) < 0.99  # the naive formula gets the direction wrong


def test_bad_parameters():
    m = ts.AttentionModel.init(5, 4, seed=0)
    f32, flat = torch.zeros(4, dtype=torch.float32), torch.zeros(4, dtype=torch.float64)
    pytest.raises(InvalidParameterError, lambda: ts.AttentionModel(E=m.E, p=f32, v=m.v)).match("dtype")
    pytest.raises(InvalidParameterError, lambda: ts.AttentionModel(E=flat, p=m.p, v=m.v)).match("2-D")


def test_batch_model_mismatch():
    m = ts.AttentionModel.init(5, 4, seed=0)
    b = ts.RaggedBatch.from_sequences([[0, 1]], [1], vocab_size=6)
    pytest.raises(InvalidBatchError, lambda: ts.gradients(m, b)).match("6 tokens but E has 5 rows")
    b = ts.RaggedBatch.from_sequences([[0, 1]], [2], vocab_size=5, num_classes=3)
    pytest.raises(InvalidBatchError, lambda: m.forward(b)).match("multi-class")


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), K=st.integers(2, 5), scale=st.sampled_from([0.1, 1.0, 5.0]))
def test_multiclass_closed_form_matches_autograd(seed, K, scale):
    g = np.random.default_rng(seed)
    seqs = [g.integers(0, 9, size=g.integers(1, 7)) for _ in range(8)]
    batch = ts.RaggedBatch.from_sequences(seqs, g.integers(0, K, size=8), vocab_size=9, num_classes=K)
    model = ts.MultiClassAttentionModel.init(9, 6, K, seed=seed)
    model.p.mul_(scale)
    gr = ts.gradients(model, batch)
    loss, gE, gp, gV = ts.autograd_gradients(model, batch)
    assert abs(gr.loss - loss) < 1e-12
    assert torch.allclose(gr.E, gE, atol=1e-10) and torch.allclose(gr.p, gp, atol=1e-10)
    assert torch.allclose(gr.v, gV, atol=1e-10)
    E = model.E.clone()
    gr.apply_to_E(E, 0.5)
    assert torch.allclose(E, model.E - 0.5 * gE, atol=1e-12)


def test_multiclass_model_errors():
    pytest.raises(InvalidParameterError, lambda: ts.MultiClassAttentionModel.init(5, 3, 4)).match("num_classes")
    m = ts.MultiClassAttentionModel.init(5, 4, 3)
    with pytest.raises(InvalidBatchError, match="K = 3"):
        m.forward(ts.RaggedBatch.from_sequences([[0]], [1], vocab_size=5))
    pytest.raises(InvalidParameterError, lambda: ts.MultiClassAttentionModel(m.E, m.p, m.V[:, :1])).match("V must be")


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 10_000), log_norm=st.integers(0, 6), K=st.sampled_from([None, 3]))
def test_no_nan_or_inf_up_to_norm_1e6(seed, log_norm, K):
    g = np.random.default_rng(seed)
    seqs = [g.integers(0, 12, size=g.integers(1, 9)) for _ in range(10)]
    if K is None:
        batch = ts.RaggedBatch.from_sequences(seqs, g.choice([-1, 1], size=10), vocab_size=12)
        model = ts.AttentionModel.init(12, 8, seed=seed)
    else:
        batch = ts.RaggedBatch.from_sequences(seqs, g.integers(0, K, size=10), vocab_size=12, num_classes=K)
        model = ts.MultiClassAttentionModel.init(12, 8, K, seed=seed)
    model.p.copy_(model.p / model.p.norm() * 10.0**log_norm)
    gr = ts.gradients(model, batch)
    for t in (gr.f, gr.A, gr.B, gr.p, gr.v, gr.E):
        assert torch.all(torch.isfinite(t))
    assert np.isfinite(gr.loss) and np.isfinite(model.loss(batch))
    if K is None:
        q = model.attention(batch)
        assert torch.all(torch.isfinite(q))
        assert torch.allclose(ts.models.core.segment_sum(q, batch), torch.ones(10, dtype=torch.float64))


@pytest.mark.parametrize("multiclass", [False, True])
@pytest.mark.parametrize("fused", [None, False])
@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
def test_a_nan_or_inf_written_into_E_is_refused_on_either_path(multiclass, fused, bad):
    """A bad value anywhere in E is refused the same way on the fused path (via E p) and the reference path."""
    if multiclass:
        m = ts.MultiClassAttentionModel.init(6, 5, 3, seed=0)
        b = ts.RaggedBatch.from_sequences([[0, 1, 2], [3, 4, 5, 5]], [0, 2], vocab_size=6, num_classes=3)
    else:
        m = ts.AttentionModel.init(6, 5, seed=0)
        b = ts.RaggedBatch.from_sequences([[0, 1, 2], [3, 4, 5, 5]], [1, -1], vocab_size=6)
    m.p.zero_()  # p = 0, as at the start of phase 2: a product that skipped zero terms would hide the bad value
    for row, col in [(0, 0), (5, 4), (2, 3)]:
        E = m.E.clone()
        E[row, col] = bad
        m.E.copy_(E)
        pytest.raises(InvalidParameterError, lambda: ts.gradients(m, b, fused=fused)).match("E contains NaN or inf")
        m.E.copy_(torch.nan_to_num(E, nan=0.5, posinf=0.5, neginf=0.5))
        ts.gradients(m, b, fused=fused)  # finite again: accepted


def test_a_finite_E_whose_scores_overflow_is_not_refused():
    """Scores that overflow a finite E are no bad parameter: both paths agree, and the loss is NaN for the loop."""
    m = ts.AttentionModel.init(3, 2, seed=0)
    b = ts.RaggedBatch.from_sequences([[0, 1], [2]], [1, -1], vocab_size=3)
    m.E.copy_(torch.tensor([[1e300, 1e300], [1.0, 0.0], [0.0, 1.0]], dtype=torch.float64))
    m.p.copy_(torch.tensor([1e10, 1e10], dtype=torch.float64))
    fused, ref = ts.gradients(m, b), ts.gradients(m, b, fused=False)
    assert np.isnan(fused.loss) and np.isnan(ref.loss)
    for name in ("f", "A", "B", "p", "v"):
        torch.testing.assert_close(getattr(fused, name), getattr(ref, name), equal_nan=True, rtol=1e-12, atol=0)
    assert torch.isfinite(fused.f[1])  # the sequence without the overflowing token


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("stable", [True, False])
@pytest.mark.parametrize("threads", ["1", "2"])
def test_p_gradient_of_gives_p_gradient_bitwise(dtype, stable, threads, monkeypatch):
    # the loops' evaluator (checks and layout once) against the checked function, p after p
    monkeypatch.setenv("TOKENSEL_THREADS", threads)
    batch = random_batch(5, n=80, vocab=23, max_len=12)
    model = ts.AttentionModel.init(23, 9, seed=1, dtype=dtype)
    w = model.E @ model.v
    grad_p = ts.models.gradients.p_gradient_of(model.E, w, batch, stable)
    g = torch.Generator().manual_seed(0)
    for scale in (0.0, 0.5, 5.0, 60.0):  # 60: saturated, where the stable and the naive forms part
        p = (torch.randn(9, generator=g, dtype=torch.float64) * scale).to(dtype)
        loss, grad = grad_p(p)
        ref_loss, ref_grad = ts.p_gradient(model.E, p, w, batch, stable)
        assert loss.dtype == ref_loss.dtype == dtype and loss.ndim == 0
        assert torch.equal(loss, ref_loss) and torch.equal(grad, ref_grad), scale
