"""FusedAdam (tokensel.training.optimiser) against torch.optim.Adam(fused=True): the same updates bit for bit, the
same state dict, checkpoints of either loading into the other; its checks; no torch._dynamo import."""

import subprocess
import sys

import pytest
import torch

from tokensel.errors import InvalidParameterError
from tokensel.training.optimiser import FusedAdam


def _params(dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(7, 5, generator=g, dtype=torch.float64).to(dtype), torch.randn(5, generator=g).to(dtype)]


def _grads(step, dtype):
    g = torch.Generator().manual_seed(100 + step)
    return [
        torch.randn(7, 5, generator=g, dtype=torch.float64).to(dtype) * 10.0 ** (step % 3),
        torch.randn(5, generator=g).to(dtype),
    ]


def _run(opt, params, dtype, steps, start=0):
    for step in range(start, start + steps):
        for i, (p, gr) in enumerate(zip(params, _grads(step, dtype), strict=True)):
            p.grad = None if (i == 1 and step % 4 == 2) else gr  # a parameter that sits a step out
        opt.step()


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_the_same_updates_and_state_as_torchs_fused_adam(dtype):
    mine, theirs = _params(dtype), _params(dtype)
    a, b = FusedAdam(mine, 3e-3), torch.optim.Adam(theirs, lr=3e-3, fused=True)
    _run(a, mine, dtype, 9)
    _run(b, theirs, dtype, 9)
    for p, q in zip(mine, theirs, strict=True):
        assert torch.equal(p, q)
    sa, sb = a.state_dict(), b.state_dict()
    assert sa["param_groups"] == sb["param_groups"]
    assert set(sa["state"]) == set(sb["state"]) == {0, 1}
    for k in sa["state"]:
        assert list(sa["state"][k]) == list(sb["state"][k])
        for name, x in sa["state"][k].items():
            y = sb["state"][k][name]
            assert x.dtype == y.dtype and x.shape == y.shape and torch.equal(x, y), name


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_a_state_dict_of_either_carries_on_in_the_other(dtype):
    ref = _params(dtype)
    r = torch.optim.Adam(ref, lr=1e-2, fused=True)
    _run(r, ref, dtype, 10)
    for first, second in ((FusedAdam, "torch"), ("torch", FusedAdam)):
        ps = _params(dtype)
        o1 = FusedAdam(ps, 1e-2) if first is FusedAdam else torch.optim.Adam(ps, lr=1e-2, fused=True)
        _run(o1, ps, dtype, 6)
        qs = [p.detach().clone() for p in ps]
        o2 = FusedAdam(qs, 1e-2) if second is FusedAdam else torch.optim.Adam(qs, lr=1e-2, fused=True)
        o2.load_state_dict(o1.state_dict())
        _run(o2, qs, dtype, 4, start=6)
        for p, q in zip(qs, ref, strict=True):
            assert torch.equal(p, q)


def test_a_loaded_state_is_a_copy_and_a_state_dict_that_does_not_fit_changes_nothing():
    ps = _params(torch.float64)
    a = FusedAdam(ps, 1e-3)
    _run(a, ps, torch.float64, 2)
    saved = a.state_dict()
    qs = _params(torch.float64)
    b = FusedAdam(qs, 1e-3)
    b.load_state_dict(saved)
    saved["state"][0]["exp_avg"].add_(1.0)
    assert not torch.equal(b.state[qs[0]]["exp_avg"], saved["state"][0]["exp_avg"])
    before = b.state_dict()
    c = FusedAdam([qs[0]], 1e-3)
    for bad in (
        {"state": {}, "param_groups": []},
        {"state": {}, "param_groups": [{"params": [0]}]},
        {"state": {5: {}}, "param_groups": before["param_groups"]},
        {"state": {0: {"step": 1.0}}, "param_groups": before["param_groups"]},
    ):
        with pytest.raises(ValueError):
            b.load_state_dict(bad)
    with pytest.raises(ValueError):
        c.load_state_dict(before)  # two parameters into one
    assert b.state_dict()["param_groups"] == before["param_groups"]


def test_its_parameters_are_checked():
    """The loop's own optimiser trusts its caller's arguments, but not parameters it cannot update."""
    p = torch.zeros(3)
    with pytest.raises(InvalidParameterError, match="floating-point"):
        FusedAdam([torch.zeros(3, dtype=torch.int64)], 1e-3)
    with pytest.raises(InvalidParameterError, match="twice"):
        FusedAdam([p, p], 1e-3)


def test_training_with_it_does_not_import_torch_dynamo():
    code = (
        "import sys, torch\n"
        "from tokensel.training.optimiser import FusedAdam\n"
        "p = torch.zeros(4, requires_grad=True)\n"
        "o = FusedAdam([p], 0.1)\n"
        "p.grad = torch.ones(4)\n"
        "o.step(); o.load_state_dict(o.state_dict())\n"
        "assert float(p[0]) < 0, p\n"
        "print('torch._dynamo' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"
