"""Experiments: the book's named recipes, with their sizes.

* :mod:`.recipes` — the real-data recipes of chapters 6 and 7 (and a reader's own texts).
* :mod:`.tables` — the verdict and noise tables of a comparison of models.
* :mod:`.records` — runs written to and read back from a folder (the recorded paper-scale runs).
* :mod:`.phase` — chapter 4's phase diagram, run by run.
* ``theory`` — the theory chapters' runs on synthetic data (chapters 1 and 2: tables and sweeps).

The recipes, tables and records are re-exported here: ``tokensel.experiments.train_full`` and so on.
"""

from . import phase, theory
from .recipes import (
    MODEL_NAMES,
    PAPER_D,
    SCALES,
    Fit,
    Run,
    Scale,
    check_kinds,
    compare_variants,
    fit_texts,
    one_step_eta,
    one_step_multiclass,
    rating_classes,
    run_model,
    scale,
    train_frozen,
    train_full,
    train_multiclass,
    train_one_step_then_freeze,
    variant_batches,
)
from .records import read_runs, write_run
from .tables import value_noise, verdicts

__all__ = [
    "phase",
    "theory",
    "PAPER_D",
    "SCALES",
    "MODEL_NAMES",
    "Scale",
    "Run",
    "scale",
    "train_full",
    "train_frozen",
    "one_step_eta",
    "train_one_step_then_freeze",
    "rating_classes",
    "one_step_multiclass",
    "train_multiclass",
    "variant_batches",
    "run_model",
    "compare_variants",
    "check_kinds",
    "Fit",
    "fit_texts",
    "verdicts",
    "value_noise",
    "write_run",
    "read_runs",
]
