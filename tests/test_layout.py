"""Nothing is clipped: every page of the built book at a desktop width (1400 px) and a phone width (400 px).

Measured in headless Chromium after MathJax has typeset, with every dropdown opened: a display equation, a
cell output or a table whose content is wider than its own box (``scrollWidth > clientWidth``) is reported,
as is an inline formula that runs past the right edge of its paragraph (inline math cannot wrap) and a page
that scrolls sideways. The book's own rules make them fit: long equations are split over lines
in the sources, outputs wrap at spaces, and a table too wide for the column turns into one card per row
(``_static/tokensel.js`` and ``tokensel.css``). Code cells are not measured: a code line keeps its
characters and may scroll in its box. A negative control runs the same measurement on a crafted page.

Needs the built book and Chromium (``make browser-check``, ``--browser``).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tokensel.book.pdf import WAIT_FOR_MATH, chromium, serve

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[1]
HTML = ROOT / "_build" / "html"
STATIC = ROOT / "_static"
WIDTHS = (1400, 400)

MEASURE = """
document.querySelectorAll('details').forEach((d) => { d.open = true; });
window.dispatchEvent(new Event('resize'));
const article = document.querySelector('article.bd-article') || document.body;
const found = [];
const kinds = [['equation', 'mjx-container[display="true"]'],
               ['output', 'div.cell_output pre, div.cell_output div.output'],
               ['table', 'table']];
for (const [kind, selector] of kinds) {
  for (const el of article.querySelectorAll(selector)) {
    if (el.getClientRects().length === 0) continue;  // not displayed
    if (el.scrollWidth > el.clientWidth + 1) {
      found.push(`${kind} ${el.scrollWidth} px in a ${el.clientWidth} px box: `
                 + (el.textContent || '').trim().replace(/\\s+/g, ' ').slice(0, 80));
    }
  }
}
// inline math cannot wrap: a formula must fit the line of the block that holds it
for (const el of article.querySelectorAll('mjx-container:not([display="true"])')) {
  if (el.getClientRects().length === 0) continue;
  let block = el.parentElement;
  while (block && getComputedStyle(block).display.startsWith('inline')) block = block.parentElement;
  const r = el.getBoundingClientRect(), b = block.getBoundingClientRect();
  const right = b.right - (parseFloat(getComputedStyle(block).paddingRight) || 0);
  if (r.right > right + 1) {
    found.push(`inline math ${Math.round(r.width)} px, ${Math.round(r.right - right)} px beyond its line: `
               + el.textContent.slice(0, 80));
  }
}
const page = document.documentElement;
if (page.scrollWidth > page.clientWidth + 1) {
  found.push(`the page scrolls sideways: ${page.scrollWidth} px in ${page.clientWidth} px`);
}
return found;
"""


def clipped(driver, url: str, width: int) -> list[str]:
    """What is wider than its box on the page at ``url`` in a window ``width`` pixels wide."""
    driver.set_window_size(width, 1000)
    driver.get(url)
    if driver.execute_script("return document.querySelectorAll('span.math, div.math').length"):
        driver.execute_async_script(WAIT_FOR_MATH)
    return driver.execute_script(MEASURE)


def test_nothing_is_clipped_at_desktop_and_phone_width(tmp_path):
    pages = sorted(p for p in HTML.glob("book/*.html") if p.name != "print.html")
    if not pages:
        pytest.fail(f"no built book at {HTML}: run `make book` first")
    problems = []
    with serve(HTML) as base, chromium(tmp_path) as driver:
        for width in WIDTHS:
            for page in pages:
                problems += [f"{width} px, {page.name}: {p}" for p in clipped(driver, f"{base}book/{page.name}", width)]
    assert not problems, "\n".join(problems)


CRAMPED_PAGE = """<!DOCTYPE html><html><head><link rel="stylesheet" href="tokensel.css">
<script src="tokensel.js"></script></head><body><article class="bd-article" style="width: 300px">
<p>text <mjx-container style="display: inline-block; width: 500px">long formula</mjx-container></p>
<div class="cell_output"><pre style="white-space: pre">{line}</pre></div>
<div style="width: 200px; overflow: hidden"><table style="display: block; overflow: hidden"><tbody><tr>{cells}</tr>
</tbody></table></div>
<div class="cell_output"><div class="output"><table><thead><tr>{heads}</tr></thead><tbody><tr>{cells}</tr>
</tbody></table></div></div>
</article></body></html>"""


def test_the_measurement_finds_what_is_too_wide(tmp_path):
    site = tmp_path / "site"
    site.mkdir()
    for name in ("tokensel.css", "tokensel.js"):
        (site / name).write_text((STATIC / name).read_text())
    cells = "".join(f"<td>value_number_{i}</td>" for i in range(12))
    heads = "".join(f"<th>column_{i}</th>" for i in range(12))
    (site / "index.html").write_text(CRAMPED_PAGE.format(line="x" * 300, cells=cells, heads=heads))
    with serve(site) as base, chromium(tmp_path) as driver:
        found = clipped(driver, base + "index.html", 1400)
    text = " | ".join(found)
    # the unlabelled table without a header cannot become cards: reported; the dataframe-like one does
    assert "table" in text and "value_number_0" in text, text
    assert sum(f.startswith("table") for f in found) == 1, text
    assert any(f.startswith("inline math") and "long formula" in f for f in found), text
    # an output line that cannot wrap (white-space: pre forced on the element) is reported
    assert any(f.startswith("output") and "xxxx" in f for f in found), text
