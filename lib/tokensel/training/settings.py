"""The one set of training settings every Adam run takes (:class:`TrainSettings`), with its defaults.

:func:`tokensel.train_joint`, :func:`tokensel.train_variant` and the recipes of
:mod:`tokensel.experiments` take a :class:`TrainSettings`; :class:`tokensel.experiments.Scale` holds one.
Introduced with the real-data training of chapter 6."""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from pathlib import Path

from ..errors import InvalidParameterError
from ..validation import MAX_STEPS, check_bool, check_int, check_path, check_real


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

    ``settings.replace(lr=1e-2)`` gives a copy with fields changed (checked again)."""

    steps: int = 300
    lr: float = 3e-3
    eval_every: int = 25
    checkpoint: Path | None = None
    checkpoint_every: int = 25
    progress: bool | None = None

    def __post_init__(self) -> None:
        err = InvalidParameterError
        canonical = {
            "steps": check_int(self.steps, "steps", min=1, max=MAX_STEPS, error=err),
            "lr": check_real(self.lr, "lr", min=0.0, min_inclusive=False, error=err),
            "eval_every": check_int(self.eval_every, "eval_every", min=1, error=err),
            "checkpoint": check_path(self.checkpoint, "checkpoint"),
            "checkpoint_every": check_int(self.checkpoint_every, "checkpoint_every", min=1, error=err),
            "progress": check_bool(self.progress, "progress", allow_none=True),
        }
        for name, value in canonical.items():
            object.__setattr__(self, name, value)

    def replace(self, **changes) -> TrainSettings:
        """A copy with ``changes`` (field names of :class:`TrainSettings`), checked."""
        unknown = set(changes) - {f.name for f in fields(self)}
        if unknown:
            raise InvalidParameterError(
                f"TrainSettings has no field {sorted(unknown)}: the fields are {[f.name for f in fields(self)]}"
            )
        return replace(self, **changes)


def settings_of(settings, name: str = "settings") -> TrainSettings:
    """``settings`` checked to be a :class:`TrainSettings` (None gives the defaults)."""
    if settings is None:
        return TrainSettings()
    if not isinstance(settings, TrainSettings):
        raise InvalidParameterError(
            f"{name} must be a tokensel.TrainSettings (e.g. ts.TrainSettings(steps=300, lr=3e-3)), "
            f"got {type(settings).__name__}"
        )
    return settings
