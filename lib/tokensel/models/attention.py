"""The one-layer attention model of the paper.

``f(X) = softmax(E_X p)^T E_X v``: token ``s`` has key/value embedding ``E_s`` (a row of ``E``), the
``<cls>`` embedding ``p`` scores it by ``c_s = p^T E_s`` and its value is ``w_s = v^T E_s``. Since the
model sees ``E`` only through the two vectors ``c = E p`` and ``w = E v``, every full-batch quantity
costs O(#tokens + |S| d).

Parameters are float64 by default and may live on any torch device.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from ..data.batch import Batch, RaggedBatch
from ..errors import InvalidBatchError, InvalidParameterError
from ..seeding import generator
from ..validation import MAX_ELEMENTS, Choice, Device, Dtype, Int, Tensor, check_fields, declare

#: parameters are float32 or float64: half precision is refused (its softmax sums overflow once a token
#: repeats a few thousand times, and the book's statistics need more digits)
DTYPE = Dtype(torch.float32, torch.float64)
#: the embedding table (|S| x d) and a vector of the model (d), finite, float32 or float64
TABLE = Tensor("float", shape=("S", "d"), finite=True)
VECTOR = Tensor("float", shape=("d",), finite=True)
#: what every constructor of a model takes
SIZES = dict(vocab_size=Int(min=1), d=Int(min=1), seed=Int(min=0), dtype=DTYPE, device=Device())


def same_dtype_and_device(E: torch.Tensor, **tensors: torch.Tensor) -> None:
    """Raise InvalidParameterError unless every tensor has the dtype and device of ``E``, and ``E`` has a
    token and a dimension."""
    if E.shape[0] < 1 or E.shape[1] < 1:
        raise InvalidParameterError(f"E has shape {tuple(E.shape)}: a model needs at least one token and d >= 1")
    for name, t in tensors.items():
        if t.dtype != E.dtype:
            raise InvalidParameterError(f"{name} has dtype {t.dtype}, expected {E.dtype} (as E)")
        if t.device != E.device:
            raise InvalidParameterError(f"{name} is on {t.device}, expected {E.device} (as E)")


class _EmbeddingModel:
    """What both models share: the embedding table ``E`` (|S| x d), the ``<cls>`` vector ``p`` and a
    value read-out ``v`` (a vector, or a d x K matrix)."""

    E: torch.Tensor
    p: torch.Tensor
    if TYPE_CHECKING:  # a dataclass field of the binary model, a property (the matrix V) of the multi-class one

        @property
        def v(self) -> torch.Tensor: ...

    @property
    def vocab_size(self) -> int:
        return self.E.shape[0]

    @property
    def d(self) -> int:
        return self.E.shape[1]

    def scores(self) -> torch.Tensor:
        """``c = E p``: the ``<cls>`` score of every token."""
        return self.E @ self.p

    def values(self) -> torch.Tensor:
        """``w = E v`` (or ``W = E V``, |S| x K): the value of every token."""
        return self.E @ self.v

    def check_finite(self) -> None:
        """Raise InvalidParameterError when a parameter holds NaN or inf (one read of each tensor, no copy):
        a value written into a parameter in place after construction is caught before it poisons a result."""
        self._check_finite(("E", "p", "v"))

    def _check_finite(self, names: tuple[str, ...]) -> None:
        for name in names:
            t = getattr(self, name)
            if t.numel():
                lo, hi = torch.aminmax(t.detach())  # NaN propagates through both
                if not (bool(torch.isfinite(lo)) and bool(torch.isfinite(hi))):
                    raise InvalidParameterError(
                        f"{name} contains NaN or inf (written into it after the model was "
                        "built?): rebuild the model or restore finite values"
                    )

    def _check_classes(self, batch: RaggedBatch) -> None:
        raise NotImplementedError

    def _check_batch_but_E(self, batch: RaggedBatch) -> None:
        """``check_batch`` without the pass over ``E`` for its finiteness: for :func:`tokensel.gradients`' fused
        path, which reads a NaN or inf of ``E`` from the scores ``E p`` it computes anyway."""
        self._check_vocab(batch, finite=("p", "v"))
        self._check_classes(batch)

    def _check_vocab(self, batch: RaggedBatch, finite: tuple[str, ...] = ("E", "p", "v")) -> None:
        self._check_finite(finite)
        if batch.vocab_size != self.vocab_size:
            raise InvalidBatchError(f"batch vocabulary has {batch.vocab_size} tokens but E has {self.vocab_size} rows")


#: the last draw of :func:`_draw`: chapters start several models from one initialisation (IMDB's E is 7,903 x 2,048,
#: a sixth of a second to draw), and every model gets its own copy
_LAST_DRAW: list = []


def _draw(vocab_size: int, d: int, seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The initialisation's ``E``, ``p`` and ``v`` in float64 for ``seed`` (``E`` and ``p`` with N(0, 1/d) entries,
    ``v`` a random unit vector), drawn in that order from the seed's generator; the last draw is kept, so a second
    call with the same arguments returns the same tensors without drawing. Callers copy them."""
    key = (vocab_size, d, seed)
    if _LAST_DRAW and _LAST_DRAW[0][0] == key:
        return _LAST_DRAW[0][1]
    g = generator(seed)
    E = torch.randn(vocab_size, d, generator=g, dtype=torch.float64) / d**0.5
    p = torch.randn(d, generator=g, dtype=torch.float64) / d**0.5
    v = torch.randn(d, generator=g, dtype=torch.float64)
    drawn = (E, p, v / v.norm())
    _LAST_DRAW[:] = [(key, drawn)]
    return drawn


@declare(E=TABLE, p=VECTOR, v=VECTOR)
@dataclass
class AttentionModel(_EmbeddingModel):
    """Parameters ``E`` (|S| x d), ``p`` (d) and ``v`` (d) of the one-layer model.

    Introduced in chapter 01."""

    E: torch.Tensor
    p: torch.Tensor
    v: torch.Tensor

    def __post_init__(self):
        same_dtype_and_device(self.E, p=self.p, v=self.v)  # each field is checked by the declaration

    def validate(self) -> AttentionModel:
        """Check shapes, dtypes, devices and finiteness; raise InvalidParameterError otherwise."""
        check_fields(self)
        self.__post_init__()
        return self

    # ------------------------------------------------------------------ construction
    @classmethod
    @declare(p_init=Choice("gaussian", "zero"), **SIZES)
    def init(
        cls, vocab_size: int, d: int, seed: int = 0, p_init: str = "gaussian", dtype=torch.float64, device="cpu"
    ) -> AttentionModel:
        """The paper's initialisation: ``E_s, p ~ N(0, I/d)`` (or ``p = 0``), ``v`` a random unit vector."""
        if vocab_size * d > MAX_ELEMENTS:
            raise InvalidParameterError(
                f"E would have {vocab_size} x {d} entries, more than the {MAX_ELEMENTS:.3g} "
                "this library allocates: lower vocab_size or d"
            )
        E, p, v = (x.to(dtype=dtype, device=device, copy=True) for x in _draw(vocab_size, d, seed))
        if p_init == "zero":
            p = torch.zeros(d, dtype=dtype, device=device)
        return cls(E, p, v)

    def copy(self) -> AttentionModel:
        return AttentionModel(self.E.detach().clone(), self.p.detach().clone(), self.v.detach().clone())

    @declare(device=Device(allow_none=True), dtype=Dtype(*DTYPE.allowed, allow_none=True))
    def to(self, device=None, dtype=None) -> AttentionModel:
        return AttentionModel(
            self.E.to(device=device, dtype=dtype),
            self.p.to(device=device, dtype=dtype),
            self.v.to(device=device, dtype=dtype),
        )

    # ------------------------------------------------------------------ forward
    @declare(batch=Batch())
    def check_batch(self, batch: RaggedBatch) -> None:
        self._check_vocab(batch)
        self._check_classes(batch)

    def _check_classes(self, batch: RaggedBatch) -> None:
        if batch.num_classes is not None:
            raise InvalidBatchError("the one-layer binary model needs ±1 labels, got a multi-class batch")

    @declare(batch=Batch())
    def forward(self, batch: RaggedBatch) -> torch.Tensor:
        """Outputs ``f(X_i)`` for every sequence of the batch."""
        from .core import _attend

        self.check_batch(batch)
        cw = self.E @ torch.stack([self.p, self.v], 1)  # one pass over E
        return _attend(batch, cw[:, 0], cw[:, 1:], True)[3][:, 0]

    @declare(batch=Batch())
    def attention(self, batch: RaggedBatch) -> torch.Tensor:
        """Softmax attention ``q_t`` of every token occurrence (flat, aligned with ``batch.ids``)."""
        from .core import segment_softmax

        self.check_batch(batch)
        q, _ = segment_softmax(self.scores()[batch.ids], batch)
        return q

    @declare(batch=Batch())
    def loss(self, batch: RaggedBatch) -> float:
        """Mean logistic loss ``(1/n) sum log(1 + exp(-y f))``."""
        from .core import logistic_loss

        return float(logistic_loss(self.forward(batch), batch.labels.to(self.E.dtype)))

    @declare(batch=Batch())
    def accuracy(self, batch: RaggedBatch) -> float:
        """Fraction of sequences with ``sign f = y`` (``f = 0`` counts as wrong)."""
        f = self.forward(batch)
        return float((f * batch.labels.to(f.dtype) > 0).to(torch.float64).mean())


@declare(E=TABLE, p=VECTOR, V=Tensor("float", shape=("d", None), finite=True))
@dataclass
class MultiClassAttentionModel(_EmbeddingModel):
    """The K-class variant: output vectors ``V = [v_1 .. v_K]`` (d x K), logits
    ``f_k(X) = softmax(E_X p)^T E_X v_k`` and softmax cross-entropy. Labels are ``0..K-1``."""

    E: torch.Tensor
    p: torch.Tensor
    V: torch.Tensor

    def __post_init__(self):
        same_dtype_and_device(self.E, p=self.p, V=self.V)  # each field is checked by the declaration
        if self.V.shape[1] < 2:
            raise InvalidParameterError(
                f"V must be a (d x K) tensor with d = {self.d} and K >= 2, got {tuple(self.V.shape)}"
            )

    def validate(self) -> MultiClassAttentionModel:
        """Check shapes, dtypes, devices and finiteness; raise InvalidParameterError otherwise."""
        check_fields(self)
        self.__post_init__()
        return self

    @classmethod
    @declare(num_classes=Int(min=2), p_init=Choice("gaussian", "zero"), **SIZES)
    def init(
        cls,
        vocab_size: int,
        d: int,
        num_classes: int,
        seed: int = 0,
        p_init: str = "gaussian",
        dtype=torch.float64,
        device="cpu",
    ) -> MultiClassAttentionModel:
        """``E_s, p ~ N(0, I/d)`` (or ``p = 0``); ``V`` has K random orthonormal columns (K <= d)."""
        if num_classes > d:
            raise InvalidParameterError(f"need 2 <= num_classes <= d, got K={num_classes}, d={d}")
        base = AttentionModel.init(vocab_size, d, seed=seed, p_init=p_init)
        g = generator(seed + 7_919)
        V, _ = torch.linalg.qr(torch.randn(d, num_classes, generator=g, dtype=torch.float64))
        return cls(
            base.E.to(dtype=dtype, device=device),
            base.p.to(dtype=dtype, device=device),
            V.to(dtype=dtype, device=device),
        )

    def copy(self) -> MultiClassAttentionModel:
        return MultiClassAttentionModel(self.E.detach().clone(), self.p.detach().clone(), self.V.detach().clone())

    @property
    def num_classes(self) -> int:
        return self.V.shape[1]

    @property
    def v(self) -> torch.Tensor:
        """The value read-out (here the matrix V), so training code treats both models alike."""
        return self.V

    @declare(batch=Batch())
    def check_batch(self, batch: RaggedBatch) -> None:
        """Raise a clear error unless ``batch`` is a ``K``-class batch over this model's vocabulary."""
        self._check_vocab(batch)
        self._check_classes(batch)

    def _check_classes(self, batch: RaggedBatch) -> None:
        if batch.num_classes != self.num_classes:
            raise InvalidBatchError(
                f"the model has K = {self.num_classes} classes but the batch has num_classes={batch.num_classes}"
            )

    @declare(batch=Batch())
    def forward(self, batch: RaggedBatch) -> torch.Tensor:
        """Logits (n x K)."""
        from .core import _attend

        self.check_batch(batch)
        return _attend(batch, self.scores(), self.values(), True)[3]

    @declare(batch=Batch())
    def loss(self, batch: RaggedBatch) -> float:
        """Mean softmax cross-entropy."""
        logits = self.forward(batch)
        return float(torch.nn.functional.cross_entropy(logits, batch.labels))

    @declare(batch=Batch())
    def accuracy(self, batch: RaggedBatch) -> float:
        """Fraction of sequences whose top class is their label."""
        return float((self.forward(batch).argmax(1) == batch.labels).double().mean())
