"""The book's API reference page, ``book/api.md``, written from ``tokensel.__all__``.

:func:`render` lists every public name of :mod:`tokensel` in the groups of ``__all__`` with a Sphinx autodoc
directive (the text comes from the docstrings when the book is built) and, under each, a link to the first
page of ``_toc.yml`` whose code uses it (``ts.NAME``), or the statement that no page does. A test keeps
``book/api.md`` equal to :func:`render`; :func:`write` rewrites it.
"""

from __future__ import annotations

import inspect
import re
import types
from pathlib import Path
from typing import Any

from tokensel.errors import InvalidArgumentError

#: the groups of ``__all__`` in ``lib/tokensel/__init__.py`` (its comments), as section titles
GROUPS = (
    ("data and models", "Data and models"),
    ("gradients and training", "Gradients and training"),
    ("max-margin", "The max-margin problem"),
    ("dense token features", "Dense token features"),
    ("seeding", "Seeding"),
    ("claims", "Claims"),
    ("errors", "Errors"),
    ("the library's folders", "The library's folders"),
    ("plumbing", "Plumbing"),
    ("modules the chapters call by name", "Modules the chapters call by name"),
)
#: the groups of ``__all__`` that hold modules: listed last
MODULE_GROUPS = ("the library's folders", "plumbing", "modules the chapters call by name")

_HEAD = """---
summary: every public name of `tokensel` with its docstring and first use.
---

# API reference

Every name `import tokensel as ts` offers (`ts.__all__`), grouped as in the library's namespace, with its
docstring and a link to the page that first uses it. Errors are described in {mod}`tokensel.errors`: each is
also the built-in exception a caller would expect (`ValueError`, `TypeError`, ...), and its message names the
argument and the fix. Modules are listed with their own summaries; their functions are reached as
`ts.<module>.<name>`.
"""


def _groups(init_source: str) -> dict[str, list[str]]:
    """The names of ``__all__`` by the comment above them in ``__init__.py``."""
    body = init_source[init_source.index("__all__ = [") :]
    body = body[: body.index("]")]
    groups: dict[str, list[str]] = {}
    current = None
    for line in body.splitlines()[1:]:
        line = line.strip()
        if line.startswith("#"):
            current = line.lstrip("# ").split(" (")[0]
            groups[current] = []
        elif line and current is not None:
            groups[current] += re.findall(r'"([^"]+)"', line)
    return groups


def first_use(name: str, pages: dict[str, str], module: bool = False) -> str | None:
    """The first page (of ``pages``: name -> source, in order) whose code uses ``ts.NAME`` (``ts.NAME.`` for
    a module), or None."""
    pattern = re.compile(rf"\bts\.{re.escape(name)}\b" + (r"\." if module else ""))
    for page, source in pages.items():
        code = "\n".join(re.findall(r"```\{code-cell\}[^\n]*\n(.*?)```", source, flags=re.S))
        if pattern.search(code):
            return page
    return None


#: modules documented besides those of ``__all__``: every module of the library's folders (the docstrings refer
#: to them), and of the book's tooling the claims and their records
FURTHER_MODULES = (
    "data.batch",
    "data.text",
    "data.imdb_archive",
    "data.manifest",
    "data.loaders",
    "models.attention",
    "models.core",
    "models.kernels",
    "models.gradients",
    "models.mixing",
    "models.variants",
    "training.settings",
    "training.phases",
    "training.loop",
    "training.optimiser",
    "training.variants",
    "training.checkpoints",
    "training.progress",
    "analysis.dense",
    "experiments.recipes",
    "experiments.baseline",
    "experiments.tables",
    "experiments.records",
    "experiments.phase",
    "experiments.controls",
    "files",
)


def _directive(obj, exclude=()) -> list[str]:
    """The autodoc directive for ``obj`` in an ``eval-rst`` block (docstrings are reStructuredText), naming the
    object where it is defined; a module with its members, less those in ``exclude`` (documented elsewhere)."""
    if isinstance(obj, types.ModuleType):
        lines = [f".. automodule:: {obj.__name__}", "   :members:"]
        if exclude:
            lines.append(f"   :exclude-members: {', '.join(sorted(exclude))}")
    elif inspect.isclass(obj):
        lines = [f".. autoclass:: {obj.__module__}.{obj.__qualname__}"]
        if not issubclass(obj, BaseException):
            lines.append("   :members:")
    elif callable(obj):
        lines = [f".. autofunction:: {obj.__module__}.{obj.__qualname__}"]
    else:
        raise InvalidArgumentError(f"{obj!r} is neither a module, a class nor a function: document it by hand")
    return ["```{eval-rst}", *lines, "```"]


def canonical(target: str) -> str | None:
    """Where the object named ``target`` (``tokensel.train_p``, ``tokensel.checks.check``) is defined
    (``tokensel.training.phases.train_p``), or None when ``target`` names nothing in :mod:`tokensel`."""
    import importlib

    parts = target.split(".")
    if parts[0] != "tokensel":
        return None
    obj = importlib.import_module("tokensel")
    for part in parts[1:]:
        if not hasattr(obj, part):
            return None
        obj = getattr(obj, part)
    if isinstance(obj, types.ModuleType):
        return obj.__name__
    module, qual = getattr(obj, "__module__", None), getattr(obj, "__qualname__", None)
    return f"{module}.{qual}" if module and qual else None


def _resolve_alias(app, env, node, contnode):
    """Sphinx ``missing-reference``: a reference to a re-exported name (``tokensel.train_p``) resolves to the
    object's own entry (``tokensel.training.phases.train_p``)."""
    if node.get("refdomain") != "py":
        return None
    target = node.get("reftarget", "")
    candidates = [target] + [f"{node.get('py:module')}.{target}"] * bool(node.get("py:module"))
    for name in candidates:
        real = canonical(name)
        if real and real != target:
            domain = env.get_domain("py")
            new = node.deepcopy()
            new["reftarget"] = real
            return domain.resolve_xref(env, node.get("refdoc"), app.builder, node.get("reftype"), real, new, contnode)
    return None


_LITERAL = re.compile(r"(``.*?``|:math:`[^`]*`|`[^`]*`_?)")


def escape_bars(lines: list) -> None:
    """Docstrings write a set's size as ``|S|``, which reStructuredText reads as a substitution: escape every
    ``|`` outside inline literals and roles, in place (the docstrings hold no grid tables)."""
    for i, line in enumerate(lines):
        parts = _LITERAL.split(line)
        lines[i] = "".join(p if k % 2 else p.replace("|", "\\|") for k, p in enumerate(parts))


def _process_docstring(app, what, name, obj, options, lines):
    escape_bars(lines)


def setup(app):
    """The Sphinx extension: references to re-exported names resolve (:func:`_resolve_alias`), and ``|`` in
    docstrings is text (:func:`escape_bars`)."""
    app.connect("missing-reference", _resolve_alias)
    app.connect("autodoc-process-docstring", _process_docstring)
    return {"parallel_read_safe": True, "parallel_write_safe": True}


def render(root: Path | None = None) -> str:
    """The text of ``book/api.md`` for the library as imported and the pages of ``_toc.yml`` under ``root``."""
    import tokensel

    from .toc import root_or_error as book_root
    from .toc import toc_files

    root = Path(root) if root is not None else book_root()
    init = Path(tokensel.__file__).read_text()
    groups = _groups(init)
    listed = [n for names in groups.values() for n in names]
    if sorted(listed) != sorted(tokensel.__all__):
        raise InvalidArgumentError("tokensel.__all__ and its commented groups in __init__.py disagree")
    pages = {}
    for page in toc_files(root):
        path = root / f"{page}.md"
        if path.is_file() and Path(page).stem != "api":
            pages[Path(page).stem] = path.read_text()
    known = dict(GROUPS)
    out = [_HEAD, "```{eval-rst}", ".. automodule:: tokensel", "   :no-members:", "```", ""]
    documented: dict[str, set] = {}
    for name in tokensel.__all__:  # first the names documented in the groups, left out of their modules' lists
        obj = getattr(tokensel, name)
        if not isinstance(obj, types.ModuleType):
            documented.setdefault(obj.__module__, set()).add(obj.__qualname__)
    modules = []
    order = [g for g, _ in GROUPS if g in groups] + [g for g in groups if g not in known]
    for group in sorted(order, key=lambda g: g in MODULE_GROUPS):  # the modules last
        out.append(f"## {known.get(group, group[:1].upper() + group[1:])}\n")
        for name in groups[group]:
            obj = getattr(tokensel, name)
            is_module = isinstance(obj, types.ModuleType)
            first = first_use(name, pages, module=is_module)
            where = f"`ts.{name}`: " + (
                f"First used in {{doc}}`{first}`." if first else "Not used in the book's pages."
            )
            if is_module:
                modules.append(obj.__name__)
                out += [f"### `ts.{name}`\n", where, ""]
                out += _directive(obj, exclude=documented.get(obj.__name__, ())) + [""]
            else:
                out += _directive(obj) + ["", where, ""]
    out.append("## Further modules\n")
    out.append("Modules that the docstrings above refer to, with their functions and classes.\n")
    import importlib

    for mod in [f"tokensel.{m}" for m in FURTHER_MODULES if f"tokensel.{m}" not in modules]:
        module = importlib.import_module(mod)
        out.append(f"### `{mod}`\n")
        out += _directive(module, exclude=documented.get(mod, ())) + [""]
    return "\n".join(out).rstrip() + "\n"


def write(root: Path | None = None) -> Path:
    """Write :func:`render` to ``book/api.md`` under ``root`` (default the book's root); returns the path."""
    from .toc import root_or_error as book_root

    root = Path(root) if root is not None else book_root()
    path = root / "book" / "api.md"
    path.write_text(render(root))
    return path


def public_objects() -> dict[str, Any]:
    """Every public function and class a chapter can reach: ``NAME`` for the names of ``tokensel.__all__`` that are
    not modules, and ``MODULE.NAME`` for the public functions and classes defined in the library that a module of
    ``__all__`` holds (``ts.synthetic.theory_pairs``), one level down."""
    import tokensel

    found: dict[str, Any] = {}
    for name in tokensel.__all__:
        obj = getattr(tokensel, name)
        if not isinstance(obj, types.ModuleType):
            found[name] = obj
            continue
        for member, value in vars(obj).items():
            if member.startswith("_") or not (inspect.isfunction(value) or inspect.isclass(value)):
                continue
            if getattr(value, "__module__", "").startswith("tokensel"):
                found[f"{name}.{member}"] = value
    return found


def introducing_chapters(root: Path | None = None) -> dict[str, tuple[Any, str]]:
    """For every object of :func:`public_objects` that a numbered chapter uses, ``name -> (object, chapter)``: the
    first chapter of ``_toc.yml`` whose code uses ``ts.NAME`` (the chapter that introduces it)."""
    from .toc import root_or_error as book_root
    from .toc import toc_files

    root = Path(root) if root is not None else book_root()
    pages = {}
    for page in toc_files(root):
        stem = Path(page).stem
        if stem[:2].isdigit() and (root / f"{page}.md").is_file():
            pages[stem] = (root / f"{page}.md").read_text()
    found: dict[str, tuple[Any, str]] = {}
    seen: set[int] = set()
    for name, obj in public_objects().items():
        first = first_use(name, pages)
        if first is not None and id(obj) not in seen:
            seen.add(id(obj))
            found[name] = (obj, first)
    return found


def names_its_chapter(obj, chapter: str) -> bool:
    """Does the docstring of ``obj`` name ``chapter`` (``05_max_margin``: "chapter 05" or "chapter 5", any case)?"""
    number = int(chapter[:2])
    return bool(re.search(rf"\bchapters?\s+0?{number}\b", obj.__doc__ or "", flags=re.I))


#: the sentence that names the chapter introducing an object, in its docstring
INTRODUCED = re.compile(r"Introduced in chapter \d\d\.")


def name_chapters(root: Path | None = None) -> list[str]:
    """Append ``Introduced in chapter NN.`` to the docstring, in the source, of every object of
    :func:`introducing_chapters` whose docstring does not name the chapter it is introduced in (or correct the
    chapter a docstring names, when the object's first use has moved); returns the names changed. A docstring
    closing on its text line gets the sentence as a new last paragraph."""
    changed = []
    edits: dict[str, list[tuple[int, int, str]]] = {}
    for name, (obj, chapter) in introducing_chapters(root).items():
        if names_its_chapter(obj, chapter) or not obj.__doc__:
            continue
        source = inspect.unwrap(obj)  # a declared function: its own source, not the checking wrapper's
        path = inspect.getsourcefile(source)
        lines, start = inspect.getsourcelines(source)
        import ast

        node = ast.parse(_dedent(lines)).body[0]
        doc = node.body[0] if isinstance(node, (ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef)) else None
        if doc is None or not isinstance(doc, ast.Expr) or not isinstance(doc.value, ast.Constant):
            continue
        first = start + doc.lineno - 1  # the docstring's first and last lines in the file (1-based)
        end = start + (doc.end_lineno or doc.lineno) - 1
        edits.setdefault(str(path), []).append((first, end, f"Introduced in chapter {chapter[:2]}."))
        changed.append(name)
    for path, items in edits.items():
        text = Path(path).read_text().split("\n")
        for first, end, sentence in sorted(items, reverse=True):
            stale = [i for i in range(first - 1, end) if INTRODUCED.search(text[i])]
            if stale:  # the docstring names another chapter (the first use moved): that sentence is replaced
                text[stale[0]] = INTRODUCED.sub(sentence, text[stale[0]])
                continue
            line = text[end - 1]
            indent = line[: len(line) - len(line.lstrip())]
            body, quote = line.rstrip()[:-3], line.rstrip()[-3:]
            if body.strip():
                text[end - 1 : end] = [body, "", f"{indent}{sentence}{quote}"]
            else:
                text[end - 1 : end] = ["", f"{indent}{sentence}", line]
        Path(path).write_text("\n".join(text))
    return sorted(changed)


def _dedent(lines: list[str]) -> str:
    import textwrap

    return textwrap.dedent("".join(lines))
