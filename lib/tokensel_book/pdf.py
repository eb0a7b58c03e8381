"""The built book as one PDF for a class, printed by headless Chromium.

:func:`combined_page` writes one print page of every ``_toc.yml`` page; :func:`print_book` prints each part by
itself (to learn its first page), and :func:`assemble` joins them with pypdf, page numbers and bookmarks.
``make pdf`` / ``make pdf-student`` or ``python -m tokensel_book pdf [HTML_DIR] [OUT]``."""

from __future__ import annotations

import base64
import datetime
import functools
import html
import http.server
import io
import json
import os
import re
import shutil
import threading
from contextlib import contextmanager
from pathlib import Path

from tokensel.errors import DataUnavailableError, InvalidArgumentError

PRINT_PAGE = "book/print.html"
CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--no-first-run",
    "--disable-component-update",
    "--disable-sync",
    "--disable-quic",
    "--window-size=1280,1600",
)
WAIT_FOR_MATH = """
const done = arguments[arguments.length - 1];
if (!window.MathJax || !MathJax.startup || !MathJax.startup.promise) { done("MathJax not loaded"); return; }
MathJax.startup.promise.then(() => done("ok"), (e) => done("MathJax failed: " + e));
"""
_ARTICLE = re.compile(r'<article class="bd-article"[^>]*>(.*?)</article>', re.S)
_HEAD = re.compile(r"<head>(.*?)</head>", re.S)
_H1 = re.compile(r"<h1[^>]*>(.*?)</h1>", re.S)
_BOOK_TITLE = re.compile(r'class="title logo__title"[^>]*>(.*?)<', re.S)
_PAGE_TITLE = re.compile(r"<title>(.*?)</title>", re.S)
#: print rules of the PDF itself: no stub of a hidden cell, a title page and a contents page
PRINT_STYLE = """
@media print {
  details.hide.above-input, details.hide.below-input, details.hide.above-output { display: none !important; }
}
section.tokensel-print-title { text-align: center; padding-top: 30vh; }
section.tokensel-print-title h1 { font-size: 2.2em; }
section.tokensel-print-title p { font-size: 1.1em; }
section.tokensel-print-toc ol { list-style: none; padding: 0; }
section.tokensel-print-toc li { display: flex; gap: 0.5em; margin: 0.4em 0; }
section.tokensel-print-toc li .tokensel-toc-dots { flex: 1; border-bottom: 1px dotted #888; }
"""
#: run in the print page before printing: every dropdown (a solution, a collapsed admonition) open
OPEN_ALL = """
document.querySelectorAll('details:not(.hide)').forEach(d => d.open = true);
document.querySelectorAll('.toggle-hidden').forEach(e => e.classList.remove('toggle-hidden'));
"""
#: run with a part's index (or "front"): only that part of the print page shown
SHOW_PART = """
const part = arguments[0];
document.querySelectorAll('section[data-part]').forEach(s => {
  s.style.display = (s.dataset.part === part) ? '' : 'none';
  s.style.breakBefore = 'auto';
});
"""
SET_PAGE_NUMBERS = """
const numbers = arguments[0];
document.querySelectorAll('.tokensel-toc-page').forEach(s => { s.textContent = numbers[s.dataset.target] || ''; });
"""


def _text(fragment: str) -> str:
    """Plain text of an HTML fragment: tags, header links and MathJax's delimiters dropped."""
    text = html.unescape(re.sub(r'<a class="headerlink".*?</a>|<[^>]+>', " ", fragment))
    return " ".join(text.replace("\\(", "").replace("\\)", "").split())


def book_title(page_html: str) -> str:
    """The book's title as a built page shows it (navigation bar, else ``<title>`` after the page's own)."""
    found = _BOOK_TITLE.search(page_html)
    if found and _text(found.group(1)):
        return _text(found.group(1))
    found = _PAGE_TITLE.search(page_html)
    title = _text(found.group(1)) if found else ""
    return title.split(" — ")[-1].split(" - ")[-1] if title else "tokensel"


def combined_page(html_root, pages: list[str], title: str | None = None, subtitle: str | None = None) -> Path:
    """Write ``PRINT_PAGE`` from the built ``pages`` and return its path: title page (``title``, ``subtitle``
    or the build day), contents (numbers filled by :func:`print_book`), each article a ``<section data-part="k">``."""
    html_root = Path(html_root)
    if not pages or not all(isinstance(p, str) for p in pages):
        raise InvalidArgumentError(f"pages must be a non-empty list of page names, got {pages!r}")
    if len({Path(p).parent for p in pages}) != 1:
        raise InvalidArgumentError("the pages must share one folder, so their relative links stay valid")
    articles, headings, head, first = [], [], None, None
    for k, page in enumerate(pages):
        path = html_root / f"{page}.html"
        if not path.is_file():
            raise DataUnavailableError(f"{path} is missing: build the book first (make book)")
        text = path.read_text(encoding="utf-8")
        found = _ARTICLE.search(text)
        if found is None:
            raise DataUnavailableError(f'{path} has no <article class="bd-article">: not a page of this book\'s theme')
        if head is None:
            found_head = _HEAD.search(text)
            if found_head is None:
                raise DataUnavailableError(f"{path} has no <head>: not a page of this book's theme")
            head, first = found_head.group(1), text
        h1 = _H1.search(found.group(1))
        headings.append(_text(h1.group(1)) if h1 else Path(page).name)
        articles.append(
            f'<section class="tokensel-print-page" data-part="{k}" id="tokensel-part-{k}">{found.group(1)}</section>'
        )
    assert first is not None  # pages is not empty: the first page sets it
    title = title or book_title(first)
    built = datetime.datetime.fromtimestamp((html_root / f"{pages[0]}.html").stat().st_mtime, tz=datetime.timezone.utc)
    subtitle = subtitle or f"built {built.date().isoformat()}"
    front = (
        f'<section class="tokensel-print-front tokensel-print-title" data-part="title"><h1>{html.escape(title)}'
        f"</h1><p>{html.escape(subtitle)}</p></section>\n"
        '<section class="tokensel-print-front tokensel-print-toc" data-part="toc"><h1>Contents</h1><ol>'
        + "".join(
            f'<li><a href="#tokensel-part-{k}">{html.escape(h)}</a><span class="tokensel-toc-dots">'
            f'</span><span class="tokensel-toc-page" data-target="{k}"></span></li>'
            for k, h in enumerate(headings)
        )
        + "</ol></section>"
    )
    out = html_root / Path(pages[0]).parent / Path(PRINT_PAGE).name
    out.write_text(
        f"<!DOCTYPE html>\n<html><head>{head}<style>{PRINT_STYLE}</style></head>\n"
        f'<body class="tokensel-print" data-headings="{html.escape(json.dumps(headings))}">\n'
        + front
        + "\n"
        + "\n".join(articles)
        + "\n</body></html>\n",
        encoding="utf-8",
    )
    return out


def headings_of(page: Path) -> list[str]:
    """The headings of the parts of a print page written by :func:`combined_page`, in order."""
    found = re.search(r'data-headings="([^"]*)"', Path(page).read_text(encoding="utf-8"))
    return json.loads(html.unescape(found.group(1))) if found else []


def _number_stamp(writer, width: float, height: float, text: str):
    from pypdf import PageObject
    from pypdf.generic import DecodedStreamObject, DictionaryObject, NameObject

    font = DictionaryObject(
        {
            NameObject("/Type"): NameObject("/Font"),
            NameObject("/Subtype"): NameObject("/Type1"),
            NameObject("/BaseFont"): NameObject("/Helvetica"),
        }
    )
    stamp = PageObject.create_blank_page(width=width, height=height)
    stamp[NameObject("/Resources")] = DictionaryObject(
        {NameObject("/Font"): DictionaryObject({NameObject("/FTokselNumber"): font})}
    )
    content = DecodedStreamObject()
    x = width / 2 - 2.5 * len(text)
    content.set_data(f"BT /FTokselNumber 9 Tf {x:.1f} 18 Td ({text}) Tj ET".encode("ascii"))
    stamp[NameObject("/Contents")] = writer._add_object(content)
    return stamp


def assemble(parts: list[tuple[str | None, bytes]], out, numbered_from: int = 1) -> Path:
    """Join the PDFs of ``parts`` (``(bookmark title or None, bytes)``) into ``out``, page numbers from sheet
    ``numbered_from`` on, a bookmark per titled part. Returns ``out``."""
    from pypdf import PdfReader, PdfWriter

    if not parts or not all(isinstance(p, tuple) and len(p) == 2 and isinstance(p[1], bytes) for p in parts):
        raise InvalidArgumentError("parts must be a non-empty list of (bookmark title or None, PDF bytes)")
    writer, starts = PdfWriter(), []
    for name, data in parts:
        starts.append((name, len(writer.pages)))
        try:
            writer.append(PdfReader(io.BytesIO(data)))
        except Exception as exc:  # pypdf raises several kinds on a damaged file
            raise InvalidArgumentError(f"the part {name!r} is not a readable PDF ({exc})") from exc
    for index, page in enumerate(writer.pages):
        if index >= numbered_from:
            box = page.mediabox
            page.merge_page(_number_stamp(writer, float(box.width), float(box.height), str(index + 1)))
    for name, start in starts:
        if name:
            writer.add_outline_item(title=name, page_number=start)
    writer.page_mode = "/UseOutlines"
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out, "wb") as f:
        writer.write(f)
    return out


def page_starts(counts: list[int], front: int) -> list[int]:
    """The page number (1-based) on which each part starts, after ``front`` sheets of title and contents."""
    starts, at = [], front + 1
    for n in counts:
        starts.append(at)
        at += n
    return starts


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@contextmanager
def serve(directory):
    """Serve ``directory`` on an ephemeral localhost port; yields the base URL."""
    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(_QuietHandler, directory=str(directory))
    )
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


@contextmanager
def chromium(profile_dir, log_requests: bool = False):
    """Headless Chromium via Selenium (``TOKENSEL_CHROMIUM`` / ``TOKENSEL_CHROMEDRIVER`` override); raises
    :class:`~tokensel.errors.DataUnavailableError` if missing. ``log_requests`` keeps the network log."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    browser = os.environ.get("TOKENSEL_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    driver_bin = os.environ.get("TOKENSEL_CHROMEDRIVER") or shutil.which("chromedriver")
    if not browser or not driver_bin:
        raise DataUnavailableError(
            "Chromium and its driver are needed (Debian: apt-get install chromium "
            "chromium-driver; or set TOKENSEL_CHROMIUM / TOKENSEL_CHROMEDRIVER)"
        )
    opts = webdriver.ChromeOptions()
    opts.binary_location = browser
    for flag in CHROMIUM_FLAGS:
        opts.add_argument(flag)
    opts.add_argument(f"--user-data-dir={Path(profile_dir) / 'chromium-profile'}")
    if log_requests:
        opts.set_capability("goog:loggingPrefs", {"performance": "ALL"})
    driver = webdriver.Chrome(service=Service(executable_path=driver_bin), options=opts)
    driver.set_page_load_timeout(120)
    driver.set_script_timeout(120)
    try:
        yield driver
    finally:
        driver.quit()


def _pages_in(data: bytes) -> int:
    from pypdf import PdfReader

    return len(PdfReader(io.BytesIO(data)).pages)


def print_book(
    html_root, out, pages: list[str], profile_dir=None, title: str | None = None, subtitle: str | None = None
) -> Path:
    """Print ``pages`` of the book at ``html_root`` to the A4 PDF ``out`` and return its path."""
    html_root, out = Path(html_root), Path(out)
    page = combined_page(html_root, pages, title, subtitle)
    headings = headings_of(page)
    profile = Path(profile_dir) if profile_dir is not None else out.parent / ".pdf-browser"
    profile.mkdir(parents=True, exist_ok=True)
    with serve(html_root) as base, chromium(profile) as driver:
        driver.get(base + page.relative_to(html_root).as_posix())
        state = driver.execute_async_script(WAIT_FOR_MATH)
        if state != "ok":
            raise DataUnavailableError(f"the print page's math did not typeset: {state}")
        driver.execute_script(OPEN_ALL)

        def part(name):
            driver.execute_script(SHOW_PART, name)
            # DevTools directly: chromedriver's print_page allows only 10 s, too little for a whole book
            result = driver.execute_cdp_cmd(
                "Page.printToPDF",
                {
                    "paperWidth": 8.27,
                    "paperHeight": 11.69,
                    "printBackground": True,
                    "marginTop": 0.5,
                    "marginBottom": 0.6,
                    "marginLeft": 0.4,
                    "marginRight": 0.4,
                },
            )
            return base64.b64decode(result["data"])

        chapters = [part(str(k)) for k in range(len(pages))]
        cover = part("title")
        contents = part("toc")
        numbers: dict[str, str] = {}
        for _ in range(3):  # the contents' own length moves the numbers it prints: until they agree
            starts = page_starts([_pages_in(c) for c in chapters], _pages_in(cover) + _pages_in(contents))
            if numbers == {str(k): str(n) for k, n in enumerate(starts)}:
                break
            numbers = {str(k): str(n) for k, n in enumerate(starts)}
            driver.execute_script(SET_PAGE_NUMBERS, numbers)
            contents = part("toc")
    parts = [(None, cover), ("Contents", contents)] + list(zip(headings, chapters, strict=True))
    return assemble(parts, out, numbered_from=1)
