"""tokensel.seeding: the one seeding helper and fresh generators."""

import random

import numpy as np
import torch

import tokensel as ts


def test_seed_everything_repeats_every_generator_and_fixes_threads(monkeypatch):
    before = torch.get_num_threads()
    try:
        ts.seed_everything(3, threads=1)
        first = (random.random(), np.random.rand(), torch.rand(2))
        assert torch.get_num_threads() == 1
        ts.seed_everything(3, threads=None)  # None: threads left as they are
        again = (random.random(), np.random.rand(), torch.rand(2))
        assert first[:2] == again[:2] and torch.equal(first[2], again[2]) and torch.get_num_threads() == 1
        monkeypatch.setenv("TOKENSEL_THREADS", "2")
        ts.seed_everything(0)  # default: TOKENSEL_THREADS, read when called
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)


def test_fresh_generators_do_not_share_state():
    a, b = ts.generator(5), ts.generator(5)
    assert torch.equal(torch.randn(3, generator=a), torch.randn(3, generator=b))
    assert ts.rng(np.int64(7)).integers(100) == ts.rng(7).integers(100)
