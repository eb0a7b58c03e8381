"""From review text to token ids: a tokenizer, a vocabulary rule, and encoding.

Tokenizer: lower-case, HTML line breaks (``<br />``) and other tags replaced by spaces, then words
are maximal runs of letters and digits, keeping an inner apostrophe (``don't``, ``it's``).

Vocabulary rule: a word enters the vocabulary when it occurs in at least ``min_df`` documents
of the training split (document frequency, so one review repeating a word cannot bring it in),
optionally excluding words in more than a fraction ``max_df`` of the documents. Words outside
the vocabulary are dropped from the sequences.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from typing import Iterable, Sequence

import numpy as np
import torch

from .data import RaggedBatch
from .errors import InvalidBatchError

_TAG = re.compile(r"<[^>]{0,20}>")
_WORD = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")


def tokenize(text: str) -> list[str]:
    """Lower-cased words of ``text`` with HTML tags such as ``<br />`` removed."""
    if not isinstance(text, str):
        raise TypeError(f"tokenize expects a str, got {type(text).__name__}")
    return _WORD.findall(_TAG.sub(" ", text.lower()))


@dataclass(frozen=True)
class Vocabulary:
    """Words and their ids (ids follow decreasing document frequency, ties alphabetical)."""

    words: tuple[str, ...]
    doc_freq: np.ndarray
    min_df: int
    max_df: float | None

    def __post_init__(self):
        object.__setattr__(self, "_index", {w: i for i, w in enumerate(self.words)})

    def __len__(self) -> int:
        return len(self.words)

    def __contains__(self, word) -> bool:
        return word in self._index

    def id(self, word: str) -> int:
        """The id of ``word``; KeyError if it is not in the vocabulary."""
        try:
            return self._index[word]
        except KeyError:
            raise KeyError(f"{word!r} is not in the vocabulary ({len(self)} words)") from None

    def ids(self, words: Iterable[str]) -> list[int]:
        """Ids of the in-vocabulary words, in order (out-of-vocabulary words dropped)."""
        index = self._index
        return [index[w] for w in words if w in index]

    def rule(self) -> str:
        """The vocabulary rule in words."""
        s = f"words in at least {self.min_df} training documents"
        if self.max_df is not None:
            s += f" and in at most {self.max_df:.0%} of them"
        return s


def build_vocabulary(tokenized: Sequence[Sequence[str]], min_df: int | float = 5,
                     max_df: float | None = None) -> Vocabulary:
    """The vocabulary of the tokenized training documents under the document-frequency rule.

    ``min_df`` is a document count (int >= 1) or a fraction of the documents (float in (0, 1),
    rounded up to a count).
    """
    n_docs = len(tokenized)
    if n_docs == 0:
        raise ValueError("cannot build a vocabulary from zero documents")
    if isinstance(min_df, float) and 0.0 < min_df < 1.0:
        min_df = max(1, int(np.ceil(min_df * n_docs)))
    if isinstance(min_df, bool) or not isinstance(min_df, (int, np.integer)) or min_df < 1:
        raise ValueError(f"min_df must be an int >= 1 or a fraction in (0, 1), got {min_df!r}")
    if max_df is not None and not 0.0 < max_df <= 1.0:
        raise ValueError(f"max_df must lie in (0, 1], got {max_df}")
    df = Counter()
    for doc in tokenized:
        df.update(set(doc))
    cap = n_docs if max_df is None else max_df * n_docs
    kept = sorted(((w, c) for w, c in df.items() if min_df <= c <= cap), key=lambda wc: (-wc[1], wc[0]))
    if not kept:
        raise ValueError(f"no word occurs in at least {min_df} of the {n_docs} documents")
    words, counts = zip(*kept)
    return Vocabulary(tuple(words), np.array(counts, dtype=np.int64), int(min_df), max_df)


def encode(tokenized: Sequence[Sequence[str]], labels, vocab: Vocabulary, max_len: int | None = None,
           num_classes: int | None = None):
    """Encode tokenized documents as a :class:`RaggedBatch`.

    Out-of-vocabulary words are dropped; with ``max_len`` each sequence keeps its first
    ``max_len`` in-vocabulary tokens. Documents left without any token are dropped too.
    Returns ``(batch, kept)`` where ``kept`` holds the indices of the documents in the batch.
    """
    if max_len is not None and max_len < 1:
        raise ValueError(f"max_len must be >= 1, got {max_len}")
    labels = np.asarray(labels)
    if len(labels) != len(tokenized):
        raise InvalidBatchError(f"{len(tokenized)} documents but {len(labels)} labels")
    seqs, kept = [], []
    for i, doc in enumerate(tokenized):
        ids = vocab.ids(doc)
        if max_len is not None:
            ids = ids[:max_len]
        if ids:
            seqs.append(ids)
            kept.append(i)
    if not seqs:
        raise InvalidBatchError("no document has an in-vocabulary token")
    kept = np.array(kept, dtype=np.int64)
    batch = RaggedBatch.from_sequences(seqs, labels[kept], vocab_size=len(vocab), num_classes=num_classes)
    return batch, kept


def decode(ids: Sequence[int] | torch.Tensor, vocab: Vocabulary) -> list[str]:
    """Words of a sequence of ids."""
    if isinstance(ids, torch.Tensor):
        ids = ids.tolist()
    return [vocab.words[i] for i in ids]
