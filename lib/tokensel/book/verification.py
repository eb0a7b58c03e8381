"""Verification of a build's claims: what each chapter must record (every ``check(...)`` call site of its
source, :func:`expected_claims`) against what it recorded (:func:`problems`, :func:`verify`); the command
``python -m tokensel verify``.
"""

from __future__ import annotations

import ast
import os
import sys
from pathlib import Path

from ..errors import ArgumentTypeError, ClaimFailedError, InvalidArgumentError, TokenselError
from .checks import _calls, _cell_sites
from .records import _this_build, book_results_dir, book_root
from .toc import TOC, page_sources

_PAGES: dict = {}  # page source digest -> what page_claims found


def _skipped(cell) -> bool:
    return "skip-execution" in (cell.get("metadata", {}).get("tags") or [])


def _compiled(source: str) -> str:
    """A code cell as the kernel compiles it (IPython's input transformations: magics, ``!`` lines)."""
    try:
        from IPython.core.inputtransformer2 import TransformerManager
    except ImportError:
        return source
    return TransformerManager().transform_cell(source)


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
    Two pages that start the same chapter name are a problem.

    No page is skipped: a ``_toc.yml`` that is missing or cannot be read, and a page it lists whose source is
    missing, is a notebook, or cannot be read, raise a :class:`~tokensel.errors.TokenselError` naming
    ``_toc.yml``, the page and the fix (``tokensel.book.toc.page_sources``)."""
    root = Path(root or book_root())
    out, issues, unreadable = {}, [], []
    owner: dict[str, str] = {}
    for src in page_sources(root):
        try:
            names, sites, bad = page_claims(src)
        except Exception as exc:  # noqa: BLE001 - whatever jupytext or the decoder says, the page cannot be read
            text = " ".join(str(exc).split())[:200]
            unreadable.append(
                f"{str(src.relative_to(root))!r} cannot be read as a MyST page ({type(exc).__name__}: {text})"
            )
            continue
        if chapters is not None and not set(names) & set(chapters):
            continue
        issues += bad
        for name in names[:1]:
            if name in owner:
                issues.append(f"{src.name} and {owner[name]} both start chapter {name!r}")
                continue
            owner[name] = src.name
            out[name] = dict(sites)
    if unreadable:
        raise InvalidArgumentError(
            f"{str(root / TOC)!r} lists pages whose source cannot be read: "
            + "; ".join(unreadable)
            + ". Fix the pages (UTF-8 MyST Markdown, as jupytext reads it) or remove them from "
            + TOC
        )
    return out, issues


def checked_chapters(root: Path | None = None) -> list[str]:
    """The names under which the chapters of ``_toc.yml`` record claims (their ``start_chapter("...")``,
    positional or ``chapter=``)."""
    return list(expected_claims(root)[0])


def _expectations(expected) -> tuple[dict[str, dict[str, str] | None], list[str]]:
    """``expected`` as ``{chapter: {site: where} or None}`` and the book's problems: None is the whole book;
    a dict is taken as given; a list of names takes each name's call sites (and the problems of its page)
    from the book's pages where a page starts that chapter. Outside a book (no ``_toc.yml`` in the book's
    root) a list of names expects records only; a ``_toc.yml`` that exists is read strictly, and what
    cannot be read raises (never skips the call-site checks)."""
    if expected is None:
        return expected_claims()
    if isinstance(expected, dict):
        return dict(expected), []
    if not isinstance(expected, (list, tuple)) or not all(isinstance(c, str) for c in expected):
        raise ArgumentTypeError(f"expected must be a list of chapter names, got {expected!r:.200}")
    root = book_root()
    if not os.path.lexists(root / TOC):
        return {c: None for c in expected}, []
    book, issues = expected_claims(root, chapters=list(expected))
    return {c: book.get(c) for c in expected}, issues


def problems(expected, directory: Path | None = None) -> list[str]:
    """What stops the results from vouching for the book: records that are not valid (see
    :func:`~tokensel.book.records.record_problems`), problems of the chapters' sources (see :func:`expected_claims`),
    chapters of
    ``expected`` without a record from this build, claims checked before ``start_chapter``, records that
    started but did not finish, every failed claim (by name), and every claim of a chapter's source that a
    finished run of the chapter in this build lacks (a cell failed before it, or ``check`` was replaced): each
    run is checked on its own, so a complete run cannot cover for an incomplete one.

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
        runs = [r for r in recs if r["chapter"] == ch and not r.get("orphan") and "finished" in r]
        for r in runs:  # every finished run of the chapter holds every claim of its source
            recorded = {c.get("site") for c in r["checks"]}
            in_run = f" (in its run {r['_file']})" if len(runs) > 1 else ""
            for site, where in (sites or {}).items():
                if site not in recorded:
                    out.append(
                        f"{ch}: the claim at {where} was never recorded{in_run} (a cell failed before it, it "
                        f"never ran, or check was replaced)"
                    )
    return out


def verify(directory: Path | None = None, expected=None) -> tuple[int, int]:
    """Check the results of a build: return ``(claims that hold, chapters)``.

    ``expected`` as in :func:`problems` (default: every chapter of the book, with the call sites of its
    source). Raises :class:`~tokensel.errors.ClaimFailedError` listing every problem of :func:`problems`;
    outside a book (no ``_toc.yml``), or when ``_toc.yml`` or a page it lists cannot be read, the
    :class:`~tokensel.errors.TokenselError` of :func:`expected_claims`; a results folder with anything but a
    folder in its place, :class:`~tokensel.errors.StorageError`."""
    d = Path(directory or book_results_dir())
    found = problems(expected, d)
    if found:
        raise ClaimFailedError("the book's claims do not all hold:\n  " + "\n  ".join(found))
    recs, _ = _this_build(d)
    return sum(len(r["checks"]) for r in recs), len({r["chapter"] for r in recs})


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
