"""Real review data sets prepared for the model: tokenized, vocabulary built on the training
split, encoded as ragged batches.

``prepare_reviews("imdb")`` loads both splits through :func:`tokensel.load_reviews`. For Yelp polarity,
when only the local 1,000-review sample of the test split is available, the sample is split into
train and test parts (80/20 by a fixed seed) and ``is_sample`` is set, so a chapter can say so.

Vocabulary rule (default): words in at least 0.15% of the training reviews (38 of IMDB's 25,000),
which gives 7,903 words on IMDB with the Unicode tokenizer; no truncation: every review keeps all its in-vocabulary words.

Data preparation only: the experiments run on these data sets are in :mod:`tokensel.experiments`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .data import RaggedBatch, labels_from_01
from .errors import DataUnavailableError
from .loaders import load_reviews
from .text import Vocabulary, build_vocabulary, encode, tokenize

DEFAULT_MIN_DF = 0.0015


@dataclass
class ReviewData:
    """A prepared data set: batches, vocabulary, the tokenized test reviews for display."""

    name: str
    train: RaggedBatch
    test: RaggedBatch
    vocab: Vocabulary
    test_words: list  # tokenized test reviews kept in ``test`` (all words, in order)
    test_ratings: np.ndarray | None
    train_ratings: np.ndarray | None
    source: str
    is_sample: bool
    dropped: tuple[int, int]  # reviews dropped for having no in-vocabulary word (train, test)

    def summary(self) -> dict:
        """Token and sequence-length statistics."""
        out = {"data": self.name + (" (sample)" if self.is_sample else ""), "vocabulary": len(self.vocab),
               "rule": self.vocab.rule()}
        for split, b in (("train", self.train), ("test", self.test)):
            L = b.lengths.double()
            out.update({f"{split} reviews": b.n, f"{split} tokens": b.num_tokens,
                        f"{split} mean length": float(L.mean()), f"{split} median length": float(L.median()),
                        f"{split} max length": int(L.max()), f"{split} positive": float((b.labels > 0).double().mean())})
        return out


def _split_sample(ds, frac: float, seed: int):
    idx = np.random.default_rng(seed).permutation(ds.num_rows)
    cut = int(round(frac * ds.num_rows))
    return ds.select(np.sort(idx[:cut])), ds.select(np.sort(idx[cut:]))


def prepare_reviews(name: str, min_df: int | float = DEFAULT_MIN_DF, max_len: int | None = None,
                    data_dir=None, sample_train_fraction: float = 0.8, seed: int = 0) -> ReviewData:
    """Load, tokenize, build the vocabulary on the training split and encode both splits."""
    is_sample = False
    test = load_reviews(name, "test", data_dir=data_dir)
    try:
        train = load_reviews(name, "train", data_dir=data_dir)
    except DataUnavailableError:
        if "sample" not in (test.info.description or ""):
            raise
        train, test = _split_sample(test, sample_train_fraction, seed)
        is_sample = True
    source = test.info.description or name
    tr_words = [tokenize(t) for t in train["text"]]
    te_words = [tokenize(t) for t in test["text"]]
    vocab = build_vocabulary(tr_words, min_df=min_df)
    btr, kept_tr = encode(tr_words, labels_from_01(train["label"]), vocab, max_len=max_len)
    bte, kept_te = encode(te_words, labels_from_01(test["label"]), vocab, max_len=max_len)
    ratings = lambda ds, kept: np.asarray(ds["rating"])[kept] if "rating" in ds.column_names else None  # noqa: E731
    return ReviewData(name, btr, bte, vocab, [te_words[i] for i in kept_te], ratings(test, kept_te),
                      ratings(train, kept_tr), source + (f"; split {sample_train_fraction:.0%}/"
                      f"{1 - sample_train_fraction:.0%} into train/test" if is_sample else ""), is_sample,
                      (len(tr_words) - btr.n, len(te_words) - bte.n))
