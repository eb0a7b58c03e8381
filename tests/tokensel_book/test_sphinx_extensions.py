"""tokensel_book.sphinx_mathjax and tokensel_book.sphinx_notebooks, called as Sphinx calls them."""

import json
from types import SimpleNamespace

import pytest
from conftest import code_cell, md_cell, notebook, stream
from sphinx.errors import ConfigError

from tokensel_book import sphinx_mathjax, sphinx_notebooks


def test_mathjax_is_installed_and_the_config_is_checked():
    assert (sphinx_mathjax.mathjax_source() / "tex-mml-chtml.js").is_file()
    sphinx_mathjax._check_config(None, SimpleNamespace(mathjax_path=sphinx_mathjax.LOCAL_PATH))
    with pytest.raises(ConfigError, match="mathjax_path"):
        sphinx_mathjax._check_config(None, SimpleNamespace(mathjax_path="https://cdn.example/mathjax.js"))


def test_executed_notebook_is_offered_for_download_as_a_notebook_that_stands_alone(tmp_path):
    root = tmp_path / "src"
    (root / "book").mkdir(parents=True)
    (root / "_toc.yml").write_text(
        "format: jb-book\nroot: book/intro\nparts:\n  - caption: C\n    numbered: true\n"
        "    chapters:\n      - file: book/01_model\n      - file: book/02_next\n"
    )
    bib = "@article{wu2025,\n  author = {Wu, D. and Oymak, S. and Mondelli, M.},\n  year = {2025}\n}\n"
    (root / "refs.bib").write_text(bib)
    out = tmp_path / "_build" / "html"
    executed = tmp_path / "_build" / "jupyter_execute" / "book"
    executed.mkdir(parents=True)
    cell = md_cell(
        "# Model\n\n````{prf:definition} Attention\n:label: def-att\nIt is {cite:p}`wu2025`.\n````\n"
        "See {prf:ref}`lem-next` in {doc}`02_next`.\n"
    )
    code = code_cell("import tokensel", [stream("a\nb\n"), stream("b\n")])
    (executed / "01_model.ipynb").write_text(json.dumps(notebook(cell, code)))
    lemma = md_cell("````{prf:lemma} Next\n:label: lem-next\nx\n````\n")
    (executed / "02_next.ipynb").write_text(json.dumps(notebook(lemma)))
    config = SimpleNamespace(bibtex_bibfiles=["refs.bib"], tokensel_repository="")
    app = SimpleNamespace(outdir=str(out), srcdir=str(root), config=config)
    context = {}
    sphinx_notebooks.add_notebook_download(app, "book/01_model", "page.html", context, doctree=object())
    assert context["ipynb_source"] == "book/01_model.ipynb"
    nb = json.loads((out / "_sources" / "book" / "01_model.ipynb").read_text())
    assert "pip install" in nb["cells"][0]["source"]
    md = nb["cells"][1]["source"]
    assert "**Definition 1.1** (Attention)." in md and "It is (Wu et al., 2025)." in md
    assert "See Lemma 2.1 in chapter 2." in md and "{" not in md
    assert nb["cells"][2]["outputs"] == [stream("a\nb\n")]
    download = out / "_sources" / "book" / "01_model.ipynb"
    download.write_text("{}")  # what Sphinx's copy of a notebook source does to it
    sphinx_notebooks.rewrite_downloads(app, None)
    assert json.loads(download.read_text()) == nb
    context = {}
    sphinx_notebooks.add_notebook_download(app, "book/status_not_run", "page.html", context, doctree=object())
    assert "ipynb_source" not in context  # only pages that were executed


def test_a_captioned_figure_without_alt_text_takes_its_caption():
    from docutils import nodes

    doc = nodes.document(None, None)
    plain, described = nodes.image(uri="a.png"), nodes.image(uri="b.png", alt="kept as written")
    for image in (plain, described):
        doc += nodes.figure("", image, nodes.caption("", "Bin means of  the values\n against the gap."))
    lone, tex = nodes.image(uri="c.png"), nodes.image(uri="d.png")
    doc += lone
    caption = nodes.caption("", "", nodes.Text("The norm "), nodes.math("", r"\|p_t\|"), nodes.Text("."))
    doc += nodes.figure("", tex, caption)
    sphinx_notebooks.caption_alt_text(None, doc, "page")
    assert plain["alt"] == "Bin means of the values against the gap."
    assert tex["alt"] == "The norm ‖pₜ‖."  # no raw TeX for a screen reader
    assert described["alt"] == "kept as written" and "alt" not in lone


def test_a_configured_repository_gives_its_link_and_a_binder_button_only():
    config = SimpleNamespace(tokensel_repository="", html_theme_options={"a": 1})
    sphinx_notebooks.launch_buttons(None, config)
    assert config.html_theme_options == {"a": 1}  # no address, no buttons
    config.tokensel_repository = "https://github.com/o/tokensel"
    sphinx_notebooks.launch_buttons(None, config)
    options = config.html_theme_options
    assert options["repository_url"] == "https://github.com/o/tokensel" and options["a"] == 1
    assert options["launch_buttons"]["binderhub_url"] == "https://mybinder.org"
    assert "colab_url" not in options["launch_buttons"]
