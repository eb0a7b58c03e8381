"""tokensel_book.student: the executed book without the exercises' solutions (crafted notebooks here; the built
edition, its pages, downloads, search index and PDF, with ``--browser`` after `make book-student`)."""

from __future__ import annotations

import json
import re
import urllib.request
from pathlib import Path

import pytest
import yaml
from conftest import code_cell, md_cell, notebook, stream

from tokensel.errors import DataUnavailableError, InvalidArgumentError
from tokensel_book import student as st
from tokensel_book.toc import reader_pages, toc_files, toc_numbers

ROOT = Path(__file__).resolve().parents[2]
FULL = ROOT / "_build" / "html"
STUDENT = ROOT / "_build" / "student" / "_build" / "html"


def test_student_notebook_takes_every_solution_out_and_stores_streams_once():
    nb = notebook(
        md_cell(
            "````{exercise} Core: x\n:label: ex-x\nDo it.\n````\n\n````{solution} ex-x\n:class: dropdown\n"
            "The plain answer is forty two.\n````\n\n````{solution-start} ex-x\n:class: dropdown\n````\n\n"
            "The answer:\n"
        ),
        code_cell('answer = 42\ntb.check("exercise-answer", answer, close_to=42, tol=0)'),
        md_cell("so 42.\n\n````{solution-end}\n````\n\nAfter the solution.\n"),
        code_cell("print('kept')", [stream("a\nb\n"), stream("b\n")]),
    )
    out, solutions = st.student_notebook(nb)
    text = json.dumps(out)
    assert "ex-x" in text and "Do it." in text and "After the solution." in text and "kept" in text
    assert "{solution" not in text and "forty two" not in text and "answer = 42" not in text and "so 42" not in text
    assert out["cells"][-1]["outputs"] == [stream("a\nb\n")]
    assert st.solution_claims(solutions) == ["exercise-answer"]
    assert len(nb["cells"]) == 4  # the input is not changed
    proved = [{"label": "ex-p", "code": ["%time x = 1\ntb.prove('exercise-proof', 0)"]}]
    assert st.solution_claims(proved) == ["exercise-proof"]
    with pytest.raises(InvalidArgumentError, match="ex-q: a claim's id must be a string literal"):
        st.solution_claims([{"label": "ex-q", "code": ["name = 'exercise-x'\ntb.check(name, 1, 1, tol=0)"]}])


def test_drop_claims_removes_the_exercises_rows_of_the_status_page():
    table = (
        '<table><tr data-claim="02_one_step/corr"><td>one step: corr</td><td>0.998958</td></tr>'
        '<tr data-claim="02_one_step/exercise-err"><td>exercise: err</td><td>0.0117035</td></tr></table>'
    )
    output = {"output_type": "display_data", "data": {"text/html": table, "text/plain": "x"}, "metadata": {}}
    out, removed = st.drop_claims(notebook(code_cell("HTML(...)", [output])), ["exercise-err"])
    text = json.dumps(out)
    assert "0.0117035" not in text and "exercise: err" not in text and removed == 1
    assert "one step: corr" in text and "0.998958" in text


def test_leak_evidence_finds_a_solution_wherever_it_is_and_nothing_else():
    nb = notebook(
        md_cell(
            "# Ch\n\nThe rate goes up with more irrelevant tokens in the data.\n\n"
            "````{exercise} Core: x\n:label: ex-x\nPredict how the rate changes with more tokens.\n````\n\n"
            "````{solution} ex-x\nThe rate goes up with more irrelevant tokens in the data; "
            "each token needs its own score below every important one, so $p_{mm}$ grows "
            "to $2.39$.\n````\n\n````{solution-start} ex-x\n````\n"
        ),
        code_cell(
            "tb.check('exercise-rate', rate2, close_to=svm2.norm, rel_tol=0.05)", [stream("rate 2.4123 (0.5 s)\n")]
        ),
        md_cell("````{solution-end}\n````\n"),
    )
    claims = [
        dict(id="exercise-rate", measured=2.41234567, expected=2.3871),
        dict(id="other", measured=9.87654, expected=1.0),
    ]
    evidence = st.leak_evidence([nb], claims)
    assert "each token needs its own score below every important one" in evidence["phrases"]
    assert not any("rate goes up" in p for p in evidence["phrases"])  # also in the chapter's own text
    assert {"2.39", "2.4123", "2.41235", "2.3871"} <= set(evidence["values"]) and "9.87654" not in evidence["values"]
    assert evidence["claims"] == ["exercise-rate"]
    student, _ = st.student_notebook(nb)
    assert st.find_leaks(json.dumps(student), evidence) == []
    page = "<p>Each token needs its own <em>score</em> below&nbsp;every\nimportant one</p><td>2.41235</td>"
    phrase = "phrase 'each token needs its own score below every important one'"
    assert st.find_leaks(page, evidence) == [phrase, "value 2.41235"]
    assert st.find_leaks("12.41235 and 2.412351", evidence) == []  # a number inside another is no match


def test_student_config_executes_nothing_and_hides_solutions():
    full = yaml.safe_load((ROOT / "_config.yml").read_text())
    cfg = st.student_config(full)
    assert cfg["execute"]["execute_notebooks"] == "off"
    assert cfg["sphinx"]["config"]["hide_solutions"] is True
    assert "student edition" in cfg["title"]
    assert not any(p.endswith(".ipynb") for p in cfg["exclude_patterns"])
    assert full["execute"]["execute_notebooks"] == "cache"  # not changed
    assert cfg["sphinx"]["extra_extensions"] == full["sphinx"]["extra_extensions"]
    pytest.raises(InvalidArgumentError, lambda: st.student_config({"title": "x"})).match("config")


def _book(tmp_path, pages=("book/intro", "book/ch")):
    root = tmp_path / "root"
    (root / "book").mkdir(parents=True)
    config = dict(title="t", execute={"execute_notebooks": "force"}, exclude_patterns=["**/*.ipynb"], sphinx={})
    (root / "_config.yml").write_text(yaml.safe_dump(config | {"sphinx": {"config": {}}}))
    toc = {"format": "jb-book", "root": pages[0], "chapters": [{"file": p} for p in pages[1:]]}
    (root / "_toc.yml").write_text(yaml.safe_dump(toc))
    for p in pages:
        (root / f"{p}.md").write_text("---\nkernelspec:\n  name: python3\nsummary: s\n---\n# T\n")
    return root


def test_prepare_student_sources_uses_the_executed_notebooks(tmp_path):
    root = _book(tmp_path)
    (root / "book" / "notes.md").write_text("---\nsummary: s\n---\n# Notes\n")
    built = tmp_path / "built"
    with pytest.raises(DataUnavailableError, match="make book"):
        st.prepare_student_sources(root, built, tmp_path / "out")
    (built / "jupyter_execute" / "book").mkdir(parents=True)
    rows = '<tr data-claim="ch/exercise-e"><td>1.23456</td></tr><tr data-claim="ch/kept"><td>2</td></tr>'
    status = code_cell("table", [{"output_type": "display_data", "data": {"text/html": rows}, "metadata": {}}])
    (built / "jupyter_execute" / "book" / "intro.ipynb").write_text(json.dumps(notebook(md_cell("# T\n"), status)))
    with pytest.raises(DataUnavailableError, match="book/ch"):  # a code page that was not executed
        st.prepare_student_sources(root, built, tmp_path / "out")
    check = code_cell("tb.check('exercise-e', 1.23456, close_to=1.0, tol=0.5)")
    ch = notebook(md_cell("# Ch\n````{solution-start} ex\n````\n"), check, md_cell("````{solution-end}\n````\n"))
    (built / "jupyter_execute" / "book" / "ch.ipynb").write_text(json.dumps(ch))
    pytest.raises(InvalidArgumentError, lambda: st.prepare_student_sources(root, built, built)).match("out")
    pytest.raises(InvalidArgumentError, lambda: st.prepare_student_sources(root, built, tmp_path)).match("out")
    out = st.prepare_student_sources(root, built, tmp_path / "out")
    assert sorted(p.name for p in (out / "book").iterdir()) == ["ch.ipynb", "intro.ipynb"]
    assert yaml.safe_load((out / "_config.yml").read_text())["sphinx"]["config"]["hide_solutions"] is True
    cells = json.loads((out / "book" / "ch.ipynb").read_text())["cells"]
    assert [c["cell_type"] for c in cells] == ["markdown"] and "solution" not in cells[0]["source"]
    intro = json.loads((out / "book" / "intro.ipynb").read_text())  # a page that lists the exercise's check
    assert intro["cells"][1]["outputs"][0]["data"]["text/html"] == '<tr data-claim="ch/kept"><td>2</td></tr>'
    st.prepare_student_sources(root, built, out)  # its own folder: written again
    with pytest.raises(InvalidArgumentError, match="root"):
        st.prepare_student_sources(tmp_path / "nothing", built, tmp_path / "out2")


def _count(page: Path, cls: str) -> int:
    return len(re.findall(rf'class="{cls}\b[^"]*admonition', page.read_text(encoding="utf-8")))


@pytest.mark.browser
def test_the_student_edition_has_every_exercise_and_no_solution():
    if not STUDENT.is_dir():
        pytest.fail(f"no student edition at {STUDENT}: run `make book-student` first")
    chapters = [p for p in toc_files(ROOT) if p in toc_numbers(ROOT)]
    problems = []
    for page in chapters:
        full, student = FULL / f"{page}.html", STUDENT / f"{page}.html"
        exercises = _count(student, "exercise")
        if exercises < 3 or exercises != (in_full := _count(full, "exercise")):
            problems.append(f"{page}: {exercises} exercises in the student edition, {in_full} in the book")
        if _count(student, "solution") or "Solution to" in student.read_text(encoding="utf-8"):
            problems.append(f"{page}: a solution is shown in the student edition")
        if _count(full, "solution") < 3:
            problems.append(f"{page}: the full book shows {_count(full, 'solution')} solutions (3 or more expected)")
        figures = [len(re.findall(r"<img\b", p.read_text(encoding="utf-8"))) for p in (full, student)]
        if figures[1] < figures[0]:
            problems.append(f"{page}: {figures[1]} figures in the student edition, {figures[0]} in the book")
    assert not problems, "\n".join(problems)


def test_every_chapter_has_a_warm_up_a_core_and_a_challenge_each_with_a_solution():
    problems = []
    for page in toc_numbers(ROOT):
        text = (ROOT / f"{page}.md").read_text(encoding="utf-8")
        exercises = re.findall(
            r"^(`{3,}|:{3,})\{exercise\}\s*(Warm-up|Core|Challenge)\b.*\n:label:\s*(\S+)", text, re.M
        )
        grades = {g for _, g, _ in exercises}
        if grades != {"Warm-up", "Core", "Challenge"}:
            problems.append(f"{page}: exercises graded {sorted(grades)}")
        solved = set(re.findall(r"^(?:`{3,}|:{3,})\{solution(?:-start)?\}\s*(\S+)", text, re.M))
        problems += [f"{page}: {label} has no solution" for _, _, label in exercises if label not in solved]
    assert not problems, "\n".join(problems)


def _artefact_text_of(nb: dict) -> str:
    parts = []
    for cell in nb.get("cells", []):
        parts.append("".join(cell.get("source", "")))
        for out in cell.get("outputs") or []:
            parts.append("".join(out.get("text", "")))
            parts += ["".join(v) for k, v in (out.get("data") or {}).items() if k.startswith("text/")]
    return "\n".join(parts)


def _artefact_text(path: Path) -> str:
    """The text of one file of a built edition as a reader or a tool sees it (a notebook's cells and outputs)."""
    text = path.read_text(encoding="utf-8", errors="replace")
    if path.name.endswith((".ipynb", ".ipynb.txt")):
        try:
            return _artefact_text_of(json.loads(text))
        except (ValueError, AttributeError):
            return text
    return text


def _solution_evidence() -> dict:
    """What would betray a solution (leak_evidence), from the executed full book, less what other pages show."""
    if not STUDENT.is_dir():
        pytest.fail(f"no student edition at {STUDENT}: run `make book-student` first")
    executed = ROOT / "_build" / "jupyter_execute"
    chapters = [json.loads((executed / f"{p}.ipynb").read_text(encoding="utf-8")) for p in toc_numbers(ROOT)]
    _, solutions = zip(*(st.student_notebook(nb) for nb in chapters), strict=True)
    exercise_checks = st.solution_claims([s for found in solutions for s in found])
    elsewhere = []
    for page in toc_files(ROOT):
        if page in toc_numbers(ROOT):
            continue
        if (nb := executed / f"{page}.ipynb").is_file():
            elsewhere.append(
                _artefact_text_of(st.drop_claims(json.loads(nb.read_text(encoding="utf-8")), exercise_checks)[0])
            )
        else:
            elsewhere.append((ROOT / f"{page}.md").read_text(encoding="utf-8"))
    claims = json.loads((ROOT / "_build" / "downloads" / "claims.json").read_text())
    return st.leak_evidence(chapters, claims, elsewhere=elsewhere)


@pytest.mark.browser
def test_no_artefact_of_the_student_edition_holds_a_solution(tmp_path):
    """No file of the student edition, nor its PDF, holds a solution's phrases, values or check names."""
    from test_pdf import check_printed_book

    from tokensel_book.pdf import print_book

    evidence = _solution_evidence()
    print(f"evidence: {len(evidence['phrases'])} phrases, {len(evidence['values'])} values, {len(evidence['claims'])}")
    assert len(evidence["phrases"]) >= 20 and evidence["values"] and evidence["claims"]
    # the search finds them where they are: the full book's chapter pages show every solution
    texts = [(FULL / f"{p}.html").read_text(encoding="utf-8") for p in toc_numbers(ROOT)]
    in_full = [h for page in texts for h in st.find_leaks(page, evidence)]
    assert len(in_full) >= len(evidence["phrases"]) // 3, f"only {len(in_full)} pieces of evidence in the full book"
    problems = []
    for path in sorted(STUDENT.rglob("*")):
        if "_static" in path.parts:  # the theme's and MathJax's files, not the book's
            continue
        if path.is_file() and path.suffix in (".html", ".txt", ".ipynb", ".js", ".json", ".md"):
            problems += [f"{path.relative_to(STUDENT)}: {hit}" for hit in st.find_leaks(_artefact_text(path), evidence)]
    pages = reader_pages(ROOT)  # the reader's pages: the API folder pages stay out
    out = print_book(STUDENT, tmp_path / "student.pdf", pages, profile_dir=tmp_path)
    problems += [f"student PDF: {hit}" for hit in st.find_leaks(check_printed_book(out, pages), evidence)]
    assert not problems, f"{len(problems)} solution pieces in the student edition:\n" + "\n".join(problems[:40])


#: what a reader sees of a page once every dropdown and toggled cell is open (``tokensel_book.pdf.OPEN_ALL``)
SHOWN_TEXT = "return document.querySelector('main, article, body').innerText;"


@pytest.mark.browser
def test_a_reader_of_the_student_edition_sees_no_solution_at_desktop_and_phone_width(tmp_path):
    """With every dropdown open at 1400 and 400 px, no student page or download shows a solution; the book does."""

    from tokensel_book.notebooks import standalone_problems
    from tokensel_book.pdf import OPEN_ALL, WAIT_FOR_MATH, chromium, serve

    evidence = _solution_evidence()
    chapters = list(toc_numbers(ROOT))

    def shown(driver, url: str, width: int) -> tuple[str, list[str]]:
        driver.set_window_size(width, 1000)
        driver.get(url)
        if driver.execute_script("return document.querySelectorAll('span.math, div.math').length"):
            driver.execute_async_script(WAIT_FOR_MATH)
        driver.execute_script(OPEN_ALL)
        links = driver.execute_script("return Array.from(document.querySelectorAll('a[href]')).map((a) => a.href);")
        return driver.execute_script(SHOWN_TEXT), links

    problems, seen_in_full = [], {}
    with chromium(tmp_path) as driver:
        with serve(FULL) as base:
            for width in (1400, 400):
                text, _ = shown(driver, f"{base}{chapters[0]}.html", width)
                seen_in_full[width] = len(st.find_leaks(text, evidence))
        with serve(STUDENT) as base:
            for width in (1400, 400):
                for page in chapters:
                    text, links = shown(driver, f"{base}{page}.html", width)
                    problems += [f"{width} px, {page}: {hit}" for hit in st.find_leaks(text, evidence)]
                    nb = [link for link in links if link.endswith(f"_sources/{page}.ipynb")]
                    if not nb:
                        problems.append(f"{width} px, {page}: no .ipynb in the download menu")
                        continue
                    with urllib.request.urlopen(nb[0], timeout=30) as resp:
                        notebook = json.loads(resp.read().decode("utf-8"))
                    problems += [f"{width} px, {page} download: {p}" for p in standalone_problems(notebook)]
                    hits = st.find_leaks(_artefact_text_of(notebook), evidence)
                    problems += [f"{width} px, {page} download: {hit}" for hit in hits]
    print(f"solution evidence the control shows in the full book's {chapters[0]}: {seen_in_full}")
    assert all(seen_in_full.values()), f"the control found no solution in the full book: {seen_in_full}"
    assert not problems, f"{len(problems)} problems:\n" + "\n".join(problems[:40])
