"""tokensel.data.loaders: reviews through Hugging Face datasets from local copies, the hub layout and the
project's data folder; what a reader sees when nothing is reachable."""

import os
import subprocess
import sys

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import shared_data_dir

import tokensel as ts
from tokensel.errors import ArgumentTypeError, DataUnavailableError, InvalidArgumentError


def _write(dirpath, rel, texts, labels):
    path = dirpath / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table({"text": texts, "label": labels}), path)
    return path


def _hub_layout(root, n_train, n_test, seed=0):
    """A local copy laid out as the hub's parquet export (plain_text/<split>-00000-of-00001.parquet)."""
    g = np.random.default_rng(seed)
    for split, n in (("train", n_train), ("test", n_test)):
        labels = g.permutation(np.arange(n) % 2)
        texts = [f"{'good' if y else 'bad'} place number {i}" for i, y in enumerate(labels)]
        (root / "plain_text").mkdir(parents=True, exist_ok=True)
        table = pa.table({"text": texts, "label": labels.astype(np.int64)})
        pq.write_table(table, root / "plain_text" / f"{split}-00000-of-00001.parquet")
    return root


def test_yelp_from_the_hub_layout_with_bad_columns_is_a_data_error(tmp_path, monkeypatch):
    monkeypatch.delenv("TOKENSEL_DATA_DIR", raising=False)
    root = _hub_layout(tmp_path / "yelp", 6, 4)
    table = pa.table({"text": ["a", "b", "c", "d"], "label": np.array([0, 1, 2, 1], dtype=np.int64)})
    pq.write_table(table, root / "plain_text" / "test-00000-of-00001.parquet")
    monkeypatch.setenv("TOKENSEL_YELP_SOURCE", str(root))
    pytest.raises(DataUnavailableError, lambda: ts.load_reviews("yelp_polarity", "test")).match("label")
    assert ts.load_reviews("yelp_polarity", "train").num_rows == 6  # the good split still loads


def test_local_parquet_through_datasets(tmp_path):
    _write(tmp_path, "imdb/train.parquet", ["good film", "bad film"], [1, 0])
    ts.data.manifest.write_manifest(tmp_path)
    ds = ts.load_reviews("imdb", "train", data_dir=tmp_path)
    assert ds.num_rows == 2 and ds["label"] == [1, 0]
    assert "local copy imdb/train.parquet (SHA-256" in ds.info.description
    assert str(tmp_path) not in ds.info.description  # provenance by checksum, never a local path
    import datasets

    assert isinstance(ds, datasets.Dataset)


def test_loader_errors(tmp_path, monkeypatch):
    with pytest.raises(DataUnavailableError, match="does not exist.*TOKENSEL_IMDB_ARCHIVE.*TOKENSEL_DATA_DIR"):
        ts.load_reviews("imdb", data_dir=tmp_path / "nowhere")
    with pytest.raises(DataUnavailableError, match="missing data file .*imdb/test.parquet"):
        ts.load_reviews("imdb", "test", data_dir=tmp_path)
    with pytest.raises(DataUnavailableError, match="no 'train' split .*1,000-review sample"):
        ts.load_reviews("yelp_polarity", "train", data_dir=tmp_path)
    bad = tmp_path / "imdb" / "test.parquet"
    bad.parent.mkdir(parents=True, exist_ok=True)
    bad.write_bytes(b"PAR1 this is not a parquet file")
    with pytest.raises(DataUnavailableError, match="damaged"):  # its checksum is checked before it is parsed
        ts.load_reviews("imdb", "test", data_dir=tmp_path)
    ts.data.manifest.write_manifest(tmp_path)  # recorded as it is: then it is parsed, and refused as parquet
    pytest.raises(DataUnavailableError, lambda: ts.load_reviews("imdb", "test", data_dir=tmp_path)).match("corrupted")
    bad.unlink()
    _write(tmp_path, "yelp_polarity_sample/test.parquet", ["x"], [1])
    import pyarrow as pa2

    pq.write_table(pa2.table({"review": ["x"], "label": [1]}), tmp_path / "yelp_polarity_sample/test.parquet")
    ts.data.manifest.write_manifest(tmp_path)
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
    with pytest.raises(
        DataUnavailableError,
        match="(?s)could not download the IMDB archive 'https://ai.stanford.edu/"
        ".*unreachable.*TOKENSEL_IMDB_ARCHIVE.*TOKENSEL_DATA_DIR",
    ):
        ts.load_reviews("imdb", "train")


@pytest.mark.slow
def test_no_data_and_no_network_in_a_fresh_process(tmp_path):
    """prepare_reviews with no data folder, no archive setting and no network: one clear message."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOKENSEL_")}
    env |= dict(HF_DATASETS_OFFLINE="1", HF_HUB_OFFLINE="1", HF_HOME=str(tmp_path / "hf"))
    env |= dict(TOKENSEL_CACHE_DIR=str(tmp_path / "cache"))
    code = (
        "import tokensel as ts\n"
        "try:\n    ts.reviews.prepare_reviews('imdb')\n"
        "except ts.DataUnavailableError as e:\n    print('ERR', e)\n"
    )
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
    docs = [ts.data.text.tokenize(t) for t in yelp["text"][:200]]
    vocab = ts.data.text.build_vocabulary(docs, min_df=3)
    batch, kept = ts.data.text.encode(docs, ts.labels_from_01(np.array(yelp["label"][:200])), vocab)
    assert batch.n == len(kept) > 150


def test_yelp_from_the_hub_layout_is_a_stated_stratified_sample(tmp_path, monkeypatch):
    monkeypatch.delenv("TOKENSEL_DATA_DIR", raising=False)
    monkeypatch.setenv("TOKENSEL_YELP_SOURCE", str(_hub_layout(tmp_path / "yelp", 60, 30)))
    monkeypatch.setenv("TOKENSEL_YELP_SIZE", "20")
    train = ts.load_reviews("yelp_polarity", "train")
    assert train.num_rows == 20 and sum(train["label"]) == 10
    assert "a stratified sample of 20 of its 60 reviews" in train.info.description
    assert ts.load_reviews("yelp_polarity", "train")["text"] == train["text"]  # deterministic
    data = ts.reviews.prepare_reviews("yelp_polarity", min_df=1)
    assert not data.is_sample and data.train.n == 20 and data.test.n == 20 and "stratified sample" in data.source
    monkeypatch.setenv("TOKENSEL_YELP_SIZE", "full")
    assert ts.load_reviews("yelp_polarity", "train").num_rows == 60
    monkeypatch.setenv("TOKENSEL_YELP_SIZE", "lots")
    with pytest.raises(InvalidArgumentError, match="TOKENSEL_YELP_SIZE='lots'.*'full'"):
        ts.load_reviews("yelp_polarity", "train")


def test_stratified_sample_keeps_label_shares():
    import datasets

    labels = [0] * 70 + [1] * 30
    ds = datasets.Dataset.from_dict({"text": [str(i) for i in range(100)], "label": labels})
    sub = ts.data.loaders.stratified_sample(ds, 10, seed=3)
    assert sub.num_rows == 10 and sum(sub["label"]) == 3
    assert [int(t) for t in sub["text"]] == sorted(int(t) for t in sub["text"])
    assert ts.data.loaders.stratified_sample(ds, 10, seed=3)["text"] == sub["text"]
    assert ts.data.loaders.stratified_sample(ds, 200).num_rows == 100


def test_invalid_utf8_in_the_text_column_is_a_data_error(tmp_path):
    data = pa.py_buffer(b"good\xff\xfe")
    offsets = pa.py_buffer(np.array([0, 4, 6], dtype=np.int32).tobytes())
    text = pa.Array.from_buffers(pa.string(), 2, [None, offsets, data])
    (tmp_path / "yelp_polarity_sample").mkdir()
    pq.write_table(pa.table({"text": text, "label": pa.array([1, 0])}), tmp_path / "yelp_polarity_sample/test.parquet")
    ts.data.manifest.write_manifest(tmp_path)
    with pytest.raises(DataUnavailableError, match="UTF-8|corrupted"):
        ts.load_reviews("yelp_polarity", "test", data_dir=tmp_path)


def test_a_review_without_a_text_is_named_before_tokenizing(monkeypatch):
    import datasets

    good = datasets.Dataset.from_dict({"text": ["a good film", "a bad film"], "label": [1, 0]})
    holed = datasets.Dataset.from_dict({"text": ["a good film", None], "label": [1, 0]})
    splits = {"train": good, "test": holed}
    monkeypatch.setattr(ts.data.reviews, "load_reviews", lambda name, split, data_dir=None: splits[split])
    with pytest.raises(ArgumentTypeError, match="imdb/test: review 1 has a text of type NoneType"):
        ts.reviews.prepare_reviews("imdb", min_df=1)
