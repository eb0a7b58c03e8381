"""Figures a reader explores without a kernel (``tokensel_book.plots.explorable``): a static PNG beside each, and in
a tiny book in Chromium (``--browser``) hover, slider, captions, no request leaving the build, images in the PDF."""

from __future__ import annotations

import base64
import json
import re
import shutil
from pathlib import Path
from types import SimpleNamespace

import matplotlib
import numpy as np
import pytest

matplotlib.use("Agg")

from conftest import MYST_FRONT_MATTER, build_book, write_book  # noqa: E402

import tokensel_book as tb  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]

#: the data of the tiny book's figures, small and synthetic (the page's first cell runs this too)
DATA = """
import numpy as np
import pandas as pd

cells = pd.DataFrame([(d, e) for d in (32, 64, 128) for e in (1.0, 10.0, 100.0)], columns=["d", "eta0"])
sweep = cells.assign(runs=20, p_full=[0, 0, 0.1, 0, 0.3, 0.8, 0, 0.5, 0.95], p_trapped=0.05)
page = sweep.assign(runs=3, p_full=(sweep.p_full > 0.5).astype(float))
dims = [64, 128, 256, 512, 1024]
runs = pd.DataFrame({"d": np.repeat(dims, 3), "err": np.repeat(np.array(dims) ** -0.5, 3) * np.tile([0.9, 1, 1.1], 5)})
g = np.random.default_rng(0)
words, alpha, reviews = [f"word{i}" for i in range(60)], g.normal(size=60), g.integers(1, 500, size=60)
scores, values = np.abs(alpha) + 0.1 * g.normal(size=60), alpha + 0.1 * g.normal(size=60)
flow = pd.DataFrame({"t": np.logspace(0, 8, 40)}).assign(norm_p=lambda f: np.log(f.t), loss=lambda f: 0.3 + 1 / f.t)
"""

#: the four interactive figures, from the variables of :data:`DATA`
FIGURES = """
import tokensel_book as tb

live = {
    "phase": tb.plots.phase_explorer({"recorded sweep": sweep, "this page": page}),
    "rate": tb.plots.rate_explorer(runs, fit=(-0.5, 0.0)),
    "words": tb.plots.word_explorer(words, alpha, reviews, scores, values, roles=alpha, marked=[3, 7]),
    "flow": tb.plots.trajectory_explorer(flow, {"‖p_t‖": "norm_p", "L": "loss"}, log_y=["loss"]),
}
"""


@pytest.fixture(scope="module")
def data() -> dict:
    ns: dict = {}
    exec(DATA + FIGURES, ns)
    return ns


def test_a_phase_cell_carries_its_interval_trap_frequency_and_counts(data):
    fig = data["live"]["phase"]
    sweep, page = fig.data
    assert sweep.visible and not page.visible and sweep.x == ("1", "10", "100") and sweep.y == ("32", "64", "128")
    lo, hi, trapped, selected, trap, n = sweep.customdata[2][2]  # d = 128, eta0 = 100: 19 of 20 runs
    assert (selected, trap, n) == (19, 1, 20) and trapped == 0.05 and sweep.z[2][2] == 0.95
    assert lo == pytest.approx(0.7513, abs=1e-4) and hi == pytest.approx(0.9987, abs=1e-4)  # Clopper-Pearson
    assert tuple(sweep.customdata[0][0][:2]) == (0.0, pytest.approx(0.1684, abs=1e-4))  # 0 of 20: from 0
    menu = fig.layout.updatemenus[0].buttons
    assert [b.label for b in menu] == ["recorded sweep", "this page"] and menu[1].args == ({"visible": [False, True]},)


def test_the_rate_sliders_steps_draw_the_line_through_each_widths_mean(data):
    fig = data["live"]["rate"]
    steps = fig.layout.sliders[0].steps
    assert [s.label for s in steps] == ["64", "128", "256", "512", "1024"]
    update, layout, traces = steps[3].args
    assert list(traces) == [1, 2] and list(update["x"][0]) == [512] * 3
    assert layout["title.text"].startswith("mean error at d = 512")
    fit = fig.data[3]  # the static figure's least-squares line, drawn in the live one too
    assert fit.name == "fit: slope -0.500" and np.allclose(fit.y, np.array([64, 128, 256, 512, 1024]) ** -0.5)
    # err is exactly d^-1/2 on average here: the line through any width's mean goes through every other width's
    np.testing.assert_allclose(update["y"][1], np.array([64, 128, 256, 512, 1024]) ** -0.5)


def test_every_word_is_hovered_with_its_alpha_count_and_scores(data):
    fig = data["live"]["words"]
    points, written = fig.data[:3], fig.data[3]
    shown = {w: (a, r) for trace in points for w, (a, r) in zip(trace.text, trace.customdata, strict=True)}
    assert len(shown) == 60 and shown["word7"] == (data["alpha"][7], data["reviews"][7])
    assert {t.name for t in points} == {"irrelevant", "positive", "negative"}
    assert list(written.text) == ["word3", "word7"] and written.mode == "text"  # the labelled words, as in the PNG
    assert "α" in fig.data[1].hovertemplate and "reviews" in fig.data[1].hovertemplate


def test_the_trajectory_slider_marks_every_panel_at_each_time(data):
    fig = data["live"]["flow"]
    steps = fig.layout.sliders[0].steps
    assert len(steps) == 40 and fig.layout.xaxis2.type == "log" and fig.layout.yaxis2.type == "log"
    update, layout, traces = steps[-1].args
    assert list(traces) == [2, 3] and update["y"] == [[np.log(1e8)], [0.3 + 1e-8]]
    assert "‖p_t‖ = 18.42" in layout["title.text"]


def test_an_explorable_output_holds_the_static_png_and_the_figure(data, monkeypatch):
    shown = []
    monkeypatch.setattr("IPython.display.display", lambda *a, **k: shown.append((a, k)))
    for name, live in data["live"].items():
        static, ax = tb.plots.subplots(2)
        ax[0].plot([1, 2])
        ax[0].set(xlabel=r"$\eta_0$", ylabel=r"$\|p_t\|$ & more")
        tb.plots.explorable(static, live)
        (bundle,), kw = shown.pop()
        png = base64.b64decode(bundle["image/png"])
        assert png.startswith(b"\x89PNG") and kw["raw"] and kw["metadata"]["image/png"]["width"] > 100, name
        html = bundle["text/html"]
        # the HTML page shows the same PNG where scripts do not run, and the figure's JSON for plotly
        assert f'src="data:image/png;base64,{bundle["image/png"]}"' in html, name
        assert 'alt="Plot of |p_t| &amp; more against eta_0"' in html, name  # its panels in words, no TeX
        found = re.search(r'<script type="application/json">(.*?)</script>', html, re.S)
        assert json.loads(found.group(1).replace("<\\/", "</"))["data"], name
        assert not matplotlib.pyplot.get_fignums()  # closed: the notebook does not show it a second time


def test_only_a_page_with_an_explorable_figure_loads_plotly():
    from tokensel_book import sphinx_mathjax

    added = []
    app = SimpleNamespace(
        add_js_file=lambda name, **kw: added.append(("js", name, kw.get("loading_method"))),
        add_css_file=lambda name: added.append(("css", name, None)),
    )
    sphinx_mathjax._explorable_assets(app, "a", "page.html", {"body": "<p>no figure to explore</p>"}, None)
    assert added == []
    sphinx_mathjax._explorable_assets(app, "b", "page.html", {"body": '<div class="tokensel-explorable">'}, None)
    # plotly from the build's _static, never from a network address; then the script that draws each figure
    assert added == [
        ("js", "plotly/plotly.min.js", "defer"),
        ("js", None, None),
        ("css", "plotly/explorable.css", None),
    ]


# --- the tiny book, in Chromium ----------------------------------------------------------------------------------

FIGURE_CELL = """
```{{code-cell}} ipython3
---
mystnb:
  figure:
    caption: {caption}
    name: fig-{name}
---
fig, ax = tb.plots.subplots(1)
ax.plot([1, 2, 3])
ax.set_title("{name}")
tb.plots.explorable(fig, live["{name}"])
```
"""
CAPTIONS = dict(phase="The phase diagram.", rate="The rate sweep.", words="Every word.", flow="The flow over time.")
CELLS = "".join(FIGURE_CELL.format(name=n, caption=c) for n, c in CAPTIONS.items())
TINY_PAGE = f"{MYST_FRONT_MATTER}# Explore\n\n```{{code-cell}} ipython3\n{DATA}{FIGURES}tb.plots.theme()\n```\n{CELLS}"
TINY_PAGE += "\n{numref}`fig-rate` has a slider over $d$.\n"


@pytest.fixture(scope="module")
def tiny_book(tmp_path_factory):
    """A book of one page with the four figures, built with the book's Sphinx extension, style sheet and scripts."""
    book = tmp_path_factory.mktemp("explore")
    shutil.copytree(ROOT / "_static", book / "_static")  # the book's own style sheet and scripts
    config = "title: tiny\nonly_build_toc_files: true\nexecute:\n  execute_notebooks: force\n  timeout: 1800\n"
    config += "sphinx:\n  extra_extensions: [tokensel_book.sphinx_mathjax]\n"
    write_book(book, "explore", TINY_PAGE, config + "  config:\n    mathjax_path: mathjax/es5/tex-mml-chtml.js\n")
    build_book(book, "-W", "-n", "--keep-going")
    return book / "_build" / "html"


#: every explorable figure of the page drawn by plotly, each inside a figure with its caption and number
DRAWN = """
return Array.from(document.querySelectorAll('div.tokensel-explorable')).map((box) => {
  const fig = box.closest('figure'), live = box.querySelector('div.tokensel-explorable-live');
  const svg = live.querySelector('svg.main-svg'), shown = (el) => el && el.getClientRects().length > 0;
  const caption = fig ? fig.querySelector('figcaption').textContent.trim().replace(/#$/, '') : null;
  return {id: fig ? fig.id : null, caption: caption,
          drawn: shown(svg), png_shown: shown(box.querySelector('img')),
          width: svg ? svg.getBoundingClientRect().width : 0,
          column: fig ? fig.getBoundingClientRect().width : 0};
});
"""
#: the centre of cell (row from the bottom, column) of the heat map in the figure ``arguments[0]``, in the page
CELL = """
const rect = document.getElementById(arguments[0]).querySelector('rect.nsewdrag').getBoundingClientRect();
const [rows, cols, row, col] = Array.from(arguments).slice(1);
return [rect.left + (col + 0.5) * rect.width / cols, rect.bottom - (row + 0.5) * rect.height / rows];
"""
#: the hover label's text, and whether it lies within the figure's box
HOVER = """
const fig = document.getElementById(arguments[0]), label = fig.querySelector('g.hoverlayer');
const box = fig.getBoundingClientRect(), r = label.getBoundingClientRect();
return [label.textContent, r.width > 0 && r.left >= box.left - 1 && r.right <= box.right + 1];
"""
#: what the rate figure draws now: its title and the paths of its traces
RATE_DRAWN = """
const fig = document.getElementById('fig-rate');
return [fig.querySelector('.gtitle').textContent,
        Array.from(fig.querySelectorAll('g.scatterlayer path, g.scatterlayer .point')).map((p) => p.getAttribute('d'))];
"""
WAIT_DRAWN = """
const done = arguments[arguments.length - 1], start = Date.now();
const check = () => {
  const boxes = document.querySelectorAll('div.tokensel-explorable');
  const drawn = Array.from(boxes).filter((b) => b.querySelector('svg.main-svg')).length;
  if ((boxes.length && drawn === boxes.length) || Date.now() - start > 60000) done(drawn); else setTimeout(check, 100);
};
check();
"""


def requested(driver) -> list[str]:
    """Every URL the browser asked for since the log was last read (Chromium's performance log)."""
    messages = [json.loads(entry["message"])["message"] for entry in driver.get_log("performance")]
    return [m["params"]["request"]["url"] for m in messages if m["method"] == "Network.requestWillBeSent"]


def mouse(driver, x: float, y: float, click: bool = False) -> None:
    """The mouse moved to the viewport point ``(x, y)`` (CSS pixels), and clicked there if ``click``."""
    from selenium.webdriver.common.actions.action_builder import ActionBuilder

    builder = ActionBuilder(driver)
    builder.pointer_action.move_to_location(round(x), round(y))
    if click:
        builder.pointer_action.click()
    builder.perform()


@pytest.mark.browser
@pytest.mark.parametrize("width", [1400, 400])
def test_a_reader_hovers_a_cell_moves_the_slider_and_the_page_stays_in_the_build(tiny_book, tmp_path, width):
    from tokensel_book.pdf import chromium, serve

    with serve(tiny_book) as base, chromium(tmp_path, log_requests=True) as driver:
        driver.set_window_size(width, 1000)
        driver.get(base + "book/explore.html")
        assert driver.execute_async_script(WAIT_DRAWN) == 4
        drawn = driver.execute_script(DRAWN)
        # the figure under its caption and number, drawn within the text column, its PNG hidden on screen
        numbered = [(f"fig-{n}", f"Fig. {i} {c}") for i, (n, c) in enumerate(CAPTIONS.items(), 1)]
        assert [(f["id"], f["caption"]) for f in drawn] == numbered, drawn
        assert all(f["drawn"] and not f["png_shown"] and 0 < f["width"] <= f["column"] + 1 for f in drawn), drawn
        assert not driver.execute_script("return document.documentElement.scrollWidth > window.innerWidth + 1")
        # hover the cell d = 128, eta0 = 100 (top right: 19 of 20 runs select)
        driver.execute_script("document.getElementById('fig-phase').scrollIntoView();")
        mouse(driver, *driver.execute_script(CELL, "fig-phase", 3, 3, 2, 2))
        hover, inside = driver.execute_script(HOVER, "fig-phase")
        assert inside, f"the hover label runs out of the figure at {width} px"
        assert "P(select) = 0.95 (95%: 0.75 to 1.00)" in hover and "19 selected, 1 trapped of 20 runs" in hover, hover
        # the slider moved to its last width: the title and the drawn traces change
        driver.execute_script("document.getElementById('fig-rate').scrollIntoView();")
        before = driver.execute_script(RATE_DRAWN)
        rail = driver.execute_script(
            "return document.getElementById('fig-rate').querySelector('rect.slider-rail-touch-rect')"
            ".getBoundingClientRect().toJSON();"
        )
        mouse(driver, rail["right"] - 3, rail["top"] + rail["height"] / 2, click=True)
        after = driver.execute_script(RATE_DRAWN)
        assert before[0].startswith("mean error at d = 64") and after[0].startswith("mean error at d = 1024"), after
        assert before[1] != after[1]
        urls = requested(driver)
        # the negative control: a request outside the build is seen
        driver.execute_script("const i = new Image(); i.src = 'http://192.0.2.1/pixel.png';")
        control = requested(driver)
    # what reached for a network (the browser's own chrome:// pages and the page's data: images do not)
    outside = [u for u in urls if u.split(":")[0] in ("http", "https", "ws", "wss") and not u.startswith(base)]
    assert not outside, outside
    assert sum(u.endswith("_static/plotly/plotly.min.js") for u in urls) == 1, urls
    assert "http://192.0.2.1/pixel.png" in control


@pytest.mark.browser
def test_the_pdf_prints_every_figures_image(tiny_book, tmp_path):
    from pypdf import PdfReader

    from tokensel_book.pdf import print_book

    pdf = print_book(tiny_book, tmp_path / "tiny.pdf", ["book/explore"], profile_dir=tmp_path)
    # each figure's PNG, not its interactive drawing (vectors): four different images
    images = {img.data for page in PdfReader(pdf).pages for img in page.images}
    assert len(images) == 4, len(images)
