"""Training: :mod:`.settings` (:class:`~tokensel.training.settings.TrainSettings`), the theory's :mod:`.phases`,
the one Adam :mod:`.loop` (with its :mod:`.optimiser`, :mod:`.checkpoints` and :mod:`.progress` bars), the
variants' training (:mod:`.variants`) and the many-digit implicit steps (:mod:`.precise`)."""

from . import checkpoints, loop, optimiser, phases, precise, progress, settings, variants
