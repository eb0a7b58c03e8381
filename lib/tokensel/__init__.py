"""tokensel: the library behind the executable book on *Attention with Trained Embeddings Provably
Selects Important Tokens* (Wu, Shevchenko, Oymak, Mondelli, NeurIPS 2025).

Layers (each imports only those above it; ARCHITECTURE.md has the picture): configuration, errors and
validation; data (ragged batches, text, loaders); the model and its exact gradients; training (the one
Adam loop in :mod:`.loop`, phase-1/phase-2 training in :mod:`.training`, the variants); statistics and
the max-margin solvers; the named experiments (:mod:`.experiments`); the book's own tooling
(:mod:`.book`: claims, figures, HTML views, Sphinx extensions)."""

from . import (
    config,
    core,
    dense,
    experiments,
    grads,
    imdb_archive,
    loop,
    loss,
    manifest,
    mixing,
    phase,
    reviews,
    statistics,
    synthetic,
    text,
    training,
    variants,
)
from .book import checks, display, plots, replication
from .book.checks import check, end_chapter, start_chapter
from .data import RaggedBatch, labels_from_01
from .dense import att_svm_dense, att_svm_kq, normalized_gd
from .errors import (
    ClaimFailedError,
    DataUnavailableError,
    InfeasibleSVMError,
    InvalidBatchError,
    InvalidParameterError,
    TokenselError,
)
from .experiments import fit_texts
from .grads import Gradients, autograd_gradients, gradients, p_gradient
from .loaders import load_reviews
from .loop import Trajectory
from .maxmargin import SVMResult, find_cycle, max_margin, max_margin_for_selection, max_margin_scores, selection_pairs
from .model import AttentionModel, MultiClassAttentionModel
from .reviews import from_frame, prepare_texts
from .seeding import generator, rng, seed_everything
from .training import cosine, gradient_flow, one_step, train_joint, train_p
from .version import __version__  # noqa: F401 (the package version)

__all__ = [
    # modules
    "checks",
    "config",
    "core",
    "dense",
    "display",
    "experiments",
    "grads",
    "imdb_archive",
    "loop",
    "loss",
    "manifest",
    "mixing",
    "phase",
    "plots",
    "replication",
    "reviews",
    "statistics",
    "synthetic",
    "text",
    "training",
    "variants",
    # data and models
    "RaggedBatch",
    "labels_from_01",
    "load_reviews",
    "fit_texts",
    "from_frame",
    "prepare_texts",
    "AttentionModel",
    "MultiClassAttentionModel",
    # gradients and training
    "Gradients",
    "gradients",
    "p_gradient",
    "autograd_gradients",
    "Trajectory",
    "cosine",
    "gradient_flow",
    "one_step",
    "train_joint",
    "train_p",
    # max-margin
    "SVMResult",
    "find_cycle",
    "max_margin",
    "max_margin_for_selection",
    "max_margin_scores",
    "selection_pairs",
    # dense token features (the max-margin attention literature's notation)
    "att_svm_dense",
    "att_svm_kq",
    "normalized_gd",
    # seeding
    "generator",
    "rng",
    "seed_everything",
    # claims
    "check",
    "end_chapter",
    "start_chapter",
    # errors
    "ClaimFailedError",
    "DataUnavailableError",
    "InfeasibleSVMError",
    "InvalidBatchError",
    "InvalidParameterError",
    "TokenselError",
]
