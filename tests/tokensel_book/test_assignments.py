"""tokensel_book.assignments and exercises: hand-outs without answers, and a grader that grades notebooks saved by
Jupyter, each on its own, and cannot be fooled from inside a notebook."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from conftest import MYST_FRONT_MATTER, write_book

from tokensel.errors import InvalidArgumentError, StorageError
from tokensel_book import exercises
from tokensel_book.assignments import MARK, TAG, grade, prepare_folder, write_assignments

CHAPTER = (
    MYST_FRONT_MATTER
    + """# A chapter

````{prf:lemma} Sums
:label: lem-sum
Sums add up.
````

```{code-cell} ipython3
import numpy as np
import tokensel_book as tb
```

```{code-cell} ipython3
:tags: [parameters]
seed = 0
```

```{code-cell} ipython3
data = np.random.default_rng(seed).random(3)
```

````{exercise} Warm-up: a sum
:label: ex-sum
Add up `data` (see {prf:ref}`lem-sum`).
````

```{code-cell} ipython3
x = None
tb.self_check("ex-sum", x=x, given=dict(data=data))
```

````{solution} ex-sum
It is `data.sum()`.
````
"""
)
KEY = """from tokensel_book.exercises import Answer, exercise


@exercise("ex-sum", Answer("x", "add the three numbers of data", tol=1e-9), given=("data",))
def _sum(given, answers):
    return {"x": float(given["data"].sum())}
"""


@pytest.fixture
def book(tmp_path, monkeypatch):
    write_book(tmp_path, "01_sums", CHAPTER)
    (tmp_path / "book" / "answers.py").write_text(KEY)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(exercises, "_KEYS", {})
    return tmp_path


def test_an_assignment_has_no_solution_no_raw_myst_and_a_tagged_self_check(book):
    [path] = write_assignments(book, book / "out")
    nb = json.loads(path.read_text())
    text = "".join(c["source"] if isinstance(c["source"], str) else "".join(c["source"]) for c in nb["cells"])
    assert "data.sum()" not in text and "{prf:ref}" not in text and "Lemma 1.1" in text
    assert [c for c in nb["cells"] if TAG in c.get("metadata", {}).get("tags", [])]
    assert (book / "out" / MARK).is_file()


def test_a_folder_is_written_over_only_when_the_command_made_it(tmp_path):
    (tmp_path / "thesis").mkdir()
    (tmp_path / "thesis" / "_toc.yml").write_text("root: x\n")
    pytest.raises(StorageError, lambda: prepare_folder(tmp_path / "thesis", MARK)).match("not written by this command")
    assert (tmp_path / "thesis" / "_toc.yml").is_file()
    prepare_folder(tmp_path / "mine", MARK)
    (tmp_path / "mine" / "old").write_text("x")
    prepare_folder(tmp_path / "mine", MARK)
    assert not (tmp_path / "mine" / "old").exists()


def test_without_the_key_a_self_check_notes_the_answers_and_the_package_holds_no_reference(
    book, capsys, tmp_path_factory
):
    import tokensel_book

    key = (Path(__file__).parents[2] / "book" / "answers.py").read_text()
    labels = set(re.findall(r'"(ex-[a-z0-9-]+)"', key))
    package = "".join(p.read_text() for p in Path(tokensel_book.__file__).parent.glob("*.py"))
    assert labels and not any(label in package for label in labels)  # no exercise of the book in the package
    os.chdir(tmp_path_factory.mktemp("elsewhere"))  # outside the book: no answer key
    assert exercises.self_check("ex-sum", x=1.5) is None
    assert "answers noted (x = 1.5)" in capsys.readouterr().out


#: the metadata each editor adds to a notebook it saves
LAB = {"language_info": {"name": "python", "version": "3.11.7"}}
EDITORS = dict(
    lab=LAB, classic={"toc": {"number_sections": True}}, vscode={"vscode": {"interpreter": {"hash": "ab12"}}}
)


def _submission(assignment: Path, folder: Path, student: str, code: str, style: str, params: str = "seed = 0"):
    """A student's notebook as Jupyter saves it: sources as lists of lines, outputs, the editor's metadata."""
    nb = nbformat.read(assignment, as_version=4)
    for cell in nb.cells:
        if TAG in cell.metadata.get("tags", []):
            cell.source = code
            cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text="self-check ex-sum: ...\n")]
            cell.execution_count = 3
        if "parameters" in cell.metadata.get("tags", []):
            cell.source = params
    nb.metadata.update(EDITORS[style])
    (folder / student).mkdir(parents=True)
    nbformat.write(nb, folder / student / assignment.name)  # lists of lines, as Jupyter writes them
    assert isinstance(json.loads((folder / student / assignment.name).read_text())["cells"][0]["source"], list)


READS_KEY = "from tokensel_book.exercises import load_key\nx = load_key()['ex-sum'].reference({'data': data}, {})['x']"
CHECK = "\ntb.self_check('ex-sum', x=x, given=dict(data=data))"
CLASS = {
    "right": ("x = float(data.sum())" + CHECK, "lab"),
    "wrong": ("x = 0.5" + CHECK, "classic"),
    "blank": ("x = None" + CHECK, "vscode"),
    "override": ("tb.exercises.Answer.holds = lambda *a: True\nx = 0.0" + CHECK, "lab"),
    "reads-key": (READS_KEY + CHECK, "lab"),
    "rebinds": ("data = np.zeros(3)\nx = 0.0" + CHECK, "lab"),
    "forges": (  # lines the grader reads back, written by hand: not numbers, so nothing counts and nothing breaks
        "import json, os\nwith open(os.environ['TOKENSEL_GRADES'], 'a') as f:\n"
        "    f.write(json.dumps({'exercise': 'ex-sum', 'answers': 'ab'}) + '\\n' + json.dumps({'x': 's'}) + '\\n')\n"
        "    f.write(json.dumps({'exercise': 'ex-sum', 'answers': {'x': 'right'}}) + '\\n')",
        "lab",
    ),
    "dies": ("import os\nos._exit(1)", "classic"),
}


@pytest.mark.slow(seconds=90)
def test_a_class_is_graded_each_notebook_on_its_own_and_no_cheat_scores(book, tmp_path):
    [assignment] = write_assignments(book, book / "out")
    subs = tmp_path / "submissions"
    for student, (code, style) in CLASS.items():
        _submission(assignment, subs, student, code, style)
    reseeded = "x = float(np.random.default_rng(5).random(3).sum())\ntb.self_check('ex-sum', x=x)"
    _submission(assignment, subs, "reseeds", reseeded, "lab", params="seed = 5")
    # a cell that never ends, cut off as a spinning loop is, without taking a core from the other tests
    _submission(assignment, subs, "loops", "import time\ntime.sleep(3600)", "lab")
    rows = {r["student"]: r for r in grade(book, book / "out", subs, tmp_path / "grades.csv", timeout=20)}
    assert rows["right"]["verdict"] == "right" and not rows["right"]["flag"] and not rows["right"]["error"]
    assert rows["wrong"]["verdict"] == "not yet" and rows["blank"]["verdict"] == "missing"
    for cheat in ("override", "rebinds"):
        assert rows[cheat]["verdict"] == "not yet", cheat
    assert rows["reads-key"]["verdict"] == "missing" and "KeyError" in rows["reads-key"]["error"]
    assert rows["reseeds"]["verdict"] == "not yet" and rows["reseeds"]["flag"] == "parameters changed"
    assert rows["loops"]["verdict"] == "missing" and "out of time" in rows["loops"]["error"]
    assert rows["forges"]["verdict"] == "missing" and rows["dies"]["verdict"] == "missing"
    assert rows["dies"]["error"], rows["dies"]
    assert (tmp_path / "grades.csv").read_text().splitlines()[0] == "student,chapter,exercise,answer,verdict,flag,error"


def test_grading_needs_the_key_and_assignments_the_command_wrote(book, tmp_path):
    (tmp_path / "plain").mkdir()
    pytest.raises(InvalidArgumentError, lambda: grade(book, tmp_path / "plain", tmp_path)).match("was not written by")
    (book / "book" / "answers.py").unlink()
    pytest.raises(InvalidArgumentError, lambda: grade(book, tmp_path / "plain", tmp_path)).match("no answer key")


@pytest.mark.slow(seconds=30)
def test_the_grade_command_prints_a_line_per_student(book, tmp_path):
    write_assignments(book, book / "out")
    _submission(book / "out" / "01_sums.ipynb", tmp_path / "subs", "ann", CLASS["right"][0], "lab")
    done = subprocess.run(
        [sys.executable, "-m", "tokensel_book", "grade", "out", str(tmp_path / "subs"), "--out", "g.csv"],
        cwd=book,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0 and "ann: 1 of 1 answers right" in done.stdout, done.stdout + done.stderr
