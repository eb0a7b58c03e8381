"""tokensel.models.attention: the one-layer models, their initialisation, outputs and attention."""

import dataclasses

import numpy as np
import pytest
import torch
from conftest import random_batch

import tokensel as ts
from tokensel import experiments, reviews
from tokensel.errors import InvalidParameterError, TokenselError
from tokensel.models import attention


def test_init_follows_the_paper_and_is_seeded():
    m = ts.AttentionModel.init(50, 400, seed=3)
    assert m.E.shape == (50, 400) and m.p.shape == (400,) and m.E.dtype == torch.float64
    assert float(m.v.norm()) == pytest.approx(1.0)  # a unit read-out
    assert float(m.E.var()) == pytest.approx(1 / 400, rel=0.05)  # E_s ~ N(0, I/d)
    again = ts.AttentionModel.init(50, 400, seed=3)
    assert torch.equal(m.E, again.E) and torch.equal(m.p, again.p) and torch.equal(m.v, again.v)
    assert torch.all(ts.AttentionModel.init(5, 4, p_init="zero").p == 0)


def test_attention_and_output_of_a_sequence():
    batch = random_batch(1)
    m = ts.AttentionModel.init(batch.vocab_size, 6, seed=0)
    q = m.attention(batch)
    sums = torch.zeros(batch.n, dtype=q.dtype).index_add_(0, batch.seg, q)
    assert torch.allclose(sums, torch.ones(batch.n, dtype=q.dtype))
    seq = batch.sequence(0)
    by_hand = torch.softmax(m.E[seq] @ m.p, 0) @ (m.E[seq] @ m.v)
    assert float(m.forward(batch)[0]) == pytest.approx(float(by_hand), rel=1e-12)
    assert m.loss(batch) == pytest.approx(float(ts.loss.mean_logistic(m.forward(batch), batch.labels.double())))


def test_copy_is_independent_and_validate_refuses_nan():
    m = ts.AttentionModel.init(5, 4, seed=0)
    c = m.copy()
    c.E[0, 0] = float("nan")
    assert torch.isfinite(m.E).all()
    pytest.raises(InvalidParameterError, lambda: c.validate()).match("NaN")


@pytest.mark.parametrize("shape", [(0, 4), (5, 0), (0, 0)])
def test_a_model_without_tokens_or_dimensions_is_refused_when_built_directly(shape):
    S, d = shape
    E, p, v = (torch.zeros(*size, dtype=torch.float64) for size in ((S, d), (d,), (d,)))
    pytest.raises(ts.InvalidParameterError, lambda: ts.AttentionModel(E, p, v)).match("at least one token and d >= 1")
    pytest.raises(ts.InvalidParameterError, lambda: ts.MultiClassAttentionModel(E, p, torch.zeros(d, 2).double()))


@pytest.mark.parametrize("name, value", [("E", float("nan")), ("p", float("inf")), ("v", -float("inf"))])
def test_nan_written_into_a_parameter_in_place_is_an_error_not_nan_gradients(name, value):
    batch = ts.synthetic.independent_tokens(20, 10, length=4, seed=0).batch
    model = ts.AttentionModel.init(10, 4, seed=0)
    getattr(model, name).view(-1)[0] = value
    for call in (lambda: ts.gradients(model, batch), lambda: model.forward(batch), lambda: model.loss(batch)):
        pytest.raises(ts.InvalidParameterError, call).match(f"{name} contains NaN or inf")


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the refusal on a machine without CUDA")
@pytest.mark.parametrize("device", ["cuda", "cuda:0", "meta", "nonsense", 3.5])
def test_a_device_this_build_cannot_use_is_refused_with_a_tokensel_error(device):
    for build in (
        lambda: ts.AttentionModel.init(5, 3, device=device),
        lambda: ts.MultiClassAttentionModel.init(5, 3, 2, device=device),
        lambda: ts.models.variants.make("mlp", 5, 3, device=device),
    ):
        pytest.raises(TokenselError, build).match("device|CUDA")


def test_rating_classes_refuse_ratings_that_are_not_imdb_ratings():
    batch = ts.RaggedBatch.from_sequences([[0, 1], [1, 2], [2], [0]], [1, 1, -1, -1], vocab_size=3)
    fields = {f.name: None for f in dataclasses.fields(reviews.ReviewData)}
    vocab = ts.data.text.build_vocabulary([["a", "b", "c"]], min_df=1)
    fields.update(name="imdb", train=batch, test=batch, vocab=vocab)
    good = dict(fields, train_ratings=np.array([9, 7, 1, 4]), test_ratings=np.array([10, 8, 2, 3]))
    assert experiments.rating_classes(reviews.ReviewData(**good), "train").labels.tolist() == [3, 2, 0, 1]
    for bad in (
        np.array([11, 7, 1, 4]),
        np.array([9, 7, 0, 4]),
        np.array([9, 5, 1, 4]),
        np.array([9, 7, 8, 4]),
        np.array(["9", "7", "1", "4"]),
        np.array([9.0, 7.0, 1.0, 4.0]),
    ):
        with pytest.raises(ts.TokenselError):
            experiments.rating_classes(reviews.ReviewData(**dict(fields, train_ratings=bad, test_ratings=bad)))


def test_init_keeps_its_last_draw_and_hands_out_copies():
    # a second model from the same seed is the same draw, in its own tensors; other arguments draw afresh
    attention._LAST_DRAW.clear()
    a = ts.AttentionModel.init(13, 6, seed=4)
    b = ts.AttentionModel.init(13, 6, seed=4)
    assert all(torch.equal(x, y) for x, y in ((a.E, b.E), (a.p, b.p), (a.v, b.v)))
    b.E.add_(1.0)
    b.p.zero_()
    c = ts.AttentionModel.init(13, 6, seed=4, dtype=torch.float32)
    assert torch.equal(c.E, a.E.float()) and torch.equal(c.p, a.p.float())  # the draw itself untouched
    assert not torch.equal(ts.AttentionModel.init(13, 6, seed=5).E, a.E)
    assert torch.equal(ts.AttentionModel.init(13, 6, seed=4, p_init="zero").p, torch.zeros(6, dtype=torch.float64))
    attention._LAST_DRAW.clear()  # drawn again from the generator: the same values
    g = ts.seeding.generator(4)
    E = torch.randn(13, 6, generator=g, dtype=torch.float64) / 6**0.5
    assert torch.equal(ts.AttentionModel.init(13, 6, seed=4).E, E) and torch.equal(a.E, E)
