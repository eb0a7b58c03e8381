"""Checked claims: assert a numerical claim and record it for the book's status page.

A chapter calls :func:`start_chapter` first, then :func:`check` for every claim, and
:func:`end_chapter` last. Each execution of a chapter writes one JSON record,
``<chapter>@<run id>.json``, in the results directory, through a unique temporary file and an atomic rename;
a new run never removes the record of another run that is in progress or finished (:func:`start_chapter`),
so two processes executing chapters into one folder lose nothing. ``make book`` sets
``$TOKENSEL_RESULTS_DIR`` to the book's folder ``_build/checks``; a chapter run by hand (no
``$TOKENSEL_RESULTS_DIR``) records in the scratch folder ``_build/scratch/checks`` under the book root, so
exploratory reruns never touch the book's records (:func:`tokensel.config.results_dir`).

Every call of :func:`check` is on record before anything can raise: a claim that does not hold, and a
claim that is malformed (no name, unknown kind, a bad tolerance or expected value, values that cannot be
converted) are recorded as failed, with the reason, and then raise (:class:`ClaimFailedError`,
or :class:`~tokensel.errors.InvalidArgumentError` for a malformed one). A claim checked before
:func:`start_chapter` is recorded too, in a record of its own that :func:`~tokensel_book.verification.verify` refuses.

:func:`~tokensel_book.verification.verify` (run by ``make book`` after the build)
fails on any recorded failure, on any chapter that started but did not finish, on any record that is not
valid (strict types, its digest, a verdict its own numbers contradict) and on any claim the chapter's source makes but
its record lacks: every finished run of a chapter must have recorded every ``check(...)`` call site of its page's
code cells (found in the ``.md`` source of each page of ``_toc.yml`` by
:func:`~tokensel_book.verification.expected_claims`, which skips no page), so a cell that failed before its check,
or a ``check`` replaced by the chapter, fails the build; so do a claim made elsewhere than at a call site of its
page (an alias or wrapper of ``check``, another module), a claiming cell that stopped with an error
(:func:`start_chapter` notes it in IPython), and a claim written in a form whose every execution the build
cannot count (:func:`~tokensel_book.verification.claim_form_problems`; the limit of what is counted is in
:mod:`tokensel_book.verification`). Each recorded claim carries its call site (``site``:
a digest of the code cell it is in, as the kernel compiles it, and the call's place among the cell's
``check`` calls), the same whether the chapter ran from its ``.md``, from an ``.ipynb`` or under papermill,
and whatever the order of its cells.

Comparison kinds: ``"abs"`` ``|m - e| <= tol``; ``"rel"`` ``|m - e| <= tol * |e|``; ``"le"``
``m <= e``; ``"ge"`` ``m >= e``; ``"true"`` ``m`` is the boolean ``True`` (``e`` and ``tol`` unused).
Comparisons are exact (rational arithmetic on the recorded values: integers above 2**53 are compared as
integers). A NaN or infinite measurement never satisfies a claim; a truth value must be a real boolean
(``"False"`` or ``[False]`` are refused, not read as true).
"""

from __future__ import annotations

import ast
import hashlib
import inspect
import linecache
import numbers
import os
import socket
import time
import uuid

import numpy as np

from tokensel import config
from tokensel.errors import ArgumentTypeError, InvalidArgumentError, TokenselError
from tokensel.files import write_json_atomic

from . import replication, wording
from .records import (
    KINDS,
    MALFORMED,
    MAX_INT_BITS,
    NO_CHAPTER,
    SCHEMA,
    _alive,
    _finite,
    _is_int,
    _lock,
    _scan,
    _sealed,
    _verdict,
    book_root,
    results_dir,
)


class ClaimFailedError(TokenselError, AssertionError):
    """A numerical claim checked with :func:`check` does not hold."""


_state: dict = {"chapter": None, "checks": []}


# ---------------------------------------------------------------------------------------------------------
# records: canonical content, digest, strict reading


def _record() -> dict:
    keys = ("chapter", "run", "pid", "host", "started", "finished", "seconds", "orphan", "checks", "interrupted")
    return _sealed({"schema": SCHEMA, **{k: _state[k] for k in keys if k in _state}})


def _write() -> None:
    if _state.get("chapter") is None:
        return
    write_json_atomic(results_dir() / f"{_state['chapter']}@{_state['run']}.json", _record())


# ---------------------------------------------------------------------------------------------------------
# the chapter's run


def _new_state(chapter: str, **extra) -> None:
    _state.clear()
    _state.update(
        chapter=chapter,
        run=uuid.uuid4().hex[:12],
        pid=os.getpid(),
        host=socket.gethostname(),
        started=time.time(),
        checks=[],
        t0=time.perf_counter(),
        **extra,
    )


def start_chapter(chapter: str) -> None:
    """Begin recording the checks of ``chapter``: a new run, with a record of its own
    (``<chapter>@<run id>.json``).

    Records are per run, and a start never removes the record of another run that is still in progress
    or has finished, in this process or any other, so two processes recording into one folder lose
    nothing. It removes only a record that can never be finished and holds no failed claim: an unfinished
    run of this chapter in this process (a notebook whose setup cell runs again after an interrupted cell:
    a process records one run at a time) or in a process of this host that has ended (a kernel that
    crashed). A record holding a failed claim and a record that is not valid are kept (until the next
    build clears the folder), so running a setup cell twice never erases a failure.
    :func:`~tokensel_book.verification.verify` requires every finished run of a chapter to hold every claim
    of the chapter's source.

    Introduced in chapter 01.
    """
    if (
        not isinstance(chapter, str)
        or not chapter.strip()
        or chapter == NO_CHAPTER
        or any(c in chapter for c in "/\\@")
        or chapter.strip() != chapter
    ):
        raise InvalidArgumentError(
            f"chapter must be a plain name (no '/', '\\' or '@', no surrounding spaces, "
            f"not {NO_CHAPTER!r}), got {chapter!r}"
        )
    d = results_dir()
    with _lock(d):
        recs, _ = _scan(d)
        for old in recs:
            if old["chapter"] != chapter or "finished" in old or any(not c["passed"] for c in old["checks"]):
                continue
            mine = old["pid"] == os.getpid() and old["host"] == socket.gethostname()
            if mine or not _alive(old):
                (d / old["_file"]).unlink(missing_ok=True)
        _new_state(chapter)
        _write()
    _watch_cells()


def _watch_cells() -> None:
    """In IPython (a kernel executing the chapter), have every cell that makes claims and stops with an error
    noted in the run's record (``interrupted``): the claims after the error were never made, and
    :func:`~tokensel_book.verification.verify` refuses the run, also where execution went on (a cell tagged
    ``raises-exception``, cells run by hand). Registered once per shell; outside IPython, nothing."""
    try:
        from IPython import get_ipython

        shell = get_ipython()
        if shell is None or getattr(shell, "_tokensel_watches_cells", False):
            return
        shell.events.register("post_run_cell", _after_cell)
        shell._tokensel_watches_cells = True
    except Exception:  # noqa: BLE001 - a shell we cannot watch is not watched; never an error
        return


def _after_cell(result) -> None:
    """IPython's ``post_run_cell``: note a cell of this run that makes claims and stopped with an error."""
    try:
        error = result.error_before_exec or result.error_in_exec
        if error is None or _state.get("chapter") in (None, NO_CHAPTER) or "finished" in _state:
            return
        raw = getattr(result.info, "raw_cell", None) or ""
        try:
            from IPython.core.inputtransformer2 import TransformerManager

            makes_claims = bool(_calls(ast.parse(TransformerManager().transform_cell(raw)), "check"))
        except Exception:  # noqa: BLE001 - a cell that does not parse may still name check
            makes_claims = "check" in raw
        if makes_claims:
            _state.setdefault("interrupted", []).append(f"{type(error).__name__}: {_safe(str(error), 160)}")
            _write()
    except Exception:  # noqa: BLE001 - a callback of the kernel never raises
        return


def end_chapter() -> float:
    """Finish the chapter's record and return its execution time in seconds.

    Raises :class:`ClaimFailedError` if any claim of this run failed (even one whose
    exception was caught).

    Introduced in chapter 01."""
    if _state.get("chapter") is None or _state.get("orphan"):
        raise InvalidArgumentError("end_chapter() without start_chapter(): call ts.start_chapter(name) first")
    _state["finished"] = time.time()
    _state["seconds"] = time.perf_counter() - _state["t0"]
    _write()
    n = len(_state["checks"])
    failed = [c["name"] for c in _state["checks"] if not c["passed"]]
    if failed:
        raise ClaimFailedError(f"chapter {_state['chapter']!r}: {len(failed)} of {n} claims failed: {failed}")
    print(f"{_state['chapter']}: {n} claims checked, all hold; executed in {_state['seconds']:.1f} s")
    return _state["seconds"]


# ---------------------------------------------------------------------------------------------------------
# call sites: which `check(...)` of which code cell made a claim


def _calls(tree: ast.AST, name: str) -> list[ast.Call]:
    """The calls of ``name`` (``name(...)`` or ``<anything>.name(...)``) in ``tree``, in source order."""
    found = [
        n
        for n in ast.walk(tree)
        if isinstance(n, ast.Call)
        and (
            (isinstance(n.func, ast.Name) and n.func.id == name)
            or (isinstance(n.func, ast.Attribute) and n.func.attr == name)
        )
    ]
    return sorted(found, key=lambda n: (n.lineno, n.col_offset))


def _cell_key(tree: ast.AST) -> str:
    """The identity of a code cell: a digest of its syntax tree (comments, blank lines and the cell's
    position in the notebook do not change it)."""
    return hashlib.sha256(ast.dump(tree).encode()).hexdigest()[:16]


_SITES: dict = {}


def _cell_sites(source: str):
    """``(cell key, [(lineno, end_lineno, col, end_col) of each check call])`` of the code ``source``."""
    key = hashlib.sha256(source.encode()).hexdigest()
    if key not in _SITES:
        tree = ast.parse(source)
        _SITES[key] = (
            _cell_key(tree),
            [(c.lineno, c.end_lineno, c.col_offset, c.end_col_offset) for c in _calls(tree, "check")],
        )
    return _SITES[key]


def _site_of(frame) -> str | None:
    """The call site of the ``check`` call running in ``frame`` (``"<cell key>:<k>"``: the k-th ``check``
    call of the code it is in), from the code as compiled (IPython keeps each cell's code in
    :mod:`linecache`); None when the source is not available. Never raises."""
    try:
        lines = linecache.getlines(frame.f_code.co_filename, frame.f_globals)
        if not lines:
            return None
        key, calls = _cell_sites("".join(lines))
        pos = list(frame.f_code.co_positions())[frame.f_lasti // 2]
        hits = [k for k, c in enumerate(calls) if c == tuple(pos)]
        if not hits:  # no exact position: the one call on the frame's line, if only one
            hits = [k for k, c in enumerate(calls) if c[0] <= frame.f_lineno <= c[1]]
        return f"{key}:{hits[0]}" if len(hits) == 1 else None
    except Exception:  # noqa: BLE001 - a site we cannot tell is recorded as unknown, never an error
        return None


# ---------------------------------------------------------------------------------------------------------
# one claim


def _safe(x, limit: int = 200) -> str:
    """``repr(x)`` cut to ``limit`` characters; a placeholder when even that fails (never raises)."""
    try:
        if _is_int(x) and x.bit_length() > MAX_INT_BITS:
            return f"<an integer of about {int(x.bit_length() * 0.30103)} digits>"
        text = repr(x)
    except Exception:  # noqa: BLE001
        text = f"<{type(x).__name__} that cannot be shown>"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _scalar(x, what: str):
    """A 0-d tensor or array, or a numpy scalar, as a Python scalar; anything else unchanged."""
    if hasattr(x, "item") and hasattr(x, "shape"):
        if tuple(x.shape) != ():
            raise InvalidArgumentError(f"{what} must be a single number, got an array of shape {tuple(x.shape)}")
        return x.item()
    return x


def _number(x, what: str):
    """A real number as the record stores it: an ``int`` for integers (exact), else a ``float``.
    Raises :class:`InvalidArgumentError` (with the reason) for anything else."""
    x = _scalar(x, what)
    if isinstance(x, (bool, np.bool_)) or not isinstance(x, (numbers.Real, np.floating, np.integer)):
        raise InvalidArgumentError(f"{what} must be a real number, got {type(x).__name__} {_safe(x, 60)}")
    if isinstance(x, (numbers.Integral, np.integer)):
        v = int(x)
        if v.bit_length() > MAX_INT_BITS:
            raise InvalidArgumentError(f"{what} is an integer too large to record ({_safe(v)})")
        return v
    try:
        return float(x)
    except (OverflowError, ValueError) as exc:
        raise InvalidArgumentError(f"{what} cannot be converted to a float ({exc})") from None


def _shown_value(x):
    """A value as a failed claim's record keeps it: a number or boolean as is, anything else as its repr."""
    if x is None or isinstance(x, bool) or isinstance(x, float) or (_is_int(x) and x.bit_length() <= MAX_INT_BITS):
        return x
    if isinstance(x, np.bool_):
        return bool(x)
    return _safe(x)


#: the longest ``threshold`` phrase a claim takes (a phrase, not a paragraph: it is printed on one line)
MAX_THRESHOLD = 200


def _threshold_problem(threshold) -> tuple[type[Exception], str] | None:
    """``(error class, reason)`` when ``threshold`` is not None and not a phrase: a non-empty string of at most
    :data:`MAX_THRESHOLD` characters on one line."""
    if threshold is None:
        return None
    if not isinstance(threshold, str):
        return ArgumentTypeError, (
            f"threshold must be a short phrase saying where the threshold comes from, got "
            f"{type(threshold).__name__} {_safe(threshold, 60)}"
        )
    if not threshold.strip() or len(threshold) > MAX_THRESHOLD or not threshold.isprintable():
        return InvalidArgumentError, (
            f"threshold must be a non-empty phrase of at most {MAX_THRESHOLD} characters on one line (e.g. "
            f"'the 30 % bound of Lemma 2.1 at eta0 = 30'), got {_safe(threshold, 80)}"
        )
    return None


def _definition_problem(name, expected, tol, kind, deviation, preregistered, threshold=None):
    """``(error class, reason)`` when the claim is malformed, else ``(None, (expected, tol))`` converted."""
    if not isinstance(name, str) or not name.strip():
        return InvalidArgumentError, f"a claim needs a non-empty name, got {_safe(name, 60)}"
    problem = _threshold_problem(threshold)
    if problem is not None:
        return problem
    if not isinstance(kind, str) or kind not in KINDS:
        return InvalidArgumentError, f"kind must be one of {KINDS}, got {_safe(kind, 60)}"
    if not isinstance(deviation, bool):
        return ArgumentTypeError, f"deviation must be True or False, got {_safe(deviation, 60)}"
    if not isinstance(preregistered, bool):
        return ArgumentTypeError, f"preregistered must be True or False, got {_safe(preregistered, 60)}"
    if kind in ("abs", "rel"):
        try:
            t = None if tol is None else _number(tol, "tol")
        except InvalidArgumentError:
            t = None
        if t is None or not _finite(t) or t < 0:
            return InvalidArgumentError, (
                f"kind {kind!r} needs a tolerance tol >= 0 (a finite number), got {_safe(tol, 60)}"
            )
        tol = t
    elif tol is not None:
        return InvalidArgumentError, f"kind {kind!r} takes no tolerance; got tol={_safe(tol, 60)}"
    if kind == "true":
        if expected is not None:
            return InvalidArgumentError, (
                f"kind 'true' takes no expected value; got {_safe(expected, 60)} (write check(name, flag, kind='true'))"
            )
        return None, (None, None)
    if expected is None:
        return InvalidArgumentError, f"kind {kind!r} needs an expected value"
    try:
        e = _number(expected, "expected")
    except InvalidArgumentError as exc:
        is_real = isinstance(_scalar_or_none(expected), (numbers.Real, np.floating, np.integer))
        return (InvalidArgumentError if is_real else ArgumentTypeError), str(exc)
    if not _finite(e):
        return InvalidArgumentError, f"expected must be finite, got {_safe(expected, 60)}"
    return None, (e, tol)


def _scalar_or_none(x):
    try:
        return _scalar(x, "x")
    except Exception:  # noqa: BLE001
        return None


def _claim(
    name, measured, expected, tol, kind, deviation, preregistered, threshold=None
) -> tuple[dict, Exception | None]:
    """The record of one claim and the error a malformed one raises (after it is recorded)."""
    error, detail = _definition_problem(name, expected, tol, kind, deviation, preregistered, threshold)
    if error is not None:
        rec = dict(
            name=name if isinstance(name, str) and name.strip() else f"<unnamed claim: {_safe(name, 60)}>",
            measured=_shown_value(measured),
            expected=_shown_value(expected),
            tol=_shown_value(tol),
            kind=MALFORMED,
            passed=False,
            malformed=True,
            reason=f"malformed claim: {detail}",
        )
        if threshold is not None and _threshold_problem(threshold) is None:
            rec["threshold"] = threshold
        return rec, error(f"claim {rec['name']!r}: {detail}")
    e, t = detail
    reason = None
    if kind == "true":
        try:
            m = _scalar(measured, "a 'true' claim's measured value")
            if isinstance(m, np.bool_):
                m = bool(m)
            if not isinstance(m, bool):
                reason = f"a 'true' claim needs a boolean, got {type(measured).__name__} {_safe(m, 60)}"
                m = _shown_value(m)
        except Exception as exc:  # noqa: BLE001 - an array, a tensor that cannot be read: the claim fails
            reason, m = str(exc) or type(exc).__name__, _shown_value(measured)
    else:
        try:
            m = _number(measured, "the measured value")
            if not _finite(m):
                reason = "the measured value is not finite"
        except Exception as exc:  # noqa: BLE001
            reason, m = str(exc) or type(exc).__name__, _shown_value(measured)
    rec = dict(name=name, measured=m, expected=e, tol=t, kind=kind, passed=False)
    if deviation:
        rec["deviation"] = True
    if preregistered:
        rec["preregistered"] = True
    if threshold is not None:
        rec["threshold"] = threshold
    if reason:
        rec["reason"] = reason
    rec["passed"] = _verdict(rec)
    return rec, None


def _fmt(x) -> str:
    if isinstance(x, bool) or x is None:
        return str(x)
    if _is_int(x):
        return str(x) if x.bit_length() <= 200 else f"{str(x)[:20]}...({len(str(x))} digits)"
    if isinstance(x, float):
        return f"{x:.6g}"
    return str(x)


def _line(rec: dict) -> str:
    """What a check prints: the claim in words (:func:`tokensel_book.wording.claim_line`) and, when the book's
    recorded replication covers it, in how many fresh seeds it held (:func:`tokensel_book.replication.note`)."""
    kind = rec["kind"]
    if kind == MALFORMED:
        return f"[FAILED] {rec['name']}: {_fmt(rec['measured'])} (malformed claim)" + (
            f" ({rec['reason']})" if rec.get("reason") else ""
        )
    try:
        line = wording.claim_line(
            rec["name"],
            rec["measured"],
            rec["expected"],
            rec["tol"],
            kind,
            rec["passed"],
            deviation=bool(rec.get("deviation")),
            preregistered=bool(rec.get("preregistered")),
            reason=rec.get("reason"),
            label=rec.get("statement"),
            threshold=rec.get("threshold"),
            statement=None if rec["passed"] or not rec.get("statement") else wording.statement_title(rec["statement"]),
        )
    except TokenselError:
        line = f"[{'ok' if rec['passed'] else 'FAILED'}] {rec['name']}: {_fmt(rec['measured'])}"
    chapter = _state.get("chapter")
    if chapter and chapter != NO_CHAPTER:
        try:
            note = replication.note(book_root(), chapter, rec["name"])
        except Exception:  # noqa: BLE001 - the note is a courtesy; the claim is already recorded
            note = None
        if note:
            line += f"\n    ({note})"
    return line


def _append(rec: dict) -> None:
    if _state.get("chapter") is None:  # checked before start_chapter: recorded, and refused by verify
        _new_state(NO_CHAPTER, orphan=True)
    _state.setdefault("checks", []).append(rec)
    _write()


_FORMS = ("at_least", "at_most", "close_to")


def _form(expected, tol, kind, at_least, at_most, close_to, rel_tol) -> tuple:
    """``(expected, tol, kind)`` of a claim written in either form (see :func:`check`); raises
    :class:`~tokensel.errors.InvalidArgumentError` when the two forms are mixed or a keyword is misplaced."""
    given = {k: v for k, v in zip(_FORMS, (at_least, at_most, close_to), strict=True) if v is not None}
    if not given:
        if rel_tol is not None:
            raise InvalidArgumentError("rel_tol= goes with close_to=")
        if kind is None:  # check(name, flag) claims that flag is True; check(name, m, e, tol) is "abs"
            return (None, None, "true") if expected is None and tol is None else (expected, tol, "abs")
        return expected, tol, kind
    if len(given) > 1 or expected is not None or kind is not None:
        raise InvalidArgumentError(
            "write a claim in one form: one of at_least=, at_most=, close_to= (with tol= or rel_tol=), "
            f"or expected and kind=; got {sorted(given) + ['expected'] * (expected is not None)}"
            + (f" and kind={kind!r}" if kind is not None else "")
        )
    ((form, value),) = given.items()
    if form == "close_to":
        if (tol is None) == (rel_tol is None):
            raise InvalidArgumentError("close_to= needs exactly one of tol= (absolute) and rel_tol= (relative)")
        return value, (tol if tol is not None else rel_tol), ("abs" if tol is not None else "rel")
    if tol is not None or rel_tol is not None:
        raise InvalidArgumentError(f"{form}= takes no tolerance: tol= and rel_tol= go with close_to=")
    return value, None, ("ge" if form == "at_least" else "le")


def check(
    name: str,
    measured,
    expected=None,
    tol: float | None = None,
    kind: str | None = None,
    deviation: bool = False,
    preregistered: bool = False,
    *,
    at_least=None,
    at_most=None,
    close_to=None,
    rel_tol: float | None = None,
    statement: str | None = None,
    threshold: str | None = None,
):
    """Assert a numerical claim, record it, print one line, and return ``measured``.

    ``statement`` is the label of the statement the claim tests (a lemma, a definition, an equation:
    ``statement="lem-one-step"``): recorded with the claim, its line ends with ``(tests lem-one-step)``, which
    the book's HTML shows as a link to the statement by its number, and a failed claim prints the statement's
    kind and title (``tokensel_book.wording.statement_title``) and where its threshold came from.

    The comparison is said by one keyword: ``check(name, m, at_least=e)`` (``m >= e``),
    ``check(name, m, at_most=e)`` (``m <= e``), ``check(name, m, close_to=e, tol=t)`` (``|m - e| <= t``) or
    ``close_to=e, rel_tol=r`` (``|m - e| <= r |e|``), and ``check(name, flag)`` claims that ``flag`` is the
    boolean True. The older form ``check(name, m, expected, tol, kind)`` (``kind`` one of ``"abs"``,
    ``"rel"``, ``"le"``, ``"ge"``, ``"true"``) means the same; the two forms cannot be mixed.

    ``deviation=True`` marks a *tripwire*: the claim states an observed departure from the paper (e.g.
    "the values are NOT monotone at this size"). It is checked like any claim, so a change that restores
    the paper's behaviour fails the build and forces the text to be rewritten, and the status page lists
    it among the deviations, not among the results that hold.

    ``preregistered=True`` records that the threshold (expected value, tolerance, direction) was written
    down before the measured value had ever been seen; the status page lists every other claim as having
    a threshold set with a run in view.

    ``threshold`` is a short phrase saying where the threshold comes from (``threshold="the 30 % bound of
    Lemma 2.1 at eta0 = 30"``, ``"preregistered before the sweep"``): a non-empty string of at most 200
    characters on one line, recorded with the claim and shown on the status page. A failed claim prints it
    as ``where the threshold comes from: ...``; without it, that line gives the generic sentence for a
    preregistered threshold or for one set with a run in view
    (``tokensel_book.wording.THRESHOLD_ORIGIN``).

    Every call is recorded before anything can raise. A claim whose definition is malformed (no name,
    unknown kind, missing, NaN or negative tolerance, missing or NaN expected value, an expected value given
    to ``kind="true"``, a ``threshold`` that is not such a phrase) is recorded as failed and raises
    :class:`~tokensel.errors.InvalidArgumentError` (:class:`~tokensel.errors.ArgumentTypeError` for a value of
    the wrong type); one whose measurement is
    NaN, inf, non-numeric, unreadable or (for ``kind="true"``) not a boolean is recorded as failed and raises
    :class:`ClaimFailedError`. A claim checked before :func:`start_chapter` is recorded in a
    record of its own, which :func:`~tokensel_book.verification.verify` refuses.

    Introduced in chapter 01.
    """
    frame = inspect.currentframe()
    assert frame is not None  # None only on a Python without stack frames, which torch does not run on
    site = _site_of(frame.f_back)
    del frame  # a frame held in its own locals would wait for the garbage collector
    try:
        expected, tol, kind = _form(expected, tol, kind, at_least, at_most, close_to, rel_tol)
        if statement is not None and (not isinstance(statement, str) or not wording.LABEL.fullmatch(statement)):
            raise InvalidArgumentError(
                f"statement must be the label of the statement the claim tests, e.g. 'lem-one-step'; got {statement!r}"
            )
        rec, error = _claim(name, measured, expected, tol, kind, deviation, preregistered, threshold)
        if statement is not None:
            rec["statement"] = statement
    except Exception as exc:  # noqa: BLE001 - whatever went wrong, the claim is on record as failed
        detail = f"the claim could not be evaluated ({type(exc).__name__}: {_safe(str(exc))})"
        rec = dict(
            name=name if isinstance(name, str) and name.strip() else "<unnamed claim>",
            measured=_safe(measured),
            expected=_safe(expected),
            tol=_safe(tol),
            kind=MALFORMED,
            passed=False,
            malformed=True,
            reason=f"malformed claim: {detail}",
        )
        error = InvalidArgumentError(f"claim {rec['name']!r}: {detail}")
    rec["site"] = site
    _append(rec)
    line = _line(rec)
    print(line)
    if error is not None:
        raise error
    if not rec["passed"]:
        message = f"claim failed in chapter {_state.get('chapter')!r}: {line}"
        if config.claims_mode() == "report":
            _show_failure(message)
        else:
            raise ClaimFailedError(message)
    return measured


def _show_failure(message: str) -> None:
    """``TOKENSEL_CLAIMS=report``: make a failed claim impossible to miss and let the notebook run on
    (the record says it failed; ``end_chapter`` and ``python -m tokensel_book verify`` raise)."""
    import html
    import warnings

    try:
        from IPython import get_ipython
        from IPython.display import HTML, display

        shell = get_ipython()
    except ImportError:
        shell = None
    if shell is not None and type(shell).__name__ == "ZMQInteractiveShell":
        display(
            HTML(
                '<div style="border:2px solid #b00020;background:#fdecea;color:#5f0010;padding:0.5em 0.8em;'
                'font-weight:bold">' + html.escape(message) + "<br><span style='font-weight:normal'>The "
                "notebook runs on (TOKENSEL_CLAIMS=report); end_chapter() will list every failed claim."
                "</span></div>"
            )
        )
    else:
        warnings.warn(message, ClaimFailedWarning, stacklevel=3)


class ClaimFailedWarning(UserWarning):
    """A claim failed while ``TOKENSEL_CLAIMS=report``: shown, recorded, raised at ``end_chapter``."""
