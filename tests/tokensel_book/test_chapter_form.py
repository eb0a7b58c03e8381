"""Chapters read as chapters: at most a fifth of a chapter's code cells hide their input and never one with a
claim, each chapter has one ``parameters`` cell, claims read named fields and not the seed, and captions glue
the parameters they quote."""

import ast
import re
from pathlib import Path

import pytest

from tokensel_book.toc import toc_numbers

ROOT = Path(__file__).resolve().parents[2]
CELL = re.compile(r"^```\{code-cell\}[^\n]*\n(.*?)\n```$", re.S | re.M)


#: a chapter is one sitting: its narrative (before the closing Evidence section) at most about 2,500 words
NARRATIVE_WORDS = 2600


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
    problems += ["a cell with a claim hides its input" for c in hidden if re.search(r"\b(check|prove)\(", c)]
    if sum("parameters" in tags(c) for c in cells) != 1:
        problems.append("not exactly one parameters cell")
    body = text.split("\n---\n", 1)[-1] if text.startswith("---\n") else text
    narrative = re.sub(r"\$\$.*?\$\$", " ", CELL.sub(" ", body.split("\n## Evidence\n", 1)[0]), flags=re.S)
    if len(narrative.split()) > NARRATIVE_WORDS:
        problems.append(f"a narrative of {len(narrative.split())} words before its Evidence section")
    if "\n## Key points\n" not in body:
        problems.append("no Key points section")
    problems += [f"a caption says {m}: label the panels (a), (b)" for m in re.findall(r"\b(?:Left|Right)\b", "".join(
        re.findall(r"caption: \|?\n?(.*?)\n    name:", "\n".join(cells), re.S)))]  # fmt: skip
    return problems


@pytest.mark.parametrize("page", sorted(toc_numbers(ROOT)))
def test_each_chapter_reads_as_a_chapter(page):
    assert form_problems((ROOT / f"{page}.md").read_text(encoding="utf-8")) == []


def test_the_measurement_sees_a_hidden_claim_and_an_old_form():
    cell = "```{code-cell} ipython3\n%s\nx = 1\n```\n"
    good = cell % ":tags: [parameters]" + cell % "" * 3 + cell % ":tags: [hide-input]" + "\n## Key points\n"
    assert form_problems(good) == []
    assert "no Key points section" in form_problems(good.replace("Key points", "Summary"))
    assert any("words before its Evidence" in p for p in form_problems(good + "word " * 2600))
    assert form_problems(good + "\n## Evidence\n" + "word " * 3000) == []
    figure = "```{code-cell} ipython3\n---\nmystnb:\n  figure:\n    caption: |\n      Left: a. Right: b.\n"
    figure += "    name: f\n---\nx\n```\n"
    said = [f"a caption says {side}: label the panels (a), (b)" for side in ("Left", "Right")]
    assert [p for p in form_problems(good + figure) if "caption" in p] == said
    hidden_claim = good + (cell % ":tags: [hide-input]").replace("x = 1", 'tb.check("a", 1, at_least=0)')
    assert "a cell with a claim hides its input" in form_problems(hidden_claim)
    assert any("a fifth" in p for p in form_problems(hidden_claim))
    assert "not exactly one parameters cell" in form_problems(good.replace("parameters", "hide-input"))


def seed_in_claim_names(text: str) -> list[str]:
    """Claims whose text is filled from the seed: they would read differently from seed to seed."""
    found = []
    for cell in CELL.findall(text):
        try:
            tree = ast.parse(_cell_source(cell))
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "check":
                fields = [
                    k for k in node.keywords if k.arg not in ("at_least", "at_most", "close_to", "tol", "rel_tol")
                ]
                found += [
                    k.arg for k in fields if any(getattr(n, "id", None) == "seed" for n in ast.walk(k.value))
                ]  # a Name
    return found


@pytest.mark.parametrize("page", toc_numbers(ROOT))
def test_claim_names_do_not_depend_on_the_seed(page):
    """The replication matches a chapter's claims across seeds by name."""
    assert seed_in_claim_names((ROOT / f"{page}.md").read_text()) == []


def test_the_seed_scan_sees_a_seed_in_a_name():
    cell = '```{code-cell} ipython3\ntb.check("mass", x, at_least=0.5, at=seed + 1)\n```'
    assert seed_in_claim_names(cell) == ["at"]
    cell = '```{code-cell} ipython3\ntb.check("mass", x, at_least=seed, eta0=eta0)\n```'
    assert seed_in_claim_names(cell) == []


# ---- every claim links its statement, says where its threshold comes from, and reads no display label ------

#: every page that records claims: the numbered chapters, the landing page and the own-data page
CLAIM_PAGES = sorted(p.stem for p in (ROOT / "book").glob("*.md") if "tb.start_chapter(" in p.read_text())


def _cell_source(cell: str) -> str:
    """A code cell's Python: its YAML header (``---`` ... ``---``) and ``:tags:`` lines left out."""
    if cell.startswith("---\n"):
        cell = cell.split("\n---\n", 1)[1] if "\n---\n" in cell else ""
    return "\n".join(line for line in cell.split("\n") if not line.startswith(":"))


def _display_label(node) -> bool:
    """A subscript by a string that is not a field name (``t["U-gap of E_s p (std)"]``, ``t.loc["one layer", c]``)."""
    keys = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
    return any(isinstance(k, ast.Constant) and isinstance(k.value, str) and not k.value.isidentifier() for k in keys)


def claim_problems(text: str) -> list[str]:
    """Claims of ``text`` that read a value by a display label (a labelled row or column, a display string's test)."""
    problems = []
    for cell in CELL.findall(text):
        try:
            tree = ast.parse(_cell_source(cell))
        except SyntaxError as err:
            problems.append(f"a code cell does not parse: {err}")
            continue
        for node in ast.walk(tree):
            if not (
                isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", None)) == "check"
            ):
                continue
            name = ast.unparse(node.args[0])[:70] if node.args else "?"
            for arg in [*node.args[1:], *(k.value for k in node.keywords)]:
                for sub in ast.walk(arg):
                    if isinstance(sub, ast.Subscript) and _display_label(sub):
                        problems.append(f"{name}: reads a display label ({ast.unparse(sub)[:60]})")
                    if isinstance(sub, ast.Attribute) and sub.attr in ("startswith", "endswith"):
                        problems.append(f"{name}: tests a display string ({ast.unparse(sub)[:60]})")
    return problems


@pytest.mark.parametrize("page", CLAIM_PAGES)
def test_every_claim_reads_named_fields(page):
    assert claim_problems((ROOT / "book" / f"{page}.md").read_text(encoding="utf-8")) == []


def test_the_claim_scan_sees_a_display_label():
    cell = "```{code-cell} ipython3\n%s\n```"
    good = 'tb.check("a", t.gap["mlp"], at_least=0)'
    assert claim_problems(cell % good) == []
    assert claim_problems(cell % ("---\nmystnb:\n  figure:\n    name: f\n---\n" + good)) == []
    label = good.replace('t.gap["mlp"]', 't.loc["one layer", "U-gap (std)"]')
    assert claim_problems(cell % label) == ["'a': reads a display label (t.loc['one layer', 'U-gap (std)'])"]
    prefix = good.replace('t.gap["mlp"]', 't.at[0, "svm"].startswith("infeasible")')
    assert any("display string" in p for p in claim_problems(cell % prefix))


# ---- numbers in captions that depend on a parameter are computed (glued), not typed in -----------------------

#: a number in a caption that equals a parameter's value by coincidence: (page, number) -> what it is
CAPTION_COINCIDENCES = {
    ("07_beyond", 20.0): "the bin count of ts.shapes.binned (a library default), not the parameter strata = 20"
}


def typed_parameters(text: str) -> list[tuple[str, float]]:
    """Numbers typed into ``text``'s captions that equal a scalar parameter (not 0 or 1): stale once it changes."""
    params: dict[str, float] = {}
    for cell in CELL.findall(text):
        if re.search(r"^:tags: \[[^\]]*\bparameters\b", cell, re.M):
            for node in ast.parse(_cell_source(cell)).body:
                if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant):
                    value = node.value.value
                    if isinstance(value, (int, float)) and not isinstance(value, bool) and value not in (0, 1):
                        params[ast.unparse(node.targets[0])] = float(value)
    found = []
    for caption in re.findall(r"caption: \|\n((?:      .*\n)+)", text):
        for number in re.findall(r"(?<![\w.{`])(\d[\d,]*(?:\.\d+)?)(?![\w}`])", " ".join(caption.split())):
            x = float(number.replace(",", ""))
            found += [(name, x) for name, value in params.items() if x == value]
    return found


@pytest.mark.parametrize("page", CLAIM_PAGES)
def test_captions_glue_the_parameters_they_quote(page):
    found = typed_parameters((ROOT / "book" / f"{page}.md").read_text(encoding="utf-8"))
    assert [(name, x) for name, x in found if (page, x) not in CAPTION_COINCIDENCES] == []


def test_the_caption_and_credit_scans_see_a_typed_in_parameter_and_an_unsourced_protocol():
    page = (
        "```{code-cell} ipython3\n:tags: [parameters]\nd = 512  # width\nsteps = 300  # steps\n```\n"
        "```{code-cell} ipython3\n---\nmystnb:\n  figure:\n    caption: |\n      Trained at $d = 512$ for "
        "{glue:text}`steps` steps, 20 bins.\n    name: f\n---\nx = 1\n```\n"
    )
    assert typed_parameters(page) == [("d", 512.0)]
    assert typed_parameters(page.replace("$d = 512$", "$d$ = {glue:text}`d`")) == []
    said = ["We train 300 steps.", "The paper uses Adam.", "Figure 3 bins, as the paper does.", "$v$ is trained too."]
    assert unsourced_credits(" ".join(said) + " As the paper does.") == [said[1], "As the paper does."]
    assert unsourced_credits("The review discussion trains $v$, as the paper does; the paper gives no steps.") == []


SETTING = r"Adam|learning rates?|optimi[sz]ers?|epochs?|batch size|protocol|\d[\d,]* steps|trains? \$v\$"
SOURCE = r"\b(ours?|abstract|poster|discussion|Figures?|Section|Eq\.|Theorem|Lemmas?|not|nothing|none|no|nor)\b"


def unsourced_credits(text: str) -> list[str]:
    """Sentences (code cells aside) crediting the paper with a training setting but naming no source, nor ours."""
    prose = re.sub(r"\$\$.*?\$\$|`[^`]*`", " ", CELL.sub(" ", text), flags=re.S)
    said = (" ".join(s.split()) for s in re.split(r"(?<=[.;:!?])\s+(?=[A-Z(*])|\n\n", prose))
    credit = rf"(?=.*\b(the paper|the authors)\b).*\b({SETTING}|trained (?:jointly|together)|as (?:in )?the paper)\b"
    return [s for s in said if re.search(credit, s, re.I) and not re.search(SOURCE, s)]


@pytest.mark.parametrize("page", sorted(p.stem for p in (ROOT / "book").glob("*.md")))
def test_a_training_setting_credited_to_the_paper_names_its_source(page):
    assert unsourced_credits((ROOT / "book" / f"{page}.md").read_text(encoding="utf-8")) == []
