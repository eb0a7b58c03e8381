"""tokensel.experiments.controls: error bars and controls of chapter 7's shapes, on synthetic models whose
scores and values are set by hand (so the expected shapes are known) and on the tiny review data set."""

import numpy as np
import pytest
import torch

import tokensel as ts
from tokensel import experiments as ex
from tokensel.errors import InvalidParameterError
from tokensel.experiments import controls


def _gap(n=400, seed=0):
    return torch.from_numpy(np.random.default_rng(seed).uniform(-1, 1, n))


def _run_with(gap, d=8, kind="one_layer"):
    """A Run whose one-layer model has scores |gap| and values gap (U-shaped and monotone by construction)."""
    model = ts.AttentionModel.init(len(gap), d, seed=0)
    p, v = torch.zeros(d, dtype=torch.float64), torch.zeros(d, dtype=torch.float64)
    p[0], v[1] = 1.0, 1.0
    E = torch.zeros(len(gap), d, dtype=torch.float64)
    E[:, 0], E[:, 1] = gap.abs(), gap
    model = ts.AttentionModel(E, p, v)
    bp, bv, u, rho = ts.shapes.shape_summary(gap, model.scores(), model.values())
    return ex.Run(kind, model, None, bp, bv, u, rho, 0.0, len(gap), bins_h=bv)


def test_shape_controls_see_a_shape_the_words_carry_and_one_their_frequency_carries():
    gap = _gap()
    runs = {"set by hand": _run_with(gap)}
    rng = np.random.default_rng(1)
    unrelated = rng.integers(1, 100, len(gap)).astype(float)  # frequency unrelated to the gap
    table = controls.shape_controls(gap, runs, unrelated, n_boot=30, seed=0)
    assert list(table.index) == ["one_layer"]  # keyed by the model kind, not by the display name
    row = table.loc["one_layer"]
    assert row.u_low > 1 and row.rho_low > 0.95 and row.u_low <= row.u_gap <= row.u_high
    assert abs(row.rho_freq_matched) < 0.6 and row.u_freq_matched < 0.5  # the permutation destroys both
    # a frequency that determines the gap: the matched control keeps the shapes (what it exists to detect)
    tied = gap.numpy().copy()
    table = controls.shape_controls(gap, runs, tied, n_boot=30, seed=0)
    assert table.rho_freq_matched["one_layer"] > 0.9
    # the token values read the same tables here (one-layer model)
    same = controls.shape_controls(gap, runs, unrelated, n_boot=30, seed=0, reading="token_values")
    assert same.rho["one_layer"] == pytest.approx(row.rho)


def test_shape_controls_refuse_what_they_cannot_measure():
    gap = _gap(50)
    with pytest.raises(InvalidParameterError, match="Run"):
        controls.shape_controls(gap, {"x": 1}, np.ones(50), n_boot=10)
    with pytest.raises(InvalidParameterError, match="counts"):
        controls.shape_controls(gap, {"x": _run_with(gap)}, np.ones(49), n_boot=10)
    with pytest.raises(InvalidParameterError, match="kind"):
        controls.shape_controls(gap, {"x": _run_with(gap), "y": _run_with(gap)}, np.ones(50), n_boot=10)


def _four_classes(n=600, vocab=40, seed=0):
    """Reviews of four classes whose words each lean to one class: word s occurs with class s % 4 more often."""
    g = np.random.default_rng(seed)
    labels = g.integers(0, 4, n)
    seqs = []
    for y in labels:
        favoured = [s for s in range(vocab) if s % 4 == y]
        seqs.append(np.concatenate([g.choice(favoured, 3), g.integers(0, vocab, 3)]))
    return ts.RaggedBatch.from_sequences(seqs, torch.from_numpy(labels), vocab_size=vocab, num_classes=4)


def test_class_shapes_and_controls_on_values_set_by_hand():
    batch = _four_classes()
    gap = ts.statistics.class_gap(batch)
    model = ts.MultiClassAttentionModel.init(batch.vocab_size, 8, 4, seed=0)
    E = gap @ model.V.T  # values E V = gap exactly (orthonormal columns)
    model = ts.MultiClassAttentionModel(E, model.p, model.V)
    cs = controls.class_shapes(model, batch, bins=10)
    assert len(cs.bins) == 4 and min(cs.rho) > 0.95
    unrelated = np.random.default_rng(2).integers(1, 50, batch.vocab_size).astype(float)
    table = controls.class_controls(model, cs, unrelated, n_boot=20, strata=4, bins=10, seed=0)
    assert list(table.columns) == ["rho", "rho_low", "rho_high", "rho_freq_matched"] and len(table) == 4
    assert (table.rho_low > 0.8).all() and (table.rho_freq_matched < table.rho).all()


def test_shuffled_control_measures_against_the_true_gaps(data_dir):
    d = ts.reviews.prepare_reviews("imdb", min_df=2, data_dir=data_dir)
    sc = ex.scale("reduced", d=8, steps=4, eval_every=2, n_train=None, n_test=None)
    table = controls.shuffled_control(d, sc, ["one_layer", "mlp_output"], seed=1)
    assert list(table.index) == ["one_layer", "mlp_output"]
    assert list(table.columns) == ["test_acc", "u_gap", "rho", "rho_token_values"]
    assert table.notna().all().all()
    # the one-layer model reads E_s v itself
    assert table.rho["one_layer"] == table.rho_token_values["one_layer"]


def test_mirror_twin_trains_the_same_embeddings_with_opposite_values(data_dir):
    d = ts.reviews.prepare_reviews("imdb", min_df=2, data_dir=data_dir)
    twin = controls.mirror_twin(d, ex.scale("reduced", d=8), n_train=6, steps=3)
    assert twin == {"E_diff": 0.0, "f_diff": 0.0, "values_sum": 0.0}
