"""Checkpoints of training runs: saved atomically, loaded safely, and never resumed by another run.

A checkpoint holds the trained tensors, the optimiser state, the step and the trajectory so far, and a
*fingerprint* of the run (:func:`fingerprint`): the recipe, digests of the training (and test) data and
of the parameters the run started from, the dtype, the settings and the library version. A run resumes
from a checkpoint only when every entry of its own fingerprint is equal; otherwise it stops with a
:class:`~tokensel.errors.CheckpointError` that names the entries that differ, and leaves the file alone.

Files are read with ``torch.load(weights_only=True)`` (a crafted file cannot run code), mapped onto the
run's device (a checkpoint written on a GPU resumes on a CPU), written through a uniquely named temporary
file and an atomic rename, and guarded by a file lock (``<file>.lock``, ``filelock``), so two processes
using the same path never see a partial file or collide on a temporary name.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ..errors import CheckpointError, StorageError
from ..files import check_regular_file, describe_os_error, ensure_folder, file_lock
from ..validation import Duck, Instance
from .optimiser import FusedAdam

FORMAT = 2
_KEYS = ("format", "tensors", "opt", "step", "traj", "meta")


def _lock(path: Path):
    return file_lock(Path(str(path) + ".lock"), timeout=600)


TENSORS = Instance(dict, what="a dict of tensors by name")
DICT = Instance(dict, what="a dict")
OPTIMISER = Instance(FusedAdam, torch.optim.Optimizer, what="an optimiser (FusedAdam or a torch optimiser)")
TRAJECTORY = Duck("append", what="a Trajectory")


def digest_tensors(tensors: dict) -> str:
    """SHA-256 over the names, dtypes, shapes and bytes of ``tensors`` (any device)."""
    h = hashlib.sha256()
    for name in sorted(tensors):
        t = tensors[name]
        if t is None:
            h.update(f"{name}:None;".encode())
            continue
        t = t.detach()
        h.update(f"{name}:{t.dtype}:{tuple(t.shape)};".encode())
        h.update(
            np.ascontiguousarray(t.cpu().reshape(-1).view(torch.uint8).numpy()).tobytes()
            if t.dtype != torch.bool
            else t.cpu().numpy().tobytes()
        )
    return h.hexdigest()[:32]


def digest_batch(batch) -> str:
    """SHA-256 of a batch's token ids, offsets and labels (and its vocabulary size and classes)."""
    if batch is None:
        return "none"
    return digest_tensors(
        {
            "ids": batch.ids,
            "offsets": batch.offsets,
            "labels": batch.labels,
            "meta": torch.tensor([batch.vocab_size, batch.num_classes or 0]),
        }
    )


def fingerprint(recipe: str, batch, start: dict, settings: dict, test_batch=None) -> dict:
    """What identifies a run: ``recipe`` (e.g. ``"train_joint"``, ``"variant/mlp"``), digests of the
    training and test data and of the ``start`` tensors (the parameters before the first step), their
    dtype, the ``settings`` (learning rate, steps, ...) and the library version."""
    from ..version import __version__

    dtypes = sorted({str(t.dtype) for t in start.values() if t is not None})
    return {
        "recipe": str(recipe),
        "library": __version__,
        "data": digest_batch(batch),
        "test_data": digest_batch(test_batch),
        "init": digest_tensors(start),
        "dtype": ",".join(dtypes),
        "settings": {k: (list(v) if isinstance(v, tuple) else v) for k, v in settings.items()},
    }


def save(path, tensors: dict, opt, step: int, traj, meta: dict) -> None:
    """Write the run's state to ``path`` atomically (a run killed while saving keeps its previous
    checkpoint) under the file's lock."""
    path = Path(path)
    ensure_folder(path.parent, "the folder of the checkpoint")
    if path.is_dir():
        raise StorageError(f"the checkpoint path {str(path)!r} is a folder: pass the path of a file.")
    state = {
        "format": FORMAT,
        "tensors": {k: t.detach() for k, t in tensors.items()},
        "opt": opt.state_dict(),
        "step": int(step),
        "traj": dataclasses.asdict(traj),
        "meta": meta,
    }
    with _lock(path):
        try:
            fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        except OSError as exc:
            raise StorageError(
                f"cannot write the checkpoint {str(path)!r} ({describe_os_error(exc)}): make its "
                "folder writable or pass another path."
            ) from exc
        os.close(fd)
        try:
            torch.save(state, tmp)
            os.replace(tmp, path)
        except OSError as exc:
            Path(tmp).unlink(missing_ok=True)
            raise StorageError(
                f"cannot write the checkpoint {str(path)!r} ({describe_os_error(exc)}); the previous "
                "checkpoint, if any, was kept."
            ) from exc
        except RuntimeError as exc:  # torch reports a full disk as a RuntimeError from its zip writer
            Path(tmp).unlink(missing_ok=True)
            raise StorageError(
                f"cannot write the checkpoint {str(path)!r} ({str(exc).splitlines()[0][:160]}); "
                "the previous checkpoint, if any, was kept."
            ) from exc
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise


def _diff(saved, meta: dict) -> list[str]:
    if not isinstance(saved, dict):
        return ["everything (no fingerprint)"]
    keys = sorted(set(saved) | set(meta), key=str)
    out = []
    for k in keys:
        if not _same(saved.get(k), meta.get(k)):
            if k == "settings" and isinstance(saved.get(k), dict) and isinstance(meta.get(k), dict):
                a, b = saved[k], meta[k]
                out += [
                    f"{s} ({_short(a.get(s))} there, {_short(b.get(s))} here)"
                    for s in sorted(set(a) | set(b), key=str)
                    if not _same(a.get(s), b.get(s))
                ]
            else:
                out.append(
                    {
                        "data": "training data",
                        "test_data": "test data",
                        "init": "initial parameters",
                        "recipe": f"recipe ({saved.get(k)!r} there, {meta.get(k)!r} here)",
                        "library": f"library version ({saved.get(k)!r} there, {meta.get(k)!r} here)",
                        "dtype": f"dtype ({saved.get(k)!r} there, {meta.get(k)!r} here)",
                    }.get(k, k)
                )
    return out


def _short(value) -> str:
    r = repr(value)
    return r if len(r) <= 60 else r[:57] + "..."


def _tensor_problem(s, like: torch.Tensor, *, nonnegative: bool = False) -> str | None:
    """What is wrong with a tensor read from a checkpoint that must stand in for ``like`` (None if nothing):
    the type, layout, shape, dtype, device, memory layout and finiteness are all checked."""
    if not isinstance(s, torch.Tensor):
        return f"is a {type(s).__name__}, not a tensor"
    if s.layout != torch.strided or s.is_quantized or s.is_meta or s.requires_grad:
        return f"is a {s.layout} tensor{' on the meta device' if s.is_meta else ''}, not a plain one"
    if s.shape != like.shape:
        return f"has shape {tuple(s.shape)}, this run needs {tuple(like.shape)}"
    if s.dtype != like.dtype:
        return f"has dtype {s.dtype}, this run needs {like.dtype}"
    if s.device != like.device:
        return f"is on {s.device}, this run is on {like.device}"
    if not s.is_contiguous():
        return "is not stored contiguously"
    if not bool(torch.all(torch.isfinite(s))):
        return "holds NaN or inf"
    if nonnegative and bool(torch.any(s < 0)):
        return "holds negative values (an Adam second moment is never negative)"
    return None


def _same(a, b) -> bool:
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor) or type(a) is not type(b):
        return False
    if isinstance(a, (tuple, list)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return set(a) == set(b) and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, float) and a != a:
        return b != b  # NaN settings are equal to NaN
    return a == b


def _optimiser_problem(saved, opt, count: int) -> str | None:
    """What is wrong with a saved Adam state for the optimiser ``opt`` after ``count`` steps (None if
    nothing): its groups must equal this run's (same parameters, same hyper-parameters), and every moment
    must be a finite tensor of its parameter's shape, dtype and device (the fused kernel reads them without
    checking), the second moments non-negative, the step counts equal to ``count``."""
    if not isinstance(saved, dict) or set(saved) != {"state", "param_groups"}:
        return "it is not an optimiser state (keys 'state' and 'param_groups')"
    mine = opt.state_dict()["param_groups"]
    groups = saved["param_groups"]
    if not isinstance(groups, list) or len(groups) != len(mine):
        return f"it has {_short(groups)} as parameter groups, this run has {len(mine)} group(s)"
    for i, (g, m) in enumerate(zip(groups, mine, strict=True)):
        if not isinstance(g, dict) or set(g) != set(m):
            return f"parameter group {i} has the entries {_short(g)}, this run's has {sorted(m)}"
        for key in sorted(m):
            if not _same(g[key], m[key]):
                return f"parameter group {i} has {key}={_short(g[key])}, this run has {_short(m[key])}"
    params = [p for group in opt.param_groups for p in group["params"]]
    state = saved["state"]
    if not isinstance(state, dict):
        return f"its per-parameter state is a {type(state).__name__}"
    amsgrad = any(group.get("amsgrad") for group in opt.param_groups)
    want = {"step", "exp_avg", "exp_avg_sq"} | ({"max_exp_avg_sq"} if amsgrad else set())
    for key, entry in state.items():
        if isinstance(key, bool) or not isinstance(key, int) or not 0 <= key < len(params):
            return f"it has state for a parameter {_short(key)} this run does not have"
        if not isinstance(entry, dict) or set(entry) != want:
            return f"the state of parameter {key} has the entries {_short(entry)}, not {sorted(want)}"
        like = params[key].detach()
        for name in sorted(want - {"step"}):
            problem = _tensor_problem(entry[name], like, nonnegative=name != "exp_avg")
            if problem:
                return f"{name} of parameter {key} {problem}"
        s = entry["step"]
        if (
            not isinstance(s, torch.Tensor)
            or s.ndim != 0
            or s.dtype != torch.float32
            or s.is_meta
            or s.layout != torch.strided
            or s.device != like.device
            or float(s) != count
        ):
            return (
                f"the step count of parameter {key} is {_short(s)}, this run needs a float32 tensor holding "
                f"{count} on {like.device}"
            )
    return None


def _trajectory_problem(traj, step: int) -> str | None:
    """What is wrong with a saved trajectory (None if nothing): lists of numbers of one length, at recorded
    steps up to ``step``."""
    if not isinstance(traj, dict):
        return f"it is a {type(traj).__name__}"
    if not isinstance(traj.get("method"), str) or not isinstance(traj.get("stopped"), str):
        return "its method or stop reason is not a string"
    extra = traj.get("extra")
    if not isinstance(extra, dict) or not all(isinstance(k, str) for k in extra):
        return "its extra columns are not a table of named lists"
    columns: dict[str, Any] = {k: traj.get(k) for k in ("step", "t", "loss", "norm_p", "grad_norm", "cos_ref")} | extra
    lengths = set()
    for name, col in columns.items():
        if not isinstance(col, list) or not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in col):
            return f"column {name!r} is not a list of numbers"
        lengths.add(len(col))
    if len(lengths) > 1:
        return f"its columns have different lengths {sorted(lengths)}"
    steps = columns["step"]
    if not all(isinstance(x, int) and 0 <= x <= step for x in steps) or steps != sorted(set(steps)):
        return f"its recorded steps are not increasing whole numbers up to {step}"
    return None


def resume(path, tensors: dict, opt, meta: dict, traj_type):
    """If ``path`` holds a checkpoint of this run (fingerprint ``meta``), load it into ``tensors`` and
    ``opt`` and return ``(next step, trajectory)``; without a file at ``path`` return ``None``.

    Everything is checked before anything is loaded: a file that cannot be read, is not a tokensel
    checkpoint, belongs to another run, or holds tensors of other shapes raises
    :class:`~tokensel.errors.CheckpointError`, and ``tensors`` and ``opt`` are unchanged."""
    if path is None:
        return None
    path = Path(path)
    if not path.exists() and not path.is_symlink():
        return None
    keep = "The file was left as it is: pass another checkpoint path for this run."
    device = next(iter(tensors.values())).device
    check_regular_file(path, "checkpoint", CheckpointError)  # a folder, a FIFO (would block) or a dangling link
    with _lock(path):
        try:
            state = torch.load(path, map_location=device, weights_only=True)
        except Exception as exc:  # noqa: BLE001 - truncated, foreign, or a pickle that is not plain data
            raise CheckpointError(
                f"checkpoint {str(path)!r} cannot be read as a tokensel checkpoint "
                f"({type(exc).__name__}: {str(exc).splitlines()[0][:160] if str(exc) else ''}). {keep}"
            ) from exc
    if not isinstance(state, dict) or set(state) != set(_KEYS) or state.get("format") != FORMAT:
        raise CheckpointError(f"{str(path)!r} is not a tokensel checkpoint of this version (format {FORMAT}). {keep}")
    if not _same(state["meta"], meta):
        raise CheckpointError(
            f"checkpoint {str(path)!r} belongs to another run: it differs in "
            f"{', '.join(_diff(state['meta'], meta))}. {keep}"
        )
    saved = state["tensors"]
    if not isinstance(saved, dict) or set(saved) != set(tensors):
        raise CheckpointError(
            f"checkpoint {str(path)!r} holds the tensors "
            f"{sorted(map(str, saved)) if isinstance(saved, dict) else type(saved).__name__}, "
            f"this run trains {sorted(tensors)}. {keep}"
        )
    for name, t in tensors.items():
        problem = _tensor_problem(saved[name], t)
        if problem:
            raise CheckpointError(f"checkpoint {str(path)!r}: tensor {name!r} {problem}. {keep}")
    step = state["step"]
    steps = meta["settings"].get("steps") if isinstance(meta.get("settings"), dict) else None
    if isinstance(step, bool) or not isinstance(step, int) or step < 0 or (isinstance(steps, int) and step > steps):
        raise CheckpointError(f"checkpoint {str(path)!r} records an impossible step {_short(step)}. {keep}")
    problem = _optimiser_problem(state["opt"], opt, step if isinstance(steps, int) and step >= steps else step + 1)
    if problem:
        raise CheckpointError(f"checkpoint {str(path)!r}: its optimiser state does not fit this run: {problem}. {keep}")
    problem = _trajectory_problem(state["traj"], step)
    if problem:
        raise CheckpointError(f"checkpoint {str(path)!r}: its trajectory cannot be read ({problem}). {keep}")
    try:
        traj = traj_type(**state["traj"])
    except TypeError as exc:
        raise CheckpointError(f"checkpoint {str(path)!r}: its trajectory cannot be read ({exc}). {keep}") from exc
    before = opt.state_dict()
    try:
        opt.load_state_dict(state["opt"])
    except (ValueError, KeyError, TypeError, RuntimeError) as exc:
        opt.load_state_dict(before)
        raise CheckpointError(
            f"checkpoint {str(path)!r}: its optimiser state does not fit this run ({exc}). {keep}"
        ) from exc
    with torch.no_grad():
        for name, t in tensors.items():
            t.copy_(saved[name])
    return step + 1, traj
