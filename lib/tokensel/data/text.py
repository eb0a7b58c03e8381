"""From review text to token ids. Words are runs of letters (any script, with their marks) and digits, keeping
one inner apostrophe, after NFC normalisation, lower-casing and removing HTML tags such as ``<br />``. A word
enters the vocabulary when at least ``min_df`` training documents hold it (document frequency: one review
repeating a word cannot bring it in); words outside it are dropped."""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np
import regex
import torch

from ..errors import ArgumentTypeError, InvalidArgumentError, UnknownWordError
from ..validation import Constraint, Either, Instance, Int, Real, Tensor, declare
from .batch import RaggedBatch

_TAG = re.compile(r"<[^>]{0,20}>")
_WORD = regex.compile(r"[\p{L}\p{N}][\p{L}\p{M}\p{N}]*(?:'[\p{L}\p{M}]+)?")
#: the same rule on lower-cased ASCII (most reviews), found by ``re`` in 60 % of ``regex``'s time
#: (``tests/tokensel/data/test_text.py`` checks that both give the same words on any ASCII text)
_ASCII_WORD = re.compile(r"[a-z0-9][a-z0-9]*(?:'[a-z]+)?")


def tokenize(text: str) -> list[str]:
    """Lower-cased words of ``text`` (letters of any script, digits) with HTML tags such as ``<br />`` removed."""
    if text.isascii():  # NFC leaves ASCII as it is, and there is no typographic apostrophe to replace
        return _ASCII_WORD.findall(_TAG.sub(" ", text.lower()))
    text = unicodedata.normalize("NFC", text).lower().replace("\u2019", "'")
    return _WORD.findall(_TAG.sub(" ", text))


class Words(Constraint):
    """One tokenized document: a list of str words, not a str (which would be iterated over its characters)."""

    what = "a list of words (tokenize(text))"

    def check(self, value, name, dims):
        if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
            raise ArgumentTypeError(
                f"{name} must be a list of words (tokenize(text)), got {type(value).__name__}: "
                "tokenize each document first"
            )
        if value and not isinstance(value[0], str):
            raise ArgumentTypeError(f"{name} must hold str words, got {type(value[0]).__name__}")
        return value


#: ``min_df``: a document count, or a fraction of the documents
MIN_DF = Either(
    Int(min=1),
    Real(min=0.0, max=1.0, min_inclusive=False, max_inclusive=False),
    what="an int >= 1 or a fraction in (0, 1)",
)


@dataclass(frozen=True)
class Vocabulary:
    """Words and their ids (ids follow decreasing document frequency, ties alphabetical)."""

    words: tuple[str, ...]
    doc_freq: np.ndarray
    min_df: int
    max_df: float | None
    _index: dict[str, int] = field(init=False, repr=False, compare=False)

    def __post_init__(self):
        object.__setattr__(self, "_index", {w: i for i, w in enumerate(self.words)})

    def __eq__(self, other) -> bool:
        """Same words, frequencies and rule (the dataclass's comparison of the arrays would have no truth value)."""
        if not isinstance(other, Vocabulary):
            return NotImplemented
        return (self.words, self.min_df, self.max_df) == (other.words, other.min_df, other.max_df) and bool(
            np.array_equal(self.doc_freq, other.doc_freq)
        )

    def __hash__(self) -> int:
        return hash((self.words, self.min_df, self.max_df))

    def __len__(self) -> int:
        return len(self.words)

    def __contains__(self, word) -> bool:
        return word in self._index

    @declare(word=Instance(str, what="a str"))
    def id(self, word: str) -> int:
        """The id of ``word``; :class:`~tokensel.errors.UnknownWordError` (a KeyError) outside the vocabulary."""
        try:
            return self._index[word]
        except KeyError:
            raise UnknownWordError(f"{word!r} is not in the vocabulary ({len(self)} words)") from None

    def ids(self, words: Iterable[str]) -> list[int]:
        """Ids of the in-vocabulary words, in order (out-of-vocabulary words dropped)."""
        return [i for i in map(self._index.get, words) if i is not None]  # one lookup per word

    @declare(x=Tensor("real", ndim=1), among=Tensor("int", ndim=1, convert=True, allow_none=True), k=Int(min=1))
    def extremes(self, x: torch.Tensor, among: torch.Tensor | None = None, k: int = 15) -> tuple[list, list]:
        """The ``k`` words with the largest and the ``k`` with the smallest ``x`` (one value per word), from the
        extreme inwards; ``among`` (word ids) limits the ranking to those words."""
        if x.shape != (len(self),):
            raise InvalidArgumentError(f"x must hold one value per word, shape ({len(self)},); got {tuple(x.shape)}")
        idx = torch.arange(len(self)) if among is None else among
        if idx.numel() and (int(idx.min()) < 0 or int(idx.max()) >= len(self)):
            raise InvalidArgumentError(f"among must hold word ids in 0..{len(self) - 1}")
        order = idx[torch.argsort(x[idx], descending=True)]
        return [self.words[i] for i in order[:k].tolist()], [self.words[i] for i in order[-k:].flip(0).tolist()]

    def rule(self) -> str:
        """The vocabulary rule in words."""
        s = f"words in at least {self.min_df} training documents"
        if self.max_df is not None:
            s += f" and in at most {self.max_df:.0%} of them"
        return s


def build_vocabulary(
    tokenized: Sequence[Sequence[str]], min_df: int | float = 5, max_df: float | None = None
) -> Vocabulary:
    """The vocabulary of the tokenized training documents: ``min_df`` is a count or a fraction of them."""
    n_docs = len(tokenized)
    if isinstance(min_df, float):  # a fraction in (0, 1)
        min_df = max(1, int(np.ceil(min_df * n_docs)))
    df: Counter[str] = Counter()
    for doc in tokenized:
        df.update(set(doc))
    cap = n_docs if max_df is None else max_df * n_docs
    kept = sorted(((w, c) for w, c in df.items() if min_df <= c <= cap), key=lambda wc: (-wc[1], wc[0]))
    if not kept:
        raise InvalidArgumentError(f"no word occurs in at least {min_df} of the {n_docs} documents: lower min_df")
    words, counts = zip(*kept, strict=True)
    return Vocabulary(tuple(words), np.array(counts, dtype=np.int64), int(min_df), max_df)


class Encoded(NamedTuple):
    """The batch and the indices of the documents it holds."""

    batch: RaggedBatch
    kept: np.ndarray


def encode(
    tokenized: Sequence[Sequence[str]],
    labels,
    vocab: Vocabulary,
    max_len: int | None = None,
    num_classes: int | None = None,
) -> Encoded:
    """Tokenized documents as a batch of their in-vocabulary words (the first ``max_len``); documents left
    without a word are dropped, and ``kept`` says which documents the batch holds."""
    seqs: list[list[int]] = []
    kept_list: list[int] = []
    for i, doc in enumerate(tokenized):
        ids = vocab.ids(doc)
        if max_len is not None:
            ids = ids[:max_len]
        if ids:
            seqs.append(ids)
            kept_list.append(i)
    if not seqs:
        raise InvalidArgumentError("no document has an in-vocabulary token")
    kept = np.array(kept_list, dtype=np.int64)
    batch = RaggedBatch.from_sequences(
        seqs, labels[torch.from_numpy(kept)], vocab_size=len(vocab), num_classes=num_classes
    )
    return Encoded(batch, kept)


@declare(doc=Words(), vocab=Instance(Vocabulary), max_len=Int(min=0, allow_none=True))
def kept_words(doc: Sequence[str], vocab: Vocabulary, max_len: int | None = None) -> list[bool]:
    """Which words of the tokenized ``doc`` :func:`encode` keeps: the first ``max_len`` in-vocabulary ones."""
    budget = len(doc) if max_len is None else max_len
    out = []
    for w in doc:
        ok = budget > 0 and w in vocab
        budget -= ok
        out.append(ok)
    return out
