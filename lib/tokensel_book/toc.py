"""The book's pages: its root folder, ``_toc.yml`` (their order and chapter numbers) and each page's front matter,
all read as YAML without aliases (a few lines of aliases can describe billions of entries)."""

from __future__ import annotations

from pathlib import Path

import yaml

from tokensel.errors import InvalidArgumentError, StorageError

TOC = "_toc.yml"
MAX_YAML = 1_000_000  # bytes: a table of contents or a front matter is far smaller


class _NoAliases(yaml.SafeLoader):
    def compose_node(self, parent, index):
        if self.check_event(yaml.AliasEvent):
            raise yaml.YAMLError(f"YAML aliases are not allowed (line {self.peek_event().start_mark.line + 1})")
        return super().compose_node(parent, index)


def read_yaml(text: str, where: str):
    """``text`` as YAML, refusing aliases and documents over ``MAX_YAML`` bytes."""
    if len(text) > MAX_YAML:
        raise InvalidArgumentError(f"{where} is over {MAX_YAML:,} bytes: it cannot be a book's YAML")
    try:
        return yaml.load(text, Loader=_NoAliases)  # noqa: S506 - a SafeLoader that also refuses aliases
    except (yaml.YAMLError, RecursionError) as exc:
        raise InvalidArgumentError(f"{where} is not valid YAML: {' '.join(str(exc).split())[:200]}") from None


def book_root(start: Path | None = None) -> Path | None:
    """The nearest folder at or above ``start`` (default: the working directory) with _config.yml and _toc.yml."""
    here = Path(start or Path.cwd()).resolve()
    return next((d for d in (here, *here.parents) if (d / "_config.yml").is_file() and (d / TOC).is_file()), None)


def root_or_error(start: Path | None = None) -> Path:
    root = book_root(start)
    if root is None:
        raise StorageError(
            f"{str(Path.cwd())!r} is not inside a book (no _config.yml and _toc.yml): run from its folder"
        )
    return root


def _text(path: Path, what: str) -> str:
    if not path.is_file():
        raise StorageError(f"{what} {str(path)!r} is missing or not a file")
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise StorageError(f"{what} {str(path)!r} cannot be read: {exc}") from None


def toc_files(root: Path | None = None) -> list[str]:
    """The pages of ``_toc.yml`` in reading order (``book/01_model``, ...), the root page first."""
    root = Path(root) if root is not None else root_or_error()
    path = root / TOC
    toc = read_yaml(_text(path, "the table of contents"), str(path))
    if not isinstance(toc, dict) or not isinstance(toc.get("root"), str):
        raise InvalidArgumentError(f"{str(path)!r} is not a Jupyter Book table of contents (`root: PAGE`): fix it")
    pages = [toc["root"]]

    def walk(node):
        if isinstance(node, list):
            for item in node:
                walk(item)
        elif isinstance(node, dict):
            if "glob" in node:
                raise InvalidArgumentError(f"{str(path)!r}: list each page with `file:` instead of `glob:`")
            if isinstance(node.get("file"), str):
                pages.append(node["file"])
            for key in ("parts", "chapters", "sections"):
                walk(node.get(key))

    walk(toc)
    return [str(Path(p).with_suffix("")) if p.endswith((".md", ".ipynb")) else p for p in pages]


def reader_pages(root: Path | None = None) -> list[str]:
    """The pages a reader's list of contents names: those of ``_toc.yml`` but the API's folder pages."""
    return [p for p in toc_files(root) if not p.startswith("book/api/")]


def toc_numbers(root: Path | None = None) -> dict[str, int]:
    """Chapter numbers as the book shows them, by page (``book/01_model``): the pages named ``NN_name`` in order."""
    chapters = [p for p in toc_files(root) if Path(p).name[:2].isdigit()]
    return {p: i for i, p in enumerate(chapters, 1)}


def page_source(root: Path, page: str) -> Path:
    """The source of a page (``page`` as in ``_toc.yml``, or a chapter's name under ``book/``): its ``.md``, or its
    notebook where it has none (the student edition builds from the executed notebooks)."""
    stems = [Path(root) / page] + ([Path(root) / "book" / page] if "/" not in page else [])
    found = [s.parent / f"{s.name}{ext}" for s in stems for ext in (".md", ".ipynb")]
    return next((f for f in found if f.is_file()), found[2] if len(found) > 2 else found[0])


def front_matter(path: Path) -> dict:
    """The YAML front matter of a MyST page, or a notebook's metadata (an empty mapping when it has none)."""
    text = _text(Path(path), "the page")
    if Path(path).suffix == ".ipynb":
        import json

        meta = json.loads(text).get("metadata")
        return meta if isinstance(meta, dict) else {}
    if not text.startswith("---\n"):
        return {}
    end = text.find("\n---\n", 4)
    if end < 0:
        raise InvalidArgumentError(f"{str(path)!r}: its front matter has no closing `---` line")
    data = read_yaml(text[4 : end + 1], f"the front matter of {str(path)!r}")
    if not isinstance(data, dict):
        raise InvalidArgumentError(f"the front matter of {str(path)!r} must be a YAML mapping")
    return data
