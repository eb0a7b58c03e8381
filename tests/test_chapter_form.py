"""Chapters read as chapters (issue 23 item 6): at most a fifth of a chapter's code cells hide their input and
never one with a claim, every claim says its comparison by keyword (``at_least=``, ``at_most=``,
``close_to=`` with ``tol=`` or ``rel_tol=``, or ``check(name, flag)``), and each chapter has one ``parameters``
cell. Chapters not yet rewritten are listed in :data:`PENDING`; a pending chapter that passes must leave the
list, so it only shrinks."""

import re
from pathlib import Path

import pytest

from tokensel.book.toc import toc_numbers

ROOT = Path(__file__).resolve().parents[1]
#: chapters not yet rewritten to this form (the test checks that each still fails, so the list only shrinks)
PENDING: set[str] = set()
CELL = re.compile(r"^```\{code-cell\}[^\n]*\n(.*?)\n```$", re.S | re.M)


def form_problems(text: str) -> list[str]:
    """What keeps the MyST notebook ``text`` from reading as a chapter (see the module)."""
    cells = CELL.findall(text)
    if not cells:
        return ["no code cells"]

    def tags(cell):
        head = cell.split("\n---\n", 1)[0] if cell.startswith("---\n") else cell.split("\n", 1)[0]
        found = re.search(r"tags:\s*\[([^\]]*)\]", head)
        return {t.strip() for t in found.group(1).split(",")} if found else set()

    hidden = [c for c in cells if "hide-input" in tags(c)]
    problems = []
    if len(hidden) * 5 > len(cells):
        problems.append(f"{len(hidden)} of {len(cells)} code cells hide their input (at most a fifth)")
    problems += ["a cell with a claim hides its input" for c in hidden if re.search(r"\bcheck\(", c)]
    if re.search(r"\bkind\s*=", text):
        problems.append("a claim written with kind= (say the comparison by keyword)")
    if sum("parameters" in tags(c) for c in cells) != 1:
        problems.append("not exactly one parameters cell")
    return problems


@pytest.mark.parametrize("page", sorted(toc_numbers(ROOT)))
def test_each_chapter_reads_as_a_chapter(page):
    problems = form_problems((ROOT / f"{page}.md").read_text(encoding="utf-8"))
    if page in PENDING:
        assert problems, f"{page} now reads as a chapter: take it out of PENDING"
    else:
        assert not problems, problems


def test_the_measurement_sees_a_hidden_claim_and_an_old_form():
    cell = "```{code-cell} ipython3\n%s\nx = 1\n```\n"
    good = cell % ":tags: [parameters]" + cell % "" * 3 + cell % ":tags: [hide-input]"
    assert form_problems(good) == []
    hidden_claim = good + (cell % ":tags: [hide-input]").replace("x = 1", 'ts.check("a", 1, at_least=0)')
    assert "a cell with a claim hides its input" in form_problems(hidden_claim)
    assert any("a fifth" in p for p in form_problems(hidden_claim))
    assert any("kind=" in p for p in form_problems(good.replace("x = 1", "ts.check('a', 1, 0, kind='ge')", 1)))
    assert "not exactly one parameters cell" in form_problems(good.replace("parameters", "hide-input"))


def seed_in_claim_names(text: str) -> list[str]:
    """Claims whose name is an f-string that formats ``seed`` (or ``seed + k``): such a name differs from one
    seed to the next, so a replication sees a new claim at every seed instead of one claim held at some."""
    import ast

    found = []
    for cell in CELL.findall(text):
        source = "\n".join(line for line in cell.split("\n") if not line.startswith(("---", "tags:", ":tags:")))
        try:
            tree = ast.parse(source)
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", None)) == "check":
                name = node.args[0] if node.args else None
                if isinstance(name, ast.JoinedStr) and any(
                    isinstance(n, ast.Name) and n.id == "seed" for n in ast.walk(name)
                ):
                    found.append(ast.unparse(name)[:80])
    return found


@pytest.mark.parametrize("page", toc_numbers(ROOT))
def test_claim_names_do_not_depend_on_the_seed(page):
    """The replication matches a chapter's claims across seeds by name."""
    assert seed_in_claim_names((ROOT / f"{page}.md").read_text()) == []


def test_the_seed_scan_sees_a_seed_in_a_name():
    cell = '```{code-cell} ipython3\nts.check(f"mass at seed {seed}", x, at_least=0.5)\n```'
    assert seed_in_claim_names(cell) == ["f'mass at seed {seed}'"]
    cell = '```{code-cell} ipython3\nts.check(f"mass at eta0 = {eta0}", x, at_least=0.5)\n```'
    assert seed_in_claim_names(cell) == []
