"""Sphinx extension: the execution cache of ``make book`` reuses a page's outputs only while all it depended on holds.

myst-nb's cache (jupyter-cache) keys a page on its code cells. A chapter's outputs also depend on the library,
the data and the settings; its record (:func:`tokensel_book.claims.end_chapter`) lists the files the run imported
and read and its environment. Before pages are read, a cached page is reused only if its record is there and none
of that changed, and the data folders and recorded runs (read by compiled code, unseen by the record) are as they
were when the cache was kept; otherwise the page executes again. Pages named by ``tokensel_execute_every_build``
(the status page) execute in every build. Nothing happens unless myst-nb's execution mode is ``cache``.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from sphinx.errors import ExtensionError
from sphinx.util import logging

from .claims import claims_table, dependency_changes, file_digest, notebook_record, record_problems

logger = logging.getLogger(__name__)
KEY = "tokensel-inputs.json"  # beside jupyter-cache's database: the digest of the data and recorded runs


def tree_digest(path: Path) -> str:
    """SHA-256 over every file under ``path`` (links followed), by relative name and content."""
    h = hashlib.sha256()
    path = Path(path)
    files = [path] if path.is_file() else sorted(_files_under(path)) if path.exists() else []
    for f in files:
        h.update(f"{f.relative_to(path) if f != path else f.name}\0{file_digest(str(f))}\0".encode())
    return h.hexdigest()


def _files_under(path: Path) -> list[Path]:
    """Every file under ``path``, into linked folders too (``rglob`` does not follow them), each real folder once."""
    out, seen = [], set()
    for folder, dirs, names in os.walk(path, followlinks=True):
        real = os.path.realpath(folder)
        if real in seen:
            dirs[:] = []
            continue
        seen.add(real)
        out += [Path(folder) / n for n in names if (Path(folder) / n).is_file()]
    return out


def inputs_digest(root: Path, inputs) -> str:
    """The data the pages read (``TOKENSEL_DATA_DIR``, the IMDB archive, a Yelp folder) and the recorded runs."""
    named = [os.environ.get(k, "") for k in ("TOKENSEL_DATA_DIR", "TOKENSEL_IMDB_ARCHIVE", "TOKENSEL_YELP_SOURCE")]
    parts = {p: tree_digest(Path(p)) for p in named if p and Path(p).exists()}
    parts |= {p: tree_digest(Path(root) / p) for p in inputs}
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()


def _cache(path: Path):
    from jupyter_cache import get_cache

    return get_cache(str(path))


def _notebook(env, page: str):
    """The notebook of ``page`` as myst-nb reads it, or None for a page that is not a notebook."""
    from myst_nb.core.read import create_nb_reader

    path = Path(env.doc2path(page))
    text = path.read_text(encoding="utf-8")
    reader = create_nb_reader(str(path), env.myst_config, env.mystnb_config, text)
    return None if reader is None else reader.read(text)


def stale_reason(cache, nb, source: Path | None = None) -> str | None:
    """Why the cached execution of ``nb`` (of the page ``source``) cannot be reused (None: it can); removes such an
    entry. A page's claims table is read from ``source``: an edit of the table alone executes the page again."""
    try:
        hit = cache.match_cache_notebook(nb)
    except KeyError:
        return "not executed yet"
    record = notebook_record(cache.get_cache_bundle(hit.pk).nb)
    why: str | None
    table = claims_table(source) if source is not None and record is not None and record.get("table") else None
    if record is None or record_problems(record, table):
        why = "its record is missing or not valid"
    else:
        changes = dependency_changes(record["depends"])
        why = f"{changes[0]}" + (f" (and {len(changes) - 1} more)" if len(changes) > 1 else "") if changes else None
    if why is not None:
        cache.remove_cache(hit.pk)
    return why


def before_read(app, env, docnames: list) -> None:
    """Choose, before any page is read, the pages that execute; write the executed notebook of the others."""
    if env.mystnb_config.execution_mode != "cache":
        return
    if app.parallel > 1:
        raise ExtensionError("tokensel_book.execution reads pages one at a time: build without -j")
    root, cache_path = Path(app.srcdir), Path(env.mystnb_config.execution_cache_path)
    key = inputs_digest(root, app.config.tokensel_execution_inputs)
    stored = cache_path / KEY
    if not stored.is_file() or stored.read_text() != key:
        if cache_path.exists():
            _cache(cache_path).clear_cache()
            logger.info("execution cache: the data or the recorded runs changed: every page executes again")
        cache_path.mkdir(parents=True, exist_ok=True)
        stored.write_text(key)
    cache, every = _cache(cache_path), set(app.config.tokensel_execute_every_build)
    read = set(docnames)
    for page in sorted(env.found_docs):
        nb = _notebook(env, page)
        if nb is None:
            continue
        why = "it executes in every build" if page in every else stale_reason(cache, nb, Path(env.doc2path(page)))
        if page in every and (hit := _match(cache, nb)) is not None:
            cache.remove_cache(hit.pk)
        if why is not None:
            logger.info(f"execution cache: {page} executes: {why}")
            read.add(page)
        elif not _executed_path(env, page).is_file():
            read.add(page)  # its executed notebook is written again from the cache
    docnames[:] = sorted(read)


def _match(cache, nb):
    try:
        return cache.match_cache_notebook(nb)
    except KeyError:
        return None


def _executed_path(env, page: str) -> Path:
    return Path(env.mystnb_config.output_folder) / f"{page}.ipynb"


def after_read(app, doctree) -> None:
    """myst-nb renders a cached page's outputs but writes its executed notebook without them: write it whole (the
    downloads, the student edition and ``verify`` read it)."""
    import nbformat

    env = app.env
    if env.mystnb_config.execution_mode != "cache":
        return
    nb = _notebook(env, env.docname)
    hit = _match(_cache(Path(env.mystnb_config.execution_cache_path)), nb) if nb is not None else None
    if hit is None:
        return
    _, merged = _cache(Path(env.mystnb_config.execution_cache_path)).merge_match_into_notebook(nb)
    out = _executed_path(env, env.docname)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(nbformat.writes(merged), encoding="utf-8")


def setup(app):
    app.add_config_value("tokensel_execute_every_build", [], "env", types=[list])
    app.add_config_value("tokensel_execution_inputs", [], "env", types=[list])
    app.connect("env-before-read-docs", before_read)
    app.connect("doctree-read", after_read)
    return {"parallel_read_safe": False, "parallel_write_safe": True}
