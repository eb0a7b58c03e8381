"""tokensel_book.sphinx_roadmap: the intro's chapter list, generated from _toc.yml."""

import json
from pathlib import Path

import pytest
from sphinx.errors import ExtensionError

from tokensel_book.sphinx_roadmap import front_matter, roadmap_lines
from tokensel_book.toc import reader_pages

ROOT = Path(__file__).resolve().parents[2]


def test_every_page_of_the_book_has_a_summary():
    lines = roadmap_lines(ROOT, "book/intro")
    assert [line.split("`")[1] for line in lines] == [Path(p).name for p in reader_pages(ROOT)[1:]]


def test_a_page_without_summary_stops_the_build(tmp_path):
    (tmp_path / "_toc.yml").write_text("format: jb-book\nroot: intro\nchapters:\n  - file: a\n  - file: sub/b\n")
    (tmp_path / "intro.md").write_text("# Intro\n")
    (tmp_path / "a.md").write_text("---\nsummary: 'the first $x$\n  page.'\n---\n# A\n")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b.md").write_text("# B, no front matter\n")
    pytest.raises(ExtensionError, lambda: roadmap_lines(tmp_path, "intro")).match(r"sub/b.md has no `summary:`")
    (tmp_path / "sub" / "b.md").write_text("---\nsummary: second\n---\n# B\n")
    assert roadmap_lines(tmp_path, "intro") == ["- {doc}`a`: the first $x$ page.", "- {doc}`sub/b`: second"]
    assert front_matter(tmp_path / "intro.md") == {}


def test_the_readmes_contents_are_the_books():
    from tokensel_book.sphinx_roadmap import contents_markdown

    readme = (ROOT / "README.md").read_text()
    assert contents_markdown(ROOT) in readme, "README's contents are stale: paste `python -m tokensel_book contents`"
    assert len(readme.split()) <= 1500, "README over 1,500 words: move detail to ARCHITECTURE.md or a book page"


def test_a_notebook_page_gives_its_summary_and_title_from_its_metadata_and_cells(tmp_path):
    # the student edition builds from executed notebooks, with no .md beside them
    from tokensel_book.sphinx_roadmap import page_source, page_title

    (tmp_path / "_toc.yml").write_text("format: jb-book\nroot: intro\nchapters:\n  - file: a\n")
    (tmp_path / "intro.md").write_text("# Intro\n")
    code, markdown = {"cell_type": "code", "source": "# not a title"}, ["# The title\n", "text"]
    cells = [code, {"cell_type": "markdown", "source": markdown}]
    nb = {"metadata": {"summary": "from the notebook"}, "cells": cells}
    (tmp_path / "a.ipynb").write_text(json.dumps(nb))
    assert page_source(tmp_path, "a") == tmp_path / "a.ipynb"
    assert roadmap_lines(tmp_path, "intro") == ["- {doc}`a`: from the notebook"]
    assert page_title(tmp_path / "a.ipynb") == "The title"
    (tmp_path / "a.md").write_text("---\nsummary: from the source\n---\n# A\n")
    assert page_source(tmp_path, "a") == tmp_path / "a.md"  # the .md is the source where both exist
