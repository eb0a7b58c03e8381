"""Sphinx extension: the execution cache of ``make book``, sound for a book whose code lives in a library.

With ``execute_notebooks: cache`` myst-nb reuses a page's outputs from jupyter-cache when the page's code
cells are unchanged. jupyter-cache keys on those cells only, so on its own it would reuse outputs computed
by an older library, other data or other software. This extension adds the rest of the key, and keeps the
claim records (:mod:`tokensel_book.checks`) in step with the outputs they vouch for:

* **The key** (:func:`execution_key`): the content of every file of the installed ``tokensel`` package,
  the content of the files named by ``tokensel_execution_inputs`` (files the pages read, e.g. recorded
  runs), the data the pages read (the content of a local data folder, archive or Yelp copy, else the
  source's name; :func:`data_identity`), every ``TOKENSEL_*`` setting that can change a result and a few
  other variables (:data:`SETTINGS`), Python's version and every installed distribution's version. It is
  stored beside the cache when a build finishes; when it differs, or the cache was removed (``make book
  EXECUTE=force``), the cache is cleared and every page is read and executed again.
* **Claim records.** A page that executes writes its records into the build's results folder; after it
  is read they are archived beside the cache entry of the executed notebook (by its jupyter-cache hash).
  Before pages are read, every notebook page whose current code matches a cache entry gets that entry's
  records carried over into the build (:func:`tokensel_book.records.carry_over`), so ``verify`` and the
  status page count the records of exactly the execution whose outputs the page shows. A page whose code
  matches no entry, or an entry without archived records, is read and executed, whether Sphinx thinks it
  changed or not; so is a page without its executed notebook in ``jupyter_execute/`` (which the student
  edition reuses).
* **Pages executed in every build**: the pages named by ``tokensel_execute_every_build`` (the status page,
  which reads every chapter's records) are read and executed in every build.

Nothing happens unless myst-nb's execution mode is ``cache``. Pages are read one at a time (the extension
is not parallel-read safe): the records written while a page is read are that page's.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import re
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path

from sphinx.errors import ConfigError, ExtensionError
from sphinx.util import logging

from tokensel import config
from tokensel.data.manifest import sha256_file
from tokensel.errors import InvalidArgumentError
from tokensel.files import write_json_atomic

from .records import carry_over

logger = logging.getLogger(__name__)

FOLDER = "tokensel"  # inside the jupyter-cache folder: KEY.json and records/<hashkey>/
KEY_FILE = "KEY.json"
INDEX = "INDEX"  # a record folder's list of files with their SHA-256 (no .json suffix: not a record)
#: settings that name where things are, not what is computed (the data's content enters the key instead)
WHERE_ONLY = {
    config.PROGRESS,
    config.RESULTS_DIR,
    config.CACHE_DIR,
    config.DATA_DIR,
    config.IMDB_ARCHIVE,
    config.YELP_SOURCE,
}
#: environment variables other than ``TOKENSEL_*`` that can change what a page computes
SETTINGS = ("PYTHONHASHSEED", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "CUDA_VISIBLE_DEVICES", "MPLBACKEND")
_HEX = re.compile(r"[0-9a-f]{16,64}")


def tree_digests(root: Path) -> dict[str, str]:
    """``{path relative to root: SHA-256}`` of every file under ``root`` (a file: itself), byte-compiled
    files left out."""
    root = Path(root)
    if root.is_file():
        return {root.name: sha256_file(root)}
    if not root.is_dir():
        raise InvalidArgumentError(f"{str(root)!r} is neither a file nor a folder")
    return {
        p.relative_to(root).as_posix(): sha256_file(p)
        for p in sorted(root.rglob("*"))
        if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"
    }


def data_identity() -> dict:
    """What the pages' data are, as far as the settings name them: the content of a local data folder,
    IMDB archive or Yelp copy (so moving them changes nothing), else the source's name or address."""
    out: dict = {}
    root = config.data_dir()
    if root is not None:
        out["data_dir"] = tree_digests(root) if root.exists() else "absent"
    archive, explicit = config.imdb_archive()
    if explicit:
        local = Path(archive).expanduser()
        out["imdb_archive"] = sha256_file(local) if local.is_file() else archive
    out["imdb_sha256"] = config.imdb_sha256()
    yelp = config.yelp_source()
    local = Path(yelp).expanduser()
    out["yelp_source"] = tree_digests(local) if local.is_dir() else yelp
    out["yelp_size"] = config.yelp_size()
    return out


def software() -> dict:
    """Python's version and platform, and ``{distribution: version}`` of everything installed."""
    from importlib.metadata import distributions

    packages = {}
    for dist in distributions():
        name = dist.metadata["Name"] if dist.metadata else None
        if name:
            packages[name.lower()] = dist.version
    return {
        "python": sys.version,
        "platform": f"{platform.system()} {platform.machine()}",
        "packages": dict(sorted(packages.items())),
    }


def execution_key(root: Path, inputs=()) -> dict:
    """The part of the execution cache's key that jupyter-cache does not see: ``{"digest": ..., "parts":
    {...}}`` with the parts ``library``, ``inputs`` (``{path under root: digests}`` of each path in
    ``inputs``), ``data``, ``settings`` and ``software``."""
    import tokensel

    root = Path(root)
    if isinstance(inputs, (str, bytes)) or not all(isinstance(p, str) and p for p in inputs):
        raise InvalidArgumentError(f"inputs must be a list of paths relative to the book's root, got {inputs!r}")
    missing = [p for p in inputs if not (root / p).exists()]
    if missing:
        raise InvalidArgumentError(
            f"inputs {missing} do not exist under {str(root)!r}: list only files or folders the pages read"
        )
    env = {k: v for k, v in os.environ.items() if (k.startswith("TOKENSEL_") and k not in WHERE_ONLY) or k in SETTINGS}
    parts = {
        "library": {
            "tokensel": tree_digests(Path(tokensel.__file__).parent),
            "tokensel_book": tree_digests(Path(__file__).parent),
        },
        "inputs": {p: tree_digests(root / p) for p in sorted(inputs)},
        "data": data_identity(),
        "settings": dict(sorted(env.items())),
        "software": software(),
    }
    return {"digest": hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest(), "parts": parts}


def read_key(cache_path: Path) -> dict | None:
    """The key stored beside the cache, or None when there is none or it is not one (then the cache is not
    trusted)."""
    f = Path(cache_path) / FOLDER / KEY_FILE
    try:
        data = json.loads(f.read_text())
    except (OSError, ValueError):
        return None
    if not (
        isinstance(data, dict)
        and isinstance(data.get("digest"), str)
        and isinstance(data.get("parts"), dict)
        and isinstance(data.get("all_read"), bool)
    ):
        return None
    return data


def _write_key(cache_path: Path, key: dict, all_read: bool) -> None:
    write_json_atomic(Path(cache_path) / FOLDER / KEY_FILE, {**key, "all_read": all_read})


def key_changes(old: dict | None, new: dict) -> list[str]:
    """In words, what differs between two keys (``old`` None: there was no cache)."""
    if old is None:
        return ["no cache was kept"]
    out = []
    for part, value in new["parts"].items():
        before = old["parts"].get(part)
        if before == value:
            continue
        if part in ("library", "inputs") and isinstance(before, dict):
            names = sorted(k for k in set(value) | set(before) if value.get(k) != before.get(k))
            out.append(f"{part} changed ({', '.join(names[:5])}{', ...' if len(names) > 5 else ''})")
        elif part == "software" and isinstance(before, dict) and isinstance(before.get("packages"), dict):
            new_p, old_p = value["packages"], before["packages"]
            names = sorted(k for k in set(new_p) | set(old_p) if new_p.get(k) != old_p.get(k))
            out.append(f"software changed ({', '.join(names[:5]) or 'Python'}{', ...' if len(names) > 5 else ''})")
        else:
            out.append(f"{part} changed")
    return out or ["the key's digest changed"]


def archived_records(cache_path: Path, hashkey: str) -> list[Path] | None:
    """The record files archived for the cached notebook ``hashkey``, or None when there are none or they are
    not what was archived (then the cached outputs are not used)."""
    folder = Path(cache_path) / FOLDER / "records" / hashkey
    try:
        index = json.loads((folder / INDEX).read_text())
    except (OSError, ValueError):
        return None
    files = index.get("records") if isinstance(index, dict) and index.get("hashkey") == hashkey else None
    if not isinstance(files, dict):
        return None
    for name, digest in files.items():
        if Path(name).name != name or not (folder / name).is_file() or sha256_file(folder / name) != digest:
            return None
    return [folder / name for name in sorted(files)]


def archive_records(cache_path: Path, hashkey: str, page: str, records: list[Path]) -> None:
    """Keep copies of the records an execution of ``page`` wrote, beside its cache entry ``hashkey``."""
    if not _HEX.fullmatch(hashkey):
        raise InvalidArgumentError(f"hashkey must be a jupyter-cache hash (hex digits), got {hashkey!r}")
    folder = Path(cache_path) / FOLDER / "records" / hashkey
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    files = {}
    for src in records:
        shutil.copyfile(src, folder / Path(src).name)
        files[Path(src).name] = sha256_file(folder / Path(src).name)
    write_json_atomic(folder / INDEX, {"hashkey": hashkey, "page": page, "records": files})


@dataclass
class _State:
    cache_path: Path
    results: Path
    key: dict
    notebooks: dict = field(default_factory=dict)  # page -> the notebook as myst-nb reads it
    plan: dict = field(default_factory=dict)  # page -> "cached" or "execute"
    cached_before: set = field(default_factory=set)  # hashkeys in the cache when pages start to be read
    seen: set = field(default_factory=set)  # record files in the results folder so far


def _cache(path: Path):
    from jupyter_cache import get_cache

    return get_cache(str(path))


def _notebook(env, page: str):
    """The notebook of ``page`` exactly as myst-nb reads it for execution, and its execution mode; None for a
    page that is not a notebook."""
    from myst_nb.core.read import create_nb_reader

    path = Path(env.doc2path(page))
    text = path.read_text(encoding="utf-8")
    nb_config = env.mystnb_config
    reader = create_nb_reader(str(path), env.myst_config, nb_config, text)
    if reader is None:
        return None, None
    nb = reader.read(text)
    kernel = nb.metadata.get("kernelspec", {}).get("name")
    for rgx, alias in (nb_config.kernel_rgx_aliases or {}).items():
        if kernel is not None and re.fullmatch(rgx, kernel):
            nb.metadata["kernelspec"]["name"] = alias
            break
    mode = dict(nb.metadata.get(nb_config.metadata_key) or {}).get("execution_mode", nb_config.execution_mode)
    return nb, mode


def _match(cache, nb):
    try:
        return cache.match_cache_notebook(nb)
    except KeyError:
        return None


def _record_files(results: Path) -> set:
    return {p.name for p in results.glob("*.json")} if results.is_dir() else set()


def before_read(app, env, docnames: list) -> None:
    """Decide, before any page is read, which notebook pages execute: carry over the records of the others."""
    app.tokensel_execution = None
    if env.mystnb_config.execution_mode != "cache":
        return
    if app.parallel > 1:
        raise ExtensionError("tokensel_book.sphinx_execution reads pages one at a time: build without -j")
    root = Path(app.srcdir)
    cache_path = Path(env.mystnb_config.execution_cache_path)
    try:
        key = execution_key(root, app.config.tokensel_execution_inputs)
    except InvalidArgumentError as exc:
        raise ConfigError(f"the execution cache's key cannot be computed: {exc}") from None
    state = _State(cache_path=cache_path, results=config.results_dir(root), key=key)
    old = read_key(cache_path)
    read = set(docnames)
    if old is None or old["digest"] != key["digest"]:
        logger.info(f"execution cache: every page is executed again: {'; '.join(key_changes(old, key))}")
        if cache_path.exists():
            _cache(cache_path).clear_cache()
        # the new key at once, marked as not yet read in full: a build stopped half-way keeps what it executed
        # and the next one reads every page again
        _write_key(cache_path, key, all_read=False)
    stored = read_key(cache_path)
    assert stored is not None  # the key read above, or the one just written (a valid key)
    if not stored["all_read"]:
        read |= set(env.found_docs)
    cache = _cache(cache_path)
    every = set(app.config.tokensel_execute_every_build)
    unknown = every - set(env.found_docs)
    if unknown:
        raise ConfigError(f"tokensel_execute_every_build names pages that are not in the book: {sorted(unknown)}")
    executed = Path(env.mystnb_config.output_folder)
    for page in sorted(env.found_docs):
        nb, mode = _notebook(env, page)
        if nb is None or mode in ("off", "auto", "inline"):  # auto/inline: myst-nb decides without the cache
            continue
        state.notebooks[page] = nb
        hit = _match(cache, nb) if mode == "cache" else None
        records = archived_records(cache_path, hit.hashkey) if hit is not None and page not in every else None
        if records is not None:
            carry_over(records, state.results)
            state.plan[page] = "cached"
            if not (executed / f"{page}.ipynb").is_file():
                read.add(page)  # its executed notebook is written again from the cache
        else:
            if hit is not None:  # outputs without the records of their execution, or a page executed every build
                cache.remove_cache(hit.pk)
            state.plan[page] = "execute"
            read.add(page)
    docnames[:] = sorted(read)
    state.cached_before = {r.hashkey for r in cache.list_cache_records()}
    state.seen = _record_files(state.results)
    app.tokensel_execution = state
    counts = {p: sum(1 for v in state.plan.values() if v == p) for p in ("cached", "execute")}
    logger.info(f"execution cache: {counts['execute']} notebook page(s) to execute, {counts['cached']} reused")


def after_read(app, doctree) -> None:
    """After a page is read: archive the records its execution wrote beside its new cache entry."""
    state = getattr(app, "tokensel_execution", None)
    page = app.env.docname
    if state is None or page not in state.notebooks:
        return
    now = _record_files(state.results)
    new = sorted(now - state.seen)
    state.seen = now
    cache = _cache(state.cache_path)
    hit = _match(cache, state.notebooks[page])
    if hit is None or hit.hashkey in state.cached_before:
        if new:
            logger.warning(
                f"execution cache: {page} wrote claim records but was not executed from its code as "
                "read before the build: run `make book EXECUTE=force`"
            )
        if hit is not None:
            _write_executed(app.env, page, cache)
        return
    archive_records(state.cache_path, hit.hashkey, page, [state.results / n for n in new])


def _write_executed(env, page: str, cache) -> None:
    """Write the executed notebook of a page whose outputs came from the cache: myst-nb 1.4 renders the cached
    outputs but writes ``jupyter_execute/<page>.ipynb`` without them (it saves the notebook it read, not the
    one merged with the cache), and the download menu and the student edition read that file."""
    import nbformat

    nb, _ = _notebook(env, page)
    try:
        _, merged = cache.merge_match_into_notebook(nb)
    except KeyError:
        raise ExtensionError(f"execution cache: {page} changed while the book was built: build it again") from None
    out = Path(env.mystnb_config.output_folder, *page.split("/")[:-1], page.split("/")[-1] + ".ipynb")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(nbformat.writes(merged), encoding="utf-8")


def finished(app, exception) -> None:
    """After a build without error: store the key, and drop archived records whose cache entry is gone."""
    state = getattr(app, "tokensel_execution", None)
    if state is None or exception is not None:
        return
    keep = {r.hashkey for r in _cache(state.cache_path).list_cache_records()}
    folder = state.cache_path / FOLDER / "records"
    for sub in folder.iterdir() if folder.is_dir() else ():
        if sub.name not in keep:
            shutil.rmtree(sub, ignore_errors=True)
    _write_key(state.cache_path, state.key, all_read=True)


def setup(app):
    app.add_config_value("tokensel_execute_every_build", [], "env", types=[list])
    app.add_config_value("tokensel_execution_inputs", [], "env", types=[list])
    app.connect("env-before-read-docs", before_read)
    app.connect("doctree-read", after_read)
    app.connect("build-finished", finished)
    return {"parallel_read_safe": False, "parallel_write_safe": True}
