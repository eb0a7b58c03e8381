"""tokensel.experiments: the named recipes, the scales, the variant comparison and its stored runs."""

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

import tokensel as ts
from tokensel import experiments as ex
from tokensel.errors import DataUnavailableError, InvalidParameterError


def test_recipes_run_and_differ(data_dir):
    d = ts.reviews.prepare_reviews("imdb", min_df=2, data_dir=data_dir)
    full, h_full = ex.train_full(d, settings=ts.TrainSettings(steps=20, lr=0.05, eval_every=10), d=8)
    frozen, h_frozen = ex.train_frozen(d, settings=ts.TrainSettings(steps=20, lr=0.05, eval_every=10), d=8)
    one, h_one = ex.train_one_step_then_freeze(d, settings=ts.TrainSettings(steps=20, lr=0.05, eval_every=10), d=8)
    assert h_full.loss.iloc[-1] < h_full.loss.iloc[0]
    init = ts.AttentionModel.init(len(d.vocab), 8, seed=0)
    assert torch.equal(frozen.E, init.E) and not torch.equal(full.E, init.E)
    assert not torch.equal(frozen.v, init.v) and torch.equal(full.v, init.v)  # v trained only in ablations
    assert ex.one_step_eta(d) > 0 and list(h_one.columns) == list(h_full.columns)


def test_rating_classes_and_one_step(data_dir):
    d = ts.reviews.prepare_reviews("imdb", min_df=2, data_dir=data_dir)
    four = ex.rating_classes(d)
    assert four.num_classes == 4 and four.labels.tolist() == [3, 2, 3, 0, 0, 1]  # ratings 9 8 10 1 2 3
    step = ex.one_step_multiclass(four, d=512)
    assert step.dW.shape == (len(d.vocab), 4)
    # lemma: the class-k value moves by eta0 * alpha_{s,k} (p = 0, orthonormal V), up to O(1/sqrt(d))
    assert float((step.dW - step.eta0 * step.alpha).norm() / (step.eta0 * step.alpha).norm()) < 0.2
    yelp = ts.reviews.prepare_reviews("yelp_polarity", min_df=2, data_dir=data_dir)
    pytest.raises(DataUnavailableError, lambda: ex.rating_classes(yelp)).match("ratings")


def test_scale_and_batches(data_dir):
    sc = ex.scale("reduced", n_train=4, n_test=3, max_len=2)
    assert sc.d == 64 and ex.SCALES["reduced"].n_train == 3000  # the table itself is not changed
    pytest.raises(InvalidParameterError, lambda: ex.scale("huge")).match("scale")
    pytest.raises(InvalidParameterError, lambda: ex.scale("reduced", width=3)).match("unknown Scale setting")
    d = ts.reviews.prepare_reviews("imdb", min_df=2, data_dir=data_dir)
    train, test = ex.variant_batches(d, sc)
    assert train.n == 4 and test.n == 3 and int(train.lengths.max()) <= 2
    again = ex.variant_batches(d, sc)[0]
    assert torch.equal(train.ids, again.ids)  # seeded


def test_compare_variants_and_stored_runs(data_dir, tmp_path):
    d = ts.reviews.prepare_reviews("imdb", min_df=2, data_dir=data_dir)
    sc = ex.scale("reduced", d=8, steps=4, eval_every=2, n_train=None, n_test=None)
    runs = ex.compare_variants(d, sc, kinds=["one_layer", "mlp"], progress=False)
    assert list(runs) == ["one layer", "MLP head"]
    table = ex.verdicts(runs)
    assert list(table.index) == ["one layer", "MLP head"] and table["U-shape holds (>= 1)"].dtype == bool
    for run in runs.values():
        ex.write_run(run, tmp_path, steps=sc.train.steps)
    summary, bins = ex.read_runs(tmp_path)
    assert list(summary.index) == ["one layer", "MLP head"] and (summary.steps == 4).all()
    for name, run in runs.items():
        assert summary.loc[name, "u_gap"] == pytest.approx(run.u_gap, nan_ok=True)
        pd.testing.assert_series_equal(bins[name][1]["mean"], run.bins_v["mean"], check_names=False)
    fields = ex.summaries(runs)  # what claims read: plain fields keyed by the model kind
    assert list(fields.index) == ["one_layer", "mlp"]
    for kind, name in (("one_layer", "one layer"), ("mlp", "MLP head")):
        assert fields.u_gap[kind] == pytest.approx(runs[name].u_gap, nan_ok=True)
        assert table.loc[name, "Spearman of E_s v bins"] == pytest.approx(fields.spearman_v[kind], nan_ok=True)
    noise = ex.value_noise(runs)
    assert list(noise.index) == ["one layer", "MLP head"]
    # the one-layer model reads E_s v itself; the MLP head reads head(E_s)
    assert noise.loc["one layer", "E_s v: Spearman"] == noise.loc["one layer", "token value: Spearman"]
    assert runs["MLP head"].bins_h["mean"].ne(runs["MLP head"].bins_v["mean"]).any()
    pytest.raises(InvalidParameterError, lambda: ex.value_noise({"x": 1})).match("Run")


def test_bin_noise_is_keyed_by_kind_and_value_noise_shows_it():
    gap = torch.linspace(-1, 1, 400, dtype=torch.float64)
    wiggle = 0.05 * torch.sin(torch.arange(400, dtype=torch.float64) * 12.9898)
    rising = ts.shapes.binned(gap, gap + wiggle)
    falling = ts.shapes.binned(gap, -gap + wiggle)
    first = ex.Run("one_layer", None, None, rising, rising, 0.0, 1.0, 0.0, 400, bins_h=rising)
    runs = {"first": first, "second": ex.Run("mlp", None, None, rising, falling, 0.0, -1.0, 0.0, 400, bins_h=rising)}
    fields = ex.bin_noise(runs)
    assert list(fields.index) == ["one_layer", "mlp"]
    assert fields.values_rho["one_layer"] == 1.0 and fields.values_rho["mlp"] == -1.0
    assert fields.values_rise["one_layer"] > 2 > -2 > fields.values_rise["mlp"]
    assert fields.values_rise["mlp"] == ts.shapes.positive_side_rise(falling)
    assert fields.token_values_rise["mlp"] == fields.values_rise["one_layer"]
    assert fields.values_reversals["mlp"] > 0 == fields.values_reversals["one_layer"]
    shown = ex.value_noise(runs)
    assert list(shown.index) == ["one layer", "MLP head"]  # display names, for reading only
    assert shown.loc["MLP head", "E_s v: rise for Delta > 0 (SE)"] == fields.values_rise["mlp"]
    assert shown.loc["one layer", "E_s v: reversals > 2 SE"] == "0 of 19"
    pytest.raises(InvalidParameterError, lambda: ex.bin_noise({"a": runs["first"], "b": runs["first"]})).match("kind")
    pytest.raises(InvalidParameterError, lambda: ex.bin_noise({})).match("non-empty")


def test_read_runs_errors(tmp_path):
    gap = torch.linspace(-0.9, 0.9, 200, dtype=torch.float64)
    bp, bv, u, rho = ts.shapes.shape_summary(gap, gap.abs(), gap)
    bp.assign(mean_v=bv["mean"], std_v=bv["std"]).to_csv(tmp_path / "bins_two_layer.csv", index=False)
    (tmp_path / "summary_two_layer.json").write_text(json.dumps({"test_acc": 0.5, "u_gap": u}))
    pytest.raises(DataUnavailableError, lambda: ex.read_runs(tmp_path)).match("lacks")
    (tmp_path / "summary_two_layer.json").write_text("{not json")
    pytest.raises(DataUnavailableError, lambda: ex.read_runs(tmp_path)).match("cannot be read")
    pytest.raises(FileNotFoundError, lambda: ex.read_runs(tmp_path / "absent")).match("no recorded runs")
    empty = tmp_path / "empty"
    empty.mkdir()
    pytest.raises(FileNotFoundError, lambda: ex.read_runs(empty)).match("summary_<kind>.json")


def test_recorded_paper_scale_runs_are_readable():
    summary, bins = ex.read_runs(Path(__file__).parents[3] / "book" / "recorded" / "variants_paper_scale")
    assert list(summary.index) == [ex.MODEL_NAMES[k] for k in ("one_layer", *ts.models.variants.COMPARED)]
    assert np.isfinite(summary[["u_gap", "spearman_v", "test_acc"]].to_numpy()).all()
    # chapter 07's paragraphs under the recorded table describe these files: keep them true if the files change
    attention_only = ["one layer", "two layers", "two layers + W_KQ"]
    assert (summary.u_gap >= 1).all()
    assert (summary.loc[attention_only, "spearman_v"] >= 0.9).all()
    assert (summary.loc[attention_only, "spread_v"] >= 5).all()
    assert summary.loc["MLP head", "spearman_v"] < 0.9 and summary.loc["MLP head", "spread_v"] < 1.5
    assert 0.02 < bins["MLP head"][1]["std"].median() < 0.027  # the initial spread, 1/sqrt(2048)
    assert summary.test_loss.idxmax() == "MLP head" and summary.loc["MLP head", "train_acc"] == 1.0


def test_multiclass_training_runs_through_the_one_loop(data_dir):
    d = ts.reviews.prepare_reviews("imdb", min_df=2, data_dir=data_dir)
    model, hist = ex.train_multiclass(d, settings=ts.TrainSettings(steps=30, lr=0.05, eval_every=10), d=8)
    assert isinstance(model, ts.MultiClassAttentionModel) and hist.loss.iloc[-1] < hist.loss.iloc[0]
    assert list(hist.step) == [0, 10, 20, 30] and 0 <= hist.test_acc.iloc[-1] <= 1
    assert hist.train_acc.iloc[-1] == pytest.approx(model.accuracy(ex.rating_classes(d, "train")))
    init = ts.MultiClassAttentionModel.init(len(d.vocab), 8, 4, seed=0, dtype=torch.float32)
    assert model.E.dtype == torch.float32 and torch.equal(model.V, init.V)  # the class read-outs stay fixed
    trained, _ = ex.train_multiclass(d, settings=ts.TrainSettings(steps=3, lr=0.05), d=8, train_v=True)
    assert not torch.equal(trained.V, init.V)  # ... unless train_v


def test_fit_texts_on_own_texts_shows_the_selection():
    rng = np.random.default_rng(0)
    filler = ["the", "a", "place", "food", "was", "and", "we", "it", "ok", "then"]
    texts, labels = [], []
    for i in range(120):
        words = list(rng.choice(filler, 6)) + ["great" if i % 2 else "awful"]
        rng.shuffle(words)
        texts.append(" ".join(words))
        labels.append("yes" if i % 2 else "no")
    settings = ts.TrainSettings(steps=60, lr=0.05, eval_every=20)
    fit = ts.fit_texts(texts, labels, positive="yes", d=32, min_df=2, settings=settings)
    assert isinstance(fit, ex.Fit) and fit.data.test.n == 24
    table = fit.selection()
    # the model selects the word that carries the label in every test document
    assert set(table["selected"]) == {"great", "awful"} and table["agrees"].all()
    s = fit.summary()
    assert s["selection_agrees"] == 1.0 and s["test_acc"] == 1.0
    bins_p, bins_v, u_gap, rho = fit.shapes
    assert u_gap == s["u_gap"]
    # the prepared data go into the other recipes too, not only IMDB/Yelp shapes
    model, hist = ex.train_frozen(fit.data, settings=ts.TrainSettings(steps=5, eval_every=5), d=16)
    assert len(hist) == 2
    pytest.raises(DataUnavailableError, lambda: ex.rating_classes(fit.data)).match("star ratings")
    with pytest.raises(InvalidParameterError, match="already a ReviewData"):
        ts.fit_texts(fit.data, labels, settings=ts.TrainSettings(steps=200))
    with pytest.raises(InvalidParameterError, match=r"n_train = 3000 documents but own data holds 96"):
        ex.variant_batches(fit.data, ex.scale("reduced"))
    train, test = ex.variant_batches(fit.data, ex.scale("reduced", n_train=None, n_test=None, max_len=4))
    assert train.n == 96 and int(train.lengths.max()) <= 4
