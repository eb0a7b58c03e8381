import os
from pathlib import Path

import numpy as np
import pytest
import torch

import tokensel as ts

ts.seed_everything(0)
ROOT = Path(__file__).resolve().parents[1]


def shared_data_dir():
    """The real data directory: $TOKENSEL_DATA_DIR, else ../shared/data beside the checkout."""
    env = os.environ.get("TOKENSEL_DATA_DIR")
    if env:
        return Path(env)
    guess = ROOT.parent / "shared" / "data"
    return guess if guess.is_dir() else None


@pytest.fixture(autouse=True)
def _results_dir(tmp_path, monkeypatch):
    # checks recorded by tests never touch the book's results
    monkeypatch.setenv("TOKENSEL_RESULTS_DIR", str(tmp_path / "checks"))


@pytest.fixture
def small():
    data = ts.synthetic.assumption1_pairs(40, 3, 15, length=(3, 9), seed=3)
    model = ts.AttentionModel.init(data.batch.vocab_size, 12, seed=1)
    return data, model


def random_batch(seed, n=7, vocab=11, max_len=6, labels="binary"):
    g = np.random.default_rng(seed)
    seqs = [g.integers(0, vocab, size=g.integers(1, max_len + 1)) for _ in range(n)]
    y = g.choice([-1, 1], size=n)
    return ts.RaggedBatch.from_sequences(seqs, y, vocab_size=vocab)
