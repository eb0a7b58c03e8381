"""Compile the library's numba kernels into numba's on-disk cache, so that no later process pays for it.

A fresh install compiles each kernel the first time a process calls it, and in a parallel test run two processes may
compile the same kernel at once. This script calls every kernel once per dtype through the library's public functions.
CI runs it beside the data step and the lint; ``make book`` beside the book's first chapters.

    python scripts/compile_kernels.py [one-layer | two-layer | book]

A part named compiles only its kernels (CI compiles the two parts in two processes); ``book`` compiles what the pages
call, in the order they first need it: the one-layer kernels in float64 (chapters 1-5) and float32 (chapters 6 and
7), then the two-layer ones in float32 (chapter 7).
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import numpy as np
import torch

import tokensel as ts
from tokensel.models import kernels

VOCAB, D, K, N = 40, 8, 4, 60


def _batch(num_classes: int | None) -> ts.RaggedBatch:
    g = np.random.default_rng(0)
    seqs = [g.integers(0, VOCAB, size=g.integers(1, 31)) for _ in range(N)]
    y = g.choice([-1, 1], size=N) if num_classes is None else g.integers(0, num_classes, size=N)
    return ts.RaggedBatch.from_sequences(seqs, y, vocab_size=VOCAB, num_classes=num_classes)


PARTS = ("one-layer", "two-layer")
#: what the book's pages call, (part, dtype) in the order they first need it
BOOK = (("one-layer", torch.float64), ("one-layer", torch.float32), ("two-layer", torch.float32))


def compile_all(
    parts: tuple[str, ...] = PARTS, dtypes: tuple[torch.dtype, ...] = (torch.float64, torch.float32)
) -> list[str]:
    """Call every kernel of ``parts`` once per dtype; returns the calls made, in order."""
    done = []
    settings = ts.TrainSettings(steps=2, eval_every=1, progress=False)
    for dtype in dtypes:
        name = str(dtype).split(".")[-1]
        if "one-layer" in parts:
            for model, batch in (
                (ts.AttentionModel.init(VOCAB, D, seed=0, dtype=dtype), _batch(None)),
                (ts.MultiClassAttentionModel.init(VOCAB, D, K, seed=0, dtype=dtype), _batch(K)),
            ):
                ts.gradients(model, batch)
                ts.train_joint(model, batch, settings, test_batch=batch)  # Adam's kernel, the evaluation pass
                done.append(f"{type(model).__name__} ({name})")
        if "two-layer" in parts:
            for kind in ("two_layer", "two_layer_wkq"):
                variant = ts.models.variants.make(kind, VOCAB, D, seed=0, dtype=dtype)
                ts.train_variant(variant, _batch(None), settings, test_batch=_batch(None))
                done.append(f"{kind} ({name})")
    return done


def main() -> None:
    parts = tuple(sys.argv[1:]) or PARTS
    if parts != ("book",) and not set(parts) <= set(PARTS):
        raise SystemExit(f"compile_kernels.py: parts are {', '.join(PARTS)} and book; got {' '.join(parts)}")
    t0 = time.perf_counter()
    if parts == ("book",):
        done = [call for part, dtype in BOOK for call in compile_all((part,), (dtype,))]
    else:
        done = compile_all(parts)
    cache = os.environ.get("NUMBA_CACHE_DIR") or Path(kernels.__file__).parent / "__pycache__"
    took = time.perf_counter() - t0
    print(f"compiled kernels ({', '.join(parts)}): {len(done)} calls in {took:.0f} s; numba's cache: {cache}")


if __name__ == "__main__":
    main()
