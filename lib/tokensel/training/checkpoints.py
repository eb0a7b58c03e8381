"""Checkpoints of training runs, so that a long run (``scripts/variants_paper_scale.py``) survives being killed.

Written through a temporary file and an atomic rename (a run killed while saving keeps its previous checkpoint),
read with ``torch.load(weights_only=True)`` (a crafted file cannot run code) onto the run's device once its CRCs
are checked (a damaged file is refused), and resumed only by the run that wrote it: the file holds a digest of the
run (:func:`identity`).
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import zipfile
from pathlib import Path

import torch

from ..data.batch import RaggedBatch
from ..errors import CheckpointError, StorageError


def identity(*parts) -> str:
    """A digest of what makes a run: tensors and batches by dtype, shape and bytes, anything else by ``repr``."""
    h = hashlib.sha256()
    for part in parts:
        tensors = (part.ids, part.offsets, part.labels) if isinstance(part, RaggedBatch) else (part,)
        for t in tensors:
            if isinstance(t, torch.Tensor):
                h.update(f"{t.dtype}{tuple(t.shape)}".encode())
                h.update(t.detach().cpu().reshape(-1).view(torch.uint8).numpy().tobytes())
            else:
                h.update(f"{t!r};".encode())
    return h.hexdigest()


def save(path: Path, state: dict) -> None:
    """Write ``state`` to ``path`` atomically."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        torch.save(state, tmp)
        os.replace(tmp, path)
    except (OSError, RuntimeError) as exc:  # torch reports a full disk as a RuntimeError
        raise StorageError(f"cannot write the checkpoint {str(path)!r} ({exc}); the previous one is kept") from exc
    finally:
        if tmp.exists():  # a save that failed (or was interrupted) leaves nothing behind
            tmp.unlink()


def load(path: Path, key: str, device: torch.device | str = "cpu") -> dict | None:
    """The state saved at ``path`` by the run ``key`` (None without a file); a file of another run, or not a
    checkpoint, raises :class:`~tokensel.errors.CheckpointError` and is left alone."""
    if not path.exists():
        try:  # a folder that cannot take the checkpoint is refused now, not at the first save
            path.parent.mkdir(parents=True, exist_ok=True)
            tempfile.TemporaryFile(dir=path.parent).close()
        except OSError as exc:
            raise StorageError(f"cannot write the checkpoint {str(path)!r} ({exc}): choose a writable folder") from exc
        return None
    if not path.is_file():  # a folder, or a FIFO that would block the read
        raise CheckpointError(f"the checkpoint path {str(path)!r} is not a file: pass the path of a file")
    try:
        with zipfile.ZipFile(path) as z:  # torch.load does not check the CRCs that torch.save writes
            damaged = z.testzip()
        if damaged is not None:
            raise ValueError(f"its record {damaged} is damaged")
        state = torch.load(path, map_location=device, weights_only=True)
        ours = state["key"] == key
    except Exception as exc:  # noqa: BLE001 - damaged, foreign, or a pickle that is not plain data
        raise CheckpointError(
            f"{str(path)!r} cannot be read as a tokensel checkpoint ({exc}): pass another path"
        ) from exc
    if not ours:
        raise CheckpointError(
            f"checkpoint {str(path)!r} belongs to another run (other data, initial parameters or settings): pass "
            "another path, or delete the file to start again"
        )
    return state
