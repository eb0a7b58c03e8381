"""Checked claims: assert a numerical claim and record it for the book's status page.

A chapter calls :func:`start_chapter` first, then :func:`check` for every claim, and
:func:`end_chapter` last. Each chapter's record is one JSON file in the results directory
(``$TOKENSEL_RESULTS_DIR``, else ``_build/checks`` under the book root, found by walking up to
``_config.yml``). :func:`check` raises :class:`~tokensel.errors.ClaimFailedError` when the claim does
not hold, so a false claim fails the executed build.

Comparison kinds: ``"abs"`` ``|m - e| <= tol``; ``"rel"`` ``|m - e| <= tol * |e|``; ``"le"``
``m <= e``; ``"ge"`` ``m >= e``; ``"true"`` ``m`` is truthy (``e`` and ``tol`` unused).
"""

from __future__ import annotations

import json
import math
import os
import time
from pathlib import Path

from .errors import ClaimFailedError

RESULTS_ENV = "TOKENSEL_RESULTS_DIR"
KINDS = ("abs", "rel", "le", "ge", "true")
_state: dict = {"chapter": None, "started": None, "checks": []}


def book_root(start: Path | None = None) -> Path:
    """The nearest folder at or above ``start`` (default: the working directory) with ``_config.yml``."""
    here = (start or Path.cwd()).resolve()
    for d in (here, *here.parents):
        if (d / "_config.yml").is_file():
            return d
    return here


def results_dir() -> Path:
    d = os.environ.get(RESULTS_ENV)
    return Path(d) if d else book_root() / "_build" / "checks"


def _path(chapter: str) -> Path:
    return results_dir() / f"{chapter}.json"


def _write() -> None:
    if _state["chapter"] is None:
        return
    path = _path(_state["chapter"])
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({k: _state[k] for k in ("chapter", "started", "finished", "seconds", "checks")
                               if k in _state}, indent=1))
    tmp.replace(path)


def start_chapter(chapter: str) -> None:
    """Begin recording the checks of ``chapter`` (its old record is replaced)."""
    if not chapter or "/" in chapter:
        raise ValueError(f"chapter must be a plain name, got {chapter!r}")
    _state.clear()
    _state.update(chapter=chapter, started=time.time(), checks=[], t0=time.perf_counter())
    _write()


def end_chapter() -> float:
    """Finish the chapter's record and return its execution time in seconds."""
    if _state.get("chapter") is None:
        raise RuntimeError("end_chapter() without start_chapter()")
    _state["finished"] = time.time()
    _state["seconds"] = time.perf_counter() - _state["t0"]
    _write()
    n = len(_state["checks"])
    print(f"{_state['chapter']}: {n} claims checked, all hold; executed in {_state['seconds']:.1f} s")
    return _state["seconds"]


def _fmt(x) -> str:
    if isinstance(x, bool) or x is None:
        return str(x)
    if isinstance(x, (int,)) and not isinstance(x, bool):
        return str(x)
    return f"{x:.6g}"


def check(name: str, measured, expected=None, tol: float | None = None, kind: str = "abs") -> float:
    """Assert a numerical claim, record it, print one line, and return ``measured``."""
    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"a claim needs a non-empty name, got {name!r}")
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    if kind in ("abs", "rel") and (tol is None or tol < 0):
        raise ValueError(f"kind {kind!r} needs a tolerance tol >= 0")
    if kind != "true" and expected is None:
        raise ValueError(f"kind {kind!r} needs an expected value")
    m = measured.item() if hasattr(measured, "item") else measured
    e = expected.item() if hasattr(expected, "item") else expected
    if kind == "true":
        ok = bool(m)
    else:
        m, e = float(m), float(e)
        if not (math.isfinite(m)):
            ok = False
        elif kind == "abs":
            ok = abs(m - e) <= tol
        elif kind == "rel":
            ok = abs(m - e) <= tol * abs(e)
        elif kind == "le":
            ok = m <= e
        else:
            ok = m >= e
    rec = dict(name=name, measured=m, expected=e, tol=tol, kind=kind, passed=bool(ok))
    _state.setdefault("checks", []).append(rec)
    _write()
    rel = {"abs": f"= {_fmt(e)} ± {_fmt(tol)}", "rel": f"= {_fmt(e)} ± {_fmt(tol)} (relative)",
           "le": f"<= {_fmt(e)}", "ge": f">= {_fmt(e)}", "true": "holds"}[kind]
    line = f"[{'ok' if ok else 'FAILED'}] {name}: {_fmt(m)} {rel}"
    print(line)
    if not ok:
        raise ClaimFailedError(f"claim failed in chapter {_state.get('chapter')!r}: {line}")
    return measured


def load_results(directory: Path | None = None) -> list[dict]:
    """Every chapter record in the results directory, sorted by start time."""
    d = directory or results_dir()
    recs = [json.loads(p.read_text()) for p in sorted(Path(d).glob("*.json"))]
    return sorted(recs, key=lambda r: r.get("started", 0))


STAMP = "BUILD_STARTED"


def mark_build_start(directory: Path | None = None) -> None:
    """Clear the results directory and stamp the start of a build (the Makefile calls this)."""
    d = Path(directory or results_dir())
    d.mkdir(parents=True, exist_ok=True)
    for p in d.glob("*.json"):
        p.unlink()
    (d / STAMP).write_text(repr(time.time()))


def toc_chapters(root: Path | None = None) -> list[str]:
    """Chapter names (file stems) listed in the book's ``_toc.yml``, in order."""
    import yaml

    root = root or book_root()
    toc = yaml.safe_load((root / "_toc.yml").read_text())
    files = [toc["root"]]

    def walk(entries):
        for e in entries or []:
            if "file" in e:
                files.append(e["file"])
            walk(e.get("sections"))
            for part in e.get("chapters", []) if "chapters" in e else []:
                walk([part])

    walk(toc.get("chapters"))
    for part in toc.get("parts", []):
        walk(part.get("chapters"))
    return [Path(f).stem for f in files]


def report(expected: list[str], directory: Path | None = None):
    """Tables for the status page: ``(claims, chapters)`` as DataFrames.

    Raises RuntimeError when a chapter in ``expected`` has no complete record from this build
    (so a status page rendered before its chapters ran, or a chapter that stopped early, fails).
    """
    import pandas as pd

    d = Path(directory or results_dir())
    recs = {r["chapter"]: r for r in load_results(d)}
    stamp_file = d / STAMP
    stamp = float(stamp_file.read_text()) if stamp_file.exists() else None
    problems = []
    for ch in expected:
        r = recs.get(ch)
        if r is None:
            problems.append(f"{ch}: no record")
        elif "finished" not in r:
            problems.append(f"{ch}: started but did not finish")
        elif stamp is not None and r["started"] < stamp:
            problems.append(f"{ch}: record is older than this build")
    if problems:
        raise RuntimeError("the status page cannot vouch for every chapter: " + "; ".join(problems))
    claims = pd.DataFrame([dict(chapter=ch, **c) for ch in expected for c in recs[ch]["checks"]],
                          columns=["chapter", "name", "measured", "expected", "tol", "kind", "passed"])
    chapters = pd.DataFrame([dict(chapter=ch, claims=len(recs[ch]["checks"]),
                                  passed=sum(c["passed"] for c in recs[ch]["checks"]),
                                  seconds=recs[ch]["seconds"]) for ch in expected])
    return claims, chapters
