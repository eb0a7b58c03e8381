"""tokensel.book.student: the student edition, the executed book without the exercises' solutions.

The source preparation is tested on crafted notebooks by the plain test run; the built student edition
(``make book-student``, after ``make book``) by ``make browser-check`` (``--browser``): every chapter has its
exercises and none of its solutions, and shows the same figures as the full book."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from tokensel.book.checks import toc_files, toc_numbers
from tokensel.book.student import prepare_student_sources, strip_gated_solutions, student_config
from tokensel.errors import DataUnavailableError, InvalidArgumentError

ROOT = Path(__file__).resolve().parents[1]
FULL = ROOT / "_build" / "html"
STUDENT = ROOT / "_build" / "student" / "_build" / "html"


def _md(text):
    return {"cell_type": "markdown", "metadata": {}, "source": text}


def _code(text):
    return {"cell_type": "code", "metadata": {}, "source": text, "outputs": [], "execution_count": None}


def _notebook(*cells):
    return {"nbformat": 4, "nbformat_minor": 5, "metadata": {"summary": "s"}, "cells": list(cells)}


def test_strip_gated_solutions_removes_the_gate_and_everything_between():
    nb = _notebook(_md("````{exercise} Core: x\n:label: ex-x\nDo it.\n````\n\n````{solution-start} ex-x\n"
                       ":class: dropdown\n````\n\nThe answer:\n"),
                   _code("answer = 42"),
                   _md("so 42.\n\n````{solution-end}\n````\n\nAfter the solution.\n"),
                   _code("print('kept')"))
    out, removed = strip_gated_solutions(nb)
    assert removed == 1
    text = json.dumps(out)
    assert "ex-x" in text and "Do it." in text and "After the solution." in text and "kept" in text
    assert "solution-start" not in text and "solution-end" not in text
    assert "answer = 42" not in text and "The answer" not in text and "so 42" not in text
    assert len(nb["cells"]) == 4  # the input is not changed


def test_strip_gated_solutions_keeps_plain_solutions_and_rejects_an_open_gate():
    nb = _notebook(_md("````{solution} ex-x\nplain\n````\n"))
    assert strip_gated_solutions(nb) == (nb, 0)
    with pytest.raises(InvalidArgumentError, match="solution-end"):
        strip_gated_solutions(_notebook(_md("````{solution-start} ex-x\n````\n"), _code("x = 1")))
    with pytest.raises(InvalidArgumentError, match="notebook"):
        strip_gated_solutions({"cells": "no"})


def test_student_config_executes_nothing_and_hides_solutions():
    full = yaml.safe_load((ROOT / "_config.yml").read_text())
    cfg = student_config(full)
    assert cfg["execute"]["execute_notebooks"] == "off"
    assert cfg["sphinx"]["config"]["hide_solutions"] is True
    assert "student edition" in cfg["title"]
    assert not any(p.endswith(".ipynb") for p in cfg["exclude_patterns"])
    assert full["execute"]["execute_notebooks"] == "cache"  # not changed
    assert cfg["sphinx"]["extra_extensions"] == full["sphinx"]["extra_extensions"]
    with pytest.raises(InvalidArgumentError, match="config"):
        student_config({"title": "x"})


def _book(tmp_path, pages=("book/intro", "book/ch")):
    root = tmp_path / "root"
    (root / "book").mkdir(parents=True)
    (root / "_config.yml").write_text(yaml.safe_dump(
        {"title": "t", "execute": {"execute_notebooks": "force"}, "exclude_patterns": ["**/*.ipynb"],
         "sphinx": {"config": {}}}))
    (root / "_toc.yml").write_text(yaml.safe_dump(
        {"format": "jb-book", "root": pages[0], "chapters": [{"file": p} for p in pages[1:]]}))
    for p in pages:
        (root / f"{p}.md").write_text("---\nkernelspec:\n  name: python3\nsummary: s\n---\n# T\n")
    return root


def test_prepare_student_sources_uses_the_executed_notebooks(tmp_path):
    root = _book(tmp_path)
    (root / "book" / "notes.md").write_text("---\nsummary: s\n---\n# Notes\n")
    built = tmp_path / "built"
    with pytest.raises(DataUnavailableError, match="make book"):
        prepare_student_sources(root, built, tmp_path / "out")
    (built / "jupyter_execute" / "book").mkdir(parents=True)
    (built / "jupyter_execute" / "book" / "intro.ipynb").write_text(json.dumps(_notebook(_md("# T\n"))))
    with pytest.raises(DataUnavailableError, match="book/ch"):  # a code page that was not executed
        prepare_student_sources(root, built, tmp_path / "out")
    (built / "jupyter_execute" / "book" / "ch.ipynb").write_text(json.dumps(_notebook(
        _md("# Ch\n````{solution-start} ex\n````\n"), _code("x"), _md("````{solution-end}\n````\n"))))
    with pytest.raises(InvalidArgumentError, match="out"):
        prepare_student_sources(root, built, built)
    with pytest.raises(InvalidArgumentError, match="out"):
        prepare_student_sources(root, built, tmp_path)
    out = prepare_student_sources(root, built, tmp_path / "out")
    assert sorted(p.name for p in (out / "book").iterdir()) == ["ch.ipynb", "intro.ipynb"]
    assert yaml.safe_load((out / "_config.yml").read_text())["sphinx"]["config"]["hide_solutions"] is True
    cells = json.loads((out / "book" / "ch.ipynb").read_text())["cells"]
    assert [c["cell_type"] for c in cells] == ["markdown"] and "solution" not in cells[0]["source"]
    with pytest.raises(InvalidArgumentError, match="root"):
        prepare_student_sources(tmp_path / "nothing", built, tmp_path / "out2")


def _count(page: Path, cls: str) -> int:
    return len(re.findall(rf'class="{cls}\b[^"]*admonition', page.read_text(encoding="utf-8")))


@pytest.mark.browser
def test_the_student_edition_has_every_exercise_and_no_solution():
    if not STUDENT.is_dir():
        pytest.fail(f"no student edition at {STUDENT}: run `make book-student` first")
    chapters = [p for p in toc_files(ROOT) if p in toc_numbers(ROOT)]
    problems = []
    for page in chapters:
        full, student = FULL / f"{page}.html", STUDENT / f"{page}.html"
        exercises = _count(student, "exercise")
        if exercises < 3 or exercises != _count(full, "exercise"):
            problems.append(f"{page}: {exercises} exercises in the student edition, {_count(full, 'exercise')} in the book")
        if _count(student, "solution") or "Solution to" in student.read_text(encoding="utf-8"):
            problems.append(f"{page}: a solution is shown in the student edition")
        if _count(full, "solution") < 3:
            problems.append(f"{page}: the full book shows {_count(full, 'solution')} solutions (3 or more expected)")
        figures = [len(re.findall(r"<img\b", p.read_text(encoding="utf-8"))) for p in (full, student)]
        if figures[1] < figures[0]:
            problems.append(f"{page}: {figures[1]} figures in the student edition, {figures[0]} in the book")
    assert not problems, "\n".join(problems)
