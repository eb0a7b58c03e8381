"""tokensel.files: atomic JSON writes and folder locks."""

import json
import threading

import pytest

import tokensel.files as files
from tokensel.errors import StorageError


def test_write_json_atomic_replaces_whole_files(tmp_path):
    path = tmp_path / "sub" / "a.json"
    path.parent.mkdir()
    files.write_json_atomic(path, {"x": 1})
    files.write_json_atomic(path, {"x": [2, 3]})
    assert json.loads(path.read_text()) == {"x": [2, 3]}
    assert [p.name for p in path.parent.iterdir()] == ["a.json"]  # no temporary file left behind


def test_concurrent_writers_never_leave_a_partial_file(tmp_path):
    path = tmp_path / "b.json"

    def write(k):
        for i in range(20):
            files.write_json_atomic(path, {"writer": k, "data": list(range(500))})

    threads = [threading.Thread(target=write, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert json.loads(path.read_text())["data"] == list(range(500))


def test_lock_is_exclusive(tmp_path):
    with files.lock(tmp_path / "new", "x.lock"):  # the folder is created
        with pytest.raises(StorageError, match="still held after 0.05 s"):
            with files.lock(tmp_path / "new", "x.lock", timeout=0.05):
                raise AssertionError("a second holder got the lock")
