"""Self-checks for the exercises: the student computes, the book says right or not yet, with a hint.

A cell such as ``tb.self_check("ex-sum", total=total)`` compares with the answer key (``book/answers.py``,
:func:`load_key`) or, without it, notes the answers for the grader (``TOKENSEL_GRADES``, ``TOKENSEL_REFERENCES``,
:mod:`.assignments`). A self-check never raises and records no claim."""

from __future__ import annotations

import importlib.util
import json
import math
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

KEY_ENV, GRADES_ENV, REFERENCES_ENV = "TOKENSEL_ANSWER_KEY", "TOKENSEL_GRADES", "TOKENSEL_REFERENCES"


@dataclass(frozen=True)
class Answer:
    """One answer: its variable ``name``, a ``hint`` shown while it is wrong, ``tol`` (absolute) or ``rel_tol``."""

    name: str
    hint: str
    tol: float | None = None
    rel_tol: float | None = None

    def holds(self, value: float, reference: float) -> bool:
        bound = self.rel_tol * abs(reference) if self.rel_tol is not None else (self.tol or 0.0)
        return abs(value - reference) <= bound


@dataclass(frozen=True)
class Exercise:
    """A self-checked exercise: its label, answers, the chapter objects it needs and its reference function."""

    label: str
    answers: tuple[Answer, ...]
    reference: Callable[[dict, dict], dict]
    given: tuple[str, ...] = field(default=())


#: the exercises an answer key declares while it is loaded, by label
EXERCISES: dict[str, Exercise] = {}
_KEYS: dict[tuple, dict[str, Exercise]] = {}


def exercise(label: str, *answers: Answer, given: tuple[str, ...] = ()):
    """Declare an exercise of the answer key: the decorated function computes its references."""

    def register(reference):
        EXERCISES[label] = Exercise(label, tuple(answers), reference, tuple(given))
        return reference

    return register


def load_key(path: Path | None = None) -> dict[str, Exercise]:
    """The answer key at ``path`` (``$TOKENSEL_ANSWER_KEY``, else the book's ``answers.py``); empty if none."""
    from .toc import book_root

    root = book_root()
    path = Path(path or os.environ.get(KEY_ENV) or (root / "book" / "answers.py" if root else "")).resolve()
    if not path.is_file():
        return {}
    stamp = (path, path.stat().st_mtime_ns)
    if stamp not in _KEYS:
        EXERCISES.clear()
        spec = importlib.util.spec_from_file_location("tokensel_answer_key", path)
        assert spec is not None and spec.loader is not None
        spec.loader.exec_module(importlib.util.module_from_spec(spec))
        _KEYS[stamp] = dict(EXERCISES)
    return _KEYS[stamp]


def number(value) -> float | None:
    """``value`` as a finite float (a 0-d tensor or array too), else None."""
    if hasattr(value, "item") and getattr(value, "shape", None) == ():
        value = value.item()
    try:
        value = float(value) if not isinstance(value, (bool, str, bytes)) else None
    except (TypeError, ValueError, OverflowError):
        return None
    return value if value is not None and math.isfinite(value) else None


def _append(env: str, line: dict) -> None:
    if os.environ.get(env):
        with open(os.environ[env], "a", encoding="utf-8") as fh:
            fh.write(json.dumps(line) + "\n")


def self_check(exercise: str, given: dict | None = None, **answers) -> bool | None:
    """Say for each answer ``right`` or ``not yet: <hint>``; True when all are right, None while one is None.
    Introduced in chapter 01."""
    try:
        values = {n: number(v) for n, v in answers.items()}
        _append(GRADES_ENV, {"exercise": exercise, "answers": values})
        key = load_key()
        ex = key.get(exercise)
        if ex is None:
            shown = ", ".join(f"{n} = {v}" for n, v in values.items())
            print(f"self-check {exercise}: answers noted ({shown}); your teacher's grader checks them")
            return None
        if all(v is None for v in answers.values()) and not os.environ.get(REFERENCES_ENV):
            names = ", ".join(a.name for a in ex.answers)
            print(f"self-check {exercise}: waiting for your answer: set {names} (now None) and run the cell again")
            return None
        references = {k: float(v) for k, v in ex.reference(dict(given or {}), values).items()}
        _append(REFERENCES_ENV, {"exercise": exercise, "references": references})
        lines, right, waiting = [], 0, 0
        for a in ex.answers:
            value = values.get(a.name)
            if answers.get(a.name) is None:
                waiting += 1
                lines.append(f"  {a.name}: waiting for your answer (now None)")
            elif value is not None and a.holds(value, references[a.name]):
                right += 1
                lines.append(f"  {a.name}: right")
            else:
                lines.append(f"  {a.name}: not yet: {a.hint}")
        head = "right" if right == len(ex.answers) else f"not yet ({right} of {len(ex.answers)} right)"
        print(f"self-check {exercise}: {head}\n" + "\n".join(lines))
        return None if waiting else right == len(ex.answers)
    except Exception as exc:  # noqa: BLE001 - a self-check never stops a notebook
        print(f"self-check {exercise}: could not check ({type(exc).__name__}: {exc})")
        return None
