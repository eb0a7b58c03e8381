"""tokensel.models.core: segment operations over ragged batches and the per-token closed forms."""

import torch
from conftest import random_batch

import tokensel as ts


def test_segment_operations_equal_per_sequence_loops():
    batch = random_batch(2, n=9)
    x = torch.linspace(-2, 3, batch.num_tokens, dtype=torch.float64)
    s, mx = ts.models.core.segment_sum(x, batch), ts.models.core.segment_max(x, batch)
    q, _ = ts.models.core.segment_softmax(x, batch)
    for i in range(batch.n):
        part = x[batch.offsets[i] : batch.offsets[i + 1]]
        assert torch.isclose(s[i], part.sum()) and mx[i] == part.max()
        assert torch.allclose(q[batch.offsets[i] : batch.offsets[i + 1]], torch.softmax(part, 0))


def test_score_value_grads_match_finite_differences():
    batch = random_batch(3)
    g = torch.Generator().manual_seed(0)
    c = torch.randn(batch.vocab_size, generator=g, dtype=torch.float64)
    w = torch.randn(batch.vocab_size, generator=g, dtype=torch.float64)
    r = ts.models.core.score_value_grads(batch, c, w)
    eps = 1e-6
    loss = lambda c, w: ts.models.core.score_value_grads(batch, c, w).loss  # noqa: E731
    for k in range(batch.vocab_size):
        e = torch.zeros_like(c)
        e[k] = eps
        dc = (loss(c + e, w) - loss(c - e, w)) / (2 * eps)
        dw = (loss(c, w + e) - loss(c, w - e)) / (2 * eps)
        assert abs(float(dc - r.A[k])) < 1e-8 and abs(float(dw - r.B[k])) < 1e-8
