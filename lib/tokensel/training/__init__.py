"""Training: the theory's phases, the one Adam loop, and the variants' training.

* :mod:`.settings` — :class:`~tokensel.training.settings.TrainSettings`, the one set of training settings.
* :mod:`.phases` — phase 1 (one step on ``E``), phase 2 (``p`` by gradient descent or gradient flow),
  and ``E``, ``p`` (and ``v``) trained together.
* :mod:`.loop` — the Adam loop: evaluation, checkpoints, divergence.
* :mod:`.optimiser` — :class:`~tokensel.training.optimiser.FusedAdam`, the loop's optimiser (torch's fused Adam).
* :mod:`.variants` — :func:`~tokensel.training.variants.train_variant`, the variants trained by autograd.
* :mod:`.checkpoints`, :mod:`.progress` — resumable runs and progress bars.

Imports :mod:`tokensel.models`, :mod:`tokensel.data` and the plumbing modules.
"""

import importlib.util
from typing import TYPE_CHECKING

if not TYPE_CHECKING:  # the type checker sees the folder's modules themselves

    def __getattr__(name: str):
        """A module of this folder, imported when first used (``ts.models.variants``)."""
        if importlib.util.find_spec(f"{__name__}.{name}") is None:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        return importlib.import_module(f"{__name__}.{name}")
