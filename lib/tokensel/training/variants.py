"""Training the model variants of chapter 7 (:mod:`tokensel.models.variants`) by autograd, through the one
Adam loop (:func:`tokensel.training.loop.adam`)."""

from __future__ import annotations

import torch

from ..data.batch import Batch, RaggedBatch
from ..loss import logistic
from ..models.variants import SCORES_DTYPE, VariantModel, length_chunks
from ..validation import Instance, Int, all_finite, declare
from . import checkpoints, loop
from .loop import StepResult
from .settings import SETTINGS, TrainSettings


@declare(
    model=Instance(VariantModel, what="a VariantModel (tokensel.models.variants.make)"),
    batch=Batch(),
    settings=SETTINGS,
    test_batch=Batch(dims=(), allow_none=True),
    chunk=Int(min=1, allow_none=True),
    scores_dtype=SCORES_DTYPE,
)
def train_variant(
    model: VariantModel,
    batch: RaggedBatch,
    settings: TrainSettings | None = None,
    test_batch: RaggedBatch | None = None,
    chunk: int | None = None,
    scores_dtype: torch.dtype | None = None,
):
    """Full-batch Adam on ``E``, ``p`` and the variant's matrices (``v`` stays fixed unless the class says
    :attr:`~tokensel.models.variants.VariantModel.trains_v`), gradients by
    autograd, through the one training loop (:func:`tokensel.training.loop.adam`). With ``chunk``, each
    full-batch gradient is accumulated over chunks of ``chunk`` sequences (the same gradient, less
    memory). Returns a :class:`~tokensel.training.loop.Trajectory`.

    With ``settings.checkpoint`` (a file path) the run saves its state every ``settings.checkpoint_every`` steps and
    at the end, and a run started again with the same configuration resumes from there and ends
    with exactly the result of an uninterrupted run (as :func:`tokensel.train_joint`).

    ``scores_dtype=torch.bfloat16`` computes the two-layer models' layer-1 scores in bfloat16 during
    training (see :meth:`tokensel.models.variants.TwoLayer.forward_prepared`); evaluation stays in the parameters'
    dtype."""
    settings = loop.prologue(model, batch, test_batch, settings)
    parts = [
        (model.prepare(batch.subset(ix)), batch.labels[ix.to(batch.device)].to(model.E.dtype))
        for ix in length_chunks(batch, chunk)
    ]
    params = [model.E, model.p, *model.matrices.values(), *([model.v] if model.trains_v else [])]

    def step(take_grad: bool) -> StepResult:
        for t in params:
            t.grad = None
        loss, correct = 0.0, 0.0
        for prepared, y in parts:
            f = model.forward_prepared(*prepared, scores_dtype=scores_dtype)
            part = logistic(y * f).sum() / batch.n
            if take_grad:
                part.backward()
            loss += float(part.detach())
            correct += float((f.detach() * y > 0).double().sum())
        finite = not take_grad or all(t.grad is not None and all_finite(t.grad) for t in params)
        return StepResult(loss, correct / batch.n, float("nan"), finite)

    saved = {"E": model.E, "p": model.p, **model.matrices, **({"v": model.v} if model.trains_v else {})}
    meta = (
        None
        if settings.checkpoint is None
        else checkpoints.fingerprint(
            f"variant/{model.kind}",
            batch,
            {**saved, "v": model.v},
            dict(
                lr=settings.lr,
                steps=settings.steps,
                eval_every=settings.eval_every,
                chunk=chunk,
                scores_dtype=str(scores_dtype),
            ),
            test_batch,
        )
    )
    return loop.adam(
        model,
        params,
        step,
        settings,
        method=f"adam/{model.kind}",
        label=f"train {model.kind}",
        test_batch=test_batch,
        saved=saved,
        fingerprint=meta,
        autograd=True,
    )
