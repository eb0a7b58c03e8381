"""benchmarks/book_times.py: chapter times of builds side by side, each record checked as it is read."""

import importlib.util
import json
from pathlib import Path

import pytest

_SPEC = importlib.util.spec_from_file_location("book_times", Path(__file__).parents[1] / "benchmarks" / "book_times.py")
assert _SPEC is not None and _SPEC.loader is not None
book_times = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(book_times)


def _write(folder: Path, name: str, content) -> None:
    (folder / name).write_text(content if isinstance(content, str) else json.dumps(content))


def test_records_are_checked_and_bad_ones_skipped_by_name(tmp_path, capsys):
    _write(tmp_path, "a.json", {"chapter": "06_real_data", "seconds": 96.25})
    _write(tmp_path, "b.json", {"chapter": "07_beyond", "seconds": 75})
    _write(tmp_path, "c.json", "{not json")
    _write(tmp_path, "d.json", {"chapter": "01_model"})  # unfinished: no seconds
    _write(tmp_path, "e.json", {"chapter": "02_one_step", "seconds": -1.0})
    _write(tmp_path, "f.json", {"chapter": "03_divergence", "seconds": True})  # a bool is not a time
    _write(tmp_path, "g.json", [1, 2])
    _write(tmp_path, "BUILD_STARTED", "123")
    assert book_times.read_times(tmp_path) == {"06_real_data": 96.25, "07_beyond": 75.0}
    err = capsys.readouterr().err
    for name in ("c.json", "d.json", "e.json", "f.json", "g.json"):
        assert f"skipped {name}" in err


def test_a_chapter_recorded_twice_or_no_records_is_refused(tmp_path):
    _write(tmp_path, "a.json", {"chapter": "06_real_data", "seconds": 1.0})
    _write(tmp_path, "b.json", {"chapter": "06_real_data", "seconds": 2.0})
    with pytest.raises(SystemExit, match="recorded twice"):
        book_times.read_times(tmp_path)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(SystemExit, match="no chapter records"):
        book_times.read_times(empty)
    with pytest.raises(SystemExit, match="not a folder"):
        book_times.read_times(tmp_path / "missing")


def test_the_table_sums_each_build_and_gives_its_share_of_the_first():
    text = book_times.table({"old": {"a": 10.0, "b": 30.0}, "new": {"a": 5.0, "b": 10.0, "c": 5.0}})
    lines = text.splitlines()
    assert lines[0] == "| chapter | old | new |"
    assert "| a | 10.0 s | 5.0 s |" in lines and "| c | - | 5.0 s |" in lines
    assert "| **sum** | **40.0 s** | **20.0 s** |" in lines
    assert lines[-1] == "| share of old | 1.00 | 0.50 |"
