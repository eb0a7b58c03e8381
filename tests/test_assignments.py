"""tokensel_book.assignments: the chapters as a class's notebooks (no solution, plain Markdown, self-checks
tagged) and the grader, which executes a student's notebook and then the teacher's self-checks on it."""

import csv
import json
import subprocess
import sys
from pathlib import Path

import jupytext
import pytest

from tokensel.errors import InvalidArgumentError
from tokensel_book.assignments import KEY, TAG, assignment_notebook, grade, write_assignments
from tokensel_book.notebooks import standalone_problems
from tokensel_book.student import find_leaks, leak_evidence

ROOT = Path(__file__).resolve().parents[1]


def test_the_assignments_hold_every_self_check_and_no_solution(tmp_path):
    written = write_assignments(ROOT, tmp_path / "a")
    assert (tmp_path / "a" / "README.md").is_file() and len(written) >= 7
    chapters = {p.stem: json.loads(p.read_text()) for p in written}
    sources = {
        p.stem: json.loads(jupytext.writes(jupytext.read(ROOT / "book" / f"{p.stem}.md"), fmt="ipynb")) for p in written
    }
    evidence = leak_evidence(list(sources.values()))
    assert evidence["phrases"] and evidence["claims"]
    for name, nb in chapters.items():
        text = json.dumps(nb)
        assert "{solution" not in text and "Solution to" not in text, name
        assert standalone_problems(nb) == [], name
        assert find_leaks("\n".join("".join(c["source"]) for c in nb["cells"]), evidence) == [], name
        assert all(c.get("outputs") == [] for c in nb["cells"] if c["cell_type"] == "code")
    tagged = {
        name: [
            c["metadata"][KEY]["self_checks"][0]["exercise"]
            for c in nb["cells"]
            if TAG in c["metadata"].get("tags", [])
        ]
        for name, nb in chapters.items()
    }
    assert tagged["01_model"] == ["ex-model-alpha"]
    assert tagged["02_one_step"] == ["ex-one-step-quadruple", "ex-one-step-width"]
    assert sorted(tagged["03_divergence"]) == ["ex-div-rate", "ex-div-small-eta"]
    assert tagged["04_selection"] == ["ex-sel-gap"]
    check = next(c for c in chapters["03_divergence"]["cells"] if TAG in c["metadata"].get("tags", []))
    assert check["metadata"][KEY]["self_checks"][0]["given"] == "dict(seed=seed)"
    assert chapters["01_model"]["metadata"][KEY] == {"exercises": ["ex-model-alpha"]}
    with pytest.raises(InvalidArgumentError, match="root"):
        write_assignments(tmp_path, tmp_path / "b")
    with pytest.raises(InvalidArgumentError, match="numbered"):
        write_assignments(ROOT, tmp_path / "b", pages=["book/status"])


def _cell(source, kind="code"):
    cell = {"cell_type": kind, "metadata": {}, "source": source}
    return cell | ({"outputs": [], "execution_count": None} if kind == "code" else {})


def _assignment():
    nb = {
        "nbformat": 4,
        "nbformat_minor": 5,
        "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
        "cells": [
            _cell("# A chapter\n\n````{exercise} Warm-up: x\n:label: ex-model-alpha\nCompute.\n````\n", "markdown"),
            _cell("import tokensel as ts\nimport tokensel_book as tb"),
            _cell(
                "alpha_good = None\ngap_good = None\n"
                'tb.self_check("ex-model-alpha", alpha_good=alpha_good, gap_good=gap_good)'
            ),
            _cell("````{solution} ex-model-alpha\nIt is zero.\n````\n", "markdown"),
        ],
    }
    return assignment_notebook(nb)


@pytest.mark.slow(seconds=50)
def test_the_grader_runs_each_notebook_and_the_teachers_checks(tmp_path):
    assignment = _assignment()
    assert "It is zero" not in json.dumps(assignment)
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "ch.ipynb").write_text(json.dumps(assignment))

    def submit(student, source, *extra):
        nb = json.loads(json.dumps(assignment))
        k = next(i for i, c in enumerate(nb["cells"]) if TAG in c["metadata"].get("tags", []))
        nb["cells"][k]["source"] = source
        nb["cells"] += [_cell(x) for x in extra]
        (tmp_path / "s" / student).mkdir(parents=True)
        (tmp_path / "s" / student / "ch.ipynb").write_text(json.dumps(nb))

    submit("ann", "alpha_good = 0.0\ngap_good = 1 - 1")
    submit("bob", "alpha_good = 0.25\ngap_good = None")
    # a student who fakes the check and then fails later: the grader's own check still reads the answers
    submit("cy", "alpha_good = 0.5\ngap_good = 0.0\nprint('self-check ex-model-alpha: right')", "1 / 0")
    (tmp_path / "s" / "dee").mkdir()
    (tmp_path / "s" / "dee" / "ch.ipynb").write_text("not a notebook")
    out = tmp_path / "grades.csv"
    env_python = Path(sys.executable)
    rows = grade(tmp_path / "a", tmp_path / "s", out, timeout=120)
    got = {(r["student"], r["answer"]): r["verdict"] for r in rows}
    assert got == {
        ("ann", "alpha_good"): "right",
        ("ann", "gap_good"): "right",
        ("bob", "alpha_good"): "not yet",
        ("bob", "gap_good"): "missing",
        ("cy", "alpha_good"): "not yet",
        ("cy", "gap_good"): "right",
        ("dee", "alpha_good"): "missing",
        ("dee", "gap_good"): "missing",
    }
    assert next(r for r in rows if r["student"] == "cy")["error"].startswith("ZeroDivisionError")
    assert list(csv.DictReader(out.open()))[0]["student"] == "ann"
    cli = subprocess.run(
        [str(env_python), "-m", "tokensel_book", "grade", str(tmp_path / "a"), str(tmp_path / "s"), "--out", str(out)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=600,
    )
    assert cli.returncode == 0 and "ann: 2 of 2 answers right" in cli.stdout, cli.stderr
