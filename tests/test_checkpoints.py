"""Checkpoints cannot lie: a checkpoint resumes only the run that wrote it, is read without running
code, resumes on another device, and survives two processes writing it at once."""

import io
import multiprocessing
import os
import pickle
import zipfile

import pytest
import torch
from conftest import train_args

import tokensel as ts
from tokensel.errors import CheckpointError, DivergenceError, InvalidParameterError, StorageError, TokenselError


def _data(seed=1):
    return ts.synthetic.independent_tokens(80, 30, length=8, delta=0.8, seed=seed).batch


KW = dict(steps=6, lr=0.05, eval_every=2, progress=False)


def _finished(path, model=None, batch=None, **kw):
    model = model or ts.AttentionModel.init(30, 8, seed=0)
    ts.train_joint(model, batch or _data(), **train_args(checkpoint=path, **{**KW, **kw}))
    return model


def _flip(batch):
    return ts.RaggedBatch(batch.ids, batch.offsets, -batch.labels, batch.vocab_size)


@pytest.mark.parametrize(
    "change, differs",
    [
        (lambda: dict(batch=_flip(_data())), "training data"),
        (lambda: dict(model=ts.AttentionModel.init(30, 8, seed=5)), "initial parameters"),
        (lambda: dict(model=ts.AttentionModel.init(30, 8, seed=0, dtype=torch.float32)), "dtype"),
        (lambda: dict(params=("p", "v")), "params"),
        (lambda: dict(recipe="frozen_E"), "recipe"),
        (lambda: dict(test_batch=_data(2)), "test data"),
    ],
)
def test_checkpoint_of_another_run_is_refused(tmp_path, change, differs):
    path = tmp_path / "run.pt"
    _finished(path)
    before = path.read_bytes()
    kw = change()
    model = kw.pop("model", None) or ts.AttentionModel.init(30, 8, seed=0)
    E0 = model.E.clone()
    with pytest.raises(CheckpointError, match=f"belongs to another run: it differs in .*{differs}"):
        ts.train_joint(model, kw.pop("batch", None) or _data(), **train_args(checkpoint=path, **{**KW, **kw}))
    assert torch.equal(model.E, E0), "the model changed before the refusal"
    assert path.read_bytes() == before, "the refused checkpoint was modified"


def test_one_step_ablation_refuses_the_frozen_ablations_checkpoint(tmp_path):
    """The same settings (params p and v), but E after one step is not the frozen random E."""
    batch = _data()
    path = tmp_path / "ablation.pt"
    _finished(path, batch=batch, params=("p", "v"))
    stepped = ts.one_step(ts.AttentionModel.init(30, 8, seed=0), batch, eta0=5.0)
    with pytest.raises(CheckpointError, match="initial parameters"):
        ts.train_joint(stepped, batch, **train_args(checkpoint=path, params=("p", "v"), **KW))


def test_a_crafted_checkpoint_cannot_run_code(tmp_path):
    marker = tmp_path / "pwned.txt"

    class Evil:
        def __reduce__(self):
            return (exec, (f"import pathlib; pathlib.Path({str(marker)!r}).write_text('pwned')",))

    path = tmp_path / "evil.pt"
    torch.save({"format": 2, "tensors": {}, "opt": {}, "step": 0, "traj": Evil(), "meta": {}}, path)
    with pytest.raises(CheckpointError, match="cannot be read"):
        ts.train_joint(ts.AttentionModel.init(30, 8, seed=0), _data(), **train_args(checkpoint=path, **KW))
    assert not marker.exists()
    with open(tmp_path / "plain.pt", "wb") as fh:
        pickle.dump(Evil(), fh)
    with pytest.raises(CheckpointError):
        ts.train_joint(
            ts.AttentionModel.init(30, 8, seed=0), _data(), **train_args(checkpoint=tmp_path / "plain.pt", **KW)
        )
    assert not marker.exists()


def _as_if_written_on_a_gpu(path):
    """Rewrite a CPU checkpoint so that its tensors say they were saved on 'cuda'."""
    z = zipfile.ZipFile(path)
    names = z.namelist()
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_STORED) as w:
        for n in names:
            data = z.read(n)
            if n.endswith("data.pkl"):
                assert b"X\x03\x00\x00\x00cpu" in data
                data = data.replace(b"X\x03\x00\x00\x00cpu", b"X\x04\x00\x00\x00cuda")
            w.writestr(n, data)
    path.write_bytes(out.getvalue())


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA to see the mapping")
def test_a_gpu_checkpoint_resumes_on_the_cpu(tmp_path):
    path = tmp_path / "gpu.pt"
    whole = _finished(tmp_path / "cpu.pt")
    ts.train_joint(ts.AttentionModel.init(30, 8, seed=0), _data(), **train_args(checkpoint=path, **KW))
    _as_if_written_on_a_gpu(path)
    with pytest.raises(RuntimeError, match="CUDA"):
        torch.load(path, weights_only=True)  # the file really names a CUDA device
    again = ts.AttentionModel.init(30, 8, seed=0)
    ts.train_joint(again, _data(), **train_args(checkpoint=path, **KW))
    assert torch.equal(again.E, whole.E)


def _save_many(args):
    path, k = args
    from tokensel.training.loop import Trajectory

    E = torch.full((50, 40), float(k))
    opt = torch.optim.Adam([E], lr=0.1)
    for i in range(25):
        ts.training.checkpoints.save(path, {"E": E}, opt, i, Trajectory("adam"), {"run": k})
    return k


@pytest.mark.slow
def test_two_processes_saving_one_checkpoint_collide_on_nothing(tmp_path):
    path = str(tmp_path / "shared.pt")
    with multiprocessing.get_context("spawn").Pool(2) as pool:
        assert sorted(pool.map(_save_many, [(path, 0), (path, 1)])) == [0, 1]
    state = torch.load(path, weights_only=True)
    assert state["meta"]["run"] in (0, 1) and torch.all(state["tensors"]["E"] == state["meta"]["run"])
    assert not list(tmp_path.glob(".shared.pt.*.tmp"))


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        (dict(checkpoint_every=0), InvalidParameterError, "checkpoint_every must be an int >= 1"),
        (dict(eval_every=0), InvalidParameterError, "eval_every must be an int >= 1"),
        (dict(steps=2.5), TypeError, "steps must be an int"),
        (dict(steps="3"), TypeError, "steps must be an int"),
        (dict(lr=float("nan")), InvalidParameterError, "lr must be a number"),
        (dict(lr=-1.0), InvalidParameterError, "lr must be > 0"),
        (dict(params="E"), InvalidParameterError, "params must be"),
        (dict(params=("E", "E")), InvalidParameterError, "params must be"),
        (dict(progress="yes"), TypeError, "progress must be True or False"),
        (dict(checkpoint=3), TypeError, "checkpoint must be a file path"),
    ],
)
def test_bad_training_settings_leave_the_model_untouched(tmp_path, kwargs, error, message):
    model = ts.AttentionModel.init(30, 8, seed=0)
    E0, p0 = model.E.clone(), model.p.clone()
    args = {**KW, "checkpoint": tmp_path / "x.pt", **kwargs}
    with pytest.raises(error, match=message):
        ts.train_joint(model, _data(), **train_args(**args))
    assert torch.equal(model.E, E0) and torch.equal(model.p, p0)
    assert not (tmp_path / "x.pt").exists()


def test_a_diverging_run_stops_with_the_model_of_the_last_finite_step():
    batch = _data()
    model = ts.AttentionModel.init(30, 8, seed=0)
    with pytest.raises(DivergenceError, match="lr=1e\\+200 is probably too large") as info:
        ts.train_joint(
            model, batch, ts.TrainSettings(steps=50, lr=1e200, eval_every=1, progress=False), params=("E", "p", "v")
        )
    model.validate()  # every parameter is finite: the failing update was not applied
    assert info.value.step >= 1


def test_a_diverging_variant_stops_with_finite_parameters():
    batch = _data()
    model = ts.models.variants.make("two_layer", 30, 8, seed=0)
    with pytest.raises(DivergenceError):
        ts.train_variant(model, batch, ts.TrainSettings(steps=50, lr=1e30, eval_every=1, progress=False))
    model.validate()


def _tampered(path, edit):
    """Write a checkpoint of the KW run with ``edit`` applied to its loaded state (fingerprint intact)."""
    _finished(path, steps=4, checkpoint_every=2)
    state = torch.load(path, weights_only=True)
    edit(state)
    torch.save(state, path)
    return path.read_bytes()


def _opt_state(state, key="exp_avg_sq"):
    return state["opt"]["state"][0][key]


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda s: s["opt"]["state"][0].__setitem__("exp_avg", torch.zeros(3)), "exp_avg of parameter 0 has shape"),
        (lambda s: s["opt"]["state"][0].__setitem__("exp_avg_sq", _opt_state(s)[:1]), "has shape"),
        (lambda s: s["opt"]["state"][0].__setitem__("exp_avg_sq", _opt_state(s).float()), "has dtype"),
        (lambda s: _opt_state(s).view(-1).__setitem__(0, float("nan")), "holds NaN or inf"),
        (lambda s: _opt_state(s).view(-1).__setitem__(0, -1.0), "negative"),
        (lambda s: _opt_state(s, "exp_avg").view(-1).__setitem__(0, float("inf")), "holds NaN or inf"),
        (lambda s: s["opt"]["state"][0].__setitem__("exp_avg", _opt_state(s, "exp_avg").t()), "contiguous|shape"),
        (lambda s: s["opt"]["state"][0].__setitem__("step", torch.tensor(99.0)), "step count"),
        (lambda s: s["opt"]["state"][0].__setitem__("step", torch.tensor(4.0, dtype=torch.float64)), "step count"),
        (lambda s: s["opt"]["state"][0].pop("exp_avg_sq"), "entries"),
        (lambda s: s["opt"]["state"].__setitem__(7, s["opt"]["state"][0]), "parameter 7"),
        (lambda s: s["opt"]["param_groups"][0].__setitem__("eps", -1.0), "eps=-1.0"),
        (lambda s: s["opt"]["param_groups"][0].__setitem__("params", [0]), "params="),
        (lambda s: s["opt"].__setitem__("param_groups", []), "parameter groups"),
        (lambda s: s.__setitem__("opt", [1, 2]), "not an optimiser state"),
        (lambda s: s.__setitem__("step", 1), "step count"),
        (lambda s: s.__setitem__("step", 10**6), "impossible step"),
        (lambda s: s["traj"].__setitem__("loss", ["x"]), "'loss' is not a list of numbers"),
        (lambda s: s["traj"].__setitem__("loss", [0.5]), "different lengths"),
        (lambda s: s["traj"]["step"].reverse(), "increasing"),
        (lambda s: s["tensors"].__setitem__("E", s["tensors"]["E"].to(torch.float32)), "tensor 'E' has dtype"),
        (lambda s: s["tensors"].__setitem__("extra", torch.zeros(2)), "holds the tensors"),
        (lambda s: s["meta"]["settings"].__setitem__("lr", torch.tensor([1.0, 2.0])), "belongs to another run"),
    ],
)
def test_a_checkpoint_of_this_run_with_a_bad_state_is_refused_before_loading(tmp_path, edit, message):
    """Item: a file with this run's fingerprint but a wrongly shaped optimiser state used to crash the
    fused Adam kernel (SIGSEGV); NaN or negative second moments poisoned the model."""
    path = tmp_path / "run.pt"
    before = _tampered(path, edit)
    model = ts.AttentionModel.init(30, 8, seed=0)
    E0 = model.E.clone()
    with pytest.raises(CheckpointError, match=message):
        ts.train_joint(model, _data(), **train_args(checkpoint=path, **{**KW, "steps": 4, "checkpoint_every": 2}))
    assert torch.equal(model.E, E0), "the model changed before the refusal"
    assert path.read_bytes() == before, "the refused checkpoint was modified"


def test_an_untampered_checkpoint_still_resumes_to_the_same_result(tmp_path):
    path = tmp_path / "run.pt"
    _tampered(path, lambda s: None)
    model = ts.AttentionModel.init(30, 8, seed=0)
    ts.train_joint(model, _data(), **train_args(checkpoint=path, **{**KW, "steps": 4, "checkpoint_every": 2}))
    fresh = _finished(None, steps=4, checkpoint_every=2)
    assert torch.equal(model.E, fresh.E) and torch.equal(model.p, fresh.p)


def test_checkpoint_paths_that_are_not_files_are_refused_in_one_line(tmp_path):
    folder = tmp_path / "a_folder.pt"
    folder.mkdir()
    with pytest.raises(TokenselError, match="is a folder"):
        _finished(folder)
    fifo = tmp_path / "fifo.pt"
    os.mkfifo(fifo)
    with pytest.raises(CheckpointError, match="is a FIFO"):  # never opened: reading a FIFO would block
        _finished(fifo)
    dangling = tmp_path / "dangling.pt"
    dangling.symlink_to(tmp_path / "nowhere" / "x.pt")
    with pytest.raises(CheckpointError, match="dangling link"):
        _finished(dangling)
    (tmp_path / "locked.pt.lock").mkdir()
    with pytest.raises(StorageError, match="lock file .* is a folder"):
        _finished(tmp_path / "locked.pt")
    blocked = tmp_path / "file"
    blocked.write_text("x")
    with pytest.raises(StorageError, match="cannot be used as a folder|is not a folder"):
        _finished(blocked / "run.pt")


def test_a_read_only_checkpoint_folder_is_a_storage_error(tmp_path, monkeypatch):
    """A folder the process may not write into (the file system's answer simulated, so that the test runs as
    root too, which writes anywhere): a StorageError, not a PermissionError traceback."""
    import tempfile

    def refuse(*args, **kwargs):
        raise PermissionError(13, "Permission denied", str(kwargs.get("dir", "")))

    monkeypatch.setattr(tempfile, "mkstemp", refuse)
    with pytest.raises(StorageError, match="cannot"):
        _finished(tmp_path / "run.pt")
