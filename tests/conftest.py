import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import tokensel as ts

ts.seed_everything(0)
ROOT = Path(__file__).resolve().parents[1]


def shared_data_dir():
    """The real data directory: $TOKENSEL_DATA_DIR, else ../shared/data beside the checkout."""
    env = os.environ.get("TOKENSEL_DATA_DIR")
    if env:
        return Path(env)
    guess = ROOT.parent / "shared" / "data"
    return guess if guess.is_dir() else None


@pytest.fixture(scope="session")
def _cache_root(tmp_path_factory):
    return tmp_path_factory.mktemp("tokensel-cache")


@pytest.fixture(autouse=True)
def _results_dir(tmp_path, monkeypatch, _cache_root):
    # data caches never touch the user's
    monkeypatch.setenv("TOKENSEL_CACHE_DIR", str(_cache_root))
    # a test sets the data sources it means to use (CI exports an IMDB mirror for the book)
    for var in ("IMDB_ARCHIVE", "IMDB_SHA256", "YELP_SOURCE", "YELP_SIZE", "CLAIMS"):
        monkeypatch.delenv(f"TOKENSEL_{var}", raising=False)


#: the front matter of a MyST Markdown notebook as the book's chapters open (for the tests' own small chapters)
MYST_FRONT_MATTER = """---
jupytext:
  text_representation:
    extension: .md
    format_name: myst
kernelspec:
  display_name: Python 3
  language: python
  name: python3
---
"""


def md_cell(text):
    return {"cell_type": "markdown", "metadata": {}, "source": text}


def code_cell(text, outputs=(), metadata=None):
    return dict(cell_type="code", metadata=metadata or {}, source=text, outputs=list(outputs), execution_count=1)


def stream(text, name="stdout"):
    return {"output_type": "stream", "name": name, "text": text}


def notebook(*cells, **metadata):
    """An nbformat 4 notebook (a dict) of ``cells``: the tests' crafted notebooks."""
    return {"nbformat": 4, "nbformat_minor": 5, "metadata": metadata, "cells": list(cells)}


POS = ["a great and wonderful film", "great acting, wonderful story", "wonderful, simply great"]
NEG = ["a bad and boring film", "boring story, bad acting", "simply bad <br /> and boring"]


def _write(root, rel, texts, labels, ratings=None):
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    cols = {"text": texts, "label": labels}
    if ratings is not None:
        cols["rating"] = ratings
    pq.write_table(pa.table(cols), path)


@pytest.fixture
def data_dir(tmp_path):
    texts, labels = POS + NEG, [1] * 3 + [0] * 3
    _write(tmp_path, "imdb/train.parquet", texts, labels, [9, 8, 10, 1, 2, 3])
    test = texts[::-1] + ["unknown words only"], labels[::-1] + [1], [3, 2, 1, 10, 8, 9, 7]
    _write(tmp_path, "imdb/test.parquet", *test)
    _write(tmp_path, "yelp_polarity_sample/test.parquet", texts * 5, labels * 5)
    ts.data.manifest.write_manifest(tmp_path)
    return tmp_path


def source_archive(monkeypatch, archive, cache, sha256=True):
    """The IMDB archive ``archive`` as the data source, cached in ``cache`` (checked against its SHA-256 if asked)."""
    from tokensel.data.manifest import sha256_file

    monkeypatch.delenv("TOKENSEL_DATA_DIR", raising=False)
    monkeypatch.setenv("TOKENSEL_CACHE_DIR", str(cache))
    monkeypatch.setenv("TOKENSEL_IMDB_ARCHIVE", str(archive))
    if sha256:
        monkeypatch.setenv("TOKENSEL_IMDB_SHA256", sha256_file(archive))


@pytest.fixture
def small():
    data = ts.synthetic.assumption1_pairs(40, 3, 15, length=(3, 9), seed=3)
    model = ts.AttentionModel.init(data.batch.vocab_size, 12, seed=1)
    return data, model


def random_batch(seed, n=7, vocab=11, max_len=6, labels="binary"):
    g = np.random.default_rng(seed)
    seqs = [g.integers(0, vocab, size=g.integers(1, max_len + 1)) for _ in range(n)]
    y = g.choice([-1, 1], size=n)
    return ts.RaggedBatch.from_sequences(seqs, y, vocab_size=vocab)


def pytest_addoption(parser):
    parser.addoption(
        "--browser", action="store_true", help="run only the real-browser tests of the built book (make browser-check)"
    )


def pytest_collection_modifyitems(config, items):
    # the browser tests need the built book (`make browser-check`): the plain run deselects them, not skips them
    want = config.getoption("--browser")
    keep = [it for it in items if (it.get_closest_marker("browser") is not None) == want]
    if len(keep) != len(items):
        config.hook.pytest_deselected(items=[it for it in items if it not in keep])
        items[:] = keep
    # the longest first (`slow(seconds=...)`): short tests then fill in, and no worker ends alone with a long one
    items.sort(key=_expected_seconds, reverse=True)


def _expected_seconds(item) -> float:
    slow = item.get_closest_marker("slow")
    return 0.0 if slow is None else float(slow.kwargs.get("seconds", 10.0))


def train_args(**kw) -> dict:
    """A trainer's keyword arguments: the ``TrainSettings`` fields among ``kw`` gathered into ``settings=``."""
    fields = set(ts.TrainSettings.__dataclass_fields__)
    settings = ts.TrainSettings(**{k: v for k, v in kw.items() if k in fields})
    return {"settings": settings} | {k: v for k, v in kw.items() if k not in fields}


def write_book(root: Path, page: str = "ch", text: str | None = None, config: str = "title: t\n") -> Path:
    """A one-page book at ``root``: ``_config.yml``, a ``_toc.yml`` rooted at ``book/<page>`` and its text (if any)."""
    (root / "book").mkdir(parents=True, exist_ok=True)
    (root / "_config.yml").write_text(config)
    (root / "_toc.yml").write_text(f"format: jb-book\nroot: book/{page}\n")
    if text is not None:
        (root / "book" / f"{page}.md").write_text(text)
    return root


def build_book(book: Path, *flags: str) -> str:
    """``jupyter-book build book *flags`` with this interpreter and the checkout's library: the log of a success."""
    binary = Path(sys.executable).parent
    env = dict(os.environ, PATH=f"{binary}{os.pathsep}{os.environ.get('PATH', '')}", PYTHONPATH=str(ROOT / "lib"))
    run = [str(binary / "jupyter-book"), "build", str(book), *flags]
    done = subprocess.run(run, capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    return done.stdout + done.stderr
