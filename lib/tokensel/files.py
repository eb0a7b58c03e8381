"""Files written so that a reader never sees half of one: unique temporary names and atomic renames."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path


def write_json_atomic(path: Path, data) -> None:
    """Write ``data`` as JSON to ``path`` through a uniquely named temporary file in the same folder and
    an atomic rename: readers see the old or the new file, never a part, and concurrent writers never
    collide on the temporary name."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as fh:
            json.dump(data, fh, indent=1)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def lock(directory: Path, name: str, timeout: float = 120):
    """A :class:`filelock.FileLock` on ``directory/name`` (the folder is created)."""
    from filelock import FileLock

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    return FileLock(str(directory / name), timeout=timeout)
