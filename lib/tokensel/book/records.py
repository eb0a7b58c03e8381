"""Claim records: one JSON file per execution of a chapter, its schema and digest, read back strictly.

:func:`load_results` reads a folder of records; :func:`record_problems` says what is wrong with one (strict
types, its digest, a verdict its own numbers contradict); :func:`mark_build_start`, :func:`carry_over` and
:func:`this_build` tell this build's records from older ones (the execution cache carries a reused chapter's
records over). Written by :mod:`tokensel.book.checks`, verified by :mod:`tokensel.book.verification`.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import socket
import time
from fractions import Fraction
from pathlib import Path

from .. import config
from ..errors import InvalidArgumentError
from ..files import write_json_atomic

RESULTS_ENV = "TOKENSEL_RESULTS_DIR"


KINDS = ("abs", "rel", "le", "ge", "true")


MALFORMED = "malformed"


STAMP = "BUILD_STARTED"


NO_CHAPTER = "_no_chapter"  # the record of claims checked before any start_chapter()


SCHEMA = 2


MAX_INT_BITS = 12_000  # integers up to about 3,600 digits are recorded exactly (JSON, Python's str limit)


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
    """Where the book's build records claims and :func:`~tokensel.book.verification.verify` reads them by default
    (:func:`tokensel.config.book_results_dir`)."""
    return config.book_results_dir(book_root())


def _lock(directory: Path):
    from filelock import FileLock

    directory.mkdir(parents=True, exist_ok=True)
    return FileLock(str(directory / ".records.lock"), timeout=120)


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
    """``rec`` with the digest of its canonical content (what :func:`~tokensel.book.verification.verify` recomputes)."""
    out = {k: v for k, v in rec.items() if k != "digest"}
    out["digest"] = _digest(out)
    return out


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
    "statement": str,
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
