"""The API reference: ``book/api.md`` lists the names a reader needs (``tokensel.__all__``, each with its first
line and the page that first uses it), and ``book/api/<folder>.md`` documents each folder's modules by autodoc.
A test keeps them equal to :func:`render`; :func:`write` rewrites them. Also the Sphinx extension that resolves
re-exported names and escapes ``|`` in docstrings."""

from __future__ import annotations

import importlib
import json
import pkgutil
import re
import types
from pathlib import Path

#: the reference's pages beside the index: a folder of the library, or of the book's machinery
FOLDERS = {
    "data": ("tokensel.data", "ragged batches, text, the review data sets, synthetic data"),
    "models": ("tokensel.models", "the one-layer model, its variants, kernels and exact gradients"),
    "training": ("tokensel.training", "the theory's phases and the Adam loop"),
    "analysis": ("tokensel.analysis", "token statistics, the two shapes, the max-margin problems"),
    "experiments": ("tokensel.experiments", "the named recipes on real reviews and chapter 4's phase diagram"),
    "plumbing": ("tokensel", "errors, settings, validation, files, seeding, the loss"),
    "book": ("tokensel_book", "the book's machinery: claims, verification, replication, editions"),
}


def first_use(name: str, pages: dict[str, str]) -> str | None:
    """The first page (of ``pages``: name -> source, in order) whose code uses ``ts.NAME``, or None."""
    pattern = re.compile(rf"\bts\.{re.escape(name)}\b")
    for page, source in pages.items():
        if pattern.search("\n".join(re.findall(r"```\{code-cell\}[^\n]*\n(.*?)```", source, flags=re.S))):
            return page
    return None


def _summary(obj) -> str:
    doc = (obj.__doc__ or "").strip().split("\n\n")[0]
    return " ".join(doc.split()).replace("|", "\\|")


def _modules(package: str) -> list[str]:
    """The modules of a folder (``tokensel``: its top-level modules only, the plumbing)."""
    pkg = importlib.import_module(package)
    names = [m.name for m in pkgutil.iter_modules(pkg.__path__) if not m.name.startswith("_")]
    if package == "tokensel":
        names = [n for n in names if n not in FOLDERS and n != "version"]
    else:
        names = [n for n in names if n != "__main__"]
    return [f"{package}.{n}" for n in sorted(names)]


def canonical(target: str) -> str | None:
    """Where the object named ``target`` (``tokensel.train_p``) is defined (``tokensel.training.phases.train_p``),
    or None when ``target`` names nothing in ``tokensel``."""
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
    """The Sphinx extension: references to re-exported names resolve (``_resolve_alias``), and ``|`` in
    docstrings is text (:func:`escape_bars`)."""
    app.connect("missing-reference", _resolve_alias)
    app.connect("autodoc-process-docstring", _process_docstring)
    return {"parallel_read_safe": True, "parallel_write_safe": True}


def render(root: Path) -> dict[str, str]:
    """``{path under root: text}`` of the reference's pages for the library as imported."""
    import tokensel

    from .toc import page_source, toc_files

    pages = {Path(p).stem: page_source(root, p).read_text() for p in toc_files(root) if not p.startswith("book/api")}
    lines = [
        "---\nsummary: the names `import tokensel as ts` offers, each with the page that first uses it.\n---\n",
        "# API reference\n",
        "The names a reader needs, `ts.NAME` after `import tokensel as ts`; each folder's page documents all its "
        "modules. Every error is a `tokensel.errors.TokenselError` and the built-in exception a caller expects "
        "(`ValueError`, `TypeError`, ...); its message names the argument and the fix.\n",
        "| name | what it is | first used in |",
        "| --- | --- | --- |",
    ]
    for name in tokensel.__all__:
        obj = getattr(tokensel, name)
        first = first_use(name, pages)
        lines.append(f"| `ts.{name}` | {_summary(obj)} | {f'{{doc}}`{first}`' if first else '-'} |")
    lines += ["", "The folders:", ""]
    lines += [f"- {{doc}}`api/{key}`: {what}" for key, (_, what) in FOLDERS.items()]
    out = {"book/api.md": "\n".join(lines) + "\n"}
    for key, (package, what) in FOLDERS.items():
        body = [f"---\nsummary: {json.dumps(what + '.')}\n---\n", f"# `{package}`: {what}\n"]
        for module in _modules(package):
            body += [f"## `{module}`\n", "```{eval-rst}", f".. automodule:: {module}", "   :members:", "```", ""]
        out[f"book/api/{key}.md"] = "\n".join(body).rstrip() + "\n"
    return out


def write(root: Path) -> list[Path]:
    """Write :func:`render`'s pages under ``root``."""
    written = []
    for rel, text in render(Path(root)).items():
        path = Path(root) / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        written.append(path)
    return written
