"""A class's assignments: the chapters as student notebooks, and a grader a student cannot fool from a notebook.

:func:`write_assignments` writes one notebook per chapter without solutions or outputs. :func:`grade` grades
``<submissions>/<student>/<chapter>.ipynb``: references come from a clean run of the teacher's copy with the answer
key; each submission runs alone in a fresh kernel without the key, its self-checks only noting answers
(``TOKENSEL_GRADES``), which are compared here, so a notebook can change nothing but its own answers.
Limit: a submission is code run on the grading machine; grade in a container when the class cannot be trusted."""

from __future__ import annotations

import ast
import csv
import json
import os
import tempfile
from pathlib import Path

from tokensel.errors import InvalidArgumentError, StorageError

from .exercises import GRADES_ENV, KEY_ENV, REFERENCES_ENV, load_key, number

TAG = "self-check"
MARK = ".tokensel-assignments"  # the folder was written by write_assignments: only such a folder is written over
FIELDS = ["student", "chapter", "exercise", "answer", "verdict", "flag", "error"]


def self_checks(source: str) -> list[dict]:
    """``{"exercise", "answers"}`` of each ``self_check("label", name=...)`` call in a code cell's source."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    return [
        {"exercise": n.args[0].value, "answers": [k.arg for k in n.keywords if k.arg not in (None, "given")]}
        for n in ast.walk(tree)
        if isinstance(n, ast.Call)
        and getattr(n.func, "attr", getattr(n.func, "id", None)) == "self_check"
        and n.args
        and isinstance(n.args[0], ast.Constant)
        and isinstance(n.args[0].value, str)
    ]


def assignment_notebook(notebook: dict, labels: dict, chapter: int | None = None) -> dict:
    """A chapter's notebook as a student's assignment: no solution, no output, self-check cells tagged."""
    from .notebooks import split_solutions, standalone_notebook

    rest, _ = split_solutions(notebook)
    nb = standalone_notebook(rest, labels, chapter)
    for cell in nb["cells"]:
        if cell.get("cell_type") == "code":
            cell["outputs"], cell["execution_count"] = [], None
            if self_checks(_text(cell["source"])):
                cell.setdefault("metadata", {})["tags"] = sorted({*cell["metadata"].get("tags", []), TAG})
    return nb


def _text(source) -> str:
    return "".join(source) if isinstance(source, list) else source


def prepare_folder(out: Path, mark: str) -> Path:
    """``out``, created, or emptied only when an earlier run of the same command made it (it holds ``mark``)."""
    import shutil

    out = Path(out)
    if out.exists() and (not out.is_dir() or (any(out.iterdir()) and not (out / mark).is_file())):
        raise StorageError(f"{str(out)!r} exists and was not written by this command: give a new or empty folder")
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    (out / mark).write_text("written by tokensel_book: removed and written again by the same command\n")
    return out


def write_assignments(root: Path, out: Path) -> list[Path]:
    """Write one assignment per numbered chapter of ``_toc.yml`` into ``out``, and ``out/README.md``."""
    import jupytext

    from .notebooks import bib_labels, collect_labels
    from .toc import page_source, toc_files, toc_numbers

    numbers = toc_numbers(root)
    pages = [p for p in toc_files(root) if p in numbers]
    notebooks = {p: json.loads(jupytext.writes(jupytext.read(page_source(root, p)), fmt="ipynb")) for p in pages}
    bib = Path(root) / "references.bib"
    labels = bib_labels(bib.read_text(encoding="utf-8")) if bib.is_file() else {}
    for p, nb in notebooks.items():
        labels |= collect_labels(nb, numbers[p], Path(p).name)
    out = prepare_folder(out, MARK)
    written = []
    for p, nb in notebooks.items():
        target = out / f"{Path(p).name}.ipynb"
        target.write_text(json.dumps(assignment_notebook(nb, labels, numbers[p]), indent=1) + "\n")
        written.append(target)
    (out / "README.md").write_text(README, encoding="utf-8")
    return written


README = """# Assignments

One notebook per chapter, without solutions. Each exercise that asks for numbers has a cell tagged `self-check`:
the student replaces each `None` by an answer and runs it. Collect the notebooks as
`SUBMISSIONS/<student>/<chapter>.ipynb` and, in the book's folder (the answer key is `book/answers.py`), run

    python -m tokensel_book grade ASSIGNMENTS SUBMISSIONS --out grades.csv

`grades.csv` has one row per student, chapter, exercise and answer: `right`, `not yet` or `missing`, a flag when
the student changed the parameters cell, and the error of a notebook that failed or ran out of time.
"""


def _parameters(nb) -> str | None:
    cells = [c for c in nb.cells if c.cell_type == "code" and "parameters" in c.metadata.get("tags", [])]
    return cells[0].source.strip() if cells else None


def run_notebook(nb, folder: Path, env: dict, timeout: int) -> str:
    """Execute ``nb`` in a fresh kernel in ``folder`` with ``env`` set; the first error, or empty."""
    from nbclient import NotebookClient
    from nbclient.exceptions import CellTimeoutError, DeadKernelError

    saved = dict(os.environ)
    os.environ.update(env)
    for k in (KEY_ENV, GRADES_ENV, REFERENCES_ENV):
        if k not in env:
            os.environ.pop(k, None)
    try:
        NotebookClient(
            nb, timeout=timeout, allow_errors=True, kernel_name="python3", resources={"metadata": {"path": str(folder)}}
        ).execute()
    except (CellTimeoutError, TimeoutError):
        return f"ran out of time ({timeout} s a cell)"
    except DeadKernelError as exc:
        return f"its kernel died ({exc})"[:200]
    finally:
        os.environ.clear()
        os.environ.update(saved)
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []) if o.output_type == "error"]
    return f"{errors[0].ename}: {errors[0].evalue}"[:200] if errors else ""


def _lines(path: Path) -> list[dict]:
    out = []
    for line in path.read_text(encoding="utf-8").splitlines() if path.is_file() else []:
        try:
            item = json.loads(line)
        except ValueError:
            continue
        if isinstance(item, dict) and isinstance(item.get("exercise"), str):
            out.append(item)
    return out


def references(assignment, key_path: Path, timeout: int) -> dict[str, dict]:
    """The references of every exercise, from a clean run of the teacher's copy with the answer key."""
    with tempfile.TemporaryDirectory(prefix="tokensel-key-") as folder:
        refs = Path(folder) / "references.jsonl"
        error = run_notebook(assignment, Path(folder), {KEY_ENV: str(key_path), REFERENCES_ENV: str(refs)}, timeout)
        found = {item["exercise"]: item["references"] for item in _lines(refs)}
    if error and not found:
        raise InvalidArgumentError(f"the teacher's copy does not run ({error}): write the assignments again")
    return found


def grade_submission(path: Path, assignment, refs: dict, timeout: int) -> tuple[dict, str, str]:
    """``(answers by exercise, flag, error)`` of one submission, run on its own."""
    import nbformat

    if not path.is_file():
        return {}, "", "unreadable: not a regular file"
    try:
        nb = nbformat.read(path, as_version=4)
        nbformat.validate(nb)
    except Exception as exc:  # noqa: BLE001 - any unreadable file is graded as such, and the class goes on
        return {}, "", f"unreadable: {type(exc).__name__}: {exc}"[:200]
    flag = "parameters changed" if _parameters(nb) != _parameters(assignment) else ""
    with tempfile.TemporaryDirectory(prefix="tokensel-grade-") as folder:
        answers = Path(folder) / "answers.jsonl"
        error = run_notebook(nb, Path(folder), {GRADES_ENV: str(answers)}, timeout)
        found: dict[str, dict] = {}
        for item in _lines(answers):  # written by the student's kernel: numbers by name, anything else dropped
            given = item.get("answers")
            numbers = {k: number(v) for k, v in given.items() if isinstance(k, str)} if isinstance(given, dict) else {}
            found.setdefault(item["exercise"], {}).update({k: v for k, v in numbers.items() if v is not None})
    return found, flag, error


def grade(root: Path, assignments: Path, submissions: Path, out: Path | None = None, timeout: int = 600) -> list[dict]:
    """Grade every ``<submissions>/<student>/<chapter>.ipynb`` against ``<assignments>/<chapter>.ipynb``."""
    import nbformat

    key_path = Path(os.environ.get(KEY_ENV) or Path(root) / "book" / "answers.py")
    key = load_key(key_path)
    if not key:
        raise InvalidArgumentError(f"no answer key at {str(key_path)!r}: grade in the book's folder")
    if not (Path(assignments) / MARK).is_file():
        raise InvalidArgumentError(f"{str(assignments)!r} was not written by `python -m tokensel_book assignments`")
    copies = {}
    for teacher in sorted(Path(assignments).glob("*.ipynb")):  # every teacher's copy read before any grading
        try:
            if not teacher.is_file():
                raise OSError("not a regular file")
            copies[teacher] = nbformat.read(teacher, as_version=4)
        except Exception as exc:  # noqa: BLE001 - any damage: the assignments are written again
            raise InvalidArgumentError(f"the teacher's copy {str(teacher)!r} cannot be read ({exc}): write the "
                                       "assignments again") from None  # fmt: skip
    rows = []
    for teacher, assignment in copies.items():
        checks = [c for cell in assignment.cells if cell.cell_type == "code" for c in self_checks(cell.source)]
        if not checks:
            continue
        refs = references(nbformat.from_dict(json.loads(json.dumps(assignment))), key_path, timeout)
        for student in sorted(p for p in Path(submissions).iterdir() if p.is_dir()):
            path = student / teacher.name
            answers: dict
            if not os.path.lexists(path):
                answers, flag, error = {}, "", "not handed in"
            else:
                answers, flag, error = grade_submission(path, assignment, refs, timeout)
            for check in checks:
                ex = key[check["exercise"]]
                for a in ex.answers:
                    value = answers.get(ex.label, {}).get(a.name)
                    ref = refs.get(ex.label, {}).get(a.name)
                    verdict = (
                        "missing"
                        if value is None
                        else "right"
                        if ref is not None and a.holds(value, ref)
                        else "not yet"
                    )
                    row = [student.name, teacher.stem, ex.label, a.name, verdict, flag, error]
                    rows.append(dict(zip(FIELDS, row, strict=True)))
    if out is not None:
        with open(out, "w", newline="", encoding="utf-8") as fh:
            writer = csv.DictWriter(fh, fieldnames=FIELDS)
            writer.writeheader()
            writer.writerows(rows)
    return rows
