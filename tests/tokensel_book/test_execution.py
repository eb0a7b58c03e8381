"""tokensel_book.execution: ``make book`` reuses a page's outputs only while everything its run depended on holds,
and a false claim fails the build by name. Built with jupyter-book itself, on a one-page book."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import MYST_FRONT_MATTER, write_book

CONFIG = """title: t
execute:
  execute_notebooks: cache
  timeout: 120
sphinx:
  extra_extensions: [tokensel_book.execution]
  config:
    nb_execution_raise_on_error: true
"""
CHAPTER = (
    MYST_FRONT_MATTER[:-4]
    + """claims:
  value: {claim: "the helper's value", tests: lem-a, threshold: "exact"}
---
# A page

```{code-cell} ipython3
import tokensel_book as tb

import helper  # beside the page: a page executes in its own folder

tb.start_chapter("ch")
data = open("data/x.txt").read()
tb.check("value", helper.VALUE + len(data) * 0, at_least=LEAST)
tb.end_chapter()
```
"""
)


def build(root: Path, env: dict) -> str:
    argv = [str(Path(sys.executable).parent / "jupyter-book"), "build", str(root), "--builder", "html"]
    done = subprocess.run(argv, cwd=root, env=env, capture_output=True, text=True, timeout=300)
    return done.stdout + done.stderr


def stale(root: Path, env: dict) -> str:
    """Why the next build would execute the page ("None": it would not), from a copy of the cache (four builds, not
    one per change)."""
    shutil.rmtree(copy := root.parent / "cache-copy", ignore_errors=True)
    shutil.copytree(root / "_build" / ".jupyter_cache", copy)
    code = f"from jupyter_cache import get_cache as g; from tokensel_book.execution import stale_reason; c=g('{copy}')"
    code += f"; print(stale_reason(c, c.get_cache_bundle(c.list_cache_records()[0].pk).nb, '{root}/book/ch.md'))"
    done = subprocess.run([sys.executable, "-c", code], cwd=root, env=env, capture_output=True, text=True, timeout=120)
    return done.stdout.strip() + done.stderr


@pytest.mark.slow(seconds=80)
def test_a_page_executes_again_when_anything_its_run_read_changes_and_only_then(tmp_path):
    root, elsewhere = tmp_path / "book_root", tmp_path / "elsewhere"
    write_book(root, "ch", CHAPTER.replace("LEAST", "0"), CONFIG)
    elsewhere.mkdir()
    (root / "book" / "helper.py").write_text("VALUE = 1\n")
    (elsewhere / "x.txt").write_text("a\n")
    (root / "book" / "data").symlink_to(elsewhere)  # a data folder assembled from links
    startup = tmp_path / "ipython" / "profile_default" / "startup"
    startup.mkdir(parents=True)
    (startup / "00.py").write_text("X = 1\n")
    env = dict(os.environ, IPYTHONDIR=str(tmp_path / "ipython"))
    executes = "execution cache: book/ch executes"
    assert executes in build(root, env)
    assert executes not in build(root, env)  # nothing changed: reused
    assert stale(root, env) == "None"
    reworded = CHAPTER.replace("LEAST", "0").replace("the helper's value", "the helper's value, in words")
    changes = {  # each alone, then undone
        root / "book" / "helper.py": ("VALUE = 2\n", "helper.py changed"),  # a helper module outside the library
        elsewhere / "x.txt": ("b\n", "x.txt changed"),  # a file under a linked folder
        startup / "00.py": ("X = 2\n", "00.py changed"),  # an IPython start-up file
        root / "book" / "ch.md": (reworded, "its record is missing or not valid"),  # the claims table alone
    }
    for path, (text, why) in changes.items():
        before = path.read_text()
        path.write_text(text)
        assert why in stale(root, env), why
        path.write_text(before)
    assert "$NUMBA_OPT changed" in stale(root, env | {"NUMBA_OPT": "0"})  # a setting
    assert stale(root, env) == "None"  # every change undone
    (root / "book" / "helper.py").write_text("VALUE = 2\n")
    assert executes in build(root, env)
    (root / "book" / "ch.md").write_text(CHAPTER.replace("LEAST", "3"))  # a false claim
    log = build(root, env)
    assert "ClaimFailedError" in log and "the helper's value" in log


def test_the_digest_of_a_folder_follows_linked_subfolders(tmp_path):
    from tokensel_book.execution import tree_digest

    (tmp_path / "elsewhere" / "sub").mkdir(parents=True)
    (tmp_path / "elsewhere" / "sub" / "x").write_text("a")
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "linked").symlink_to(tmp_path / "elsewhere")
    (tmp_path / "data" / "loop").symlink_to(tmp_path / "data")  # a link back: each real folder is read once
    before = tree_digest(tmp_path / "data")
    (tmp_path / "elsewhere" / "sub" / "x").write_text("b")
    assert tree_digest(tmp_path / "data") != before
