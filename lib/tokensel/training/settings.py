"""The one set of training settings every Adam run takes (:class:`TrainSettings`), with its defaults.

:func:`tokensel.train_joint`, :func:`tokensel.train_variant` and the recipes of
:mod:`tokensel.experiments` take a :class:`TrainSettings`; :class:`tokensel.experiments.Scale` holds one.
Introduced in chapter 05 (joint training on synthetic data); the real-data recipes of chapters 06 and 07 use it
too."""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from pathlib import Path

from ..errors import InvalidParameterError
from ..validation import MAX_STEPS, Bool, FilePath, Instance, Int, Real, declare


@declare(
    steps=Int(min=1, max=MAX_STEPS),
    lr=Real(min=0.0, min_inclusive=False),
    eval_every=Int(min=1),
    checkpoint=FilePath(allow_none=True),
    checkpoint_every=Int(min=1),
    progress=Bool(allow_none=True),
)
@dataclass(frozen=True)
class TrainSettings:
    """Full-batch Adam's settings, checked when made (a wrong value raises
    :class:`~tokensel.errors.InvalidParameterError` naming the field):

    * ``steps`` — Adam steps (default 300, the paper's count);
    * ``lr`` — Adam's learning rate (default ``3e-3``);
    * ``eval_every`` — steps between two evaluations of the loss and accuracies (default 25; the last
      step is always evaluated);
    * ``checkpoint`` — a file the run saves its state to and resumes from (default None: no checkpoint);
    * ``checkpoint_every`` — steps between two checkpoints (default 25);
    * ``progress`` — show a progress bar (default None: as ``TOKENSEL_PROGRESS`` says).

    ``settings.replace(lr=1e-2)`` gives a copy with fields changed (checked again).

    Introduced in chapter 05."""

    steps: int = 300
    lr: float = 3e-3
    eval_every: int = 25
    checkpoint: Path | None = None
    checkpoint_every: int = 25
    progress: bool | None = None

    def replace(self, **changes) -> TrainSettings:
        """A copy with ``changes`` (field names of :class:`TrainSettings`), checked."""
        unknown = set(changes) - {f.name for f in fields(self)}
        if unknown:
            raise InvalidParameterError(
                f"TrainSettings has no field {sorted(unknown)}: the fields are {[f.name for f in fields(self)]}"
            )
        return replace(self, **changes)


#: a trainer's ``settings`` argument: a :class:`TrainSettings`, or None for its defaults
SETTINGS = Instance(
    TrainSettings, what="a tokensel.TrainSettings (e.g. ts.TrainSettings(steps=300, lr=3e-3))", allow_none=True
)
