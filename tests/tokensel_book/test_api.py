"""The API reference (book/api.md and a page per folder): generated from the library, kept up to date, and built by
Sphinx with autodoc under -W -n (slow)."""

import re
import shutil
from pathlib import Path

import pytest
import yaml
from conftest import build_book

import tokensel as ts
from tokensel_book import api

ROOT = Path(__file__).resolve().parents[2]


def test_the_pages_are_up_to_date():
    for rel, text in api.render(ROOT).items():
        stale = f"{rel} is stale: python -c 'import tokensel_book.api as a; a.write(\".\")'"
        assert (ROOT / rel).read_text() == text, stale


def test_every_public_name_is_listed_with_the_page_that_first_uses_it():
    page = (ROOT / "book" / "api.md").read_text()
    for name in ts.__all__:
        row = re.search(rf"^\| `ts\.{re.escape(name)}` \|.*\| (.*) \|$", page, flags=re.M)
        assert row, name
        link = re.search(r"\{doc\}`([^`]+)`", row.group(1))
        if link:  # the linked page really uses the name in its code
            assert re.search(rf"\bts\.{re.escape(name)}\b", (ROOT / "book" / f"{link.group(1)}.md").read_text())
        else:
            assert row.group(1) == "-", name
    assert "{doc}`own_data`" in page  # fit_texts and the dense functions are introduced there


def test_first_use_finds_code_not_prose():
    cell = "```{code-cell} ipython3\n%s\n```\n"
    pages = {"a": "Text about ts.fit_texts.\n", "b": cell % "ts.fit_texts(x)", "c": cell % "ts.statistics.alpha(b)"}
    assert api.first_use("fit_texts", pages) == "b"
    assert api.first_use("statistics", pages) == "c"
    assert api.first_use("alpha", pages) is None


def test_bars_escaped_outside_literals_and_aliases_resolved():
    lines = ["an |S| x d table, ``(|S|,)`` stays", ":math:`|x|` and `a|b`_ stay"]
    api.escape_bars(lines)
    assert lines == [r"an \|S\| x d table, ``(|S|,)`` stays", ":math:`|x|` and `a|b`_ stay"]
    assert api.canonical("tokensel.train_p") == "tokensel.training.phases.train_p"
    assert api.canonical("tokensel.statistics") == "tokensel.analysis.statistics"
    assert api.canonical("tokensel.no_such_name") is None and api.canonical("numpy.ndarray") is None


@pytest.mark.slow(seconds=60)
def test_the_pages_build_under_w_n(tmp_path):
    """The API pages alone, with the book's _config.yml, built as the Makefile builds the book (-W -n)."""

    pages = api.render(ROOT)
    for rel, text in pages.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    linked = sorted({n for t in pages.values() for n in re.findall(r"\{doc\}`([^`/]+)`", t)})
    for name in sorted({"intro", *linked}):
        (tmp_path / "book" / f"{name}.md").write_text(f"---\nsummary: a stub.\n---\n# {name}\n")
    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    config["execute"]["execute_notebooks"] = "off"
    (tmp_path / "_config.yml").write_text(yaml.safe_dump(config))
    sections = [{"file": f"book/api/{key}"} for key in api.FOLDERS]
    chapters = [{"file": "book/api", "sections": sections}] + [{"file": f"book/{n}"} for n in linked if n != "intro"]
    (tmp_path / "_toc.yml").write_text(
        yaml.safe_dump({"format": "jb-book", "root": "book/intro", "chapters": chapters})
    )
    shutil.copy(ROOT / "references.bib", tmp_path / "references.bib")
    build_book(tmp_path, "-W", "-n", "--keep-going")
    html = (tmp_path / "_build" / "html" / "book" / "api" / "analysis.html").read_text()
    assert 'class="sig-name descname"><span class="pre">att_svm_dense' in html
