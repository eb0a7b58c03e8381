"""The built book as one PDF: every page of ``_toc.yml`` in order, printed by headless Chromium.

:func:`combined_page` writes ``book/print.html`` next to the chapters: the ``<head>`` of the first page (its
stylesheets and the book's own MathJax) and the article of every page, each starting on a new sheet, so the
relative links to figures and scripts stay valid. :func:`print_book` serves the HTML folder on localhost,
loads that page in headless Chromium, waits for MathJax, and prints it with Chromium's print-to-PDF (the
print rules of ``_static/tokensel.css`` wrap code and outputs so nothing is cut). ``make pdf`` runs both;
``python -m tokensel pdf [HTML_DIR] [OUT]`` too.
"""

from __future__ import annotations

import base64
import functools
import http.server
import os
import re
import shutil
import threading
from contextlib import contextmanager
from pathlib import Path

from ..errors import DataUnavailableError, InvalidArgumentError

PRINT_PAGE = "book/print.html"
CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--no-first-run", "--disable-component-update", "--disable-sync", "--disable-quic",
                  "--window-size=1280,1600")
WAIT_FOR_MATH = """
const done = arguments[arguments.length - 1];
if (!window.MathJax || !MathJax.startup || !MathJax.startup.promise) { done("MathJax not loaded"); return; }
MathJax.startup.promise.then(() => done("ok"), (e) => done("MathJax failed: " + e));
"""
_ARTICLE = re.compile(r'<article class="bd-article"[^>]*>(.*?)</article>', re.S)
_HEAD = re.compile(r"<head>(.*?)</head>", re.S)


def combined_page(html_root, pages: list[str]) -> Path:
    """Write :data:`PRINT_PAGE` from the built ``pages`` (``_toc.yml`` names such as ``"book/01_model"``, all in
    one folder) and return its path."""
    html_root = Path(html_root)
    if not pages or not all(isinstance(p, str) for p in pages):
        raise InvalidArgumentError(f"pages must be a non-empty list of page names, got {pages!r}")
    if len({Path(p).parent for p in pages}) != 1:
        raise InvalidArgumentError("the pages must share one folder, so their relative links stay valid")
    articles, head = [], None
    for page in pages:
        path = html_root / f"{page}.html"
        if not path.is_file():
            raise DataUnavailableError(f"{path} is missing: build the book first (make book)")
        text = path.read_text(encoding="utf-8")
        found = _ARTICLE.search(text)
        if found is None:
            raise DataUnavailableError(f"{path} has no <article class=\"bd-article\">: not a page of this book's theme")
        if head is None:
            head = _HEAD.search(text).group(1)
        articles.append(f'<section class="tokensel-print-page">{found.group(1)}</section>')
    out = html_root / Path(pages[0]).parent / Path(PRINT_PAGE).name
    out.write_text(f"<!DOCTYPE html>\n<html><head>{head}</head>\n<body class=\"tokensel-print\">\n"
                   + "\n".join(articles) + "\n</body></html>\n", encoding="utf-8")
    return out


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@contextmanager
def serve(directory):
    """Serve ``directory`` on an ephemeral localhost port; yields the base URL."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0),
                                             functools.partial(_QuietHandler, directory=str(directory)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


@contextmanager
def chromium(profile_dir):
    """Headless Chromium through Selenium (``TOKENSEL_CHROMIUM`` / ``TOKENSEL_CHROMEDRIVER`` override the
    binaries found on the PATH); raises :class:`~tokensel.errors.DataUnavailableError` when either is missing."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    browser = os.environ.get("TOKENSEL_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    driver_bin = os.environ.get("TOKENSEL_CHROMEDRIVER") or shutil.which("chromedriver")
    if not browser or not driver_bin:
        raise DataUnavailableError("Chromium and its driver are needed (Debian: apt-get install chromium "
                                   "chromium-driver; or set TOKENSEL_CHROMIUM / TOKENSEL_CHROMEDRIVER)")
    opts = webdriver.ChromeOptions()
    opts.binary_location = browser
    for flag in CHROMIUM_FLAGS:
        opts.add_argument(flag)
    opts.add_argument(f"--user-data-dir={Path(profile_dir) / 'chromium-profile'}")
    driver = webdriver.Chrome(service=Service(executable_path=driver_bin), options=opts)
    driver.set_page_load_timeout(120)
    driver.set_script_timeout(120)
    try:
        yield driver
    finally:
        driver.quit()


def print_book(html_root, out, pages: list[str], profile_dir=None) -> Path:
    """Print ``pages`` of the built book at ``html_root`` to the PDF ``out`` (A4) and return its path."""
    html_root, out = Path(html_root), Path(out)
    page = combined_page(html_root, pages)
    profile = Path(profile_dir) if profile_dir is not None else out.parent / ".pdf-browser"
    profile.mkdir(parents=True, exist_ok=True)
    with serve(html_root) as base, chromium(profile) as driver:
        driver.get(base + page.relative_to(html_root).as_posix())
        state = driver.execute_async_script(WAIT_FOR_MATH)
        if state != "ok":
            raise DataUnavailableError(f"the print page's math did not typeset: {state}")
        # the DevTools command itself: chromedriver's print_page gives the renderer only 10 s, too little
        # for a whole book on a busy machine
        result = driver.execute_cdp_cmd("Page.printToPDF", {
            "paperWidth": 8.27, "paperHeight": 11.69, "printBackground": True,
            "marginTop": 0.5, "marginBottom": 0.5, "marginLeft": 0.4, "marginRight": 0.4})
        pdf = base64.b64decode(result["data"])
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(pdf)
    return out
