"""Sphinx extension: the ``roadmap`` directive, one bullet per page of ``_toc.yml`` (a link and its front matter's
``summary``). A page without a string summary stops the build naming it: the toc is the one list of chapters."""

from __future__ import annotations

import posixpath
from pathlib import Path

from sphinx.errors import ExtensionError
from sphinx.util.docutils import SphinxDirective

from .toc import front_matter, page_source


def page_title(path: Path) -> str:
    """The first level-1 heading of a MyST Markdown page or of a notebook's Markdown cells (outside code)."""
    if path.suffix == ".ipynb":
        import json

        cells = json.loads(path.read_text(encoding="utf-8")).get("cells", [])
        text = "\n".join("".join(c["source"]) for c in cells if c.get("cell_type") == "markdown")
    else:
        text = path.read_text(encoding="utf-8")
    fenced = False
    for line in text.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and line.startswith("# "):
            return line[2:].strip()
    raise ExtensionError(f"{path.name} has no level-1 heading (`# Title`)")


def _summary(root: Path, page: str) -> str:
    path = page_source(root, page)
    summary = front_matter(path).get("summary") if path.is_file() else None
    if not isinstance(summary, str) or not summary.strip():
        raise ExtensionError(
            f"roadmap: {page}.md has no `summary:` in its front matter (a sentence saying "
            "what the page shows); every page of _toc.yml needs one"
        )
    return " ".join(summary.split())


def contents_markdown(root: Path) -> str:
    """The README's list of contents: ``N. **title**: summary`` for every numbered chapter of ``_toc.yml``
    (numbered as the book's sidebar numbers them) and ``- **title**: summary`` for the other pages, in order
    (``python -m tokensel_book contents`` prints it; a test keeps the README equal to it)."""
    from .toc import reader_pages, toc_numbers

    numbers = toc_numbers(root)
    return "\n".join(
        f"{f'{numbers[page]}.' if page in numbers else '-'} **{page_title(page_source(root, page))}**: "
        f"{_summary(root, page)}"
        for page in reader_pages(root)
    )


def roadmap_lines(root: Path, current: str) -> list[str]:
    """The directive's MyST lines: ``- {doc}`page`: summary`` for every page of ``_toc.yml`` after
    ``current`` (a docname such as ``book/intro``)."""
    from .toc import reader_pages, toc_numbers

    numbers = toc_numbers(root)
    pages = reader_pages(root)
    after = pages[pages.index(current) + 1 :] if current in pages else pages
    lines = []
    for page in after:
        target = posixpath.relpath(page, posixpath.dirname(current) or ".")
        number = numbers.get(page)
        label = f"Chapter {number}, " if number else ""
        lines.append(f"- {label}{{doc}}`{target}`: {_summary(root, page)}")
    return lines


class Roadmap(SphinxDirective):
    has_content = False

    def run(self):
        root = Path(self.env.srcdir)
        self.env.note_dependency(str(root / "_toc.yml"))
        lines = roadmap_lines(root, self.env.docname)
        from .toc import toc_files

        for page in toc_files(root):  # a changed summary rebuilds this page
            self.env.note_dependency(str(page_source(root, page)))
        # parsed by the page's own parser (MyST), so roles such as {doc} and $math$ work
        return self.parse_text_to_nodes("\n".join(lines))


def setup(app):
    app.add_directive("roadmap", Roadmap)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
