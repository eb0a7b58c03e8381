"""tokensel.data.text: the tokenizer, the vocabulary rule and the encoding."""

import pytest

import tokensel as ts
from tokensel.errors import InvalidBatchError


def test_tokenize():
    assert ts.data.text.tokenize("Great movie!<br /><br />I didn't LIKE it, 10/10") == [
        "great",
        "movie",
        "i",
        "didn't",
        "like",
        "it",
        "10",
        "10",
    ]
    with pytest.raises(TypeError):
        ts.data.text.tokenize(None)


def test_vocabulary_rule_and_encoding():
    docs = [ts.data.text.tokenize(t) for t in ["a good film", "a bad film", "good good good", "the end"]]
    vocab = ts.data.text.build_vocabulary(docs, min_df=2)
    assert set(vocab.words) == {"a", "good", "film"} and vocab.rule().startswith("words in at least 2")
    batch, kept = ts.data.text.encode(docs, [1, -1, 1, -1], vocab, max_len=2)
    assert kept.tolist() == [0, 1, 2]  # "the end" has no in-vocabulary word
    assert ts.data.text.decode(batch.sequence(0), vocab) == ["a", "good"]
    assert "bad" not in vocab and vocab.id("good") in (0, 1, 2)
    with pytest.raises(KeyError, match="not in the vocabulary"):
        vocab.id("bad")
    with pytest.raises(ValueError, match="min_df"):
        ts.data.text.build_vocabulary(docs, min_df=0)
    with pytest.raises(ValueError, match="no word occurs"):
        ts.data.text.build_vocabulary(docs, min_df=10)
    with pytest.raises(InvalidBatchError, match="labels"):
        ts.data.text.encode(docs, [1], vocab)
