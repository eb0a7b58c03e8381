"""tokensel.models.mixing: the attention mixture z = Q E as sparse products, with its own backward."""

import numpy as np
import torch

import tokensel as ts


def test_mix_gradients_by_finite_differences():
    data = ts.synthetic.independent_tokens(12, 9, length=(2, 6), delta=0.8, seed=4)
    plan = ts.models.mixing.MixPlan(data.batch)
    g = torch.Generator().manual_seed(0)
    E = torch.randn(9, 4, generator=g, dtype=torch.float64, requires_grad=True)
    q = torch.rand(len(plan.entries.ids), generator=g, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda q, E: ts.models.mixing.mix(q, E, plan), (q, E))


def test_entry_attention_is_the_occurrence_softmax():
    data = ts.synthetic.independent_tokens(10, 6, length=(2, 8), delta=0.8, seed=5)
    batch = ts.RaggedBatch.from_sequences(data.batch.to_lists() + [[5]], data.batch.labels.tolist() + [1], vocab_size=6)
    plan = ts.models.mixing.MixPlan(batch)
    c = torch.linspace(-3, 40, 6, dtype=torch.float64)  # large scores: the shift must be per sequence
    q = ts.models.mixing.entry_attention(c, plan)
    occ, _ = ts.models.core.segment_softmax(c[batch.ids], batch)
    per_entry = torch.zeros(11, 6, dtype=torch.float64).index_put_((batch.seg, batch.ids), occ, accumulate=True)
    assert torch.allclose(q, per_entry[plan.entries.seg, plan.entries.ids], atol=1e-15)


def test_entry_attention_exponentials_are_numpys_and_differentiable():
    """The exponentials are numpy's, bit for bit on every call, and the weights' gradient is the softmax's."""
    exp = ts.models.mixing._Exp.apply
    for dtype in (torch.float64, torch.float32):  # in float32 torch's exp and numpy's differ in some last bits
        x = -torch.rand(40_000, generator=torch.Generator().manual_seed(1), dtype=dtype) * 30
        first, again = exp(x), exp(x)
        assert first.dtype == dtype and np.array_equal(first.numpy(), np.exp(x.numpy())) and torch.equal(first, again)
    data = ts.synthetic.independent_tokens(10, 6, length=(2, 8), delta=0.8, seed=5)
    plan = ts.models.mixing.MixPlan(data.batch)
    c = torch.linspace(-3, 4, 6, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda c: ts.models.mixing.entry_attention(c, plan), (c,))
