"""Command line: ``python -m tokensel <command>``.

* ``data [NAME ...]``: fetch the data sets the book reads (``imdb``, ``yelp_polarity``), as the chapters
  will, and print their sizes, columns and sources.
* ``manifest DIR``: record the SHA-256 of every parquet file of a data folder of your own in
  ``DIR/MANIFEST.json``.
* ``imdb-mirror DATA_DIR ARCHIVE``: write ``DATA_DIR/imdb/{train,test}.parquet`` back into the original
  ``aclImdb_v1.tar.gz`` layout (an offline mirror).

The book's commands (verify, replicate, student, grade, ...) are ``python -m tokensel_book``'s.
"""

from __future__ import annotations

import argparse

from .files import command_failed, existing, writable


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m tokensel", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = ap.add_subparsers(dest="command", required=True)
    d = sub.add_parser("data", help="fetch and prepare the data sets the book uses")
    d.add_argument("names", nargs="*", default=["imdb", "yelp_polarity"])
    m = sub.add_parser("manifest", help="record the checksums of a data folder's parquet files")
    m.add_argument("folder")
    im = sub.add_parser("imdb-mirror", help="write local IMDB parquet files in the original archive layout")
    im.add_argument("data_dir")
    im.add_argument("archive")
    args = ap.parse_args(argv)

    try:
        if args.command == "data":
            from .data.loaders import SOURCES, load_reviews
            from .errors import DataUnavailableError

            for name in args.names:
                if name not in SOURCES:
                    ap.error(f"unknown data set {name!r}; known: {', '.join(sorted(SOURCES))}")
                for split in ("train", "test"):
                    try:
                        ds = load_reviews(name, split)
                    except DataUnavailableError:
                        if split == "train" and name == "yelp_polarity":  # the local sample has a test split only
                            print(f"{name}/train: none (the local sample is split into train and test by the book)")
                            continue
                        raise
                    print(
                        f"{name}/{split}: {ds.num_rows:,} reviews, columns {', '.join(ds.column_names)}; "
                        f"{ds.info.description}"
                    )
            return 0
        if args.command == "manifest":
            from .data.manifest import write_manifest

            print(f"wrote {write_manifest(existing(args.folder, 'folder', 'the data folder'))}")
            return 0
        if args.command == "imdb-mirror":
            import pyarrow.parquet as pq

            from .data.imdb_archive import write_archive
            from .data.manifest import sha256_file, verify

            root = existing(args.data_dir, "folder", "the data folder")
            archive = writable(args.archive, "file", "the archive")
            tables = {}
            for split in ("train", "test"):
                verify(root, f"imdb/{split}.parquet")
                tables[split] = pq.read_table(root / "imdb" / f"{split}.parquet")
            path = write_archive(tables, archive)
            print(f"wrote {path} (SHA-256 {sha256_file(path)})")
            return 0
    except Exception as exc:  # noqa: BLE001 - the command line never shows a traceback
        return command_failed(exc, args.command)
    return 2


if __name__ == "__main__":
    raise SystemExit(main())
