"""What a check line says to a reader: the claim in words ("within 30 % of", "at least"), and on failure the
statement it tests and where its threshold came from.

:func:`claim_line` is the one place that words a check; :func:`tokensel.book.checks.check` prints what it
returns (and puts it in the error of a failed claim)::

    [ok] one step: corr(E1 v, alpha): 0.998958, required at least 0.99
    [ok] exercise: err at d = 16384: 0.0117035, required within 30 % of 0.00955585 (off by 22 %)
    [ok] one step: every strong token has the sign of alpha: yes
"""

from __future__ import annotations

import math

from ..errors import InvalidArgumentError

KINDS = ("abs", "rel", "le", "ge", "true")
#: where a threshold came from, by the ``preregistered`` flag of a check
THRESHOLD_ORIGIN = {
    True: "fixed before the first run, from the paper's claim or from theory",
    False: "the theory's value with a tolerance chosen after a first run showed the size of finite-size effects",
}


def number(x) -> str:
    """A number as a check line prints it: a float to 6 significant digits, anything else as ``str`` gives it."""
    return f"{x:.6g}" if isinstance(x, float) else str(x)


def percent(fraction: float, digits: int = 4) -> str:
    """``0.3`` as ``"30 %"``, ``0.005`` as ``"0.5 %"`` (at most ``digits`` significant digits)."""
    return f"{100 * fraction:.{digits}g} %"


def requirement(kind: str, expected=None, tol=None) -> str:
    """The claim's condition in words: ``"within 30 % of 0.5"``, ``"within 0.1 of -0.5"``, ``"at most 3"``,
    ``"at least 0.99"``; a truth claim has none (``""``)."""
    if kind not in KINDS:
        raise InvalidArgumentError(f"kind must be one of {KINDS}, got {kind!r}")
    if kind == "true":
        return ""
    if kind == "le":
        return f"at most {number(expected)}"
    if kind == "ge":
        return f"at least {number(expected)}"
    if kind == "rel":
        return f"within {percent(tol)} of {number(expected)}"
    if tol == 0:
        return f"exactly {number(expected)}"
    return f"within {number(tol)} of {number(expected)}"


def _off_by(kind, measured, expected) -> str:
    if kind != "rel" or not isinstance(measured, float) or not isinstance(expected, float):
        return ""
    if not math.isfinite(measured) or expected == 0:
        return ""
    return f" (off by {percent(abs(measured - expected) / abs(expected), 2)})"


def claim_line(
    name: str,
    measured,
    expected,
    tol,
    kind: str,
    passed: bool,
    *,
    deviation: bool = False,
    preregistered: bool = False,
    reason: str | None = None,
    statement: str | None = None,
    threshold: str | None = None,
) -> str:
    """The line(s) :func:`~tokensel.book.checks.check` prints for one claim.

    One line ``[ok] name: measured, required <condition>`` (``[deviation]`` for a tripwire that holds,
    ``[FAILED]`` for a claim that does not); a truth claim reads ``name: yes`` / ``no``. A failed claim adds
    what it tests (``statement``, else its name) and where its threshold came from (``threshold``, else
    :data:`THRESHOLD_ORIGIN` by ``preregistered``), each on a line of its own."""
    if not isinstance(name, str) or not name.strip():
        raise InvalidArgumentError(f"name must be the claim's non-empty name, got {name!r}")
    if kind not in KINDS:
        raise InvalidArgumentError(f"kind must be one of {KINDS}, got {kind!r}")
    verdict = ("deviation" if deviation else "ok") if passed else "FAILED"
    if kind == "true":
        said = "yes" if measured is True else "no" if measured is False else number(measured)
        body = said if passed else f"{said}, required yes"
    else:
        body = f"{number(measured)}, required {requirement(kind, expected, tol)}" + _off_by(kind, measured, expected)
    line = f"[{verdict}] {name}: {body}"
    if reason:
        line += f" ({reason})"
    if deviation and passed:
        line += " (a recorded departure from the paper, checked in its direction)"
    if not passed:
        line += f"\n    what is tested: {statement or name}"
        line += f"\n    where the threshold comes from: {threshold or THRESHOLD_ORIGIN[bool(preregistered)]}"
    return line
