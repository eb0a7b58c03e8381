"""Sequences as a ragged batch: one flat tensor of token ids and ``offsets`` (sequence ``i`` is
``ids[offsets[i]:offsets[i+1]]``). Nothing is padded, so attention runs over real tokens only and every
full-batch computation is a gather or a scatter-add. Labels are ``±1``, or ``0..K-1`` with ``num_classes=K``."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import cast

import numpy as np
import torch

from ..errors import ArgumentTypeError, InvalidArgumentError
from ..validation import Constraint, Device, Either, Int, RealArray, Tensor, bind, check_int_array, declare


class Sequences(Constraint):
    """At least one token-id sequence (a list or 1-D integer array), passed on as int64 arrays; a str is refused."""

    what = "a list of token-id lists"

    def check(self, value, name, dims):
        if isinstance(value, (str, bytes)) or not hasattr(value, "__len__"):
            raise ArgumentTypeError(f"{name} must be a list of token-id lists, got {type(value).__name__}")
        seqs = []
        for i, s in enumerate(value):
            if isinstance(s, (str, bytes)):
                raise ArgumentTypeError(
                    f"{name}[{i}] is a string: pass token ids (ints), e.g. via tokensel.data.text.encode"
                )
            seq = check_int_array(s, f"{name}[{i}]")
            if seq.ndim != 1:
                raise InvalidArgumentError(f"{name}[{i}] must be 1-D (a list of token ids), got shape {seq.shape}")
            seqs.append(seq)
        if not seqs:
            raise InvalidArgumentError(f"{name}: a batch needs at least one sequence, got none")
        return seqs


@declare(
    ids=Tensor("int", ndim=1, convert=True),
    offsets=Tensor("int", ndim=1, convert=True),
    labels=Tensor("real", convert=True),
    vocab_size=Int(min=1),
    num_classes=Int(min=2, max=2**31, allow_none=True),
)
@dataclass(frozen=True)
class RaggedBatch:
    """A validated batch of variable-length token sequences with labels (:meth:`from_sequences` builds one from
    lists); construction checks every invariant and names the first problem."""

    ids: torch.Tensor
    offsets: torch.Tensor
    labels: torch.Tensor
    vocab_size: int
    num_classes: int | None = None
    _seg: torch.Tensor = field(init=False, repr=False, compare=False)
    _unique: DistinctTokens | None = field(init=False, repr=False, compare=False, default=None)
    _versions: tuple = field(init=False, repr=False, compare=False, default=())

    def _unchanged(self) -> None:
        """A batch edited in place (``batch.ids[0] = 99``) is checked again and its cache dropped before it is used."""
        if self._versions != (self.ids._version, self.offsets._version, self.labels._version):
            self.__post_init__()
            object.__setattr__(self, "_unique", None)

    def __post_init__(self):
        # the declaration checks (and copies) each field; here they are checked together
        ids, offsets, vocab_size = self.ids, self.offsets, self.vocab_size
        if offsets.numel() < 2:
            raise InvalidArgumentError("a batch needs at least one sequence (offsets of length >= 2)")
        device = ids.device
        offsets = offsets.to(device)
        if int(offsets[0]) != 0 or int(offsets[-1]) != ids.numel():
            raise InvalidArgumentError(
                f"offsets must start at 0 and end at len(ids)={ids.numel()}, got {int(offsets[0])}..{int(offsets[-1])}"
            )
        lengths = offsets[1:] - offsets[:-1]
        if torch.any(lengths <= 0):
            bad = int(torch.nonzero(lengths <= 0)[0])
            raise InvalidArgumentError(
                f"sequence {bad} is empty (length {int(lengths[bad])}); every sequence needs a token"
            )
        if ids.numel() and (int(ids.min()) < 0 or int(ids.max()) >= vocab_size):
            bad = int(torch.nonzero((ids < 0) | (ids >= vocab_size))[0])
            raise InvalidArgumentError(
                f"token id {int(ids[bad])} at flat position {bad} is outside the vocabulary 0..{vocab_size - 1}"
            )
        n = offsets.numel() - 1
        labels = self.labels
        labels = labels.to(device)
        if labels.shape != (n,):
            raise InvalidArgumentError(f"expected {n} labels (one per sequence), got shape {tuple(labels.shape)}")
        if not torch.all(torch.isfinite(labels.to(torch.float64))):
            raise InvalidArgumentError("labels contain NaN or inf")
        if self.num_classes is None:
            ok = (labels == 1) | (labels == -1)
            if not torch.all(ok):
                bad = int(torch.nonzero(~ok)[0])
                raise InvalidArgumentError(
                    f"binary labels must be +1 or -1, got {labels[bad].item()} for sequence {bad} "
                    "(for 0/1 labels use labels_from_01, for K classes pass num_classes=K)"
                )
            labels = labels.to(torch.float64)
        else:
            K = self.num_classes
            if labels.dtype.is_floating_point and not torch.all(labels == torch.round(labels)):
                raise InvalidArgumentError("class labels must be integers")
            labels = labels.to(torch.long)
            ok = (labels >= 0) & (labels < K)
            if not torch.all(ok):
                bad = int(torch.nonzero(~ok)[0])
                raise InvalidArgumentError(
                    f"class labels must lie in 0..{K - 1}, got {int(labels[bad])} for sequence {bad}"
                )
        object.__setattr__(self, "offsets", offsets)
        object.__setattr__(self, "labels", labels)
        seg = torch.repeat_interleave(torch.arange(n, device=device), lengths)
        object.__setattr__(self, "_seg", seg)
        object.__setattr__(self, "_versions", (ids._version, offsets._version, labels._version))

    # ------------------------------------------------------------------ construction
    @classmethod
    @declare(
        sequences=Sequences(),
        labels=Tensor("real", convert=True),
        vocab_size=Int(min=1, allow_none=True),
        num_classes=Int(min=2, max=2**31, allow_none=True),
    )
    def from_sequences(
        cls,
        sequences: Sequence[Sequence[int] | np.ndarray],
        labels: Sequence[int] | np.ndarray | torch.Tensor,
        vocab_size: int | None = None,
        num_classes: int | None = None,
    ) -> RaggedBatch:
        """A batch from token-id sequences and their ``labels``; ``vocab_size`` defaults to max id + 1."""
        seqs = cast(list, sequences)  # int64 arrays (the declaration)
        lengths = np.array([len(s) for s in seqs], dtype=np.int64)
        offsets = np.concatenate([[0], np.cumsum(lengths)])
        ids = np.concatenate(seqs) if lengths.sum() else np.zeros(0, dtype=np.int64)
        if vocab_size is None:
            vocab_size = int(ids.max()) + 1 if ids.size else 1
        # the constructor checks the labels against the sequences
        return cls(
            torch.from_numpy(ids), torch.from_numpy(offsets), cast(torch.Tensor, labels), vocab_size, num_classes
        )

    # ------------------------------------------------------------------ views
    @property
    def n(self) -> int:
        """Number of sequences."""
        return self.offsets.numel() - 1

    @property
    def num_tokens(self) -> int:
        """Total number of token occurrences."""
        return self.ids.numel()

    @property
    def lengths(self) -> torch.Tensor:
        """Sequence lengths ``T_i``."""
        return self.offsets[1:] - self.offsets[:-1]

    @property
    def seg(self) -> torch.Tensor:
        """For each flat token, the index of its sequence."""
        self._unchanged()
        return self._seg

    @property
    def device(self) -> torch.device:
        return self.ids.device

    def distinct(self) -> DistinctTokens:
        """The distinct (sequence, token) entries with multiplicities (cached): occurrences of a token in a sequence
        share score, value and weight, so a sum over occurrences is a count-weighted sum over entries."""
        self._unchanged()
        unique = self._unique
        if unique is None:
            key, counts = torch.unique(self.seg * self.vocab_size + self.ids, return_counts=True)
            seg = key // self.vocab_size
            per_seq = torch.bincount(seg, minlength=self.n)
            offsets = torch.cat([torch.zeros(1, dtype=torch.long, device=self.device), torch.cumsum(per_seq, 0)])
            unique = DistinctTokens(key % self.vocab_size, seg, offsets, counts.to(torch.float64))
            object.__setattr__(self, "_unique", unique)
        return unique

    @declare(i=Int())
    def sequence(self, i: int) -> torch.Tensor:
        """Token ids of sequence ``i``."""
        if not -self.n <= i < self.n:
            raise InvalidArgumentError(f"sequence index {i} out of range for a batch of {self.n}")
        i = i % self.n
        return self.ids[self.offsets[i] : self.offsets[i + 1]]

    @declare(device=Device())
    def to(self, device) -> RaggedBatch:
        """The same batch on another device."""
        return RaggedBatch(
            self.ids.to(device), self.offsets.to(device), self.labels.to(device), self.vocab_size, self.num_classes
        )

    @declare(
        index=Either(
            Tensor("int", ndim=1, convert=True),
            Tensor("bool", ndim=1, convert=True),
            what="a 1-D array of integers or booleans (sequence indices or a mask)",
        ),
    )
    def subset(self, index) -> RaggedBatch:
        """The sequences selected by ``index`` (indices or a boolean mask), in that order."""
        if index.dtype == torch.bool:
            if index.shape != (self.n,):
                raise InvalidArgumentError(f"boolean mask must have shape ({self.n},), got {tuple(index.shape)}")
            index = torch.nonzero(index).flatten()
        index = index.to(torch.long).cpu()
        if index.numel() == 0:
            raise InvalidArgumentError("subset would be empty")
        if int(index.min()) < -self.n or int(index.max()) >= self.n:
            raise InvalidArgumentError(f"subset index out of range for a batch of {self.n}")
        index = index % self.n
        off = self.offsets.cpu()
        starts, ends = off[index], off[index + 1]
        lengths = ends - starts
        # flat positions of the chosen tokens, without a Python loop
        new_off = torch.cat([torch.zeros(1, dtype=torch.long), torch.cumsum(lengths, 0)])
        rel = torch.arange(int(new_off[-1])) - torch.repeat_interleave(new_off[:-1], lengths)
        pos = torch.repeat_interleave(starts, lengths) + rel
        ids = self.ids.cpu()[pos].to(self.device)
        labels = self.labels.cpu()[index].to(self.device)
        return RaggedBatch(ids, new_off.to(self.device), labels, self.vocab_size, self.num_classes)

    @declare(max_len=Int(min=1))
    def truncate(self, max_len: int) -> RaggedBatch:
        """Keep the first ``max_len`` tokens of every sequence."""
        lengths = torch.clamp(self.lengths, max=max_len)
        new_off = torch.cat([torch.zeros(1, dtype=torch.long, device=self.device), torch.cumsum(lengths, 0)])
        rel = torch.arange(int(new_off[-1]), device=self.device) - torch.repeat_interleave(new_off[:-1], lengths)
        pos = torch.repeat_interleave(self.offsets[:-1], lengths) + rel
        return RaggedBatch(self.ids[pos], new_off, self.labels, self.vocab_size, self.num_classes)

    def to_lists(self) -> list[list[int]]:
        """The sequences as Python lists (for small batches and display)."""
        ids = self.ids.cpu().tolist()
        off = self.offsets.cpu().tolist()
        return [ids[off[i] : off[i + 1]] for i in range(self.n)]

    def __len__(self) -> int:
        return self.n

    def __repr__(self) -> str:
        kind = "binary ±1" if self.num_classes is None else f"{self.num_classes} classes"
        return (
            f"RaggedBatch(n={self.n}, tokens={self.num_tokens}, vocab_size={self.vocab_size}, "
            f"labels={kind}, device={self.device})"
        )


@dataclass(frozen=True)
class DistinctTokens:
    """Distinct (sequence, token) entries grouped by sequence: ``ids``, ``seg``, ``offsets``, ``counts`` (float64)."""

    ids: torch.Tensor
    seg: torch.Tensor
    offsets: torch.Tensor
    counts: torch.Tensor
    #: what is derived from the entries once per batch (the fused kernels' index arrays, by name)
    cache: dict = field(default_factory=dict, repr=False, compare=False)


@declare(labels=RealArray(ndim=1))
def labels_from_01(labels) -> torch.Tensor:
    """Map 0/1 labels (as in the IMDB and Yelp files) to -1/+1."""
    lab = torch.from_numpy(labels)
    ok = (lab == 0) | (lab == 1)
    if not torch.all(ok):
        bad = int(torch.nonzero(~ok)[0])
        raise InvalidArgumentError(f"expected 0/1 labels, got {lab[bad].item()} at position {bad}")
    return lab.to(torch.float64) * 2 - 1


class Batch(Constraint):
    """A :class:`RaggedBatch` (with ±1 labels for ``labels="binary"``, K classes for ``"classes"``) binding the
    dimensions ``dims``: ``S`` (vocabulary), ``tokens`` (occurrences), ``n`` (sequences)."""

    def __init__(self, labels: str | None = None, *, dims: tuple = ("S", "tokens", "n"), allow_none: bool = False):
        super().__init__(allow_none=allow_none)
        self.labels, self.binds = labels, tuple(dims)
        self.what = "a RaggedBatch" + {None: "", "binary": " with ±1 labels", "classes": " with K classes"}[labels]

    def check(self, value, name, dims):
        if not isinstance(value, RaggedBatch):
            raise ArgumentTypeError(f"{name} must be a RaggedBatch, got {type(value).__name__}")
        if self.labels == "binary" and value.num_classes is not None:
            raise InvalidArgumentError(
                f"{name} must have ±1 labels, got a multi-class batch ({value.num_classes} classes)"
            )
        if self.labels == "classes" and value.num_classes is None:
            raise InvalidArgumentError(f"{name} must be a multi-class batch (num_classes=K), got one with ±1 labels")
        for symbol, size in (("S", value.vocab_size), ("tokens", value.num_tokens), ("n", value.n)):
            if symbol in self.binds:
                bind(dims, symbol, size, name)
        return value
