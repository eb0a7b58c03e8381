"""Real review data through Hugging Face ``datasets``. IMDB comes from ``TOKENSEL_IMDB_ARCHIVE`` when set, else
the local data folder (``data_dir`` or ``TOKENSEL_DATA_DIR``), else the Stanford archive, downloaded once; Yelp
polarity from the local folder's 1,000-review sample, else a stratified sample of the hub copy
(``TOKENSEL_YELP_SIZE``). A local file is read only when its SHA-256 is the expected one, so the data a
chapter reads are the data its claims were checked on; ``info.description`` says where they came from."""

from __future__ import annotations

import os
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .. import config
from ..errors import DataUnavailableError
from ..validation import Choice, FilePath, declare
from . import imdb_archive
from .manifest import read_verified

DATA_DIR_ENV = config.DATA_DIR


@dataclass(frozen=True)
class Source:
    hub_id: str
    local_files: dict
    note: str = ""


SOURCES = {
    "imdb": Source("aclImdb_v1.tar.gz", {"train": "imdb/train.parquet", "test": "imdb/test.parquet"}),
    "yelp_polarity": Source(
        config.DEFAULT_YELP_SOURCE,
        {"test": "yelp_polarity_sample/test.parquet"},
        note="the local copy is a real 1,000-review sample of the Yelp polarity test split",
    ),
}


def _fix_hint(name: str, split: str) -> str:
    if name == "imdb":
        return imdb_archive.HOW_TO_GET
    local = SOURCES[name].local_files.get(split, f"{name}/{split}.parquet")
    return (
        f"To get the data: on a machine that can reach the Hugging Face hub, leave {DATA_DIR_ENV} unset "
        f"(dataset {config.yelp_source()!r}, with HF_DATASETS_OFFLINE unset; or {config.YELP_SOURCE} naming "
        f"a local copy in the hub's layout), or set {DATA_DIR_ENV} to a folder holding '{local}'."
    )


def _datasets():
    with warnings.catch_warnings():
        # datasets imports tqdm.auto, which warns in a Jupyter kernel without ipywidgets
        warnings.filterwarnings("ignore", message="IProgress not found")
        import datasets
    return datasets


def _load_local(root: Path, rel: str, name: str, split: str):
    """One verified local parquet file as an in-memory dataset, and its SHA-256: the bytes checked are the bytes
    parsed (no second copy, such as ``datasets``' Arrow cache, could change in between)."""
    datasets = _datasets()
    if not root.is_dir():
        raise DataUnavailableError(
            f"data directory {str(root)!r} (from {DATA_DIR_ENV} or data_dir) does not exist "
            "or is not a folder. " + _fix_hint(name, split)
        )
    path = root / rel
    if not path.exists() and not path.is_symlink():
        raise DataUnavailableError(f"missing data file {str(path)!r}. " + _fix_hint(name, split))
    data, digest = read_verified(root, rel)
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(pa.BufferReader(data))
    except Exception as exc:  # pyarrow raises several types for damaged files
        raise DataUnavailableError(
            f"could not read {str(path)!r} as parquet ({type(exc).__name__}: {str(exc)[:160]}); the file may be "
            "corrupted or truncated: fetch it again."
        ) from exc
    if table.num_rows == 0:
        raise DataUnavailableError(
            f"{str(path)!r} is a valid parquet file with no rows: point "
            f"{DATA_DIR_ENV} at the full data. " + _fix_hint(name, split)
        )
    _check_columns(table, str(path))
    return datasets.Dataset(table, split=datasets.Split(split)), digest


def _check_columns(table, where: str) -> None:
    """The columns the book reads, refused rather than converted unless ``text`` holds valid strings, ``label``
    0 or 1, and (IMDB) ``rating`` 1-10 stars on the label's side and ``review_id`` whole numbers."""
    import pyarrow as pa
    import pyarrow.compute as pc

    def bad(msg):
        return DataUnavailableError(f"{where}: {msg}: the file is not a review table of this book; fetch it again.")

    names = set(table.column_names)
    if not {"text", "label"} <= names:
        raise bad(f"it lacks column(s) {sorted({'text', 'label'} - names)}; got {table.column_names}")
    for col in ("text", "label", "rating", "review_id"):
        if col in names and table.column(col).null_count:
            raise bad(f"column {col!r} has missing values")
    text = table.column("text").type
    if not (pa.types.is_string(text) or pa.types.is_large_string(text)):
        raise bad(f"column 'text' has type {text}, not strings")
    try:
        table.column("text").validate(full=True)  # invalid UTF-8 in a string column
    except (pa.ArrowInvalid, pa.ArrowException) as exc:
        raise bad(f"column 'text' is not valid UTF-8 ({str(exc)[:120]})") from exc
    for col in ("label", "rating", "review_id"):
        if col in names and not pa.types.is_integer(table.column(col).type):
            raise bad(f"column {col!r} has type {table.column(col).type}, not whole numbers")
    labels = set(table.column("label").unique().to_pylist())
    if not labels <= {0, 1}:
        raise bad(f"column 'label' holds {sorted(labels - {0, 1})[:5]}, not only 0 and 1")
    if "rating" in names:
        r = table.column("rating")
        neg = pc.equal(table.column("label"), 0)
        wrong = pc.or_(pc.or_(pc.less(r, 1), pc.greater(r, 10)), pc.if_else(neg, pc.greater(r, 4), pc.less(r, 7)))
        if pc.any(wrong).as_py():
            raise bad("column 'rating' holds values outside 1-4 for negative or 7-10 for positive reviews")


def stratified_sample(ds, n: int, seed: int = 0):
    """``n`` rows of ``ds`` in their order, each label keeping its share (largest remainders), by ``seed``."""
    labels = np.asarray(ds["label"])
    if n >= len(labels):
        return ds
    classes, counts = np.unique(labels, return_counts=True)
    quota = counts * n / len(labels)
    take = np.floor(quota).astype(int)
    take[np.argsort(-(quota - take), kind="stable")[: n - take.sum()]] += 1
    g = np.random.default_rng(seed)
    keep = np.concatenate(
        [g.choice(np.flatnonzero(labels == c), size=k, replace=False) for c, k in zip(classes, take, strict=True)]
    )
    return ds.select(np.sort(keep))


def _load_hub(name: str, split: str):
    datasets = _datasets()
    source = config.yelp_source()
    try:
        ds = datasets.load_dataset(source, split=split)
    except Exception as exc:
        raise DataUnavailableError(
            f"could not load {source!r} split {split!r} ({type(exc).__name__}: {exc}). " + _fix_hint(name, split)
        ) from exc
    # the hub's copy is read like a local file: its columns checked before anything is sampled or binned
    _check_columns(ds.data.table, f"{source} {split}")
    size, total = config.yelp_size(), ds.num_rows
    if size is None or size >= total:
        return ds, f"{name}/{split} from {source}: all {total:,} reviews"
    seed = {"train": 0, "test": 1}[split]
    return (
        stratified_sample(ds, size, seed=seed),
        f"{name}/{split} from {source}: a stratified sample of {size:,} of its {total:,} reviews "
        f"(seed {seed}; {config.YELP_SIZE}=full for all)",
    )


@declare(name=Choice(*SOURCES, what="data set"), split=Choice("train", "test"), data_dir=FilePath(allow_none=True))
def load_reviews(name: str, split: str = "train", data_dir: str | os.PathLike | None = None):
    """A review data set's split as a ``datasets.Dataset``: ``text``, ``label`` (0 or 1), for IMDB ``rating``
    (stars) and ``review_id``; ``info.description`` names the source by checksum, not by local path."""
    src = SOURCES[name]
    root = Path(data_dir).expanduser() if data_dir is not None else config.data_dir()
    archive, explicit = config.imdb_archive()
    if name == "imdb" and (root is None or (explicit and data_dir is None)):
        rel = src.local_files[split]
        folder = imdb_archive.prepare(archive)
        ds, digest = _load_local(folder, rel, name, split)
        desc = f"{name}/{split} parsed from {imdb_archive.describe(folder)}"
    elif root is not None:
        if split not in src.local_files:
            raise DataUnavailableError(
                f"the local data directory has no {split!r} split of {name!r} "
                f"(only {sorted(src.local_files)}; {src.note}). " + _fix_hint(name, split)
            )
        ds, digest = _load_local(root, src.local_files[split], name, split)
        desc = f"{name}/{split} from the local copy {src.local_files[split]} (SHA-256 {digest[:12]}...)" + (
            f" ({src.note})" if src.note else ""
        )
    else:
        ds, desc = _load_hub(name, split)
    missing = {"text", "label"} - set(ds.column_names)
    if missing:
        raise DataUnavailableError(f"{desc} lacks column(s) {sorted(missing)}; got {ds.column_names}")
    ds.info.description = desc
    return ds
