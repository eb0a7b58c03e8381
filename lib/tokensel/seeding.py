"""The one place where randomness and thread counts are set: every function that draws takes a ``seed`` and
builds its own generator (:func:`generator`, :func:`rng`), so results never depend on global state or on the
order in which chapters run; :func:`seed_everything` fixes the global ones for code that uses them."""

from __future__ import annotations

import random
from typing import cast

import numpy as np
import torch

from . import config
from .validation import Device, Int, declare

_FROM_CONFIG = object()


@declare(seed=Int(min=0), threads=Int(min=1, max=4096, allow_none=True))
def seed_everything(seed: int = 0, threads: int | None | object = _FROM_CONFIG) -> None:
    """Seed Python, NumPy and torch, and fix torch's thread count (default ``TOKENSEL_THREADS`` or 2; None leaves
    it): the order of torch's CPU reductions depends on how work is split between threads. Introduced in chapter 01."""
    if threads is _FROM_CONFIG:
        threads = config.threads()
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)
    if threads is not None:
        torch.set_num_threads(cast(int, threads))  # an int in 1..4096 (the declaration, or config)


@declare(seed=Int(min=0), device=Device())
def generator(seed: int, device: str | torch.device = "cpu") -> torch.Generator:
    """A fresh torch generator seeded with ``seed``."""
    g = torch.Generator(device=device)
    g.manual_seed(seed)
    return g


@declare(seed=Int(min=0))
def rng(seed: int) -> np.random.Generator:
    """A fresh NumPy generator seeded with ``seed``."""
    return np.random.default_rng(seed)
