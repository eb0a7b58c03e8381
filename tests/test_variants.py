"""The model variants: padding, equivalences with the one-layer model, training."""

import numpy as np
import pytest
import torch

import tokensel as ts
from tokensel.errors import CheckpointError, InvalidParameterError


def test_padded_layout():
    b = ts.RaggedBatch.from_sequences([[3, 1], [2], [0, 1, 2]], [1, -1, 1], vocab_size=4)
    ids, mask = ts.variants.padded(b)
    assert ids.tolist() == [[3, 1, 0], [2, 0, 0], [0, 1, 2]]
    assert mask.sum(1).tolist() == [2, 1, 3]


def test_two_layer_with_zero_first_layer_matches_reference():
    # with E = 0 in layer one's keys nothing changes: check the forward against a direct loop
    data = ts.synthetic.assumption1_pairs(6, 2, 5, length=(3, 6), seed=0)
    m = ts.variants.VariantModel.init("two_layer", data.batch.vocab_size, 8, seed=0, dtype=torch.float64)
    f = m.forward(data.batch)
    for i, seq in enumerate(data.batch.to_lists()):
        X = m.E[seq]
        H = X + torch.softmax(X @ X.T / 8**0.5, dim=1) @ X
        q = torch.softmax(H @ m.p, 0)
        assert torch.allclose(f[i], q @ (H @ m.v), atol=1e-12)


def test_mlp_variant_reference_and_padding_invariance():
    data = ts.synthetic.assumption1_pairs(6, 2, 5, length=(3, 6), seed=1)
    m = ts.variants.VariantModel.init("mlp", data.batch.vocab_size, 8, seed=0, dtype=torch.float64)
    f = m.forward(data.batch)
    single = torch.cat([m.forward(data.batch.subset([i])) for i in range(data.batch.n)])
    assert torch.allclose(f, single, atol=1e-12)  # padding never leaks into the softmax
    seq = data.batch.sequence(0)
    q = torch.softmax(m.E[seq] @ m.p, 0)
    z = q @ m.E[seq]
    assert torch.allclose(f[0], m.v @ (m.extra["W2"] @ torch.relu(m.extra["W1"] @ z)), atol=1e-12)


def _loss_and_grads(m, f):
    loss = torch.nn.functional.softplus(-f).square().sum()  # any smooth function of every output
    return [loss.detach()] + list(torch.autograd.grad(loss, [m.E, m.p, m.extra["W1"], m.extra["W2"]]))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_mlp_sparse_path_equals_padded_reference_with_gradients(seed):
    # repeated tokens (counts > 1), lengths 1..9, a vocabulary larger than the batch uses
    data = ts.synthetic.independent_tokens(40, 15, length=(2, 9), delta=0.8, seed=seed)
    batch = ts.RaggedBatch.from_sequences(data.batch.to_lists() + [[7], [3, 3, 3]],
                                          data.batch.labels.tolist() + [1, -1], vocab_size=19)
    m = ts.variants.VariantModel.init("mlp", 19, 6, seed=seed, dtype=torch.float64)
    for t in [m.E, m.p, *m.extra.values()]:
        t.requires_grad_(True)
    m.p.data *= 5.0  # peaked attention
    sparse = _loss_and_grads(m, m.forward_prepared(*m.prepare(batch)))
    dense = _loss_and_grads(m, m.forward_reference(*ts.variants.padded(batch)))
    for a, b in zip(sparse, dense):
        assert torch.allclose(a, b, atol=1e-12, rtol=1e-10), (a - b).abs().max()
    assert sparse[1][15:].abs().max() == 0  # unused tokens get no gradient


@pytest.mark.parametrize("kind", ["two_layer", "two_layer_wkq"])
@pytest.mark.parametrize("seed", [0, 1])
def test_two_layer_fast_path_equals_the_written_model_with_gradients(kind, seed):
    """forward_padded never forms H and applies W1 to E once; in float64 it equals forward_reference."""
    data = ts.synthetic.independent_tokens(30, 15, length=(2, 9), delta=0.8, seed=seed)
    batch = ts.RaggedBatch.from_sequences(data.batch.to_lists() + [[7], [3, 3, 3]],
                                          data.batch.labels.tolist() + [1, -1], vocab_size=19)
    m = ts.variants.VariantModel.init(kind, 19, 6, seed=seed, dtype=torch.float64)
    g = torch.Generator().manual_seed(seed)
    for w in m.extra.values():  # away from the identity start, so W1 and W2 matter
        w.add_(0.3 * torch.randn(w.shape, generator=g, dtype=torch.float64))
    params = [m.E, m.p, *m.extra.values()]
    for t in params:
        t.requires_grad_(True)
    m.p.data *= 4.0
    ids, mask = ts.variants.padded(batch)

    def grads(f):
        loss = torch.nn.functional.softplus(-f).square().sum()
        return [loss.detach()] + list(torch.autograd.grad(loss, params))

    for a, b in zip(grads(m.forward_padded(ids, mask)), grads(m.forward_reference(ids, mask))):
        assert torch.allclose(a, b, atol=1e-12, rtol=1e-10), (a - b).abs().max()


def test_two_layer_bfloat16_scores_stay_close_to_float32():
    data = ts.synthetic.independent_tokens(50, 30, length=(5, 20), delta=0.8, seed=3)
    m = ts.variants.VariantModel.init("two_layer_wkq", 30, 32, seed=0)
    ids, mask = ts.variants.padded(data.batch)
    f32 = m.forward_padded(ids, mask)
    bf16 = m.forward_padded(ids, mask, scores_dtype=torch.bfloat16)
    assert f32.dtype == bf16.dtype == torch.float32
    assert (f32 - bf16).abs().max() < 2e-2 * f32.abs().max()
    with pytest.raises(InvalidParameterError, match="scores_dtype"):
        m.forward_padded(ids, mask, scores_dtype=torch.float16)


def test_mix_gradients_by_finite_differences():
    data = ts.synthetic.independent_tokens(12, 9, length=(2, 6), delta=0.8, seed=4)
    plan = ts.mixing.MixPlan(data.batch)
    g = torch.Generator().manual_seed(0)
    E = torch.randn(9, 4, generator=g, dtype=torch.float64, requires_grad=True)
    q = torch.rand(len(plan.entries.ids), generator=g, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda q, E: ts.mixing.mix(q, E, plan), (q, E))


def test_entry_attention_is_the_occurrence_softmax():
    data = ts.synthetic.independent_tokens(10, 6, length=(2, 8), delta=0.8, seed=5)
    batch = ts.RaggedBatch.from_sequences(data.batch.to_lists() + [[5]], data.batch.labels.tolist() + [1],
                                          vocab_size=6)
    plan = ts.mixing.MixPlan(batch)
    c = torch.linspace(-3, 40, 6, dtype=torch.float64)  # large scores: the shift must be per sequence
    q = ts.mixing.entry_attention(c, plan)
    occ, _ = ts.core.segment_softmax(c[batch.ids], batch)
    per_entry = torch.zeros(11, 6, dtype=torch.float64).index_put_((batch.seg, batch.ids), occ, accumulate=True)
    assert torch.allclose(q, per_entry[plan.entries.seg, plan.entries.ids], atol=1e-15)


def test_wkq_effective_p_and_training_reduces_loss():
    data = ts.synthetic.independent_tokens(200, 30, length=10, delta=0.9, seed=0)
    for kind in ts.variants.KINDS:
        m = ts.variants.VariantModel.init(kind, 30, 12, seed=0, dtype=torch.float64)
        traj = ts.variants.train_variant(m, data.batch, steps=40, lr=0.02, eval_every=20, progress=False)
        assert traj.loss[-1] < traj.loss[0] and not m.E.requires_grad
    m = ts.variants.VariantModel.init("two_layer_wkq", 30, 12, seed=0)
    assert torch.allclose(m.effective_p(), m.p) and torch.allclose(m.scores(), m.E @ m.p)
    with pytest.raises(InvalidParameterError, match="kind"):
        ts.variants.VariantModel.init("transformer", 30, 12)
    with pytest.raises(InvalidParameterError, match="MLP head's path"):
        m.forward_entries(data.batch, ts.mixing.MixPlan(data.batch))


def test_chunked_accumulation_is_the_full_batch_gradient():
    data = ts.synthetic.independent_tokens(60, 20, length=(3, 9), delta=0.9, seed=3)
    a = ts.variants.VariantModel.init("two_layer_wkq", 20, 8, seed=0, dtype=torch.float64)
    b = ts.variants.VariantModel.init("two_layer_wkq", 20, 8, seed=0, dtype=torch.float64)
    ta = ts.variants.train_variant(a, data.batch, steps=5, lr=0.01, eval_every=1, progress=False)
    tb = ts.variants.train_variant(b, data.batch, steps=5, lr=0.01, eval_every=1, progress=False, chunk=7)
    assert np.allclose(ta.loss, tb.loss, atol=1e-12, rtol=0)
    assert torch.allclose(a.E, b.E, atol=1e-10) and torch.allclose(a.extra["W2"], b.extra["W2"], atol=1e-10)


def test_read_paper_scale_round_trip_and_errors(tmp_path):
    import json

    import pandas as pd

    gap = torch.linspace(-0.9, 0.9, 200, dtype=torch.float64)
    bp, bv, u, rho = ts.statistics.shape_summary(gap, gap.abs(), gap)
    bp.assign(mean_v=bv["mean"], std_v=bv["std"]).to_csv(tmp_path / "bins_two_layer.csv", index=False)
    (tmp_path / "summary_two_layer.json").write_text(json.dumps({"test_acc": 0.5, "u_gap": u, "spearman_v": rho}))
    summary, bins = ts.variants.read_paper_scale(tmp_path)
    assert list(summary.index) == ["two layers"] and summary.loc["two layers", "test_acc"] == 0.5
    got_p, got_v = bins["two layers"]
    pd.testing.assert_series_equal(got_v["mean"], bv["mean"], check_names=False)
    pd.testing.assert_series_equal(got_p["mean"], bp["mean"], check_names=False)
    with pytest.raises(FileNotFoundError, match="no recorded runs"):
        ts.variants.read_paper_scale(tmp_path / "absent")
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(FileNotFoundError, match="summary_<kind>.json"):
        ts.variants.read_paper_scale(empty)


def test_killed_variant_run_resumes_to_the_same_result(tmp_path, monkeypatch):
    data = ts.synthetic.independent_tokens(60, 20, length=8, delta=0.8, seed=1)
    kw = dict(steps=12, lr=0.01, eval_every=4, progress=False, chunk=25)
    whole = ts.variants.VariantModel.init("two_layer_wkq", 20, 8, seed=0)
    traj_whole = ts.variants.train_variant(whole, data.batch, **kw)

    ckpt = tmp_path / "variant.pt"
    real = ts.variants.VariantModel.forward_padded
    calls = {"n": 0}

    def dying(self, *a, **k):  # dies in the middle of step 7 (3 chunks a step)
        calls["n"] += 1
        if calls["n"] == 3 * 7 + 2:
            raise KeyboardInterrupt("killed")
        return real(self, *a, **k)

    monkeypatch.setattr(ts.variants.VariantModel, "forward_padded", dying)
    with pytest.raises(KeyboardInterrupt):
        ts.variants.train_variant(ts.variants.VariantModel.init("two_layer_wkq", 20, 8, seed=0), data.batch,
                                  checkpoint=ckpt, checkpoint_every=5, **kw)
    monkeypatch.setattr(ts.variants.VariantModel, "forward_padded", real)
    resumed = ts.variants.VariantModel.init("two_layer_wkq", 20, 8, seed=0)
    traj = ts.variants.train_variant(resumed, data.batch, checkpoint=ckpt, checkpoint_every=5, **kw)
    for a, b in [(resumed.E, whole.E), (resumed.p, whole.p)] + [(resumed.extra[k], whole.extra[k]) for k in whole.extra]:
        assert torch.equal(a, b)
    assert traj.step == traj_whole.step and traj.loss == traj_whole.loss
    with pytest.raises(CheckpointError, match="belongs to another run"):
        ts.variants.train_variant(ts.variants.VariantModel.init("two_layer_wkq", 20, 8, seed=0), data.batch,
                                  checkpoint=ckpt, **dict(kw, lr=0.02))


@pytest.mark.parametrize("kind", ts.variants.KINDS)
def test_variant_training_is_bitwise_reproducible(kind):
    # the same run twice gives the same bits: no reduction whose order varies between runs (the
    # backward of plain indexing, index_put with accumulation, is one on the CPU)
    # (large enough for the CPU kernels to split their work between threads)
    data = ts.synthetic.independent_tokens(1500, 300, length=(40, 80), delta=0.8, seed=2)
    runs = []
    for _ in range(2):
        m = ts.variants.VariantModel.init(kind, 300, 16, seed=0)
        ts.variants.train_variant(m, data.batch, steps=3, lr=0.01, eval_every=3, progress=False)
        runs.append([m.E, m.p, *m.extra.values()])
    for a, b in zip(*runs):
        assert torch.equal(a, b)
