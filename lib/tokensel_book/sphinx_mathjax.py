"""Sphinx extension: the book carries its own MathJax, so its math renders without a network.

Sphinx loads MathJax from a CDN by default; a reader offline (and every machine of this project)
would then see raw TeX. ``_config.yml`` sets ``mathjax_path`` to ``mathjax/es5/tex-mml-chtml.js``,
which Sphinx resolves relative to the build's ``_static`` folder, and lists this module among the
Sphinx extensions; the extension copies MathJax 3 there when an HTML build finishes. The files come
from the PyPI package ``django-static-mathjax`` (installed by the ``book`` extra; it ships MathJax
3.2.2 as the plain package ``mathjax`` and needs no Django).
"""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

LOCAL_PATH = "mathjax/es5/tex-mml-chtml.js"


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


def setup(app):
    mathjax_source()  # fail when the build starts, not after executing every chapter
    app.connect("config-inited", _check_config)
    app.connect("build-finished", _copy)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
