"""Real-data preparation, experiment recipes and the attention view, on tiny local parquet files."""

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch

import tokensel as ts

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
    _write(tmp_path, "imdb/test.parquet", texts[::-1] + ["unknown words only"], labels[::-1] + [1],
           [3, 2, 1, 10, 8, 9, 7])
    _write(tmp_path, "yelp_polarity_sample/test.parquet", texts * 5, labels * 5)
    ts.manifest.write_manifest(tmp_path)
    return tmp_path


def test_prepare_imdb(data_dir):
    d = ts.reviews.prepare_reviews("imdb", min_df=2, data_dir=data_dir)
    assert not d.is_sample and d.train.n == 6 and d.test.n == 6 and d.dropped == (0, 1)
    assert "great" in d.vocab and "br" not in d.vocab
    assert d.test_ratings.tolist() == [3, 2, 1, 10, 8, 9]
    s = d.summary()
    assert s["train reviews"] == 6 and s["vocabulary"] == len(d.vocab)
    assert len(d.test_words) == d.test.n


def test_prepare_yelp_sample_is_split_and_marked(data_dir):
    d = ts.reviews.prepare_reviews("yelp_polarity", min_df=2, data_dir=data_dir)
    assert d.is_sample and d.train.n == 24 and d.test.n == 6
    assert "sample" in d.source and "80%/20%" in d.source
    assert d.summary()["data"].endswith("(sample)")


def test_recipes_run_and_differ(data_dir):
    d = ts.reviews.prepare_reviews("imdb", min_df=2, data_dir=data_dir)
    full, h_full = ts.reviews.train_full(d, d=8, steps=20, lr=0.05, eval_every=10)
    frozen, h_frozen = ts.reviews.train_frozen(d, d=8, steps=20, lr=0.05, eval_every=10)
    one, h_one = ts.reviews.train_one_step_then_freeze(d, d=8, steps=20, lr=0.05, eval_every=10)
    assert h_full.loss.iloc[-1] < h_full.loss.iloc[0]
    init = ts.AttentionModel.init(len(d.vocab), 8, seed=0)
    assert torch.equal(frozen.E, init.E) and not torch.equal(full.E, init.E)
    assert not torch.equal(frozen.v, init.v) and torch.equal(full.v, init.v)  # v trained only in ablations
    assert ts.reviews.one_step_eta(d) > 0 and list(h_one.columns) == list(h_full.columns)


def test_attention_html(data_dir):
    html = ts.display.attention_html(["good", "<b>", "bad"], [0.2, 0.8], [True, False, True], title="x & y")
    assert "&lt;b&gt;" in html and "x &amp; y" in html
    assert "rgba(33, 102, 172, 0.250)" in html and "rgba(33, 102, 172, 1.000)" in html
    d = ts.reviews.prepare_reviews("imdb", min_df=2, data_dir=data_dir)
    m = ts.AttentionModel.init(len(d.vocab), 8, seed=0)
    out = ts.display.review_attention(m, d, 0)
    assert out.count("attention ") == d.test.sequence(0).numel()
