"""The logistic loss and its slope, the one place the library writes them."""

import torch

import tokensel as ts


def test_logistic_loss_value_slope_and_range():
    m = torch.linspace(-30, 30, 121, dtype=torch.float64, requires_grad=True)
    value = ts.loss.logistic(m)
    # torch's softplus returns -m itself once -m > 20, dropping exp(m) <= 2e-9: a relative error below 1e-10
    assert torch.allclose(value, torch.log1p(torch.exp(-m)), rtol=1e-10, atol=0)
    (grad,) = torch.autograd.grad(value.sum(), m)
    slope = ts.loss.logistic_slope(m.detach())
    assert torch.allclose(slope, -1 / (1 + torch.exp(m.detach())), rtol=1e-14, atol=0)
    # autograd of softplus: -1 exactly once -m > 20 (error e^m < 3e-9)
    assert torch.allclose(slope, grad, rtol=1e-8, atol=0)
    assert float(ts.loss.logistic(torch.tensor(-1000.0, dtype=torch.float64))) == 1000.0  # no overflow
    assert float(ts.loss.logistic(torch.tensor(1000.0, dtype=torch.float64))) == 0.0
    f, y = torch.tensor([2.0, -1.0, 0.5]), torch.tensor([1.0, 1.0, -1.0])
    assert torch.equal(ts.loss.mean_logistic(f, y), ts.loss.logistic(y * f).mean())
    assert torch.equal(ts.models.core.logistic_loss(f, y), ts.loss.mean_logistic(f, y))
