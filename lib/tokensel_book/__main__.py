"""Command line of the book's machinery: ``python -m tokensel_book <command>`` (run from the project folder).

* ``verify [BUILD_DIR] [--chapters A,B]``: check the claims of a built book (default ``_build``); exits 1 naming
  every claim that does not hold and every chapter without a complete record.
* ``contents``: the book's contents, one line per page of ``_toc.yml`` with its title and summary.
* ``pdf [HTML_DIR] [OUT]``: print the built book to one PDF with headless Chromium.
* ``student [BUILD_DIR] [OUT]``: write the student edition's sources, without solutions.
* ``format [--check] [PAGE ...]``: fix and format the chapters' code cells with ruff.
* ``replicate ...``: execute chapters at fresh seeds on Dask (``replicate --help``).
* ``assignments [OUT]``: the chapters as student notebooks with self-checks and no solutions.
* ``grade ASSIGNMENTS SUBMISSIONS [--out CSV]``: grade ``SUBMISSIONS/<student>/<chapter>.ipynb``.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from tokensel.errors import InvalidArgumentError as UsageError
from tokensel.files import command_failed as _failed
from tokensel.files import existing as _existing
from tokensel.files import writable as _output


def _book() -> Path:
    """The book's root at or above the working directory: refuses to act outside a book."""
    from .toc import root_or_error

    return root_or_error()


def _ours(path: Path, starts: bytes, what: str) -> Path:
    """``path``, unless it is a file this command did not write (it writes over its own output only)."""
    if path.is_file():
        with open(path, "rb") as fh:
            if not fh.read(len(starts)) == starts:
                raise UsageError(f"{str(path)!r} exists and is not {what}: name another file or remove it")
    return path


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["replicate"]:
        return _replicate(argv[1:])
    ap = argparse.ArgumentParser(
        prog="python -m tokensel_book", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = ap.add_subparsers(dest="command", required=True)
    v = sub.add_parser("verify", help="check the claims of a built book")
    v.add_argument("build_dir", nargs="?", default="_build", help="the build folder (default _build)")
    v.add_argument("--chapters", metavar="A,B", help="verify these chapters only (book/01_model,...)")
    sub.add_parser("contents", help="print the book's contents (from _toc.yml and each page's summary)")
    pp = sub.add_parser("pdf", help="print the built book to one PDF with headless Chromium")
    pp.add_argument("html_dir", nargs="?", default="_build/html")
    pp.add_argument("out", nargs="?", default="_build/pdf/tokensel.pdf")
    pp.add_argument("--chapters-only", action="store_true", help="the landing page and the chapters, no reference")
    st = sub.add_parser("student", help="write the student edition's sources from a built book")
    st.add_argument("build_dir", nargs="?", default="_build")
    st.add_argument("out", nargs="?", default="_build/student")
    asg = sub.add_parser("assignments", help="write the chapters as student notebooks with self-checks (no solutions)")
    asg.add_argument("out", nargs="?", default="_build/assignments")
    gr = sub.add_parser("grade", help="grade a class's notebooks: SUBMISSIONS/<student>/<chapter>.ipynb")
    gr.add_argument("assignments")
    gr.add_argument("submissions")
    gr.add_argument("--out", default="grades.csv", help="the CSV file of verdicts (default grades.csv)")
    gr.add_argument("--timeout", type=int, default=600, help="seconds a cell may run (default 600)")
    fm = sub.add_parser(
        "format", help="fix and format the code cells of the chapters with ruff (the project's configuration)"
    )
    fm.add_argument("--check", action="store_true", help="change nothing; exit 1 naming unformatted pages")
    fm.add_argument("pages", nargs="*")
    sub.add_parser("replicate", help="execute chapters at fresh seeds on Dask (see `replicate --help`)")
    args = ap.parse_args(argv)

    try:
        if args.command == "verify":
            from .verification import summary, verify

            root = _book()
            build = _existing(args.build_dir, "folder", "the build folder", at=root)
            pages = None if args.chapters is None else [c.strip() for c in args.chapters.split(",") if c.strip()]
            print(summary(verify(root, build, pages)))
            return 0
        if args.command == "contents":
            from .sphinx_roadmap import contents_markdown

            print(contents_markdown(_book()))
            return 0
        if args.command == "pdf":
            from .pdf import print_book
            from .toc import reader_pages, toc_numbers

            root = _book()
            html = _existing(args.html_dir, "folder", "the built book")
            _existing(str(html / "index.html"), "file", "the built book's front page")
            pages = reader_pages(root)
            pages = (
                [p for i, p in enumerate(pages) if i == 0 or p in toc_numbers(root)] if args.chapters_only else pages
            )
            out = print_book(html, _ours(_output(args.out, "file", "the PDF"), b"%PDF", "a PDF"), pages)
            print(f"wrote {out} ({out.stat().st_size / 2**20:.1f} MiB)")
            return 0
        if args.command == "student":
            from .student import prepare_student_sources

            root = _book()
            built = _existing(args.build_dir, "folder", "the build folder")
            out = _output(args.out, "folder", "the student edition's folder")
            print(f"wrote the student edition's sources to {prepare_student_sources(root, built, out)}")
            return 0
        if args.command == "assignments":
            from .assignments import write_assignments

            written = write_assignments(_book(), _output(args.out, "folder", "the assignments' folder"))
            print(f"wrote {len(written)} assignments to {args.out} (and README.md: how to grade them)")
            return 0
        if args.command == "grade":
            from collections import Counter

            from .assignments import FIELDS, grade

            rows = grade(
                _book(),
                _existing(args.assignments, "folder", "the assignments"),
                _existing(args.submissions, "folder", "the submissions"),
                _ours(_output(args.out, "file", "the grades"), ",".join(FIELDS).encode(), "a grades file"),
                timeout=args.timeout,
            )
            right = Counter(r["student"] for r in rows if r["verdict"] == "right")
            for student in sorted({r["student"] for r in rows}):
                mine = [r for r in rows if r["student"] == student]
                notes = sorted({f"{r['chapter']}: {r['error'] or r['flag']}" for r in mine if r["error"] or r["flag"]})
                print(
                    f"{student}: {right[student]} of {len(mine)} answers right"
                    + (f" ({'; '.join(notes)})" if notes else "")
                )
            print(f"wrote {args.out}")
            return 0
        if args.command == "format":
            from .formatting import format_pages, lint_findings, unformatted

            if args.pages:
                pages = [str(_existing(page, "file", "the page")) for page in args.pages]
            else:
                pages = sorted(str(p) for p in (_book() / "book").glob("*.md"))
                if not pages:
                    raise UsageError("the book has no chapters (book/*.md) to format")
            if args.check:
                bad = unformatted(pages)
                for page in bad:
                    print(f"not formatted: {page} (run `python -m tokensel_book format`)")
                findings = lint_findings(pages)
                for line in findings:
                    print(f"lint: {line}")
                return 1 if bad or findings else 0
            for page in format_pages(pages):
                print(f"formatted {page}")
            for line in lint_findings(pages):
                print(f"{line} (ruff cannot fix this one: change the code)")
            return 0
    except Exception as exc:  # noqa: BLE001 - the command line never shows a traceback
        return _failed(exc, args.command)
    return 2


def _replicate(argv: list[str]) -> int:
    """``python -m tokensel_book replicate ...``: every error in one line."""
    from .toc import book_root

    try:
        root = book_root() or Path.cwd()
        from .replication import main as replicate_main
        from .verification import claiming_pages

        chapters = [Path(p).name for p in claiming_pages(root)] if os.path.lexists(root / "_toc.yml") else None
        return replicate_main(argv, root=root, default_chapters=chapters)
    except Exception as exc:  # noqa: BLE001 - the command line never shows a traceback
        return _failed(exc, "replicate")


if __name__ == "__main__":
    raise SystemExit(main())
