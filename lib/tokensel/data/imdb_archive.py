"""IMDB from its canonical archive, ``aclImdb_v1.tar.gz``, whose file names hold the star ratings that the hub
copy drops. :func:`prepare` fetches it (through ``datasets``' download manager), checks its SHA-256, parses it
once into a table and keeps that as parquet in a cache folder named by the checksum, sealed with a key so an
edited cache is parsed again. :func:`write_archive` writes a table back into the original layout (an offline
mirror, the tests' small archives)."""

from __future__ import annotations

import gzip
import hashlib
import hmac
import io
import json
import os
import re
import secrets
import shutil
import tarfile
import tempfile
import warnings
from pathlib import Path

from .. import config
from ..errors import DataUnavailableError, InvalidArgumentError, StorageError
from ..files import check_regular_file, describe_os_error, lock, write_json_atomic
from .manifest import MANIFEST, read_manifest, sha256_file, verify

#: SHA-256 of the Stanford release (84,125,825 bytes), as published with the data set's loaders
CANONICAL_SHA256 = "c40f74a18d3b61f90feba1e17730e0d38e8b97c05fde7008942e91923d1658fe"
#: bump when the parsed table changes: cached folders of another parser version are not reused
PARSER_VERSION = 1
SPLITS = ("train", "test")
_REVIEW_FOLDER = re.compile(r"^(?:\./)?aclImdb/(train|test)/(pos|neg)/([^/]*)$")
_REVIEW_NAME = re.compile(r"^([0-9]{1,9})_([0-9]{1,2})\.txt$", re.ASCII)
#: the longest IMDB review is 13,704 bytes: a review member larger than this is not a review
MAX_REVIEW_BYTES = 1 << 20
#: the archive unpacks to about 490 MB: members adding up to more are not the IMDB archive
MAX_ARCHIVE_BYTES = 4 << 30
_LABEL = {"neg": 0, "pos": 1}

HOW_TO_GET = (
    "To get IMDB: (1) on a machine with internet access, leave TOKENSEL_IMDB_ARCHIVE unset and "
    "HF_DATASETS_OFFLINE unset, and rerun: the 84 MB archive is downloaded once from "
    f"{config.CANONICAL_IMDB_URL} and cached under TOKENSEL_CACHE_DIR (default ~/.cache/tokensel); "
    "(2) or download aclImdb_v1.tar.gz yourself (or take a mirror of it) and set "
    "TOKENSEL_IMDB_ARCHIVE=/path/to/aclImdb_v1.tar.gz; (3) or set TOKENSEL_DATA_DIR to a folder holding "
    "imdb/train.parquet and imdb/test.parquet."
)


def _is_url(location: str) -> bool:
    return re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*://", location) is not None


def fetch(location: str) -> Path:
    """The archive at ``location`` (a path, or a URL downloaded into the cache once) as a local file."""
    if not _is_url(location) or location.startswith("file://"):
        path = Path(location).expanduser()
        if location.startswith("file://"):
            from urllib.parse import unquote, urlparse

            url = urlparse(location)
            if url.netloc not in ("", "localhost"):
                raise DataUnavailableError(f"the IMDB archive {location!r} is a file on another host: copy it here")
            path = Path(unquote(url.path))
        if not path.is_file():
            raise DataUnavailableError(
                f"the IMDB archive {str(path)!r} (TOKENSEL_IMDB_ARCHIVE) does not exist or is not a file. " + HOW_TO_GET
            )
        return path
    from datasets import DownloadConfig, DownloadManager

    cfg = DownloadConfig(cache_dir=str(config.cache_dir() / "downloads"), disable_tqdm=not config.progress())
    try:
        return Path(DownloadManager(download_config=cfg).download(location))
    except Exception as exc:  # offline, unreachable, missing HTTP backend: one message for all
        shown, said = config.redact(location), str(exc)[:300].replace(location, config.redact(location))
        raise DataUnavailableError(
            f"could not download the IMDB archive {shown!r} "
            f"({type(exc).__name__}: {config.redact_text(said)}). " + HOW_TO_GET
        ) from exc


def expected_sha256(location: str) -> str | None:
    """``TOKENSEL_IMDB_SHA256``, else the canonical checksum for the canonical URL, else None (not verified)."""
    given = config.imdb_sha256()
    if given is not None:
        return given
    return CANONICAL_SHA256 if location == config.CANONICAL_IMDB_URL else None


def parse_archive(path: str | Path) -> dict:
    """``{"train": table, "test": table}`` (``text``, ``label``, ``rating``, ``review_id``; rows by label, then
    id) from an archive in the original layout; anything that is not the IMDB archive is refused, naming the
    member, rather than parsed into data that only look like it."""
    import pyarrow as pa

    rows: dict[str, list[tuple[int, int, int, str]]] = {s: [] for s in SPLITS}
    seen = set()
    try:  # one pass through gzip's own reader, which raises on a truncated archive (tarfile's does not)
        gz = gzip.open(str(path), "rb")
        tar = tarfile.open(fileobj=gz, mode="r|")
        total = 0
        for member in tar:
            name = member.name
            total += max(member.size, 0)
            if total > MAX_ARCHIVE_BYTES:
                raise DataUnavailableError(
                    f"{str(path)!r}: its members add up to more than {MAX_ARCHIVE_BYTES:,} "
                    "bytes (the IMDB archive unpacks to about 490 MB): this is not the IMDB "
                    "archive."
                )
            m = _REVIEW_FOLDER.match(name)
            if m is None or not member.isfile():
                continue
            split, folder = m.group(1), m.group(2)
            f = _REVIEW_NAME.match(m.group(3))
            if f is None:
                raise DataUnavailableError(
                    f"{name[:200]}: a review of {split}/{folder} must be named <id>_<rating>.txt "
                    "(an id of at most 9 digits, a rating of 1-10): this is not the IMDB archive."
                )
            if member.size > MAX_REVIEW_BYTES:
                raise DataUnavailableError(
                    f"{name}: a review of {member.size:,} bytes (IMDB's longest has 13,704; at "
                    f"most {MAX_REVIEW_BYTES:,} are read): this is not the IMDB archive."
                )
            fh = tar.extractfile(member)
            assert fh is not None  # member.isfile(): tarfile gives a reader for every regular file
            rid, rating = int(f.group(1)), int(f.group(2))
            label = _LABEL[folder]
            if not (1 <= rating <= 10) or (label == 0 and rating > 4) or (label == 1 and rating < 7):
                raise DataUnavailableError(
                    f"{name}: rating {rating} does not fit the IMDB layout (negative reviews "
                    "are rated 1-4, positive 7-10): this is not the IMDB archive."
                )
            key = (split, label, rid)
            if key in seen:
                raise DataUnavailableError(f"{name}: review {rid} of {split}/{folder} occurs twice in the archive.")
            seen.add(key)
            try:
                text = fh.read(MAX_REVIEW_BYTES + 1).decode("utf-8")
            except UnicodeDecodeError as exc:
                raise DataUnavailableError(f"{name} is not UTF-8 text ({exc}): the archive is damaged.") from exc
            rows[split].append((label, rid, rating, text))
        while gz.read(1 << 20):  # to the end of the gzip stream, so that a cut after the last member shows
            pass
        tar.close()
        gz.close()
    except DataUnavailableError:  # refused for its content (an OSError too): said as it is
        raise
    except (tarfile.TarError, EOFError, OSError, gzip.BadGzipFile) as exc:
        raise DataUnavailableError(
            f"could not read {str(path)!r} as a .tar.gz archive ({type(exc).__name__}: {exc}); "
            "it may be truncated: fetch it again."
        ) from exc
    for split in SPLITS:
        labels = {r[0] for r in rows[split]}
        if labels != {0, 1}:
            raise DataUnavailableError(
                f"{str(path)!r} has no {split} reviews of label(s) {sorted({0, 1} - labels)} under "
                f"aclImdb/{split}/{{neg,pos}}/<id>_<rating>.txt: it is not in the original IMDB layout."
            )
    tables = {}
    for split in SPLITS:
        r = sorted(rows[split])
        tables[split] = pa.table(
            {
                "text": pa.array([x[3] for x in r], pa.string()),
                "label": pa.array([x[0] for x in r], pa.int64()),
                "rating": pa.array([x[2] for x in r], pa.int64()),
                "review_id": pa.array([x[1] for x in r], pa.int64()),
            }
        )
    return tables


def _seal_key(root: Path) -> bytes:
    """The cache's secret key (32 random bytes in ``root/.seal-key``, mode 0600), made once under the cache's
    lock and written whole or not at all (an empty key would refuse every later run)."""
    path = Path(root) / ".seal-key"
    if os.path.lexists(path):
        check_regular_file(path, "the cache's key", DataUnavailableError)
        try:
            key = path.read_bytes()
        except OSError as exc:
            raise StorageError(
                f"cannot read the IMDB cache's key {str(path)!r} ({describe_os_error(exc)}): make it readable, "
                "or remove it (the cache is then parsed again)."
            ) from exc
        if len(key) != 32:
            raise DataUnavailableError(f"{str(path)!r} is not a cache key: remove it (the cache is then parsed again).")
        return key
    key = secrets.token_bytes(32)
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(prefix=".seal-key.", suffix=".tmp", dir=root)  # mode 0600
        with os.fdopen(fd, "wb") as fh:
            fh.write(key)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
        raise StorageError(
            f"cannot write the IMDB cache's key {str(path)!r} ({describe_os_error(exc)}); nothing was written: "
            f"free space, make the cache writable, or point {config.CACHE_DIR} at a writable folder."
        ) from exc
    except BaseException:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
        raise
    return key


def seal(key: bytes, digest: str, files: dict, rows: dict) -> str:
    """The manifest's HMAC under the cache's key: a manifest rewritten to match edited files no longer matches,
    and a folder is tied to the archive it was parsed from."""
    body = json.dumps(
        {"archive_sha256": digest, "parser": PARSER_VERSION, "files": files, "rows": rows}, sort_keys=True
    ).encode()
    return hmac.new(key, body, hashlib.sha256).hexdigest()


def _valid_folder(folder: Path, digest: str, key: bytes) -> bool:
    """Whether a cached folder is complete, of this parser and archive, sealed, and matches its manifest."""
    try:
        meta = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
        files = read_manifest(folder)
        if files is None:  # the manifest is gone: the checks below would fail (TypeError) all the same
            return False
        if meta.get("archive_sha256") != digest or meta.get("parser") != PARSER_VERSION:
            return False
        if not isinstance(meta.get("seal"), str) or not hmac.compare_digest(
            meta["seal"], seal(key, digest, files, meta.get("rows"))
        ):
            return False
        for split in SPLITS:
            rel = f"imdb/{split}.parquet"
            if rel not in files:
                return False
            verify(folder, rel)
        return True
    except (OSError, ValueError, TypeError, DataUnavailableError, AttributeError, RecursionError):
        return False


def prepare(location: str | None = None, sha256: str | None = None, cache: str | Path | None = None) -> Path:
    """A data folder holding ``imdb/{train,test}.parquet`` parsed from the archive at ``location`` (default
    ``TOKENSEL_IMDB_ARCHIVE``, else the Stanford release); nothing is cached from one that fails its checksum."""
    if location is None:
        location = config.imdb_archive()[0]
    archive = fetch(location)
    expected = expected_sha256(location) if sha256 is None else sha256
    digest = sha256_file(archive)
    if expected is not None and digest != expected:
        given = "TOKENSEL_IMDB_SHA256" if config.imdb_sha256() else "the published checksum of the Stanford release"
        raise DataUnavailableError(
            f"the IMDB archive {str(archive)!r} (from {config.redact(location)}) has SHA-256 {digest}, not the "
            f"expected {expected} ({given}): it is truncated, damaged or another file, and nothing was parsed or "
            "cached. Fetch it again, or correct TOKENSEL_IMDB_SHA256 if the archive is a mirror you trust."
        )
    if expected is None and digest != CANONICAL_SHA256:
        warnings.warn(
            f"the IMDB archive {config.redact(location)} is not the Stanford release (SHA-256 {digest[:16]}...) and "
            "TOKENSEL_IMDB_SHA256 is not set, so it is used unverified",
            stacklevel=2,
        )
    root = Path(cache) if cache is not None else config.cache_dir() / "imdb"
    folder = root / f"{digest[:16]}-v{PARSER_VERSION}"
    with lock(root, ".prepare.lock", timeout=1800):
        key = _seal_key(root)
        if _valid_folder(folder, digest, key):
            return folder
        tables = parse_archive(archive)
        import pyarrow.parquet as pq

        try:
            tmp = Path(tempfile.mkdtemp(prefix=".parsing-", dir=root))
        except OSError as exc:
            raise StorageError(
                f"cannot write in the IMDB cache {str(root)!r} ({describe_os_error(exc)}): make it "
                f"writable or point {config.CACHE_DIR} at a writable folder."
            ) from exc
        try:
            (tmp / "imdb").mkdir()
            for split, table in tables.items():
                pq.write_table(table, tmp / "imdb" / f"{split}.parquet", compression="zstd")
            files = {f"imdb/{s}.parquet": sha256_file(tmp / "imdb" / f"{s}.parquet") for s in SPLITS}
            rows = {s: tables[s].num_rows for s in SPLITS}
            manifest: dict = dict(files=files, archive_sha256=digest, source=config.redact(location))
            manifest.update(verified=expected is not None, parser=PARSER_VERSION, rows=rows)
            write_json_atomic(tmp / MANIFEST, dict(manifest, seal=seal(key, digest, files, rows)))
            if folder.is_dir() and not folder.is_symlink():  # an incomplete or damaged earlier parse: ours to replace
                shutil.rmtree(folder)
            elif folder.exists() or folder.is_symlink():
                folder.unlink()
            os.replace(tmp, folder)
        except StorageError:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        except OSError as exc:  # a full disk, a read-only cache: nothing half-written is kept
            shutil.rmtree(tmp, ignore_errors=True)
            raise StorageError(
                f"cannot write the parsed IMDB table into {str(root)!r} ({describe_os_error(exc)}): "
                f"free space or point {config.CACHE_DIR} at another folder."
            ) from exc
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
    return folder


def describe(folder: Path) -> str:
    """Where a parsed folder came from, for a reader: the archive by name and checksum, never a local path."""
    meta = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
    digest = meta["archive_sha256"]
    which = (
        "the Stanford release"
        if digest == CANONICAL_SHA256
        else "a mirror, verified against TOKENSEL_IMDB_SHA256"
        if meta.get("verified")
        else "an unverified copy"
    )
    return f"aclImdb_v1.tar.gz (SHA-256 {digest[:12]}..., {which})"


def write_archive(tables: dict, path: str | Path, extras: bool = True) -> Path:
    """Write ``{"train": table, "test": table}`` (pyarrow, pandas or dicts of lists) as a ``.tar.gz`` in the
    original layout, with ``extras`` the members a parser must skip; the bytes depend on the tables only."""
    import pandas as pd

    members = []
    for split in SPLITS:
        t = tables[split]
        df = t.to_pandas() if hasattr(t, "to_pandas") else pd.DataFrame(t)
        for text, label, rating, rid in zip(df["text"], df["label"], df["rating"], df["review_id"], strict=True):
            folder = {0: "neg", 1: "pos"}.get(int(label))
            if folder is None:
                raise InvalidArgumentError(f"tables[{split!r}]: label {label!r} is not 0 or 1")
            members.append((f"aclImdb/{split}/{folder}/{int(rid)}_{int(rating)}.txt", str(text).encode("utf-8")))
    if extras:
        members += [
            ("aclImdb/README", b"Large Movie Review Dataset v1.0 (layout mirror)\n"),
            ("aclImdb/train/unsup/0_0.txt", b"An unlabelled review the parser must skip.\n"),
            ("aclImdb/train/labeledBow.feat", b"0 0:1\n"),
            ("aclImdb/imdb.vocab", b"the\n"),
        ]
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    with (
        open(tmp, "wb") as raw,
        gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as gz,
        tarfile.open(fileobj=gz, mode="w", format=tarfile.USTAR_FORMAT) as tar,
    ):
        for name, data in sorted(members):
            info = tarfile.TarInfo(name)
            info.size, info.mtime, info.mode = len(data), 0, 0o644
            tar.addfile(info, io.BytesIO(data))
    os.replace(tmp, path)
    return path
