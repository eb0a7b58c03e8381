"""Checked claims: assert a numerical claim and record it for the book's status page.

A chapter calls :func:`start_chapter` first, then :func:`check` for every claim, and
:func:`end_chapter` last. Each execution of a chapter writes one JSON record,
``<chapter>@<run id>.json``, in the results directory, so two processes executing chapters into one
folder never overwrite each other's records. ``make book`` sets ``$TOKENSEL_RESULTS_DIR`` to the book's
folder ``_build/checks``; a chapter run by hand (no ``$TOKENSEL_RESULTS_DIR``) records in the scratch folder
``_build/scratch/checks`` under the book root, so exploratory reruns never touch the book's records
(:func:`tokensel.config.results_dir`).

Every call of :func:`check` is on record before anything can raise: a claim that does not hold, and a
claim that is malformed (no name, unknown kind, a bad tolerance or expected value, values that cannot be
converted) are recorded as failed, with the reason, and then raise (:class:`~tokensel.errors.ClaimFailedError`,
or :class:`~tokensel.errors.InvalidArgumentError` for a malformed one). A claim checked before
:func:`start_chapter` is recorded too, in a record of its own that :func:`verify` refuses.

:func:`verify` (run by ``make book`` after the build, ``python -m tokensel verify``) fails on any recorded
failure, on any chapter that started but did not finish, on any record that is not valid (strict types,
its digest, a verdict its own numbers contradict) and on any claim the chapter's source makes but its
record lacks: every ``check(...)`` call site of a page's code cells (found in the ``.md`` source by
:func:`expected_claims`) must have recorded at least once, so a cell that failed before its check, or a
``check`` replaced by the chapter, fails the build. Each recorded claim carries its call site (``site``:
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
import json
import linecache
import math
import numbers
import os
import socket
import sys
import time
import uuid
from fractions import Fraction
from pathlib import Path

import numpy as np

from .. import config
from ..errors import ArgumentTypeError, ClaimFailedError, InvalidArgumentError, TokenselError
from ..files import write_json_atomic
from . import replication, wording

RESULTS_ENV = "TOKENSEL_RESULTS_DIR"
KINDS = ("abs", "rel", "le", "ge", "true")
MALFORMED = "malformed"
STAMP = "BUILD_STARTED"
NO_CHAPTER = "_no_chapter"  # the record of claims checked before any start_chapter()
SCHEMA = 2
MAX_INT_BITS = 12_000  # integers up to about 3,600 digits are recorded exactly (JSON, Python's str limit)
_state: dict = {"chapter": None, "checks": []}


def book_root(start: Path | None = None) -> Path:
    """The nearest folder at or above ``start`` (default: the working directory) with ``_config.yml``."""
    here = (start or Path.cwd()).resolve()
    for d in (here, *here.parents):
        if (d / "_config.yml").is_file():
            return d
    return here


def results_dir() -> Path:
    """Where this process records claims (:func:`tokensel.config.results_dir`: ``$TOKENSEL_RESULTS_DIR``,
    else the scratch folder of the book)."""
    return config.results_dir(book_root())


def book_results_dir() -> Path:
    """Where the book's build records claims and :func:`verify` reads them by default
    (:func:`tokensel.config.book_results_dir`)."""
    return config.book_results_dir(book_root())


def _lock(directory: Path):
    from filelock import FileLock

    directory.mkdir(parents=True, exist_ok=True)
    return FileLock(str(directory / ".records.lock"), timeout=120)


# ---------------------------------------------------------------------------------------------------------
# records: canonical content, digest, strict reading


def _canonical(rec: dict) -> str:
    return json.dumps(
        {k: v for k, v in rec.items() if k != "digest"},
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=True,
        allow_nan=True,
    )


def _digest(rec: dict) -> str:
    return hashlib.sha256(_canonical(rec).encode()).hexdigest()


def _sealed(rec: dict) -> dict:
    """``rec`` with the digest of its canonical content (what :func:`verify` recomputes)."""
    out = {k: v for k, v in rec.items() if k != "digest"}
    out["digest"] = _digest(out)
    return out


def _record() -> dict:
    keys = ("chapter", "run", "pid", "host", "started", "finished", "seconds", "orphan", "checks")
    return _sealed({"schema": SCHEMA, **{k: _state[k] for k in keys if k in _state}})


def _write() -> None:
    if _state.get("chapter") is None:
        return
    write_json_atomic(results_dir() / f"{_state['chapter']}@{_state['run']}.json", _record())


def _is_int(x) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _is_num(x) -> bool:
    return _is_int(x) or isinstance(x, float)


def _finite(x) -> bool:
    """Whether a recorded number is finite (an integer always is, however large)."""
    return _is_int(x) or (isinstance(x, float) and math.isfinite(x))


def _holds(m, e, tol, kind: str) -> bool:
    """Whether the recorded numbers satisfy the claim, in exact arithmetic (no rounding to floats)."""
    if isinstance(m, float) and not math.isfinite(m):
        return False
    M, E = Fraction(m), Fraction(e)
    if kind == "abs":
        return abs(M - E) <= Fraction(tol)
    if kind == "rel":
        return abs(M - E) <= Fraction(tol) * abs(E)
    if kind == "le":
        return M <= E
    return M >= E


def _verdict(c: dict) -> bool:
    """The verdict a recorded claim's own values give (what its ``passed`` must say)."""
    if c.get("malformed") or c["kind"] not in KINDS:
        return False
    if c["kind"] == "true":
        return c["measured"] is True and "reason" not in c
    if not _is_num(c["measured"]) or "reason" in c:
        return False
    return _holds(c["measured"], c["expected"], c["tol"], c["kind"])


_CHECK_FIELDS = {
    "name": str,
    "kind": str,
    "passed": bool,
    "deviation": bool,
    "preregistered": bool,
    "reason": str,
    "site": (str, type(None)),
    "malformed": bool,
    "measured": (bool, int, float, str, type(None)),
    "expected": (bool, int, float, str, type(None)),
    "tol": (bool, int, float, str, type(None)),
}
_RECORD_FIELDS = {
    "schema": int,
    "chapter": str,
    "run": str,
    "pid": int,
    "host": str,
    "started": (int, float),
    "finished": (int, float),
    "seconds": (int, float),
    "orphan": bool,
    "checks": list,
    "digest": str,
}


def _typed(value, kind) -> bool:
    kinds = kind if isinstance(kind, tuple) else (kind,)
    if isinstance(value, bool) and bool not in kinds:
        return False  # a boolean is an int to Python, not to a record
    return isinstance(value, kinds)


def record_problems(rec) -> list[str]:
    """Why ``rec`` (a record as read from JSON) is not a valid claim record: strict types (``"false"`` is not
    a boolean), the fields each claim needs, the digest of its content, and each claim's ``passed`` against
    the verdict of its own recorded values. Empty when it is valid."""
    if not isinstance(rec, dict):
        return [f"not a JSON object but {type(rec).__name__}"]
    out = [f"unknown field {k!r}" for k in rec if k not in _RECORD_FIELDS]
    for k, t in _RECORD_FIELDS.items():
        if k in rec and not _typed(rec[k], t):
            out.append(f"{k} must be {getattr(t, '__name__', t)}, got {type(rec[k]).__name__} {rec[k]!r:.60}")
        elif k not in rec and k not in ("finished", "seconds", "orphan"):
            out.append(f"{k} is missing")
    if out:
        return out
    if rec["schema"] != SCHEMA:
        out.append(f"schema {rec['schema']} is not {SCHEMA} (a record of another version of tokensel)")
    if rec["digest"] != _digest(rec):
        out.append("its digest does not match its content (the record was changed after it was written)")
    for i, c in enumerate(rec["checks"]):
        where = f"claim {i}" + (f" {c.get('name')!r}" if isinstance(c, dict) else "")
        if not isinstance(c, dict):
            out.append(f"{where} is not a JSON object")
            continue
        bad = [f"unknown field {k!r}" for k in c if k not in _CHECK_FIELDS]
        bad += [f"{k} is missing" for k in ("name", "measured", "expected", "tol", "kind", "passed") if k not in c]
        bad += [
            f"{k} must be of type {t}, got {type(c[k]).__name__}"
            for k, t in _CHECK_FIELDS.items()
            if k in c and not _typed(c[k], t)
        ]
        if not bad:
            ok_kind = c["kind"] in KINDS or (c["kind"] == MALFORMED and c.get("malformed") is True)
            if not ok_kind:
                bad.append(f"kind {c['kind']!r} is not one of {KINDS}")
            elif not c.get("malformed") and c["kind"] != "true":
                if not _finite(c["expected"]):
                    bad.append(f"expected must be a finite number, got {c['expected']!r}")
                if c["kind"] in ("abs", "rel") and not (_finite(c["tol"]) and c["tol"] >= 0):
                    bad.append(f"tol must be a finite number >= 0, got {c['tol']!r}")
                if c["kind"] in ("le", "ge") and c["tol"] is not None:
                    bad.append("a one-sided claim has no tolerance")
            if not bad and c["passed"] != _verdict(c):
                bad.append(f"passed is {c['passed']} but its recorded values say {_verdict(c)}")
        out += [f"{where}: {b}" for b in bad]
    return out


def _read(p: Path) -> tuple[dict | None, str | None]:
    """``(record, None)`` or ``(None, why it is refused)``; never raises on a bad file."""
    try:
        text = p.read_text()
        rec = json.loads(text)
    except (OSError, ValueError, RecursionError) as exc:
        return None, f"the claim record {str(p)!r} cannot be read ({exc}): rebuild the book"
    bad = record_problems(rec)
    if bad:
        return None, f"{str(p)!r} is not a valid claim record of tokensel ({'; '.join(bad[:5])}): rebuild the book"
    return rec, None


def _scan(directory: Path) -> tuple[list[dict], list[str]]:
    recs, bad = [], []
    for p in sorted(Path(directory).glob("*.json")):
        rec, why = _read(p)
        if why:
            bad.append(why)
        else:
            assert rec is not None  # _read gives a record exactly when it gives no reason
            recs.append({**rec, "_file": p.name})
    return sorted(recs, key=lambda r: r["started"]), bad


def load_results(directory: Path | None = None, chapter: str | None = None, file: str | None = None) -> list[dict]:
    """Every record in the results directory (of ``chapter`` only, or the one file ``file``, if given), sorted
    by start time. Each record carries its file name under ``_file``; an unreadable or invalid record (see
    :func:`record_problems`) raises :class:`~tokensel.errors.InvalidArgumentError` naming the file."""
    d = Path(directory or book_results_dir())
    if file is not None:
        if not isinstance(file, str) or Path(file).name != file or not file.endswith(".json"):
            raise InvalidArgumentError(f"file must be the name of a record file (NAME.json, no folder), got {file!r}")
        rec, why = _read(d / file)
        if why:
            raise InvalidArgumentError(why)
        assert rec is not None  # _read gives a record exactly when it gives no reason
        return [{**rec, "_file": file}]
    recs, bad = _scan(d)
    if bad:
        raise InvalidArgumentError(bad[0])
    return [r for r in recs if chapter is None or r["chapter"] == chapter]


def _alive(rec: dict) -> bool:
    """Whether the process that wrote an unfinished record may still be running (same host only)."""
    if rec.get("host") != socket.gethostname() or not isinstance(rec.get("pid"), int):
        return True
    try:
        os.kill(rec["pid"], 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


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
    """Begin recording the checks of ``chapter``.

    Earlier records of the same chapter are replaced when they hold no failed claim: finished ones,
    unfinished ones of this process (a notebook run again after an interrupted cell) and unfinished ones
    whose process has ended (a kernel that crashed). A record of a run still in progress in another
    process, a record holding a failed claim and a record that is not valid are kept (until the next build
    clears the folder), so running a setup cell twice never erases a failure. Claims the replaced run made
    are gone from the folder; :func:`verify` names each claim of the chapter's source that has no record.
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
            if old["chapter"] != chapter or any(not c["passed"] for c in old["checks"]):
                continue
            mine = old["pid"] == os.getpid() and old["host"] == socket.gethostname()
            if "finished" in old or mine or not _alive(old):
                (d / old["_file"]).unlink(missing_ok=True)
        _new_state(chapter)
        _write()


def end_chapter() -> float:
    """Finish the chapter's record and return its execution time in seconds.

    Raises :class:`~tokensel.errors.ClaimFailedError` if any claim of this run failed (even one whose
    exception was caught)."""
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


def _definition_problem(name, expected, tol, kind, deviation, preregistered):
    """``(error class, reason)`` when the claim is malformed, else ``(None, (expected, tol))`` converted."""
    if not isinstance(name, str) or not name.strip():
        return InvalidArgumentError, f"a claim needs a non-empty name, got {_safe(name, 60)}"
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


def _claim(name, measured, expected, tol, kind, deviation, preregistered) -> tuple[dict, Exception | None]:
    """The record of one claim and the error a malformed one raises (after it is recorded)."""
    error, detail = _definition_problem(name, expected, tol, kind, deviation, preregistered)
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
    """What a check prints: the claim in words (:func:`tokensel.book.wording.claim_line`) and, when the book's
    recorded replication covers it, in how many fresh seeds it held (:func:`tokensel.book.replication.note`)."""
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


def check(
    name: str,
    measured,
    expected=None,
    tol: float | None = None,
    kind: str = "abs",
    deviation: bool = False,
    preregistered: bool = False,
):
    """Assert a numerical claim, record it, print one line, and return ``measured``.

    ``deviation=True`` marks a *tripwire*: the claim states an observed departure from the paper (e.g.
    "the values are NOT monotone at this size"). It is checked like any claim, so a change that restores
    the paper's behaviour fails the build and forces the text to be rewritten, and the status page lists
    it among the deviations, not among the results that hold.

    ``preregistered=True`` records that the threshold (expected value, tolerance, direction) was written
    down before the measured value had ever been seen; the status page lists every other claim as having
    a threshold set with a run in view.

    Every call is recorded before anything can raise. A claim whose definition is malformed (no name,
    unknown kind, missing, NaN or negative tolerance, missing or NaN expected value, an expected value given
    to ``kind="true"``) is recorded as failed and raises :class:`~tokensel.errors.InvalidArgumentError`
    (:class:`~tokensel.errors.ArgumentTypeError` for a value of the wrong type); one whose measurement is
    NaN, inf, non-numeric, unreadable or (for ``kind="true"``) not a boolean is recorded as failed and raises
    :class:`~tokensel.errors.ClaimFailedError`. A claim checked before :func:`start_chapter` is recorded in a
    record of its own, which :func:`verify` refuses.
    """
    frame = inspect.currentframe()
    assert frame is not None  # None only on a Python without stack frames, which torch does not run on
    site = _site_of(frame.f_back)
    del frame  # a frame held in its own locals would wait for the garbage collector
    try:
        rec, error = _claim(name, measured, expected, tol, kind, deviation, preregistered)
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
    (the record says it failed; ``end_chapter`` and ``python -m tokensel verify`` raise)."""
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


def mark_build_start(directory: Path | None = None) -> None:
    """Clear the results directory and stamp the start of a build (the Makefile calls this)."""
    d = Path(directory or book_results_dir())
    with _lock(d):
        for p in d.glob("*.json"):
            p.unlink()
        write_json_atomic(d / STAMP, time.time())


CARRIED = "CARRIED_OVER"


def carry_over(records: list, directory: Path | None = None) -> list[str]:
    """Count records of an earlier build in this one: the execution cache (``tokensel.book.sphinx_execution``)
    reuses a chapter's cached outputs without executing it, and hands over the records that execution wrote.

    Each record file is copied into ``directory`` unchanged and listed, with its SHA-256, in ``CARRIED_OVER``
    under this build's stamp (:func:`mark_build_start` must have stamped it). Returns the copied file names."""
    import hashlib

    d = Path(directory or book_results_dir())
    stamp = _stamp(d)
    if stamp is None:
        raise InvalidArgumentError(f"{str(d)!r} has no build stamp: call mark_build_start first")
    with _lock(d):
        listed = _carried(d, stamp)
        for src in records:
            src = Path(src)
            rec = load_results(src.parent, file=src.name)[0]
            write_json_atomic(d / src.name, {k: v for k, v in rec.items() if k != "_file"})
            listed[src.name] = hashlib.sha256((d / src.name).read_bytes()).hexdigest()
        write_json_atomic(d / CARRIED, {"build": stamp, "records": listed})
    return list(listed)


def _carried(d: Path, stamp) -> dict:
    """``{file name: SHA-256}`` of the records carried over into the build stamped ``stamp`` (empty when none)."""
    f = d / CARRIED
    if stamp is None or not f.exists():
        return {}
    try:
        data = json.loads(f.read_text())
    except (OSError, ValueError) as exc:
        raise InvalidArgumentError(f"{str(f)!r} cannot be read ({exc}): rebuild the book") from exc
    if not (
        isinstance(data, dict)
        and isinstance(data.get("records"), dict)
        and all(isinstance(v, str) for v in data["records"].values())
    ):
        raise InvalidArgumentError(f"{str(f)!r} is not a list of carried-over records: rebuild the book")
    return dict(data["records"]) if data.get("build") == stamp else {}


def _stamp(d: Path):
    f = d / STAMP
    if not f.exists():
        return None
    try:
        return float(json.loads(f.read_text()))
    except (ValueError, TypeError):
        try:
            return float(f.read_text())
        except ValueError:
            raise InvalidArgumentError(f"{str(f)!r} is not a build stamp: rebuild the book") from None


def toc_files(root: Path | None = None) -> list[str]:
    """The book's pages as listed in ``_toc.yml`` (the one list of chapters), in order: paths relative to
    the book's root without suffix (``"book/01_model"``), the root page first."""
    import yaml

    root = root or book_root()
    toc = yaml.safe_load((root / "_toc.yml").read_text())
    files = [toc["root"]]

    def walk(entries):
        for e in entries or []:
            if "file" in e:
                files.append(e["file"])
            walk(e.get("sections"))

    walk(toc.get("chapters"))
    for part in toc.get("parts", []):
        walk(part.get("chapters"))
    return [str(Path(f).with_suffix("")) if Path(f).suffix in (".md", ".ipynb") else f for f in files]


def toc_numbers(root: Path | None = None) -> dict[str, int]:
    """The chapter number of every page in a ``numbered`` part of ``_toc.yml`` (as the sidebar shows it):
    ``{"book/01_model": 1, ...}``; pages outside numbered parts are absent."""
    import yaml

    root = root or book_root()
    toc = yaml.safe_load((root / "_toc.yml").read_text())
    numbered = [
        e["file"]
        for part in toc.get("parts", [])
        if part.get("numbered")
        for e in part.get("chapters") or []
        if "file" in e
    ]
    if (toc.get("options") or {}).get("numbered"):
        numbered += [e["file"] for e in toc.get("chapters") or [] if "file" in e]
    strip = [str(Path(f).with_suffix("")) if Path(f).suffix in (".md", ".ipynb") else f for f in numbered]
    return {page: k for k, page in enumerate(strip, 1)}


def toc_chapters(root: Path | None = None) -> list[str]:
    """Chapter names (file stems) listed in the book's ``_toc.yml``, in order."""
    return [Path(f).stem for f in toc_files(root)]


def _page_source(root: Path, page: str) -> Path | None:
    """The ``.md`` source of a page of ``_toc.yml`` (``"book/01_model"``)."""
    direct = root / f"{page}.md"
    if direct.is_file():
        return direct
    found = [
        p for p in sorted(root.glob(f"**/{Path(page).name}.md")) if "_build" not in p.parts and ".venv" not in p.parts
    ]
    return found[0] if found else None


def _skipped(cell) -> bool:
    return "skip-execution" in (cell.get("metadata", {}).get("tags") or [])


def _compiled(source: str) -> str:
    """A code cell as the kernel compiles it (IPython's input transformations: magics, ``!`` lines)."""
    try:
        from IPython.core.inputtransformer2 import TransformerManager
    except ImportError:
        return source
    return TransformerManager().transform_cell(source)


_PAGES: dict = {}


def page_claims(path: Path) -> tuple[list[str], dict[str, str], list[str]]:
    """What a chapter's ``.md`` source says it records: ``(chapter names started, {site: where}, problems)``.

    Every code cell (as jupytext reads it; cells tagged ``skip-execution`` are never run and are left out)
    is parsed; each ``check(...)`` call (``ts.check``, ``check``, ``tokensel.check``, ...) is a call site
    that the chapter's record must contain (see ``_site_of``), each ``start_chapter(...)`` names the
    chapter. A name that is not a string literal, or a cell that does not parse, is a problem."""
    path = Path(path)
    st = path.stat()
    key = (str(path.resolve()), st.st_mtime_ns, st.st_size)
    if key in _PAGES:
        return _PAGES[key]
    import jupytext

    names, sites, issues = [], {}, []
    nb = jupytext.read(path, fmt="md:myst") if path.suffix == ".md" else jupytext.read(path)
    k = 0
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        k += 1
        if _skipped(cell):
            continue
        try:
            code = _compiled(cell.source)
            tree = ast.parse(code)
        except SyntaxError as exc:
            issues.append(f"{path.name}: code cell {k} does not parse ({exc.msg}, line {exc.lineno})")
            continue
        for call in _calls(tree, "start_chapter"):
            arg = call.args[0] if call.args else next((kw.value for kw in call.keywords if kw.arg == "chapter"), None)
            if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                names.append(arg.value)
            else:
                issues.append(
                    f"{path.name}: code cell {k}, line {call.lineno}: start_chapter needs the chapter's "
                    f"name as a string literal (the build must know which chapter the page records)"
                )
        cell_key, calls = _cell_sites(code)
        lines = code.splitlines()
        for i, (line, *_rest) in enumerate(calls):
            snippet = lines[line - 1].strip() if line <= len(lines) else ""
            sites[f"{cell_key}:{i}"] = f"{path.name}, code cell {k}, line {line}: {snippet[:90]}"
    names = list(dict.fromkeys(names))
    if len(names) > 1:
        issues.append(f"{path.name}: starts {len(names)} chapters {names}; a page records one chapter")
    if sites and not names:
        issues.append(f'{path.name}: makes {len(sites)} claims but never calls start_chapter("...")')
    _PAGES[key] = (names, sites, issues)
    return _PAGES[key]


def expected_claims(root: Path | None = None, chapters: list[str] | None = None):
    """The claims the book's chapters must record: ``({chapter: {site: where}}, problems)`` from the
    ``.md`` source of every page of ``_toc.yml`` (see :func:`page_claims`); ``chapters`` keeps those only.
    Two pages that start the same chapter name are a problem."""
    root = root or book_root()
    out, issues = {}, []
    owner: dict[str, str] = {}
    for page in toc_files(root):
        src = _page_source(root, page)
        if src is None:
            continue
        names, sites, bad = page_claims(src)
        if chapters is not None and not set(names) & set(chapters):
            continue
        issues += bad
        for name in names[:1]:
            if name in owner:
                issues.append(f"{src.name} and {owner[name]} both start chapter {name!r}")
                continue
            owner[name] = src.name
            out[name] = dict(sites)
    return out, issues


def checked_chapters(root: Path | None = None) -> list[str]:
    """The names under which the chapters of ``_toc.yml`` record claims (their ``start_chapter("...")``,
    positional or ``chapter=``)."""
    return list(expected_claims(root)[0])


def _expectations(expected) -> tuple[dict[str, dict[str, str] | None], list[str]]:
    """``expected`` as ``{chapter: {site: where} or None}`` and the book's problems: None is the whole book;
    a dict is taken as given; a list of names takes each name's call sites from the book's pages where a
    page starts that chapter."""
    if expected is None:
        return expected_claims()
    if isinstance(expected, dict):
        return dict(expected), []
    if isinstance(expected, str) or not all(isinstance(c, str) for c in expected):
        raise ArgumentTypeError(f"expected must be a list of chapter names, got {expected!r}")
    try:
        book = expected_claims(chapters=list(expected))[0] if (book_root() / "_toc.yml").is_file() else {}
    except (OSError, ValueError, KeyError, TypeError, ImportError):
        book = {}
    return {c: book.get(c) for c in expected}, []


def _this_build(d: Path) -> tuple[list[dict], list[str]]:
    """The valid records that count in the build stamped in ``d`` (started after the stamp, or carried over
    into it by :func:`carry_over` and unchanged since), and the problems of the invalid ones."""
    import hashlib

    stamp = _stamp(d)
    carried = _carried(d, stamp)
    recs, bad = _scan(d)
    keep = [
        r
        for r in recs
        if stamp is None
        or r["started"] >= stamp
        or carried.get(r["_file"]) == hashlib.sha256((d / r["_file"]).read_bytes()).hexdigest()
    ]
    return keep, bad


def this_build(directory: Path | None = None) -> list[dict]:
    """The records that count in the build stamped in ``directory`` (``_this_build``); an invalid record
    raises :class:`~tokensel.errors.InvalidArgumentError` naming it."""
    recs, bad = _this_build(Path(directory or book_results_dir()))
    if bad:
        raise InvalidArgumentError(bad[0])
    return recs


def problems(expected, directory: Path | None = None) -> list[str]:
    """What stops the results from vouching for the book: records that are not valid (see
    :func:`record_problems`), problems of the chapters' sources (see :func:`expected_claims`), chapters of
    ``expected`` without a record from this build, claims checked before ``start_chapter``, records that
    started but did not finish, every failed claim (by name), and every claim of a chapter's source that its
    records of this build lack (a cell failed before it, or ``check`` was replaced).

    ``expected``: chapter names (call sites from the book's pages), ``{chapter: {site: where}}``, or None for
    every chapter of the book."""
    d = Path(directory or book_results_dir())
    want, out = _expectations(expected)
    recs, bad = _this_build(d)
    out = bad + out
    for ch in want:
        if not any(r["chapter"] == ch and not r.get("orphan") for r in recs):
            out.append(f"{ch}: no record from this build")
    for r in recs:
        if r.get("orphan"):
            out.append(
                f"claims checked before start_chapter() (recorded in {r['_file']}): {[c['name'] for c in r['checks']]}"
            )
            continue
        if "finished" not in r:
            out.append(f"{r['chapter']}: started but did not finish")
        for c in r["checks"]:
            if not c["passed"]:
                out.append(
                    f"{r['chapter']}: claim failed: {c['name']!r} "
                    f"(measured {c['measured']!r}, {c['kind']} {c['expected']!r}"
                    + (f" ± {c['tol']!r}" if c["tol"] is not None else "")
                    + (f"; {c['reason']}" if c.get("reason") else "")
                    + ")"
                )
    for ch, sites in want.items():
        recorded = {c.get("site") for r in recs if r["chapter"] == ch for c in r["checks"]}
        if sites and any(r["chapter"] == ch for r in recs):
            for site, where in sites.items():
                if site not in recorded:
                    out.append(
                        f"{ch}: the claim at {where} was never recorded (a cell failed before it, it "
                        f"never ran, or check was replaced)"
                    )
    return out


def verify(directory: Path | None = None, expected=None) -> tuple[int, int]:
    """Check the results of a build: return ``(claims that hold, chapters)``.

    ``expected`` as in :func:`problems` (default: every chapter of the book, with the call sites of its
    source). Raises :class:`~tokensel.errors.ClaimFailedError` listing every problem of :func:`problems`."""
    d = Path(directory or book_results_dir())
    found = problems(expected, d)
    if found:
        raise ClaimFailedError("the book's claims do not all hold:\n  " + "\n  ".join(found))
    recs, _ = _this_build(d)
    return sum(len(r["checks"]) for r in recs), len({r["chapter"] for r in recs})


def report(expected: list[str], directory: Path | None = None):
    """Tables for the status page: ``(claims, chapters)`` as DataFrames, from the latest record of each
    chapter in ``expected``.

    Raises :class:`~tokensel.errors.ClaimFailedError` when a chapter in ``expected`` has no complete record
    from this build, lacks a claim its source makes, or any recorded claim failed (so a status page cannot
    vouch for a failed or missing claim)."""
    import pandas as pd

    d = Path(directory or book_results_dir())
    found = problems(list(expected), d)
    if found:
        raise ClaimFailedError("the status page cannot vouch for every chapter: " + "; ".join(found))
    latest = {}
    for r in _this_build(d)[0]:
        latest[r["chapter"]] = r
    claims = pd.DataFrame(
        [
            dict(
                chapter=ch,
                **{k: c.get(k) for k in ("name", "measured", "expected", "tol", "kind", "passed")},
                deviation=bool(c.get("deviation", False)),
                preregistered=bool(c.get("preregistered", False)),
            )
            for ch in expected
            for c in latest[ch]["checks"]
        ],
        columns=["chapter", "name", "measured", "expected", "tol", "kind", "passed", "deviation", "preregistered"],
    )
    chapters = pd.DataFrame(
        [
            dict(
                chapter=ch,
                claims=len(latest[ch]["checks"]),
                passed=sum(c["passed"] for c in latest[ch]["checks"]),
                seconds=latest[ch]["seconds"],
            )
            for ch in expected
        ]
    )
    return claims, chapters


def paper_claims_table(claims, claim_map: dict):
    """The paper's claims against this build's checks: ``claim_map`` maps each claim of the paper to
    ``(where the book states it, [(chapter, name prefix), ...])``; a recorded check belongs to a claim when its
    chapter matches and its name starts with the prefix. One row per claim: where it is stated, how many checks
    test it, how many of them record deviations, and its status (``holds``; ``holds in part`` when some of its
    checks record deviations; ``deviates`` when all do; ``FAILED``; or ``not checked`` when no recorded check
    matches, so a renamed check cannot vanish silently)."""
    import pandas as pd

    if not isinstance(claim_map, dict) or not claim_map:
        raise InvalidArgumentError("claim_map must be a non-empty dict: claim -> (where stated, [(chapter, prefix)])")
    rows = []
    for claim, entry in claim_map.items():
        if not (
            isinstance(entry, tuple)
            and len(entry) == 2
            and isinstance(entry[0], str)
            and isinstance(entry[1], list)
            and entry[1]
        ):
            raise InvalidArgumentError(f"claim_map[{claim!r}] must be (where stated, [(chapter, name prefix), ...])")
        hit = pd.Series(False, index=claims.index)
        for chapter, prefix in entry[1]:
            hit |= (claims["chapter"] == chapter) & claims["name"].str.startswith(prefix)
        mine = claims[hit]
        dev = int(mine["deviation"].sum()) if "deviation" in mine else 0
        if mine.empty:
            status = "not checked"
        elif not mine["passed"].all():
            status = "FAILED"
        else:
            status = (
                "holds"
                if dev == 0
                else "deviates"
                if dev == len(mine)
                else f"holds in part ({dev} of {len(mine)} checks record deviations)"
            )
        rows.append(
            {
                "the paper's claim": claim,
                "stated in": entry[0],
                "checks": len(mine),
                "deviations": dev,
                "status": status,
            }
        )
    return pd.DataFrame(rows)


def build_info(root: Path | None = None) -> dict:
    """When and from what this build was made: ``built`` (UTC time of the build's start stamp, else now),
    ``commit`` (the git commit of the book's root, with ``+ local changes`` when the work tree differs;
    ``unknown`` outside a git checkout)."""
    import datetime
    import subprocess

    root = root or book_root()
    stamp = _stamp(book_results_dir()) if book_results_dir().is_dir() else None
    when = datetime.datetime.fromtimestamp(stamp or time.time(), tz=datetime.timezone.utc)
    try:

        def git(*args):
            return subprocess.run(
                ["git", *args], cwd=root, capture_output=True, text=True, timeout=20, check=True
            ).stdout

        commit = git("rev-parse", "--short=12", "HEAD").strip()
        if git("status", "--porcelain", "--untracked-files=no").strip():
            commit += " + local changes"
    except (OSError, subprocess.SubprocessError):
        commit = "unknown"
    return {"built": when.strftime("%Y-%m-%d %H:%M UTC"), "commit": commit}


RELATIONS = {
    "abs": "= expected ± tol",
    "rel": "= expected ± tol·|expected|",
    "le": "≤ expected",
    "ge": "≥ expected",
    "true": "holds",
    MALFORMED: "malformed claim",
}


def _shown(x) -> str:
    """A recorded number as the status page prints it (6 significant digits; blank for none)."""
    import pandas as pd

    if x is None or (isinstance(x, float) and pd.isna(x)):
        return ""
    return f"{x:.6g}" if isinstance(x, float) else str(x)


def claims_table(claims, deviations: bool | None = None, links: bool = False):
    """The status page's table of claims (from :func:`report`): one row per claim with its chapter, name,
    measured value, the relation it must satisfy, the expected value, the tolerance and its status:
    ``holds``, ``deviation`` (a tripwire that recorded a departure from the paper, see :func:`check`) or
    ``FAILED``; and when its threshold was set: ``before the first run`` (``preregistered=True`` in
    :func:`check`) or ``with a run in view``. ``deviations=False`` keeps the claims of the paper's results,
    ``True`` the deviations. ``links=True`` writes each chapter as an HTML link to its page (``<chapter>.html``,
    for a table rendered by the book's status page)."""
    import html

    if not isinstance(links, bool):
        raise ArgumentTypeError(f"links must be True or False, got {links!r}")
    if "deviation" not in claims:
        claims = claims.assign(deviation=False)
    if "preregistered" not in claims:
        claims = claims.assign(preregistered=False)
    if deviations is not None:
        claims = claims[claims["deviation"] == deviations]
    dev = claims["deviation"].astype(bool)
    status = claims["passed"].map({True: "holds", False: "FAILED"}).where(~(claims["passed"] & dev), "deviation")
    table = claims.assign(
        measured=claims["measured"].map(_shown),
        expected=claims["expected"].map(_shown),
        tol=claims["tol"].map(_shown),
        claim=claims["kind"].map(RELATIONS),
        status=status,
        threshold=claims["preregistered"].map({True: "before the first run", False: "with a run in view"}),
    )
    if links:
        table = table.assign(
            chapter=table["chapter"].map(lambda c: f'<a href="{html.escape(str(c))}.html">{html.escape(str(c))}</a>')
        )
    return table[["chapter", "name", "measured", "claim", "expected", "tol", "status", "threshold"]]


def main(argv=None) -> int:
    """``python -m tokensel verify [DIR] [--chapters A,B]``: exit 1 with every problem named, else print a
    summary. ``--chapters`` expects those chapters only (each with the claims of its source), not the whole
    book."""
    argv = list(sys.argv[1:] if argv is None else argv)
    chapters = None
    if "--chapters" in argv:
        i = argv.index("--chapters")
        if i + 1 >= len(argv):
            print("usage: python -m tokensel verify [RESULTS_DIR] [--chapters A,B]", file=sys.stderr)
            return 2
        chapters = [c for c in argv[i + 1].split(",") if c]
        del argv[i : i + 2]
    if not argv or argv[0] != "verify" or len(argv) > 2:
        print("usage: python -m tokensel verify [RESULTS_DIR] [--chapters A,B]", file=sys.stderr)
        return 2
    d = Path(argv[1]) if len(argv) == 2 else book_results_dir()
    try:
        if chapters is None:
            expected = None
        else:
            sites, issues = expected_claims(chapters=chapters)
            unknown = [c for c in chapters if c not in sites]
            if unknown:
                print(f"FAILED: no page of the book starts chapter(s) {unknown}", file=sys.stderr)
                return 1
            if issues:
                print("FAILED: the book's claims do not all hold:\n  " + "\n  ".join(issues), file=sys.stderr)
                return 1
            expected = sites
        n, chapters_seen = verify(d, expected)
    except ClaimFailedError as exc:
        print(f"FAILED: {exc}", file=sys.stderr)
        return 1
    except TokenselError as exc:
        print(f"FAILED: {exc}", file=sys.stderr)
        return 1
    print(f"book claims: {n} hold in {chapters_seen} chapters")
    return 0
