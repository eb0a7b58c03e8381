"""The API reference page (book/api.md): generated from tokensel.__all__, kept up to date, and built by Sphinx
with autodoc under -W -n (slow)."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import tokensel as ts
from tokensel_book import api

ROOT = Path(__file__).resolve().parents[1]


def test_page_is_up_to_date():
    page = (ROOT / "book" / "api.md").read_text()
    assert page == api.render(ROOT), (
        "book/api.md is out of date: run python -c 'import tokensel_book.api as a; a.write()'"
    )


def test_every_public_name_is_documented_with_its_first_page():
    page = (ROOT / "book" / "api.md").read_text()
    for name in ts.__all__:
        line = re.search(rf"^`ts\.{re.escape(name)}`: (.*)$", page, flags=re.M)
        assert line, name
        link = re.search(r"\{doc\}`([^`]+)`", line.group(1))
        if link:  # the linked page really uses the name in its code
            source = (ROOT / "book" / f"{link.group(1)}.md").read_text()
            assert re.search(rf"\bts\.{re.escape(name)}\b", source), (name, link.group(1))
        else:
            assert line.group(1) == "Not used in the book's pages."
    assert "First used in {doc}`own_data`" in page  # fit_texts and the dense functions are introduced there


def test_first_use_finds_code_not_prose():
    pages = {
        "a": "Text about ts.fit_texts.\n",
        "b": "```{code-cell} ipython3\nts.fit_texts(x)\n```\n",
        "c": "```{code-cell} ipython3\nts.statistics.alpha(b)\n```\n",
    }
    assert api.first_use("fit_texts", pages) == "b"
    assert api.first_use("statistics", pages, module=True) == "c"
    assert api.first_use("alpha", pages) is None


def test_bars_escaped_outside_literals_and_aliases_resolved():
    lines = ["an |S| x d table, ``(|S|,)`` stays", ":math:`|x|` and `a|b`_ stay"]
    api.escape_bars(lines)
    assert lines == [r"an \|S\| x d table, ``(|S|,)`` stays", ":math:`|x|` and `a|b`_ stay"]
    assert api.canonical("tokensel.train_p") == "tokensel.training.phases.train_p"
    assert api.canonical("tokensel.checks.check") == "tokensel_book.checks.check"
    assert api.canonical("tokensel.statistics") == "tokensel.analysis.statistics"
    assert api.canonical("tokensel.no_such_name") is None and api.canonical("numpy.ndarray") is None


@pytest.mark.slow
def test_page_builds_under_w_n(tmp_path):
    """A Jupyter Book of the API page alone (the pages it links to as stubs), with the book's own _config.yml
    (every Sphinx extension, autodoc and tokensel_book.api included; nothing to execute), built as the
    Makefile builds the book: -W (warnings are errors) and -n (every reference must resolve)."""
    import shutil

    import yaml

    (tmp_path / "book").mkdir()
    page = api.render(ROOT)
    (tmp_path / "book" / "api.md").write_text(page)
    linked = sorted(set(re.findall(r"\{doc\}`([^`]+)`", page)))
    for name in sorted({"intro", *linked}):
        (tmp_path / "book" / f"{name}.md").write_text(f"---\nsummary: a stub.\n---\n# {name}\n")
    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    assert {"sphinx.ext.autodoc", "tokensel_book.api"} <= set(config["sphinx"]["extra_extensions"])
    config["execute"]["execute_notebooks"] = "off"
    (tmp_path / "_config.yml").write_text(yaml.safe_dump(config))
    toc = {
        "format": "jb-book",
        "root": "book/intro",
        "chapters": [{"file": f"book/{n}"} for n in ["api", *linked] if n != "intro"],
    }
    (tmp_path / "_toc.yml").write_text(yaml.safe_dump(toc))
    shutil.copy(ROOT / "references.bib", tmp_path / "references.bib")
    jb = Path(sys.executable).parent / "jupyter-book"
    out = subprocess.run(
        [str(jb), "build", str(tmp_path), "--builder", "html", "-W", "-n", "--keep-going"],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT / "lib")},
    )
    assert out.returncode == 0, (out.stdout + out.stderr)[-4000:]
    html = (tmp_path / "_build" / "html" / "book" / "api.html").read_text()
    for name in ts.__all__:
        assert f"ts.{name}</span>" in html, name
    assert 'class="sig-name descname"><span class="pre">att_svm_dense' in html


def test_every_public_object_names_the_chapter_that_introduces_it():
    """Issue 23 item 7 (as d2l's library does): the docstring of every public function and class a chapter uses
    names the first chapter that uses it (``api.name_chapters`` writes the missing ones)."""
    found = api.introducing_chapters(ROOT)
    assert len(found) >= 80, len(found)
    missing = [
        f"{name} ({chapter})" for name, (obj, chapter) in found.items() if not api.names_its_chapter(obj, chapter)
    ]
    assert missing == [], "run: python -c 'import tokensel_book.api as a; a.name_chapters()'"


def test_name_chapters_reads_a_chapter_number_and_only_that_one():
    def f():
        """Does something. Chapter 06 shows it."""

    def g():
        """Does something else (chapters 2 and 6 call it)."""

    assert api.names_its_chapter(f, "06_real_data") and not api.names_its_chapter(f, "05_max_margin")
    assert api.names_its_chapter(g, "02_one_step")
