"""Beyond one layer: the model variants of the paper's review discussion (chapter 07), trained by autograd.

Each keeps ``E``, ``p`` and the read-out ``v`` so ``E_s^T p`` and ``E_s^T v`` stay comparable (:class:`VariantModel`,
:data:`MODELS`); ``z = sum_t q_t E_{x_t}``, ``q = softmax(E_X p)``:

* :class:`MLPHead` (``"mlp"``): ``f = v^T W2 relu(W1 z)``; :class:`MLPResidual`: ``f = v^T (z + W2 relu(W1 z))``;
  :class:`MLPTrainedV`: ``v`` trained; :class:`MLPOutput`: ``f = v^T relu(W1 z)`` (:data:`MLP_PLACEMENTS`).
* :class:`TwoLayer`: ``H = X + softmax(X X^T / sqrt(d)) X``, ``f = softmax(H p)^T H v``; the residual keeps each
  token's embedding, so ``E_s^T p`` keeps its meaning. :class:`TwoLayerWKQ`: with key-query matrices.

MLP heads use sparse products (:mod:`tokensel.models.mixing`); two-layer models padded batches, O(n T^2 d)
(:meth:`RaggedBatch.truncate`)."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import ClassVar

import torch

from ..data.batch import Batch, RaggedBatch
from ..errors import InvalidBatchError, InvalidParameterError
from ..loss import mean_logistic
from ..seeding import generator
from ..validation import Choice, Dtype, Instance, Int, Tensor, declare
from . import kernels
from .attention import SIZES, AttentionModel, _EmbeddingModel, same_dtype_and_device
from .mixing import MixPlan, entry_attention, mix

#: the layer-1 scores of the two-layer models in the parameters' dtype (None) or in bfloat16
SCORES_DTYPE = Dtype(torch.bfloat16, allow_none=True)
#: padded token ids (n x T) and the mask of the real tokens
IDS = Tensor("int", shape=("rows", "T"))
MASK = Tensor("bool", shape=("rows", "T"))
MATRIX = Tensor("float", shape=("d", "d"), finite=True)


@declare(batch=Batch())
def padded(batch: RaggedBatch):
    """``(ids, mask)``: token ids padded with 0 to (n x T_max) and the boolean mask of real tokens."""
    n, T = batch.n, int(batch.lengths.max())
    pos = torch.arange(batch.num_tokens, device=batch.device) - batch.offsets[:-1][batch.seg]
    ids = torch.zeros(n, T, dtype=torch.long, device=batch.device)
    mask = torch.zeros(n, T, dtype=torch.bool, device=batch.device)
    ids[batch.seg, pos] = batch.ids
    mask[batch.seg, pos] = True
    return ids, mask


@declare(batch=Batch(), chunk=Int(min=1, allow_none=True))
def length_chunks(batch: RaggedBatch, chunk: int | None) -> list[torch.Tensor]:
    """Indices of ``batch``'s sequences in length order, in parts of at most ``chunk``, so padding stays short."""
    if chunk is None or chunk >= batch.n:
        return [torch.arange(batch.n)]
    order = torch.argsort(batch.lengths.cpu(), stable=True)
    return list(torch.split(order, chunk))


def _masked_softmax(scores: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    return torch.softmax(scores.masked_fill(~mask, -torch.inf), dim=-1)


def _kernel_plan(model, ids: torch.Tensor, mask: torch.Tensor):
    """The two-layer kernels' plan of padded ``ids`` and ``mask``, or None off the CPU, off float32/64 or for a
    mask that is not a non-empty row prefix."""
    E = model.E
    if E.device.type != "cpu" or ids.device.type != "cpu" or E.dtype not in (torch.float32, torch.float64):
        return None
    if ids.ndim != 2 or mask.shape != ids.shape or mask.dtype != torch.bool or ids.shape[1] == 0:
        return None
    lengths = mask.sum(1)
    if bool((lengths == 0).any()) or not torch.equal(mask, torch.arange(ids.shape[1]) < lengths[:, None]):
        return None
    return kernels.TwoLayerPlan(ids.numpy(), lengths.numpy(), model.vocab_size)


class _TwoLayerKernel(torch.autograd.Function):
    """The two-layer read-out ``f`` from ``Xt``, ``Kt`` (None: ``Xt``), ``R = [c', w]`` by the compiled kernels."""

    @staticmethod
    def forward(ctx, Xt, Kt, R, plan):
        keep = any(ctx.needs_input_grad[:3])
        arrays = (Xt.detach().numpy(), None if Kt is None else Kt.detach().numpy(), R.detach().numpy())
        f, A, aux = kernels.two_layer_forward(plan, *arrays, keep=keep)
        if keep:
            ctx.kernel = (plan, arrays, A, aux, f)
        return torch.from_numpy(f.astype(arrays[0].dtype))

    @staticmethod
    def backward(ctx, grad_f):
        plan, arrays, A, aux, f = ctx.kernel
        dX, dK, dR = kernels.two_layer_backward(plan, *arrays, A, aux, f, grad_f.detach().double().numpy())
        del ctx.kernel
        return (
            torch.from_numpy(dX) if ctx.needs_input_grad[0] else None,
            torch.from_numpy(dK) if dK is not None and ctx.needs_input_grad[1] else None,
            torch.from_numpy(dR) if ctx.needs_input_grad[2] else None,
            None,
        )


@dataclass
class VariantModel(_EmbeddingModel):
    """What every variant shares: ``E``, ``p``, the fixed read-out ``v``, and its own d x d :attr:`matrices`.

    A subclass sets ``kind`` and ``name``, defines :meth:`forward_reference`, :meth:`prepare` and
    :meth:`forward_prepared`; one with matrices overrides ``_init_matrices``."""

    kind: ClassVar[str] = ""
    name: ClassVar[str] = ""
    E: torch.Tensor
    p: torch.Tensor
    v: torch.Tensor

    @classmethod
    @declare(**SIZES)
    def init(cls, vocab_size: int, d: int, seed: int = 0, dtype=torch.float32, device="cpu"):
        """``E, p, v`` as in the paper (:meth:`tokensel.AttentionModel.init`), then the variant's matrices."""
        if cls is VariantModel:
            raise InvalidParameterError(
                "VariantModel is the interface: initialise one of "
                f"{', '.join(c.__name__ for c in MODELS.values())} (or use make(kind, ...))"
            )
        base = AttentionModel.init(vocab_size, d, seed=seed)
        to = dict(dtype=dtype, device=device)
        mats = cls._init_matrices(d, generator(seed + 1))
        return cls(base.E.to(**to), base.p.to(**to), base.v.to(**to), **{k: w.to(**to) for k, w in mats.items()})

    @staticmethod
    def _init_matrices(d: int, g: torch.Generator) -> dict:
        return {}

    @property
    def matrices(self) -> dict:
        """The variant's own trainable matrices, by name (empty for :class:`TwoLayer`)."""
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name not in ("E", "p", "v")}

    def validate(self) -> VariantModel:
        """Check the shapes, dtypes, devices and finiteness of every parameter."""
        AttentionModel(self.E, self.p, self.v)  # E, p, v as in the one-layer model
        for name, w in self.matrices.items():
            MATRIX.validate(w, name, {"d": self.d})
        same_dtype_and_device(self.E, **self.matrices)
        return self

    #: whether training also updates ``v`` (fixed as in the theory unless a subclass says so; our protocol trains it)
    trains_v: ClassVar[bool] = False

    def read_out(self) -> torch.Tensor:
        """The vector whose inner product with ``E_s`` is the token's read-out score (``p`` here)."""
        return self.p

    def token_values(self) -> torch.Tensor:
        """Each token's value as read when all attention sits on it: ``E_s^T v`` (two-layer: ``2 E_s^T v``)."""
        return self.values()

    def scores(self) -> torch.Tensor:
        return self.E @ self.read_out()

    @declare(batch=Batch())
    def prepare(self, batch: RaggedBatch) -> tuple:
        """What :meth:`forward_prepared` needs for ``batch``, computed once per batch."""
        raise NotImplementedError

    def forward_prepared(self, *prepared, scores_dtype: torch.dtype | None = None) -> torch.Tensor:
        """Outputs from the result of :meth:`prepare`."""
        raise NotImplementedError

    @declare(ids=IDS, mask=MASK)
    def forward_reference(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """The model as written over padded ids (n x T) and mask: the test reference of the fast path."""
        raise NotImplementedError

    def gather(self, ids: torch.Tensor) -> torch.Tensor:
        """``X = E[ids]`` (n x T x d) via index_select: its CPU backward sums in a fixed order, so runs repeat."""
        return self.E.index_select(0, ids.reshape(-1)).view(*ids.shape, self.d)

    @declare(batch=Batch(), chunk=Int(min=1))
    def forward(self, batch: RaggedBatch, chunk: int = 2048) -> torch.Tensor:
        """Outputs ``f`` for every sequence (in chunks of sequences, to bound memory)."""
        self.check_batch(batch)
        outs = []
        for start in range(0, batch.n, chunk):
            sub = batch.subset(torch.arange(start, min(start + chunk, batch.n)))
            outs.append(self.forward_prepared(*self.prepare(sub)))
        return torch.cat(outs)

    def check_batch(self, batch: RaggedBatch) -> None:
        """Raise a clear error unless ``batch`` is a ±1-labelled batch over this model's vocabulary."""
        if batch.num_classes is not None:
            raise InvalidBatchError(
                f"the variants are binary models: the batch must have ±1 labels, got a {batch.num_classes}-class batch"
            )
        if batch.vocab_size != self.vocab_size:
            raise InvalidBatchError(f"batch vocabulary has {batch.vocab_size} tokens but E has {self.vocab_size} rows")

    def loss(self, batch: RaggedBatch) -> float:
        """Mean logistic loss."""
        with torch.no_grad():
            return float(mean_logistic(self.forward(batch), batch.labels.to(self.E.dtype)))

    @declare(batch=Batch())
    def accuracy(self, batch: RaggedBatch) -> float:
        """Fraction of sequences with ``sign f = y``."""
        with torch.no_grad():
            return float((self.forward(batch) * batch.labels.to(self.E.dtype) > 0).double().mean())


@dataclass
class MLPHead(VariantModel):
    """``f = v^T W2 relu(W1 z)``, ``z = sum_t q_t E_{x_t}``; ``W1, W2`` He-initialised (N(0, 2/d), N(0, 1/d))."""

    kind: ClassVar[str] = "mlp"
    name: ClassVar[str] = "MLP head"
    W1: torch.Tensor
    W2: torch.Tensor

    @staticmethod
    def _init_matrices(d, g):
        W1 = torch.randn(d, d, generator=g, dtype=torch.float64) * (2 / d) ** 0.5
        return {"W1": W1, "W2": torch.randn(d, d, generator=g, dtype=torch.float64) * (1 / d) ** 0.5}

    @declare(z=Tensor("float", shape=(None, "d")))
    def head(self, z: torch.Tensor) -> torch.Tensor:
        """``v^T W2 relu(W1 z)`` for every row of ``z`` (a row per sequence or per token)."""
        return torch.relu(z @ self.W1.T) @ self.W2.T @ self.v

    def token_values(self) -> torch.Tensor:
        """``head(E_s)``: the output with all attention on ``s`` (the MLP's analogue of ``E_s^T v``)."""
        return self.head(self.E)

    @declare(batch=Batch())
    def prepare(self, batch):
        """The sparse pattern of the batch's distinct entries (:class:`tokensel.models.mixing.MixPlan`)."""
        return batch, MixPlan(batch)

    @declare(batch=Batch(), plan=Instance(MixPlan), scores_dtype=SCORES_DTYPE)
    def forward_prepared(self, batch, plan, scores_dtype=None):
        """The head over ``batch``'s distinct entries, ``z = Q E`` as one sparse product (``scores_dtype`` ignored)."""
        return self.forward_entries(batch, plan)

    def forward_entries(self, batch: RaggedBatch, plan: MixPlan) -> torch.Tensor:
        """The sparse path of :meth:`forward_prepared`; equal to :meth:`forward_reference`."""
        return self.head(mix(entry_attention(self.E @ self.p, plan), self.E, plan))

    @declare(ids=IDS, mask=MASK)
    def forward_reference(self, ids, mask):
        """The MLP head over padded ids and mask, as written."""
        X = self.gather(ids)
        q = _masked_softmax(X @ self.p, mask)
        return self.head(torch.einsum("nt,ntd->nd", q, X))


@dataclass
class MLPResidual(MLPHead):
    """The MLP head with a residual, ``f = v^T (z + W2 relu(W1 z))``: ``v`` also reads ``z`` directly."""

    kind: ClassVar[str] = "mlp_residual"
    name: ClassVar[str] = "MLP head + residual"

    @declare(z=Tensor("float", shape=(None, "d")))
    def head(self, z: torch.Tensor) -> torch.Tensor:
        """``v^T (z + W2 relu(W1 z))`` for every row of ``z``."""
        return (z + torch.relu(z @ self.W1.T) @ self.W2.T) @ self.v


@dataclass
class MLPTrainedV(MLPHead):
    """:class:`MLPHead` with the read-out ``v`` trained too; ``E_s^T v`` uses the trained ``v``."""

    kind: ClassVar[str] = "mlp_trained_v"
    name: ClassVar[str] = "MLP head, v trained"
    trains_v: ClassVar[bool] = True


@dataclass
class MLPOutput(VariantModel):
    """``v`` as the MLP's trained output layer, ``f = v^T relu(W1 z)``, ``W1`` He-initialised, no ``W2``."""

    kind: ClassVar[str] = "mlp_output"
    name: ClassVar[str] = "MLP head, v as output layer"
    trains_v: ClassVar[bool] = True
    W1: torch.Tensor

    @staticmethod
    def _init_matrices(d, g):
        return {"W1": torch.randn(d, d, generator=g, dtype=torch.float64) * (2 / d) ** 0.5}

    def head(self, z: torch.Tensor) -> torch.Tensor:
        return torch.relu(z @ self.W1.T) @ self.v

    token_values = MLPHead.token_values
    prepare = MLPHead.prepare

    def forward_prepared(self, batch, plan, scores_dtype=None):
        """:meth:`MLPHead.forward_prepared`: the head over the distinct entries of ``batch``."""
        return self.forward_entries(batch, plan)

    forward_entries = MLPHead.forward_entries
    forward_reference = MLPHead.forward_reference


@dataclass
class TwoLayer(VariantModel):
    """Self-attention with a residual before the read-out: ``H = X + softmax(X X^T / sqrt(d)) X``,
    ``f = softmax(H p)^T H v``."""

    kind: ClassVar[str] = "two_layer"
    name: ClassVar[str] = "two layers"

    @declare(batch=Batch())
    def prepare(self, batch):
        """Padded ids and mask (:func:`padded`)."""
        return padded(batch)

    def layer1_tables(self, low) -> tuple:
        """The |S| x d tables whose gathered rows give the layer-1 scores ``K X^T`` (the 1/sqrt(d) folded in)."""
        X = low(self.E / self.d**0.25)
        return X, X

    def layer1_keys(self, X: torch.Tensor) -> torch.Tensor:
        """The layer-1 keys of the gathered embeddings ``X`` (n x T x d): ``X`` itself."""
        return X

    @declare(ids=IDS, mask=MASK, scores_dtype=SCORES_DTYPE)
    def forward_prepared(self, ids, mask, scores_dtype=None):
        """Outputs over padded ids (n x T) and mask without forming ``H``: only ``H u = X u + A (X u)`` for
        ``u = p', v``. ``scores_dtype=torch.bfloat16`` forms ``K X^T`` in bfloat16 (the paper's GPU runs); compiled
        kernels on CPU float32/64, else ``_forward_tensors``."""
        plan = None if scores_dtype is not None else _kernel_plan(self, ids, mask)
        if plan is None:
            return self._forward_tensors(ids, mask, scores_dtype)
        Xt, Kt = self.layer1_tables(lambda t: t)
        read = self.E @ torch.stack([self.read_out(), self.v], 1)  # |S| x 2: c'_s and w_s
        return _TwoLayerKernel.apply(Xt.contiguous(), None if Kt is Xt else Kt.contiguous(), read.contiguous(), plan)

    def _forward_tensors(self, ids, mask, scores_dtype=None):
        """:meth:`forward_prepared` as batched tensor products (any device; the kernels' reference)."""
        flat = ids.reshape(-1)
        n, T = ids.shape
        read = self.E @ torch.stack([self.read_out(), self.v], 1)  # |S| x 2: c'_s and w_s
        g = read.index_select(0, flat).view(n, T, 2)
        low = (lambda t: t) if scores_dtype is None else (lambda t: t.to(scores_dtype))
        Xt, Kt = self.layer1_tables(low)
        X = Xt.index_select(0, flat).view(n, T, self.d)
        K = X if Kt is Xt else Kt.index_select(0, flat).view(n, T, self.d)
        S = torch.bmm(K, X.transpose(1, 2)).masked_fill(~mask[:, None, :], -torch.inf)
        A = torch.softmax(S, dim=-1, dtype=self.E.dtype)  # float32 (or 64) even from bfloat16 scores
        mixed = g + torch.bmm(A, g)  # [H p', H v] at every position
        q = _masked_softmax(mixed[..., 0], mask)
        return (q * mixed[..., 1]).sum(-1)

    @declare(ids=IDS, mask=MASK)
    def forward_reference(self, ids, mask):
        """The two-layer model over padded ids and mask, as written."""
        X = self.gather(ids)
        A = _masked_softmax(self.layer1_keys(X) @ X.transpose(1, 2) / self.d**0.5, mask[:, None, :])
        H = X + A @ X
        q = _masked_softmax(H @ self.read_out(), mask)
        return torch.einsum("nt,nt->n", q, H @ self.v)


@dataclass
class TwoLayerWKQ(TwoLayer):
    """:class:`TwoLayer` with key-query matrices (start: identity), scores ``X W1 X^T / sqrt(d)`` and ``H W2 p``."""

    kind: ClassVar[str] = "two_layer_wkq"
    name: ClassVar[str] = "two layers + W_KQ"
    W1: torch.Tensor
    W2: torch.Tensor

    @staticmethod
    def _init_matrices(d, g):
        return {"W1": torch.eye(d, dtype=torch.float64), "W2": torch.eye(d, dtype=torch.float64)}

    def read_out(self):
        """``W2 p``: the vector whose inner product with ``E_s`` is the token's read-out score."""
        return self.W2 @ self.p

    def layer1_tables(self, low):
        """``E`` and ``E W1 / sqrt(d)``, through ``low``."""
        return low(self.E), low(self.E @ (self.W1 / self.d**0.5))

    def layer1_keys(self, X):
        """The layer-1 keys ``X W1``."""
        return X @ self.W1


#: the variants by short name (command lines, recorded files)
MODELS = {cls.kind: cls for cls in (MLPHead, TwoLayer, TwoLayerWKQ, MLPResidual, MLPTrainedV, MLPOutput)}
KINDS = tuple(MODELS)
#: the three variants of the paper's discussion, compared with the one-layer model (chapter 07)
COMPARED = ("mlp", "two_layer", "two_layer_wkq")
#: where the read-out ``v`` sits relative to the MLP (chapter 07's MLP study)
MLP_PLACEMENTS = ("mlp", "mlp_residual", "mlp_trained_v", "mlp_output")


@declare(kind=Choice(*KINDS), **SIZES)
def make(kind: str, vocab_size: int, d: int, seed: int = 0, dtype=torch.float32, device="cpu") -> VariantModel:
    """``MODELS[kind].init(...)``: a variant initialised by its short name (one of ``KINDS``)."""
    return MODELS[kind].init(vocab_size, d, seed=seed, dtype=dtype, device=device)
