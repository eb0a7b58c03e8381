"""tokensel: the library behind the executable book on *Attention with Trained Embeddings Provably
Selects Important Tokens* (Wu, Shevchenko, Oymak, Mondelli, NeurIPS 2025).

The map, lowest first (each folder imports only the folders above it):

* plumbing — :mod:`.errors`, :mod:`.config`, :mod:`.validation`, :mod:`.files`, :mod:`.seeding`, :mod:`.loss`;
* :mod:`.data` — ragged batches, text, the IMDB archive, loaders, prepared reviews, synthetic data;
* :mod:`.models` — the one-layer model, the variants, the fused kernels and the exact gradients;
* :mod:`.training` — the theory's phases, the one Adam loop and its settings;
* :mod:`.analysis` — token statistics, the two shapes, the max-margin problems;
* :mod:`.experiments` — the named recipes on real reviews, chapter 4's phase diagram.

The book's machinery (claims, figures, verification, replication) is the separate package ``tokensel_book``.
"""

from . import analysis, config, data, errors, experiments, loss, models, seeding, training, validation
from .analysis import maxmargin, shapes, statistics
from .analysis.dense import att_svm_dense, att_svm_kq, normalized_gd
from .analysis.maxmargin import (
    SVMResult,
    find_cycle,
    max_margin,
    max_margin_for_selection,
    max_margin_scores,
    selection_pairs,
    selection_ties,
)
from .data import reviews, synthetic
from .data.batch import RaggedBatch, labels_from_01
from .data.loaders import load_reviews
from .data.reviews import from_frame, prepare_texts
from .errors import (
    ArgumentTypeError,
    DataUnavailableError,
    InfeasibleSVMError,
    InvalidArgumentError,
    InvalidBatchError,  # the former names of InvalidArgumentError, for readers' code
    InvalidParameterError,
    TokenselError,
)
from .experiments import fit_texts
from .models.attention import AttentionModel, MultiClassAttentionModel
from .models.gradients import Gradients, autograd_gradients, gradients, p_gradient
from .seeding import generator, rng, seed_everything
from .training.loop import Trajectory
from .training.phases import cosine, gradient_flow, implicit_flow, one_step, train_joint, train_p, train_p_v
from .training.settings import TrainSettings
from .training.variants import train_variant
from .version import __version__  # noqa: F401 (the package version)

__all__ = [
    # the library's folders
    "data",
    "models",
    "training",
    "analysis",
    "experiments",
    # plumbing
    "config",
    "errors",
    "loss",
    "seeding",
    "validation",
    # modules the chapters call by name
    "maxmargin",
    "reviews",
    "shapes",
    "statistics",
    "synthetic",
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
    "TrainSettings",
    "Trajectory",
    "cosine",
    "gradient_flow",
    "implicit_flow",
    "one_step",
    "train_joint",
    "train_p",
    "train_p_v",
    "train_variant",
    # max-margin
    "SVMResult",
    "find_cycle",
    "max_margin",
    "max_margin_for_selection",
    "max_margin_scores",
    "selection_pairs",
    "selection_ties",
    # dense token features (the max-margin attention literature's notation)
    "att_svm_dense",
    "att_svm_kq",
    "normalized_gd",
    # seeding
    "generator",
    "rng",
    "seed_everything",
    # errors
    "ArgumentTypeError",
    "DataUnavailableError",
    "InfeasibleSVMError",
    "InvalidArgumentError",
    "TokenselError",
]
