"""The student edition: the same executed book with every exercise's solution left out.

:func:`prepare_student_sources` writes a source folder for a second Jupyter Book build from the first one:
every page of ``_toc.yml`` that the first build executed comes as its executed notebook
(``_build/jupyter_execute/<page>.ipynb``, outputs included), the other pages as their ``.md``, and a
``_config.yml`` that executes nothing and sets sphinx-exercise's ``hide_solutions``. That option hides a
``{solution}`` but not a gated one (``{solution-start}`` ... ``{solution-end}``, a solution with code cells):
sphinx-exercise 1.2 drops its start and keeps its end and every cell between, so
:func:`strip_gated_solutions` takes those out of the notebooks first. So the student edition
shows the very numbers and figures of the full book and costs a Sphinx build, not a second execution.
``make book-student`` runs it after ``make book`` and builds ``_build/student/_build/html``.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import yaml

from ..errors import DataUnavailableError, InvalidArgumentError

#: files of the book's root that every build reads, besides the pages
SUPPORT_FILES = ("_toc.yml", "references.bib", "jupytext.toml")
SUPPORT_DIRS = ("_static",)
#: what the title says in the student edition
TITLE_SUFFIX = " (student edition: exercises without solutions)"


_GATE_START = re.compile(r"^(`{3,}|:{3,})\{solution-start\}")
_GATE_END = re.compile(r"^(`{3,}|:{3,})\{solution-end\}")


def strip_gated_solutions(notebook: dict) -> tuple[dict, int]:
    """A copy of ``notebook`` (nbformat 4 as a dict) without its gated solutions: from the line that opens a
    ``{solution-start}`` block to the fence that closes its ``{solution-end}``, every Markdown line and code
    cell between; and the number of solutions removed. An unclosed gate is an error."""
    if not isinstance(notebook, dict) or not isinstance(notebook.get("cells"), list):
        raise InvalidArgumentError("notebook must be an nbformat-4 notebook as a dict (with a 'cells' list)")
    cells, removed, inside, closing = [], 0, False, None
    for cell in notebook["cells"]:
        if cell.get("cell_type") != "markdown":
            if not inside:
                cells.append(cell)
            continue
        kept = []
        for line in "".join(cell.get("source", "")).splitlines(keepends=True):
            if not inside and _GATE_START.match(line):
                inside, closing = True, None
                continue
            if inside:
                if closing is None and _GATE_END.match(line):
                    closing = _GATE_END.match(line).group(1)
                elif closing is not None and line.strip() == closing:
                    inside, removed = False, removed + 1
                continue
            kept.append(line)
        if "".join(kept).strip():
            cells.append(dict(cell, source="".join(kept)))
    if inside:
        raise InvalidArgumentError("notebook has a {solution-start} without its closed {solution-end}")
    return dict(notebook, cells=cells), removed


def student_config(config: dict) -> dict:
    """The full book's ``_config.yml`` (as a dict) turned into the student edition's: no execution, executed
    notebooks read as pages, solutions hidden. ``config`` is not changed."""
    if not isinstance(config, dict) or "execute" not in config or "sphinx" not in config:
        raise InvalidArgumentError(
            "config must be the book's _config.yml as a dict, with 'execute' and 'sphinx' sections; "
            f"got {type(config).__name__} with keys {sorted(config) if isinstance(config, dict) else '-'}")
    out = yaml.safe_load(yaml.safe_dump(config))  # a deep copy of plain data
    out["title"] = str(out.get("title", "")) + TITLE_SUFFIX
    out["execute"] = dict(out["execute"], execute_notebooks="off")
    out["exclude_patterns"] = [p for p in out.get("exclude_patterns", []) if not p.endswith(".ipynb")]
    sphinx = out["sphinx"]
    sphinx["config"] = dict(sphinx.get("config") or {}, hide_solutions=True)
    return out


def prepare_student_sources(root, built, out) -> Path:
    """Write the student edition's sources to ``out`` (emptied first) and return it.

    ``root`` is the book's root (with ``_config.yml`` and ``_toc.yml``), ``built`` the first build's folder
    (``_build``, with ``jupyter_execute/``). Every page of ``_toc.yml`` is taken from ``built`` when it was
    executed there, else from ``root`` (a page without code)."""
    from .checks import toc_files
    from .sphinx_roadmap import front_matter

    root, built, out = Path(root), Path(built), Path(out)
    if not (root / "_config.yml").is_file() or not (root / "_toc.yml").is_file():
        raise InvalidArgumentError(f"root={str(root)!r} has no _config.yml and _toc.yml: pass the book's root folder")
    executed = built / "jupyter_execute"
    if not executed.is_dir():
        raise DataUnavailableError(f"built={str(built)!r} has no jupyter_execute/ folder: run `make book` first "
                                   "(the student edition reuses its executed notebooks)")
    protected = (root.resolve(), built.resolve())
    if out.resolve() in protected or any(out.resolve() in p.parents for p in protected):
        raise InvalidArgumentError(f"out={str(out)!r} is the book's root or build folder or holds one: pass a "
                                   "folder of its own (it is emptied first), e.g. _build/student")
    pages = toc_files(root)
    sources = {}
    for page in pages:
        nb = executed / f"{page}.ipynb"
        md = root / f"{page}.md"
        if nb.is_file():
            sources[page] = nb
        elif md.is_file() and "kernelspec" not in front_matter(md):
            sources[page] = md
        else:
            raise DataUnavailableError(f"page {page!r} was not executed in {str(executed)!r}: run `make book` "
                                       "first (the student edition shows the outputs of that build)")
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    config = yaml.safe_load((root / "_config.yml").read_text(encoding="utf-8"))
    (out / "_config.yml").write_text("# written by tokensel.book.student from the book's _config.yml\n"
                                     + yaml.safe_dump(student_config(config), sort_keys=False), encoding="utf-8")
    for name in SUPPORT_FILES:
        if (root / name).is_file():
            shutil.copy2(root / name, out / name)
    for name in SUPPORT_DIRS:
        if (root / name).is_dir():
            shutil.copytree(root / name, out / name)
    for page, src in sources.items():
        dest = out / (page + src.suffix)
        dest.parent.mkdir(parents=True, exist_ok=True)
        if src.suffix == ".ipynb":
            notebook, _ = strip_gated_solutions(json.loads(src.read_text(encoding="utf-8")))
            dest.write_text(json.dumps(notebook, indent=1, ensure_ascii=False), encoding="utf-8")
        else:
            shutil.copy2(src, dest)
    return out
