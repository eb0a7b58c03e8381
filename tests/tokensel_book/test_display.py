"""tokensel_book.display: attention as HTML."""

import tokensel as ts
import tokensel_book as tb


def test_attention_html(data_dir):
    html = tb.display.attention_html(["good", "<b>", "bad"], [0.2, 0.8], [True, False, True], title="x & y")
    assert "&lt;b&gt;" in html and "x &amp; y" in html
    assert "rgba(33, 102, 172, 0.250)" in html and "rgba(33, 102, 172, 1.000)" in html
    d = ts.reviews.prepare_reviews("imdb", min_df=2, data_dir=data_dir)
    m = ts.AttentionModel.init(len(d.vocab), 8, seed=0)
    out = tb.display.review_attention(m, d, 0)
    assert out.count("attention ") == d.test.sequence(0).numel()


def test_review_attention_follows_truncation(data_dir):
    """A truncated batch shows only the words it kept, with the model's own attention."""
    d = ts.reviews.prepare_reviews("imdb", min_df=2, data_dir=data_dir)
    d.test = d.test.truncate(2)
    m = ts.AttentionModel.init(len(d.vocab), 8, seed=0)
    out = tb.display.review_attention(m, d, 0)
    assert out.count("attention ") == 2
    q = m.attention(d.test.subset([0]))
    assert f"attention {float(q[0]):.3g}" in out


def test_kept_words_is_encodes_rule(data_dir):
    d = ts.reviews.prepare_reviews("imdb", min_df=2, data_dir=data_dir)
    words = d.test_words[0]
    kept = ts.data.text.kept_words(words, d.vocab)
    assert [w for w, k in zip(words, kept, strict=True) if k] == [d.vocab.words[i] for i in d.test.sequence(0).tolist()]
    assert sum(ts.data.text.kept_words(words, d.vocab, max_len=1)) == 1
