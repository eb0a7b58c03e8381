"""tokensel: the library behind the executable book on *Attention with Trained Embeddings Provably
Selects Important Tokens* (Wu, Shevchenko, Oymak, Mondelli, NeurIPS 2025)."""

from . import (checks, config, core, display, imdb_archive, loss, manifest, mixing, plots, reviews, statistics, synthetic,
               text, variants)
from .checks import check, end_chapter, start_chapter
from .data import RaggedBatch, labels_from_01
from .errors import (ClaimFailedError, DataUnavailableError, InfeasibleSVMError, InvalidBatchError,
                     InvalidParameterError, TokenselError)
from .gradients import Gradients, autograd_gradients, gradients
from .loaders import load_reviews
from .maxmargin import (SVMResult, find_cycle, max_margin, max_margin_for_selection, max_margin_scores,
                        selection_pairs)
from .model import AttentionModel, MultiClassAttentionModel
from .seeding import generator, rng, seed_everything
from .training import Trajectory, cosine, gradient_flow, one_step, train_joint, train_p

__version__ = "0.1.0"

__all__ = [
    "AttentionModel", "MultiClassAttentionModel", "ClaimFailedError", "DataUnavailableError", "Gradients", "InfeasibleSVMError",
    "InvalidBatchError", "InvalidParameterError", "RaggedBatch", "SVMResult", "TokenselError",
    "Trajectory", "autograd_gradients", "check", "checks", "config", "core", "cosine", "end_chapter",
    "find_cycle", "generator", "imdb_archive", "loss", "manifest", "gradient_flow", "gradients", "labels_from_01", "load_reviews",
    "max_margin", "max_margin_for_selection", "max_margin_scores", "one_step", "plots", "rng", "seed_everything",
    "selection_pairs", "start_chapter", "statistics", "synthetic", "text", "train_joint", "train_p",
]
