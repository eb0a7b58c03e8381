"""tokensel.book.pdf: the built book printed to one PDF by headless Chromium.

The page assembly is tested on crafted pages by the plain test run; the printed book itself (every page of
``_toc.yml``, each chapter's title in the text, a plausible page count) after ``make book``, by
``make browser-check`` (``--browser``)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tokensel.book import pdf
from tokensel.book.checks import toc_files
from tokensel.book.sphinx_roadmap import page_title
from tokensel.errors import DataUnavailableError, InvalidArgumentError

ROOT = Path(__file__).resolve().parents[1]


def _page(title: str) -> str:
    return (f'<html><head><link rel="stylesheet" href="../_static/x.css"><title>{title}</title></head><body>'
            f'<nav>menu</nav><article class="bd-article" role="main"><h1>{title}</h1><img src="../_images/a.png">'
            f'</article></body></html>')


def test_combined_page_keeps_every_article_in_order(tmp_path):
    (tmp_path / "book").mkdir()
    for name in ("one", "two"):
        (tmp_path / "book" / f"{name}.html").write_text(_page(name.title()))
    out = pdf.combined_page(tmp_path, ["book/one", "book/two"])
    text = out.read_text()
    assert out == tmp_path / "book" / "print.html"
    assert text.count('class="tokensel-print-page"') == 2 and text.index("<h1>One") < text.index("<h1>Two")
    assert "x.css" in text and "menu" not in text and "../_images/a.png" in text  # relative links still valid
    with pytest.raises(DataUnavailableError, match="make book"):
        pdf.combined_page(tmp_path, ["book/one", "book/three"])
    with pytest.raises(InvalidArgumentError, match="one folder"):
        pdf.combined_page(tmp_path, ["book/one", "other/two"])
    with pytest.raises(InvalidArgumentError, match="non-empty"):
        pdf.combined_page(tmp_path, [])
    (tmp_path / "book" / "bare.html").write_text("<html><head></head><body>no article</body></html>")
    with pytest.raises(DataUnavailableError, match="article"):
        pdf.combined_page(tmp_path, ["book/bare"])


@pytest.mark.browser
def test_the_printed_book_has_every_page(tmp_path):
    import pypdf
    pages = toc_files(ROOT)
    out = pdf.print_book(ROOT / "_build" / "html", tmp_path / "tokensel.pdf", pages, profile_dir=tmp_path)
    reader = pypdf.PdfReader(out)
    text = " ".join(" ".join((p.extract_text() or "").split()) for p in reader.pages)
    missing = [t for t in (page_title(ROOT / f"{p}.md").replace("`", "") for p in pages) if t not in text]
    assert not missing, f"chapter titles not found in the PDF: {missing}"
    assert len(reader.pages) >= 60, len(reader.pages)
    assert re.search(r"Exercise 7\.3", text)  # the last chapter's exercises are printed, not cut off
    print(f"PDF: {len(reader.pages)} pages, {out.stat().st_size / 2**20:.1f} MiB")
