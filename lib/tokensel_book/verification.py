"""Verification of a build's claims: what each chapter must record (every ``check(...)`` call site of its
source, :func:`expected_claims`) against what it recorded (:func:`problems`, :func:`verify`); the command
``python -m tokensel_book verify``.

What the build knows, and its limit. The build counts call sites, not claims: a ``check(...)`` in a loop
makes one claim per iteration, and how many iterations there are is the chapter's data, which no source
reading can know. So that no claim of a loop can vanish unseen, a chapter's source may make claims only in
the forms whose every execution is on record (:func:`claim_form_problems`, refused otherwise):

* ``check`` is only ever called, directly (``ts.check(...)``, ``check(...)``): never named otherwise (an
  alias, ``map(ts.check, ...)``, a ``partial``) or imported under another name;
* a call of ``check`` is a statement of the cell's top level or of the body of a ``for`` or ``while`` loop
  there, unconditionally: not in a function, a class, an ``if``, a ``try``, a ``with``, a ``match``, a
  loop's ``else``, an ``assert``, a comprehension, a conditional expression or ``and``/``or``, not in a cell
  tagged ``raises-exception``; and no loop holding a claim has a ``break`` or ``continue``.

Then, in a cell that runs to its end, every iteration of a loop makes its claim (an exception in the middle of
an iteration stops the cell, and an executed build stops at a cell that fails: ``allow_errors: false``), and
every finished run must hold each call site at least once and no claim from anywhere else (a claim made
through a wrapper or alias of ``check``, or by another module, carries a site that is not its page's).
What remains unchecked is the *number* of iterations: a loop over fewer items (its iterable changed) makes
fewer claims and passes; that is a visible change of the chapter's code, not a claim lost to an error.
"""

from __future__ import annotations

import ast
import os
import sys
from pathlib import Path

from tokensel.errors import ArgumentTypeError, InvalidArgumentError, TokenselError
from tokensel_book.checks import ClaimFailedError

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


#: statements a claim may be a statement of (an ``assert`` is skipped under ``python -O``)
_SIMPLE = (ast.Expr, ast.Assign, ast.AnnAssign, ast.AugAssign)
#: expressions that evaluate a part of themselves only sometimes (or never, or later)
_CONDITIONAL = (
    ast.Lambda,
    ast.IfExp,
    ast.BoolOp,
    ast.ListComp,
    ast.SetComp,
    ast.DictComp,
    ast.GeneratorExp,
)
_LOOPS = (ast.For, ast.AsyncFor, ast.While)
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)


def _named_check(node: ast.AST) -> bool:
    return (isinstance(node, ast.Name) and node.id == "check") or (
        isinstance(node, ast.Attribute) and node.attr == "check"
    )


def claim_form_problems(tree: ast.AST, tags=()) -> list[tuple[int, str]]:
    """``(line, why)`` for each way the code cell ``tree`` (tagged ``tags``) could make a claim that the build
    cannot count (see the module): a reference to ``check`` that is not a call of it, an import of ``check``
    under another name, a call that is not an unconditional statement of the cell's top level or of a loop's
    body, a ``break``/``continue`` in a loop holding a claim, a claim in a cell tagged ``raises-exception``."""
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    callees = {id(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}
    out: list[tuple[int, str]] = []
    claiming_loops: set[int] = set()
    for node in ast.walk(tree):
        line = getattr(node, "lineno", 0)
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                if alias.name.rsplit(".", 1)[-1] == "check" and alias.asname not in (None, "check"):
                    out.append((line, f"imports check as {alias.asname!r}: call it as check(...) or ts.check(...)"))
        if not _named_check(node):
            continue
        if id(node) not in callees:
            out.append(
                (
                    line,
                    "names check without calling it (an alias, a wrapper, a function passed on): call "
                    "ts.check(...) itself, so that the build can count the claim",
                )
            )
            continue
        if "raises-exception" in tags:
            out.append((line, "makes a claim in a cell tagged raises-exception (its claims could be skipped)"))
        child: ast.AST = parents[node]  # the call
        parent = parents.get(child)
        while parent is not None and not isinstance(parent, ast.stmt):  # the expression around the call
            if isinstance(parent, _CONDITIONAL) or isinstance(parent, ast.comprehension):
                out.append(
                    (
                        line,
                        f"calls check inside {type(parent).__name__} (evaluated only sometimes): make the claim "
                        "a statement of its own",
                    )
                )
                break
            child, parent = parent, parents.get(parent)
        else:
            statement = parent
            if not isinstance(statement, _SIMPLE):
                out.append(
                    (
                        line,
                        f"calls check in {type(statement).__name__ if statement else 'nothing'}: make "
                        "the claim a statement of its own",
                    )
                )
                continue
            child, parent = statement, parents.get(statement)
            while parent is not None and not isinstance(parent, ast.Module):
                if isinstance(parent, _LOOPS) and any(child is s for s in parent.body):
                    claiming_loops.add(id(parent))
                else:
                    where = "a loop's else" if isinstance(parent, _LOOPS) else f"{type(parent).__name__}"
                    out.append(
                        (
                            line,
                            f"makes a claim inside {where} (only the cell's top level and loop bodies are "
                            "sure to run it): move the claim out",
                        )
                    )
                    break
                child, parent = parent, parents.get(parent)
    for node in ast.walk(tree):
        line = getattr(node, "lineno", 0)
        if isinstance(node, (ast.Break, ast.Continue)):
            loop = parents.get(node)
            while loop is not None and not isinstance(loop, _LOOPS + _SCOPES):
                loop = parents.get(loop)
            if loop is not None and id(loop) in claiming_loops:
                out.append(
                    (
                        line,
                        f"has a {type(node).__name__.lower()} in a loop that makes claims (an iteration's claim "
                        "could be skipped): make every iteration claim, or loop over what should be claimed",
                    )
                )
    return sorted(set(out))


def page_claims(path: Path) -> tuple[list[str], dict[str, str], list[str]]:
    """What a chapter's ``.md`` source says it records: ``(chapter names started, {site: where}, problems)``.

    Every code cell (as jupytext reads it; cells tagged ``skip-execution`` are never run and are left out)
    is parsed; each ``check(...)`` call (``ts.check``, ``check``, ``tokensel.check``, ...) is a call site
    that the chapter's record must contain (see ``_site_of``), each ``start_chapter(...)`` names the
    chapter. A name that is not a string literal, a cell that does not parse, and a claim in a form the
    build cannot count (:func:`claim_form_problems`) are problems."""
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
        for line, why in claim_form_problems(tree, cell.get("metadata", {}).get("tags") or ()):
            issues.append(f"{path.name}: code cell {k}, line {line}: {why}")
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
    ``_toc.yml``, the page and the fix (``tokensel_book.toc.page_sources``)."""
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
    :func:`~tokensel_book.records.record_problems`), problems of the chapters' sources (see :func:`expected_claims`),
    chapters of
    ``expected`` without a record from this build, claims checked before ``start_chapter``, records that
    started but did not finish, every failed claim (by name), and every claim of a chapter's source that a
    finished run of the chapter in this build lacks (a cell failed before it, or ``check`` was replaced): each
    run is checked on its own, so a complete run cannot cover for an incomplete one. Where a chapter's call
    sites are known, a run must also hold no claim made elsewhere (site None or not one of them: an alias or
    wrapper of ``check``, another module) and no cell that makes claims may have stopped with an error
    (``interrupted``, see :func:`~tokensel_book.checks.start_chapter`).

    ``expected``: chapter names (call sites from the book's pages), ``{chapter: {site: where}}`` (``{}``: a
    chapter whose page makes no claim; None instead of the sites: records only, claims from anywhere), or None
    for every chapter of the book."""
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
            if sites is None:
                continue
            elsewhere = [c["name"] for c in r["checks"] if c.get("site") not in sites]
            if elsewhere:
                out.append(
                    f"{ch}: {len(elsewhere)} claim(s) made elsewhere than at a check(...) call of its page{in_run}: "
                    f"{elsewhere[:5]!r:.300} (through an alias or wrapper of check, or by other code: the build "
                    "cannot count them)"
                )
            if r.get("interrupted"):
                out.append(
                    f"{ch}: a cell that makes claims stopped with an error{in_run} ({r['interrupted'][0]:.200}): "
                    "the claims after the error were never made"
                )
    return out


def verify(directory: Path | None = None, expected=None) -> tuple[int, int]:
    """Check the results of a build: return ``(claims that hold, chapters)``.

    ``expected`` as in :func:`problems` (default: every chapter of the book, with the call sites of its
    source). Raises :class:`~tokensel_book.checks.ClaimFailedError` listing every problem of :func:`problems`;
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
    """``python -m tokensel_book verify [DIR] [--chapters A,B]``: exit 1 with every problem named, else print a
    summary. ``--chapters`` expects those chapters only (each with the claims of its source), not the whole
    book."""
    argv = list(sys.argv[1:] if argv is None else argv)
    chapters = None
    if "--chapters" in argv:
        i = argv.index("--chapters")
        if i + 1 >= len(argv):
            print("usage: python -m tokensel_book verify [RESULTS_DIR] [--chapters A,B]", file=sys.stderr)
            return 2
        chapters = [c for c in argv[i + 1].split(",") if c]
        del argv[i : i + 2]
    if not argv or argv[0] != "verify" or len(argv) > 2:
        print("usage: python -m tokensel_book verify [RESULTS_DIR] [--chapters A,B]", file=sys.stderr)
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
