"""Checksums of data files: a local parquet file is read only when its SHA-256 is the one its folder's
``MANIFEST.json`` records (``python -m tokensel manifest DIR`` writes one), else the published one in
:data:`KNOWN`."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

from ..errors import DataUnavailableError
from ..files import check_regular_file, describe_os_error, write_json_atomic

MANIFEST = "MANIFEST.json"

#: SHA-256 of the local copies laid out as ``TOKENSEL_DATA_DIR`` expects (their README lists the same)
KNOWN = {
    "imdb/train.parquet": "86ecb35985f29a88c7257d10dc7c88e870983a957d7157ecd0599014e076da78",
    "imdb/test.parquet": "1a55a2397d462bcf59c2028a9c9960a9fe63370862664d5b0c3304d97e2d3804",
    "yelp_polarity_sample/test.parquet": "a364877ea75926d0e079f0b21b95716f796ebfb176d33287ba01f162f67dcf9b",
}

_HEX64 = re.compile(r"[0-9a-f]{64}")


def sha256_file(path: str | Path, chunk: int = 1 << 20) -> str:
    """The SHA-256 of a file's bytes, as 64 lower-case hex digits."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(chunk), b""):
            h.update(block)
    return h.hexdigest()


def read_manifest(root: Path) -> dict | None:
    """The ``files`` table of ``root/MANIFEST.json`` (relative path -> SHA-256), None without a manifest."""
    path = root / MANIFEST
    if not path.exists() and not path.is_symlink():
        return None
    check_regular_file(path, "the manifest", DataUnavailableError)
    try:
        if path.stat().st_size > 2**24:
            raise DataUnavailableError(
                f"{str(path)!r} is larger than 16 MiB: not a manifest; write it again with "
                "`python -m tokensel manifest <folder>`."
            )
        data = json.loads(path.read_text(encoding="utf-8"))
    except DataUnavailableError:
        raise
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        raise DataUnavailableError(
            f"{str(path)!r} is not a readable JSON manifest ({type(exc).__name__}: {exc}); "
            "write it again with `python -m tokensel manifest <folder>`."
        ) from exc
    files = data.get("files") if isinstance(data, dict) else None
    if not isinstance(files, dict):
        raise DataUnavailableError(
            f"{str(path)!r} has no 'files' table of checksums; write it again with "
            "`python -m tokensel manifest <folder>`."
        )
    for rel, digest in files.items():
        if not isinstance(rel, str) or not isinstance(digest, str) or not _HEX64.fullmatch(digest):
            raise DataUnavailableError(
                f"{str(path)!r}: entry {rel!r}: {digest!r} is not a SHA-256 (64 lower-case hex "
                "digits); write the manifest again with `python -m tokensel manifest <folder>`."
            )
    return dict(files)


def _expected(root: Path, rel: str) -> tuple[str, str]:
    files = read_manifest(root)
    if files is not None and rel in files:
        return files[rel], f"{root / MANIFEST}"
    if rel in KNOWN:
        return KNOWN[rel], "the published checksum of the project's copy, tokensel.data.manifest.KNOWN"
    raise DataUnavailableError(
        f"no checksum is known for {str(root / rel)!r}: the data folder has no {MANIFEST} entry for it. If the "
        f"file is what you mean to use, record it with `python -m tokensel manifest {root}`."
    )


def _mismatch(root: Path, rel: str, got: str, expected: str, origin: str) -> DataUnavailableError:
    return DataUnavailableError(
        f"{str(root / rel)!r} has SHA-256 {got}, but {expected} is expected ({origin}): the file is damaged, "
        "truncated or another version. Fetch the file again; if you changed it on purpose, record the new "
        f"checksum with `python -m tokensel manifest {root}`."
    )


def _regular(root: Path, rel: str) -> Path:
    path = root / rel
    if not path.exists():
        raise DataUnavailableError(
            f"{str(path)!r} does not exist: the data folder needs {rel} (see the "
            "README's data section for where the files come from)"
        )
    return check_regular_file(path, "the data file", DataUnavailableError)


def verify(root: Path, rel: str) -> str:
    """The SHA-256 of ``root/rel``, checked against the expected one."""
    path = _regular(root, rel)
    expected, origin = _expected(root, rel)
    try:
        got = sha256_file(path)
    except OSError as exc:
        raise DataUnavailableError(f"{str(path)!r} cannot be read ({describe_os_error(exc)}).") from exc
    if got != expected:
        raise _mismatch(root, rel, got, expected, origin)
    return got


def read_verified(root: Path, rel: str, max_bytes: int = 2**32) -> tuple[bytes, str]:
    """The bytes of ``root/rel`` and their SHA-256, read once and checked: what is parsed is what was checked."""
    path = _regular(root, rel)
    expected, origin = _expected(root, rel)
    try:
        with open(path, "rb") as fh:
            data = fh.read(max_bytes + 1)
    except OSError as exc:
        raise DataUnavailableError(f"{str(path)!r} cannot be read ({describe_os_error(exc)}).") from exc
    if len(data) > max_bytes:
        raise DataUnavailableError(f"{str(path)!r} is larger than {max_bytes:,} bytes: not a data file of this book.")
    got = hashlib.sha256(data).hexdigest()
    if got != expected:
        raise _mismatch(root, rel, got, expected, origin)
    return data, got


def write_manifest(root: Path, extra: dict | None = None) -> Path:
    """Write ``root/MANIFEST.json`` with the SHA-256 of every ``*.parquet`` file under ``root``."""
    if not root.is_dir():
        raise DataUnavailableError(f"{str(root)!r} is not a folder; give the data folder to record.")
    files = {}
    try:
        for p in sorted(root.rglob("*.parquet")):
            files[p.relative_to(root).as_posix()] = sha256_file(
                check_regular_file(p, "the data file", DataUnavailableError)
            )
    except DataUnavailableError:
        raise
    except OSError as exc:
        raise DataUnavailableError(f"{str(root)!r} cannot be read ({describe_os_error(exc)}).") from exc
    if not files:
        raise DataUnavailableError(f"{str(root)!r} holds no .parquet file to record.")
    write_json_atomic(root / MANIFEST, {"files": files, **(extra or {})})
    return root / MANIFEST
