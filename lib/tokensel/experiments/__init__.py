"""Experiments: the book's named recipes with their sizes (:mod:`.recipes`, re-exported here with the tables,
records, baseline and controls), chapter 04's phase diagram (:mod:`.phase`) and the theory chapters' runs."""

from . import baseline, controls, phase, recipes, records, tables, theory
from .baseline import Baseline, bow_features, logistic_baseline
from .controls import class_controls, class_shapes, mirror_twin, shape_controls, shuffled_control
from .recipes import (
    ETA_MULTIPLES,
    MODEL_NAMES,
    PAPER_D,
    SCALES,
    Fit,
    ImplicitBias,
    Run,
    Scale,
    check_kinds,
    compare_variants,
    fit_texts,
    implicit_bias_with_v,
    one_step_eta,
    one_step_multiclass,
    one_step_shifts,
    one_step_sweep,
    rating_classes,
    run_model,
    scale,
    train_all,
    train_frozen,
    train_full,
    train_multiclass,
    train_one_step_then_freeze,
    variant_batches,
)
from .records import read_runs, read_sweep, write_run, write_sweep
from .tables import ablation_table, bin_noise, summaries, value_noise, verdicts, word_table

__all__ = """
phase theory baseline controls class_shapes class_controls shape_controls shuffled_control mirror_twin PAPER_D
SCALES MODEL_NAMES Scale Run scale train_all train_full train_frozen one_step_eta train_one_step_then_freeze
ETA_MULTIPLES one_step_shifts one_step_sweep ImplicitBias implicit_bias_with_v Baseline bow_features
logistic_baseline ablation_table word_table write_sweep read_sweep rating_classes one_step_multiclass
train_multiclass variant_batches run_model compare_variants check_kinds Fit fit_texts summaries verdicts
bin_noise value_noise write_run read_runs
""".split()
