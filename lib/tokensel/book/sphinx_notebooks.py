"""Sphinx extension: every chapter page offers its notebook as ``.ipynb`` in the download menu.

sphinx-book-theme lists an ``.ipynb`` download only when a page's context has ``ipynb_source``, which
it sets itself only when launch buttons (Binder, JupyterHub, ...) are configured. This extension sets
it for every page that myst-nb executed: the executed notebook (``_build/jupyter_execute/<page>.ipynb``,
with its outputs) is copied next to the page's source under ``_sources/`` before the theme builds its
buttons. Open the file in Jupyter to rerun the chapter (it needs ``tokensel`` installed).

It also gives every figure made by a code cell a descriptive alt text: an image without one (Sphinx then
writes the file name) takes its figure's caption, so a screen reader reads what the figure shows.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from docutils import nodes


def caption_alt_text(app, doctree, docname=None) -> None:
    """Set the alt text of every image of a captioned figure that has none to the caption's text."""
    for figure in doctree.findall(nodes.figure):
        caption = next(iter(figure.findall(nodes.caption)), None)
        if caption is None:
            continue
        text = " ".join(caption.astext().split())
        for image in figure.findall(nodes.image):
            if not image.get("alt"):
                image["alt"] = text


def add_notebook_download(app, pagename, templatename, context, doctree):
    if context.get("ipynb_source") or doctree is None:
        return
    executed = Path(app.outdir).parent / "jupyter_execute" / f"{pagename}.ipynb"
    if not executed.is_file():
        return
    target = Path(app.outdir) / "_sources" / f"{pagename}.ipynb"
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(executed, target)
    context["ipynb_source"] = f"{pagename}.ipynb"


def setup(app):
    # before sphinx-book-theme's header buttons (priority 501) read ``ipynb_source``
    app.connect("html-page-context", add_notebook_download, priority=500)
    app.connect("doctree-resolved", caption_alt_text)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
