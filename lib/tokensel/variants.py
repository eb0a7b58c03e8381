"""Beyond one layer: the model variants of the paper's review discussion, trained by autograd.

All variants keep the paper's embedding table ``E`` (|S| x d), ``<cls>`` vector ``p`` and fixed unit
read-out ``v``, so the token statistics ``E_s^T p`` and ``E_s^T v`` stay defined and comparable:

* ``"mlp"`` — an MLP after the softmax: ``z = sum_t q_t E_{x_t}``, ``f = v^T W2 relu(W1 z)`` with
  ``W1, W2`` (d x d), ``q = softmax(E_X p)`` as in the one-layer model.
* ``"two_layer"`` — a self-attention layer over the sequence before the ``<cls>`` read-out, with a
  residual connection: ``H = X + softmax(X X^T / sqrt(d)) X`` (rows of ``X`` are ``E_{x_t}``), then
  ``f = softmax(H p)^T H v``. The residual keeps each position's own embedding in ``H``, so the
  read-out can still select individual tokens and ``E_s^T p`` keeps its meaning.
* ``"two_layer_wkq"`` — the same with trainable key-query matrices: layer-1 scores
  ``X W1 X^T / sqrt(d)`` and read-out scores ``H W2 p``; then ``W2 p`` plays the role of ``p``.

The MLP head runs over the batch's distinct (sequence, token) entries with sparse products
(:mod:`tokensel.mixing`). The two-layer models run over padded batches: sequences are padded to
the batch's longest (truncate long reviews first with :meth:`RaggedBatch.truncate`: the
two-layer cost is O(n T^2 d)). Runs on any torch device.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from .data import RaggedBatch
from .loss import logistic, mean_logistic
from .errors import DataUnavailableError, InvalidBatchError, InvalidParameterError
from .mixing import MixPlan, entry_attention, mix
from .model import AttentionModel, _check_dtype, _check_tensor, _EmbeddingModel
from .progress import bar
from .seeding import generator
from . import checkpoints
from .training import Trajectory, _diverged, check_training_settings
from .validation import check_choice, check_int

KINDS = ("mlp", "two_layer", "two_layer_wkq")


def padded(batch: RaggedBatch):
    """``(ids, mask)``: token ids padded with 0 to (n x T_max) and the boolean mask of real tokens."""
    n, T = batch.n, int(batch.lengths.max())
    pos = torch.arange(batch.num_tokens, device=batch.device) - batch.offsets[:-1][batch.seg]
    ids = torch.zeros(n, T, dtype=torch.long, device=batch.device)
    mask = torch.zeros(n, T, dtype=torch.bool, device=batch.device)
    ids[batch.seg, pos] = batch.ids
    mask[batch.seg, pos] = True
    return ids, mask


def length_chunks(batch: RaggedBatch, chunk: int | None) -> list[torch.Tensor]:
    """Indices of the sequences of ``batch`` in parts of at most ``chunk`` (all of them when None), taken
    in order of length, so that each padded part is as short as its longest member allows."""
    if chunk is None or chunk >= batch.n:
        return [torch.arange(batch.n)]
    order = torch.argsort(batch.lengths.cpu(), stable=True)
    return list(torch.split(order, chunk))


def _masked_softmax(scores: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    return torch.softmax(scores.masked_fill(~mask, -torch.inf), dim=-1)


@dataclass
class VariantModel(_EmbeddingModel):
    """Parameters of one variant; ``extra`` holds the variant's own matrices."""

    kind: str
    E: torch.Tensor
    p: torch.Tensor
    v: torch.Tensor
    extra: dict = field(default_factory=dict)

    @classmethod
    def init(cls, kind: str, vocab_size: int, d: int, seed: int = 0, dtype=torch.float32, device="cpu"):
        """``E, p`` as in the paper; ``W1, W2`` of the MLP ~ N(0, 2/d) (He); ``W_KQ`` start at I."""
        check_choice(kind, "kind", KINDS, error=InvalidParameterError)
        _check_dtype(dtype)
        base = AttentionModel.init(vocab_size, d, seed=seed)
        g = generator(seed + 1)
        extra = {}
        if kind == "mlp":
            extra["W1"] = torch.randn(d, d, generator=g, dtype=torch.float64) * (2 / d) ** 0.5
            extra["W2"] = torch.randn(d, d, generator=g, dtype=torch.float64) * (1 / d) ** 0.5
        elif kind == "two_layer_wkq":
            extra["W1"] = torch.eye(d, dtype=torch.float64)
            extra["W2"] = torch.eye(d, dtype=torch.float64)
        to = dict(dtype=dtype, device=device)
        return cls(kind, base.E.to(**to), base.p.to(**to), base.v.to(**to), {k: w.to(**to) for k, w in extra.items()})

    def validate(self) -> "VariantModel":
        """Check the kind, and the shapes, dtypes, devices and finiteness of every parameter."""
        check_choice(self.kind, "kind", KINDS, error=InvalidParameterError)
        AttentionModel(self.E, self.p, self.v)  # E, p, v as in the one-layer model
        want = {"mlp": ("W1", "W2"), "two_layer": (), "two_layer_wkq": ("W1", "W2")}[self.kind]
        if not isinstance(self.extra, dict) or set(self.extra) != set(want):
            raise InvalidParameterError(f"a {self.kind!r} model needs extra matrices {want}, got "
                                        f"{sorted(self.extra) if isinstance(self.extra, dict) else self.extra!r}")
        for name in want:
            _check_tensor(name, self.extra[name], (self.d, self.d), self.E.dtype, self.E.device)
        return self

    def effective_p(self) -> torch.Tensor:
        """The vector whose inner product with ``E_s`` is the token's read-out score
        (``W2 p`` for ``two_layer_wkq``, else ``p``)."""
        return self.extra["W2"] @ self.p if self.kind == "two_layer_wkq" else self.p

    def scores(self) -> torch.Tensor:
        return self.E @ self.effective_p()

    def prepare(self, batch: RaggedBatch) -> tuple:
        """What :meth:`forward_prepared` needs for ``batch``, computed once per batch: the sparse
        pattern of its distinct entries for the MLP head, padded ids and mask for the two-layer
        models."""
        return (batch, MixPlan(batch)) if self.kind == "mlp" else padded(batch)

    def forward_prepared(self, *prepared, scores_dtype: torch.dtype | None = None) -> torch.Tensor:
        """Outputs from the result of :meth:`prepare` (``scores_dtype``: see :meth:`forward_padded`; the MLP
        head ignores it)."""
        if self.kind == "mlp":
            return self.forward_entries(*prepared)
        return self.forward_padded(*prepared, scores_dtype=scores_dtype)

    def forward_entries(self, batch: RaggedBatch, plan: MixPlan) -> torch.Tensor:
        """MLP head over the distinct entries of ``batch``: ``z = Q E`` as one sparse product
        (:mod:`tokensel.mixing`), no padded (n x T x d) gather. Equal to :meth:`forward_padded`."""
        if self.kind != "mlp":
            raise InvalidParameterError(f"forward_entries is the MLP head's path, not {self.kind!r}'s")
        z = mix(entry_attention(self.E @ self.p, plan), self.E, plan)
        return torch.relu(z @ self.extra["W1"].T) @ self.extra["W2"].T @ self.v

    def forward_padded(self, ids: torch.Tensor, mask: torch.Tensor, scores_dtype: torch.dtype | None = None
                       ) -> torch.Tensor:
        """Outputs over padded ids (n x T) and mask; for the MLP head the dense reference of
        :meth:`forward_entries`.

        The two-layer models never form ``H`` (n x T x d): the read-out needs only ``H u = X u + A (X u)``
        for ``u = p'`` (``p``, or ``W2 p``) and ``u = v``, so the per-token work is the layer-1 score
        product ``K X^T`` (with ``K = (E W1)[ids]``: ``W1`` is applied once to the |S| rows of ``E``, not to
        every position) and a softmax, and ``A`` multiplies an (n x T x 2) tensor. Equal to
        :meth:`forward_reference` up to rounding. ``scores_dtype=torch.bfloat16`` computes ``K X^T`` from
        bfloat16 copies of the embeddings (float32 accumulation, softmax in float32): the GPU setting of
        the paper-scale runs."""
        if self.kind == "mlp":
            return self.forward_reference(ids, mask)
        if scores_dtype not in (None, torch.bfloat16):
            raise InvalidParameterError(f"scores_dtype must be None or torch.bfloat16, got {scores_dtype!r}")
        flat = ids.reshape(-1)
        n, T = ids.shape
        read = self.E @ torch.stack([self.effective_p(), self.v], 1)  # |S| x 2: c'_s and w_s
        g = read.index_select(0, flat).view(n, T, 2)
        low = (lambda t: t) if scores_dtype is None else (lambda t: t.to(scores_dtype))
        # the 1/sqrt(d) of the scores is folded into the |S| x d tables before the gather
        if self.kind == "two_layer_wkq":
            X = low(self.E).index_select(0, flat).view(n, T, self.d)
            K = low(self.E @ (self.extra["W1"] / self.d**0.5)).index_select(0, flat).view(n, T, self.d)
        else:
            X = K = low(self.E / self.d**0.25).index_select(0, flat).view(n, T, self.d)
        S = torch.bmm(K, X.transpose(1, 2)).masked_fill(~mask[:, None, :], -torch.inf)
        A = torch.softmax(S, dim=-1, dtype=self.E.dtype)  # float32 (or 64) even from bfloat16 scores
        mixed = g + torch.bmm(A, g)  # [H p', H v] at every position
        q = _masked_softmax(mixed[..., 0], mask)
        return (q * mixed[..., 1]).sum(-1)

    def forward_reference(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """The models as written: gather ``X = E[ids]`` (n x T x d), form ``H = X + A X`` and read out
        (the test reference of :meth:`forward_padded` and :meth:`forward_entries`)."""
        # n x T x d; index_select because its backward (index_add) sums in a fixed order on the
        # CPU, where that of E[ids] (index_put with accumulation) does not: runs must repeat bitwise
        X = self.E.index_select(0, ids.reshape(-1)).view(*ids.shape, self.d)
        d = self.d
        if self.kind == "mlp":
            q = _masked_softmax(X @ self.p, mask)
            z = torch.einsum("nt,ntd->nd", q, X)
            return torch.relu(z @ self.extra["W1"].T) @ self.extra["W2"].T @ self.v
        K = X @ self.extra["W1"] if self.kind == "two_layer_wkq" else X
        A = _masked_softmax(K @ X.transpose(1, 2) / d**0.5, mask[:, None, :])
        H = X + A @ X
        q = _masked_softmax(H @ self.effective_p(), mask)
        return torch.einsum("nt,nt->n", q, H @ self.v)

    def forward(self, batch: RaggedBatch, chunk: int = 2048) -> torch.Tensor:
        """Outputs ``f`` for every sequence (in chunks of sequences, to bound memory)."""
        self.check_batch(batch)
        chunk = check_int(chunk, "chunk", min=1, error=InvalidParameterError)
        outs = []
        for start in range(0, batch.n, chunk):
            sub = batch.subset(torch.arange(start, min(start + chunk, batch.n)))
            outs.append(self.forward_prepared(*self.prepare(sub)))
        return torch.cat(outs)

    def check_batch(self, batch: RaggedBatch) -> None:
        """Raise a clear error unless ``batch`` is a ±1-labelled batch over this model's vocabulary."""
        if not isinstance(batch, RaggedBatch):
            raise InvalidBatchError(f"expected a RaggedBatch, got {type(batch).__name__}")
        if batch.num_classes is not None:
            raise InvalidBatchError("the variants are binary models: the batch must have ±1 labels, "
                                    f"got a {batch.num_classes}-class batch")
        if batch.vocab_size != self.vocab_size:
            raise InvalidBatchError(f"batch vocabulary has {batch.vocab_size} tokens but E has "
                                    f"{self.vocab_size} rows")

    def loss(self, batch: RaggedBatch) -> float:
        with torch.no_grad():
            return float(mean_logistic(self.forward(batch), batch.labels.to(self.E.dtype)))

    def accuracy(self, batch: RaggedBatch) -> float:
        with torch.no_grad():
            return float((self.forward(batch) * batch.labels.to(self.E.dtype) > 0).double().mean())


def train_variant(model: VariantModel, batch: RaggedBatch, steps: int, lr: float = 3e-3,
                  test_batch: RaggedBatch | None = None, eval_every: int = 25, progress: bool | None = None,
                  chunk: int | None = None, checkpoint=None, checkpoint_every: int = 25,
                  scores_dtype: torch.dtype | None = None):
    """Full-batch Adam on ``E``, ``p`` and the variant's matrices (``v`` stays fixed), gradients by
    autograd. With ``chunk``, each full-batch gradient is accumulated over chunks of ``chunk``
    sequences (the same gradient, less memory). Returns a :class:`~tokensel.training.Trajectory`.

    With ``checkpoint`` (a file path) the run saves its state every ``checkpoint_every`` steps and
    at the end, and a run started again with the same configuration resumes from there and ends
    with exactly the result of an uninterrupted run (as :func:`tokensel.train_joint`).

    ``scores_dtype=torch.bfloat16`` computes the two-layer models' layer-1 scores in bfloat16 during
    training (see :meth:`VariantModel.forward_padded`); evaluation stays in the parameters' dtype."""
    if not isinstance(model, VariantModel):
        raise InvalidParameterError(f"model must be a VariantModel, got {type(model).__name__}")
    steps, lr, eval_every, checkpoint, checkpoint_every = check_training_settings(
        steps, lr, eval_every, checkpoint, checkpoint_every, progress)
    if chunk is not None:
        chunk = check_int(chunk, "chunk", min=1,
                          error=InvalidParameterError)
    if scores_dtype not in (None, torch.bfloat16):
        raise InvalidParameterError(f"scores_dtype must be None or torch.bfloat16, got {scores_dtype!r}")
    model.validate()
    model.check_batch(batch)
    if test_batch is not None:
        model.check_batch(test_batch)
    chunks = length_chunks(batch, chunk)
    parts = [(model.prepare(batch.subset(ix)), batch.labels[ix.to(batch.device)].to(model.E.dtype)) for ix in chunks]
    params = [model.E, model.p, *model.extra.values()]
    opt = torch.optim.Adam(params, lr=lr, fused=True)
    traj = Trajectory(method=f"adam/{model.kind}")
    saved = {"E": model.E, "p": model.p, **model.extra}
    meta = None
    start = 0
    if checkpoint is not None:
        meta = checkpoints.fingerprint(f"variant/{model.kind}", batch, {**saved, "v": model.v},
                                       dict(lr=lr, steps=steps, eval_every=eval_every, chunk=chunk,
                                            scores_dtype=str(scores_dtype)), test_batch)
        start, traj = checkpoints.resume(checkpoint, saved, opt, meta, Trajectory) or (0, traj)
    for t in params:
        t.requires_grad_(True)
    try:
        with bar(steps, f"train {model.kind}", disable=None if progress is None else not progress) as pb:
            pb.update(start)
            for step in range(start, steps + 1):
                opt.zero_grad()
                loss, correct = 0.0, 0.0
                for prepared, y in parts:
                    f = model.forward_prepared(*prepared, scores_dtype=scores_dtype)
                    part = logistic(y * f).sum() / batch.n
                    if step < steps:
                        part.backward()
                    loss += float(part.detach())
                    correct += float((f.detach() * y > 0).double().sum())
                if not np.isfinite(loss) or (step < steps and not all(
                        t.grad is not None and bool(torch.isfinite(t.grad).all()) for t in params)):
                    raise _diverged(step, lr, "the loss or its gradient")
                if step % eval_every == 0 or step == steps:
                    extra = {"train_acc": correct / batch.n}
                    if test_batch is not None:
                        extra["test_loss"] = model.loss(test_batch)
                        extra["test_acc"] = model.accuracy(test_batch)
                    traj.append(step, step, loss, float(model.p.detach().norm()), float("nan"), **extra)
                if step == steps:
                    if checkpoint is not None:
                        checkpoints.save(checkpoint, saved, opt, step, traj, meta)
                    break
                opt.step()
                pb.update(1)
                if checkpoint is not None and (step + 1) % checkpoint_every == 0:
                    checkpoints.save(checkpoint, saved, opt, step, traj, meta)
    finally:
        for t in params:
            t.requires_grad_(False)
            t.grad = None
    return traj


RECORDED_NAMES = {"one_layer": "one layer", "mlp": "MLP head", "two_layer": "two layers",
                  "two_layer_wkq": "two layers + W_KQ"}


def read_paper_scale(folder):
    """Read the output of ``scripts/variants_paper_scale.py`` (``summary_<kind>.json`` and
    ``bins_<kind>.csv`` per model). Returns ``(summary, bins)``: a frame indexed by model name and a
    dict ``name -> (bins of E_s^T p, bins of E_s^T v)`` in the layout of
    :func:`tokensel.statistics.binned`. Models without files are left out."""
    import json
    from pathlib import Path

    import pandas as pd

    folder = Path(folder)
    if not folder.is_dir():
        raise DataUnavailableError(f"no recorded runs at {folder}")
    rows, bins = [], {}
    for kind, name in RECORDED_NAMES.items():
        summary, table = folder / f"summary_{kind}.json", folder / f"bins_{kind}.csv"
        if not (summary.is_file() and table.is_file()):
            continue
        rows.append({"model": name, **json.loads(summary.read_text())})
        bp = pd.read_csv(table)
        bv = bp[["bin", "left", "right", "center", "count"]].assign(mean=bp["mean_v"], std=bp["std_v"])
        bins[name] = (bp.drop(columns=["mean_v", "std_v"]), bv)
    if not rows:
        raise DataUnavailableError(f"no summary_<kind>.json / bins_<kind>.csv pairs in {folder}")
    return pd.DataFrame(rows).set_index("model"), bins
