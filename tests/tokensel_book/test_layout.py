"""Nothing is clipped on any page of the built book at 1400 px and 400 px, multi-panel figures stack on a phone and
tick labels stay >= 10 px (``_static/tokensel.js``, ``tokensel.css``, ``sphinx_figures``), each measurement with a
negative control. Needs `make book` and Chromium (``--browser``)."""

from __future__ import annotations

import re
import shutil
import struct
from pathlib import Path

import pytest
from conftest import MYST_FRONT_MATTER, build_book, write_book

from tokensel_book.pdf import WAIT_FOR_MATH, chromium, serve

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[2]
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


PANELS = """
const article = document.querySelector('article.bd-article') || document.body;
const narrow = window.innerWidth <= 640;
const shown = (el) => el.getClientRects().length > 0 && el.getBoundingClientRect().width > 0;
const found = [];
let figures = 0;
for (const fig of article.querySelectorAll('figure')) {
  const whole = Array.from(fig.querySelectorAll('img.tokensel-panels-whole'));
  if (!whole.length) continue;
  figures += 1;
  const panels = Array.from(fig.querySelectorAll('img.tokensel-panel'));
  const name = fig.id || (fig.querySelector('figcaption') || fig).textContent.trim().slice(0, 40);
  const box = fig.getBoundingClientRect();
  if (!narrow) {
    if (!whole.every(shown)) found.push(`${name}: the whole figure is hidden at ${window.innerWidth} px`);
    if (panels.some(shown)) found.push(`${name}: its panels are shown beside the whole figure`);
    continue;
  }
  if (whole.some(shown)) {
    found.push(`${name}: shown whole (${panels.length} panels side by side) at ${window.innerWidth} px`);
  }
  if (panels.length < 2 || !panels.every(shown)) found.push(`${name}: its panels are not all shown`);
  let bottom = -Infinity;
  for (const img of panels.filter(shown)) {
    // a panel too wide to be read at the column's width scrolls alone in its own box (the book's rule for
    // figures: tick labels never under 10 px); that box must fit the column
    const scroller = img.closest('.tokensel-figure-scroll');
    const r = (scroller || img).getBoundingClientRect();
    if (r.top < bottom - 1) found.push(`${name}: a panel beside another, not under it`);
    if (r.right > box.right + 1 || r.left < box.left - 1) found.push(`${name}: a panel runs out of the column`);
    bottom = r.bottom;
  }
  const caption = fig.querySelector('figcaption');
  if (caption && shown(caption) && caption.getBoundingClientRect().top < bottom - 1) {
    found.push(`${name}: the caption is not below the panels`);
  }
}
return [figures, found];
"""


def panel_layout(driver, url: str, width: int, without_style: bool = False) -> tuple[int, list[str]]:
    """The page's multi-panel figures and what is wrong with them at ``width`` (optionally without the style sheet)."""
    driver.set_window_size(width, 1000)
    driver.get(url)
    if without_style:
        driver.execute_script("document.querySelectorAll('link[href*=\"tokensel.css\"]').forEach((l) => l.remove());")
    return tuple(driver.execute_script(PANELS))


def clipped(driver, url: str, width: int) -> list[str]:
    """What is wider than its box on the page at ``url`` in a window ``width`` pixels wide."""
    driver.set_window_size(width, 1000)
    driver.get(url)
    if driver.execute_script("return document.querySelectorAll('span.math, div.math').length"):
        driver.execute_async_script(WAIT_FOR_MATH)
    return driver.execute_script(MEASURE)


@pytest.fixture(scope="module")
def measured(tmp_path_factory):
    """Every chapter page loaded once per width: what is clipped, each figure as shown, its panels."""
    pages = sorted(p for p in HTML.glob("book/*.html") if p.name != "print.html")
    if not pages:
        pytest.fail(f"no built book at {HTML}: run `make book` first")
    found: dict = {"clipped": [], "figures": {}, "panels": [], "multi_panel": 0}
    with serve(HTML) as base, chromium(tmp_path_factory.mktemp("chromium")) as driver:
        for width in WIDTHS:
            for page in pages:
                url = f"{base}book/{page.name}"
                found["clipped"] += [f"{width} px, {page.name}: {p}" for p in clipped(driver, url, width)]
                found["figures"].setdefault(width, []).extend((page.name, *f) for f in driver.execute_script(FIGURES))
                count, problems = driver.execute_script(PANELS)
                found["multi_panel"] += count
                found["panels"] += [f"{width} px, {page.name}: {p}" for p in problems]
    return found


def test_multi_panel_figures_are_shown_panel_by_panel_on_a_phone(measured):
    assert measured["multi_panel"] > 0, "no figure of several panels found"
    assert not measured["panels"], "\n".join(measured["panels"])


def test_every_image_that_records_panels_is_cut_into_them():
    # a figure of several panels drawn by tb.plots records its panels in its PNG: the book must cut every one
    from tokensel_book.plots import png_panels

    missed = []
    for page in sorted(HTML.glob("book/*.html")):
        for tag in re.findall(r"<img\b[^>]*>", page.read_text(encoding="utf-8")):
            src = re.search(r'src="([^"]+)"', tag)
            if not src or not src.group(1).endswith(".png") or "tokensel-panel" in tag:
                continue
            path = (page.parent / src.group(1)).resolve()
            if path.is_file() and len(png_panels(path)) >= 2:
                missed.append(f"{page.name}: {src.group(1)}")
    assert not missed, "images of several panels shown only whole:\n" + "\n".join(missed)


TINY_PAGE = (
    MYST_FRONT_MATTER
    + """# Panels

```{code-cell} ipython3
---
mystnb:
  figure:
    caption: Two panels side by side on a wide screen.
    name: fig-two
---
import tokensel as ts
import tokensel_book as tb

tb.plots.theme()
fig, (a, b) = tb.plots.subplots(2)
a.plot([1, 2])
b.plot([2, 1])
a.set(ylabel="left", xlabel="x")
b.set(ylabel="right", xlabel="x");
```

```{code-cell} ipython3
---
mystnb:
  figure:
    caption: Three panels in rows of two.
    name: fig-three
---
fig, axes = tb.plots.panel_grid(3, ylabel="y")
for ax in axes:
    ax.plot([1, 2, 3]);
```
"""
)


def test_a_tiny_books_figures_stack_on_a_phone_and_the_measurement_sees_when_they_do_not(tmp_path):
    book = tmp_path / "tiny"
    shutil.copytree(STATIC, book / "_static")
    # the book's own cell time limit: importing the library and drawing took over the default 30 s when busy
    config = "title: tiny\nonly_build_toc_files: true\nexecute:\n  execute_notebooks: force\n  timeout: 1800\n"
    write_book(book, "panels", TINY_PAGE, config + "sphinx:\n  extra_extensions: [tokensel_book.sphinx_figures]\n")
    build_book(book, "-W", "-n", "--keep-going")
    html = book / "_build" / "html"
    with serve(html) as base, chromium(tmp_path) as driver:
        seen = {width: panel_layout(driver, f"{base}book/panels.html", width) for width in WIDTHS}
        # the negative control: the same page without the book's style sheet shows the whole figure on a phone
        control = panel_layout(driver, f"{base}book/panels.html", 400, without_style=True)
    assert seen == {1400: (2, []), 400: (2, [])}, seen
    assert control[0] == 2 and sum("shown whole" in p for p in control[1]) == 2, control


def test_nothing_is_clipped_at_desktop_and_phone_width(measured):
    assert not measured["clipped"], "\n".join(measured["clipped"])


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
        shutil.copy(STATIC / name, site / name)
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


def png_dpi(path: Path) -> float | None:
    """The resolution a PNG records (its ``pHYs`` chunk), in dots per inch; None when it records none."""
    data = path.read_bytes()
    at = data.find(b"pHYs")
    if at < 0:
        return None
    ppu_x, _, unit = struct.unpack(">IIB", data[at + 4 : at + 13])
    return ppu_x * 0.0254 if unit == 1 else None


FIGURES = """
return Array.from(document.querySelectorAll('article img')).filter((i) => i.getClientRects().length)
  .map((i) => [new URL(i.src).pathname, i.naturalWidth, i.getBoundingClientRect().width]);
"""


def test_figure_text_is_legible_at_desktop_and_phone_width(measured):
    # tick labels at least 10 px high as shown, at 1400 and 400 px (where a too-wide figure scrolls in its box)
    import matplotlib

    matplotlib.use("Agg")
    from tokensel_book import plots

    plots.theme()
    tick_pt = plots.tick_label_pt()
    small, sizes = [], {}
    for width, figures in measured["figures"].items():
        for page, src, natural, shown in figures:
            dpi = png_dpi(HTML / src.lstrip("/"))
            if dpi is None:
                small.append(f"{page}: {src} records no resolution")
                continue
            px = tick_pt / 72 * shown / (natural / dpi)  # points -> inches -> CSS pixels as shown
            sizes.setdefault(width, []).append(px)
            if px < 10:
                small.append(f"{page}: tick labels {px:.1f} px high in {src}")
    print("\ntick labels as shown: " + "; ".join(f"{w} px: {min(v):.1f} to {max(v):.1f} px" for w, v in sizes.items()))
    assert sizes.get(1400) and sizes.get(400), "no figures found"
    assert not small, "\n".join(small)
