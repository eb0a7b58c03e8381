"""Tokenizer, vocabulary, encoding, and the datasets-based loader (local parquet and hub errors)."""

import os
import subprocess
import sys

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import tokensel as ts
from tokensel.errors import DataUnavailableError, InvalidBatchError

from conftest import shared_data_dir


def test_tokenize():
    assert ts.text.tokenize("Great movie!<br /><br />I didn't LIKE it, 10/10") == \
        ["great", "movie", "i", "didn't", "like", "it", "10", "10"]
    with pytest.raises(TypeError):
        ts.text.tokenize(None)


def test_vocabulary_rule_and_encoding():
    docs = [ts.text.tokenize(t) for t in ["a good film", "a bad film", "good good good", "the end"]]
    vocab = ts.text.build_vocabulary(docs, min_df=2)
    assert set(vocab.words) == {"a", "good", "film"} and vocab.rule().startswith("words in at least 2")
    batch, kept = ts.text.encode(docs, [1, -1, 1, -1], vocab, max_len=2)
    assert kept.tolist() == [0, 1, 2]  # "the end" has no in-vocabulary word
    assert ts.text.decode(batch.sequence(0), vocab) == ["a", "good"]
    assert "bad" not in vocab and vocab.id("good") in (0, 1, 2)
    with pytest.raises(KeyError, match="not in the vocabulary"):
        vocab.id("bad")
    with pytest.raises(ValueError, match="min_df"):
        ts.text.build_vocabulary(docs, min_df=0)
    with pytest.raises(ValueError, match="no word occurs"):
        ts.text.build_vocabulary(docs, min_df=10)
    with pytest.raises(InvalidBatchError, match="labels"):
        ts.text.encode(docs, [1], vocab)


def _write(dirpath, rel, texts, labels):
    path = dirpath / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table({"text": texts, "label": labels}), path)
    return path


def test_local_parquet_through_datasets(tmp_path):
    _write(tmp_path, "imdb/train.parquet", ["good film", "bad film"], [1, 0])
    ts.manifest.write_manifest(tmp_path)
    ds = ts.load_reviews("imdb", "train", data_dir=tmp_path)
    assert ds.num_rows == 2 and ds["label"] == [1, 0]
    assert "local copy imdb/train.parquet (SHA-256" in ds.info.description
    assert str(tmp_path) not in ds.info.description  # provenance by checksum, never a local path
    import datasets
    assert isinstance(ds, datasets.Dataset)


def test_loader_errors(tmp_path, monkeypatch):
    with pytest.raises(ValueError, match="unknown data set"):
        ts.load_reviews("mnist")
    with pytest.raises(ValueError, match="split"):
        ts.load_reviews("imdb", "validation", data_dir=tmp_path)
    with pytest.raises(DataUnavailableError, match="does not exist.*TOKENSEL_IMDB_ARCHIVE.*TOKENSEL_DATA_DIR"):
        ts.load_reviews("imdb", data_dir=tmp_path / "nowhere")
    with pytest.raises(DataUnavailableError, match="missing data file .*imdb/test.parquet"):
        ts.load_reviews("imdb", "test", data_dir=tmp_path)
    with pytest.raises(DataUnavailableError, match="no 'train' split .*1,000-review sample"):
        ts.load_reviews("yelp_polarity", "train", data_dir=tmp_path)
    bad = tmp_path / "imdb" / "test.parquet"
    bad.parent.mkdir(parents=True, exist_ok=True)
    bad.write_bytes(b"PAR1 this is not a parquet file")
    with pytest.raises(DataUnavailableError, match="corrupted"):
        ts.load_reviews("imdb", "test", data_dir=tmp_path)
    _write(tmp_path, "yelp_polarity_sample/test.parquet", ["x"], [1])
    import datasets
    import pyarrow as pa2
    pq.write_table(pa2.table({"review": ["x"], "label": [1]}), tmp_path / "yelp_polarity_sample/test.parquet")
    ts.manifest.write_manifest(tmp_path)
    with pytest.raises(DataUnavailableError, match="lacks column"):
        ts.load_reviews("yelp_polarity", "test", data_dir=tmp_path)


def test_unreachable_sources_name_every_fix(monkeypatch):
    monkeypatch.delenv("TOKENSEL_DATA_DIR", raising=False)
    import datasets

    def refuse(*a, **k):
        raise ConnectionError("unreachable")

    monkeypatch.setattr(datasets, "load_dataset", refuse)
    with pytest.raises(DataUnavailableError, match="unreachable.*fancyzhx/yelp_polarity.*TOKENSEL_DATA_DIR"):
        ts.load_reviews("yelp_polarity", "train")
    monkeypatch.setattr(datasets.DownloadManager, "download", refuse)
    with pytest.raises(DataUnavailableError, match="(?s)could not download the IMDB archive 'https://ai.stanford.edu/"
                       ".*unreachable.*TOKENSEL_IMDB_ARCHIVE.*TOKENSEL_DATA_DIR"):
        ts.load_reviews("imdb", "train")


def test_no_data_and_no_network_in_a_fresh_process(tmp_path):
    """prepare_reviews with no data folder, no archive setting and no network: one clear message."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOKENSEL_")}
    env.update(HF_DATASETS_OFFLINE="1", HF_HUB_OFFLINE="1", HF_HOME=str(tmp_path / "hf"),
               TOKENSEL_CACHE_DIR=str(tmp_path / "cache"))
    code = ("import tokensel as ts\n"
            "try:\n    ts.reviews.prepare_reviews('imdb')\n"
            "except ts.DataUnavailableError as e:\n    print('ERR', e)\n")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert "ERR could not download the IMDB archive" in out.stdout, out.stdout + out.stderr
    assert "To get IMDB" in out.stdout and "TOKENSEL_IMDB_ARCHIVE" in out.stdout and "TOKENSEL_DATA_DIR" in out.stdout
    assert "Traceback" not in out.stdout


def test_real_yelp_sample_and_imdb_schema():
    d = shared_data_dir()
    if d is None:
        pytest.skip("no real data directory (set TOKENSEL_DATA_DIR)")
    yelp = ts.load_reviews("yelp_polarity", "test", data_dir=d)
    assert yelp.num_rows == 1000 and sum(yelp["label"]) == 482
    imdb = ts.load_reviews("imdb", "test", data_dir=d)
    assert imdb.num_rows == 25_000 and set(imdb.column_names) >= {"text", "label", "rating"}
    docs = [ts.text.tokenize(t) for t in yelp["text"][:200]]
    vocab = ts.text.build_vocabulary(docs, min_df=3)
    batch, kept = ts.text.encode(docs, ts.labels_from_01(np.array(yelp["label"][:200])), vocab)
    assert batch.n == len(kept) > 150
