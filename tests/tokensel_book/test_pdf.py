"""tokensel_book.pdf: the book printed to one PDF by headless Chromium (page assembly on crafted pages; the printed
book after ``make book``, with ``--browser``)."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest

from tokensel.errors import DataUnavailableError, InvalidArgumentError
from tokensel_book import pdf
from tokensel_book.sphinx_roadmap import page_title
from tokensel_book.toc import reader_pages

ROOT = Path(__file__).resolve().parents[2]


def _page(title: str) -> str:
    return (
        f'<html><head><link rel="stylesheet" href="../_static/x.css"><title>{title} &#8212; The Book</title>'
        f'</head><body><nav><p class="title logo__title">The Book</p>menu</nav><article class="bd-article" '
        f'role="main"><h1><span class="section-number">1. </span>{title} \\(p_t\\)<a class="headerlink" '
        f'href="#x">#</a></h1><img src="../_images/a.png"></article></body></html>'
    )


def test_combined_page_keeps_every_article_in_order_after_a_title_page_and_contents(tmp_path):
    (tmp_path / "book").mkdir()
    for name in ("one", "two"):
        (tmp_path / "book" / f"{name}.html").write_text(_page(name.title()))
    out = pdf.combined_page(tmp_path, ["book/one", "book/two"])
    text = out.read_text()
    assert out == tmp_path / "book" / "print.html"
    assert text.count('class="tokensel-print-page"') == 2 and text.index("<h1><span") < text.index("Two \\(p_t")
    assert "x.css" in text and "menu" not in text and "../_images/a.png" in text  # relative links still valid
    assert text.index('data-part="title"') < text.index('data-part="toc"') < text.index('data-part="0"')
    assert "<h1>The Book</h1>" in text and "<h1>Contents</h1>" in text and 'href="#tokensel-part-1"' in text
    assert "details.hide.above-input" in text  # no stub of a hidden cell on paper
    assert pdf.headings_of(out) == ["1. One p_t", "1. Two p_t"]
    custom = pdf.combined_page(tmp_path, ["book/one"], title="A | class", subtitle="student edition")
    assert "<h1>A | class</h1><p>student edition</p>" in custom.read_text()
    assert pdf.headings_of(custom) == ["1. One p_t"]
    with pytest.raises(DataUnavailableError, match="make book"):
        pdf.combined_page(tmp_path, ["book/one", "book/three"])
    with pytest.raises(InvalidArgumentError, match="one folder"):
        pdf.combined_page(tmp_path, ["book/one", "other/two"])
    pytest.raises(InvalidArgumentError, lambda: pdf.combined_page(tmp_path, [])).match("non-empty")
    (tmp_path / "book" / "bare.html").write_text("<html><head></head><body>no article</body></html>")
    pytest.raises(DataUnavailableError, lambda: pdf.combined_page(tmp_path, ["book/bare"])).match("article")
    (tmp_path / "book" / "headless.html").write_text(
        '<html><body><article class="bd-article">x</article></body></html>'
    )
    pytest.raises(DataUnavailableError, lambda: pdf.combined_page(tmp_path, ["book/headless"])).match("no <head>")


def test_book_title():
    assert pdf.book_title(_page("One")) == "The Book"
    assert pdf.book_title("<title>Page &#8212; Other book</title>") == "Other book"


def _blank(pages: int) -> bytes:
    from pypdf import PdfWriter

    writer = PdfWriter()
    for _ in range(pages):
        writer.add_blank_page(595, 842)
    buf = io.BytesIO()
    writer.write(buf)
    return buf.getvalue()


def test_assemble_numbers_the_pages_and_bookmarks_each_part(tmp_path):
    import pypdf

    parts = [(None, _blank(1)), ("Contents", _blank(1)), ("1. One", _blank(3)), ("2. Two", _blank(2))]
    out = pdf.assemble(parts, tmp_path / "sub" / "book.pdf")
    reader = pypdf.PdfReader(out)
    assert len(reader.pages) == 7
    assert [p.extract_text().strip() for p in reader.pages] == ["", "2", "3", "4", "5", "6", "7"]
    outline = [(o.title, reader.get_destination_page_number(o)) for o in reader.outline]
    assert outline == [("Contents", 1), ("1. One", 2), ("2. Two", 5)]
    assert pdf.page_starts([3, 2], front=2) == [3, 6]  # as the contents print them: 1-based
    pytest.raises(InvalidArgumentError, lambda: pdf.assemble([], tmp_path / "x.pdf")).match("parts")
    with pytest.raises(InvalidArgumentError, match="not a readable PDF"):
        pdf.assemble([("x", b"no pdf")], tmp_path / "x.pdf")


def check_printed_book(out, pages, exercises=r"Exercise 7\.3") -> str:
    """The checks of a printed book (full or student edition); returns its text."""
    import pypdf
    import pypdfium2

    reader = pypdf.PdfReader(out)  # the outline
    # each sheet's text by PDFium (16 times faster than pypdf on 400 sheets, and ligatures come back as letters)
    document = pypdfium2.PdfDocument(out)
    try:
        texts = [" ".join(document[k].get_textpage().get_text_range().split()) for k in range(len(document))]
    finally:
        document.close()
    assert len(texts) == len(reader.pages)
    text = " ".join(texts)
    titles = [page_title(ROOT / f"{p}.md").replace("`", "") for p in pages]
    missing = [t for t in titles if t not in text]
    assert not missing, f"chapter titles not found in the PDF: {missing}"
    assert len(reader.pages) >= 60, len(reader.pages)
    assert re.search(exercises, text)  # the last chapter's exercises are printed, not cut off
    assert "Show code cell" not in text and "Hide code cell" not in text  # no stub of a hidden cell
    assert "Contents" in texts[1] and all(t in texts[1] for t in titles[:3])  # the contents, on sheet 2
    # every sheet after the title page ends with its number; the contents give each part's first sheet
    unnumbered = [k + 1 for k, t in enumerate(texts[1:], start=1) if not t.endswith(str(k + 1))]
    assert not unnumbered, f"sheets without their page number: {unnumbered[:10]}"
    outline = [(o.title, reader.get_destination_page_number(o)) for o in reader.outline]
    assert len(outline) == len(pages) + 1 and outline[0] == ("Contents", 1)
    for (heading, index), title in zip(outline[1:], titles, strict=True):
        assert title in heading and title in texts[index], (heading, index)
    return text


@pytest.mark.browser
def test_the_printed_book_has_every_page(tmp_path):
    pages = reader_pages(ROOT)  # as `make pdf` prints them: the API folder pages stay out
    out = pdf.print_book(ROOT / "_build" / "html", tmp_path / "tokensel.pdf", pages, profile_dir=tmp_path)
    check_printed_book(out, pages)
    print(f"PDF: {out.stat().st_size / 2**20:.1f} MiB")
    # every figure of the HTML is printed as an image (the explorable ones as their PNG)
    import pypdf

    images = set()
    for sheet in pypdf.PdfReader(out).pages:
        for ref in (sheet.get("/Resources") or {}).get("/XObject", {}).values():
            if ref.get_object().get("/Subtype") == "/Image":
                images.add(ref.idnum)
    figures = sum((ROOT / "_build" / "html" / f"{p}.html").read_text().count("<figure") for p in pages)
    assert len(images) >= figures > 20, (len(images), figures)
