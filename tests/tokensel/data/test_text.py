"""tokensel.data.text: the tokenizer, the vocabulary rule and the encoding."""

import unicodedata

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import tokensel as ts
from tokensel.data.text import _TAG, _WORD, build_vocabulary


def test_tokenize():
    words = ["great", "movie", "i", "didn't", "like", "it", "10", "10"]
    assert ts.data.text.tokenize("Great movie!<br /><br />I didn't LIKE it, 10/10") == words


@settings(max_examples=400, deadline=None)
@given(st.text(alphabet=st.characters(max_codepoint=127), max_size=60))
def test_an_ascii_text_gives_the_words_of_the_unicode_rule(text):
    """The tokenizer's ASCII path finds the words the Unicode rule finds."""
    unicode_rule = _WORD.findall(_TAG.sub(" ", unicodedata.normalize("NFC", text).lower().replace("\u2019", "'")))
    assert ts.data.text.tokenize(text) == unicode_rule
    for crafted in ["Don't <b>STOP</b> 10/10", "it's a 'quoted' word''s", "A1b2'c3 x'y'z <br/>end"]:
        assert ts.data.text.tokenize(crafted) == _WORD.findall(_TAG.sub(" ", crafted.lower()))


def test_vocabulary_rule_and_encoding():
    docs = [ts.data.text.tokenize(t) for t in ["a good film", "a bad film", "good good good", "the end"]]
    vocab = ts.data.text.build_vocabulary(docs, min_df=2)
    assert set(vocab.words) == {"a", "good", "film"} and vocab.rule().startswith("words in at least 2")
    batch, kept = ts.data.text.encode(docs, torch.tensor([1.0, -1.0, 1.0, -1.0]), vocab, max_len=2)
    assert kept.tolist() == [0, 1, 2]  # "the end" has no in-vocabulary word
    assert [vocab.words[i] for i in batch.sequence(0).tolist()] == ["a", "good"]
    assert "bad" not in vocab and vocab.id("good") in (0, 1, 2)
    with pytest.raises(ts.errors.UnknownWordError, match="not in the vocabulary"):  # a KeyError too
        vocab.id("bad")
    pytest.raises(ValueError, lambda: ts.data.text.build_vocabulary(docs, min_df=10)).match("no word occurs")


def test_vocabularies_compare_by_words_counts_and_rule():
    """Two vocabularies are equal when their words, document frequencies and rule are; each is hashable."""
    docs = [["a", "b"], ["a", "c"], ["b", "a"]]
    v, w = build_vocabulary(docs, min_df=1), build_vocabulary([list(d) for d in docs], min_df=1)
    assert v == w and hash(v) == hash(w) and len({v, w}) == 1
    assert v != build_vocabulary(docs, min_df=2)  # another rule, other words
    assert v != build_vocabulary(docs + [["c"]], min_df=1)  # the same words, other frequencies
    assert v != "a vocabulary" and (v == 3) is False
