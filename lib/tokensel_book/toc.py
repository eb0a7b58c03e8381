"""The book's table of contents (``_toc.yml``), the one list of its pages: their order, their chapter numbers
and their sources.

``_toc.yml`` is read strictly: a missing or unreadable file raises :class:`~tokensel.errors.StorageError`, one
that is not a table of contents of Jupyter Book (not YAML, no ``root``, an entry that is not a ``file:`` or
``url:`` mapping, a ``glob:`` entry, whose pages no tool of the book could list) raises
:class:`~tokensel.errors.InvalidArgumentError`; each names ``_toc.yml`` and the fix. A page listed in it whose
``.md`` source cannot be read is never skipped (:func:`page_sources`).
"""

from __future__ import annotations

import os
from pathlib import Path

from tokensel.errors import InvalidArgumentError, StorageError
from tokensel.files import check_regular_file

from .records import book_root

TOC = "_toc.yml"


def _load(root: Path) -> dict:
    """``_toc.yml`` of the book at ``root`` as a mapping with a ``root`` page."""
    import yaml

    path = Path(root) / TOC
    if not os.path.lexists(path):
        raise StorageError(
            f"no {TOC} in {str(root)!r}: this is not the folder of a book; run from the book's folder "
            "(where _config.yml and _toc.yml are)"
        )
    check_regular_file(path, f"the book's table of contents {TOC}")
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise StorageError(f"the book's table of contents {str(path)!r} cannot be read ({exc})") from exc
    except UnicodeDecodeError as exc:
        raise InvalidArgumentError(f"{str(path)!r} is not UTF-8 text ({exc}): fix {TOC}") from exc
    try:
        toc = yaml.safe_load(text)
    except (yaml.YAMLError, RecursionError) as exc:
        raise InvalidArgumentError(
            f"{str(path)!r} is not valid YAML ({' '.join(str(exc).split())[:200]}): fix {TOC}"
        ) from exc
    if not isinstance(toc, dict) or not isinstance(toc.get("root"), str) or not toc["root"].strip():
        raise InvalidArgumentError(
            f"{str(path)!r} is not a table of contents of Jupyter Book (a mapping with `root: PAGE`): fix {TOC}"
        )
    return toc


def _entries(entries, where: str, path: Path) -> list[dict]:
    if entries is None:
        return []
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise InvalidArgumentError(f"{str(path)!r}: {where} must be a list of entries (`- file: PAGE`): fix {TOC}")
    for e in entries:
        if "glob" in e:
            raise InvalidArgumentError(
                f"{str(path)!r}: {where} has a `glob: {e['glob']}` entry; list each page with `file:` "
                "(the book reads its pages from this list alone): fix " + TOC
            )
        if "file" in e:
            if not isinstance(e["file"], str) or not e["file"].strip():
                raise InvalidArgumentError(f"{str(path)!r}: {where} has a `file:` that is not a page name: fix {TOC}")
        elif "url" not in e:
            raise InvalidArgumentError(
                f"{str(path)!r}: {where} has an entry with neither `file:` nor `url:` ({e!r:.80}): fix {TOC}"
            )
    return entries


def _page(f: str) -> str:
    return str(Path(f).with_suffix("")) if Path(f).suffix in (".md", ".ipynb") else f


def toc_files(root: Path | None = None) -> list[str]:
    """The book's pages as listed in ``_toc.yml`` (the one list of chapters), in order: paths relative to
    the book's root without suffix (``"book/01_model"``), the root page first."""
    root = root or book_root()
    path = Path(root) / TOC
    toc = _load(root)
    files = [toc["root"]]

    def walk(entries, where):
        for e in _entries(entries, where, path):
            if "file" in e:
                files.append(e["file"])
            walk(e.get("sections"), f"the sections of {e.get('file', e.get('url'))!r}")

    walk(toc.get("chapters"), "chapters")
    parts = toc.get("parts") or []
    if not isinstance(parts, list) or not all(isinstance(p, dict) for p in parts):
        raise InvalidArgumentError(f"{str(path)!r}: parts must be a list of parts (`- caption: ...`): fix {TOC}")
    for k, part in enumerate(parts, 1):
        walk(part.get("chapters"), f"part {k}")
    return [_page(f) for f in files]


def toc_numbers(root: Path | None = None) -> dict[str, int]:
    """The chapter number of every page in a ``numbered`` part of ``_toc.yml`` (as the sidebar shows it):
    ``{"book/01_model": 1, ...}``; pages outside numbered parts are absent."""
    root = root or book_root()
    toc_files(root)  # the whole table is valid
    toc = _load(root)
    numbered = [
        e["file"]
        for part in toc.get("parts") or []
        if part.get("numbered")
        for e in part.get("chapters") or []
        if "file" in e
    ]
    if (toc.get("options") or {}).get("numbered"):
        numbered += [e["file"] for e in toc.get("chapters") or [] if "file" in e]
    return {page: k for k, page in enumerate((_page(f) for f in numbered), 1)}


def toc_chapters(root: Path | None = None) -> list[str]:
    """Chapter names (file stems) listed in the book's ``_toc.yml``, in order."""
    return [Path(f).stem for f in toc_files(root)]


def page_sources(root: Path | None = None) -> list[Path]:
    """The MyST ``.md`` source of every page of ``_toc.yml``, in order. A page whose source is missing, is
    a notebook (``.ipynb``) or anything but a readable file raises one
    :class:`~tokensel.errors.InvalidArgumentError` naming ``_toc.yml``, every such page and the fix: the
    build reads the claims each chapter makes from its source, so no page is ever skipped."""
    root = Path(root or book_root())
    out, bad = [], []
    for page in toc_files(root):
        src = root / f"{page}.md"
        if not os.path.lexists(src):
            if (root / f"{page}.ipynb").is_file():
                bad.append(
                    f"{page!r} is a notebook ({page}.ipynb), not a MyST page: write it as {page}.md "
                    f"(`jupytext --to myst {page}.ipynb`)"
                )
            else:
                bad.append(f"{page!r} has no source {page}.md: add the page or remove it from {TOC}")
            continue
        try:
            check_regular_file(src, "its source")
            with open(src, "rb"):
                pass
        except OSError as exc:  # StorageError too: a folder, a FIFO, a dangling link, no permission
            bad.append(f"{page!r}: {exc}")
            continue
        out.append(src)
    if bad:
        raise InvalidArgumentError(
            f"{str(root / TOC)!r} lists pages whose source cannot be read: "
            + "; ".join(bad)
            + f". Fix {TOC} or the pages."
        )
    return out
