"""The book's promises: a false claim or an exception fails the strict build (naming the cause),
the same chapters executed twice record identical numbers, and every chapter round-trips through
jupytext and runs from its notebook form."""

import json
import os
import subprocess
import sys
from pathlib import Path

import jupytext
import nbformat
import pytest
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
HEADER = """---
jupytext:
  text_representation:
    extension: .md
    format_name: myst
    format_version: 0.13
kernelspec:
  display_name: Python 3
  language: python
  name: python3
---

# Throw-away chapter

```{code-cell} ipython3
import tokensel as ts
import tokensel_book as tb
tb.start_chapter("throwaway")
%s
tb.end_chapter()
```
"""


def _build(tmp_path, body, header=HEADER):
    book = tmp_path / "book"
    book.mkdir()
    config = (ROOT / "_config.yml").read_text().replace("references.bib", str(ROOT / "references.bib"))
    config = config.replace("tokensel_execute_every_build: [book/status]", "tokensel_execute_every_build: []")
    (book / "_config.yml").write_text(config)
    (book / "book" / "recorded").mkdir(parents=True)  # an input of the execution cache's key (_config.yml)
    (book / "_toc.yml").write_text("format: jb-book\nroot: chapter\n")
    (book / "chapter.md").write_text(header % body)
    env = dict(
        os.environ,
        TOKENSEL_RESULTS_DIR=str(tmp_path / "checks"),
        TOKENSEL_PROGRESS="0",
        PATH=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
    )
    out = subprocess.run(
        [str(BIN / "jupyter-book"), "build", str(book), "-W", "-n", "--keep-going"],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    if out.returncode:
        return out.returncode, out.stdout + out.stderr
    # the build's last step, as in `make book`: every recorded claim must hold
    check = subprocess.run(
        [sys.executable, "-m", "tokensel_book", "verify", str(tmp_path / "checks")],
        capture_output=True,
        text=True,
        env=env,
        cwd=book,
        timeout=120,
    )
    return check.returncode, out.stdout + out.stderr + check.stdout + check.stderr


@pytest.mark.slow
def test_passing_claim_builds(tmp_path):
    rc, log = _build(tmp_path, 'tb.check("a true claim", 2.0, 2.0, tol=0.1)')
    assert rc == 0, log[-3000:]
    [rec] = [json.loads(p.read_text()) for p in (tmp_path / "checks").glob("throwaway@*.json")]
    assert rec["checks"][0]["passed"] and "finished" in rec


@pytest.mark.slow
def test_false_claim_fails_the_build_and_names_it(tmp_path):
    rc, log = _build(tmp_path, 'tb.check("a deliberately false claim", 1.0, 2.0, tol=0.1)')
    assert rc != 0
    assert "ClaimFailedError" in log and "a deliberately false claim" in log


@pytest.mark.slow
@pytest.mark.parametrize(
    "body",
    [
        'try:\n    tb.check("a caught false claim", 1.0, 2.0, tol=0.1)\nexcept Exception:\n    pass',
        "import contextlib\nwith contextlib.suppress(AssertionError):\n"
        '    tb.check("a caught false claim", 1.0, 2.0, tol=0.1)',
    ],
    ids=["try-except", "suppress"],
)
def test_a_false_claim_fails_the_build_however_it_is_caught(tmp_path, body):
    rc, log = _build(tmp_path, body)
    assert rc != 0 and "a caught false claim" in log, log[-3000:]


@pytest.mark.slow
def test_a_false_claim_in_a_raises_exception_cell_fails_the_build(tmp_path):
    book = HEADER.replace(
        "tb.end_chapter()\n```",
        "```\n\n```{code-cell} ipython3\n:tags: [raises-exception]\n"
        'tb.check("a tolerated false claim", 1.0, 2.0, tol=0.1)\n```\n\n```{code-cell} ipython3\n'
        "tb.end_chapter()\n```",
    )
    rc, log = _build(tmp_path, "pass", header=book)
    assert rc != 0 and "a tolerated false claim" in log, log[-3000:]


@pytest.mark.slow
def test_exception_in_a_chapter_fails_the_build(tmp_path):
    rc, log = _build(tmp_path, 'raise ValueError("boom inside the chapter")')
    assert rc != 0 and "boom inside the chapter" in log


def _execute(md_path, results_dir):
    nb = jupytext.read(md_path)
    os.environ["TOKENSEL_RESULTS_DIR"] = str(results_dir)
    try:
        NotebookClient(
            nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(md_path.parent)}}
        ).execute()
    finally:
        del os.environ["TOKENSEL_RESULTS_DIR"]
    return nb


@pytest.mark.parametrize("md", sorted((ROOT / "book").glob("*.md")), ids=lambda p: p.stem)
def test_chapter_round_trips_through_jupytext(md):
    nb = jupytext.read(md)
    again = jupytext.reads(jupytext.writes(nb, fmt="md:myst"), fmt="md:myst")
    assert [(c.cell_type, c.source) for c in nb.cells] == [(c.cell_type, c.source) for c in again.cells]
    as_ipynb = nbformat.reads(nbformat.writes(nb), as_version=4)
    assert [c.source for c in as_ipynb.cells] == [c.source for c in nb.cells]


@pytest.mark.slow
def test_fastest_chapter_runs_from_its_ipynb_and_records_the_numbers_of_its_md(tmp_path):
    """The chapter executed from its paired .ipynb, then from its .md source in a new kernel: no error, and
    every claim records the same measured value (the same build prints the same numbers)."""
    ipynb = tmp_path / "01_model.ipynb"
    jupytext.write(jupytext.read(ROOT / "book" / "01_model.md"), ipynb)
    nb = nbformat.read(ipynb, as_version=4)
    os.environ["TOKENSEL_RESULTS_DIR"] = str(tmp_path / "run0")
    try:
        NotebookClient(
            nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(ROOT / "book")}}
        ).execute()
    finally:
        del os.environ["TOKENSEL_RESULTS_DIR"]
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []) if o.output_type == "error"]
    assert not errors
    _execute(ROOT / "book" / "01_model.md", tmp_path / "run1")
    runs = []
    for k in range(2):
        recs = [json.loads(p.read_text()) for p in (tmp_path / f"run{k}").glob("*.json")]
        runs.append({r["chapter"]: [(c["name"], c["measured"]) for c in r["checks"]] for r in recs})
    assert runs[0] == runs[1] and len(runs[0]) == 1 and len(runs[0]["01_model"]) >= 2
