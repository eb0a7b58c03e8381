"""train_variant: chunked accumulation, resumption after a kill, reproducibility."""

import numpy as np
import pytest
import torch
from conftest import train_args

import tokensel as ts
from tokensel.errors import CheckpointError


def test_chunked_accumulation_is_the_full_batch_gradient():
    data = ts.synthetic.independent_tokens(60, 20, length=(3, 9), delta=0.9, seed=3)
    a = ts.models.variants.make("two_layer_wkq", 20, 8, seed=0, dtype=torch.float64)
    b = ts.models.variants.make("two_layer_wkq", 20, 8, seed=0, dtype=torch.float64)
    ta = ts.train_variant(a, data.batch, ts.TrainSettings(steps=5, lr=0.01, eval_every=1, progress=False))
    tb = ts.train_variant(b, data.batch, ts.TrainSettings(steps=5, lr=0.01, eval_every=1, progress=False), chunk=7)
    assert np.allclose(ta.loss, tb.loss, atol=1e-12, rtol=0)
    assert torch.allclose(a.E, b.E, atol=1e-10) and torch.allclose(a.W2, b.W2, atol=1e-10)


def test_killed_variant_run_resumes_to_the_same_result(tmp_path, monkeypatch):
    data = ts.synthetic.independent_tokens(60, 20, length=8, delta=0.8, seed=1)
    kw = dict(steps=12, lr=0.01, eval_every=4, progress=False, chunk=25)
    fresh = lambda: ts.models.variants.make("two_layer_wkq", 20, 8, seed=0)  # noqa: E731
    whole = fresh()
    traj_whole = ts.train_variant(whole, data.batch, **train_args(**kw))

    ckpt = tmp_path / "variant.pt"
    real = ts.models.variants.TwoLayer.forward_prepared
    calls = {"n": 0}

    def dying(self, *a, **k):  # dies in the middle of step 7 (3 chunks a step)
        calls["n"] += 1
        if calls["n"] == 3 * 7 + 2:
            raise KeyboardInterrupt("killed")
        return real(self, *a, **k)

    monkeypatch.setattr(ts.models.variants.TwoLayer, "forward_prepared", dying)
    with pytest.raises(KeyboardInterrupt):
        ts.train_variant(fresh(), data.batch, **train_args(checkpoint=ckpt, checkpoint_every=5, **kw))
    monkeypatch.setattr(ts.models.variants.TwoLayer, "forward_prepared", real)
    resumed = fresh()
    traj = ts.train_variant(resumed, data.batch, **train_args(checkpoint=ckpt, checkpoint_every=5, **kw))
    params = lambda m: [m.E, m.p, *(m.matrices[k] for k in whole.matrices)]  # noqa: E731
    assert all(torch.equal(a, b) for a, b in zip(params(resumed), params(whole), strict=True))
    assert traj.step == traj_whole.step and traj.loss == traj_whole.loss
    with pytest.raises(CheckpointError, match="belongs to another run"):
        ts.train_variant(fresh(), data.batch, **train_args(checkpoint=ckpt, **dict(kw, lr=0.02)))


@pytest.mark.parametrize("kind", ts.models.variants.KINDS)
def test_variant_training_is_bitwise_reproducible(kind):
    # no reduction whose order varies (as index_put's backward does on the CPU), at a size the kernels split
    data = ts.synthetic.independent_tokens(1500, 300, length=(40, 80), delta=0.8, seed=2)
    runs = []
    for _ in range(2):
        m = ts.models.variants.make(kind, 300, 16, seed=0)
        ts.train_variant(m, data.batch, ts.TrainSettings(steps=3, lr=0.01, eval_every=3, progress=False))
        runs.append([m.E, m.p, *m.matrices.values()])
    for a, b in zip(*runs, strict=True):
        assert torch.equal(a, b)
