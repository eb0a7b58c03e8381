"""Claim records: one JSON file per execution of a chapter, its schema and digest, read back strictly.

:func:`load_results` reads a folder of records; :func:`record_problems` says what is wrong with one (strict
types, its digest, a verdict its own numbers contradict: tamper-evident against accidental and hand edits,
not against an author who recomputes the unkeyed digest, see ``_digest``); :func:`mark_build_start`,
:func:`carry_over` and :func:`this_build` tell this build's records from older ones (the execution cache
carries a reused chapter's records over). Written by :mod:`tokensel_book.checks`, verified by
:mod:`tokensel_book.verification`.
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

from tokensel import config
from tokensel.errors import ArgumentTypeError, InvalidArgumentError, StorageError
from tokensel.files import check_regular_file, describe_os_error, lock, write_json_atomic

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
    """Where the book's build records claims and :func:`~tokensel_book.verification.verify` reads them by default
    (:func:`tokensel.config.book_results_dir`)."""
    return config.book_results_dir(book_root())


LOCK = ".records.lock"


def _lock(directory: Path):
    """The results folder's lock (created with its folder): every change of which records are in the folder
    (a run's start, a build's start, a carry-over) is made under it. A folder that cannot be used (a file in
    its place, unwritable, a full disk, the lock's path taken by a folder) raises
    :class:`~tokensel.errors.StorageError` (:func:`tokensel.files.lock`)."""
    return lock(Path(directory), LOCK, timeout=120)


def _canonical(rec: dict) -> str:
    return json.dumps(
        {k: v for k, v in rec.items() if k != "digest"},
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=True,
        allow_nan=True,
    )


def _digest(rec: dict) -> str:
    """The SHA-256 of a record's canonical content. Not keyed, on purpose: it makes a record tamper-evident
    against accidental and hand edits (with the strict types and the verdict recomputed from the recorded
    numbers, :func:`record_problems`), not against a hostile author, who could recompute it, as they could
    hard-code a chapter's numbers; a key readable by the chapters' code (in the repository or the build
    folder) would not stop them, and one kept elsewhere would not survive a fresh clone."""
    return hashlib.sha256(_canonical(rec).encode()).hexdigest()


def _sealed(rec: dict) -> dict:
    """``rec`` with the digest of its canonical content (what :func:`~tokensel_book.verification.verify` recomputes)."""
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
    "threshold": str,
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
    "interrupted": list,
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
        elif k not in rec and k not in ("finished", "seconds", "orphan", "interrupted"):
            out.append(f"{k} is missing")
    if out:
        return out
    out += [
        f"{k} must be a finite number, got {rec[k]!r}"
        for k in ("started", "finished", "seconds")
        if k in rec and not _finite(rec[k])
    ]
    if not all(isinstance(x, str) for x in rec.get("interrupted", [])):
        out.append("interrupted must be a list of strings (the errors of cells that make claims)")
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
    """``(record, None)`` or ``(None, why it is refused)``; never raises on a bad file (a FIFO, a folder or
    a dangling link in a record's place is refused without being opened)."""
    rec, why, _ = _read_bytes(p)
    return rec, why


class _Vanished(Exception):
    """A record file listed a moment ago is gone (another process cleared or replaced the folder's records)."""


def _read_bytes(p: Path) -> tuple[dict | None, str | None, bytes]:
    """``_read`` and the bytes it read (what :func:`carry_over` fingerprints). Raises :class:`_Vanished`
    when there is no file at ``p`` any more. A file found missing and then there again (another process cleared
    the folder and a run wrote its record again in between) is read again, once."""
    for look in (1, 2):
        try:
            check_regular_file(p, "the claim record")
            data = p.read_bytes()
            break
        except StorageError as exc:
            if not os.path.lexists(p):
                raise _Vanished(str(p)) from None
            if look == 1:  # cleared and written again between the check and the second look: look again
                continue
            return None, f"{exc} Rebuild the book.", b""
        except FileNotFoundError:
            raise _Vanished(str(p)) from None
        except OSError as exc:
            return None, f"the claim record {str(p)!r} cannot be read ({describe_os_error(exc)}): rebuild the book", b""
    try:
        rec = json.loads(data.decode("utf-8"))
    except (ValueError, RecursionError) as exc:
        return None, f"the claim record {str(p)!r} cannot be read ({type(exc).__name__}: {exc}): rebuild the book", data
    try:
        bad = record_problems(rec)
    except RecursionError:
        bad = ["it is nested too deeply"]
    if bad:
        return (
            None,
            f"{str(p)!r} is not a valid claim record of tokensel ({'; '.join(bad[:5])}): rebuild the book",
            data,
        )
    return rec, None, data


def _folder(directory: Path) -> Path:
    """``directory`` as a results folder to read: missing is empty; anything but a folder in its place
    raises :class:`~tokensel.errors.StorageError`."""
    d = Path(directory)
    if os.path.lexists(d) and not d.is_dir():
        raise StorageError(
            f"the results folder {str(d)!r} is not a folder: remove what is in its place or choose another folder"
        )
    return d


def _scan(directory: Path, digests: dict | None = None) -> tuple[list[dict], list[str]]:
    """The valid records of ``directory`` (each with its file name under ``_file``) and why each invalid one is
    refused. A file that vanishes while it is read (another process cleared the folder under its lock) was
    not there: the reader sees the folder as it was just after. ``digests``, if given, receives the SHA-256
    of the bytes each valid record was read from."""
    recs, bad = [], []
    for p in sorted(_folder(directory).glob("*.json")):
        try:
            rec, why, data = _read_bytes(p)
        except _Vanished:
            continue
        if why:
            bad.append(why)
        else:
            assert rec is not None  # _read gives a record exactly when it gives no reason
            recs.append({**rec, "_file": p.name})
            if digests is not None:
                digests[p.name] = hashlib.sha256(data).hexdigest()
    return sorted(recs, key=lambda r: r["started"]), bad


def load_results(directory: Path | None = None, chapter: str | None = None, file: str | None = None) -> list[dict]:
    """Every record in the results directory (of ``chapter`` only, or the one file ``file``, if given), sorted
    by start time. Each record carries its file name under ``_file``; an unreadable or invalid record (see
    :func:`record_problems`) raises :class:`~tokensel.errors.InvalidArgumentError` naming the file."""
    d = Path(directory or book_results_dir())
    if file is not None:
        if not isinstance(file, str) or Path(file).name != file or not file.endswith(".json"):
            raise InvalidArgumentError(f"file must be the name of a record file (NAME.json, no folder), got {file!r}")
        try:
            rec, why = _read(d / file)
        except _Vanished:
            rec, why = None, f"the claim record {str(d / file)!r} does not exist"
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
    """Clear the results directory and stamp the start of a build (the Makefile calls this). A run that
    started before the stamp never counts in this build, even if it writes its record again afterwards."""
    d = Path(directory or book_results_dir())
    with _lock(d):
        for p in d.glob("*.json"):
            try:
                p.unlink(missing_ok=True)
            except OSError as exc:
                raise StorageError(
                    f"cannot clear the claim record {str(p)!r} ({describe_os_error(exc)}): remove it by hand"
                ) from exc
        write_json_atomic(d / STAMP, time.time())


CARRIED = "CARRIED_OVER"


def carry_over(records: list, directory: Path | None = None) -> list[str]:
    """Count records of an earlier build in this one: the execution cache (``tokensel_book.sphinx_execution``)
    reuses a chapter's cached outputs without executing it, and hands over the records that execution wrote.

    Each record file is copied into ``directory`` unchanged and listed, with its SHA-256, in ``CARRIED_OVER``
    under this build's stamp (:func:`mark_build_start` must have stamped it). Every record is read and checked
    before anything is written; the stamp is read under the folder's lock, so a build started meanwhile
    is the one the records are carried into. Returns the copied file names."""
    if isinstance(records, (str, bytes, os.PathLike)) or not isinstance(records, (list, tuple)):
        raise ArgumentTypeError(f"records must be a list of record files, got {type(records).__name__}")
    if not all(isinstance(src, (str, os.PathLike)) for src in records):
        raise ArgumentTypeError(f"records must be a list of paths of record files, got {records!r:.200}")
    d = Path(directory or book_results_dir())
    copies = [(Path(src).name, load_results(Path(src).parent, file=Path(src).name)[0]) for src in records]
    with _lock(d):
        stamp = _stamp(d)
        if stamp is None:
            raise InvalidArgumentError(f"{str(d)!r} has no build stamp: call mark_build_start first")
        listed = _carried(d, stamp)
        for name, rec in copies:
            write_json_atomic(d / name, {k: v for k, v in rec.items() if k != "_file"})
            listed[name] = hashlib.sha256((d / name).read_bytes()).hexdigest()
        write_json_atomic(d / CARRIED, {"build": stamp, "records": listed})
    return list(listed)


def _small_file(f: Path, what: str) -> bytes | None:
    """The bytes of the bookkeeping file ``f`` (None when there is none); anything but a regular file in its
    place, or a file that cannot be read, raises :class:`~tokensel.errors.InvalidArgumentError`."""
    if not os.path.lexists(f):
        return None
    try:
        check_regular_file(f, what)
        return f.read_bytes()
    except FileNotFoundError:
        return None  # replaced at this moment by another process: as if read just before
    except OSError as exc:  # StorageError too
        if not os.path.lexists(f):
            return None  # replaced at this moment by another process: as if read just before
        raise InvalidArgumentError(f"{exc} Rebuild the book.") from exc


def _carried(d: Path, stamp) -> dict:
    """``{file name: SHA-256}`` of the records carried over into the build stamped ``stamp`` (empty when none)."""
    f = d / CARRIED
    raw = None if stamp is None else _small_file(f, "the list of carried-over records")
    if raw is None:
        return {}
    try:
        data = json.loads(raw.decode("utf-8"))
    except (ValueError, RecursionError) as exc:
        raise InvalidArgumentError(f"{str(f)!r} cannot be read ({exc}): rebuild the book") from exc
    if not (
        isinstance(data, dict)
        and isinstance(data.get("records"), dict)
        and all(isinstance(v, str) for v in data["records"].values())
    ):
        raise InvalidArgumentError(f"{str(f)!r} is not a list of carried-over records: rebuild the book")
    return dict(data["records"]) if data.get("build") == stamp else {}


def _stamp(d: Path):
    """The time the build of ``d`` started (:func:`mark_build_start`), None when it was never stamped."""
    f = d / STAMP
    raw = _small_file(f, "the build stamp")
    if raw is None:
        return None
    try:
        value = json.loads(raw.decode("utf-8"))
    except (ValueError, RecursionError):
        value = None
    if not _is_num(value) or not _finite(value):
        raise InvalidArgumentError(f"{str(f)!r} is not a build stamp: rebuild the book")
    return float(value)


def _this_build(d: Path) -> tuple[list[dict], list[str]]:
    """The valid records that count in the build stamped in ``d`` (started after the stamp, or carried over
    into it by :func:`carry_over` and unchanged since), and the problems of the invalid ones."""
    stamp = _stamp(d)
    carried = _carried(d, stamp)
    digests: dict[str, str] = {}
    recs, bad = _scan(d, digests)
    keep = [r for r in recs if stamp is None or r["started"] >= stamp or carried.get(r["_file"]) == digests[r["_file"]]]
    return keep, bad


def this_build(directory: Path | None = None) -> list[dict]:
    """The records that count in the build stamped in ``directory`` (``_this_build``); an invalid record
    raises :class:`~tokensel.errors.InvalidArgumentError` naming it."""
    recs, bad = _this_build(Path(directory or book_results_dir()))
    if bad:
        raise InvalidArgumentError(bad[0])
    return recs
