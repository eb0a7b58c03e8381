"""Checked claims: a chapter asserts each numerical claim in one line, and a false claim fails the build.

A chapter's front matter declares a ``claims:`` table keyed by id (``claim``, ``tests``: a book label, ``threshold``:
where the bound comes from, optional ``preregistered`` and ``deviation``), and claims each in one call:
``tb.check("err", e, at_most=0.03, d=4096)`` (``{fields}`` fill the text) or ``tb.prove("id", difference)`` (sympy
simplifies to 0). :func:`end_chapter` stores the run's record in a notebook output, read by ``python -m tokensel_book
verify`` and keyed by the execution cache (:mod:`.execution`)."""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tokensel.errors import InvalidArgumentError, TokenselError

from .toc import book_root, front_matter, page_source

MIME = "application/vnd.tokensel.record+json"
SCHEMA = 3
ID = re.compile(r"[a-z0-9][a-z0-9-]*")
LABEL = re.compile(r"[A-Za-z][\w:.-]*")
TESTS = re.compile(r"\(tests (?P<label>[A-Za-z][\w:.-]*)\)")  # how a check line names its statement
KINDS = ("abs", "rel", "le", "ge", "true", "proof")
CLAIMS_ENV = "TOKENSEL_CLAIMS"  # "raise" (default): a failed claim raises at once; "report": it is shown, run on
#: where a bound comes from, by the preregistered flag, when the table says nothing more precise
THRESHOLD_ORIGIN = {
    True: "fixed before the first run, from the paper's claim or from theory",
    False: "the theory's value with a tolerance chosen after a first run showed the size of finite-size effects",
}


class ClaimFailedError(TokenselError, AssertionError):
    """A claim does not hold."""


@dataclass(frozen=True)
class Claim:
    """One row of a chapter's claims table."""

    claim: str
    tests: str | None = None  # required in a table; None for a claim made outside the book
    threshold: str | None = None
    preregistered: bool = False
    deviation: bool = False
    range: str | None = None  # where the bound is stated for (e.g. "eta0 <= 300"); a run outside it says so


def table_digest(table: dict[str, Claim] | None) -> str | None:
    """What identifies a claims table (a run's record keeps it: the table is not a file the record lists)."""
    rows = None if table is None else {k: vars(v) for k, v in sorted(table.items())}
    return None if rows is None else hashlib.sha256(json.dumps(rows, sort_keys=True).encode()).hexdigest()


def claims_table(path: Path) -> dict[str, Claim]:
    """The ``claims:`` table of a chapter's front matter, checked: ids, field names and types."""
    table = front_matter(path).get("claims", {})
    where = f"the claims table of {Path(path).name}"
    if not isinstance(table, dict):
        raise InvalidArgumentError(f"{where} must map claim ids to their fields")
    out = {}
    for cid, row in table.items():
        if not isinstance(cid, str) or not ID.fullmatch(cid):
            raise InvalidArgumentError(f"{where}: id {cid!r} must be lower-case letters, digits and '-'")
        if not isinstance(row, dict) or not isinstance(row.get("claim"), str) or not row["claim"].strip():
            raise InvalidArgumentError(f"{where}: {cid} needs `claim: <what is claimed, in words>`")
        unknown = set(row) - set(Claim.__dataclass_fields__)
        if unknown:
            raise InvalidArgumentError(f"{where}: {cid} has unknown fields {sorted(unknown)}")
        for key in ("preregistered", "deviation"):
            if not isinstance(row.get(key, False), bool):
                raise InvalidArgumentError(f"{where}: {cid}.{key} must be true or false")
        if row.get("range") is not None and not (isinstance(row["range"], str) and row["range"].strip()):
            raise InvalidArgumentError(f"{where}: {cid}.range must be a non-empty text")
        for key in ("tests", "threshold"):
            if not (isinstance(row.get(key), str) and row[key].strip()):
                raise InvalidArgumentError(
                    f"{where}: {cid} needs `{key}:` (the statement it tests; where its bound comes from)"
                )
        if not LABEL.fullmatch(row["tests"]):
            raise InvalidArgumentError(f"{where}: {cid}.tests must be a statement's label, got {row['tests']!r}")
        out[cid] = Claim(**row)
    return out


# ---------------------------------------------------------------------------------------------------- a claim


def _real(x, what: str) -> float:
    """A finite real number (a 0-d tensor or array too) as a float; else a clear error naming ``what``."""
    if hasattr(x, "item") and getattr(x, "shape", None) == ():
        x = x.item()
    if isinstance(x, bool) or not isinstance(x, (int, float)) and type(x).__module__ != "numpy":
        raise InvalidArgumentError(f"{what} must be a real number, got {type(x).__name__}")
    try:
        value = float(x)
    except (TypeError, ValueError, OverflowError) as exc:
        raise InvalidArgumentError(f"{what} must be a real number that a float can hold ({exc})") from None
    if not math.isfinite(value):
        raise InvalidArgumentError(f"{what} must be finite, got {value}")
    return value


def comparison(
    at_least=None, at_most=None, close_to=None, tol=None, rel_tol=None
) -> tuple[str, float | None, float | None]:
    """``(kind, expected, tol)`` of a claim's keywords: one of at_least, at_most, close_to (with tol or rel_tol),
    or none of them for a truth claim."""
    given = {k: v for k, v in (("at_least", at_least), ("at_most", at_most), ("close_to", close_to)) if v is not None}
    if len(given) > 1:
        raise InvalidArgumentError(f"a claim takes one of at_least=, at_most=, close_to=; got {sorted(given)}")
    if "close_to" in given:
        if (tol is None) == (rel_tol is None):
            raise InvalidArgumentError("close_to= needs exactly one of tol= (absolute) and rel_tol= (relative)")
        t = _real(tol if tol is not None else rel_tol, "tol" if tol is not None else "rel_tol")
        if t < 0:
            raise InvalidArgumentError(f"a tolerance must be >= 0, got {t}")
        return ("abs" if tol is not None else "rel"), _real(close_to, "close_to"), t
    if tol is not None or rel_tol is not None:
        raise InvalidArgumentError("tol= and rel_tol= go with close_to=")
    if not given:
        return "true", None, None
    ((key, value),) = given.items()
    return ("ge" if key == "at_least" else "le"), _real(value, key), None


def holds(c: dict) -> bool:
    """The verdict of a recorded claim's own numbers."""
    m, kind = c["measured"], c["kind"]
    e: Any = c.get("expected")
    t: Any = c.get("tol")
    if kind == "true":
        return m is True
    if kind == "proof":
        return m == "0"
    if isinstance(m, bool) or not isinstance(m, (int, float)) or not math.isfinite(m):
        return False
    return {
        "abs": lambda: abs(m - e) <= t,
        "rel": lambda: abs(m - e) <= t * abs(e),
        "le": lambda: m <= e,
        "ge": lambda: m >= e,
    }[kind]()


def _measured(x, kind: str):
    """What a claim records as measured: a bool for a truth claim, else a float (NaN kept: it fails)."""
    if hasattr(x, "item") and getattr(x, "shape", None) == ():
        x = x.item()
    if kind == "true":
        return x if isinstance(x, bool) else bool(x) if type(x).__name__ == "bool_" else repr(x)[:80]
    if isinstance(x, (bool, str, bytes)):
        return repr(x)[:80]
    try:
        return float(x)
    except (TypeError, ValueError, OverflowError):
        return repr(x)[:80]


def _number(x) -> str:
    return f"{x:.6g}" if isinstance(x, float) else str(x)


def requirement(c: dict) -> str:
    """The condition of a claim in words: ``"at most 3"``, ``"within 30 % of 0.5"``."""
    e: Any = c.get("expected")
    t: Any = c.get("tol")
    return {
        "le": lambda: f"at most {_number(e)}",
        "ge": lambda: f"at least {_number(e)}",
        "rel": lambda: f"within {100 * t:.4g} % of {_number(e)}",
        "abs": lambda: f"exactly {_number(e)}" if t == 0 else f"within {_number(t)} of {_number(e)}",
        "true": lambda: "yes",
        "proof": lambda: "simplifies to 0",
    }[c["kind"]]()


def claim_line(c: dict, statement: str | None = None) -> str:
    """The line a check prints: ``[ok] name: 0.99, required at least 0.9 (tests lem-x)``, marking proofs,
    deviations and out-of-range runs; a failure adds what it tests and where its bound comes from."""
    m, req, tests = c["measured"], requirement(c), f" (tests {c['tests']})" if c.get("tests") else ""
    shown = {True: "yes", False: "no"}.get(m, str(m)) if c["kind"] in ("true", "proof") else _number(m)
    if not c.get("within", True):
        return f"[outside its range] {c['name']}: {shown}; the bound ({req}) is stated for {c.get('range')}{tests}"
    if c["kind"] == "proof":
        verdict, body = (
            ("proved", f"simplifies to {m}") if c["passed"] else ("FAILED", f"simplifies to {m}, required 0")
        )
    elif c["passed"] and c.get("deviation"):
        return f"[deviation] {c['name']}: {shown}, {req} as observed: a departure from the paper{tests}"
    else:
        verdict = "ok" if c["passed"] else "FAILED"
        body = shown if c["kind"] == "true" and c["passed"] else f"{shown}, required {req}"
        if c["kind"] == "rel" and isinstance(m, float) and c["expected"]:
            body += f" (off by {100 * abs(m - c['expected']) / abs(c['expected']):.2g} %)"
    line = f"[{verdict}] {c['name']}: {body}{tests}"
    if not c["passed"]:
        if c.get("deviation"):
            line += "\n    the recorded departure from the paper no longer holds: the text must change"
        line += f"\n    what is tested: {statement or c.get('tests') or c['name']}"
        origin = c.get("threshold") or THRESHOLD_ORIGIN[bool(c.get("preregistered"))]
        line += f"\n    where the threshold comes from: {origin}"
    return line


_STATEMENT = re.compile(r"^(`{3,}|:{3,})\{prf:(?P<kind>\w+)\}[ \t]*(?P<title>.*?)\s*\n:label:\s*(?P<label>\S+)", re.M)


def statement_title(label: str, root: Path | None = None) -> str:
    """What a failed claim tests: ``Lemma “One step from $p^0 = 0$” (lem-one-step)``, or ``label`` alone."""
    root = root or book_root()
    for path in sorted(Path(root).glob("book/*.md")) if root else []:
        for m in _STATEMENT.finditer(path.read_text(encoding="utf-8")):
            if m["label"] == label:
                title = f" \u201c{m['title']}\u201d" if m["title"] else ""
                return f"{m['kind'].capitalize()}{title} ({label})"
    return label


# ---------------------------------------------------------------------------------------------------- a run

_run: dict = {}


def claims_mode() -> str:
    mode = os.environ.get(CLAIMS_ENV, "raise")
    if mode not in ("raise", "report"):
        raise InvalidArgumentError(f"{CLAIMS_ENV} must be 'raise' or 'report', got {mode!r}")
    return mode


def start_chapter(chapter: str) -> None:
    """Begin a run of ``chapter``, reading its claims table from ``book/<chapter>.md`` inside the book.
    Introduced in chapter 01."""
    if not isinstance(chapter, str) or not re.fullmatch(r"[A-Za-z0-9][\w.-]*", chapter):
        raise InvalidArgumentError(f"chapter must be a page's name such as '01_model', got {chapter!r}")
    mode = claims_mode()
    root = book_root()
    source = page_source(root, chapter) if root is not None else None
    table = claims_table(source) if source is not None and source.is_file() else None
    _run.clear()
    _run.update(chapter=chapter, table=table, mode=mode, checks=[], started=time.time(), t0=time.perf_counter())
    _watch_files()


def check(
    claim_id: str,
    measured,
    *,
    at_least=None,
    at_most=None,
    close_to=None,
    tol=None,
    rel_tol=None,
    within=True,
    **fields,
):
    """Assert the claim ``claim_id`` on ``measured`` and return ``measured``.

    ``at_least=e``, ``at_most=e``, ``close_to=e`` with ``tol=t`` (``|m - e| <= t``) or ``rel_tol=r``
    (``|m - e| <= r |e|``); none: ``measured`` is True. ``fields`` fill the text; ``within=False`` shows, not checks,
    a run outside the bound's range. A failure raises :class:`ClaimFailedError` (``TOKENSEL_CLAIMS=report``: at
    :func:`end_chapter`). Introduced in chapter 01."""
    row = _row(claim_id)
    kind, expected, tol = comparison(at_least, at_most, close_to, tol, rel_tol)
    _claim(claim_id, row, fields, _measured(measured, kind), kind, expected, tol, within)
    return measured


def prove(claim_id: str, difference, **fields):
    """Assert the claim ``claim_id`` that ``difference`` (sympy expression or matrix) simplifies to 0 entrywise;
    fails like :func:`check`. Returns ``difference``."""
    row = _row(claim_id)
    _claim(claim_id, row, fields, residual(difference), "proof", None, None, True)
    return difference


def residual(difference) -> str:
    """What ``difference`` simplifies to, as text (``"0"``, else its first nonzero entry): a rational function's
    numerator expanded first (fast), ``sympy.simplify`` for the rest."""
    import sympy

    entries = list(difference) if isinstance(difference, sympy.MatrixBase) else [difference]
    if not entries or not all(isinstance(e, sympy.Basic) for e in entries) or any(e.has(sympy.Float) for e in entries):
        raise InvalidArgumentError(
            f"a proof takes a non-empty sympy expression or matrix of exact numbers, got {type(difference).__name__}"
        )
    hard = (e for e in entries if sympy.expand(sympy.numer(sympy.together(e))) != 0)
    return str(next((r for r in map(sympy.simplify, hard) if r != 0), 0))[:80]


def _row(claim_id: str) -> Claim:
    """The row of the chapter's table that ``claim_id`` names."""
    if not _run:
        raise InvalidArgumentError("call tb.start_chapter(name) before the chapter's first claim")
    table = _run["table"]
    if table is not None and claim_id not in table:
        raise InvalidArgumentError(f"claim {claim_id!r} is not in the claims table of {_run['chapter']}.md")
    return table[claim_id] if table is not None else Claim(claim=str(claim_id))


def _claim(claim_id: str, row: Claim, fields: dict, measured, kind: str, expected, tol, within) -> None:
    """Record a claim, print its line, and raise when it does not hold (unless the run only reports)."""
    try:
        name = row.claim.format(**fields)
    except (KeyError, IndexError, ValueError) as exc:
        raise InvalidArgumentError(f"claim {claim_id!r}: its text needs the field {exc} (give it to check)") from None
    c = {"id": claim_id, "name": name, "measured": measured, "expected": expected, "tol": tol}
    c.update(kind=kind, tests=row.tests, threshold=row.threshold)
    c.update(preregistered=row.preregistered, deviation=row.deviation, within=bool(within), range=row.range)
    c["passed"] = holds(c)
    _run["checks"].append(c)
    line = claim_line(c, None if c["passed"] or row.tests is None else statement_title(row.tests))
    print(line + _replication_note(c))
    if not c["passed"] and c["within"]:
        if _run["mode"] == "report":
            import warnings

            warnings.warn(f"claim failed: {line}", stacklevel=3)
        else:
            raise ClaimFailedError(f"claim failed in chapter {_run['chapter']!r}: {line}")


def end_chapter() -> dict:
    """Finish the run: show its record as an output and raise if any claim failed. Introduced in chapter 01."""
    if not _run:
        raise InvalidArgumentError("end_chapter() without start_chapter(): call tb.start_chapter(name) first")
    caller = sys._getframe(1).f_globals
    record = {
        "schema": SCHEMA,
        "chapter": _run["chapter"],
        "seed": caller.get("seed") if isinstance(caller.get("seed"), int) else None,
        "started": _run["started"],
        "seconds": time.perf_counter() - _run["t0"],
        "checks": _run["checks"],
        "table": table_digest(_run["table"]),
        "depends": dependencies(_run.get("opened", set())),
    }
    record["seal"] = seal(record)
    failed = [c["name"] for c in _run["checks"] if not c["passed"] and c["within"]]
    summary = f"{record['chapter']}: {len(record['checks'])} claims checked" + (
        f", {len(failed)} failed: {failed}" if failed else f", all hold; executed in {record['seconds']:.1f} s"
    )
    _show(record, summary)
    _run.clear()
    if failed:
        raise ClaimFailedError(summary)
    return record


def _show(record: dict, summary: str) -> None:
    try:
        from IPython import get_ipython
        from IPython.display import display

        if get_ipython() is not None:
            display({"text/plain": summary}, metadata={MIME: record}, raw=True)  # kept, not rendered
            return
    except ImportError:
        pass
    print(summary)


#: False in a replication's worker: a task's run must not read the sweep it belongs to
REPLICATION_NOTES = True


def _replication_note(c: dict) -> str:
    """In how many fresh seeds the book's recorded replication saw this claim hold, when it covers it."""
    if not REPLICATION_NOTES:
        return ""
    try:
        from .replication import note

        text = note(book_root(), _run["chapter"], c["id"])
    except Exception:  # noqa: BLE001 - a courtesy line: the claim is already checked
        text = None
    return f"\n    ({text})" if text else ""


# ---------------------------------------------------------------------------------------------------- records


def seal(record: dict) -> str:
    """SHA-256 of a record's content without its seal: a record edited by hand no longer matches it."""
    body = {k: v for k, v in record.items() if k != "seal"}
    return hashlib.sha256(json.dumps(body, sort_keys=True, allow_nan=True).encode()).hexdigest()


_CLAIM_TYPES: dict[str, Any] = {
    "id": str, "name": str, "kind": str, "passed": bool, "preregistered": bool, "deviation": bool,
    "measured": (bool, int, float, str), "expected": (int, float, type(None)), "tol": (int, float, type(None)),
    "tests": (str, type(None)), "threshold": (str, type(None)), "within": bool, "range": (str, type(None)),
}  # fmt: skip


def _form_problems(c: dict) -> list[str]:
    """The fields of a well-typed claim that do not have its kind's form (finite numbers where it needs them)."""
    out = [k for k in ("expected", "tol") if isinstance(c[k], float) and not math.isfinite(c[k])]
    if c["kind"] in ("true", "proof"):
        out += ["measured"] if c["kind"] == "proof" and not isinstance(c["measured"], str) else []
        return out + [k for k in ("expected", "tol") if c[k] is not None]
    has_tol = c["kind"] in ("abs", "rel")
    out += ["expected"] if c["expected"] is None else []
    return out + (["tol"] if (c["tol"] is not None) != has_tol or (has_tol and c["tol"] < 0) else [])


def _no_bool(t) -> bool:
    return bool not in (t if isinstance(t, tuple) else (t,))


def record_problems(record, table: dict[str, Claim] | None = None) -> list[str]:
    """Why ``record`` (as read back from a notebook) cannot be trusted; empty when it can. Strict types, its
    seal, each verdict against its own numbers, and with ``table`` every claim of the table made, none else."""
    if not isinstance(record, dict):
        return ["the record is not a JSON object"]
    if record.get("schema") != SCHEMA:
        return [f"the record's schema is {record.get('schema')!r}, not {SCHEMA} (another version of the book)"]
    if record.get("seal") != seal(record):
        return ["the record does not match its seal: it was changed after the run"]
    checks = record.get("checks")
    if not isinstance(checks, list) or not all(isinstance(c, dict) for c in checks):
        return ["the record's checks are not a list of claims"]
    out = []
    for c in checks:
        if set(c) != set(_CLAIM_TYPES) or c["kind"] not in KINDS:
            out.append(f"claim {c.get('id')!r} has fields {sorted(c)} or kind {c.get('kind')!r} of no claim")
            continue
        wrong = [
            k for k, t in _CLAIM_TYPES.items() if not isinstance(c[k], t) or (_no_bool(t) and isinstance(c[k], bool))
        ]
        if not wrong:  # the form each kind takes, once the types are right
            wrong = _form_problems(c)
        if wrong:
            out.append(f"claim {c['id']!r}: {', '.join(sorted(set(wrong)))} of the wrong type or form")
        elif not c["within"]:
            out.append(f"claim {c['id']!r} was made outside the range its bound is stated for ({c['range']})")
        elif c["passed"] != holds(c):
            out.append(f"claim {c['id']!r}: passed is {c['passed']} but its numbers say {holds(c)}")
        elif not c["passed"]:
            out.append(f"claim failed: {claim_line(c).splitlines()[0]}")
    if table is not None:
        if record.get("table") != table_digest(table):
            out.append("the chapter's claims table changed since the run: build the book again")
        made = {c.get("id") for c in checks if isinstance(c.get("id"), str)}
        out += [f"claim {i!r} of the table was never made (its cell did not run)" for i in sorted(set(table) - made)]
        out += [f"claim {i!r} is not in the chapter's claims table" for i in sorted(made - set(table), key=str)]
    return out


def notebook_record(nb) -> dict | None:
    """The record an executed notebook (an ``nbformat`` node or a dict) shows; None when it shows none."""
    found = [
        out["metadata"][MIME]
        for cell in nb["cells"]
        if cell.get("cell_type") == "code"
        for out in cell.get("outputs", [])
        if out.get("output_type") in ("display_data", "execute_result") and MIME in (out.get("metadata") or {})
    ]
    return found[-1] if found else None


# ---------------------------------------------------------------------------------------------------- what a run read

_SKIP = ("/proc/", "/sys/", "/dev/")
_STDLIB = os.path.dirname(os.__file__) + os.sep  # the standard library (Python's version is recorded instead)
#: variables that differ between runs of the same thing or that a kernel sets itself, never what is computed
NOISE = re.compile(
    r"(JPY|PYDEVD|KERNEL)_.*|TERM.*|CLICOLOR.*|_|PWD|OLDPWD|SHLVL|COLUMNS|LINES|FORCE_COLOR|.*PAGER|MPLBACKEND"
)


def _watch_files() -> None:
    """Note every file a run opens for reading (audit hook; compiled code's reads are not seen)."""
    _run["opened"] = set()
    if not getattr(sys, "_tokensel_audit", False):

        def hook(event, args):
            if event == "open" and _run.get("opened") is not None and isinstance(args[0], (str, bytes, os.PathLike)):
                mode = args[1] if len(args) > 1 and isinstance(args[1], str) else "r"
                if "r" in mode and "+" not in mode:
                    _run["opened"].add(os.fsdecode(args[0]))

        sys.addaudithook(hook)
        sys._tokensel_audit = True  # type: ignore[attr-defined]


def file_digest(path: str) -> str | None:
    """SHA-256 of a file's bytes (size and time for a compiled library); None when it is gone."""
    try:
        st = os.stat(path)
        if path.endswith((".so", ".pyd", ".dylib")) or st.st_size > 2**28:
            return f"{st.st_size}:{st.st_mtime_ns}"
        h = hashlib.sha256()
        with open(path, "rb") as fh:
            for block in iter(lambda: fh.read(2**20), b""):
                h.update(block)
        return h.hexdigest()
    except OSError:
        return None


#: an imported module's file and digest, taken once per process: the code that runs is the code that was imported
_IMPORTED: dict[str, tuple[str, str | None] | None] = {}


def _kept(f: str) -> str | None:
    """``f`` resolved, unless stdlib, cache or a page's source (jupyter-cache keys its code, the record its claims)."""
    skip = f.startswith(_SKIP) or (f.startswith(_STDLIB) and "site-packages" not in f) or "__pycache__" in f
    return None if skip or f.endswith(".md") or not os.path.isfile(f) else str(Path(f).resolve())


def dependencies(opened=()) -> dict:
    """What a run depended on: its imported modules' files (not stdlib), files it read, IPython start-up, env."""
    modules = {f for m in list(sys.modules.values()) if isinstance(f := getattr(m, "__file__", None), str)}
    _IMPORTED.update({f: (p, file_digest(p)) if (p := _kept(f)) else None for f in modules - _IMPORTED.keys()})
    files = set(opened)
    try:
        from IPython import get_ipython

        shell = get_ipython()
        if shell is not None:
            folder = Path(shell.profile_dir.location)
            files |= {str(p) for p in folder.rglob("*.py")} | {str(p) for p in folder.rglob("*.json")}
    except ImportError:
        pass
    read = {path: file_digest(path) for f in files if isinstance(f, str) and (path := _kept(f))}
    imported = dict(v for f in modules if (v := _IMPORTED[f]) is not None)
    return {"files": dict(sorted((imported | read).items())), "env": _environment(), "python": sys.version}


def _environment() -> dict[str, str]:
    """The environment by digests of its values (a record is kept with the outputs; a value may be a secret)."""
    return {k: hashlib.sha256(v.encode()).hexdigest()[:16] for k, v in os.environ.items() if not NOISE.fullmatch(k)}


def dependency_changes(depends: dict, env: bool = True) -> list[str]:
    """What changed since a run recorded ``depends``: imported and read files, ``env`` and Python."""
    out = [f"{f} changed" for f, d in depends["files"].items() if file_digest(f) != d]
    if not env:
        return out
    now = _environment()
    out += [f"${k} changed" for k in sorted(set(now) | set(depends["env"])) if now.get(k) != depends["env"].get(k)]
    if sys.version != depends["python"]:
        out.append("Python changed")
    return out
