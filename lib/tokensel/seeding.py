"""The one place where randomness and thread counts are set.

Every function of tokensel that draws random numbers takes a ``seed`` and builds its own
:class:`torch.Generator` through :func:`generator`, so results never depend on global state or
on the order in which chapters run. :func:`seed_everything` additionally fixes the global
generators of Python, NumPy and torch and the number of torch threads, for code that uses them.
"""

from __future__ import annotations

import os
import random

import numpy as np
import torch

DEFAULT_THREADS = int(os.environ.get("TOKENSEL_THREADS", "2"))


def seed_everything(seed: int = 0, threads: int | None = DEFAULT_THREADS) -> None:
    """Seed Python, NumPy and torch, and fix torch's intra-op thread count.

    A fixed thread count matters for bitwise determinism: the order of floating-point
    reductions in torch's CPU kernels depends on how work is split between threads.
    """
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed must be an int >= 0, got {seed!r}")
    if threads is not None and int(threads) < 1:
        raise ValueError(f"threads must be >= 1 (or None to leave torch's setting), got {threads!r}")
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)
    if threads is not None:
        torch.set_num_threads(int(threads))


def generator(seed: int, device: str | torch.device = "cpu") -> torch.Generator:
    """A fresh torch generator seeded with ``seed`` (an int; numpy ints are accepted)."""
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise TypeError(f"seed must be an int, got {type(seed).__name__}")
    g = torch.Generator(device=device)
    g.manual_seed(int(seed))
    return g


def rng(seed: int) -> np.random.Generator:
    """A fresh NumPy generator seeded with ``seed``."""
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise TypeError(f"seed must be an int, got {type(seed).__name__}")
    return np.random.default_rng(int(seed))
