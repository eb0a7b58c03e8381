"""Training: the theory's phases, the one Adam loop, and the variants' training.

* :mod:`.settings` — :class:`~tokensel.training.settings.TrainSettings`, the one set of training settings.
* :mod:`.phases` — phase 1 (one step on ``E``), phase 2 (``p`` by gradient descent or gradient flow),
  and ``E``, ``p`` (and ``v``) trained together.
* :mod:`.loop` — the Adam loop: evaluation, checkpoints, divergence.
* :mod:`.optimiser` — :class:`~tokensel.training.optimiser.FusedAdam`, the loop's optimiser (torch's fused Adam).
* :mod:`.variants` — :func:`~tokensel.training.variants.train_variant`, the variants trained by autograd.
* :mod:`.checkpoints`, :mod:`.progress` — resumable runs and progress bars.
"""

from . import checkpoints, loop, optimiser, phases, precise, progress, settings, variants
