"""benchmarks/chapter_ab.py: a chapter run under two versions, alternating, with the claims of every run compared."""

import os
import subprocess
import sys
from pathlib import Path

from conftest import MYST_FRONT_MATTER

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "chapter_ab.py"

_CHAPTER = (
    MYST_FRONT_MATTER
    + """# A chapter of one claim

```{{code-cell}} ipython3
import tokensel as ts
import tokensel_book as tb
tb.start_chapter("tiny")
tb.check("a measured value", {value}, at_least=0.0)
```
"""
)


def _version(tmp_path: Path, name: str, value: float) -> Path:
    root = tmp_path / name
    (root / "book").mkdir(parents=True)
    (root / "lib").symlink_to(ROOT / "lib")
    (root / "book" / "tiny.md").write_text(_CHAPTER.format(value=value))
    return root


def _run(*args, cwd: Path):
    env = {k: v for k, v in os.environ.items() if k != "TOKENSEL_RESULTS_DIR"}
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300
    )


def test_two_versions_alternate_and_their_claims_are_compared(tmp_path):
    a, b, c = _version(tmp_path, "a", 0.5), _version(tmp_path, "b", 0.5), _version(tmp_path, "c", 0.25)
    same = _run("tiny", f"old={a}", f"new={b}", "--rounds", "2", "--no-compile", cwd=tmp_path)
    assert same.returncode == 0, same.stdout + same.stderr
    order = [line.split(":")[1].split()[0] for line in same.stdout.splitlines() if line.startswith(("round ", "warm"))]
    assert order == ["old", "old", "new", "new", "old"]  # an untimed warm-up, then A B B A
    assert "warm-up: old" in same.stdout and "(not counted)" in same.stdout
    assert "claim values: the same in every run" in same.stdout and "of old" in same.stdout
    other = _run("tiny", f"old={a}", f"new={c}", "--rounds", "1", "--no-compile", "--no-warmup", cwd=tmp_path)
    assert other.returncode == 1 and "OTHER VALUES than the first run" in other.stdout
    assert "claim values: NOT the same in every run" in other.stdout and "warm-up" not in other.stdout


def test_versions_are_checked_before_anything_runs(tmp_path):
    a = _version(tmp_path, "a", 0.5)
    for args, message in (
        (("tiny", f"old={a}"), "two or more versions"),
        (("tiny", f"x={a}", f"x={a}"), "different labels"),
        (("tiny", f"old={a}", f"new={tmp_path}"), "has no lib/tokensel"),
        (("missing", f"old={a}", f"new={a}"), "has no book/missing.md"),
        (("tiny", f"old={a}", str(a)), "LABEL=ROOT"),
        (("tiny", f"old={a}", f"new={a}", "--rounds", "0"), "at least 1"),
    ):
        done = _run(*args, "--no-compile", cwd=tmp_path)
        assert done.returncode != 0 and message in done.stderr, (args, done.stderr)
