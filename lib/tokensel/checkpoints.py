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

import numpy as np
import torch

from .errors import CheckpointError

FORMAT = 2
_KEYS = ("format", "tensors", "opt", "step", "traj", "meta")


def _lock(path: Path):
    from filelock import FileLock

    return FileLock(str(path) + ".lock", timeout=600)


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
        h.update(np.ascontiguousarray(t.cpu().reshape(-1).view(torch.uint8).numpy()).tobytes()
                 if t.dtype != torch.bool else t.cpu().numpy().tobytes())
    return h.hexdigest()[:32]


def digest_batch(batch) -> str:
    """SHA-256 of a batch's token ids, offsets and labels (and its vocabulary size and classes)."""
    if batch is None:
        return "none"
    return digest_tensors({"ids": batch.ids, "offsets": batch.offsets, "labels": batch.labels,
                           "meta": torch.tensor([batch.vocab_size, batch.num_classes or 0])})


def fingerprint(recipe: str, batch, start: dict, settings: dict, test_batch=None) -> dict:
    """What identifies a run: ``recipe`` (e.g. ``"train_joint"``, ``"variant/mlp"``), digests of the
    training and test data and of the ``start`` tensors (the parameters before the first step), their
    dtype, the ``settings`` (learning rate, steps, ...) and the library version."""
    from .version import __version__

    dtypes = sorted({str(t.dtype) for t in start.values() if t is not None})
    return {"recipe": str(recipe), "library": __version__, "data": digest_batch(batch),
            "test_data": digest_batch(test_batch), "init": digest_tensors(start), "dtype": ",".join(dtypes),
            "settings": {k: (list(v) if isinstance(v, tuple) else v) for k, v in settings.items()}}


def save(path, tensors: dict, opt, step: int, traj, meta: dict) -> None:
    """Write the run's state to ``path`` atomically (a run killed while saving keeps its previous
    checkpoint) under the file's lock."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    state = {"format": FORMAT, "tensors": {k: t.detach() for k, t in tensors.items()}, "opt": opt.state_dict(),
             "step": int(step), "traj": dataclasses.asdict(traj), "meta": meta}
    with _lock(path):
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        os.close(fd)
        try:
            torch.save(state, tmp)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise


def _diff(saved, meta: dict) -> list[str]:
    if not isinstance(saved, dict):
        return ["everything (no fingerprint)"]
    keys = sorted(set(saved) | set(meta))
    out = []
    for k in keys:
        if saved.get(k) != meta.get(k):
            if k == "settings" and isinstance(saved.get(k), dict) and isinstance(meta.get(k), dict):
                a, b = saved[k], meta[k]
                out += [f"{s} ({a.get(s)!r} there, {b.get(s)!r} here)" for s in sorted(set(a) | set(b))
                        if a.get(s) != b.get(s)]
            else:
                out.append({"data": "training data", "test_data": "test data", "init": "initial parameters",
                            "recipe": f"recipe ({saved.get(k)!r} there, {meta.get(k)!r} here)",
                            "library": f"library version ({saved.get(k)!r} there, {meta.get(k)!r} here)",
                            "dtype": f"dtype ({saved.get(k)!r} there, {meta.get(k)!r} here)"}.get(k, k))
    return out


def resume(path, tensors: dict, opt, meta: dict, traj_type):
    """If ``path`` holds a checkpoint of this run (fingerprint ``meta``), load it into ``tensors`` and
    ``opt`` and return ``(next step, trajectory)``; without a file at ``path`` return ``None``.

    Everything is checked before anything is loaded: a file that cannot be read, is not a tokensel
    checkpoint, belongs to another run, or holds tensors of other shapes raises
    :class:`~tokensel.errors.CheckpointError`, and ``tensors`` and ``opt`` are unchanged."""
    if path is None:
        return None
    path = Path(path)
    if not path.exists():
        return None
    keep = "The file was left as it is: pass another checkpoint path for this run."
    device = next(iter(tensors.values())).device
    with _lock(path):
        try:
            state = torch.load(path, map_location=device, weights_only=True)
        except Exception as exc:  # noqa: BLE001 - truncated, foreign, or a pickle that is not plain data
            raise CheckpointError(f"checkpoint {str(path)!r} cannot be read as a tokensel checkpoint "
                                  f"({type(exc).__name__}: {str(exc).splitlines()[0][:160] if str(exc) else ''}). {keep}") from exc
    if not isinstance(state, dict) or set(state) != set(_KEYS) or state.get("format") != FORMAT:
        raise CheckpointError(f"{str(path)!r} is not a tokensel checkpoint of this version (format {FORMAT}). {keep}")
    if state["meta"] != meta:
        raise CheckpointError(f"checkpoint {str(path)!r} belongs to another run: it differs in "
                              f"{', '.join(_diff(state['meta'], meta))}. {keep}")
    saved = state["tensors"]
    for name, t in tensors.items():
        s = saved.get(name) if isinstance(saved, dict) else None
        if not isinstance(s, torch.Tensor) or s.shape != t.shape or s.dtype != t.dtype or not torch.all(torch.isfinite(s)):
            raise CheckpointError(f"checkpoint {str(path)!r}: tensor {name!r} is missing, of another shape or "
                                  f"dtype, or not finite. {keep}")
    step = state["step"]
    if isinstance(step, bool) or not isinstance(step, int) or not 0 <= step <= meta["settings"].get("steps", step):
        raise CheckpointError(f"checkpoint {str(path)!r} records an impossible step {step!r}. {keep}")
    try:
        traj = traj_type(**state["traj"])
    except TypeError as exc:
        raise CheckpointError(f"checkpoint {str(path)!r}: its trajectory cannot be read ({exc}). {keep}") from exc
    before = opt.state_dict()
    try:
        opt.load_state_dict(state["opt"])
    except (ValueError, KeyError, TypeError, RuntimeError) as exc:
        opt.load_state_dict(before)
        raise CheckpointError(f"checkpoint {str(path)!r}: its optimiser state does not fit this run ({exc}). "
                              f"{keep}") from exc
    with torch.no_grad():
        for name, t in tensors.items():
            t.copy_(saved[name])
    return step + 1, traj
