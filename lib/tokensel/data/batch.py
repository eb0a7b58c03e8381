"""Sequences as a ragged batch: flat token ids, offsets and labels.

A batch of ``n`` sequences of lengths ``T_1..T_n`` is stored as one flat ``LongTensor`` of all
token ids (``ids``, length ``T_1 + ... + T_n``) and ``offsets`` (length ``n + 1``) such that
sequence ``i`` is ``ids[offsets[i]:offsets[i+1]]``. Nothing is padded: attention runs over the
real tokens of each sequence only, and every full-batch computation is a gather or a
scatter-add over the flat token array.

Binary labels are ``±1`` (``num_classes=None``); multi-class labels are integers in
``0..K-1`` (``num_classes=K``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import cast

import numpy as np
import torch

from ..errors import ArgumentTypeError, InvalidBatchError
from ..validation import check_int, check_int_array, check_real_array


def _as_long(x, name: str) -> torch.Tensor:
    """An integer tensor as int64, always a copy of its own (a batch never shares memory with the caller's
    arrays, so an edit after validation cannot leak in); floats (even integer-valued), bools, strings and
    objects are refused."""
    if isinstance(x, torch.Tensor):
        if x.dtype.is_floating_point or x.dtype.is_complex or x.dtype == torch.bool:
            raise InvalidBatchError(
                f"{name} must be integers, got a tensor of dtype {x.dtype}"
                + (": convert explicitly with .long()" if x.dtype.is_floating_point else "")
            )
        if x.is_meta or x.layout != torch.strided:
            raise InvalidBatchError(
                f"{name} must be a dense tensor with values, got a {x.layout} tensor"
                + (" on the meta device" if x.is_meta else "")
            )
        return x.detach().to(torch.long, copy=True).contiguous()
    try:
        arr = check_int_array(x, name, error=InvalidBatchError)
    except ArgumentTypeError as exc:
        raise InvalidBatchError(str(exc)) from None
    return torch.from_numpy(np.array(arr, dtype=np.int64, copy=True, order="C"))


@dataclass(frozen=True)
class RaggedBatch:
    """A validated batch of variable-length token sequences with labels.

    Use :meth:`from_sequences` to build one from Python lists. Construction checks every
    invariant and raises :class:`~tokensel.errors.InvalidBatchError` naming the first problem.
    """

    ids: torch.Tensor
    offsets: torch.Tensor
    labels: torch.Tensor
    vocab_size: int
    num_classes: int | None = None
    _seg: torch.Tensor = field(init=False, repr=False, compare=False)
    _unique: DistinctTokens | None = field(init=False, repr=False, compare=False, default=None)

    def __post_init__(self):
        ids = _as_long(self.ids, "token ids")
        offsets = _as_long(self.offsets, "offsets")
        if isinstance(self.vocab_size, bool) or not isinstance(self.vocab_size, (int, np.integer)):
            raise InvalidBatchError(f"vocab_size must be an int, got {self.vocab_size!r}")
        vocab_size = int(self.vocab_size)
        if vocab_size < 1:
            raise InvalidBatchError(f"vocab_size must be >= 1, got {vocab_size}")
        if ids.ndim != 1 or offsets.ndim != 1:
            raise InvalidBatchError(
                f"ids and offsets must be 1-D, got shapes {tuple(ids.shape)} and {tuple(offsets.shape)}"
            )
        if offsets.numel() < 2:
            raise InvalidBatchError("a batch needs at least one sequence (offsets of length >= 2)")
        device = ids.device
        offsets = offsets.to(device)
        if int(offsets[0]) != 0 or int(offsets[-1]) != ids.numel():
            raise InvalidBatchError(
                f"offsets must start at 0 and end at len(ids)={ids.numel()}, got {int(offsets[0])}..{int(offsets[-1])}"
            )
        lengths = offsets[1:] - offsets[:-1]
        if torch.any(lengths <= 0):
            bad = int(torch.nonzero(lengths <= 0)[0])
            raise InvalidBatchError(
                f"sequence {bad} is empty (length {int(lengths[bad])}); every sequence needs a token"
            )
        if ids.numel() and (int(ids.min()) < 0 or int(ids.max()) >= vocab_size):
            bad = int(torch.nonzero((ids < 0) | (ids >= vocab_size))[0])
            raise InvalidBatchError(
                f"token id {int(ids[bad])} at flat position {bad} is outside the vocabulary 0..{vocab_size - 1}"
            )
        n = offsets.numel() - 1
        labels = self.labels
        if not isinstance(labels, torch.Tensor):
            try:
                arr = (
                    check_real_array(labels, "labels", finite=False, error=InvalidBatchError)
                    if not isinstance(labels, (str, bytes))
                    else np.asarray([labels])
                )
            except ArgumentTypeError:
                arr = np.asarray(["?"])
            if arr.dtype.kind not in "iuf":
                raise InvalidBatchError(
                    f"labels must be numbers (±1, or 0..K-1 with num_classes=K), got an array of dtype {arr.dtype}"
                )
            labels = torch.from_numpy(np.array(arr, copy=True, order="C"))
        elif labels.dtype == torch.bool or labels.dtype.is_complex:
            raise InvalidBatchError(
                f"labels must be numbers (±1, or 0..K-1 with num_classes=K), got dtype {labels.dtype}"
            )
        else:
            if labels.is_meta or labels.layout != torch.strided:
                raise InvalidBatchError("labels must be a dense tensor with values")
            labels = labels.detach().clone()  # never the caller's memory
        labels = labels.to(device)
        if labels.shape != (n,):
            raise InvalidBatchError(f"expected {n} labels (one per sequence), got shape {tuple(labels.shape)}")
        if not torch.all(torch.isfinite(labels.to(torch.float64))):
            raise InvalidBatchError("labels contain NaN or inf")
        if self.num_classes is None:
            ok = (labels == 1) | (labels == -1)
            if not torch.all(ok):
                bad = int(torch.nonzero(~ok)[0])
                raise InvalidBatchError(
                    f"binary labels must be +1 or -1, got {labels[bad].item()} for sequence {bad} "
                    "(for 0/1 labels use labels_from_01, for K classes pass num_classes=K)"
                )
            labels = labels.to(torch.float64)
        else:
            K = self.num_classes
            if isinstance(K, bool) or not isinstance(K, (int, np.integer)) or not 2 <= K <= 2**31:
                raise InvalidBatchError(f"num_classes must be an int >= 2, got {K!r}")
            if labels.dtype.is_floating_point and not torch.all(labels == torch.round(labels)):
                raise InvalidBatchError("class labels must be integers")
            labels = labels.to(torch.long)
            ok = (labels >= 0) & (labels < K)
            if not torch.all(ok):
                bad = int(torch.nonzero(~ok)[0])
                raise InvalidBatchError(
                    f"class labels must lie in 0..{K - 1}, got {int(labels[bad])} for sequence {bad}"
                )
            object.__setattr__(self, "num_classes", int(K))
        object.__setattr__(self, "ids", ids)
        object.__setattr__(self, "offsets", offsets)
        object.__setattr__(self, "labels", labels)
        object.__setattr__(self, "vocab_size", vocab_size)
        seg = torch.repeat_interleave(torch.arange(n, device=device), lengths)
        object.__setattr__(self, "_seg", seg)

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_sequences(
        cls,
        sequences: Sequence[Sequence[int] | np.ndarray],
        labels: Sequence[int] | np.ndarray | torch.Tensor,
        vocab_size: int | None = None,
        num_classes: int | None = None,
    ) -> RaggedBatch:
        """Build a batch from a list of token-id sequences (lists or 1-D integer arrays) and their ``labels`` (a
        list, array or tensor). ``vocab_size`` defaults to max id + 1."""
        if isinstance(sequences, (str, bytes)) or not hasattr(sequences, "__len__"):
            raise InvalidBatchError(f"sequences must be a list of token-id lists, got {type(sequences).__name__}")
        seqs = []
        for i, s in enumerate(sequences):
            if isinstance(s, (str, bytes)):
                raise InvalidBatchError(
                    f"sequence {i} is a string: pass token ids (ints), e.g. via tokensel.data.text.encode"
                )
            try:
                seqs.append(check_int_array(s, f"sequence {i}", ndim=1, error=InvalidBatchError))
            except ArgumentTypeError as exc:
                raise InvalidBatchError(str(exc)) from None
        if not seqs:
            raise InvalidBatchError("a batch needs at least one sequence, got none")
        lengths = np.array([len(s) for s in seqs], dtype=np.int64)
        offsets = np.concatenate([[0], np.cumsum(lengths)])
        ids = np.concatenate(seqs) if lengths.sum() else np.zeros(0, dtype=np.int64)
        if vocab_size is None:
            vocab_size = int(ids.max()) + 1 if ids.size else 1
        else:
            vocab_size = check_int(vocab_size, "vocab_size", min=1, error=InvalidBatchError)
        # __post_init__ checks the labels and turns them into a tensor
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
        return self._seg

    @property
    def device(self) -> torch.device:
        return self.ids.device

    def distinct(self) -> DistinctTokens:
        """The batch as distinct (sequence, token) entries with multiplicities (computed once, cached).

        Occurrences of one token in one sequence share score, value and attention weight, so every
        full-batch sum over occurrences equals a count-weighted sum over these entries.
        """
        unique = self._unique
        if unique is None:
            key, counts = torch.unique(self.seg * self.vocab_size + self.ids, return_counts=True)
            seg = key // self.vocab_size
            per_seq = torch.bincount(seg, minlength=self.n)
            offsets = torch.cat([torch.zeros(1, dtype=torch.long, device=self.device), torch.cumsum(per_seq, 0)])
            unique = DistinctTokens(key % self.vocab_size, seg, offsets, counts.to(torch.float64))
            object.__setattr__(self, "_unique", unique)
        return unique

    def sequence(self, i: int) -> torch.Tensor:
        """Token ids of sequence ``i``."""
        i = check_int(i, "i")
        if not -self.n <= i < self.n:
            raise InvalidBatchError(f"sequence index {i} out of range for a batch of {self.n}")
        i = i % self.n
        return self.ids[self.offsets[i] : self.offsets[i + 1]]

    def to(self, device) -> RaggedBatch:
        """The same batch on another device."""
        return RaggedBatch(
            self.ids.to(device), self.offsets.to(device), self.labels.to(device), self.vocab_size, self.num_classes
        )

    def subset(self, index) -> RaggedBatch:
        """The sequences selected by ``index`` (indices or a boolean mask), in that order."""
        if isinstance(index, (bool, np.bool_)) or isinstance(index, (int, np.integer)):
            raise InvalidBatchError(f"index must be a list of sequence indices or a boolean mask, got {index!r}")
        if isinstance(index, torch.Tensor):
            index = index.cpu()
        else:
            try:
                arr = np.asarray(index) if not isinstance(index, (str, bytes)) else np.asarray([index])
            except ValueError:
                raise InvalidBatchError("index must be a flat list of sequence indices or a boolean mask") from None
            if arr.dtype.kind == "u":
                arr = arr.astype(np.int64) if not arr.size or arr.max() < 2**63 else arr.astype(object)
            if arr.size == 0:
                arr = arr.astype(np.int64)
            index = torch.from_numpy(np.ascontiguousarray(arr)) if arr.dtype.kind in "ib" else None
            if index is None:
                raise InvalidBatchError(f"index must hold integers or booleans, got an array of dtype {arr.dtype}")
        if index.dtype.is_floating_point or index.dtype.is_complex:
            raise InvalidBatchError(
                f"index must hold integers or booleans, got dtype {index.dtype}: "
                "convert integer-valued floats explicitly"
            )
        if index.ndim != 1:
            raise InvalidBatchError(f"index must be 1-D, got shape {tuple(index.shape)}")
        if index.dtype == torch.bool:
            if index.shape != (self.n,):
                raise InvalidBatchError(f"boolean mask must have shape ({self.n},), got {tuple(index.shape)}")
            index = torch.nonzero(index).flatten()
        index = index.to(torch.long).cpu()
        if index.numel() == 0:
            raise InvalidBatchError("subset would be empty")
        if int(index.min()) < -self.n or int(index.max()) >= self.n:
            raise InvalidBatchError(f"subset index out of range for a batch of {self.n}")
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

    def truncate(self, max_len: int) -> RaggedBatch:
        """Keep the first ``max_len`` tokens of every sequence."""
        max_len = check_int(max_len, "max_len", min=1, error=InvalidBatchError)
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
    """Distinct (sequence, token) entries of a batch, grouped by sequence: token ``ids``, sequence
    index ``seg``, per-sequence ``offsets`` into them, and multiplicities ``counts`` (float64)."""

    ids: torch.Tensor
    seg: torch.Tensor
    offsets: torch.Tensor
    counts: torch.Tensor
    #: what is derived from the entries once per batch (the fused kernels' index arrays, by name)
    cache: dict = field(default_factory=dict, repr=False, compare=False)


def labels_from_01(labels) -> torch.Tensor:
    """Map 0/1 labels (as in the IMDB and Yelp files) to -1/+1."""
    try:
        arr = check_real_array(labels, "labels", ndim=1, error=InvalidBatchError)
    except ArgumentTypeError as exc:
        raise InvalidBatchError(str(exc)) from None
    lab = torch.from_numpy(arr)
    ok = (lab == 0) | (lab == 1)
    if not torch.all(ok):
        bad = int(torch.nonzero(~ok)[0])
        raise InvalidBatchError(f"expected 0/1 labels, got {lab[bad].item()} at position {bad}")
    return lab.to(torch.float64) * 2 - 1
