"""The built book in headless Chromium: math typeset, images load, no error output, internal links resolve, with a
negative control on a broken page. Needs `make book` and Chromium (`make browser-check`, ``--browser``)."""

from __future__ import annotations

import json
import re
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
from test_explorable import requested

from tokensel_book.notebooks import standalone_problems
from tokensel_book.pdf import WAIT_FOR_MATH, chromium, serve

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[2]
HTML = ROOT / "_build" / "html"
SHOTS = ROOT / "_build" / "browser"
SKIP_DIRS = {"_static", "_sources", "_images", "_sphinx_design_static", "_panels_static"}


INSPECT = """
const math = Array.from(document.querySelectorAll("span.math, div.math"));
return {
  math: math.length,
  untypeset: math.filter((m) => !m.querySelector("mjx-container")).map((m) => m.textContent.slice(0, 60)),
  merror: document.querySelectorAll("mjx-merror").length,
  broken_images: Array.from(document.images).filter((i) => !(i.complete && i.naturalWidth > 0))
                      .map((i) => i.getAttribute("src")),
  images: document.images.length,
  error_outputs: document.querySelectorAll(".output.error, .output.traceback, div.traceback").length,
  traceback_text: document.body.innerText.includes("Traceback (most recent call last)"),
  links: Array.from(document.querySelectorAll("a[href]")).map((a) => a.href),
};
"""


def book_pages(root: Path) -> list[Path]:
    """Every HTML page of a build, without Sphinx's static and source folders and the print page."""
    from tokensel_book.pdf import PRINT_PAGE

    rel = {p: p.relative_to(root) for p in root.rglob("*.html")}
    return sorted(p for p, r in rel.items() if not SKIP_DIRS & set(r.parts) and r.as_posix() != PRINT_PAGE)


#: a page has settled when loaded, with a body, and not a redirect (index.html's <meta http-equiv="Refresh">)
SETTLED = """
return document.readyState === "complete" && document.body !== null
  && document.querySelector('meta[http-equiv="refresh" i]') === null;
"""


def settle(driver, timeout: float = 60.0) -> None:
    """Wait until the page in ``driver`` has settled (:data:`SETTLED`), following any redirect it makes."""
    from selenium.common.exceptions import WebDriverException

    deadline = time.monotonic() + timeout
    while True:
        try:
            if driver.execute_script(SETTLED):
                return
        except WebDriverException:  # the document was replaced under the script: look again
            pass
        if time.monotonic() > deadline:
            raise AssertionError(f"{driver.current_url} did not finish loading within {timeout:.0f} s")
        time.sleep(0.05)


def page_problems(driver, url: str) -> tuple[list[str], dict]:
    """Load one page; return what a reader would see as broken, and the raw page facts."""
    driver.get(url)
    settle(driver)
    info = driver.execute_script(INSPECT)
    problems = []
    if info["math"]:
        status = driver.execute_async_script(WAIT_FOR_MATH)
        info = driver.execute_script(INSPECT)
        if status != "ok":
            problems.append(f"{status} ({info['math']} math elements)")
        if info["untypeset"]:
            problems.append(f"{len(info['untypeset'])} math elements not typeset, e.g. {info['untypeset'][0]!r}")
        if info["merror"]:
            problems.append(f"{info['merror']} MathJax errors")
    if info["broken_images"]:
        problems.append(f"images that do not load: {info['broken_images']}")
    if info["error_outputs"] or info["traceback_text"]:
        problems.append("an error output or a traceback is shown")
    return problems, info


def link_problems(links: set[str], base: str) -> list[str]:
    """Internal links (same origin) that do not resolve: missing page or missing ``#anchor``."""
    problems, ids = [], {}  # each target's element ids (None: it did not load), read once
    for link in sorted(links):
        if not link.startswith(base):
            continue
        target, _, anchor = link.partition("#")
        if target not in ids:
            try:
                with urllib.request.urlopen(target, timeout=30) as resp:
                    ids[target] = set(re.findall(r'\bid="([^"]+)"', resp.read().decode("utf-8", "replace")))
            except Exception as exc:  # noqa: BLE001 - any failure is a broken link
                ids[target] = None
                problems.append(f"{link}: {exc}")
        if anchor and ids[target] is not None and urllib.parse.unquote(anchor) not in ids[target]:
            problems.append(f"{link}: no element with id {anchor!r}")
    return problems


def test_every_page_of_the_book_renders(tmp_path):
    pages = book_pages(HTML)
    if not (HTML / "index.html").is_file() or len(pages) < 5:
        pytest.fail(f"no built book at {HTML}: run `make book` first")
    SHOTS.mkdir(parents=True, exist_ok=True)
    report, links, totals = {}, set(), {"math": 0, "images": 0}
    notebooks = {}
    with serve(HTML) as base, chromium(tmp_path, log_requests=True) as driver:
        for page in pages:
            rel = page.relative_to(HTML).as_posix()
            problems, info = page_problems(driver, base + rel)
            outside = [u for u in requested(driver) if not u.startswith((base, "data:", "chrome", "about:", "blob:"))]
            problems += [f"asked the network for {u}" for u in outside[:3]]  # the book is read offline
            if rel.startswith("book/") and (ROOT / rel).with_suffix(".md").read_text().count("```{code-cell}"):
                # every chapter offers its notebook in the download menu, and the file is a notebook
                nb = [link for link in info["links"] if link.endswith(f"_sources/{rel[:-5]}.ipynb")]
                if not nb:
                    problems.append("no .ipynb download link")
                else:
                    with urllib.request.urlopen(nb[0], timeout=30) as resp:
                        notebooks[rel] = json.loads(resp.read().decode("utf-8"))
                    if not notebooks[rel].get("cells") or notebooks[rel].get("nbformat") != 4:
                        problems.append(f"{nb[0]} is not a notebook")
                    else:  # it stands alone: plain Markdown, and a first cell on installing tokensel
                        problems += [f"download: {p}" for p in standalone_problems(notebooks[rel])]
            if problems:
                report[rel] = problems
            links.update(info["links"])
            totals["math"] += info["math"]
            totals["images"] += info["images"]
            if rel in ("book/intro.html", "book/05_max_margin.html"):
                driver.save_screenshot(str(SHOTS / rel.replace("/", "_").replace(".html", ".png")))
        broken = link_problems(links, base)
    internal = sum(link.startswith(base) for link in links)
    print(f"browser check: {len(pages)} pages, {totals['math']} math, {totals['images']} images, {internal} links")
    assert not report, report
    assert not broken, broken
    # the browser saw every image the HTML holds, and the book really has math and figures
    assert totals["images"] >= sum(p.read_text().count("<img") for p in pages), totals
    assert totals["math"] > 100 and totals["images"] > 10, totals
    assert len(notebooks) >= 8, sorted(notebooks)
    assert (SHOTS / "book_intro.png").stat().st_size > 10_000
    assert (SHOTS / "book_05_max_margin.png").stat().st_size > 10_000


BROKEN_PAGE = """<!doctype html><html><body>
<p>Inline math <span class="math notranslate nohighlight">\\(x^2\\)</span>.</p>
<img src="missing.png" alt="a figure that is not there">
<div class="cell_output docutils container"><div class="output traceback highlight-ipythontb notranslate">
<pre>Traceback (most recent call last): ValueError</pre></div></div>
<a href="nowhere.html">a dead link</a> <a href="index.html#no-such-anchor">a dead anchor</a>
</body></html>"""


def test_the_checks_catch_a_broken_page(tmp_path):
    site = tmp_path / "site"
    site.mkdir()
    (site / "index.html").write_text(BROKEN_PAGE)
    with serve(site) as base, chromium(tmp_path) as driver:
        problems, info = page_problems(driver, base + "index.html")
        broken = link_problems(set(info["links"]), base)
    text = " | ".join(problems)
    assert "MathJax not loaded" in text and "not typeset" in text and "missing.png" in text and "traceback" in text
    assert any("nowhere.html" in b for b in broken) and any("no-such-anchor" in b for b in broken)


LANDING = """
const top = (el) => el ? el.getBoundingClientRect().top + window.scrollY : null;
const chapters = document.querySelector('section#the-chapters ul, #the-chapters ul');
return {figure: top(document.querySelector('figure#fig-intro-demo')),
        figure_shown: !!document.querySelector('figure#fig-intro-demo img')
                      && Array.from(document.querySelectorAll('figure#fig-intro-demo img'))
                         .some((i) => i.getClientRects().length && i.naturalWidth > 0),
        chapters: top(chapters),
        chapter_links: chapters ? chapters.querySelectorAll('a').length : 0,
        height: window.innerHeight};
"""
#: "near the top", fixed before measuring: (figure, chapter list) within so many 1000 px screens, per width
SCREEN = 1000
NEAR = {1400: (1, 2), 400: (1, 3)}


def landing_problems(driver, url: str, width: int) -> list[str]:
    """Where the whole-story figure and the chapter list stand on the landing page, against :data:`NEAR`."""
    driver.set_window_size(width, SCREEN)
    driver.get(url)
    if driver.execute_script("return document.querySelectorAll('span.math, div.math').length"):
        driver.execute_async_script(WAIT_FOR_MATH)
    got = driver.execute_script(LANDING)
    figure_screens, list_screens = NEAR[width]
    problems = []
    if got["figure"] is None or not got["figure_shown"]:
        problems.append(f"{width} px: no whole-story figure shown")
    elif got["figure"] > figure_screens * got["height"]:
        problems.append(f"{width} px: the whole-story figure starts at {got['figure']:.0f} px")
    if got["chapters"] is None or got["chapter_links"] < 7:
        problems.append(f"{width} px: no chapter list ({got['chapter_links']} links)")
    elif got["chapters"] > list_screens * got["height"]:
        problems.append(f"{width} px: the chapter list starts at {got['chapters']:.0f} px")
    return problems


def test_the_landing_page_shows_the_whole_story_and_the_chapters_near_the_top(tmp_path):
    if not (HTML / "book" / "intro.html").is_file():
        pytest.fail(f"no built book at {HTML}: run `make book` first")
    with serve(HTML) as base, chromium(tmp_path) as driver:
        problems = [p for width in NEAR for p in landing_problems(driver, base + "book/intro.html", width)]
        # the negative control: the same page with 3000 px of text put before everything
        driver.set_window_size(1400, SCREEN)
        driver.get(base + "book/intro.html")
        driver.execute_script(
            "const a = document.querySelector('article.bd-article');"
            "const p = document.createElement('div'); p.style.height = '3000px'; a.prepend(p);"
        )
        got = driver.execute_script(LANDING)
    assert not problems, problems
    assert got["figure"] > SCREEN and got["chapters"] > 2 * SCREEN, got


INDEX_ENTRIES = """
return Array.from(document.querySelectorAll('table.indextable a code, table.indextable a'))
  .filter((a) => a.tagName === 'CODE' || !a.querySelector('code'))
  .map((a) => a.textContent.trim());
"""
NUMBERED = re.compile(
    r"^(Definition|Lemma|Theorem|Proposition|Corollary|Assumption|Remark|Example|Conjecture|Property|Observation)"
    r" \d+\.\d+( .+)?$"
)
LABEL = re.compile(r"^[a-z]+(-[a-z0-9]+)+$")


def index_problems(entries: list[str]) -> list[str]:
    """Entries of the proof index that are not a statement's kind, number and title (an internal label, say)."""
    return [e for e in entries if LABEL.match(e) or not NUMBERED.match(e)]


SIDEWAYS = "return document.documentElement.scrollWidth > document.documentElement.clientWidth + 1"


def test_the_proof_index_lists_statements_by_number_and_title(tmp_path):
    index = HTML / "prf-prf.html"
    if not index.is_file():
        pytest.fail(f"no proof index at {index}: run `make book` first")
    found = {}
    with serve(HTML) as base, chromium(tmp_path) as driver:
        for width in (1400, 400):
            driver.set_window_size(width, SCREEN)
            driver.get(base + "prf-prf.html")
            entries = driver.execute_script(INDEX_ENTRIES)
            found[width] = (entries, driver.execute_script(SIDEWAYS))
    for width, (entries, wide) in found.items():
        assert len(entries) >= 15, (width, entries)
        assert not index_problems(entries), (width, index_problems(entries))
        assert not wide, f"the proof index scrolls sideways at {width} px"
    assert "Lemma 2.1 One step from p⁰ = 0" in found[1400][0]
    # in reading order: chapter 1's definitions come first, in the order the chapter states them
    first = ["Definition 1.1 One-layer attention with a classification token", "Definition 1.2 Two-phase training"]
    assert found[1400][0][:2] == first, found[1400][0][:3]
    # the negative control: sphinx-proof's own entries (its labels) are refused
    assert index_problems(["lem-one-step", "def-alpha", "Lemma 2.1 One step"]) == ["lem-one-step", "def-alpha"]


def test_a_claim_card_opens_and_the_filter_keeps_one_chapter(tmp_path):
    with serve(HTML) as base, chromium(tmp_path) as driver:
        driver.get(base + "book/status.html")
        summary = driver.find_element("css selector", "div.tokensel-status tbody tr summary")
        summary.click()
        card = summary.find_element("xpath", "..").text
        assert "bound from" in card and "requires" in card and "fresh seeds" in card, card
        chapter = driver.find_element("css selector", "div.tokensel-status tbody tr").get_attribute("data-chapter")
        driver.execute_script(
            "const s = document.querySelector('[data-filter=chapter]'); s.value = arguments[0];"
            "s.dispatchEvent(new Event('change'));",
            chapter,
        )
        rows = driver.find_elements("css selector", "div.tokensel-status tbody tr")
        shown = [r.get_attribute("data-chapter") for r in rows if r.is_displayed()]
        assert shown and set(shown) == {chapter} and len(shown) < len(rows)
