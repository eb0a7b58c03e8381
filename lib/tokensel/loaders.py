"""Real review data through Hugging Face ``datasets``.

``load_reviews(name, split)`` reads

* from the local data directory when one is configured (argument ``data_dir`` or the environment
  variable ``TOKENSEL_DATA_DIR``): ``load_dataset("parquet", data_files=...)`` on the files laid out
  as in ``shared/data`` (``imdb/{train,test}.parquet``, ``yelp_polarity_sample/test.parquet``);
* otherwise from the Hugging Face hub (``stanfordnlp/imdb``, ``fancyzhx/yelp_polarity``).

When neither works the error names both ways to fix it.
"""

from __future__ import annotations

import os
import warnings
from dataclasses import dataclass
from pathlib import Path

from .errors import DataUnavailableError, InvalidArgumentError
from .validation import check_choice, check_path

DATA_DIR_ENV = "TOKENSEL_DATA_DIR"


@dataclass(frozen=True)
class Source:
    hub_id: str
    local_files: dict
    note: str = ""


SOURCES = {
    "imdb": Source("stanfordnlp/imdb", {"train": "imdb/train.parquet", "test": "imdb/test.parquet"}),
    "yelp_polarity": Source(
        "fancyzhx/yelp_polarity", {"test": "yelp_polarity_sample/test.parquet"},
        note="the local copy is a real 1,000-review sample of the Yelp polarity test split",
    ),
}


def data_dir(data_dir: str | os.PathLike | None = None) -> Path | None:
    """The configured local data directory, or None when none is configured."""
    d = data_dir if data_dir is not None else os.environ.get(DATA_DIR_ENV) or None
    return None if d is None else Path(d).expanduser()


def _fix_hint(name: str, split: str) -> str:
    src = SOURCES[name]
    local = src.local_files.get(split, f"{name}/{split}.parquet")
    return (f"To fix: either set {DATA_DIR_ENV} to a directory holding '{local}' "
            f"(for example the project's ../shared/data), or run on a machine that can reach the "
            f"Hugging Face hub (dataset '{src.hub_id}', with HF_DATASETS_OFFLINE unset).")


def load_reviews(name: str, split: str = "train", data_dir: str | os.PathLike | None = None):
    """Load a review data set split as a :class:`datasets.Dataset` with columns ``text``, ``label``.

    ``label`` is 0 (negative) or 1 (positive); the local IMDB files also have ``rating``. The
    returned dataset's ``info.description`` says where the data came from.
    """
    with warnings.catch_warnings():
        # datasets imports tqdm.auto, which warns in a Jupyter kernel without ipywidgets
        warnings.filterwarnings("ignore", message="IProgress not found")
        import datasets

    if not isinstance(name, str) or name not in SOURCES:
        raise InvalidArgumentError(f"unknown data set {name!r}; known: {sorted(SOURCES)}")
    check_choice(split, "split", ("train", "test"))
    if data_dir is not None:
        check_path(data_dir, "data_dir")
    src = SOURCES[name]
    root = globals()["data_dir"](data_dir)
    if root is not None:
        if not root.is_dir():
            raise DataUnavailableError(
                f"data directory {str(root)!r} (from {DATA_DIR_ENV} or data_dir) does not exist. "
                + _fix_hint(name, split))
        if split not in src.local_files:
            raise DataUnavailableError(
                f"the local data directory has no {split!r} split of {name!r} "
                f"(only {sorted(src.local_files)}; {src.note}). " + _fix_hint(name, split))
        path = root / src.local_files[split]
        if not path.is_file():
            raise DataUnavailableError(f"missing data file {str(path)!r}. " + _fix_hint(name, split))
        import pyarrow.parquet as pq

        try:  # read the file's own metadata first: a damaged file is told apart from a cache problem
            rows = pq.read_metadata(str(path)).num_rows
        except Exception as exc:  # pyarrow raises several types for damaged files
            raise DataUnavailableError(
                f"could not read {str(path)!r} as parquet ({type(exc).__name__}: {exc}); the file may be "
                "corrupted or truncated: compare it with the checksums in the data README and fetch it again "
                "if they differ.") from exc
        if rows == 0:
            raise DataUnavailableError(f"{str(path)!r} is a valid parquet file with no rows: point "
                                       f"{DATA_DIR_ENV} at the full data. " + _fix_hint(name, split))
        try:
            ds = datasets.load_dataset("parquet", data_files={split: str(path)}, split=split)
        except OSError as exc:
            raise DataUnavailableError(
                f"{str(path)!r} is readable, but Hugging Face datasets could not prepare it in its cache "
                f"({type(exc).__name__}: {exc}): make the cache folder writable or point HF_DATASETS_CACHE at "
                "a writable folder.") from exc
        desc = f"{name}/{split} from local parquet {path}" + (f" ({src.note})" if src.note else "")
    else:
        try:
            ds = datasets.load_dataset(src.hub_id, split=split)
        except Exception as exc:
            raise DataUnavailableError(
                f"could not load {src.hub_id!r} split {split!r} from the Hugging Face hub "
                f"({type(exc).__name__}: {exc}). " + _fix_hint(name, split)) from exc
        desc = f"{name}/{split} from the Hugging Face hub ({src.hub_id})"
    missing = {"text", "label"} - set(ds.column_names)
    if missing:
        raise DataUnavailableError(f"{desc} lacks column(s) {sorted(missing)}; got {ds.column_names}")
    ds.info.description = desc
    return ds
