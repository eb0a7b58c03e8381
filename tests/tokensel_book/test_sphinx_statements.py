"""tokensel_book.sphinx_statements and the statement a claim tests: a claim's line names the label its table
gives, a failed claim names the statement by kind and title, the HTML links the label to the statement by
its number, and the proof index lists statements by number and title. A tiny book is built once (slow)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from conftest import MYST_FRONT_MATTER, build_book

import tokensel_book as tb
from tokensel_book.claims import TESTS, ClaimFailedError, statement_title
from tokensel_book.sphinx_statements import plain_title

ROOT = Path(__file__).resolve().parents[2]

PAGE = (
    MYST_FRONT_MATTER
    + """# Chapter

````{prf:definition} Signed frequency $\\alpha_s$
:label: def-b

Text.
````

````{prf:lemma} One step from $p^0 = 0$
:label: lem-a

A thing $\\|p_t\\|$.
````

$$
x = 1
$$ (eq-x)

```{code-cell} ipython3
from myst_nb import glue

n = 400
glue("n", n, display=False)
print("[ok] a: 1, required at least 0 (tests lem-a)")
print("[ok] b: 1, required at least 0 (tests eq-x)")
print("[ok] c: 1, required at least 0 (tests lem-nowhere)")
print("[ok] d: 1, required at least 0 (tests lem-a)")
print("[ok] e: 1, required at least 0 (tests lem-a)")
```

```{code-cell} ipython3
---
mystnb:
  figure:
    caption: |
      A figure of {glue:text}`n:d` points.
    name: fig-x
---
import matplotlib.pyplot as plt

plt.plot([1, 2]);
```

Text with {glue:text}`n:,d` sequences.
"""
)


def test_a_failed_claim_names_the_statement_it_tests_by_kind_and_title(tmp_path, monkeypatch):
    (tmp_path / "book").mkdir()
    (tmp_path / "_config.yml").write_text("title: t\n")
    (tmp_path / "_toc.yml").write_text("root: book/ch\n")
    table = "claims:\n  b:\n    claim: b\n    tests: lem-a\n    threshold: x\n    preregistered: true\n"
    (tmp_path / "book" / "ch.md").write_text(PAGE.replace("---\n# Chapter", table + "---\n# Chapter"))
    monkeypatch.chdir(tmp_path)
    tb.start_chapter("ch")
    message = str(pytest.raises(ClaimFailedError, lambda: tb.check("b", 1.0, at_most=0.5)).value)
    assert "(tests lem-a)" in message
    assert "what is tested: Lemma \u201cOne step from $p^0 = 0$\u201d (lem-a)" in message
    assert "where the threshold comes from: x" in message


def test_statement_titles_and_plain_titles():
    assert statement_title("lem-one-step", ROOT) == "Lemma \u201cOne step from $p^0 = 0$\u201d (lem-one-step)"
    assert statement_title("nothing-here", ROOT) == "nothing-here"
    assert plain_title("One step from $p^0 = 0$") == "One step from p⁰ = 0"
    assert plain_title("Divergence of $\\|p_t\\|$ (our precise version)") == "Divergence of ‖pₜ‖ (our precise version)"
    assert TESTS.search("[ok] x: 1, required at least 0 (tests lem-a)")["label"] == "lem-a"


@pytest.mark.slow
def test_the_html_links_each_check_line_to_its_statement_and_indexes_statements_by_number(tmp_path):
    book = tmp_path / "tiny"
    (book / "book").mkdir(parents=True)
    (book / "_config.yml").write_text(
        "title: tiny\nonly_build_toc_files: true\nexecute:\n  execute_notebooks: force\n  timeout: 1800\n"
        "parse:\n  myst_enable_extensions: [amsmath, dollarmath, colon_fence]\n"
        "sphinx:\n  extra_extensions: [sphinx_proof, tokensel_book.sphinx_statements]\n"
        "  config:\n    nb_merge_streams: true\n"
    )
    toc = "format: jb-book\nroot: book/intro\nparts:\n  - caption: C\n    numbered: true\n"
    (book / "_toc.yml").write_text(toc + "    chapters:\n      - file: book/ch\n")
    card = '<tr data-claim="ch/a"><td><a href="intro.html#lem-a">a</a><a href="intro.html#eq-x">b</a></td></tr>'
    card = f"<table>{card}</table>"
    (book / "book" / "intro.md").write_text(f"# Intro\n\nSee {{ref}}`prf-prf`.\n\n```{{raw}} html\n{card}\n```\n")
    (book / "book" / "ch.md").write_text(PAGE)
    log = build_book(book, "-n", "--keep-going")
    # the negative control: a label that names no statement is a warning (an error under -W), left unlinked
    assert re.search(r"WARNING: a check line tests 'lem-nowhere', which is no statement", log), log[-3000:]
    page = (book / "_build" / "html" / "book" / "ch.html").read_text()
    # the check lines as a table: mark, claim, value, requirement, and the statement it tests as a link
    assert "<td><p>✓</p></td>\n<td><p>a</p></td>\n<td><p>1</p></td>\n<td><p>at least 0</p></td>" in page
    assert '<td><p><a class="reference internal" href="#lem-a">Lemma 1.1</a></p></td>' in page
    assert '<a class="reference internal" href="#equation-eq-x">(1.1)</a>' in page
    assert "<td><p>lem-nowhere</p></td>" in page
    assert "<details class='tokensel-claims'><summary>5 claims checked, all hold</summary>" in page  # closed: many
    # a claim card (the status page's) links each statement where the book states it
    intro = (book / "_build" / "html" / "book" / "intro.html").read_text()
    assert '<a href="ch.html#lem-a">a</a><a href="ch.html#equation-eq-x">b</a>' in intro
    # numbers glued from the code appear in the caption and the text
    assert re.search(r'A figure of <span class="pasted-text">400</span> points', page)
    assert 'Text with <span class="pasted-text">400</span> sequences' in page
    index = re.sub(r"\s+", " ", (book / "_build" / "html" / "prf-prf.html").read_text())
    assert "<h1>Definitions, lemmas and proofs</h1>" in index
    entries = re.findall(r'<a href="book/ch.html#([\w-]+)"><code class="xref">([^<]+)</code>', index)
    # in the order the chapter states them (each kind is numbered on its own)
    assert entries == [("def-b", "Definition 1.1 Signed frequency αₛ"), ("lem-a", "Lemma 1.1 One step from p⁰ = 0")]
    assert "1. Chapter" in index
