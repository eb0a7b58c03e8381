"""The logistic loss of a margin, written once: ``l(m) = log(1 + exp(-m))`` for ``m = y f``, and its
slope ``l'(m) = -sigmoid(-m)``. Every loss of the library, the benchmarks and the chapters is one of these,
summed or averaged by its caller (the caller's reduction keeps its order of summation)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from .validation import Tensor, declare

_MARGIN = Tensor("float", half=True)


@declare(margin=_MARGIN)
def logistic(margin: torch.Tensor) -> torch.Tensor:
    """``log(1 + exp(-m))`` elementwise, computed without overflow (softplus of ``-m``)."""
    return F.softplus(-margin)


@declare(margin=_MARGIN)
def logistic_slope(margin: torch.Tensor) -> torch.Tensor:
    """The derivative ``l'(m) = -sigmoid(-m)`` elementwise (in ``(-1, 0)``). Introduced in chapter 02."""
    return -torch.sigmoid(-margin)


@declare(f=_MARGIN, y=_MARGIN)
def mean_logistic(f: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """The empirical risk ``(1/n) sum_i l(y_i f_i)``."""
    return logistic(y * f).mean()
