"""The settings of every full-batch Adam run (:class:`TrainSettings`), taken by :func:`tokensel.train_joint`,
:func:`tokensel.train_variant` and the recipes of ``tokensel.experiments``."""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from pathlib import Path

from ..errors import InvalidParameterError
from ..validation import MAX_STEPS, Bool, FilePath, Instance, Int, Real, declare


@declare(
    steps=Int(min=1, max=MAX_STEPS),
    # an Adam step moves an entry by at most about 73 lr: below 1e3, no run of MAX_STEPS steps can overflow
    lr=Real(min=0.0, min_inclusive=False, max=1e3),
    eval_every=Int(min=1),
    checkpoint=FilePath(allow_none=True),
    checkpoint_every=Int(min=1),
    progress=Bool(allow_none=True),
)
@dataclass(frozen=True)
class TrainSettings:
    """Full-batch Adam's settings, checked when made: ``steps`` (our protocol's 300; the paper gives none), ``lr``,
    ``eval_every`` (steps between evaluations; the last step is always evaluated), ``checkpoint`` (a file the run
    saves to and resumes from), ``checkpoint_every`` and ``progress`` (None: as ``TOKENSEL_PROGRESS`` says).

    Introduced in chapter 05."""

    steps: int = 300
    lr: float = 3e-3
    eval_every: int = 25
    checkpoint: Path | None = None
    checkpoint_every: int = 25
    progress: bool | None = None

    def replace(self, **changes) -> TrainSettings:
        """A copy with ``changes``, checked again."""
        names = [f.name for f in fields(self)]
        if set(changes) - set(names):
            raise InvalidParameterError(f"TrainSettings has no field {sorted(set(changes) - set(names))}: {names}")
        return replace(self, **changes)


#: a trainer's ``settings`` argument: a :class:`TrainSettings`, or None for its defaults
SETTINGS = Instance(
    TrainSettings, what="a tokensel.TrainSettings (e.g. ts.TrainSettings(steps=300, lr=3e-3))", allow_none=True
)
