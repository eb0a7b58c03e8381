"""The chapters' code cells linted and formatted by ruff, under the project's one configuration.

Each page's cell code goes through a throw-away notebook (``ruff check --fix``, ``ruff format``) and back, the rest
of the page byte for byte; line length is the text column, 88. ``python -m tokensel_book format [--check]``."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from tokensel.errors import InvalidArgumentError

#: the formatter's line length: what a code cell shows without scrolling in the book's text column
LINE_LENGTH = 88


def project_config(start: Path) -> Path | None:
    """The nearest ``pyproject.toml`` with ``[tool.ruff]`` above ``start``, or None (ruff's defaults)."""
    here = Path(start).resolve()
    for folder in [here, *here.parents] if here.is_dir() else list(here.parents):
        candidate = folder / "pyproject.toml"
        if candidate.is_file() and "[tool.ruff" in candidate.read_text(encoding="utf-8"):
            return candidate
    return None


def _ruff(command: list[str], path: Path, config: Path | None) -> subprocess.CompletedProcess:
    where = ["--config", str(config)] if config is not None else ["--isolated"]
    # wrap at the text column; E501 keeps the project's limit, long strings are not the formatter's to break
    width = ["--line-length", str(LINE_LENGTH)] if command[0] == "format" else []
    return subprocess.run(
        [sys.executable, "-m", "ruff", *command, "--no-cache", *where, *width, str(path)],
        capture_output=True,
        text=True,
    )


def _notebook(sources: list[str]) -> dict:
    return {
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


def _check_sources(sources) -> None:
    if not isinstance(sources, list) or not all(isinstance(s, str) for s in sources):
        raise InvalidArgumentError("sources must be a list of str, the code of each cell")


def _check_config(config) -> None:
    if config is not None and not (isinstance(config, Path) and config.is_file()):
        raise InvalidArgumentError(f"config must be the path of a pyproject.toml or None, got {config!r}")


_OPEN = re.compile(r"^(`{3,})\{code-cell\}")


def code_cells(text: str) -> list[tuple[int, int]]:
    """Each ``{code-cell}``'s code as ``(first line, end line)`` indices into ``text.split("\\n")`` (end
    excluded), after its YAML block and ``:option:`` lines."""
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


def _ruff_cells(sources: list[str], config: Path | None, commands: list[list[str]]) -> tuple[list[str], str]:
    """Run the ruff ``commands`` on the cells (as one notebook) under ``config``: the code and the last output."""
    _check_sources(sources)
    _check_config(config)
    if not sources:
        return [], ""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "cells.ipynb"
        path.write_text(json.dumps(_notebook(sources)), encoding="utf-8")
        for command in commands:
            done = _ruff(command, path, config)
            if done.returncode != 0:
                raise InvalidArgumentError(
                    f"ruff could not {command[0]} the cells: {done.stderr.strip() or done.stdout.strip()}"
                    " (is ruff installed? `pip install ruff`)"
                )
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    out = ["".join(c["source"]) if isinstance(c["source"], list) else c["source"] for c in cells]
    return [s.rstrip("\n") for s in out], done.stdout


def format_sources(sources: list[str], config: Path | None = None) -> list[str]:
    """The cells' code fixed (``ruff check --fix``) and formatted under ``config`` (None: ruff's defaults)."""
    return _ruff_cells(sources, config, [["check", "--fix-only", "--exit-zero", "--quiet"], ["format"]])[0]


def lint_sources(sources: list[str], config: Path | None = None) -> list[tuple[int, int, str, str]]:
    """``ruff check`` findings in the cells as ``(cell index, line in the cell, code, message)`` under ``config``."""
    report = _ruff_cells(sources, config, [["check", "--output-format", "json", "--exit-zero"]])[1]
    found = []
    for item in json.loads(report or "[]"):
        cell = item.get("cell")
        index = int(cell) - 1 if cell is not None else 0  # ruff numbers a notebook's cells from 1
        found.append((index, int(item["location"]["row"]), str(item["code"]), str(item["message"])))
    return sorted(found)


def format_page(text: str, config: Path | None = None) -> str:
    """A MyST page with every code cell fixed and formatted under ``config``; everything else unchanged."""
    lines = text.split("\n")
    cells = code_cells(text)
    formatted = format_sources(["\n".join(lines[a:b]) for a, b in cells], config)
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
    """The pages among ``paths`` that ruff would change, each under its :func:`project_config`."""
    return [
        str(p)
        for p in _pages(paths)
        if format_page(p.read_text(encoding="utf-8"), project_config(p)) != p.read_text(encoding="utf-8")
    ]


def lint_findings(paths) -> list[str]:
    """``ruff check`` findings in the pages ``paths``, one ``page:line: CODE message`` line each."""
    found = []
    for p in _pages(paths):
        text = p.read_text(encoding="utf-8")
        lines = text.split("\n")
        cells = code_cells(text)
        for index, row, code, message in lint_sources(["\n".join(lines[a:b]) for a, b in cells], project_config(p)):
            found.append(f"{p}:{cells[index][0] + row}: {code} {message}")
    return found


def format_pages(paths) -> list[str]:
    """Fix and format the code cells of the pages ``paths`` in place; the pages that changed."""
    changed = []
    for p in _pages(paths):
        text = p.read_text(encoding="utf-8")
        new = format_page(text, project_config(p))
        if new != text:
            p.write_text(new, encoding="utf-8")
            changed.append(str(p))
    return changed
