"""Checked claims: assert a numerical claim and record it for the book's status page.

A chapter calls :func:`start_chapter` first, then :func:`check` for every claim, and
:func:`end_chapter` last. Each execution of a chapter writes one JSON record,
``<chapter>@<run id>.json``, in the results directory (``$TOKENSEL_RESULTS_DIR``, else ``_build/checks``
under the book root, found by walking up to ``_config.yml``), so two processes executing chapters
into one folder never overwrite each other's records.

:func:`check` raises :class:`~tokensel.errors.ClaimFailedError` when the claim does not hold, so a false
claim stops its cell. It records the failure *before* raising, and :func:`verify` (run by
``make book`` after the build, ``python -m tokensel verify``) fails on any recorded failure
and on any chapter that started but did not finish: a failure caught by ``try``/``except`` or by a
cell tagged ``raises-exception`` still fails the build.

Comparison kinds: ``"abs"`` ``|m - e| <= tol``; ``"rel"`` ``|m - e| <= tol * |e|``; ``"le"``
``m <= e``; ``"ge"`` ``m >= e``; ``"true"`` ``m`` is the boolean ``True`` (``e`` and ``tol`` unused).
A NaN or infinite measurement never satisfies a claim; a truth value must be a real boolean (``"False"``
or ``[False]`` are refused, not read as true).
"""

from __future__ import annotations

import json
import math
import numbers
import os
import socket
import sys
import time
import uuid
from pathlib import Path

import numpy as np

from .. import config
from ..files import write_json_atomic
from ..errors import ArgumentTypeError, ClaimFailedError, InvalidArgumentError

RESULTS_ENV = "TOKENSEL_RESULTS_DIR"
KINDS = ("abs", "rel", "le", "ge", "true")
STAMP = "BUILD_STARTED"
_state: dict = {"chapter": None, "checks": []}


def book_root(start: Path | None = None) -> Path:
    """The nearest folder at or above ``start`` (default: the working directory) with ``_config.yml``."""
    here = (start or Path.cwd()).resolve()
    for d in (here, *here.parents):
        if (d / "_config.yml").is_file():
            return d
    return here


def results_dir() -> Path:
    """Where claims are recorded (:func:`tokensel.config.results_dir`)."""
    return config.results_dir(book_root())


def _lock(directory: Path):
    from filelock import FileLock

    directory.mkdir(parents=True, exist_ok=True)
    return FileLock(str(directory / ".records.lock"), timeout=120)


def _record() -> dict:
    keys = ("chapter", "run", "pid", "host", "started", "finished", "seconds", "checks")
    return {k: _state[k] for k in keys if k in _state}


def _write() -> None:
    if _state.get("chapter") is None:
        return
    write_json_atomic(results_dir() / f"{_state['chapter']}@{_state['run']}.json", _record())


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


def start_chapter(chapter: str) -> None:
    """Begin recording the checks of ``chapter``.

    Earlier records of the same chapter are replaced: finished ones, unfinished ones of this process (a
    notebook run again after an interrupted cell) and unfinished ones whose process has ended (a kernel
    that crashed). A record of a run still in progress in another process is kept.
    """
    if not isinstance(chapter, str) or not chapter.strip() or any(c in chapter for c in "/\\@"):
        raise InvalidArgumentError(f"chapter must be a plain name (no '/', '\\' or '@'), got {chapter!r}")
    d = results_dir()
    with _lock(d):
        for old in load_results(d, chapter=chapter):
            mine = old.get("pid") == os.getpid() and old.get("host") == socket.gethostname()
            if "finished" in old or mine or not _alive(old):
                (d / old["_file"]).unlink(missing_ok=True)
        _state.clear()
        _state.update(chapter=chapter, run=uuid.uuid4().hex[:12], pid=os.getpid(), host=socket.gethostname(),
                      started=time.time(), checks=[], t0=time.perf_counter())
        _write()


def end_chapter() -> float:
    """Finish the chapter's record and return its execution time in seconds.

    Raises :class:`~tokensel.errors.ClaimFailedError` if any claim of this run failed (even one whose
    exception was caught)."""
    if _state.get("chapter") is None:
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


def _fmt(x) -> str:
    if isinstance(x, bool) or x is None:
        return str(x)
    if isinstance(x, int):
        return str(x)
    if isinstance(x, float):
        return f"{x:.6g}"
    return repr(x)


def _scalar(x, what: str):
    """A 0-d tensor or array, or a numpy scalar, as a Python scalar; anything else unchanged."""
    if hasattr(x, "item") and hasattr(x, "shape"):
        if tuple(x.shape) != ():
            raise InvalidArgumentError(f"{what} must be a single number, got an array of shape {tuple(x.shape)}")
        return x.item()
    return x


def _real(x) -> bool:
    return isinstance(x, (numbers.Real, np.floating, np.integer)) and not isinstance(x, (bool, np.bool_))


def _evaluate(measured, expected, tol, kind):
    """``(ok, m, e, reason)``; ``reason`` explains a claim that cannot hold whatever the numbers."""
    if kind == "true":
        m = _scalar(measured, "a 'true' claim's measured value")
        if not isinstance(m, (bool, np.bool_)):
            return False, repr(m), None, f"a 'true' claim needs a boolean, got {type(measured).__name__} {m!r}"
        return bool(m), bool(m), None, None
    m = _scalar(measured, "measured")
    if not _real(m):
        return False, repr(m), expected, f"the measured value must be a real number, got {type(measured).__name__}"
    m = float(m)
    e = float(expected)
    if not math.isfinite(m):
        return False, m, e, "the measured value is not finite"
    if kind == "abs":
        return abs(m - e) <= tol, m, e, None
    if kind == "rel":
        return abs(m - e) <= tol * abs(e), m, e, None
    if kind == "le":
        return m <= e, m, e, None
    return m >= e, m, e, None


def check(name: str, measured, expected=None, tol: float | None = None, kind: str = "abs",
          deviation: bool = False, preregistered: bool = False):
    """Assert a numerical claim, record it, print one line, and return ``measured``.

    ``deviation=True`` marks a *tripwire*: the claim states an observed departure from the paper (e.g.
    "the values are NOT monotone at this size"). It is checked like any claim, so a change that restores
    the paper's behaviour fails the build and forces the text to be rewritten, and the status page lists
    it among the deviations, not among the results that hold.

    ``preregistered=True`` records that the threshold (expected value, tolerance, direction) was written
    down before the measured value had ever been seen; the status page lists every other claim as having
    a threshold set with a run in view.

    A claim whose definition is malformed (no name, unknown kind, missing or NaN expected value or
    tolerance) raises :class:`~tokensel.errors.InvalidArgumentError`; one whose measurement is NaN, inf,
    non-numeric or (for ``kind="true"``) not a boolean is recorded as failed and raises
    :class:`~tokensel.errors.ClaimFailedError`.
    """
    if not isinstance(name, str) or not name.strip():
        raise InvalidArgumentError(f"a claim needs a non-empty name, got {name!r}")
    if not isinstance(kind, str) or kind not in KINDS:
        raise InvalidArgumentError(f"claim {name!r}: kind must be one of {KINDS}, got {kind!r}")
    if not isinstance(deviation, bool):
        raise ArgumentTypeError(f"claim {name!r}: deviation must be True or False, got {deviation!r}")
    if not isinstance(preregistered, bool):
        raise ArgumentTypeError(f"claim {name!r}: preregistered must be True or False, got {preregistered!r}")
    if kind in ("abs", "rel"):
        tol = _scalar(tol, "tol")
        if tol is None or not _real(tol) or not math.isfinite(float(tol)) or float(tol) < 0:
            raise InvalidArgumentError(f"claim {name!r}: kind {kind!r} needs a tolerance tol >= 0 "
                                       f"(a finite number), got {tol!r}")
        tol = float(tol)
    elif tol is not None:
        raise InvalidArgumentError(f"claim {name!r}: kind {kind!r} takes no tolerance; got tol={tol!r}")
    if kind == "true":
        if expected is not None:
            raise InvalidArgumentError(f"claim {name!r}: kind 'true' takes no expected value; got {expected!r}")
    else:
        expected = _scalar(expected, "expected")
        if expected is None:
            raise InvalidArgumentError(f"claim {name!r}: kind {kind!r} needs an expected value")
        if not _real(expected):
            raise ArgumentTypeError(f"claim {name!r}: expected must be a real number, got "
                                    f"{type(expected).__name__} {expected!r}")
        if not math.isfinite(float(expected)):
            raise InvalidArgumentError(f"claim {name!r}: expected must be finite, got {expected!r}")
    try:
        ok, m, e, reason = _evaluate(measured, expected, tol, kind)
    except InvalidArgumentError as exc:  # an array where one value belongs: the claim cannot hold
        ok, m, e, reason = False, repr(measured)[:80], expected, str(exc)
    rec = dict(name=name, measured=m, expected=e, tol=tol, kind=kind, passed=bool(ok))
    if deviation:
        rec["deviation"] = True
    if preregistered:
        rec["preregistered"] = True
    if reason:
        rec["reason"] = reason
    _state.setdefault("checks", []).append(rec)
    _write()
    rel = {"abs": f"= {_fmt(e)} ± {_fmt(tol)}", "rel": f"= {_fmt(e)} ± {_fmt(tol)} (relative)",
           "le": f"<= {_fmt(e)}", "ge": f">= {_fmt(e)}", "true": "holds"}[kind]
    verdict = ("deviation" if deviation else "ok") if ok else "FAILED"
    line = f"[{verdict}] {name}: {_fmt(m)} {rel}" + (f" ({reason})" if reason else "")
    print(line)
    if not ok:
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
        display(HTML('<div style="border:2px solid #b00020;background:#fdecea;color:#5f0010;padding:0.5em 0.8em;'
                     'font-weight:bold">' + html.escape(message) + "<br><span style='font-weight:normal'>The "
                     "notebook runs on (TOKENSEL_CLAIMS=report); end_chapter() will list every failed claim."
                     "</span></div>"))
    else:
        warnings.warn(message, ClaimFailedWarning, stacklevel=3)


class ClaimFailedWarning(UserWarning):
    """A claim failed while ``TOKENSEL_CLAIMS=report``: shown, recorded, raised at ``end_chapter``."""


def load_results(directory: Path | None = None, chapter: str | None = None, file: str | None = None) -> list[dict]:
    """Every record in the results directory (of ``chapter`` only, or the one file ``file``, if given), sorted
    by start time.
    Each record carries its file name under ``_file``; an unreadable record raises
    :class:`~tokensel.errors.InvalidArgumentError` naming the file."""
    d = Path(directory or results_dir())
    recs = []
    if file is not None and (not isinstance(file, str) or Path(file).name != file or not file.endswith(".json")):
        raise InvalidArgumentError(f"file must be the name of a record file (NAME.json, no folder), got {file!r}")
    for p in [d / file] if file is not None else sorted(d.glob("*.json")):
        try:
            r = json.loads(p.read_text())
        except (OSError, ValueError) as exc:
            raise InvalidArgumentError(f"the claim record {str(p)!r} cannot be read ({exc}): rebuild the book") from exc
        if not isinstance(r, dict) or not isinstance(r.get("chapter"), str) or not isinstance(r.get("checks"), list):
            raise InvalidArgumentError(f"{str(p)!r} is not a claim record of tokensel: rebuild the book")
        if chapter is None or r["chapter"] == chapter:
            recs.append({**r, "_file": p.name})
    return sorted(recs, key=lambda r: r.get("started", 0))


def mark_build_start(directory: Path | None = None) -> None:
    """Clear the results directory and stamp the start of a build (the Makefile calls this)."""
    d = Path(directory or results_dir())
    with _lock(d):
        for p in d.glob("*.json"):
            p.unlink()
        write_json_atomic(d / STAMP, time.time())


CARRIED = "CARRIED_OVER"


def carry_over(records: list, directory: Path | None = None) -> list[str]:
    """Count records of an earlier build in this one: the execution cache (:mod:`tokensel.book.sphinx_execution`)
    reuses a chapter's cached outputs without executing it, and hands over the records that execution wrote.

    Each record file is copied into ``directory`` unchanged and listed, with its SHA-256, in ``CARRIED_OVER``
    under this build's stamp (:func:`mark_build_start` must have stamped it). Returns the copied file names."""
    import hashlib

    d = Path(directory or results_dir())
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
    if not (isinstance(data, dict) and isinstance(data.get("records"), dict)
            and all(isinstance(v, str) for v in data["records"].values())):
        raise InvalidArgumentError(f"{str(f)!r} is not a list of carried-over records: rebuild the book")
    return dict(data["records"]) if data.get("build") == stamp else {}


def this_build(directory: Path | None = None) -> list[dict]:
    """The records that count in the build stamped in ``directory``: those started after the stamp, and those
    carried over into it (:func:`carry_over`) whose content is still what was carried over; all records when
    there is no stamp."""
    import hashlib

    d = Path(directory or results_dir())
    stamp = _stamp(d)
    carried = _carried(d, stamp)
    return [r for r in load_results(d) if stamp is None or r.get("started", 0) >= stamp
            or carried.get(r["_file"]) == hashlib.sha256((d / r["_file"]).read_bytes()).hexdigest()]


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
    numbered = [e["file"] for part in toc.get("parts", []) if part.get("numbered")
                for e in part.get("chapters") or [] if "file" in e]
    if (toc.get("options") or {}).get("numbered"):
        numbered += [e["file"] for e in toc.get("chapters") or [] if "file" in e]
    strip = [str(Path(f).with_suffix("")) if Path(f).suffix in (".md", ".ipynb") else f for f in numbered]
    return {page: k for k, page in enumerate(strip, 1)}


def toc_chapters(root: Path | None = None) -> list[str]:
    """Chapter names (file stems) listed in the book's ``_toc.yml``, in order."""
    return [Path(f).stem for f in toc_files(root)]


def checked_chapters(root: Path | None = None) -> list[str]:
    """The names under which the chapters of ``_toc.yml`` record claims (their ``start_chapter("...")``)."""
    import re

    root = root or book_root()
    out = []
    for stem in toc_chapters(root):
        src = [p for p in sorted(root.glob(f"**/{stem}.md")) if "_build" not in p.parts and ".venv" not in p.parts]
        if src:
            out += re.findall(r"""start_chapter\(\s*["']([^"']+)["']\s*\)""", src[0].read_text())
    return out


def problems(expected: list[str], directory: Path | None = None) -> list[str]:
    """What stops the results from vouching for the book: chapters of ``expected`` without a record from
    this build, records that started but did not finish, and every failed claim (by name)."""
    d = Path(directory or results_dir())
    recs = this_build(d)
    out = []
    for ch in expected:
        if not any(r["chapter"] == ch for r in recs):
            out.append(f"{ch}: no record from this build")
    for r in recs:
        if "finished" not in r:
            out.append(f"{r['chapter']}: started but did not finish")
        for c in r["checks"]:
            if not c.get("passed"):
                out.append(f"{r['chapter']}: claim failed: {c.get('name')!r} "
                           f"(measured {c.get('measured')!r}, {c.get('kind')} {c.get('expected')!r}"
                           + (f" ± {c['tol']!r}" if c.get("tol") is not None else "")
                           + (f"; {c['reason']}" if c.get("reason") else "") + ")")
    return out


def verify(directory: Path | None = None, expected: list[str] | None = None) -> int:
    """Check the results of a build: return ``(claims that hold, chapters)``.

    Raises :class:`~tokensel.errors.ClaimFailedError` listing every problem of :func:`problems`."""
    d = Path(directory or results_dir())
    expected = checked_chapters() if expected is None else expected
    found = problems(expected, d)
    if found:
        raise ClaimFailedError("the book's claims do not all hold:\n  " + "\n  ".join(found))
    recs = this_build(d)
    return sum(len(r["checks"]) for r in recs), len({r["chapter"] for r in recs})


def report(expected: list[str], directory: Path | None = None):
    """Tables for the status page: ``(claims, chapters)`` as DataFrames, from the latest record of each
    chapter in ``expected``.

    Raises :class:`~tokensel.errors.ClaimFailedError` when a chapter in ``expected`` has no complete record
    from this build, or any recorded claim failed (so a status page cannot vouch for a failed claim)."""
    import pandas as pd

    d = Path(directory or results_dir())
    found = problems(expected, d)
    if found:
        raise ClaimFailedError("the status page cannot vouch for every chapter: " + "; ".join(found))
    latest = {r["chapter"]: r for r in this_build(d)}
    claims = pd.DataFrame([dict(chapter=ch, **{k: c.get(k) for k in ("name", "measured", "expected", "tol",
                                                                      "kind", "passed")},
                                deviation=bool(c.get("deviation", False)),
                                preregistered=bool(c.get("preregistered", False)))
                           for ch in expected for c in latest[ch]["checks"]],
                          columns=["chapter", "name", "measured", "expected", "tol", "kind", "passed", "deviation",
                                   "preregistered"])
    chapters = pd.DataFrame([dict(chapter=ch, claims=len(latest[ch]["checks"]),
                                  passed=sum(c["passed"] for c in latest[ch]["checks"]),
                                  seconds=latest[ch]["seconds"]) for ch in expected])
    return claims, chapters


def paper_claims_table(claims, claim_map: dict):
    """The paper's claims against this build's checks: ``claim_map`` maps each claim of the paper to
    ``(where the book states it, [(chapter, name prefix), ...])``; a recorded check belongs to a claim when its
    chapter matches and its name starts with the prefix. One row per claim: where it is stated, how many checks
    test it, how many of them record deviations, and its status (``holds``; ``holds in part`` when some of its
    checks record deviations; ``deviates`` when all do; ``FAILED``; or ``not checked`` when no recorded check matches, so a renamed check cannot vanish silently)."""
    import pandas as pd

    if not isinstance(claim_map, dict) or not claim_map:
        raise InvalidArgumentError("claim_map must be a non-empty dict: claim -> (where stated, [(chapter, prefix)])")
    rows = []
    for claim, entry in claim_map.items():
        if not (isinstance(entry, tuple) and len(entry) == 2 and isinstance(entry[0], str)
                and isinstance(entry[1], list) and entry[1]):
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
            status = ("holds" if dev == 0 else "deviates" if dev == len(mine)
                      else f"holds in part ({dev} of {len(mine)} checks record deviations)")
        rows.append({"the paper's claim": claim, "stated in": entry[0], "checks": len(mine), "deviations": dev,
                     "status": status})
    return pd.DataFrame(rows)


def build_info(root: Path | None = None) -> dict:
    """When and from what this build was made: ``built`` (UTC time of the build's start stamp, else now),
    ``commit`` (the git commit of the book's root, with ``+ local changes`` when the work tree differs;
    ``unknown`` outside a git checkout)."""
    import datetime
    import subprocess

    root = root or book_root()
    stamp = _stamp(results_dir()) if results_dir().is_dir() else None
    when = datetime.datetime.fromtimestamp(stamp or time.time(), tz=datetime.timezone.utc)
    try:
        def git(*args):
            return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, timeout=20, check=True).stdout

        commit = git("rev-parse", "--short=12", "HEAD").strip()
        if git("status", "--porcelain", "--untracked-files=no").strip():
            commit += " + local changes"
    except (OSError, subprocess.SubprocessError):
        commit = "unknown"
    return {"built": when.strftime("%Y-%m-%d %H:%M UTC"), "commit": commit}


RELATIONS = {"abs": "= expected ± tol", "rel": "= expected ± tol·|expected|", "le": "≤ expected",
             "ge": "≥ expected", "true": "holds"}


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
        measured=claims["measured"].map(_shown), expected=claims["expected"].map(_shown),
        tol=claims["tol"].map(_shown), claim=claims["kind"].map(RELATIONS), status=status,
        threshold=claims["preregistered"].map({True: "before the first run", False: "with a run in view"}))
    if links:
        table = table.assign(chapter=table["chapter"].map(
            lambda c: f'<a href="{html.escape(str(c))}.html">{html.escape(str(c))}</a>'))
    return table[["chapter", "name", "measured", "claim", "expected", "tol", "status", "threshold"]]


def main(argv=None) -> int:
    """``python -m tokensel verify [DIR]``: exit 1 with every problem named, else print a summary."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] != "verify" or len(argv) > 2:
        print("usage: python -m tokensel verify [RESULTS_DIR]", file=sys.stderr)
        return 2
    d = Path(argv[1]) if len(argv) == 2 else results_dir()
    try:
        n, chapters = verify(d)
    except ClaimFailedError as exc:
        print(f"FAILED: {exc}", file=sys.stderr)
        return 1
    print(f"book claims: {n} hold in {chapters} chapters")
    return 0

