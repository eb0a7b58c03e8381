"""What a check line says to a reader: the claim in words ("within 30 % of", "at least"), and on failure the
statement it tests and where its threshold came from.

:func:`claim_line` is the one place that words a check; :func:`tokensel_book.checks.check` prints what it
returns (and puts it in the error of a failed claim)::

    [ok] one step: corr(E1 v, alpha): 0.998958, required at least 0.99
    [ok] exercise: err at d = 16384: 0.0117035, required within 30 % of 0.00955585 (off by 22 %)
    [ok] one step: every strong token has the sign of alpha: yes
    [ok] one step: max |dE v - closed form|: 3e-17, required within 1e-13 of 0 (tests lem-one-step)

A claim given the label of the statement it tests (``check(..., statement="lem-one-step")``) ends its line
with ``(tests <label>)``; the book's HTML shows it as a link to the statement, by its number
(:mod:`tokensel_book.sphinx_statements`), and a failed claim prints the statement's kind and title, read from
the chapters' sources (:func:`statement_title`).
"""

from __future__ import annotations

import math
import re
from functools import lru_cache
from pathlib import Path

from tokensel.errors import InvalidArgumentError

KINDS = ("abs", "rel", "le", "ge", "true")
#: where a threshold came from, by the ``preregistered`` flag of a check
THRESHOLD_ORIGIN = {
    True: "fixed before the first run, from the paper's claim or from theory",
    False: "the theory's value with a tolerance chosen after a first run showed the size of finite-size effects",
}


#: a statement's label as a claim names it (a MyST label: a letter, then letters, digits, ``-``, ``_``, ``:``, ``.``)
LABEL = re.compile(r"[A-Za-z][\w:.-]*")
#: what a check line says about the statement it tests; the book's HTML turns it into a link
TESTS = re.compile(r"\(tests (?P<label>[A-Za-z][\w:.-]*)\)")


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
    label: str | None = None,
) -> str:
    """The line(s) :func:`~tokensel_book.checks.check` prints for one claim.

    One line ``[ok] name: measured, required <condition>`` (``[deviation]`` for a tripwire that holds,
    ``[FAILED]`` for a claim that does not); a truth claim reads ``name: yes`` / ``no``; ``label``, the label of
    the statement the claim tests, adds ``(tests <label>)``. A failed claim adds what it tests (``statement``,
    else its name) and where its threshold came from (``threshold``, else :data:`THRESHOLD_ORIGIN` by
    ``preregistered``), each on a line of its own."""
    if not isinstance(name, str) or not name.strip():
        raise InvalidArgumentError(f"name must be the claim's non-empty name, got {name!r}")
    if label is not None and (not isinstance(label, str) or not LABEL.fullmatch(label)):
        raise InvalidArgumentError(f"label must be a statement's label such as 'lem-one-step', got {label!r}")
    if kind not in KINDS:
        raise InvalidArgumentError(f"kind must be one of {KINDS}, got {kind!r}")
    verdict = ("deviation" if deviation else "ok") if passed else "FAILED"
    if kind == "true":
        said = "yes" if measured is True else "no" if measured is False else number(measured)
        body = said if passed else f"{said}, required yes"
    else:
        body = f"{number(measured)}, required {requirement(kind, expected, tol)}" + _off_by(kind, measured, expected)
    line = f"[{verdict}] {name}: {body}"
    if label:
        line += f" (tests {label})"
    if reason:
        line += f" ({reason})"
    if deviation and passed:
        line += " (a recorded departure from the paper, checked in its direction)"
    if not passed:
        line += f"\n    what is tested: {statement or name}"
        line += f"\n    where the threshold comes from: {threshold or THRESHOLD_ORIGIN[bool(preregistered)]}"
    return line


_DIRECTIVE = re.compile(r"^(`{3,}|:{3,})\{prf:(?P<kind>\w+)\}[ \t]*(?P<title>.*?)\s*$")
_OPTION = re.compile(r"^\s*:(?P<key>[\w-]+):\s*(?P<value>.*?)\s*$")
_EQUATION = re.compile(r"^\s*\$\$\s*\((?P<label>[^()\s]+)\)\s*$")


@lru_cache(maxsize=32)
def _statements(folder: str, stamp: tuple) -> dict[str, str]:
    found: dict[str, str] = {}
    for path in sorted(Path(folder).glob("*.md")):
        lines = path.read_text(encoding="utf-8").splitlines()
        for i, line in enumerate(lines):
            m = _DIRECTIVE.match(line)
            if m:
                j = i + 1
                while j < len(lines) and _OPTION.match(lines[j]):
                    option = _OPTION.match(lines[j])
                    if option and option["key"] == "label":
                        kind = m["kind"].capitalize()
                        found[option["value"]] = f"{kind} \u201c{m['title']}\u201d" if m["title"] else kind
                    j += 1
            eq = _EQUATION.match(line)
            if eq:
                found[eq["label"]] = f"equation {eq['label']} of {path.stem}"
    return found


def statement_title(label: str, root=None) -> str:
    """What a failed claim says it tests: the kind and title of the statement ``label`` as the chapters'
    sources (``<root>/book/*.md``) write it, e.g. ``Lemma \u201cOne step from $p^0 = 0$\u201d (lem-one-step)``;
    the label alone when no source names it."""
    if not isinstance(label, str) or not LABEL.fullmatch(label):
        raise InvalidArgumentError(f"label must be a statement's label such as 'lem-one-step', got {label!r}")
    if root is None:
        from .records import book_root

        root = book_root()
    folder = Path(root) / "book"
    try:
        stamp = tuple((p.name, p.stat().st_mtime_ns) for p in sorted(folder.glob("*.md")))
        title = _statements(str(folder), stamp).get(label)
    except OSError:
        title = None
    return f"{title} ({label})" if title else label
