"""Sphinx extension: every chapter page offers its notebook as ``.ipynb`` in the download menu.

sphinx-book-theme offers it only with launch buttons configured; this sets ``ipynb_source`` for every executed page,
writing the notebook made standalone (:func:`tokensel_book.notebooks.standalone_notebook`) under ``_sources/``.
It also gives every code-cell figure its caption as alt text, for screen readers."""

from __future__ import annotations

import json
from pathlib import Path

from docutils import nodes

from .notebooks import bib_labels, collect_labels, restore_glue, standalone_notebook


def _with_dollars(node) -> str:
    """A caption's text with its math in ``$...$``, as :func:`plain_title` reads it."""
    if isinstance(node, nodes.math):
        return f"${node.astext()}$"
    return node.astext() if isinstance(node, nodes.Text) else "".join(_with_dollars(c) for c in node.children)


def caption_alt_text(app, doctree, docname=None) -> None:
    """Set the alt text of every image of a captioned figure that has none to the caption's text."""
    for figure in doctree.findall(nodes.figure):
        caption = next(iter(figure.findall(nodes.caption)), None)
        if caption is None:
            continue
        from .sphinx_statements import plain_title

        text = plain_title(" ".join(_with_dollars(caption).split()))  # no raw TeX for a screen reader
        for image in figure.findall(nodes.image):
            if not image.get("alt"):
                image["alt"] = text


def add_notebook_download(app, pagename, templatename, context, doctree):
    if context.get("ipynb_source") or doctree is None:
        return
    executed = Path(app.outdir).parent / "jupyter_execute" / f"{pagename}.ipynb"
    if not executed.is_file():
        return
    write_download(app, pagename, executed)
    downloads = getattr(app, "_tokensel_downloads", None)
    if downloads is None:
        downloads = app._tokensel_downloads = {}
    downloads[pagename] = executed
    context["ipynb_source"] = f"{pagename}.ipynb"


def write_download(app, pagename: str, executed: Path) -> Path:
    """Write the page's download, ``_sources/<page>.ipynb``: the executed notebook made to stand alone."""
    target = Path(app.outdir) / "_sources" / f"{pagename}.ipynb"
    target.parent.mkdir(parents=True, exist_ok=True)
    notebook = json.loads(executed.read_text(encoding="utf-8"))
    glue = executed.with_name(executed.stem + ".glue.json")  # the page's glued values, kept apart by myst-nb
    if glue.is_file():
        notebook = restore_glue(notebook, json.loads(glue.read_text(encoding="utf-8")))
    chapter = _numbers(app).get(pagename)
    plain = standalone_notebook(
        notebook, book_labels(app), chapter, getattr(app.config, "tokensel_repository", None) or None
    )
    target.write_text(json.dumps(plain, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return target


def rewrite_downloads(app, exception) -> None:
    """Write every download again once pages are written: Sphinx copied notebook sources over them."""
    if exception is not None:
        return
    for pagename, executed in (getattr(app, "_tokensel_downloads", None) or {}).items():
        write_download(app, pagename, executed)


def _numbers(app) -> dict:
    from .toc import toc_numbers

    root = Path(app.srcdir)
    return toc_numbers(root) if (root / "_toc.yml").is_file() else {}


def book_labels(app) -> dict[str, str]:
    """Every label and bibliography entry as the book numbers and cites them
    (:func:`~tokensel_book.notebooks.collect_labels`), read once per build."""
    cached = getattr(app, "_tokensel_labels", None)
    if cached is not None:
        return cached
    labels: dict[str, str] = {}
    for bib in getattr(app.config, "bibtex_bibfiles", None) or []:
        path = Path(app.srcdir) / bib
        if path.is_file():
            labels |= bib_labels(path.read_text(encoding="utf-8"))
    executed = Path(app.outdir).parent / "jupyter_execute"
    numbers = _numbers(app)
    for page, chapter in numbers.items():
        path = executed / f"{page}.ipynb"
        if path.is_file():
            labels |= collect_labels(json.loads(path.read_text(encoding="utf-8")), chapter, Path(page).name)
    app._tokensel_labels = labels
    return labels


def launch_buttons(app, config) -> None:
    """With ``tokensel_repository`` set, the theme's repository link and a Binder button (Colab opens only .ipynb
    files in a repository, and the book's are built, not committed)."""
    url = config.tokensel_repository
    if url:
        options = dict(config.html_theme_options or {})
        options.update(repository_url=url, use_repository_button=True, path_to_docs="", repository_branch="main")
        options["launch_buttons"] = {
            "binderhub_url": "https://mybinder.org",
            "notebook_interface": "jupyterlab",
        }
        config.html_theme_options = options


def setup(app):
    app.add_config_value("tokensel_repository", "", "html")
    app.connect("config-inited", launch_buttons)
    # before sphinx-book-theme's header buttons (priority 501) read ``ipynb_source``
    app.connect("html-page-context", add_notebook_download, priority=500)
    app.connect("doctree-resolved", caption_alt_text)
    app.connect("build-finished", rewrite_downloads)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
