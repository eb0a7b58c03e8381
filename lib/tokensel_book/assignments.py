"""Assignments for a class: the chapters as student notebooks, and a grader that runs the students' notebooks.

:func:`write_assignments` (``make assignments``, ``python -m tokensel_book assignments``) writes one notebook per
chapter, ``<out>/<chapter>.ipynb``, from the chapters' sources: every solution taken out
(:func:`~tokensel_book.notebooks.split_solutions`), MyST turned into plain Markdown so that it opens anywhere
(:func:`~tokensel_book.notebooks.standalone_notebook`), no outputs. Each exercise's self-check cell (a call of
:func:`tokensel_book.exercises.self_check`) is tagged ``self-check`` and carries in its metadata
(``tokensel``) the exercise's label, the names of its answers and the chapter objects it is given.

:func:`grade` (``python -m tokensel_book grade``) grades a class: for each submitted notebook it executes the
student's notebook from the top in a fresh kernel, then, in that kernel, the self-check of every exercise of
the assignment *as the teacher's copy writes it*, reading the student's answer variables; each verdict
(``right``, ``not yet``, ``missing``) is read from the checks themselves (``TOKENSEL_GRADES``), not from the
outputs stored in the submission. The result is one CSV row per student, exercise and answer.

Layout of a class's submissions: ``<submissions>/<student>/<chapter>.ipynb`` (one folder per student).
"""

from __future__ import annotations

import ast
import csv
import json
import os
import tempfile
from pathlib import Path

from tokensel.errors import DataUnavailableError, InvalidArgumentError
from tokensel.files import check_regular_file

#: the cell tag of an exercise's self-check
TAG = "self-check"
#: the key of a self-check cell's metadata
KEY = "tokensel"


def self_checks(source: str) -> list[dict]:
    """The self-checks a code cell's ``source`` makes: ``{"exercise", "answers", "given"}`` for each call of
    ``self_check("label", name=..., given=...)`` (``given`` the source of its argument, or None)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    found = []
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and getattr(node.func, "attr", getattr(node.func, "id", None)) == "self_check"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            given = next((k.value for k in node.keywords if k.arg == "given"), None)
            found.append(
                {
                    "exercise": node.args[0].value,
                    "answers": [k.arg for k in node.keywords if k.arg and k.arg != "given"],
                    "given": ast.get_source_segment(source, given) if given is not None else None,
                }
            )
    return found


def assignment_notebook(notebook: dict, chapter: int | None = None) -> dict:
    """A chapter's notebook (nbformat 4 as a dict, e.g. read by jupytext from its ``.md``) as a student's
    assignment: no solution, plain Markdown, no outputs, self-check cells tagged (see the module)."""
    from .notebooks import split_solutions, standalone_notebook

    rest, _ = split_solutions(notebook)
    nb = standalone_notebook(rest, chapter=chapter)
    exercises = []
    for cell in nb["cells"]:
        if cell.get("cell_type") != "code":
            continue
        cell["outputs"], cell["execution_count"] = [], None
        source = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
        checks = self_checks(source)
        if checks:
            meta = cell.setdefault("metadata", {})
            meta["tags"] = sorted(set(meta.get("tags", [])) | {TAG})
            meta[KEY] = {"self_checks": checks}
            exercises += [c["exercise"] for c in checks]
    nb.setdefault("metadata", {})[KEY] = {"exercises": exercises}
    return nb


def write_assignments(root, out, pages: list[str] | None = None) -> list[Path]:
    """Write the assignment of every numbered chapter of ``_toc.yml`` (or of ``pages``) to ``out`` and return the
    paths; ``out/README.md`` says how to hand them out and grade them."""
    import jupytext

    from .toc import toc_numbers

    root, out = Path(root), Path(out)
    if not (root / "_toc.yml").is_file():
        raise InvalidArgumentError(f"root={str(root)!r} has no _toc.yml: pass the book's root folder")
    numbers = toc_numbers(root)
    pages = list(numbers) if pages is None else list(pages)
    unknown = [p for p in pages if p not in numbers]
    if unknown:
        raise InvalidArgumentError(f"pages {unknown} are not numbered chapters of _toc.yml ({sorted(numbers)})")
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for page in pages:
        source = root / f"{page}.md"
        if not source.is_file():
            raise DataUnavailableError(f"the chapter {page!r} has no source {str(source)!r}")
        notebook = json.loads(jupytext.writes(jupytext.read(source), fmt="ipynb"))
        target = out / f"{Path(page).name}.ipynb"
        target.write_text(
            json.dumps(assignment_notebook(notebook, numbers[page]), indent=1, ensure_ascii=False) + "\n",
            encoding="utf-8",
        )
        written.append(target)
    (out / "README.md").write_text(README, encoding="utf-8")
    return written


README = """# Assignments

One notebook per chapter, without solutions. Each exercise that asks for a number has a cell tagged
`self-check`: the student replaces each `None` by an answer and runs the cell, which says `right` or
`not yet` with a hint.

To grade a class, collect the notebooks as `SUBMISSIONS/<student>/<chapter>.ipynb` and run

    python -m tokensel_book grade ASSIGNMENTS SUBMISSIONS --out grades.csv

Each submission is executed from the top in a fresh kernel (it needs `tokensel` installed), then every
self-check of the assignment is run as this folder's copy writes it, on the student's answer variables.
`grades.csv` has one row per student, chapter, exercise and answer: `right`, `not yet` or `missing`.
"""


def _grading_cell(check: dict) -> dict:
    answers = ", ".join(f"{n}=globals().get({n!r})" for n in check["answers"])
    given = check["given"] or "None"
    source = (
        "import tokensel_book.exercises as _tokensel_exercises\n"
        f"try:\n    _tokensel_given = {given}\nexcept NameError:\n    _tokensel_given = None\n"
        f"_tokensel_exercises.self_check({check['exercise']!r}, given=_tokensel_given"
        + (f", {answers}" if answers else "")
        + ")\n"
    )
    return {"cell_type": "code", "metadata": {}, "source": source, "outputs": [], "execution_count": None}


def grade_notebook(assignment: dict, submission: dict, workdir, timeout: int = 1800) -> list[dict]:
    """Execute ``submission`` (a student's notebook) and then the self-checks of ``assignment`` (the teacher's
    copy) in one fresh kernel; one row per exercise and answer: ``exercise``, ``answer``, ``verdict``
    (``right``, ``not yet``, ``missing`` when the answer is None or the check could not run) and ``error``
    (the first error of the student's cells, or empty)."""
    import nbformat
    from nbclient import NotebookClient

    checks = _self_checks_of(assignment)
    nb = nbformat.from_dict(submission)
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    grades = workdir / "grades.jsonl"
    saved = {k: os.environ.get(k) for k in ("TOKENSEL_GRADES", "TOKENSEL_CLAIMS", "TOKENSEL_RESULTS_DIR")}
    os.environ.update(
        TOKENSEL_GRADES=str(grades), TOKENSEL_CLAIMS="report", TOKENSEL_RESULTS_DIR=str(workdir / "checks")
    )
    first_error = ""
    try:
        client = NotebookClient(
            nb,
            timeout=timeout,
            allow_errors=True,
            kernel_name="python3",
            resources={"metadata": {"path": str(workdir)}},
        )
        with client.setup_kernel():
            for index, cell in enumerate(nb.cells):
                if cell.cell_type != "code":
                    continue
                client.execute_cell(cell, index)
                error = next((o for o in cell.get("outputs", []) if o.get("output_type") == "error"), None)
                if error and not first_error:
                    first_error = f"{error.get('ename')}: {error.get('evalue')}"[:200]
            grades.write_text("", encoding="utf-8")  # only the grader's own checks count
            for check in checks:
                cell = nbformat.from_dict(_grading_cell(check))
                nb.cells.append(cell)
                client.execute_cell(cell, len(nb.cells) - 1)
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    verdicts: dict[str, dict] = {}
    if grades.is_file():
        for line in grades.read_text(encoding="utf-8").splitlines():
            rec = json.loads(line)
            verdicts[rec["exercise"]] = rec["answers"]
    rows = []
    for check in checks:
        got = verdicts.get(check["exercise"], {})
        for name in check["answers"]:
            verdict = got.get(name, "missing")
            rows.append(
                {
                    "exercise": check["exercise"],
                    "answer": name,
                    "verdict": verdict,
                    "error": first_error,
                }
            )
    return rows


def _self_checks_of(notebook: dict) -> list[dict]:
    """The self-checks an assignment notebook's tagged cells carry (see :func:`assignment_notebook`)."""
    return [
        c
        for cell in notebook.get("cells", [])
        if isinstance(cell, dict)
        for c in ((cell.get("metadata") or {}).get(KEY) or {}).get("self_checks", [])
    ]


def _read_notebook(path: Path, what: str) -> dict:
    """The notebook at ``path`` as a dict with a list of cells; anything else (a folder, a FIFO, which would
    block the reader, a dangling link, an unreadable file, invalid UTF-8 or JSON, JSON that is not a notebook)
    raises :class:`DataUnavailableError` naming ``what`` it is, in one line and without opening a non-file."""
    check_regular_file(path, what, DataUnavailableError)
    try:
        notebook = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:  # ValueError: invalid UTF-8 or JSON
        raise DataUnavailableError(f"{what} {str(path)!r} cannot be read as a notebook ({exc})") from exc
    if not isinstance(notebook, dict) or not isinstance(notebook.get("cells"), list):
        raise DataUnavailableError(f"{what} {str(path)!r} is not a notebook (no list of cells)")
    return notebook


def _teacher_copy(path: Path) -> tuple[dict, list[dict]]:
    """The teacher's copy at ``path`` and its self-checks; a copy that cannot be read, or whose self-checks
    are not those :func:`assignment_notebook` writes, raises :class:`DataUnavailableError`: the assignments
    must be written again, and no student is graded against a broken copy."""
    assignment = _read_notebook(path, "the assignment")
    try:
        checks = _self_checks_of(assignment)
        valid = all(
            isinstance(c["exercise"], str) and all(isinstance(n, str) and n.isidentifier() for n in c["answers"])
            for c in checks
        )
    except (AttributeError, KeyError, TypeError):
        valid = False
    if not valid:
        raise DataUnavailableError(
            f"the assignment {str(path)!r} has malformed self-check metadata: run `make assignments` again"
        )
    return assignment, checks


def grade(assignments, submissions, out=None, timeout: int = 1800) -> list[dict]:
    """Grade every ``<submissions>/<student>/<chapter>.ipynb`` against ``<assignments>/<chapter>.ipynb``
    (:func:`grade_notebook`); rows ``student, chapter, exercise, answer, verdict, error``, written to the CSV
    file ``out`` when given.

    Every path is checked before it is read, and before any notebook is executed: a teacher's copy that is
    not a readable notebook, or a student folder that cannot be listed, raises :class:`DataUnavailableError`
    (nothing is graded); a submission that is not a readable notebook (a folder, a FIFO, which is never
    opened, a dangling link, an unreadable file, invalid JSON) is graded ``missing``, its error
    ``unreadable: ...`` naming why."""
    assignments, submissions = Path(assignments), Path(submissions)
    if not assignments.is_dir() or not any(assignments.glob("*.ipynb")):
        raise InvalidArgumentError(
            f"assignments={str(assignments)!r} holds no assignment notebooks: run `make assignments`"
        )
    if not submissions.is_dir():
        raise InvalidArgumentError(f"submissions={str(submissions)!r} is not a folder of <student>/<chapter>.ipynb")
    work: list[tuple[str, Path, Path]] = []
    try:
        students = sorted(p for p in submissions.iterdir() if p.is_dir())
    except OSError as exc:
        raise DataUnavailableError(
            f"submissions={str(submissions)!r} cannot be listed ({exc.strerror or exc})"
        ) from exc
    for student in students:
        if not os.access(student, os.R_OK | os.X_OK):
            raise DataUnavailableError(
                f"the student folder {str(student)!r} cannot be listed (permissions): make it readable"
            )
        for path in sorted(student.glob("*.ipynb")):
            teacher = assignments / path.name
            if os.path.lexists(teacher):  # a submission for no assignment is not graded
                work.append((student.name, path, teacher))
    teachers = {teacher: _teacher_copy(teacher) for _, _, teacher in work}
    rows = []
    for student_name, path, teacher in work:
        assignment, checks = teachers[teacher]
        try:
            submission = _read_notebook(path, "the submission")
            with tempfile.TemporaryDirectory(prefix="tokensel-grade-") as folder:
                graded = grade_notebook(assignment, submission, folder, timeout=timeout)
        except (DataUnavailableError, ValueError, KeyError, TypeError) as exc:
            graded = [
                {"exercise": c["exercise"], "answer": n, "verdict": "missing", "error": f"unreadable: {exc}"[:200]}
                for c in checks
                for n in c["answers"]
            ]
        rows += [{"student": student_name, "chapter": path.stem, **r} for r in graded]
    if out is not None:
        out = Path(out)
        out.parent.mkdir(parents=True, exist_ok=True)
        with open(out, "w", newline="", encoding="utf-8") as f:
            writer = csv.DictWriter(f, fieldnames=["student", "chapter", "exercise", "answer", "verdict", "error"])
            writer.writeheader()
            writer.writerows(rows)
    return rows
