"""Compile the library's numba kernels into numba's on-disk cache, so that no later process pays for it.

A fresh install compiles each kernel the first time a process calls it (several seconds to a minute per kernel
and type, about two minutes of one core in all), and in a parallel test run two processes may compile the same
kernel at once. This script calls every kernel once, through the library's public functions, in float64 and
float32, with batches below and above ``tokensel.models.kernels.SERIAL_BELOW`` entries (the serial and the
threaded paths), and reports what numba's cache holds. CI runs it beside the data step and the lint; ``make book``
runs it beside the book's first chapters (which use one core for most of their time), so that the real-data
chapters find the kernels compiled.

    python scripts/compile_kernels.py [one-layer | two-layer | book]

With a part named, only that part's kernels: the one-layer models' or the two-layer variants'. CI compiles the two
parts in two processes, beside the data step and the lint. ``book`` compiles what the book's pages call, in the order
they first need it: the one-layer kernels in float64 (chapters 1-5) and float32 (chapters 6 and 7), then the two-layer
ones in float32 (chapter 7; their float64 twins, about 15 s of one core, serve the tests only and would run beside
chapter 6).
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

VOCAB, D, K = 40, 8, 4
#: sequences in the small batch (serial path) and the large one (more than SERIAL_BELOW distinct entries)
SIZES = (60, 6000)
#: the width of a large E (more than SERIAL_E_BELOW entries: the threaded products with E)
WIDE = 2048
#: (sequences, width) of each dtype's calls, in the order the chapters first need them: a small batch with a large E
#: (chapter 2: the threaded products with E; chapter 1 compiles the serial ones itself), a large batch (the real
#: data), then small batches with a small E (the serial products), its width a multiple of 16 (E [p, V] in lane
#: sums, as every page's width is) and not (the two-rows loop), then a large E of a width not a multiple of 16
CASES = ((SIZES[0], WIDE), (SIZES[1], WIDE), (SIZES[0], 2 * 16), (SIZES[0], D), (SIZES[0], WIDE - 1))


def _batch(n: int, num_classes: int | None) -> ts.RaggedBatch:
    g = np.random.default_rng(n)
    seqs = [g.integers(0, VOCAB, size=g.integers(1, 31)) for _ in range(n)]
    y = g.choice([-1, 1], size=n) if num_classes is None else g.integers(0, num_classes, size=n)
    return ts.RaggedBatch.from_sequences(seqs, y, vocab_size=VOCAB, num_classes=num_classes)


PARTS = ("one-layer", "two-layer")
#: what the book's pages call, (part, dtype) in the order they first need it
BOOK = (("one-layer", torch.float64), ("one-layer", torch.float32), ("two-layer", torch.float32))


def compile_all(
    parts: tuple[str, ...] = PARTS, dtypes: tuple[torch.dtype, ...] = (torch.float64, torch.float32)
) -> list[str]:
    """Call every kernel of ``parts`` once per dtype and path; the (function, dtype, size) calls made, in order: the
    one-layer models' first, float64 before float32 and each in the order of :data:`CASES`, then the two-layer
    variants', the order in which the book's chapters first need them (``make book`` runs this beside its first
    chapters)."""
    done = []
    settings = ts.TrainSettings(steps=2, eval_every=1, progress=False)
    cases = [(dtype, n, d) for dtype in dtypes for n, d in CASES]
    if "one-layer" in parts:
        for dtype, n, d in cases:
            binary, multiclass = _batch(n, None), _batch(n, K)
            name = f"{str(dtype).split('.')[-1]}, n={n}, d={d}"
            model = ts.AttentionModel.init(VOCAB, d, seed=0, dtype=dtype)
            ts.gradients(model, binary).E  # noqa: B018 (grad_E formed: the low-rank product)
            with torch.no_grad():
                model.forward(binary)
            ts.train_joint(model, binary, settings, test_batch=binary)  # Adam's kernel, the evaluation pass
            done.append(f"binary model ({name})")
            model = ts.MultiClassAttentionModel.init(VOCAB, d, K, seed=0, dtype=dtype)
            ts.gradients(model, multiclass).E  # noqa: B018
            with torch.no_grad():
                model.forward(multiclass)
            ts.train_joint(model, multiclass, settings, test_batch=multiclass)
            done.append(f"K-class model ({name})")
            if (n, d) == CASES[0]:  # grad_E written by non-temporal stores (a large grad_E; here asked for)
                rows = torch.empty(VOCAB, 16, dtype=dtype).numpy()  # rows of 64 or 128 bytes, aligned
                kernels.low_rank_product(
                    np.ones((VOCAB, 2), rows.dtype), np.ones((2, rows.shape[1]), rows.dtype), rows, stream=True
                )
                done.append(f"grad_E streamed ({name})")
    if "two-layer" in parts:
        for dtype, n in [(dtype, n) for dtype in dtypes for n in SIZES]:
            binary = _batch(n, None)
            name = f"{str(dtype).split('.')[-1]}, n={n}"
            for kind in ("two_layer", "two_layer_wkq"):
                variant = ts.models.variants.make(kind, VOCAB, D, seed=0, dtype=dtype)
                ts.train_variant(variant, binary, settings, test_batch=binary)
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
