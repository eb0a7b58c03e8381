"""tokensel_book.verification: a built chapter's claims hold only when its executed notebook shows a sealed record of
every claim of its table, on the code of its source and on the files its run read, whatever its cells' form."""

import json

import jupytext
import nbformat
import pytest
from conftest import write_book

from tokensel.errors import InvalidArgumentError
from tokensel_book.claims import MIME, ClaimFailedError
from tokensel_book.verification import MAX_NOTEBOOK, executed_problems, source_problems, summary, verify

TABLE = "claims:\n" + "".join(
    f"  {c}:\n    claim: 'claim {c}'\n    tests: lem-{c}\n    threshold: exact\n" for c in "ab"
)
START = "import tokensel_book as tb\ntb.start_chapter('ch')"
A, B, END = "tb.check('a', 1.0, at_least=0)", "tb.check('b', True)", "tb.end_chapter()"


def _book(root, cells, table=TABLE, tags=None):
    """A one-chapter book whose code cells are ``cells`` (``tags``: {cell index: [tags]})."""
    write_book(root)
    body = ""
    for i, cell in enumerate(cells):
        opts = f":tags: {json.dumps((tags or {}).get(i, []))}\n" if (tags or {}).get(i) else ""
        body += f"\n```{{code-cell}} ipython3\n{opts}{cell}\n```\n"
    front = f"---\nkernelspec:\n  name: python3\n  display_name: Python 3\n{table}---\n# A chapter\n"
    (root / "book" / "ch.md").write_text(front + body)
    return root


def _execute(root):
    """Execute the chapter as the book does and keep its executed notebook where the build keeps it."""
    from nbclient import NotebookClient

    nb = jupytext.read(root / "book" / "ch.md")
    NotebookClient(nb, timeout=120, allow_errors=True, resources={"metadata": {"path": str(root)}}).execute()
    out = root / "_build" / "jupyter_execute" / "book" / "ch.ipynb"
    out.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, out)
    return out


def _problems(root):
    with pytest.raises(ClaimFailedError) as err:
        verify(root, root / "_build")
    return str(err.value)


NEVER = "'b' of the table was never made"
SWALLOWED = "try:\n    tb.check('a', -1.0, at_least=0)\nexcept Exception:\n    pass"  # a failed claim caught


@pytest.mark.slow(seconds=40)
@pytest.mark.parametrize(
    ("cells", "tags", "expected"),
    [
        ([START, A, B, END], None, None),
        ([START, A, "%%capture\n" + B, END], None, None),
        ([START, A, B, END], {2: ["skip-execution"]}, NEVER),
        ([START, A, "%%script false\n" + B, END], None, NEVER),
        ([START, A, "%%writefile x.py\n" + B, END], None, NEVER),
        ([START, A, "if False:\n    " + B, END], None, NEVER),
        ([START, SWALLOWED, B, END], None, "claim failed"),
        ([START, A, "raise RuntimeError('boom')\n" + B, END], {2: ["raises-exception"]}, NEVER),
        ([START, A, "tb.check('b', False)", END], {2: ["raises-exception"]}, "claim failed"),
        ([START, A, B], None, "shows no record"),
        ([START, A, "import sympy\ntb.prove('b', sympy.Integer(0))", END], None, None),
        ([START, A, "import sympy\ntb.prove('b', sympy.Integer(1))", END], {2: ["raises-exception"]}, "claim failed"),
    ],
)
def test_only_a_record_of_every_claim_that_holds_passes_whatever_the_cells_form(tmp_path, cells, tags, expected):
    root = _book(tmp_path, cells, tags=tags)
    _execute(root)
    if expected is None:
        assert summary(verify(root, root / "_build")) == "book claims: 2 hold in 1 chapters"
    else:
        assert expected in _problems(root)


@pytest.mark.slow(seconds=15)
def test_a_notebook_that_is_not_the_sources_or_was_edited_or_ran_on_other_files_is_refused(tmp_path):
    helper = tmp_path / "book" / "helper.py"
    root = _book(tmp_path, [START + "\nimport sys; sys.path.insert(0, 'book'); import helper", A, B, END])
    helper.write_text("X = 1\n")
    executed = _execute(root)
    verify(root, root / "_build")
    helper.write_text("X = 2\n")
    assert "helper.py changed" in _problems(root)
    helper.write_text("X = 1\n")
    nb = json.loads(executed.read_text())
    [out] = [o for c in nb["cells"] for o in c.get("outputs", []) if MIME in o.get("metadata", {})]
    out["metadata"][MIME]["checks"][0]["measured"] = 2.0
    executed.write_text(json.dumps(nb))
    assert "changed after the run" in _problems(root)
    _book(tmp_path, [START + "\nimport sys; sys.path.insert(0, 'book'); import helper", A, B, END + "\n1"])
    assert "does not have the code of its source" in _problems(root)


def test_each_check_or_proof_names_a_claim_of_the_table_by_a_literal_id(tmp_path):
    root = _book(tmp_path, [START, A, "tb.check('c', 1.0, at_least=0)", "tb.check(name, 1)", END])
    found = "\n".join(source_problems(root, "book/ch"))
    assert "'c', which the claims table does not declare" in found
    assert "declares 'b', which no tb.check makes" in found
    assert "must be a string literal" in found
    root = _book(tmp_path, [START, A, "tb.prove('b', difference)", END])
    assert source_problems(root, "book/ch") == []


def test_verify_wants_chapters_of_the_book(tmp_path):
    root = _book(tmp_path, [START, A, B, END])
    pytest.raises(InvalidArgumentError, lambda: verify(root, root / "_build", [])).match("no chapter to verify")
    with pytest.raises(InvalidArgumentError, match="not chapters of the book"):
        verify(root, root / "_build", ["book/other"])
    assert "no executed notebook" in _problems(root)


def test_an_executed_notebook_larger_than_a_chapter_is_not_read(tmp_path):
    (tmp_path / "jupyter_execute").mkdir()
    open(tmp_path / "jupyter_execute" / "ch.ipynb", "wb").truncate(MAX_NOTEBOOK + 1)  # sparse: nothing is read
    assert executed_problems(tmp_path, "ch", tmp_path) == (["ch: its executed notebook is over 200 MiB"], None)
