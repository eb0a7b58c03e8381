"""Training the model variants of chapter 7 (:mod:`tokensel.models.variants`) by autograd, through the one Adam
loop (:func:`tokensel.training.loop.adam`)."""

from __future__ import annotations

import torch

from ..data.batch import Batch, RaggedBatch
from ..loss import logistic
from ..models.variants import SCORES_DTYPE, VariantModel, length_chunks
from ..validation import Instance, Int, all_finite, declare
from . import loop
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
    """Full-batch Adam on ``E``, ``p``, the variant's matrices (and ``v`` where the class
    :attr:`~tokensel.models.variants.VariantModel.trains_v`), gradients by autograd; returns a
    :class:`~tokensel.training.loop.Trajectory`. With ``chunk`` each gradient is accumulated over chunks of that
    many sequences (less memory). With ``settings.checkpoint`` a killed run resumes (as :func:`tokensel.train_joint`).
    ``scores_dtype=torch.bfloat16``: the two-layer models' layer-1 scores in bfloat16 while training (the GPU
    setting; evaluation stays in the parameters' dtype)."""
    settings = loop._prologue(model, batch, test_batch, settings)
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

    run = (chunk, str(scores_dtype), batch, test_batch, model.v, *params)
    return loop.adam(
        model,
        params,
        step,
        settings,
        method=f"adam/{model.kind}",
        label=f"train {model.kind}",
        test_batch=test_batch,
        run=run,
        autograd=True,
    )
