"""Sphinx extension: every chapter page offers its notebook as ``.ipynb`` in the download menu.

sphinx-book-theme lists an ``.ipynb`` download only when a page's context has ``ipynb_source``, which
it sets itself only when launch buttons (Binder, JupyterHub, ...) are configured. This extension sets
it for every page that myst-nb executed: the executed notebook (``_build/jupyter_execute/<page>.ipynb``,
with its outputs) is copied next to the page's source under ``_sources/`` before the theme builds its
buttons. Open the file in Jupyter to rerun the chapter (it needs ``tokensel`` installed).
"""

from __future__ import annotations

import shutil
from pathlib import Path


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
    return {"parallel_read_safe": True, "parallel_write_safe": True}
