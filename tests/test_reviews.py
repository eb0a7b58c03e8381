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
