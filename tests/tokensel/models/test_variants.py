"""The model variants: padding, equivalences with the one-layer model, training."""

import pytest
import torch

import tokensel as ts
from tokensel.errors import InvalidParameterError


def test_padded_layout():
    b = ts.RaggedBatch.from_sequences([[3, 1], [2], [0, 1, 2]], [1, -1, 1], vocab_size=4)
    ids, mask = ts.models.variants.padded(b)
    assert ids.tolist() == [[3, 1, 0], [2, 0, 0], [0, 1, 2]]
    assert mask.sum(1).tolist() == [2, 1, 3]


def test_two_layer_with_zero_first_layer_matches_reference():
    # with E = 0 in layer one's keys nothing changes: check the forward against a direct loop
    data = ts.synthetic.assumption1_pairs(6, 2, 5, length=(3, 6), seed=0)
    m = ts.models.variants.make("two_layer", data.batch.vocab_size, 8, seed=0, dtype=torch.float64)
    f = m.forward(data.batch)
    for i, seq in enumerate(data.batch.to_lists()):
        X = m.E[seq]
        H = X + torch.softmax(X @ X.T / 8**0.5, dim=1) @ X
        q = torch.softmax(H @ m.p, 0)
        assert torch.allclose(f[i], q @ (H @ m.v), atol=1e-12)


def test_mlp_variant_reference_and_padding_invariance():
    data = ts.synthetic.assumption1_pairs(6, 2, 5, length=(3, 6), seed=1)
    m = ts.models.variants.make("mlp", data.batch.vocab_size, 8, seed=0, dtype=torch.float64)
    f = m.forward(data.batch)
    single = torch.cat([m.forward(data.batch.subset([i])) for i in range(data.batch.n)])
    assert torch.allclose(f, single, atol=1e-12)  # padding never leaks into the softmax
    seq = data.batch.sequence(0)
    q = torch.softmax(m.E[seq] @ m.p, 0)
    z = q @ m.E[seq]
    assert torch.allclose(f[0], m.v @ (m.W2 @ torch.relu(m.W1 @ z)), atol=1e-12)


def _loss_and_grads(m, f):
    loss = torch.nn.functional.softplus(-f).square().sum()  # any smooth function of every output
    return [loss.detach()] + list(torch.autograd.grad(loss, [m.E, m.p, m.W1, m.W2]))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_mlp_sparse_path_equals_padded_reference_with_gradients(seed):
    # repeated tokens (counts > 1), lengths 1..9, a vocabulary larger than the batch uses
    data = ts.synthetic.independent_tokens(40, 15, length=(2, 9), delta=0.8, seed=seed)
    seqs, labels = data.batch.to_lists() + [[7], [3, 3, 3]], data.batch.labels.tolist() + [1, -1]
    batch = ts.RaggedBatch.from_sequences(seqs, labels, vocab_size=19)
    m = ts.models.variants.make("mlp", 19, 6, seed=seed, dtype=torch.float64)
    for t in [m.E, m.p, *m.matrices.values()]:
        t.requires_grad_(True)
    m.p.data *= 5.0  # peaked attention
    sparse = _loss_and_grads(m, m.forward_prepared(*m.prepare(batch)))
    dense = _loss_and_grads(m, m.forward_reference(*ts.models.variants.padded(batch)))
    for a, b in zip(sparse, dense, strict=True):
        assert torch.allclose(a, b, atol=1e-12, rtol=1e-10), (a - b).abs().max()
    assert sparse[1][15:].abs().max() == 0  # unused tokens get no gradient


def test_two_layer_bfloat16_scores_stay_close_to_float32():
    data = ts.synthetic.independent_tokens(50, 30, length=(5, 20), delta=0.8, seed=3)
    m = ts.models.variants.make("two_layer_wkq", 30, 32, seed=0)
    ids, mask = ts.models.variants.padded(data.batch)
    f32 = m.forward_prepared(ids, mask)
    bf16 = m.forward_prepared(ids, mask, scores_dtype=torch.bfloat16)
    assert f32.dtype == bf16.dtype == torch.float32
    assert (f32 - bf16).abs().max() < 2e-2 * f32.abs().max()


def test_wkq_read_out_and_training_reduces_loss():
    data = ts.synthetic.independent_tokens(200, 30, length=10, delta=0.9, seed=0)
    for kind in ts.models.variants.KINDS:
        m = ts.models.variants.make(kind, 30, 12, seed=0, dtype=torch.float64)
        traj = ts.train_variant(m, data.batch, ts.TrainSettings(steps=40, lr=0.02, eval_every=20, progress=False))
        assert traj.loss[-1] < traj.loss[0] and not m.E.requires_grad
    m = ts.models.variants.make("two_layer_wkq", 30, 12, seed=0)
    assert torch.allclose(m.read_out(), m.p) and torch.allclose(m.scores(), m.E @ m.p)
    pytest.raises(InvalidParameterError, lambda: ts.models.variants.VariantModel.init(30, 12)).match("is the interface")
    assert {k: c.kind for k, c in ts.models.variants.MODELS.items()} == {k: k for k in ts.models.variants.KINDS}
    assert set(ts.models.variants.MLPHead.init(30, 4).matrices) == {"W1", "W2"}
    assert not ts.models.variants.TwoLayer.init(30, 4).matrices
    assert set(ts.models.variants.COMPARED) | set(ts.models.variants.MLP_PLACEMENTS) == set(ts.models.variants.KINDS)


def test_mlp_placements():
    """The MLP heads: residual adds v^T z, two of them move v, token values are the head's output at a lone token."""
    data = ts.synthetic.independent_tokens(100, 20, length=(3, 9), delta=0.9, seed=1)
    assert ts.models.variants.MLP_PLACEMENTS == ("mlp", "mlp_residual", "mlp_trained_v", "mlp_output")
    plain, res, tv, out = (
        ts.models.variants.make(k, 20, 8, seed=0, dtype=torch.float64) for k in ts.models.variants.MLP_PLACEMENTS
    )
    z = torch.randn(5, 8, dtype=torch.float64)
    assert torch.allclose(res.head(z), plain.head(z) + z @ plain.v)
    assert torch.allclose(out.head(z), torch.relu(z @ out.W1.T) @ out.v)
    assert set(out.matrices) == {"W1"} and torch.equal(out.W1, plain.W1)  # the same He draw for W1
    for m in (plain, out):
        assert torch.allclose(m.token_values(), m.head(m.E))
    two = ts.models.variants.make("two_layer", 20, 8, seed=0)
    assert torch.equal(two.token_values(), two.values())
    ids, mask = ts.models.variants.padded(data.batch)
    for m in (res, out):
        assert torch.allclose(m.forward(data.batch), m.forward_reference(ids, mask))
    v0 = tv.v.clone()
    for m in (plain, tv, out):
        ts.train_variant(m, data.batch, ts.TrainSettings(steps=5, lr=0.01, eval_every=5, progress=False))
    assert torch.equal(plain.v, v0) and not torch.equal(tv.v, v0) and not tv.v.requires_grad
    assert not torch.equal(out.v, v0) and not out.v.requires_grad


def test_mlp_output_sparse_path_has_the_reference_gradients():
    data = ts.synthetic.independent_tokens(40, 15, length=(2, 9), delta=0.8, seed=2)
    m = ts.models.variants.make("mlp_output", 15, 6, seed=1, dtype=torch.float64)
    params = [m.E, m.p, m.W1, m.v]
    for t in params:
        t.requires_grad_(True)
    m.p.data *= 5.0

    def grads(f):
        loss = torch.nn.functional.softplus(-f).square().sum()
        return [loss.detach(), *torch.autograd.grad(loss, params)]

    sparse = grads(m.forward_prepared(*m.prepare(data.batch)))
    dense = grads(m.forward_reference(*ts.models.variants.padded(data.batch)))
    for a, b in zip(sparse, dense, strict=True):
        assert torch.allclose(a, b, atol=1e-11)
