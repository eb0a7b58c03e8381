"""FusedAdam (tokensel.training.optimiser) against torch.optim.Adam(fused=True): the same updates and state bit for bit,
its state carried on through state_dict, and no torch._dynamo import (the reason it exists)."""

import subprocess
import sys

import pytest
import torch

from tokensel.training.optimiser import FusedAdam


def _params(dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(7, 5, generator=g, dtype=torch.float64).to(dtype), torch.randn(5, generator=g).to(dtype)]


def _run(opt, params, dtype, steps, start=0):
    for step in range(start, start + steps):
        g = torch.Generator().manual_seed(100 + step)
        grads = [torch.randn(7, 5, generator=g, dtype=torch.float64) * 10.0 ** (step % 3), torch.randn(5, generator=g)]
        for i, (p, gr) in enumerate(zip(params, grads, strict=True)):
            p.grad = None if (i == 1 and step % 4 == 2) else gr.to(dtype)  # a parameter that sits a step out
        opt.step()


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_the_same_updates_and_state_as_torchs_fused_adam_and_a_state_that_carries_on(dtype):
    mine, theirs = _params(dtype), _params(dtype)
    a, b = FusedAdam(mine, 3e-3), torch.optim.Adam(theirs, lr=3e-3, fused=True)
    _run(a, mine, dtype, 6)
    _run(b, theirs, dtype, 6)
    for p, q in zip(mine, theirs, strict=True):
        assert torch.equal(p, q)
        for name, x in b.state[q].items():
            assert x.dtype == a.state[p][name].dtype and torch.equal(x, a.state[p][name]), name
    resumed = [p.clone() for p in mine]
    c = FusedAdam(resumed, 3e-3)
    c.load_state_dict(a.state_dict())
    _run(c, resumed, dtype, 4, start=6)
    _run(b, theirs, dtype, 4, start=6)
    assert all(torch.equal(p, q) for p, q in zip(resumed, theirs, strict=True))


def test_training_with_it_does_not_import_torch_dynamo():
    code = (
        "import sys, torch\n"
        "import tokensel as ts\n"
        "batch = ts.synthetic.independent_tokens(40, 12, length=5, delta=0.8, seed=1).batch\n"
        "ts.train_joint(ts.AttentionModel.init(12, 4, seed=0), batch, ts.TrainSettings(steps=3, progress=False))\n"
        "print('torch._dynamo' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip().splitlines()[-1] == "False"
