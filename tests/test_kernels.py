"""The fused attention kernels (tokensel.models.kernels) against the reference implementation of tokensel.models.core:
binary and K-class, float64 and float32, length-1 sequences, repeated tokens, saturated scores;
bitwise determinism across runs and thread counts."""

import numpy as np
import pytest
import torch

import tokensel as ts
from tokensel.errors import InvalidParameterError


def _batch(seed, n, vocab, max_len, K=None):
    g = np.random.default_rng(seed)
    # lengths from 1 (a lone token) up, tokens from a small vocabulary so that most repeat
    seqs = [g.integers(0, vocab, size=g.integers(1, max_len + 1)) for _ in range(n)]
    seqs[0] = np.array([vocab - 1])  # a length-1 sequence
    seqs[1] = np.array([2, 2, 2, 1, 2])  # one token repeated, with another
    y = g.choice([-1, 1], size=n) if K is None else g.integers(0, K, size=n)
    return ts.RaggedBatch.from_sequences(seqs, y, vocab_size=vocab, num_classes=K)


def _model(vocab, d, K, dtype, scale, seed=0):
    if K is None:
        m = ts.AttentionModel.init(vocab, d, seed=seed, dtype=dtype)
    else:
        m = ts.MultiClassAttentionModel.init(vocab, d, K, seed=seed, dtype=dtype)
    g = torch.Generator().manual_seed(seed)
    m.p.copy_(torch.randn(d, generator=g, dtype=torch.float64).to(dtype) * scale)
    return m


def _rel(x, y):
    return float((x - y).abs().max() / y.abs().max().clamp_min(1e-300))


CASES = [(None, torch.float64, 1e-12), (4, torch.float64, 1e-12), (None, torch.float32, 2e-5), (4, torch.float32, 2e-5)]


@pytest.mark.parametrize("K,dtype,tol", CASES)
@pytest.mark.parametrize("scale", [0.3, 3.0, 40.0])  # 40: saturated softmax, where the stable form matters
def test_fused_equals_reference(K, dtype, tol, scale):
    batch = _batch(1, n=60, vocab=17, max_len=30, K=K)
    model = _model(17, 8, K, dtype, scale)
    fast = ts.gradients(model, batch, fused=True)
    ref = ts.gradients(model, batch, fused=False)
    assert abs(fast.loss - ref.loss) <= tol * max(abs(ref.loss), 1e-3)
    for name in ("f", "A", "B", "p", "v"):
        assert _rel(getattr(fast, name), getattr(ref, name)) <= tol, name
    assert _rel(fast.E, ref.E) <= tol
    assert fast.f.dtype == fast.A.dtype == fast.p.dtype == dtype
    assert fast.B.shape == ref.B.shape and fast.v.shape == ref.v.shape


def test_p_gradient_fused_equals_reference():
    batch = _batch(2, n=40, vocab=13, max_len=20)
    model = _model(13, 6, None, torch.float64, 2.0)
    w = model.E @ model.v
    loss, grad = ts.p_gradient(model.E, model.p, w, batch)
    ref = ts.models.core.score_value_grads(batch, model.E @ model.p, w)
    assert abs(float(loss) - float(ref.loss)) <= 1e-12 * float(ref.loss)
    assert _rel(grad, model.E.T @ ref.A) <= 1e-12
    assert loss.dtype == torch.float64 and loss.ndim == 0


@pytest.mark.parametrize("K", [None, 3])
def test_bitwise_deterministic_across_runs_and_threads(K, monkeypatch):
    batch = _batch(3, n=500, vocab=50, max_len=60, K=K)
    model = _model(50, 8, K, torch.float64, 1.0)
    monkeypatch.setenv("TOKENSEL_THREADS", "2")
    a, b = ts.gradients(model, batch, fused=True), ts.gradients(model, batch, fused=True)
    monkeypatch.setenv("TOKENSEL_THREADS", "1")
    c = ts.gradients(model, batch, fused=True)
    for name in ("f", "A", "B", "p", "v"):
        assert torch.equal(getattr(a, name), getattr(b, name)) and torch.equal(getattr(a, name), getattr(c, name))
    assert a.loss == b.loss == c.loss


def test_one_sequence_of_one_token():
    batch = ts.RaggedBatch.from_sequences([[0]], [1], vocab_size=2)
    model = _model(2, 3, None, torch.float64, 1.0)
    fast, ref = ts.gradients(model, batch, fused=True), ts.gradients(model, batch, fused=False)
    assert torch.equal(fast.A, torch.zeros(2, dtype=torch.float64))  # one token: no score gradient
    assert _rel(fast.B, ref.B) <= 1e-15 and abs(fast.loss - ref.loss) <= 1e-15


def test_blocks_cover_the_sequences_in_order():
    batch = _batch(4, n=200, vocab=300, max_len=40)
    plan = ts.models.core.entry_plan(batch)
    b = plan.blocks
    assert b[0] == 0 and b[-1] == 200 and np.all(np.diff(b) > 0) and b.size - 1 <= ts.models.kernels.BLOCKS
    assert plan.max_entries == int(batch.distinct().offsets.diff().max())
    assert plan is ts.models.core.entry_plan(batch)  # computed once per batch
    tiny = ts.models.core.entry_plan(_batch(5, n=3, vocab=5, max_len=4))  # fewer sequences than blocks
    assert list(tiny.blocks) == sorted(set(tiny.blocks)) and tiny.blocks[-1] == 3


def test_fused_refused_where_it_does_not_apply():
    batch = _batch(5, n=10, vocab=7, max_len=5)
    model = _model(7, 3, None, torch.float64, 1.0)
    with pytest.raises(InvalidParameterError, match="fused=True"):
        ts.gradients(model, batch, stable=False, fused=True)
    with pytest.raises(InvalidParameterError, match="fused"):
        ts.gradients(model, batch, fused="yes")
    # the naive form is the reference's, whatever fused says by default
    naive = ts.gradients(model, batch, stable=False)
    assert torch.equal(naive.A, ts.gradients(model, batch, stable=False, fused=False).A)
