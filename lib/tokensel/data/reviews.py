"""Real review data sets prepared for the model: tokenized, the vocabulary built on the training split (words
in at least 0.15 % of its reviews: 7,903 on IMDB), both splits encoded as batches. A reader's own labelled texts
become the same :class:`ReviewData` (:func:`prepare_texts`, :func:`from_frame`)."""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, replace

import numpy as np
import torch

from ..errors import ArgumentTypeError, DataUnavailableError, InvalidArgumentError
from ..validation import Choice, Constraint, FilePath, Instance, Int, Real, Text, declare
from .batch import RaggedBatch, labels_from_01
from .loaders import SOURCES, load_reviews
from .text import MIN_DF, Vocabulary, build_vocabulary, encode, tokenize

DEFAULT_MIN_DF = 0.0015


@dataclass
class ReviewData:
    """A prepared data set: batches, vocabulary, the tokenized test reviews for display."""

    name: str
    train: RaggedBatch
    test: RaggedBatch
    vocab: Vocabulary
    test_words: list[list[str]]  # tokenized test reviews kept in ``test`` (all words, in order)
    test_ratings: np.ndarray | None
    train_ratings: np.ndarray | None
    source: str
    is_sample: bool
    dropped: tuple[int, int]  # reviews dropped for having no in-vocabulary word (train, test)

    @declare(per_class=Int(min=1), min_len=Int(min=0), max_len=Int(min=0))
    def examples(self, per_class: int = 2, min_len: int = 40, max_len: int = 90) -> list[int]:
        """Indices of test reviews to show: the first ``per_class`` positive, then negative, reviews of ``min_len``
        to ``max_len`` words. Chapter 06."""
        if max_len < min_len:
            raise InvalidArgumentError(f"max_len must be an int >= {min_len} (min_len), got {max_len}")
        lengths = np.array([len(w) for w in self.test_words])
        labels = self.test.labels.cpu().numpy()
        fits = (lengths >= min_len) & (lengths <= max_len)
        return [int(i) for sign in (1, -1) for i in np.flatnonzero(fits & (labels == sign))[:per_class]]

    def summary(self) -> dict:
        """Token and sequence-length statistics."""
        out = {
            "data": self.name + (" (sample)" if self.is_sample else ""),
            "vocabulary": len(self.vocab),
            "rule": self.vocab.rule(),
        }
        for split, b in (("train", self.train), ("test", self.test)):
            L = b.lengths.double()
            numbers = {"reviews": b.n, "tokens": b.num_tokens, "mean length": float(L.mean())}
            numbers |= {"median length": float(L.median()), "max length": int(L.max())}
            numbers["positive"] = float((b.labels > 0).double().mean())
            out.update({f"{split} {k}": x for k, x in numbers.items()})
        return out


def _split_sample(ds, frac: float, seed: int):
    idx = np.random.default_rng(seed).permutation(ds.num_rows)
    cut = int(round(frac * ds.num_rows))
    return ds.select(np.sort(idx[:cut])), ds.select(np.sort(idx[cut:]))


class Column(Constraint):
    """Values, one per document (a list, array or column; not a str), passed on as a list; with ``texts`` each a
    non-empty str."""

    def __init__(self, *, texts: bool = False, allow_none: bool = False):
        super().__init__(allow_none=allow_none)
        self.texts = texts
        self.what = f"a list (or column) of {'strings, one per document' if texts else 'labels'}"

    def check(self, value, name, dims):
        values = value.tolist() if hasattr(value, "tolist") and not isinstance(value, (list, tuple)) else value
        if isinstance(values, (str, bytes, dict)) or not hasattr(values, "__len__") or not hasattr(values, "__iter__"):
            raise ArgumentTypeError(f"{name} must be {self.describe()}, got {type(value).__name__}")
        values = list(values)
        for i, t in enumerate(values if self.texts else ()):
            if not isinstance(t, str):
                raise ArgumentTypeError(
                    f"{name}[{i}] is a {type(t).__name__}, not a str: convert or drop it (frame.dropna(subset=[text]))"
                )
            if not t.strip():
                raise InvalidArgumentError(f"{name}[{i}] is empty: drop the empty documents first")
        return values


class Source(Constraint):
    """Where :func:`from_frame` reads labelled texts (passed on as it is)."""

    what = "a CSV path, a pandas DataFrame or a datasets.Dataset"

    def check(self, value, name, dims):
        table = hasattr(value, "columns") or (hasattr(value, "column_names") and hasattr(value, "num_rows"))
        if not (isinstance(value, (str, os.PathLike)) or table):
            raise ArgumentTypeError(
                f"{name} must be {self.describe()}, got {type(value).__name__} (a DatasetDict: pick a split, "
                "data['train'])"
            )
        return value


REVIEW_DATA = Instance(ReviewData, what="a ReviewData (from tokensel.data.reviews.prepare_reviews)")
SEED = Int(min=0)


@declare(
    name=Choice(*SOURCES, what="data set"),
    min_df=MIN_DF,
    max_len=Int(min=1, allow_none=True),
    data_dir=FilePath(allow_none=True),
    sample_train_fraction=Real(min=0.0, max=1.0, min_inclusive=False, max_inclusive=False),
    seed=SEED,
)
def prepare_reviews(
    name: str,
    min_df: int | float = DEFAULT_MIN_DF,
    max_len: int | None = None,
    data_dir=None,
    sample_train_fraction: float = 0.8,
    seed: int = 0,
) -> ReviewData:
    """Load, tokenize, build the vocabulary on the training split and encode both splits (about ten seconds on
    IMDB). Introduced in chapter 06."""
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
    # each split's columns in one read (iterating a column of a Dataset formats it row by row)
    tr_cols, te_cols = train[:], test[:]
    for split, cols in (("train", tr_cols), ("test", te_cols)):
        bad = next((i for i, x in enumerate(cols["text"]) if not isinstance(x, str)), None)
        if bad is not None:
            raise ArgumentTypeError(
                f"{name}/{split}: review {bad} has a text of type {type(cols['text'][bad]).__name__}, not a str: "
                "the data files are damaged; fetch them again"
            )
    tr_words = [tokenize(t) for t in tr_cols["text"]]
    te_words = [tokenize(t) for t in te_cols["text"]]
    vocab = build_vocabulary(tr_words, min_df=min_df)
    btr, kept_tr = encode(tr_words, labels_from_01(np.asarray(tr_cols["label"])), vocab, max_len=max_len)
    bte, kept_te = encode(te_words, labels_from_01(np.asarray(te_cols["label"])), vocab, max_len=max_len)
    rate = lambda cols, kept: np.asarray(cols["rating"])[kept] if "rating" in cols else None  # noqa: E731
    if is_sample:
        source += f"; split {sample_train_fraction:.0%}/{1 - sample_train_fraction:.0%} into train/test"
    words, dropped = [te_words[i] for i in kept_te], (len(tr_words) - btr.n, len(te_words) - bte.n)
    ratings = rate(te_cols, kept_te), rate(tr_cols, kept_tr)
    return ReviewData(name, btr, bte, vocab, words, *ratings, source, is_sample, dropped)


@declare(labels=Column(), name=Text())
def binary_labels(labels, positive=None, name: str = "labels") -> tuple[torch.Tensor, tuple]:
    """Two-class labels as ±1: ``(y, (negative, positive))``. Numbers map the larger value to +1; two strings need
    ``positive``. Missing labels and other than two classes are refused, naming the first offending position."""
    values = labels
    for i, v in enumerate(values):
        if v is None or (isinstance(v, (float, np.floating)) and math.isnan(v)):
            raise InvalidArgumentError(
                f"{name}[{i}] is missing (None or NaN): drop the rows without a label first "
                "(frame.dropna(subset=[label]))"
            )
        if not isinstance(v, (str, bool, int, float, np.integer, np.floating, np.bool_)):
            raise ArgumentTypeError(f"{name}[{i}] is a {type(v).__name__}: labels are numbers (0/1, -1/+1) or strings")
    classes = sorted(set(values), key=lambda v: (isinstance(v, str), v))
    if len(classes) != 2:
        shown = classes[:5]
        raise InvalidArgumentError(
            f"{name} must hold exactly two classes, found {len(classes)}: {shown}"
            + ("..." if len(classes) > 5 else "")
            + (
                ": merge classes into two (e.g. ratings above and below a threshold)"
                if len(classes) > 2
                else ": both classes are needed"
            )
        )
    if any(isinstance(c, str) for c in classes) and not all(isinstance(c, str) for c in classes):
        raise InvalidArgumentError(f"{name} mixes strings and numbers ({classes}): use one kind")
    if positive is None:
        if isinstance(classes[0], str):
            raise InvalidArgumentError(
                f"{name} are the strings {classes}: say which is positive (positive={classes[1]!r})"
            )
        positive = classes[1]
    elif positive not in classes:
        raise InvalidArgumentError(f"positive={positive!r} is not one of the two classes of {name}, {classes}")
    negative = classes[0] if classes[1] == positive else classes[1]
    y = torch.tensor([1.0 if v == positive else -1.0 for v in values], dtype=torch.float64)
    return y, (negative, positive)


@declare(
    texts=Column(texts=True),
    labels=Column(),
    test_fraction=Real(min=0.0, max=1.0, min_inclusive=False, max_inclusive=False),
    min_df=MIN_DF,
    max_len=Int(min=1, allow_none=True),
    seed=SEED,
    name=Text(),
)
def prepare_texts(
    texts,
    labels,
    positive=None,
    test_fraction: float = 0.2,
    min_df: int | float = DEFAULT_MIN_DF,
    max_len: int | None = None,
    seed: int = 0,
    name: str = "own data",
) -> ReviewData:
    """A reader's labelled texts as a :class:`ReviewData`: ``labels`` of two classes (:func:`binary_labels`), a
    random ``test_fraction`` held out, the vocabulary built on the rest by :func:`prepare_reviews`' rule. It
    works with every recipe of ``tokensel.experiments`` that needs no star ratings."""
    y, classes = binary_labels(labels, positive=positive)
    if len(texts) != len(y):
        raise InvalidArgumentError(
            f"texts and labels must have the same length, got {len(texts)} texts and {len(y)} labels"
        )
    order = np.random.default_rng(seed).permutation(len(texts))
    cut = int(round(test_fraction * len(texts)))
    if cut < 1 or cut > len(texts) - 2:
        raise InvalidArgumentError(
            f"test_fraction={test_fraction} of {len(texts)} documents leaves {cut} for testing "
            f"and {len(texts) - cut} for training: both need documents (at least 1 and 2)"
        )
    test_idx, train_idx = np.sort(order[:cut]), np.sort(order[cut:])
    if len(set(y[train_idx].tolist())) < 2:
        raise InvalidArgumentError("the training documents hold only one class: give more documents of each class")
    words = [tokenize(t) for t in texts]
    tr_words, te_words = [words[i] for i in train_idx], [words[i] for i in test_idx]
    vocab = build_vocabulary(tr_words, min_df=min_df)
    btr, _ = encode(tr_words, y[train_idx], vocab, max_len=max_len)
    bte, kept_te = encode(te_words, y[test_idx], vocab, max_len=max_len)
    source = (
        f"{name}: {len(texts)} documents, labels {classes[0]!r} -> -1 and {classes[1]!r} -> +1, "
        f"{1 - test_fraction:.0%}/{test_fraction:.0%} train/test split by seed {seed}"
    )
    words, dropped = [te_words[i] for i in kept_te], (len(tr_words) - btr.n, len(te_words) - bte.n)
    return ReviewData(name, btr, bte, vocab, words, None, None, source, False, dropped)


@declare(source=Source(), text=Text(), label=Text())
def from_frame(source, text: str = "text", label: str = "label", **options) -> ReviewData:
    """:func:`prepare_texts` (``options``) on the ``text`` and ``label`` columns of a CSV file, a pandas
    ``DataFrame`` or a ``datasets.Dataset``."""
    import pandas as pd

    if isinstance(source, (str, os.PathLike)):
        path = os.fspath(source)
        if not os.path.isfile(path):
            raise DataUnavailableError(
                f"source {path!r} is not a file: pass the path of a CSV file, a pandas frame or a datasets.Dataset"
            )
        try:
            frame = pd.read_csv(path, keep_default_na=True)
        except UnicodeDecodeError as exc:
            raise InvalidArgumentError(
                f"source {path!r} is not UTF-8 text ({exc.reason} at byte {exc.start}): save it as UTF-8, or read it "
                "with pandas.read_csv(path, encoding=...) and pass the frame"
            ) from None
        except (ValueError, pd.errors.ParserError) as exc:  # an empty file, a malformed row
            raise InvalidArgumentError(f"source {path!r} cannot be read as CSV: {' '.join(str(exc).split())}") from None
        columns = list(frame.columns)
        options.setdefault("name", os.path.basename(path))
    elif isinstance(source, pd.DataFrame):
        frame, columns = source, list(source.columns)
    else:  # a datasets.Dataset (the declaration)
        frame, columns = source, list(source.column_names)
    for arg, col in (("text", text), ("label", label)):
        if col not in columns:
            raise InvalidArgumentError(
                f"source has no column {col!r} (argument {arg}); its columns are {columns}: pass {arg}=<column name>"
            )
    return prepare_texts(list(frame[text]), list(frame[label]), **options)


@declare(data=REVIEW_DATA, seed=SEED)
def shuffled_labels(data: ReviewData, seed: int = 0) -> ReviewData:
    """A control: ``data`` with the training labels permuted. What a word says about the label is destroyed, so
    any shape a model trained on it still shows comes from something else (chapter 06)."""
    gen = torch.Generator().manual_seed(seed)
    b = data.train
    perm = torch.randperm(b.n, generator=gen).to(b.labels.device)
    train = RaggedBatch(b.ids, b.offsets, b.labels[perm], b.vocab_size, b.num_classes)
    ratings = None if data.train_ratings is None else data.train_ratings[perm.cpu().numpy()]
    return replace(data, name=f"{data.name}, shuffled labels", train=train, train_ratings=ratings)
