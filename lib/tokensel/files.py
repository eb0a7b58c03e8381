"""Files written so that a reader never sees half of one: unique temporary names and atomic renames,
file locks, and one error for every way the file system can refuse (:class:`~tokensel.errors.StorageError`:
a folder where a file belongs, a read-only or full disk, a dangling link, a FIFO where a file belongs)."""

from __future__ import annotations

import contextlib
import json
import os
import stat
import sys
import tempfile
from pathlib import Path

from .errors import InvalidArgumentError, StorageError, TokenselError
from .validation import FilePath, Instance, declare


def describe_os_error(exc: BaseException) -> str:
    """One line for an ``OSError``: its kind and message, without a traceback."""
    text = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
    return f"{type(exc).__name__}: {text.splitlines()[0][:160] if text else ''}"


def ensure_folder(folder: Path, what: str) -> Path:
    """``folder``, created if needed; anything else in its stead raises :class:`StorageError` naming ``what``."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise StorageError(
            f"{what} {str(folder)!r} cannot be used as a folder ({describe_os_error(exc)}): "
            "remove what is in its place or choose another folder."
        ) from exc
    if not folder.is_dir():
        raise StorageError(
            f"{what} {str(folder)!r} is not a folder: remove what is in its place or choose another folder."
        )
    return folder


def check_regular_file(path: Path, what: str, error=StorageError) -> Path:
    """``path`` if it is a regular file (after links); a folder, a FIFO, a device or a dangling link raises
    ``error`` naming ``what`` it is, without opening it (a FIFO would block the reader)."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError as exc:
        kind = "a dangling link" if os.path.islink(path) else "missing"
        raise error(f"{what} {str(path)!r} is {kind}: give the path of an existing file.") from exc
    except OSError as exc:
        raise error(f"{what} {str(path)!r} cannot be read ({describe_os_error(exc)}).") from exc
    if not stat.S_ISREG(mode):
        kind = (
            "a folder"
            if stat.S_ISDIR(mode)
            else "a FIFO"
            if stat.S_ISFIFO(mode)
            else "a socket"
            if stat.S_ISSOCK(mode)
            else "a device"
            if stat.S_ISCHR(mode) or stat.S_ISBLK(mode)
            else "not a file"
        )
        raise error(f"{what} {str(path)!r} is {kind}, not a regular file.")
    return path


@declare(path=FilePath(), data=Instance(dict, list, str, int, float, what="JSON data (a dict, list, string or number)"))
def write_json_atomic(path: Path, data) -> None:
    """Write ``data`` as JSON to ``path`` through a unique temporary file and an atomic rename: readers see the
    old or the new file, and a refusing file system raises :class:`StorageError`, leaving ``path`` as it was."""
    path = Path(path)
    ensure_folder(path.parent, "the folder of")
    text = json.dumps(data, indent=1)  # a value JSON cannot hold fails here, before any file is touched
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as exc:
        raise StorageError(
            f"cannot write {str(path)!r} ({describe_os_error(exc)}): make its folder writable or choose another."
        ) from exc
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        raise StorageError(f"cannot write {str(path)!r} ({describe_os_error(exc)}); it was left as it was.") from exc
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


@contextlib.contextmanager
def file_lock(path: Path, timeout: float = 120):
    """Hold the ``filelock.FileLock`` at ``path``, or raise :class:`StorageError` after ``timeout`` seconds."""
    from filelock import FileLock, Timeout

    path = Path(path)
    if path.is_dir():
        raise StorageError(f"the lock file {str(path)!r} is a folder: remove it (no tokensel run creates one).")
    lk = FileLock(str(path), timeout=timeout)
    try:
        lk.acquire()
    except Timeout as exc:
        raise StorageError(
            f"the lock {str(path)!r} is still held after {timeout:g} s: another process is using "
            "the same file; wait for it, or remove the lock file if no process holds it."
        ) from exc
    except OSError as exc:
        raise StorageError(
            f"cannot take the lock {str(path)!r} ({describe_os_error(exc)}): make its folder "
            "writable or choose another."
        ) from exc
    try:
        yield lk
    finally:
        lk.release()


def lock(directory: Path, name: str, timeout: float = 120):
    """The lock ``directory/name`` (the folder is created), as a context manager (:func:`file_lock`)."""
    directory = ensure_folder(directory, "the folder of the lock")
    return file_lock(directory / name, timeout=timeout)


# ---- paths and errors of the command lines (python -m tokensel, python -m tokensel_book)


def path_kind(path: Path) -> str | None:
    """What is at ``path`` (following links): None when nothing is, else 'file', 'folder', 'a FIFO', ..."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return "a dangling link" if os.path.islink(path) else None
    except NotADirectoryError:  # under a file: nothing is, or can be, there
        return None
    except OSError as exc:
        raise InvalidArgumentError(f"{str(path)!r} cannot be examined ({exc.strerror or exc})") from exc
    if stat.S_ISREG(mode):
        return "file"
    if stat.S_ISDIR(mode):
        return "folder"
    return "a FIFO" if stat.S_ISFIFO(mode) else "a socket" if stat.S_ISSOCK(mode) else "a device"


def _at(value: str, at: Path | None) -> Path:
    """``value`` as a path, a relative one taken from the folder ``at`` (default: the working directory)."""
    path = Path(value)
    return path if at is None or path.is_absolute() else at / path


def existing(value: str, want: str, what: str, at: Path | None = None) -> Path:
    """``value`` (relative to ``at``, if given) as a path to an existing, readable ``want`` ('file' or
    'folder'), never opened if it is not one (a FIFO would block)."""
    if not value:
        raise InvalidArgumentError(f"{what}: an empty path names nothing; give the path of a {want}")
    path = _at(value, at)
    kind = path_kind(path)
    if kind is None:
        raise InvalidArgumentError(f"{what} {value!r} does not exist")
    if kind != want:
        raise InvalidArgumentError(
            f"{what} {value!r} is {'a ' + kind if kind in ('file', 'folder') else kind}, not a {want}"
        )
    if not os.access(path, os.R_OK | (os.X_OK if want == "folder" else 0)):
        raise InvalidArgumentError(f"{what} {value!r} is not readable")
    return path


def writable(value: str, want: str, what: str, at: Path | None = None) -> Path:
    """``value`` (relative to ``at``, if given) as a place to write a ``want`` ('file' or 'folder'): nothing
    else may be in its place."""
    if not value:
        raise InvalidArgumentError(f"{what}: an empty path names nothing; give the path of a {want}")
    path = _at(value, at)
    kind = path_kind(path)
    if kind is not None and kind != want:
        raise InvalidArgumentError(
            f"{what} {value!r} is {'a ' + kind if kind in ('file', 'folder') else kind}, not a {want}"
        )
    for parent in path.absolute().parents:
        pk = path_kind(parent)
        if pk is None:
            continue
        if pk != "folder":
            raise InvalidArgumentError(f"{what} {value!r} cannot be written: {str(parent)!r} is {pk}, not a folder")
        break
    return path


def command_failed(exc: Exception, command: str) -> int:
    """Say why ``command`` failed in one line on stderr (no traceback) and give its exit status, 1."""
    if isinstance(exc, TokenselError):
        print(f"error: {one_line(exc)}", file=sys.stderr)
    elif isinstance(exc, OSError):  # the file system refused (read-only, full, permissions)
        where = f" {exc.filename!r}" if getattr(exc, "filename", None) else ""
        print(f"error:{where} {exc.strerror or exc} ({type(exc).__name__})", file=sys.stderr)
    else:
        print(f"error: {command} failed: {type(exc).__name__}: {one_line(exc)}", file=sys.stderr)
    return 1


def one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text if len(text) <= 2000 else text[:1997] + "..."
