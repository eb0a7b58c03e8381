"""tokensel_book.notebooks: streams stored once, solutions out, MyST as plain Markdown; on crafted notebooks."""

import json

import pytest
from conftest import code_cell, md_cell, notebook, stream

from tokensel.errors import InvalidArgumentError
from tokensel_book import notebooks as nbs


def test_repair_streams_undoes_the_in_place_merge_of_myst_nb():
    # what myst-nb stores: the first stream merged with the later ones, which stay
    display = {"output_type": "display_data", "data": {}}
    stored = [stream("[ok] a\n[ok] b\n[ok] c\n"), stream("[ok] b\n"), display, stream("[ok] c\n")]
    out = nbs.repair_streams(stored)
    assert [o["output_type"] for o in out] == ["stream", "display_data"]
    assert out[0]["text"] == "[ok] a\n[ok] b\n[ok] c\n"
    # streams never merged are joined, each line once; stderr kept apart
    fresh = nbs.repair_streams([stream("a\n"), stream("warn\n", "stderr"), stream("b\n")])
    assert [(o["name"], o["text"]) for o in fresh] == [("stdout", "a\nb\n"), ("stderr", "warn\n")]
    # a progress line rewritten with carriage returns, merged and cleaned by myst-nb, is still recognised
    merged = [stream("start\nstep 2/2\n"), stream("step 1/2\rstep 2/2\n")]
    assert nbs.repair_streams(merged) == [stream("start\nstep 2/2\n")]
    assert nbs.repair_streams([]) == []
    pytest.raises(InvalidArgumentError, lambda: nbs.repair_streams("no")).match("outputs")


GATED = notebook(
    md_cell(
        "# Ch\n\n````{exercise} Core: x\n:label: ex-x\nDo it.\n````\n\n````{solution} ex-x\n:class: dropdown\n\n"
        "The plain answer is forty two.\n````\n\n````{exercise} Challenge: y\n:label: ex-y\nAnd this.\n````\n\n"
        "````{solution-start} ex-y\n:class: dropdown\n````\n\nThe gated answer follows:\n"
    ),
    code_cell("answer = 42\ntb.check('exercise: the answer', answer, 42, tol=0)", [stream("[ok] 42.1234\n")]),
    md_cell("so 42.\n\n````{solution-end}\n````\n\nAfter the solutions.\n"),
    code_cell("print('kept')"),
)


def test_split_solutions_takes_out_plain_and_gated_solutions():
    out, solutions = nbs.split_solutions(GATED)
    text = json.dumps(out)
    assert "Do it." in text and "And this." in text and "After the solutions." in text and "kept" in text
    for gone in ("{solution", "forty two", "gated answer", "answer = 42", "42.1234", "so 42"):
        assert gone not in text, gone
    assert [s["label"] for s in solutions] == ["ex-x", "ex-y"]
    assert solutions[0]["markdown"] == "The plain answer is forty two." and solutions[0]["code"] == []
    assert "gated answer" in solutions[1]["markdown"] and "so 42." in solutions[1]["markdown"]
    assert solutions[1]["code"] == [GATED["cells"][1]["source"]] and "42.1234" in solutions[1]["outputs"][0]
    assert len(GATED["cells"]) == 4  # the input is not changed
    with pytest.raises(InvalidArgumentError, match="never closed"):
        nbs.split_solutions(notebook(md_cell("````{solution-start} ex\n````\n"), code_cell("x = 1")))
    with pytest.raises(InvalidArgumentError, match="never closed"):
        nbs.split_solutions(notebook(md_cell("````{solution} ex\nopen\n")))
    pytest.raises(InvalidArgumentError, lambda: nbs.split_solutions({"cells": "no"})).match("notebook")


CHAPTER = notebook(
    md_cell(
        "# Two\n\n````{prf:lemma} One step\n:label: lem-a\n\nThe step is\n\n$$\nx = 1\n$$ (eq-a)\n\nexactly.\n"
        "````\n\n````{prf:proof}\nBy {prf:ref}`lem-a` and {eq}`eq-a`; see {doc}`03_next` and {prf:ref}`lem-far`.\n"
        "````\n\n$$ y = 2 $$\n\n```{admonition} Why it matters\nA note, {cite:t}`wu2025`.\n```\n"
    ),
    code_cell("fig = 1", metadata={"mystnb": {"figure": {"name": "fig-a", "caption": "c"}}}),
    md_cell(
        "As {numref}`fig-a` shows ({numref}`Figure %s <fig-a>`), {cite:p}`wu2025`.\n\n"
        "````{exercise} Warm-up: by hand\n:label: ex-a\nCompute {math}`x`.\n````\n"
    ),
)


def test_labels_are_numbered_as_the_book_numbers_them():
    labels = nbs.collect_labels(CHAPTER, 2, "02_two")
    assert labels == {
        "02_two": "chapter 2",
        "lem-a": "Lemma 2.1",
        "eq-a": "(2.1)",
        "fig-a": "Figure 2.1",
        "ex-a": "Exercise 2.1",
    }


def test_plain_markdown_has_no_myst_left():
    labels = nbs.collect_labels(CHAPTER, 2) | {"03_next": "chapter 3", "wu2025": "Wu et al. (2025)"}
    out = nbs.standalone_notebook(CHAPTER, labels, 2, repository="https://example.org/tokensel.git")
    first, *cells = out["cells"]
    assert first["cell_type"] == "code" and first["source"].count("git+https://example.org/tokensel") == 2
    assert '"tokensel-book @ git+https://example.org/tokensel#subdirectory=lib"' in first["source"]
    md = "\n".join(c["source"] for c in cells if c["cell_type"] == "markdown")
    assert "{" + "prf" not in md and "````" not in md and "```" not in md and ":label:" not in md
    assert "{eq}" not in md and "{numref}" not in md and "{doc}" not in md and "{cite" not in md
    assert "**Lemma 2.1** (One step)." in md and "*Proof.*" in md and "∎" in md
    assert "By Lemma 2.1 and (2.1); see chapter 3 and lem-far." in md
    assert "\\tag{2.1}" in md and "\\tag{2.2}" in md and "y = 2" in md
    assert "> **Why it matters**" in md and "> A note, Wu et al. (2025)." in md
    assert "As Figure 2.1 shows (Figure 2.1), (Wu et al., 2025)." in md
    assert "**Exercise 2.1** (Warm-up: by hand)" in md and "Compute $x$." in md
    assert cells[1] == CHAPTER["cells"][1] | {"outputs": []}  # code cells as they were
    assert len(CHAPTER["cells"]) == 3  # the input is not changed
    generic = nbs.install_cell(None)["source"]
    assert "pip install . ./lib" in generic and "git clone" in generic
    with pytest.raises(InvalidArgumentError, match="placeholder"):
        nbs.install_cell("https://github.com/ADDRESS/tokensel")


def test_a_download_imports_glue_with_a_fallback_outside_a_book():
    nb = notebook(code_cell("from myst_nb import glue\nglue('n', 3, display=False)"))
    out = nbs.standalone_notebook(nb, {}, 1)
    source = out["cells"][1]["source"]
    namespace: dict = {}
    exec(compile(source.replace("from myst_nb import glue", "raise ImportError"), "cell", "exec"), namespace)
    assert "except ImportError" in source


def test_a_downloads_check_lines_name_their_statement_as_the_book_does():
    line = "[ok] step: 0.99, required at least 0.9 (tests lem-a)\n    (tests lem-far)\n"
    nb = notebook(CHAPTER["cells"][0], code_cell("tb.check(...)", [stream(line)]))
    out = nbs.standalone_notebook(nb, None, 2)
    assert out["cells"][2]["outputs"][0]["text"] == line.replace("lem-a", "Lemma 2.1")  # an unknown label stays


def test_a_gated_solution_becomes_plain_markdown():
    out = nbs.standalone_notebook(GATED, None, 3)
    assert nbs.standalone_problems(out) == []
    md = "\n".join(c["source"] for c in out["cells"] if c["cell_type"] == "markdown")
    assert "**Solution to Exercise 3.2**" in md and "*End of the solution.*" in md and "After the solutions." in md


def test_standalone_problems_finds_myst_left_and_a_missing_install_cell():
    assert nbs.standalone_problems(nbs.standalone_notebook(CHAPTER)) == []
    problems = nbs.standalone_problems(CHAPTER)
    assert "install tokensel" in problems[0]
    assert any("{prf:lemma}" in p for p in problems) and any("{eq}" in p for p in problems)
    assert any(":label:" in p for p in problems)
    inside_code = notebook(nbs.install_cell(), md_cell("```python\n{eq}`x`\n```\n"))
    assert nbs.standalone_problems(inside_code) == []


def test_plain_markdown_rejects_what_it_cannot_convert():
    pytest.raises(InvalidArgumentError, lambda: nbs.plain_markdown("````{prf:lemma} x\nopen\n")).match("never closed")
    pytest.raises(InvalidArgumentError, lambda: nbs.plain_markdown(None)).match("text")
    spanning = nbs.standalone_notebook(notebook(md_cell("````{prf:lemma} x\nopen\n"), md_cell("closed\n````\n")))
    assert [c["source"] for c in spanning["cells"][1:]] == ["**Lemma 1** (x).\n\nopen\n", "closed\n"]
    assert nbs.plain_markdown("```python\n{eq}`x` stays in code\n```\n") == "```python\n{eq}`x` stays in code\n```\n"


def test_bib_labels():
    bib = (
        "@article{wu2025,\n  author = {Wu, Diyuan and Shevchenko, Aleksandr and Mondelli, Marco},\n  year = {2025}\n}\n"
        "@book{solo,\n  author = {Ada Lovelace},\n  year = 1843\n}\n"
    )
    assert nbs.bib_labels(bib) == {"wu2025": "Wu et al. (2025)", "solo": "Lovelace (1843)"}
    pytest.raises(InvalidArgumentError, lambda: nbs.bib_labels(None)).match("bibtex")


def test_glued_values_come_back_and_read_as_text_outside_the_book():
    from tokensel_book.notebooks import glued, restore_glue, standalone_notebook

    nb = notebook(md_cell("With $n$ = {glue:text}`n:,d` and {glue:text}`x:.2f`."), code_cell("glue('n', 4000)"))
    prefix = "application/papermill.record/"
    # as myst-nb writes <page>.glue.json: the prefix in the metadata, not in the data's keys
    meta = {k: {"scrapbook": {"name": k, "mime_prefix": prefix}} for k in "nx"}
    values = {"n": "4000", "x": "0.18344"}
    stored = {
        k: {"output_type": "display_data", "metadata": meta[k], "data": {"text/plain": v}} for k, v in values.items()
    }
    back = restore_glue(nb, stored)
    assert nb["cells"][1]["outputs"] == []  # the input is not changed
    outs = back["cells"][1]["outputs"]
    assert [o["data"] for o in outs] == [{prefix + "text/plain": "4000"}, {prefix + "text/plain": "0.18344"}]
    assert glued(back) == {"glue:n": "4000", "glue:x": "0.18344"}
    assert restore_glue(back, stored)["cells"][1]["outputs"] == outs  # not twice
    text = standalone_notebook(back)["cells"][1]["source"]
    assert "With $n$ = 4,000 and 0.18." in text
    assert "With $n$ = `n` and `x`." in standalone_notebook(nb)["cells"][1]["source"]  # nothing glued: the names
