"""The book's table of contents (``_toc.yml``), the one list of its pages: their order, their chapter numbers
and their sources.
"""

from __future__ import annotations

from pathlib import Path

from .records import book_root


def toc_files(root: Path | None = None) -> list[str]:
    """The book's pages as listed in ``_toc.yml`` (the one list of chapters), in order: paths relative to
    the book's root without suffix (``"book/01_model"``), the root page first."""
    import yaml

    root = root or book_root()
    toc = yaml.safe_load((root / "_toc.yml").read_text())
    files = [toc["root"]]

    def walk(entries):
        for e in entries or []:
            if "file" in e:
                files.append(e["file"])
            walk(e.get("sections"))

    walk(toc.get("chapters"))
    for part in toc.get("parts", []):
        walk(part.get("chapters"))
    return [str(Path(f).with_suffix("")) if Path(f).suffix in (".md", ".ipynb") else f for f in files]


def toc_numbers(root: Path | None = None) -> dict[str, int]:
    """The chapter number of every page in a ``numbered`` part of ``_toc.yml`` (as the sidebar shows it):
    ``{"book/01_model": 1, ...}``; pages outside numbered parts are absent."""
    import yaml

    root = root or book_root()
    toc = yaml.safe_load((root / "_toc.yml").read_text())
    numbered = [
        e["file"]
        for part in toc.get("parts", [])
        if part.get("numbered")
        for e in part.get("chapters") or []
        if "file" in e
    ]
    if (toc.get("options") or {}).get("numbered"):
        numbered += [e["file"] for e in toc.get("chapters") or [] if "file" in e]
    strip = [str(Path(f).with_suffix("")) if Path(f).suffix in (".md", ".ipynb") else f for f in numbered]
    return {page: k for k, page in enumerate(strip, 1)}


def toc_chapters(root: Path | None = None) -> list[str]:
    """Chapter names (file stems) listed in the book's ``_toc.yml``, in order."""
    return [Path(f).stem for f in toc_files(root)]


def _page_source(root: Path, page: str) -> Path | None:
    """The ``.md`` source of a page of ``_toc.yml`` (``"book/01_model"``)."""
    direct = root / f"{page}.md"
    if direct.is_file():
        return direct
    found = [
        p for p in sorted(root.glob(f"**/{Path(page).name}.md")) if "_build" not in p.parts and ".venv" not in p.parts
    ]
    return found[0] if found else None
