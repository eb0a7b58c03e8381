"""tokensel.book.sphinx_mathjax and tokensel.book.sphinx_notebooks, called as Sphinx calls them."""

from types import SimpleNamespace

import pytest
from sphinx.errors import ConfigError

from tokensel.book import sphinx_mathjax, sphinx_notebooks


def test_mathjax_is_installed_and_the_config_is_checked():
    assert (sphinx_mathjax.mathjax_source() / "tex-mml-chtml.js").is_file()
    sphinx_mathjax._check_config(None, SimpleNamespace(mathjax_path=sphinx_mathjax.LOCAL_PATH))
    with pytest.raises(ConfigError, match="mathjax_path"):
        sphinx_mathjax._check_config(None, SimpleNamespace(mathjax_path="https://cdn.example/mathjax.js"))


def test_executed_notebook_is_offered_for_download(tmp_path):
    out = tmp_path / "html"
    executed = tmp_path / "jupyter_execute" / "book" / "01_model.ipynb"
    executed.parent.mkdir(parents=True)
    executed.write_text("{}")
    app = SimpleNamespace(outdir=str(out))
    context = {}
    sphinx_notebooks.add_notebook_download(app, "book/01_model", "page.html", context, doctree=object())
    assert context["ipynb_source"] == "book/01_model.ipynb"
    assert (out / "_sources" / "book" / "01_model.ipynb").read_text() == "{}"
    context = {}
    sphinx_notebooks.add_notebook_download(app, "book/status_not_run", "page.html", context, doctree=object())
    assert "ipynb_source" not in context  # only pages that were executed


def test_a_captioned_figure_without_alt_text_takes_its_caption():
    from docutils import nodes

    doc = nodes.document(None, None)
    plain, described = nodes.image(uri="a.png"), nodes.image(uri="b.png", alt="kept as written")
    for image in (plain, described):
        doc += nodes.figure("", image, nodes.caption("", "Bin means of  the values\n against the gap."))
    lone = nodes.image(uri="c.png")
    doc += lone
    sphinx_notebooks.caption_alt_text(None, doc, "page")
    assert plain["alt"] == "Bin means of the values against the gap."
    assert described["alt"] == "kept as written" and "alt" not in lone
