"""Command line: ``python -m tokensel <command>``.

* ``verify [RESULTS_DIR]``: check a built book's claim records (:func:`tokensel.book.checks.verify`); exits 1
  naming every failed claim and unfinished chapter.
* ``data [NAME ...]``: fetch the data sets the book reads (``imdb``, ``yelp_polarity``), as the chapters
  will, and print their sizes, columns and sources.
* ``contents``: the book's contents, one line per page of ``_toc.yml`` with its title and summary (the
  README's list; run from the project folder).
* ``manifest DIR``: record the SHA-256 of every parquet file of a data folder of your own in
  ``DIR/MANIFEST.json``.
* ``pdf [HTML_DIR] [OUT]``: print the built book (default ``_build/html``) to one PDF (default
  ``_build/pdf/tokensel.pdf``) with headless Chromium (:mod:`tokensel.book.pdf`); run from the project folder.
* ``student [BUILD_DIR] [OUT]``: write the student edition's sources (the executed notebooks of ``BUILD_DIR``,
  default ``_build``, without solutions; :mod:`tokensel.book.student`) to ``OUT`` (default
  ``_build/student``), for ``jupyter-book build OUT``; ``make book-student`` runs both.
* ``format [--check] [PAGE ...]``: format the code cells of the chapters (default ``book/*.md``) with ruff's
  formatter (:mod:`tokensel.book.formatting`); ``--check`` changes nothing and exits 1 naming the pages
  that are not formatted.
* ``replicate [--chapters ...] [--seeds N] [--out DIR] [--scheduler ADDRESS] ...``: execute chapters at fresh
  seeds, each (chapter, seed) a Dask task, and summarise in how many seeds each claim held
  (:mod:`tokensel.book.replication`; ``--help`` lists the options).
* ``imdb-mirror DATA_DIR ARCHIVE``: write ``DATA_DIR/imdb/{train,test}.parquet`` back into the original
  ``aclImdb_v1.tar.gz`` layout (an offline mirror; also what CI feeds to ``TOKENSEL_IMDB_ARCHIVE``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["replicate"]:
        from .book.replication import main as replicate_main
        from .errors import TokenselError

        try:
            return replicate_main(argv[1:])
        except TokenselError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
    ap = argparse.ArgumentParser(prog="python -m tokensel", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="command", required=True)
    v = sub.add_parser("verify", help="check the claim records of a built book")
    v.add_argument("results_dir", nargs="?")
    d = sub.add_parser("data", help="fetch and prepare the data sets the book uses")
    d.add_argument("names", nargs="*", default=["imdb", "yelp_polarity"])
    m = sub.add_parser("manifest", help="record the checksums of a data folder's parquet files")
    m.add_argument("folder")
    sub.add_parser("contents", help="print the book's contents (from _toc.yml and each page's summary)")
    pp = sub.add_parser("pdf", help="print the built book to one PDF with headless Chromium")
    pp.add_argument("html_dir", nargs="?", default="_build/html")
    pp.add_argument("out", nargs="?", default="_build/pdf/tokensel.pdf")
    st = sub.add_parser("student", help="write the student edition's sources from a built book")
    st.add_argument("build_dir", nargs="?", default="_build")
    st.add_argument("out", nargs="?", default="_build/student")
    fm = sub.add_parser("format", help="format the code cells of the chapters with ruff's formatter")
    fm.add_argument("--check", action="store_true", help="change nothing; exit 1 naming unformatted pages")
    fm.add_argument("pages", nargs="*")
    im = sub.add_parser("imdb-mirror", help="write local IMDB parquet files in the original archive layout")
    im.add_argument("data_dir")
    im.add_argument("archive")
    sub.add_parser("replicate", help="execute chapters at fresh seeds on Dask (see `replicate --help`)")
    args = ap.parse_args(argv)

    from .errors import TokenselError

    try:
        if args.command == "verify":
            from .book.checks import main as verify_main

            return verify_main(["verify"] + ([args.results_dir] if args.results_dir else []))
        if args.command == "data":
            from .errors import DataUnavailableError
            from .loaders import SOURCES, load_reviews

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
                    print(f"{name}/{split}: {ds.num_rows:,} reviews, columns {', '.join(ds.column_names)}; "
                          f"{ds.info.description}")
            return 0
        if args.command == "contents":
            from .book.checks import book_root
            from .book.sphinx_roadmap import contents_markdown

            print(contents_markdown(book_root()))
            return 0
        if args.command == "pdf":
            from .book.checks import book_root, toc_files
            from .book.pdf import print_book

            out = print_book(args.html_dir, args.out, toc_files(book_root()))
            print(f"wrote {out} ({out.stat().st_size / 2**20:.1f} MiB)")
            return 0
        if args.command == "student":
            from .book.checks import book_root
            from .book.student import prepare_student_sources

            print(f"wrote the student edition's sources to {prepare_student_sources(book_root(), args.build_dir, args.out)}")
            return 0
        if args.command == "format":
            from .book.checks import book_root
            from .book.formatting import format_pages, unformatted

            pages = args.pages or sorted(str(p) for p in (book_root() / "book").glob("*.md"))
            if args.check:
                bad = unformatted(pages)
                for page in bad:
                    print(f"not formatted: {page} (run `python -m tokensel format`)")
                return 1 if bad else 0
            for page in format_pages(pages):
                print(f"formatted {page}")
            return 0
        if args.command == "manifest":
            from .manifest import write_manifest

            print(f"wrote {write_manifest(Path(args.folder))}")
            return 0
        if args.command == "imdb-mirror":
            import pyarrow.parquet as pq

            from .imdb_archive import write_archive
            from .manifest import sha256_file, verify

            root = Path(args.data_dir)
            tables = {}
            for split in ("train", "test"):
                verify(root, f"imdb/{split}.parquet")
                tables[split] = pq.read_table(root / "imdb" / f"{split}.parquet")
            path = write_archive(tables, args.archive)
            print(f"wrote {path} (SHA-256 {sha256_file(path)})")
            return 0
    except TokenselError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 2


if __name__ == "__main__":
    raise SystemExit(main())
