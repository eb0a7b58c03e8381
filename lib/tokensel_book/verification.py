"""Verification of a built book (``python -m tokensel_book verify``, the last step of ``make book``).

A chapter's claims hold when its executed notebook (``_build/jupyter_execute/<page>.ipynb``) has the code of its
source and shows a record (:func:`tokensel_book.claims.end_chapter`) that is sealed, names every claim of the
chapter's table and no other, in which every claim holds, and whose files (what the run imported and read) are
unchanged since. A claim in a cell that did not run (skipped, under a magic that does not run its body, after an
error) is missing from the record, so it fails verification whatever the form of its cell.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from tokensel.errors import InvalidArgumentError

from .claims import ClaimFailedError, claims_table, dependency_changes, notebook_record, record_problems
from .toc import page_source, toc_files

MAX_NOTEBOOK = 200 * 2**20  # bytes: an executed chapter with its figures is far smaller
_CELL = re.compile(r"^```\{code-cell\}[^\n]*\n(.*?)^```", re.S | re.M)


def code_cells(source: str) -> list[str]:
    """The code cells of a MyST page, without their options (``:tags:`` lines or a ``---`` block)."""
    cells = []
    for body in _CELL.findall(source):
        if body.startswith("---\n"):
            body = body[body.index("\n---\n", 3) + 5 :]
        lines = body.split("\n")
        while lines and re.match(r"^:[\w-]+:", lines[0]):
            lines.pop(0)
        cells.append("\n".join(lines).strip("\n"))
    return cells


def claiming_pages(root: Path) -> list[str]:
    """The pages of ``_toc.yml`` that start a chapter (``tb.start_chapter``), in reading order."""
    return [p for p in toc_files(root) if "tb.start_chapter(" in "\n".join(code_cells(_read(page_source(root, p))))]


def _read(path: Path) -> str:
    return Path(path).read_text(encoding="utf-8")


def claim_ids(tree: ast.AST) -> tuple[list[str], list[int]]:
    """The ids of the claims a cell makes (``tb.check``, ``tb.prove``), and the lines of those without a literal id."""
    ids, bad = [], []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("check", "prove"):
            first = node.args[0] if node.args else None
            if isinstance(first, ast.Constant) and isinstance(first.value, str):
                ids.append(first.value)
            else:
                bad.append(node.lineno)
    return ids, bad


def source_problems(root: Path, page: str) -> list[str]:
    """What is wrong with a page's claims before it runs: each ``tb.check`` (``tb.prove``) names a claim of the
    table by a literal id, and every claim of the table is made somewhere."""
    path = page_source(root, page)
    table = claims_table(path)
    out, used = [], set()
    for cell in code_cells(_read(path)):
        try:
            tree = ast.parse(re.sub(r"^(\s*)([%!])", r"\1#\2", cell, flags=re.M))
        except SyntaxError as exc:
            out.append(f"a code cell does not parse ({exc.msg}, line {exc.lineno})")
            continue
        ids, bad = claim_ids(tree)
        used |= set(ids)
        out += [f"line {n} of a cell: a claim's id must be a string literal" for n in bad]
    out += [f"a claim names {i!r}, which the claims table does not declare" for i in sorted(used - set(table))]
    out += [
        f"the claims table declares {i!r}, which no tb.check makes (nor tb.prove)" for i in sorted(set(table) - used)
    ]
    return [f"{page}: {p}" for p in out]


def executed_problems(root: Path, page: str, build: Path) -> tuple[list[str], dict | None]:
    """What is wrong with a page's executed notebook, and its record."""
    import nbformat

    path = Path(build) / "jupyter_execute" / f"{page}.ipynb"
    if not path.is_file():
        return [f"{page}: no executed notebook {str(path)!r}: build the book"], None
    if path.stat().st_size > MAX_NOTEBOOK:
        return [f"{page}: its executed notebook is over {MAX_NOTEBOOK >> 20} MiB"], None
    try:
        nb = nbformat.reads(_read(path), as_version=4)
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        return [f"{page}: its executed notebook cannot be read ({exc})"], None
    ran = [c.source.strip("\n") for c in nb.cells if c.cell_type == "code"]
    if ran != code_cells(_read(page_source(root, page))):
        return [f"{page}: its executed notebook does not have the code of its source: build the book again"], None
    record = notebook_record(nb)
    if record is None:
        return [f"{page}: shows no record: the chapter did not reach tb.end_chapter()"], None
    found = record_problems(record, claims_table(page_source(root, page)))
    if not found and record.get("chapter") != Path(page).name:
        found.append(f"the record is of chapter {record.get('chapter')!r}")
    if not found:
        changes = dependency_changes(record["depends"], env=False)[:3]
        found = [f"the run depended on what has changed since: {c}" for c in changes]
    return [f"{page}: {p}" for p in found], record


def verify(root: Path, build: Path, pages: list[str] | None = None) -> list[dict]:
    """The records of the book's claiming pages (or of ``pages``); raises
    :class:`~tokensel_book.claims.ClaimFailedError` naming every problem found."""
    if pages is not None and not pages:
        raise InvalidArgumentError("no chapter to verify: name at least one")
    known = claiming_pages(root)
    pages = known if pages is None else pages
    if not pages:
        raise InvalidArgumentError("the book has no chapter that makes claims (tb.start_chapter)")
    unknown = [p for p in pages if p not in known]
    if unknown:
        raise InvalidArgumentError(f"{unknown} are not chapters of the book; its chapters are {known}")
    found, records = [], []
    for page in pages:
        found += source_problems(root, page)
        problems, record = executed_problems(root, page, build)
        found += problems
        records += [record] if record is not None else []
    if found:
        raise ClaimFailedError("the book's claims do not all hold:\n  " + "\n  ".join(found))
    return records


def summary(records: list[dict]) -> str:
    return f"book claims: {sum(len(r['checks']) for r in records)} hold in {len(records)} chapters"
