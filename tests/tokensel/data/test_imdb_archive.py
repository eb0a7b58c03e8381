"""tokensel.data.imdb_archive: IMDB from an archive in the original layout (parse, verify, cache, reuse, fetch
over HTTP) and the mirror command that writes one."""

import errno
import functools
import http.server
import io
import json
import os
import subprocess
import sys
import threading

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import ROOT, source_archive

import tokensel as ts
from tokensel import config
from tokensel.data import imdb_archive
from tokensel.data.manifest import sha256_file, write_manifest
from tokensel.errors import DataUnavailableError, InvalidArgumentError, StorageError

# a few reviews per split and label, ratings in the names as in aclImdb/{split}/{pos,neg}/<id>_<rating>.txt
TEST = ["great acting", "wonderful", "bad acting", "an awful film ’twas"]
TRAIN = ["a wonderful film", "great, great fun", "boring and bad", "bad <br /> plot", "dull"]
SMALL = {
    "train": dict(text=TRAIN, label=[1, 1, 0, 0, 0], rating=[10, 7, 1, 4, 2], review_id=[3, 11, 0, 2, 10]),
    "test": dict(text=TEST, label=[1, 1, 0, 0], rating=[9, 8, 3, 1], review_id=[5, 1, 4, 0]),
}


@pytest.fixture
def archive(tmp_path):
    return imdb_archive.write_archive(SMALL, tmp_path / "aclImdb_v1.tar.gz")


@pytest.fixture
def use_archive(archive, monkeypatch, tmp_path):
    source_archive(monkeypatch, archive, tmp_path / "cache")
    return archive


def test_archive_is_parsed_into_the_books_table(use_archive, tmp_path):
    test = ts.load_reviews("imdb", "test")
    # rows by label, then review id; ratings and ids from the file names; text verbatim
    assert test["label"] == [0, 0, 1, 1] and test["review_id"] == [0, 4, 1, 5]
    assert test["rating"] == [1, 3, 8, 9] and test["text"][0] == "an awful film ’twas"
    assert "a mirror, verified against TOKENSEL_IMDB_SHA256" in test.info.description
    assert str(tmp_path) not in test.info.description
    train = ts.load_reviews("imdb", "train")
    assert train.num_rows == 5 and sorted(train["rating"]) == [1, 2, 4, 7, 10]  # the unsup review is skipped
    data = ts.reviews.prepare_reviews("imdb", min_df=1)
    assert data.test_ratings.tolist() == [1, 3, 8, 9] and data.train.n == 5


def test_parsed_cache_is_reused_and_keyed_by_content(use_archive, tmp_path):
    folder = imdb_archive.prepare()
    parquet = folder / "imdb" / "train.parquet"
    stamp = parquet.stat().st_mtime_ns
    assert imdb_archive.prepare() == folder and parquet.stat().st_mtime_ns == stamp  # reused, not parsed again
    assert folder.name.startswith(sha256_file(use_archive)[:16])
    meta = json.loads((folder / "MANIFEST.json").read_text())
    assert meta["files"]["imdb/train.parquet"] == sha256_file(parquet) and meta["rows"] == {"train": 5, "test": 4}
    # a damaged cached file (same size, same time stamp) is not trusted: the archive is parsed again
    raw = bytearray(parquet.read_bytes())
    raw[len(raw) // 2] ^= 0xFF
    parquet.write_bytes(bytes(raw))
    os.utime(parquet, ns=(stamp, stamp))
    assert imdb_archive.prepare() == folder
    assert sha256_file(parquet) == meta["files"]["imdb/train.parquet"]
    assert ts.load_reviews("imdb", "train").num_rows == 5


def test_a_full_disk_while_the_cache_key_is_written_leaves_no_key_and_the_next_run_works(
    archive, tmp_path, monkeypatch
):
    """A full disk at ``.seal-key``: one StorageError, no key left; the next run makes it (an empty one refused all)."""
    cache = tmp_path / "cache" / "imdb"
    real_open = io.open

    def full(*args, **kwargs):
        mode = args[1] if len(args) > 1 else kwargs.get("mode", "r")
        handle = real_open(*args, **kwargs)
        if "b" in mode and any(c in mode for c in "wax+"):
            handle.close()
            raise OSError(errno.ENOSPC, "No space left on device")
        return handle

    def no_sync(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    with monkeypatch.context() as m:
        m.setattr(io, "open", full)
        m.setattr(os, "fsync", no_sync)
        with pytest.raises(StorageError, match=r"seal-key.*No space left on device"):
            imdb_archive.prepare(str(archive), sha256=sha256_file(archive), cache=cache)
    assert not [p.name for p in cache.iterdir() if p.name.startswith(".seal-key")]
    folder = imdb_archive.prepare(str(archive), sha256=sha256_file(archive), cache=cache)
    key = cache / ".seal-key"
    assert len(key.read_bytes()) == 32 and key.stat().st_mode & 0o777 == 0o600
    assert sorted(p.name for p in cache.iterdir() if p.name.startswith(".seal-key")) == [".seal-key"]
    assert pq.read_table(folder / "imdb" / "test.parquet").num_rows == 4


def test_a_different_archive_gets_its_own_cache(use_archive, tmp_path, monkeypatch):
    first = imdb_archive.prepare()
    other = dict(SMALL, test={**SMALL["test"], "text": ["changed"] + SMALL["test"]["text"][1:]})
    path = imdb_archive.write_archive(other, tmp_path / "other" / "aclImdb_v1.tar.gz")
    monkeypatch.setenv("TOKENSEL_IMDB_ARCHIVE", str(path))
    monkeypatch.setenv("TOKENSEL_IMDB_SHA256", sha256_file(path))
    assert "changed" in ts.load_reviews("imdb", "test")["text"]
    folders = sorted((tmp_path / "cache" / "imdb").glob("*-v*"))
    assert len(folders) == 2 and first in folders  # same names and sizes, other content: another folder


def test_checksum_failure_caches_nothing(use_archive, monkeypatch, tmp_path):
    monkeypatch.setenv("TOKENSEL_IMDB_SHA256", "0" * 64)
    refused = "has SHA-256 [0-9a-f]{64}, not the expected 0{64}.*nothing was parsed"
    pytest.raises(DataUnavailableError, lambda: ts.load_reviews("imdb", "train")).match(refused)
    assert not list((tmp_path / "cache").glob("imdb/*-v*"))
    monkeypatch.setenv("TOKENSEL_IMDB_SHA256", "not-a-checksum")
    with pytest.raises(InvalidArgumentError, match="TOKENSEL_IMDB_SHA256='not-a-checksum'.*64 hexadecimal"):
        ts.load_reviews("imdb", "train")


def test_canonical_checksum_is_required_for_the_canonical_url(monkeypatch):
    monkeypatch.delenv("TOKENSEL_IMDB_SHA256", raising=False)
    assert imdb_archive.expected_sha256(config.CANONICAL_IMDB_URL) == imdb_archive.CANONICAL_SHA256
    assert imdb_archive.expected_sha256("/somewhere/else.tar.gz") is None


def test_unverified_archive_is_used_with_a_warning(archive, monkeypatch, tmp_path):
    source_archive(monkeypatch, archive, tmp_path / "cache", sha256=False)
    with pytest.warns(UserWarning, match="not the Stanford release.*unverified"):
        ds = ts.load_reviews("imdb", "test")
    assert "an unverified copy" in ds.info.description


def test_damaged_and_foreign_archives_are_refused(tmp_path):
    good = imdb_archive.write_archive(SMALL, tmp_path / "good.tar.gz")
    cut = tmp_path / "cut.tar.gz"
    cut.write_bytes(good.read_bytes()[: good.stat().st_size // 2])
    pytest.raises(DataUnavailableError, lambda: imdb_archive.parse_archive(cut)).match("truncated")
    wrong = dict(SMALL, train={**SMALL["train"], "rating": [10, 7, 5, 4, 2]})  # a negative review rated 5
    with pytest.raises(DataUnavailableError, match="rating 5 does not fit the IMDB layout") as refused:
        imdb_archive.parse_archive(imdb_archive.write_archive(wrong, tmp_path / "wrong.tar.gz"))
    assert "truncated" not in str(refused.value)  # a refusal for the content does not blame the download
    one_sided = {"train": SMALL["train"], "test": {k: v[:2] for k, v in SMALL["test"].items()}}
    with pytest.raises(DataUnavailableError, match="no test reviews of label"):
        imdb_archive.parse_archive(imdb_archive.write_archive(one_sided, tmp_path / "one.tar.gz"))
    with pytest.raises(DataUnavailableError, match="does not exist"):
        imdb_archive.fetch(str(tmp_path / "missing.tar.gz"))


def _tokensel(env, *args):
    """``python -m tokensel ARGS`` in a process of its own, with the environment ``env``."""
    argv = [sys.executable, "-m", "tokensel", *map(str, args)]
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300, cwd=ROOT)


@pytest.mark.slow
def test_mirror_command_round_trips_a_data_folder(tmp_path):
    root = tmp_path / "data"
    (root / "imdb").mkdir(parents=True)
    for split, cols in SMALL.items():
        pq.write_table(pa.table(cols), root / "imdb" / f"{split}.parquet")
    write_manifest(root)
    out = tmp_path / "mirror" / "aclImdb_v1.tar.gz"
    run = _tokensel({k: v for k, v in os.environ.items() if not k.startswith("TOKENSEL_")}, "imdb-mirror", root, out)
    assert run.returncode == 0, run.stderr
    tables = imdb_archive.parse_archive(out)
    assert tables["test"].column("rating").to_pylist() == [1, 3, 8, 9]
    assert tables["train"].num_rows == 5


@pytest.mark.slow
def test_archive_downloaded_over_http_by_the_datasets_download_manager(archive, tmp_path):
    """An http URL fetched by datasets' download manager, cached, verified, parsed; a second process reuses it."""
    served = []

    class Handler(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_GET(self):
            served.append(self.path)
            super().do_GET()

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Handler, directory=archive.parent))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/{archive.name}"
        env = {k: v for k, v in os.environ.items() if not k.startswith(("TOKENSEL_", "HF_"))}
        env |= dict(TOKENSEL_IMDB_ARCHIVE=url, TOKENSEL_IMDB_SHA256=sha256_file(archive), HF_HOME=str(tmp_path / "hf"))
        env |= dict(TOKENSEL_CACHE_DIR=str(tmp_path / "cache"), HF_DATASETS_DISABLE_PROGRESS_BARS="1")
        for _ in range(2):
            run = _tokensel(env, "data", "imdb")
            assert run.returncode == 0, run.stdout + run.stderr
            assert "imdb/test: 4 reviews, columns text, label, rating, review_id" in run.stdout
        assert list((tmp_path / "cache" / "downloads").rglob("*")), "nothing was cached by the download manager"
        gets = [p for p in served if p.endswith(archive.name)]
        assert len(gets) == 1, served  # the second process used the cached download (a HEAD check at most)
    finally:
        server.shutdown()
        server.server_close()


def test_an_archive_refused_for_its_content_says_why_and_file_urls_name_their_path(tmp_path):
    """Issue 48 (8): file://localhost/<path> was read as the relative path localhost/<path>."""
    good = imdb_archive.write_archive(SMALL, tmp_path / "a b.tar.gz")
    assert imdb_archive.fetch(f"file://localhost{tmp_path}/a%20b.tar.gz") == good
    assert imdb_archive.fetch(f"file://{tmp_path}/a%20b.tar.gz") == good
    with pytest.raises(DataUnavailableError, match="another host"):
        imdb_archive.fetch(f"file://example.org{tmp_path}/a.tar.gz")
