"""The execution cache (tokensel_book.sphinx_execution) and the carrying over of claim records
(tokensel_book.records.carry_over / this_build): the key sees the library, the data and the settings; a tiny
book built again and again executes exactly the pages it must, and its records stay those of the outputs."""

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import MYST_FRONT_MATTER

from tokensel.errors import InvalidArgumentError
from tokensel_book import records, status, verification
from tokensel_book import sphinx_execution as ex
from tokensel_book.checks import ClaimFailedError

ROOT = Path(__file__).resolve().parents[1]


# ---- the key -------------------------------------------------------------------------------------------


def test_tree_digests_follow_content_and_skip_byte_code(tmp_path):
    (tmp_path / "pkg" / "__pycache__").mkdir(parents=True)
    (tmp_path / "pkg" / "a.py").write_text("x = 1\n")
    (tmp_path / "pkg" / "__pycache__" / "a.cpython-311.pyc").write_bytes(b"\0")
    (tmp_path / "pkg" / "b.pyc").write_bytes(b"\0")
    first = ex.tree_digests(tmp_path / "pkg")
    assert list(first) == ["a.py"]
    assert ex.tree_digests(tmp_path / "pkg" / "a.py") == {"a.py": first["a.py"]}
    (tmp_path / "pkg" / "a.py").write_text("x = 2\n")
    assert ex.tree_digests(tmp_path / "pkg") != first
    with pytest.raises(InvalidArgumentError, match="neither"):
        ex.tree_digests(tmp_path / "nothing")


def _data(folder: Path, text: str) -> Path:
    (folder / "imdb").mkdir(parents=True)
    (folder / "imdb" / "train.parquet").write_text(text)
    return folder


def test_the_key_sees_data_content_and_result_settings_not_locations(tmp_path, monkeypatch):
    (tmp_path / "book" / "recorded").mkdir(parents=True)
    (tmp_path / "book" / "recorded" / "run.json").write_text("{}")
    for var in ("TOKENSEL_THREADS", "TOKENSEL_PROGRESS", "TOKENSEL_DATA_DIR", "PYTHONHASHSEED"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("TOKENSEL_DATA_DIR", str(_data(tmp_path / "one", "reviews")))
    key = ex.execution_key(tmp_path, ["book/recorded"])
    assert set(key["parts"]) == {"library", "inputs", "data", "settings", "software"}
    lib = key["parts"]["library"]
    assert "models/core.py" in lib["tokensel"] and "checks.py" in lib["tokensel_book"]
    assert ex.execution_key(tmp_path, ["book/recorded"]) == key  # deterministic

    # the same data elsewhere, progress bars, the results folder, the data cache: the same key
    monkeypatch.setenv("TOKENSEL_DATA_DIR", str(_data(tmp_path / "two", "reviews")))
    monkeypatch.setenv("TOKENSEL_PROGRESS", "0")
    monkeypatch.setenv("TOKENSEL_RESULTS_DIR", str(tmp_path / "elsewhere"))
    assert ex.execution_key(tmp_path, ["book/recorded"])["digest"] == key["digest"]

    def changed(what):
        new = ex.execution_key(tmp_path, ["book/recorded"])
        assert new["digest"] != key["digest"], what
        return ex.key_changes(key, new)

    (tmp_path / "two" / "imdb" / "train.parquet").write_text("other reviews")
    assert changed("data content") == ["data changed"]
    monkeypatch.setenv("TOKENSEL_DATA_DIR", str(tmp_path / "one"))
    monkeypatch.setenv("TOKENSEL_THREADS", "3")
    assert changed("threads") == ["settings changed"]
    monkeypatch.delenv("TOKENSEL_THREADS")
    monkeypatch.setenv("PYTHONHASHSEED", "1")
    assert changed("hash seed") == ["settings changed"]
    monkeypatch.delenv("PYTHONHASHSEED")
    (tmp_path / "book" / "recorded" / "run.json").write_text('{"a": 1}')
    assert changed("recorded run") == ["inputs changed (book/recorded)"]
    assert ex.key_changes(None, key) == ["no cache was kept"]
    with pytest.raises(InvalidArgumentError, match="do not exist"):
        ex.execution_key(tmp_path, ["book/missing"])
    with pytest.raises(InvalidArgumentError, match="list of paths"):
        ex.execution_key(tmp_path, "book/recorded")


def test_key_changes_name_the_library_files_and_packages():
    old = {"parts": {"library": {"core.py": "1", "grads.py": "2"}, "software": {"packages": {"torch": "2.0"}}}}
    new = {
        "parts": {
            "library": {"core.py": "1", "grads.py": "3", "new.py": "4"},
            "software": {"packages": {"torch": "2.1"}},
        }
    }
    assert ex.key_changes(old, new) == ["library changed (grads.py, new.py)", "software changed (torch)"]


def test_a_damaged_key_is_no_key(tmp_path):
    (tmp_path / ex.FOLDER).mkdir()
    assert ex.read_key(tmp_path) is None
    for text in ("not json", "[]", '{"digest": "x", "parts": {}}', '{"digest": 1, "parts": {}, "all_read": true}'):
        (tmp_path / ex.FOLDER / ex.KEY_FILE).write_text(text)
        assert ex.read_key(tmp_path) is None
    (tmp_path / ex.FOLDER / ex.KEY_FILE).write_text('{"digest": "x", "parts": {}, "all_read": true}')
    assert ex.read_key(tmp_path)["digest"] == "x"


# ---- records: archived beside the cache, carried over into a build --------------------------------------


def _record(d: Path, chapter: str, run: str, started: float, passed=True) -> Path:
    rec = {
        "schema": records.SCHEMA,
        "chapter": chapter,
        "run": run,
        "pid": 1,
        "host": "elsewhere",
        "started": started,
        "finished": started + 1,
        "seconds": 1.0,
        "checks": [
            {
                "name": f"{chapter} claim",
                "measured": 1.0 if passed else 2.0,
                "expected": 1.0,
                "tol": 0.0,
                "kind": "abs",
                "passed": passed,
            }
        ],
    }
    rec = records._sealed(rec)
    d.mkdir(parents=True, exist_ok=True)
    (d / f"{chapter}@{run}.json").write_text(json.dumps(rec, indent=1))
    return d / f"{chapter}@{run}.json"


def test_archived_records_come_back_only_as_archived(tmp_path):
    old = _record(tmp_path / "results", "a", "r1", 100.0)
    ex.archive_records(tmp_path / "cache", "ab12" * 8, "book/a", [old])
    back = ex.archived_records(tmp_path / "cache", "ab12" * 8)
    assert [p.name for p in back] == [old.name] and back[0].read_text() == old.read_text()
    assert ex.archived_records(tmp_path / "cache", "cd34" * 8) is None  # never archived
    back[0].write_text(back[0].read_text().replace("1.0", "2.0"))  # changed after archiving
    assert ex.archived_records(tmp_path / "cache", "ab12" * 8) is None
    ex.archive_records(tmp_path / "cache", "ef56" * 8, "book/none", [])  # a page without claims
    assert ex.archived_records(tmp_path / "cache", "ef56" * 8) == []
    with pytest.raises(InvalidArgumentError, match="hashkey"):
        ex.archive_records(tmp_path / "cache", "../x", "book/a", [old])


def test_carried_over_records_count_in_this_build_only(tmp_path):
    results, archive = tmp_path / "results", tmp_path / "archive"
    earlier = _record(archive, "a", "r1", 100.0)
    with pytest.raises(InvalidArgumentError, match="no build stamp"):
        records.carry_over([earlier], results)
    records.mark_build_start(results)
    _record(results, "b", "r2", time.time() + 1)  # executed in this build
    stale = _record(results, "c", "r3", 100.0)  # left from an earlier build, not carried over
    assert [r["chapter"] for r in records.this_build(results)] == ["b"]
    assert records.carry_over([earlier], results) == [earlier.name]
    assert sorted(r["chapter"] for r in records.this_build(results)) == ["a", "b"]
    assert verification.verify(results, expected=["a", "b"]) == (2, 2)
    claims, chapters = status.report(["a", "b"], results)
    assert list(claims["name"]) == ["a claim", "b claim"]

    # a carried-over record changed afterwards, or one carried into an earlier build, does not count
    copy = results / earlier.name
    copy.write_text(copy.read_text().replace('"seconds": 1.0', '"seconds": 2.0'))
    with pytest.raises(InvalidArgumentError, match="digest does not match"):  # an edited record is refused
        records.this_build(results)
    with pytest.raises(ClaimFailedError, match="digest does not match"):
        verification.verify(results, expected=["a", "b"])
    records.carry_over([earlier], results)
    time.sleep(0.01)
    records.mark_build_start(results)
    _record(results, "b", "r4", time.time() + 1)
    shutil.copy(earlier, results / earlier.name)
    assert [r["chapter"] for r in records.this_build(results)] == ["b"]
    with pytest.raises(ClaimFailedError, match="a: no record from this build"):
        verification.verify(results, expected=["a", "b"])
    assert not stale.exists()  # mark_build_start cleared it

    # a failed claim carried over still fails the build
    records.carry_over([_record(archive, "a", "r5", 100.0, passed=False)], results)
    with pytest.raises(ClaimFailedError, match="claim failed"):
        verification.verify(results, expected=["a", "b"])
    (results / records.CARRIED).write_text("[1, 2]")
    with pytest.raises(InvalidArgumentError, match="carried-over"):
        records.this_build(results)
    with pytest.raises(InvalidArgumentError, match="record file"):
        records.load_results(results, file="../a.json")


# ---- a tiny book built again and again ---------------------------------------------------------------------

FRONT = MYST_FRONT_MATTER


def _page(name: str, prose: str, extra: str = "") -> str:
    return (
        FRONT + f"# Page {name}\n\n{prose}\n\n```{{code-cell}} ipython3\nimport tokensel_book as tb\n\n"
        f'tb.start_chapter("{name}")\ntb.check("{name} holds", 1.0, 1.0, tol=0.0)\n{extra}tb.end_chapter()\n```\n'
    )


STATUS = (
    FRONT
    + """# Status

```{code-cell} ipython3
from tokensel_book import status

claims, chapters = status.report(["a", "b"])
print("claims:", ", ".join(claims["name"]))
```
"""
)


def _tiny_book(tmp_path: Path) -> Path:
    book = tmp_path / "book"
    book.mkdir()
    (book / "_config.yml").write_text(
        "title: Tiny\nauthor: t\nonly_build_toc_files: true\nexecute:\n  execute_notebooks: cache\n"
        "  timeout: 300\nsphinx:\n  extra_extensions:\n    - tokensel_book.sphinx_execution\n  config:\n"
        "    nb_execution_raise_on_error: true\n    tokensel_execute_every_build: [status]\n"
        "    tokensel_execution_inputs: [recorded]\n"
    )
    (book / "_toc.yml").write_text("format: jb-book\nroot: intro\nchapters:\n- file: a\n- file: b\n- file: status\n")
    (book / "intro.md").write_text("# Tiny\n\nA book of two pages.\n")
    (book / "a.md").write_text(_page("a", "First words."))
    (book / "b.md").write_text(_page("b", "Other words."))
    (book / "status.md").write_text(STATUS)
    (book / "recorded").mkdir()
    (book / "recorded" / "run.json").write_text("{}")
    return book


def _build(book: Path, env: dict, expect: set) -> float:
    """mark_build_start, jupyter-book build, verify (as `make book` does); assert that the pages executed
    (jupyter-cache entries written during the build) are ``expect``; return the seconds the build took."""
    from jupyter_cache import get_cache

    results = book / "_build" / "checks"
    records.mark_build_start(results)
    start = time.time()
    t0 = time.perf_counter()
    run = subprocess.run(
        [
            str(Path(sys.executable).parent / "jupyter-book"),
            "build",
            str(book),
            "--builder",
            "html",
            "-W",
            "-n",
            "--keep-going",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    seconds = time.perf_counter() - t0
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert verification.verify(results, expected=["a", "b"])[1] == 2
    cache = get_cache(str(book / "_build" / ".jupyter_cache"))
    # an executed notebook is cached as executed/<hash>/base.ipynb, written when its execution ends
    executed = {
        Path(r.uri).stem
        for r in cache.list_cache_records()
        if (cache.path / "executed" / r.hashkey / "base.ipynb").stat().st_mtime >= start
    }
    log = [line for line in (run.stdout + run.stderr).splitlines() if "execution cache" in line or "Execut" in line]
    assert executed == expect, "\n".join(log)
    return seconds


def _status_line(book: Path) -> str:
    nb = json.loads((book / "_build" / "jupyter_execute" / "status.ipynb").read_text())
    text = [o.get("text", "") for c in nb["cells"] for o in c.get("outputs", [])]
    return "".join("".join(t) if isinstance(t, list) else t for t in text).strip()


@pytest.mark.slow(seconds=120)
def test_a_rebuild_executes_only_what_changed(tmp_path):
    book = _tiny_book(tmp_path)
    lib = tmp_path / "lib"
    shutil.copytree(ROOT / "lib" / "tokensel", lib / "tokensel")  # its bytecode too: valid while a source is unchanged
    env = {
        **os.environ,
        "PYTHONPATH": str(lib),
        "TOKENSEL_RESULTS_DIR": str(book / "_build" / "checks"),
        "TOKENSEL_THREADS": "1",
        "TOKENSEL_PROGRESS": "0",
        "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
    }
    results = book / "_build" / "checks"

    first = _build(book, env, {"a", "b", "status"})
    assert _status_line(book) == "claims: a holds, b holds"

    # nothing changed (and one executed notebook lost): only the status page executes; a's and b's records
    # are carried over, and a's executed notebook is written again from the cache
    (book / "_build" / "jupyter_execute" / "a.ipynb").unlink()
    second = _build(book, env, {"status"})
    carried = json.loads((results / records.CARRIED).read_text())["records"]
    assert sorted(name.split("@")[0] for name in carried) == ["a", "b"]
    assert _status_line(book) == "claims: a holds, b holds"
    a_nb = json.loads((book / "_build" / "jupyter_execute" / "a.ipynb").read_text())
    assert "a: 1 claims checked, all hold" in json.dumps(a_nb["cells"])

    # b's code and a's prose changed: b executes, a does not
    (book / "a.md").write_text(_page("a", "First words, rewritten."))
    (book / "b.md").write_text(_page("b", "Other words.", extra='tb.check("b more", 2.0, 2.0, tol=0.0)\n'))
    _build(book, env, {"b", "status"})
    assert _status_line(book) == "claims: a holds, b holds, b more"
    assert "rewritten" in (book / "_build" / "html" / "a.html").read_text()

    # b's code back as it was: its first execution's outputs and records come back, without executing it
    (book / "b.md").write_text(_page("b", "Other words."))
    _build(book, env, {"status"})
    assert _status_line(book) == "claims: a holds, b holds"

    # the library changed: every page executes
    with open(lib / "tokensel" / "errors.py", "a") as fh:
        fh.write("\n# changed\n")
    _build(book, env, {"a", "b", "status"})
    print(f"tiny book: first build {first:.1f} s, a build with nothing changed {second:.1f} s")

    # the student edition finds every executed notebook
    from tokensel_book.student import prepare_student_sources

    out = prepare_student_sources(book, book / "_build", tmp_path / "student")
    assert "a: 1 claims checked" in (out / "a.ipynb").read_text()
