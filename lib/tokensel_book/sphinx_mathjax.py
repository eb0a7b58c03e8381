"""Sphinx extension: the book carries its own MathJax and plotly, so its pages request nothing from a network.

Offline, CDN MathJax would leave raw TeX: ``mathjax_path`` points into ``_static``, where this copies MathJax 3
(PyPI ``django-static-mathjax``, no Django needed) and ``plotly.min.js`` for
:func:`tokensel_book.plots.explorable` figures."""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

from .plots import EXPLORABLE

LOCAL_PATH = "mathjax/es5/tex-mml-chtml.js"
PLOTLY_PATH = "plotly/plotly.min.js"
EXPLORABLE_CSS = "plotly/explorable.css"
#: draws every explorable figure of a page once plotly (deferred) has loaded; without it the PNG stays
DRAW = f"""document.addEventListener("DOMContentLoaded", () => {{
  if (!window.Plotly) return;
  for (const box of document.querySelectorAll("div.{EXPLORABLE}")) {{
    const fig = JSON.parse(box.querySelector("script[type='application/json']").textContent);
    box.classList.add("{EXPLORABLE}-on");
    Plotly.newPlot(box.querySelector("div.{EXPLORABLE}-live"), fig.data, fig.layout,
                   {{responsive: true, displayModeBar: false}});
  }}
}});"""
#: the drawn figure on screen, the PNG on paper (the PDF is printed from the HTML)
STYLE = f"""div.{EXPLORABLE}-on div.{EXPLORABLE}-static {{ display: none; }}
@media print {{
  div.{EXPLORABLE}-on div.{EXPLORABLE}-static {{ display: block; }}
  div.{EXPLORABLE}-live {{ display: none; }}
}}
"""


def mathjax_source() -> Path:
    """The folder holding MathJax's ``es5`` build, or a clear error saying how to install it."""
    from sphinx.errors import ExtensionError

    spec = importlib.util.find_spec("mathjax")
    locations = list(spec.submodule_search_locations or []) if spec else []
    for loc in locations:
        es5 = Path(loc) / "static" / "mathjax" / "es5"
        if (es5 / "tex-mml-chtml.js").is_file():
            return es5
    raise ExtensionError(
        "MathJax files not found: install the book's dependencies "
        "(pip install -e '.[book]', which includes django-static-mathjax)"
    )


def _check_config(app, config):
    from sphinx.errors import ConfigError

    if config.mathjax_path != LOCAL_PATH:
        raise ConfigError(
            f"tokensel_book.sphinx_mathjax expects mathjax_path = {LOCAL_PATH!r} in _config.yml "
            f"(got {config.mathjax_path!r})"
        )


def _copy(app, exc):
    if exc is not None or app.builder.format != "html":
        return
    dest = Path(app.outdir) / "_static" / Path(LOCAL_PATH).parent
    shutil.copytree(mathjax_source(), dest, dirs_exist_ok=True)
    from plotly.offline import get_plotlyjs

    plotly = Path(app.outdir) / "_static" / PLOTLY_PATH
    plotly.parent.mkdir(parents=True, exist_ok=True)
    plotly.write_text(get_plotlyjs(), encoding="utf-8")
    plotly.with_name(Path(EXPLORABLE_CSS).name).write_text(STYLE, encoding="utf-8")


def _explorable_assets(app, pagename, templatename, context, doctree):
    """plotly and the drawing script on the pages that have an explorable figure, and only there."""
    if f'class="{EXPLORABLE}"' in context.get("body", ""):
        app.add_js_file(PLOTLY_PATH, loading_method="defer")
        app.add_js_file(None, body=DRAW)
        app.add_css_file(EXPLORABLE_CSS)


def setup(app):
    mathjax_source()  # fail when the build starts, not after executing every chapter
    app.connect("config-inited", _check_config)
    app.connect("build-finished", _copy)
    app.connect("html-page-context", _explorable_assets)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
