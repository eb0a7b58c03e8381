"""Command line: ``python -m tokensel <command>``.

* ``verify [RESULTS_DIR] [--chapters A,B]``: check a built book's claim records
  (:func:`tokensel.book.verification.verify`); exits 1 naming every failed claim and unfinished chapter.
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
* ``format [--check] [PAGE ...]``: fix and format the code cells of the chapters (default ``book/*.md``) with
  ruff under the project's configuration (:mod:`tokensel.book.formatting`), and print what ruff cannot fix;
  ``--check`` changes nothing and exits 1 naming the pages that are not formatted and every lint finding.
* ``replicate [--chapters ...] [--seeds N] [--out DIR] [--scheduler ADDRESS] ...``: execute chapters at fresh
  seeds, each (chapter, seed) a Dask task, and summarise in how many seeds each claim held
  (:mod:`tokensel.book.replication`; ``--help`` lists the options).
* ``assignments [OUT]``: write the chapters as student notebooks with self-checks and no solutions
  (default ``_build/assignments``; :mod:`tokensel.book.assignments`).
* ``grade ASSIGNMENTS SUBMISSIONS [--out CSV]``: grade ``SUBMISSIONS/<student>/<chapter>.ipynb`` against the
  assignments (each executed in a fresh kernel); a submission that is not a readable notebook is graded
  ``missing`` and named.
* ``imdb-mirror DATA_DIR ARCHIVE``: write ``DATA_DIR/imdb/{train,test}.parquet`` back into the original
  ``aclImdb_v1.tar.gz`` layout (an offline mirror; also what CI feeds to ``TOKENSEL_IMDB_ARCHIVE``).
"""

from __future__ import annotations

import argparse
import os
import stat
import sys
from pathlib import Path


class UsageError(Exception):
    """A path given on the command line that cannot be what the command needs."""


def _kind(path: Path) -> str | None:
    """What is at ``path`` (following links): None when nothing is, else 'file', 'folder', 'a FIFO', ..."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return "a dangling link" if os.path.islink(path) else None
    except NotADirectoryError:  # under a file: nothing is, or can be, there
        return None
    except OSError as exc:
        raise UsageError(f"{str(path)!r} cannot be examined ({exc.strerror or exc})") from exc
    if stat.S_ISREG(mode):
        return "file"
    if stat.S_ISDIR(mode):
        return "folder"
    return "a FIFO" if stat.S_ISFIFO(mode) else "a socket" if stat.S_ISSOCK(mode) else "a device"


def _at(value: str, at: Path | None) -> Path:
    """``value`` as a path, a relative one taken from the folder ``at`` (default: the working directory)."""
    path = Path(value)
    return path if at is None or path.is_absolute() else at / path


def _existing(value: str, want: str, what: str, at: Path | None = None) -> Path:
    """``value`` (relative to ``at``, if given) as a path to an existing, readable ``want`` ('file' or
    'folder'), never opened if it is not one (a FIFO would block)."""
    if not value:
        raise UsageError(f"{what}: an empty path names nothing; give the path of a {want}")
    path = _at(value, at)
    kind = _kind(path)
    if kind is None:
        raise UsageError(f"{what} {value!r} does not exist")
    if kind != want:
        raise UsageError(f"{what} {value!r} is {'a ' + kind if kind in ('file', 'folder') else kind}, not a {want}")
    if not os.access(path, os.R_OK | (os.X_OK if want == "folder" else 0)):
        raise UsageError(f"{what} {value!r} is not readable")
    return path


def _output(value: str, want: str, what: str, at: Path | None = None) -> Path:
    """``value`` (relative to ``at``, if given) as a place to write a ``want`` ('file' or 'folder'): nothing
    else may be in its place."""
    if not value:
        raise UsageError(f"{what}: an empty path names nothing; give the path of a {want}")
    path = _at(value, at)
    kind = _kind(path)
    if kind is not None and kind != want:
        raise UsageError(f"{what} {value!r} is {'a ' + kind if kind in ('file', 'folder') else kind}, not a {want}")
    for parent in path.absolute().parents:
        pk = _kind(parent)
        if pk is None:
            continue
        if pk != "folder":
            raise UsageError(f"{what} {value!r} cannot be written: {str(parent)!r} is {pk}, not a folder")
        break
    return path


def _book() -> Path:
    """The book's root at or above the working directory: refuses to act outside a book."""
    from .book.records import book_root

    root = book_root()
    if _kind(root / "_config.yml") != "file" or _kind(root / "_toc.yml") != "file":
        raise UsageError(
            f"{str(Path.cwd())!r} is not inside a book (no _config.yml and _toc.yml here or above): "
            "run this from the project folder"
        )
    return root


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["replicate"]:
        return _replicate(argv[1:])
    ap = argparse.ArgumentParser(
        prog="python -m tokensel", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = ap.add_subparsers(dest="command", required=True)
    v = sub.add_parser("verify", help="check the claim records of a built book")
    v.add_argument("results_dir", nargs="?", help="the folder of claim records (default: the book's, _build/checks)")
    v.add_argument("--chapters", metavar="A,B", help="expect these chapters only (each with the claims of its source)")
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
    asg = sub.add_parser("assignments", help="write the chapters as student notebooks with self-checks (no solutions)")
    asg.add_argument("out", nargs="?", default="_build/assignments")
    gr = sub.add_parser("grade", help="grade a class's notebooks: SUBMISSIONS/<student>/<chapter>.ipynb")
    gr.add_argument("assignments")
    gr.add_argument("submissions")
    gr.add_argument("--out", default="grades.csv", help="the CSV file of verdicts (default grades.csv)")
    gr.add_argument("--timeout", type=int, default=1800, help="seconds a cell may run (default 1800)")
    fm = sub.add_parser(
        "format", help="fix and format the code cells of the chapters with ruff (the project's configuration)"
    )
    fm.add_argument("--check", action="store_true", help="change nothing; exit 1 naming unformatted pages")
    fm.add_argument("pages", nargs="*")
    im = sub.add_parser("imdb-mirror", help="write local IMDB parquet files in the original archive layout")
    im.add_argument("data_dir")
    im.add_argument("archive")
    sub.add_parser("replicate", help="execute chapters at fresh seeds on Dask (see `replicate --help`)")
    args = ap.parse_args(argv)

    try:
        if args.command == "verify":
            from .book.records import book_results_dir
            from .book.verification import main as verify_main

            _book()  # the claims each chapter must record are read from the book's pages
            if args.results_dir is not None:
                results = _existing(args.results_dir, "folder", "the results folder")
            elif _kind(book_results_dir()) is None:
                raise UsageError(f"the book has no claim records ({str(book_results_dir())!r}): build it first")
            else:
                results = _existing(str(book_results_dir()), "folder", "the book's results folder")
            chapters = ["--chapters", args.chapters] if args.chapters is not None else []
            return verify_main(["verify", str(results), *chapters])
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
        if args.command == "contents":
            from .book.sphinx_roadmap import contents_markdown

            print(contents_markdown(_book()))
            return 0
        if args.command == "pdf":
            from .book.pdf import print_book
            from .book.toc import toc_files

            root = _book()
            html = _existing(args.html_dir, "folder", "the built book")
            _existing(str(html / "index.html"), "file", "the built book's front page")
            out = print_book(html, _output(args.out, "file", "the PDF"), toc_files(root))
            print(f"wrote {out} ({out.stat().st_size / 2**20:.1f} MiB)")
            return 0
        if args.command == "student":
            from .book.student import prepare_student_sources

            root = _book()
            built = _existing(args.build_dir, "folder", "the build folder")
            out = _output(args.out, "folder", "the student edition's folder")
            if _kind(out) == "folder" and any(out.iterdir()) and _kind(out / "_toc.yml") != "file":
                raise UsageError(
                    f"the student edition's folder {args.out!r} holds files that are not a student "
                    "edition (it is emptied first): give a new or empty folder"
                )
            print(f"wrote the student edition's sources to {prepare_student_sources(root, built, out)}")
            return 0
        if args.command == "assignments":
            from .book.assignments import write_assignments

            written = write_assignments(_book(), _output(args.out, "folder", "the assignments' folder"))
            print(f"wrote {len(written)} assignments to {args.out} (and README.md: how to grade them)")
            return 0
        if args.command == "grade":
            from collections import Counter

            from .book.assignments import grade

            rows = grade(
                _existing(args.assignments, "folder", "the assignments"),
                _existing(args.submissions, "folder", "the submissions"),
                _output(args.out, "file", "the grades"),
                timeout=args.timeout,
            )
            right = Counter(r["student"] for r in rows if r["verdict"] == "right")
            total = Counter(r["student"] for r in rows)
            unreadable = {(r["student"], r["chapter"]) for r in rows if r["error"].startswith("unreadable:")}
            for student in sorted(total):
                bad = sorted(chapter for who, chapter in unreadable if who == student)
                note = f" (unreadable, graded missing: {', '.join(bad)})" if bad else ""
                print(f"{student}: {right[student]} of {total[student]} answers right{note}")
            print(f"wrote {args.out}")
            return 0
        if args.command == "format":
            from .book.formatting import format_pages, lint_findings, unformatted

            if args.pages:
                pages = [str(_existing(page, "file", "the page")) for page in args.pages]
            else:
                pages = sorted(str(p) for p in (_book() / "book").glob("*.md"))
                if not pages:
                    raise UsageError("the book has no chapters (book/*.md) to format")
            if args.check:
                bad = unformatted(pages)
                for page in bad:
                    print(f"not formatted: {page} (run `python -m tokensel format`)")
                findings = lint_findings(pages)
                for line in findings:
                    print(f"lint: {line}")
                return 1 if bad or findings else 0
            for page in format_pages(pages):
                print(f"formatted {page}")
            for line in lint_findings(pages):
                print(f"{line} (ruff cannot fix this one: change the code)")
            return 0
        if args.command == "manifest":
            from .data.manifest import write_manifest

            print(f"wrote {write_manifest(_existing(args.folder, 'folder', 'the data folder'))}")
            return 0
        if args.command == "imdb-mirror":
            import pyarrow.parquet as pq

            from .data.imdb_archive import write_archive
            from .data.manifest import sha256_file, verify

            root = _existing(args.data_dir, "folder", "the data folder")
            _output(args.archive, "file", "the archive")
            tables = {}
            for split in ("train", "test"):
                verify(root, f"imdb/{split}.parquet")
                tables[split] = pq.read_table(root / "imdb" / f"{split}.parquet")
            path = write_archive(tables, args.archive)
            print(f"wrote {path} (SHA-256 {sha256_file(path)})")
            return 0
    except Exception as exc:  # noqa: BLE001 - the command line never shows a traceback
        return _failed(exc, args.command)
    return 2


class _Refused(Exception):
    """The replicate options could not be read here: the replicate command's own parser reports it."""


class _Options(argparse.ArgumentParser):
    def error(self, message):
        raise _Refused(message)


def _replicate_paths(argv: list[str], root: Path) -> None:
    """Check the paths among replicate's options before anything runs (no Dask cluster is started for a bad
    path): ``--out`` a folder or a place for one (with ``--summary``, an existing folder), ``--compare`` an
    existing folder. Options the command's own parser would refuse are left to it."""
    from .book.replication import RECORDED

    ap = _Options(add_help=False)
    ap.add_argument("--out", default=str(RECORDED))
    ap.add_argument("--compare")
    ap.add_argument("--summary", action="store_true")
    try:
        args, _ = ap.parse_known_args(argv)
    except _Refused:
        return

    if args.summary:
        _existing(args.out, "folder", "--out (the replication's folder)", at=root)
    else:
        _output(args.out, "folder", "--out (the replication's folder)", at=root)
    if args.compare is not None:
        _existing(args.compare, "folder", "--compare (the replication to compare with)", at=root)


def _replicate(argv: list[str]) -> int:
    """``python -m tokensel replicate ...``: the paths checked first, every error one line."""
    from .book.records import book_root

    try:
        root = book_root()
        _replicate_paths(argv, root)
        from .book.replication import main as replicate_main
        from .book.verification import checked_chapters

        chapters = checked_chapters(root) if os.path.lexists(root / "_toc.yml") else None
        return replicate_main(argv, root=root, default_chapters=chapters)
    except Exception as exc:  # noqa: BLE001 - the command line never shows a traceback
        return _failed(exc, "replicate")


def _failed(exc: Exception, command: str) -> int:
    """Say why ``command`` failed in one line on stderr (no traceback) and give its exit status, 1."""
    from .errors import TokenselError

    if isinstance(exc, (TokenselError, UsageError)):
        print(f"error: {_one_line(exc)}", file=sys.stderr)
    elif isinstance(exc, OSError):  # the file system refused (read-only, full, permissions)
        where = f" {exc.filename!r}" if getattr(exc, "filename", None) else ""
        print(f"error:{where} {exc.strerror or exc} ({type(exc).__name__})", file=sys.stderr)
    else:
        print(f"error: {command} failed: {type(exc).__name__}: {_one_line(exc)}", file=sys.stderr)
    return 1


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text if len(text) <= 2000 else text[:1997] + "..."


if __name__ == "__main__":
    raise SystemExit(main())
