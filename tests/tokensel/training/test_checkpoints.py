"""Checkpoints: a killed run resumes to the same result, only the run that wrote the file resumes from it, a file
is read without running code and onto the run's device, and writing is atomic."""

import io
import multiprocessing
import os
import pickle
import zipfile
from pathlib import Path

import pytest
import torch
from conftest import train_args

import tokensel as ts
from tokensel.errors import CheckpointError, StorageError


def _data(seed=1):
    return ts.synthetic.independent_tokens(80, 30, length=8, delta=0.8, seed=seed).batch


KW = dict(steps=6, lr=0.05, eval_every=2, progress=False)


def _finished(path, model=None, batch=None, **kw):
    model = model or ts.AttentionModel.init(30, 8, seed=0)
    ts.train_joint(model, batch or _data(), **train_args(checkpoint=path, **{**KW, **kw}))
    return model


def test_killed_run_resumes_to_the_same_result(tmp_path, monkeypatch):
    data = ts.synthetic.independent_tokens(120, 30, length=10, delta=0.8, seed=1)
    test = ts.synthetic.independent_tokens(60, 30, length=10, delta=0.8, seed=2).batch
    kw = dict(steps=30, lr=0.05, test_batch=test, eval_every=5, progress=False)
    whole = ts.AttentionModel.init(30, 16, seed=0)
    traj_whole = ts.train_joint(whole, data.batch, **train_args(**kw))

    ckpt = tmp_path / "run.pt"
    real = ts.training.phases.gradients_of_checked  # what train_joint calls per step
    calls = {"n": 0}

    def dying(*a, **k):  # the process "dies" in the middle of step 17
        calls["n"] += 1
        if calls["n"] == 18:
            raise KeyboardInterrupt("killed")
        return real(*a, **k)

    monkeypatch.setattr(ts.training.phases, "gradients_of_checked", dying)
    with pytest.raises(KeyboardInterrupt):
        ts.train_joint(
            ts.AttentionModel.init(30, 16, seed=0), data.batch, **train_args(checkpoint=ckpt, checkpoint_every=10, **kw)
        )
    monkeypatch.setattr(ts.training.phases, "gradients_of_checked", real)
    assert torch.load(ckpt, weights_only=True)["step"] == 9  # the last save: after the update of step 9
    resumed = ts.AttentionModel.init(30, 16, seed=0)  # a fresh process starts from scratch
    traj = ts.train_joint(resumed, data.batch, **train_args(checkpoint=ckpt, checkpoint_every=10, **kw))
    assert torch.equal(resumed.E, whole.E) and torch.equal(resumed.p, whole.p)
    assert traj.to_frame().equals(traj_whole.to_frame())
    # a finished run loads and returns at once
    again = ts.AttentionModel.init(30, 16, seed=0)
    assert ts.train_joint(again, data.batch, **train_args(checkpoint=ckpt, **kw)).loss == traj_whole.loss
    assert torch.equal(again.E, whole.E)


def _flip(batch):
    return ts.RaggedBatch(batch.ids, batch.offsets, -batch.labels, batch.vocab_size)


@pytest.mark.parametrize(
    "change",
    [
        lambda: dict(batch=_flip(_data())),
        lambda: dict(model=ts.AttentionModel.init(30, 8, seed=5)),
        lambda: dict(model=ts.AttentionModel.init(30, 8, seed=0, dtype=torch.float32)),
        lambda: dict(model=ts.one_step(ts.AttentionModel.init(30, 8, seed=0), _data(), eta0=5.0)),
        lambda: dict(params=("E", "p", "v")),
        lambda: dict(recipe="frozen_E"),
        lambda: dict(test_batch=_data(2)),
        lambda: dict(lr=0.01),
        lambda: dict(steps=8),
    ],
    ids=["data", "initialisation", "dtype", "one_step", "params", "recipe", "test data", "lr", "steps"],
)
def test_checkpoint_of_another_run_is_refused(tmp_path, change):
    path = tmp_path / "run.pt"
    _finished(path)
    before = path.read_bytes()
    kw = change()
    model = kw.pop("model", None) or ts.AttentionModel.init(30, 8, seed=0)
    E0 = model.E.clone()
    with pytest.raises(CheckpointError, match="belongs to another run"):
        ts.train_joint(model, kw.pop("batch", None) or _data(), **train_args(checkpoint=path, **{**KW, **kw}))
    assert torch.equal(model.E, E0), "the model changed before the refusal"
    assert path.read_bytes() == before, "the refused checkpoint was modified"


def test_unreadable_foreign_or_crafted_files_are_refused_without_running_code(tmp_path):
    marker = tmp_path / "pwned.txt"

    class Evil:
        def __reduce__(self):
            return (exec, (f"import pathlib; pathlib.Path({str(marker)!r}).write_text('pwned')",))

    junk = tmp_path / "junk.pt"
    junk.write_bytes(b"not a checkpoint")
    torch.save({"key": "x", "step": 0, "traj": Evil()}, tmp_path / "evil.pt")
    with open(tmp_path / "plain.pt", "wb") as fh:
        pickle.dump(Evil(), fh)
    torch.save({"E": torch.zeros(1), "meta": {}}, tmp_path / "old.pt")
    for name in ("junk.pt", "evil.pt", "plain.pt", "old.pt"):
        with pytest.raises(CheckpointError, match="cannot be read as a tokensel checkpoint"):
            _finished(tmp_path / name)
    assert not marker.exists()


def _as_if_written_on_a_gpu(path):
    """Rewrite a CPU checkpoint so that its tensors say they were saved on 'cuda'."""
    z = zipfile.ZipFile(path)
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_STORED) as w:
        for n in z.namelist():
            data = z.read(n)
            if n.endswith("data.pkl"):
                assert b"X\x03\x00\x00\x00cpu" in data
                data = data.replace(b"X\x03\x00\x00\x00cpu", b"X\x04\x00\x00\x00cuda")
            w.writestr(n, data)
    path.write_bytes(out.getvalue())


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA to see the mapping")
def test_a_gpu_checkpoint_resumes_on_the_cpu(tmp_path):
    whole = _finished(tmp_path / "cpu.pt")
    path = tmp_path / "gpu.pt"
    _finished(path)
    _as_if_written_on_a_gpu(path)
    with pytest.raises(RuntimeError, match="CUDA"):
        torch.load(path, weights_only=True)  # the file really names a CUDA device
    assert torch.equal(_finished(path).E, whole.E)


def _save_many(args):
    path, k = args
    for i in range(25):
        ts.training.checkpoints.save(path, {"run": k, "E": torch.full((50, 40), float(k)), "step": i})
    return k


@pytest.mark.slow
def test_two_processes_saving_one_checkpoint_collide_on_nothing(tmp_path):
    path = tmp_path / "shared.pt"
    with multiprocessing.get_context("spawn").Pool(2) as pool:
        assert sorted(pool.map(_save_many, [(path, 0), (path, 1)])) == [0, 1]
    state = torch.load(path, weights_only=True)
    assert state["step"] == 24 and torch.all(state["E"] == state["run"])
    assert not list(tmp_path.glob(".shared.pt.*.tmp"))


def test_checkpoint_paths_that_cannot_be_used_are_refused_in_one_line(tmp_path, monkeypatch):
    folder = tmp_path / "a_folder.pt"
    folder.mkdir()
    fifo = tmp_path / "fifo.pt"
    os.mkfifo(fifo)
    for path in (folder, fifo):  # never opened: reading a FIFO would block
        pytest.raises(CheckpointError, _finished, path).match("is not a file")

    def refuse(*args, **kwargs):  # a read-only folder (simulated: the tests may run as root)
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(torch, "save", refuse)
    pytest.raises(StorageError, lambda: _finished(tmp_path / "run.pt")).match("Permission denied")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a_folder.pt", "fifo.pt"]


@pytest.mark.parametrize("where", ["under a file", "in /proc"])
def test_a_checkpoint_that_cannot_be_written_is_refused_before_the_first_step(tmp_path, where):
    """Issue 48 (8): an unusable checkpoint folder was refused only at the first save, after the model changed."""
    (tmp_path / "afile").write_text("x")
    path = tmp_path / "afile" / "x.pt" if where == "under a file" else Path("/proc/tokensel/x.pt")
    data = ts.synthetic.independent_tokens(40, 12, length=5, delta=0.8, seed=1)
    model = ts.AttentionModel.init(12, 4, seed=0)
    before = model.E.clone()
    settings = ts.TrainSettings(steps=3, lr=0.05, eval_every=1, progress=False, checkpoint_every=1, checkpoint=path)
    with pytest.raises(StorageError, match="cannot write the checkpoint"):
        ts.train_joint(model, data.batch, settings=settings)
    assert torch.equal(model.E, before)
