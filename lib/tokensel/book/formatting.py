"""The chapters' code cells formatted to the page by ruff's formatter (Black's style, 88 characters).

The MyST sources stay byte for byte what they were outside the code of the ``{code-cell}`` blocks: the
code of every cell is put into a throw-away notebook, ``ruff format`` formats it as notebook cells (so a
trailing ``;`` that hides a cell's value is kept), and each cell's code is written back in its place.
``python -m tokensel format`` rewrites the chapters, ``python -m tokensel format --check`` (and a test)
fails on a chapter that is not formatted.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from ..errors import InvalidArgumentError

#: the formatter's line length: what a code cell shows without scrolling in the book's text column
LINE_LENGTH = 88
_OPEN = re.compile(r"^(`{3,})\{code-cell\}")


def code_cells(text: str) -> list[tuple[int, int]]:
    """The code of every ``{code-cell}`` block of a MyST page as ``(first line, end line)`` indices into
    ``text.split("\\n")`` (the end excluded), after the cell's YAML block (``---`` ... ``---``) and its
    ``:option:`` lines."""
    if not isinstance(text, str):
        raise InvalidArgumentError(f"text must be a MyST page as str, got {type(text).__name__}")
    lines = text.split("\n")
    cells, i = [], 0
    while i < len(lines):
        m = _OPEN.match(lines[i])
        if not m:
            i += 1
            continue
        fence, j = m.group(1), i + 1
        if j < len(lines) and lines[j].strip() == "---":
            j += 1
            while j < len(lines) and lines[j].strip() != "---":
                j += 1
            j += 1
        while j < len(lines) and lines[j].startswith(":"):
            j += 1
        k = j
        while k < len(lines) and lines[k].rstrip() != fence:
            k += 1
        if k == len(lines):
            raise InvalidArgumentError(f"the code cell opened on line {i + 1} is never closed by {fence}")
        cells.append((j, k))
        i = k + 1
    return cells


def format_sources(sources: list[str]) -> list[str]:
    """The code of notebook cells formatted by ``ruff format`` (as cells of one notebook)."""
    if not isinstance(sources, list) or not all(isinstance(s, str) for s in sources):
        raise InvalidArgumentError("sources must be a list of str, the code of each cell")
    if not sources:
        return []
    nb = {
        "nbformat": 4,
        "nbformat_minor": 5,
        "metadata": {
            "kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"},
            "language_info": {"name": "python"},
        },
        "cells": [
            {"cell_type": "code", "id": f"c{i}", "metadata": {}, "execution_count": None, "outputs": [], "source": s}
            for i, s in enumerate(sources)
        ],
    }
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "cells.ipynb"
        path.write_text(json.dumps(nb), encoding="utf-8")
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "ruff",
                "format",
                "--no-cache",
                "--isolated",
                "--line-length",
                str(LINE_LENGTH),
                str(path),
            ],
            capture_output=True,
            text=True,
        )
        if done.returncode != 0:
            raise InvalidArgumentError(
                f"ruff could not format the cells: {done.stderr.strip() or done.stdout.strip()}"
                " (is ruff installed? `pip install ruff`)"
            )
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    out = []
    for cell in cells:
        src = cell["source"]
        out.append("".join(src) if isinstance(src, list) else src)
    return [s.rstrip("\n") for s in out]


def format_page(text: str) -> str:
    """A MyST page with the code of every code cell formatted; everything else unchanged."""
    lines = text.split("\n")
    cells = code_cells(text)
    formatted = format_sources(["\n".join(lines[a:b]) for a, b in cells])
    for (a, b), code in reversed(list(zip(cells, formatted, strict=True))):
        lines[a:b] = code.split("\n") if code else []
    return "\n".join(lines)


def _pages(paths) -> list[Path]:
    paths = [Path(p) for p in paths]
    missing = [str(p) for p in paths if not p.is_file() or p.suffix != ".md"]
    if missing:
        raise InvalidArgumentError(f"not MyST pages (.md files): {', '.join(missing)}")
    return paths


def unformatted(paths) -> list[str]:
    """The pages among ``paths`` whose code cells ``ruff format`` would change."""
    return [
        str(p) for p in _pages(paths) if format_page(p.read_text(encoding="utf-8")) != p.read_text(encoding="utf-8")
    ]


def format_pages(paths) -> list[str]:
    """Format the code cells of the pages ``paths`` in place; the pages that changed."""
    changed = []
    for p in _pages(paths):
        text = p.read_text(encoding="utf-8")
        new = format_page(text)
        if new != text:
            p.write_text(new, encoding="utf-8")
            changed.append(str(p))
    return changed
