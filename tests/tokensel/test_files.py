"""tokensel.files: atomic JSON writes and folder locks."""

import errno
import json
import os
import threading

import pytest
import torch

import tokensel as ts
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
        for _ in range(20):
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


def test_a_full_disk_or_a_blocked_path_is_one_storage_error_and_leaves_nothing_behind(tmp_path, monkeypatch):
    path = tmp_path / "r.json"
    files.write_json_atomic(path, {"old": 1})

    def full(*a, **k):
        raise OSError(errno.ENOSPC, "No space left on device")

    with monkeypatch.context() as m:
        m.setattr(os, "fsync", full)
        pytest.raises(StorageError, lambda: files.write_json_atomic(path, {"new": 2})).match("No space left on device")
    assert json.loads(path.read_text()) == {"old": 1}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.json"]
    (tmp_path / "blocker").write_text("a file where a folder belongs")
    with pytest.raises(StorageError, match="cannot be used as a folder|is not a folder"):
        files.write_json_atomic(tmp_path / "blocker" / "x.json", {})
    (tmp_path / "x.lock").mkdir()
    with pytest.raises(StorageError, match="is a folder"):
        with files.lock(tmp_path, "x.lock"):
            pass
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    pytest.raises(StorageError, lambda: files.check_regular_file(fifo, "the file")).match("is a FIFO")


def test_a_full_disk_while_checkpointing_is_a_storage_error_and_keeps_the_previous_checkpoint(tmp_path, monkeypatch):
    batch = ts.synthetic.independent_tokens(40, 12, length=5, seed=1).batch
    path = tmp_path / "run.pt"
    settings = dict(lr=0.05, progress=False, eval_every=10, checkpoint_every=50)
    ts.train_joint(ts.AttentionModel.init(12, 4, seed=0), batch, ts.TrainSettings(steps=2, checkpoint=path, **settings))
    before = path.read_bytes()

    def full(*a, **k):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(torch, "save", full)
    with pytest.raises(StorageError, match="No space left on device"):
        other = ts.TrainSettings(steps=3, checkpoint=tmp_path / "other.pt", **settings)
        ts.train_joint(ts.AttentionModel.init(12, 4, seed=0), batch, other)
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.endswith(".lock")) == ["run.pt"]
