"""Real-data preparation (tokensel.reviews) on tiny local parquet files."""

import tokensel as ts


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


# ---------------------------------------------------------------- a reader's own labelled texts
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

from tokensel.errors import ArgumentTypeError, DataUnavailableError, InvalidArgumentError  # noqa: E402


def _own_texts(n=60, seed=0):
    """Texts whose label is carried by one of two words, among neutral filler."""
    rng = np.random.default_rng(seed)
    filler = ["the", "a", "place", "food", "was", "and", "we", "it"]
    texts, labels = [], []
    for i in range(n):
        y = i % 2
        words = list(rng.choice(filler, 5)) + ["great" if y else "awful"]
        rng.shuffle(words)
        texts.append(" ".join(words))
        labels.append(y)
    return texts, labels


@pytest.mark.parametrize(
    "convert, positive",
    [
        (lambda y: y, None),
        (lambda y: [2 * v - 1 for v in y], None),
        (lambda y: ["pos" if v else "neg" for v in y], "pos"),
        (lambda y: np.array(y, dtype=float), None),
    ],
)
def test_prepare_texts_takes_every_label_spelling(convert, positive):
    texts, labels = _own_texts()
    data = ts.prepare_texts(texts, convert(labels), positive=positive, test_fraction=0.25, min_df=2)
    assert data.train.n + data.test.n == 60 and data.test.n == 15
    great, awful = data.vocab.id("great"), data.vocab.id("awful")
    for batch in (data.train, data.test):
        for seq, y in zip(batch.to_lists(), batch.labels.tolist(), strict=True):
            assert (great in seq) == (y > 0) and (awful in seq) == (y < 0)
    assert data.train_ratings is None and not data.is_sample
    assert len(data.test_words) == data.test.n


def test_from_frame_reads_csv_frame_and_dataset(tmp_path):
    import datasets

    texts, labels = _own_texts()
    frame = pd.DataFrame({"body": texts, "stars": ["good" if y else "bad" for y in labels]})
    path = tmp_path / "mine.csv"
    frame.to_csv(path, index=False)
    a = ts.from_frame(path, text="body", label="stars", positive="good", min_df=2)
    b = ts.from_frame(frame, text="body", label="stars", positive="good", min_df=2)
    c = ts.from_frame(datasets.Dataset.from_pandas(frame), text="body", label="stars", positive="good", min_df=2)
    for other in (b, c):
        assert torch.equal(a.train.ids, other.train.ids) and torch.equal(a.test.labels, other.test.labels)
    assert "mine.csv" in a.source and "'bad' -> -1 and 'good' -> +1" in a.source
    with pytest.raises(InvalidArgumentError, match=r"no column 'text' \(argument text\).*\['body', 'stars'\]"):
        ts.from_frame(frame)
    pytest.raises(DataUnavailableError, lambda: ts.from_frame(tmp_path / "absent.csv")).match("not a file")
    pytest.raises(ArgumentTypeError, lambda: ts.from_frame({"train": frame})).match("DatasetDict: pick a split")
    # an empty cell of the CSV comes back as NaN: named, with the fix
    frame.loc[3, "stars"] = None
    frame.to_csv(path, index=False)
    with pytest.raises(InvalidArgumentError, match=r"labels\[3\] is missing.*dropna"):
        ts.from_frame(path, text="body", label="stars", positive="good")


@pytest.mark.parametrize(
    "texts, labels, kw, error, match",
    [
        (["a b", "c d", "e f"], [0, 1, 2], {}, InvalidArgumentError, "exactly two classes, found 3.*merge"),
        (["a b", "c d", "e f"], [1, 1, 1], {}, InvalidArgumentError, "exactly two classes, found 1.*both classes"),
        (["a b", "c d", "e f"], [0, float("nan"), 1], {}, InvalidArgumentError, r"labels\[1\] is missing"),
        (["a b", "c d", "e f"], [0, 1], {}, InvalidArgumentError, "3 texts and 2 labels"),
        (["a b", "c d", "e f"], ["x", "y", "x"], {}, InvalidArgumentError, "say which is positive"),
        (["a b", "c d", "e f"], ["x", "y", "x"], {"positive": "z"}, InvalidArgumentError, "positive='z' is not one"),
        (["a b", "c d", "e f"], ["x", 1, "x"], {}, InvalidArgumentError, "mixes strings and numbers"),
        (["a b", "c d", "e f"], [0, 1, 0], {"test_fraction": 0.01}, InvalidArgumentError, "leaves 0 for testing"),
    ],
)
def test_prepare_texts_refuses_bad_inputs(texts, labels, kw, error, match):
    pytest.raises(error, lambda: ts.prepare_texts(texts, labels, **kw)).match(match)


def test_encode_and_shape_summary_return_named_results():
    vocab = ts.data.text.build_vocabulary([["a", "b"], ["b"]], min_df=1)
    enc = ts.data.text.encode([["a", "b"], ["z"], ["b"]], torch.tensor([1.0, -1.0, 1.0]), vocab)
    batch, kept = enc
    assert enc.batch is batch and enc.kept.tolist() == kept.tolist() == [0, 2]
    x = np.linspace(-1, 1, 200)
    s = ts.shapes.shape_summary(x, 5 * x**2, x)
    bins_p, bins_v, u_gap, rho = s
    assert s.u_gap == u_gap > 1 and s.rho == rho > 0.9 and s.bins_p is bins_p


@pytest.mark.parametrize(
    ("content", "match"),
    [
        (b"text,label\ncaf\xe9 good,1\nbad,0\n", "not UTF-8 text"),
        (b"", "cannot be read as CSV"),
        (b'text,label\n"unclosed,1\n', "cannot be read as CSV"),
    ],
)
def test_a_csv_that_pandas_cannot_read_is_one_clear_error(tmp_path, content, match):
    """Issue 48 (7): a CSV in another encoding, or not a CSV, reached the researcher as a raw pandas error."""
    path = tmp_path / "reviews.csv"
    path.write_bytes(content)
    pytest.raises(ts.errors.InvalidArgumentError, lambda: ts.from_frame(path)).match(match)
