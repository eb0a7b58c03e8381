"""The built book speaks to its readers only: no absolute local paths, no words about how it was built (the rule on
crafted text; every page of ``_build/html`` with ``--browser``)."""

from __future__ import annotations

import html
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HTML = ROOT / "_build" / "html"
SKIP_DIRS = {"_static", "_sources", "_images", "_sphinx_design_static", "_panels_static", "reports"}

#: absolute paths of a machine (a reader's paths are their own), and file:// links
ABSOLUTE_PATH = re.compile(
    r"(?<![\w.])(?:/(?:home|work|tmp|root|Users|var/folders|mnt|opt)/[\w.-]+|file://|[A-Z]:\\Users)"
)
#: words about the book's making rather than its subject (the abbreviation CI in capitals only)
MAKING = re.compile(
    r"(?-i:\bCI\b)|continuous integration|build machine|compute budget|our budget|two CPU cores|"
    r"2 CPU cores|first version of this|earlier draft|previous draft|in this session|"
    r"maintainer",
    re.IGNORECASE,
)


def visible_text(page: str) -> str:
    """The text of an HTML page as a reader sees it: scripts, styles and tags removed, entities decoded."""
    page = re.sub(r"(?is)<(script|style)\b.*?</\1>", " ", page)
    return html.unescape(re.sub(r"(?s)<[^>]+>", " ", page))


def reader_problems(text: str) -> list[str]:
    """Every absolute path and every word about the book's making found in ``text``, with context."""
    out = []
    for rx in (ABSOLUTE_PATH, MAKING):
        for m in rx.finditer(text):
            out.append(" ".join(text[max(0, m.start() - 60) : m.end() + 60].split()))
    return out


def test_the_rule_finds_paths_and_words_about_the_making():
    assert reader_problems("loaded from /work/main/book/data.parquet") != []
    assert reader_problems("In the CI build the run is shorter.") != []
    # the abbreviation is matched in capitals only: a variable named ci (a confidence interval) is not it
    assert reader_problems("ci = ts.shapes.shape_bootstrap(gap, scores, values)") == []
    assert reader_problems("A first version of this chapter did that.") != []
    assert reader_problems("the paper's IMDB experiment, $d = 2048$, with cis-trans and city words") == []
    assert visible_text("<p>a<script>CI</script> b &amp; c</p>").split() == ["a", "b", "&", "c"]


@pytest.mark.browser
def test_every_page_speaks_to_readers_only():
    pages = [p for p in HTML.rglob("*.html") if not SKIP_DIRS & set(p.relative_to(HTML).parts)]
    if not pages:
        pytest.fail(f"no built book at {HTML}: run `make book` first")
    found = {str(p.relative_to(HTML)): reader_problems(visible_text(p.read_text(encoding="utf-8"))) for p in pages}
    found = {k: v for k, v in found.items() if v}
    assert not found, "\n".join(f"{page}: {hit}" for page, hits in found.items() for hit in hits)


def undescribed_images(page: str) -> list[str]:
    """The ``<img>`` tags of an HTML page whose alt text is missing, a file name, or under 15 characters."""
    out = []
    for tag in re.findall(r"<img\b[^>]*>", page):
        alt = re.search(r'\balt="([^"]*)"', tag)
        text = html.unescape(alt.group(1)).strip() if alt else ""
        if len(text) < 15 or re.search(r"\.(png|jpe?g|svg|gif)$", text, re.IGNORECASE):
            out.append(tag[:120])
    return out


def test_the_alt_text_rule():
    assert undescribed_images('<img src="a.png" alt="../_images/0f3a.png">') != []
    assert undescribed_images('<img src="a.png">') != []
    assert undescribed_images('<img src="a.png" alt="Bin means of the values against the gap">') == []


@pytest.mark.browser
def test_every_figure_has_a_descriptive_alt_text():
    # Sphinx's module index left out: its only images are expand/collapse toggles
    pages = [p for p in HTML.rglob("*.html") if not SKIP_DIRS & set(p.relative_to(HTML).parts)]
    pages = [p for p in pages if p.name != "py-modindex.html"]
    if not pages:
        pytest.fail(f"no built book at {HTML}: run `make book` first")
    found = {str(p.relative_to(HTML)): undescribed_images(p.read_text(encoding="utf-8")) for p in pages}
    found = {k: v for k, v in found.items() if v}
    assert not found, "\n".join(f"{page}: {tag}" for page, tags in found.items() for tag in tags)
