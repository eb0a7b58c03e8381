"""tokensel: the library behind the executable book on *Attention with Trained Embeddings Provably
Selects Important Tokens* (Wu, Shevchenko, Oymak, Mondelli, NeurIPS 2025).

The map (each folder imports only the folders above it in this list; ARCHITECTURE.md):

* plumbing — :mod:`.errors`, :mod:`.config` (every ``TOKENSEL_*`` setting), :mod:`.validation`,
  :mod:`.files`, :mod:`.seeding`, :mod:`.loss`, ``version``;
* :mod:`.data` — ragged batches, text, the IMDB archive, loaders, prepared reviews, synthetic data;
* :mod:`.models` — the one-layer model, the variants, the fused kernels and the exact gradients;
* :mod:`.training` — the theory's phases, the one Adam loop and its settings, checkpoints;
* :mod:`.analysis` — token statistics, the two shapes, the max-margin problems;
* :mod:`.experiments` — the named recipes on real reviews, chapter 4's phase diagram;
* :mod:`.book` — what only the book uses: claims, figures, the status page, Sphinx extensions.

The names below are what the chapters call; each module the chapters name (``ts.statistics``,
``ts.shapes``, ``ts.synthetic``, ...) is re-exported under that short name.

Each name is imported when first used (``ts.train_p``, ``from tokensel import train_p``): the imports below are
the map, read by the type checker and, at run time, by the module's ``__getattr__``. So a process that needs only the
book's tooling (a Sphinx build with the book's extensions, ``python -m tokensel verify``) does not import torch,
pandas and numba, about three seconds. Each folder imports its modules the same way (``ts.models.variants``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .version import __version__  # noqa: F401 (the package version)

if TYPE_CHECKING:
    from . import analysis, book, config, data, errors, experiments, loss, models, seeding, training, validation
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
    from .book import checks, display, plots, replication
    from .book.checks import check, end_chapter, start_chapter
    from .book.exercises import self_check
    from .data import reviews, synthetic
    from .data.batch import RaggedBatch, labels_from_01
    from .data.loaders import load_reviews
    from .data.reviews import from_frame, prepare_texts
    from .errors import (
        ClaimFailedError,
        DataUnavailableError,
        InfeasibleSVMError,
        InvalidBatchError,
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


_SOURCES: dict[str, tuple[str, str | None]] = {}


def _sources() -> dict[str, tuple[str, str | None]]:
    """{name: (module, attribute or None for the module itself)}, read once from the imports above."""
    import ast
    from pathlib import Path

    if not _SOURCES:
        tree = ast.parse(Path(__file__).read_text(encoding="utf-8"))
        [block] = [n for n in tree.body if isinstance(n, ast.If) and ast.unparse(n.test) == "TYPE_CHECKING"]
        for node in block.body:
            assert isinstance(node, ast.ImportFrom) and node.level == 1, ast.unparse(node)
            for alias in node.names:
                module = f"{__name__}.{node.module or alias.name}"
                _SOURCES[alias.asname or alias.name] = (module, alias.name if node.module else None)
    return _SOURCES


if not TYPE_CHECKING:  # the type checker reads the imports above; a name outside them is an error there

    def __getattr__(name: str):
        """A name of the map, imported on first use (and kept: later uses do not come here)."""
        import importlib

        source = _sources().get(name)
        if source is None:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        module = importlib.import_module(source[0])
        if source[1] is None:
            value = module
        elif hasattr(module, source[1]):
            value = getattr(module, source[1])
        else:  # from .analysis import statistics: a module of that folder, as ``from ... import`` finds it
            value = importlib.import_module(f"{source[0]}.{source[1]}")
        globals()[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted(set(globals()) | set(_sources()))


__all__ = [
    # the library's folders
    "data",
    "models",
    "training",
    "analysis",
    "experiments",
    "book",
    # plumbing
    "config",
    "errors",
    "loss",
    "seeding",
    "validation",
    # modules the chapters call by name
    "checks",
    "display",
    "maxmargin",
    "plots",
    "replication",
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
    # claims
    "check",
    "end_chapter",
    "start_chapter",
    # the exercises' self-checks (right or not yet, with a hint; never a claim)
    "self_check",
    # errors
    "ClaimFailedError",
    "DataUnavailableError",
    "InfeasibleSVMError",
    "InvalidBatchError",
    "InvalidParameterError",
    "TokenselError",
]
