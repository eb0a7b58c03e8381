"""Chapter 6's recipes on real reviews: the v-trained model, the one step over eta0, the ablation table, the
recorded sweep, p's implicit bias with v trained, the bag-of-words baseline and the token statistics they use."""

import numpy as np
import pandas as pd
import pytest
import torch

import tokensel as ts
from tokensel import experiments as ex
from tokensel.errors import DataUnavailableError, InvalidArgumentError, InvalidParameterError
from tokensel.experiments.baseline import _fit


@pytest.fixture(scope="module")
def polar():
    """Labelled texts in which 'great'/'awful' carry the label, 'good'/'poor' lean to it, the rest is filler."""
    rng = np.random.default_rng(0)
    filler = ["the", "a", "film", "story", "was", "and", "we", "it", "then", "acting", "plot", "so"]
    texts, labels = [], []
    for i in range(160):
        y = i % 2
        words = list(rng.choice(filler, 8))
        words += ["great" if y else "awful"] if rng.random() < 0.7 else []
        words += [("good" if y else "poor") if rng.random() < 0.7 else ("poor" if y else "good")]
        rng.shuffle(words)
        texts.append(" ".join(words))
        labels.append(y)
    return ts.prepare_texts(texts, labels, min_df=2, seed=0)


@pytest.fixture(scope="module")
def clean():
    """Every text holds 'great' (label 1) or 'awful' (label 0) among filler words of no polarity."""
    rng = np.random.default_rng(1)
    texts = []
    for i in range(200):
        words = list(rng.choice([f"w{k}" for k in range(30)], 5)) + ["great" if i % 2 else "awful"]
        rng.shuffle(words)
        texts.append(" ".join(words))
    return ts.prepare_texts(texts, [i % 2 for i in range(200)], min_df=2, seed=0)


SHORT = ts.TrainSettings(steps=30, lr=0.05, eval_every=10)


def test_train_all_trains_v_from_the_same_start(polar):
    full_v, hist = ex.train_all(polar, SHORT, d=16)
    fixed_v, _ = ex.train_full(polar, SHORT, d=16)
    init = ts.AttentionModel.init(len(polar.vocab), 16, seed=0)
    assert not torch.equal(full_v.v, init.v) and torch.equal(fixed_v.v, init.v)
    assert not torch.equal(full_v.E, init.E) and hist.loss.iloc[-1] < hist.loss.iloc[0]


def test_one_step_shifts_is_the_step_at_each_eta0(polar):
    table = ex.one_step_shifts(polar, multiples=(1.0, 4.0), d=64, seed=2)
    assert list(table.multiple) == [0.0, 1.0, 4.0] and table.moved.iloc[0] == 0.0
    assert table.values_vs_initial.iloc[0] == 1.0 and table.scores_vs_initial.iloc[0] == 1.0
    assert table.moved.is_monotonic_increasing
    # the step is linear in eta0: the table's values match a direct step at 4 x one_step_eta
    m0 = ts.AttentionModel.init(len(polar.vocab), 64, seed=2)
    m1 = ts.one_step(m0, polar.train, 4.0 * ex.one_step_eta(polar))
    gap = ts.statistics.posterior_gap(polar.train)
    direct = ts.shapes.spreads(gap, m1.E @ m0.p, m1.E @ m0.v)
    assert table.values_raw.iloc[2] == pytest.approx(direct["values_raw"], rel=1e-9)
    assert table.scores_raw.iloc[2] == pytest.approx(direct["scores_raw"], rel=1e-9)
    # at initialisation E_s^T v ~ N(0, 1/d): the within-bin spread is of order 1/sqrt(d)
    assert 0.3 / 8 < table.values_raw.iloc[0] < 3 / 8


def test_one_step_sweep_records_and_reads_back(polar, tmp_path):
    seen = []
    table = ex.one_step_sweep(polar, multiples=(1.0, 8.0), settings=SHORT, d=16, progress=seen.append)
    assert len(seen) == 3 and table.run.iloc[0] == "full training" and np.isnan(table.multiple.iloc[0])
    assert table.ratio_values_raw.iloc[0] == 1.0
    assert table.ratio_scores_raw.iloc[2] == pytest.approx(table.scores_raw.iloc[2] / table.scores_raw.iloc[0])
    # the first ablation is train_one_step_then_freeze at the default eta0, same seed
    abl, hist = ex.train_one_step_then_freeze(polar, SHORT, d=16)
    assert table.test_acc.iloc[1] == pytest.approx(hist.test_acc.iloc[-1])
    settings = dict(seed=0, d=16, steps=30, lr=0.05, precision="float64")
    ex.write_sweep(seen, tmp_path / "sweep", command="test", **settings)
    back, prov = ex.read_sweep(tmp_path / "sweep")
    assert prov == {"command": "test", **settings}
    pd.testing.assert_series_equal(back.ratio_values_raw, table.ratio_values_raw, check_exact=False)
    # a provenance that does not say how the runs were made is refused, naming what is wrong
    for wrong, match in (
        (dict(settings, precision=None), "precision"),
        (dict(settings, precision="float16"), "float16"),
        (dict(settings, d=16.0), "d = 16.0"),
        (dict(settings, seed=True), "seed"),
        ({k: v for k, v in settings.items() if k != "lr"}, r"lacks \['lr'\]"),
    ):
        ex.write_sweep(seen, tmp_path / "wrong", **wrong)
        pytest.raises(DataUnavailableError, lambda: ex.read_sweep(tmp_path / "wrong")).match(match)
    (tmp_path / "wrong" / "provenance.json").write_text("[1, 2]")
    pytest.raises(DataUnavailableError, lambda: ex.read_sweep(tmp_path / "wrong")).match("not a JSON object")
    pytest.raises(DataUnavailableError, lambda: ex.read_sweep(tmp_path / "nothing")).match("one_step_sweep.py")
    ex.write_sweep(table.iloc[1:], tmp_path / "headless", **settings)
    pytest.raises(DataUnavailableError, lambda: ex.read_sweep(tmp_path / "headless")).match("full model")


def test_binary_recipes_train_in_the_dtype_asked_from_the_same_start(polar):
    full, hist = ex.train_all(polar, SHORT, d=16, dtype=torch.float32)
    double, hist64 = ex.train_all(polar, SHORT, d=16)
    assert full.E.dtype == full.p.dtype == full.v.dtype == torch.float32 and double.E.dtype == torch.float64
    # the float32 model starts from the float64 initialisation, rounded: the same run up to rounding
    assert hist.loss.iloc[0] == pytest.approx(hist64.loss.iloc[0], rel=1e-5)
    for recipe in (ex.train_full, ex.train_frozen, ex.train_one_step_then_freeze):
        model, _ = recipe(polar, SHORT, d=16, dtype=torch.float32)
        assert model.E.dtype == torch.float32, recipe.__name__
    table = ex.one_step_sweep(polar, multiples=(1.0,), settings=SHORT, d=16, dtype=torch.float32)
    assert table.test_acc.iloc[0] == hist.test_acc.iloc[-1]
    # a reference trained in another dtype than the sweep's is refused before anything trains
    with pytest.raises(InvalidParameterError, match="dtype=torch.float32"):
        ex.one_step_sweep(polar, multiples=(1.0,), settings=SHORT, d=16, reference=(full, hist))
    with pytest.raises(InvalidParameterError, match="reference must be"):
        ex.one_step_sweep(polar, multiples=(1.0,), settings=SHORT, d=16, reference=full)


def test_ablation_table_ratios_to_the_reference(polar):
    runs = {"full": ex.train_all(polar, SHORT, d=16), "frozen": ex.train_frozen(polar, SHORT, d=16)}
    table = ex.ablation_table(ts.statistics.posterior_gap(polar.train), runs, reference="full")
    assert (table.loc["full", [c for c in table.columns if c.endswith("/ ref")]] == 1.0).all()
    frozen = runs["frozen"][0]
    gap = ts.statistics.posterior_gap(polar.train)
    raw = ts.shapes.within_bin_spread(gap, frozen.values(), normalize=False)
    assert table.loc["frozen", "values_raw"] == pytest.approx(raw)
    assert table.loc["frozen", "norm_v"] == pytest.approx(float(frozen.v.norm()))
    pytest.raises(InvalidParameterError, lambda: ex.ablation_table(gap, runs, reference="other")).match("reference")
    bare = {"full": runs["full"][0]}
    pytest.raises(InvalidParameterError, lambda: ex.ablation_table(gap, bare, reference="full")).match("pair")


def test_train_p_v_moves_v_only_when_asked(small):
    data, model = small
    start = ts.one_step(model, data.batch, 4.0)
    fixed, trained = start.copy(), start.copy()
    tf = ts.train_p_v(fixed, data.batch, lr=0.1, steps=40, train_v=False).to_frame()
    tt = ts.train_p_v(trained, data.batch, lr=0.1, steps=40).to_frame()
    assert torch.equal(fixed.v, start.v) and not torch.equal(trained.v, start.v)
    assert torch.equal(fixed.E, start.E) and torch.equal(trained.E, start.E)
    # normalised steps: the parameters moved by at most lr per step
    moved = torch.sqrt((trained.p - start.p).square().sum() + (trained.v - start.v).square().sum())
    assert float(moved) <= 40 * 0.1 + 1e-9 and float((fixed.p - start.p).norm()) <= 40 * 0.1 + 1e-9
    assert tf.loss.iloc[-1] < tf.loss.iloc[0] and tt.loss.iloc[-1] < tt.loss.iloc[0]
    assert {"norm_v", "train_acc"} <= set(tt.columns) and tf.norm_v.iloc[-1] == pytest.approx(1.0)


def test_implicit_bias_with_v_compares_two_runs(clean):
    out = ex.implicit_bias_with_v(clean, n=60, max_len=6, d=64, steps=300, lr=0.5, seed=1)
    assert isinstance(out, ex.ImplicitBias) and list(out.table.index) == ["v fixed", "v trained"]
    assert out.n == 60 and out.tokens <= len(clean.vocab) and out.d == 64
    assert out.table.loc["v fixed", "norm_v"] == pytest.approx(1.0)
    assert out.table.loc["v trained", "norm_v"] != pytest.approx(1.0)
    assert (out.table.cos_pmm.abs() <= 1 + 1e-9).all() and 0.0 <= out.same_selection <= 1.0
    # on these data both runs select the polar word and p lines up with the max-margin direction
    assert (out.table.train_acc == 1.0).all() and out.same_selection == 1.0
    assert (out.table.cos_pmm > 0.9).all() and out.cos_between > 0.9
    pytest.raises(InvalidParameterError, lambda: ex.implicit_bias_with_v(clean, n=10**6)).match("n")


def test_logistic_baseline_on_polar_words(polar):
    base = ex.logistic_baseline(polar, C_grid=(0.1, 1.0), seed=0)
    assert isinstance(base, ex.Baseline) and base.C in (0.1, 1.0) and set(base.validation) == {0.1, 1.0}
    assert base.test_acc >= 0.7 and base.train_acc >= base.test_acc - 0.2
    w = dict(zip(polar.vocab.words, base.w, strict=True))
    assert w["great"] > 0 > w["awful"] and abs(w["great"]) > abs(w["the"])
    s = base.summary()
    assert s["test_loss"] == base.test_loss and s["C"] == base.C


def test_logistic_baseline_fit_is_the_regularised_optimum():
    rng = np.random.default_rng(1)
    X = (rng.random((50, 6)) < 0.4).astype(float)
    y = np.where(X[:, 0] + rng.normal(0, 0.5, 50) > 0.4, 1.0, -1.0)
    from scipy import sparse

    w, b = _fit(sparse.csr_matrix(X), y, C=0.5, max_iter=500)
    sig = 1 / (1 + np.exp(y * (X @ w + b)))
    grad_w = -(X.T @ (y * sig)) + w / 0.5
    grad_b = -np.sum(y * sig)
    assert np.abs(grad_w).max() < 1e-4 and abs(grad_b) < 1e-4


def test_bow_features(small):
    batch = ts.RaggedBatch.from_sequences([[0, 2, 2], [1]], [1, -1], vocab_size=3)
    assert ex.bow_features(batch).toarray().tolist() == [[1, 0, 1], [0, 1, 0]]
    assert ex.bow_features(batch, "count").toarray().tolist() == [[1, 0, 2], [0, 1, 0]]


def test_attention_share():
    batch = ts.RaggedBatch.from_sequences([[0, 1], [0, 2, 2]], [1, -1], vocab_size=3)
    mask = torch.tensor([True, False, False])
    mass, share = ts.statistics.attention_share(batch, torch.zeros(3, dtype=torch.float64), mask)
    assert mass == pytest.approx((1 / 2 + 1 / 3) / 2) and share == pytest.approx(mass)  # uniform attention
    mass, _ = ts.statistics.attention_share(batch, torch.tensor([-50.0, 0.0, 0.0], dtype=torch.float64), mask)
    assert mass < 1e-20


def test_alpha_gap_reversals_and_side_with_gap():
    # tokens: 0 frequent weak, 1 frequent weak (tiny alpha), 2 rare strong, 3 rare strong (larger alpha), 4 mid
    alpha = torch.tensor([0.05, 0.001, 0.01, -0.02, 0.3], dtype=torch.float64)
    gap = torch.tensor([0.05, -0.02, 1.0, -0.8, 0.3], dtype=torch.float64)
    frequent = torch.tensor([True, True, False, False, False])
    out = ts.statistics.alpha_gap_reversals(alpha, gap, frequent, weak=0.1, strong=0.5)
    assert out["frequent_weak"].tolist() == [0, 1] and out["rare_strong"].tolist() == [2, 3]
    assert out["reversed"].tolist() == [[0, 2], [0, 3]] and out["share_reversed"] == 0.5
    scores = torch.tensor([0.0, 9.0, 1.0, -1.0, 0.0])
    assert ts.statistics.side_with_gap(out["reversed"], scores) == 0.5
    with pytest.raises(InvalidArgumentError, match="both groups"):
        ts.statistics.alpha_gap_reversals(alpha, gap, torch.zeros(5, dtype=torch.bool))
    with pytest.raises(InvalidArgumentError, match="pairs"):
        ts.statistics.side_with_gap(torch.zeros((0, 2), dtype=torch.long), scores)
    with pytest.raises(InvalidArgumentError, match="one value per token"):
        ts.statistics.side_with_gap(out["reversed"], scores[:2])


def test_spreads_raw_and_normalised():
    rng = np.random.default_rng(0)
    gap = torch.from_numpy(rng.uniform(-1, 1, 400))
    x = 3.0 * torch.from_numpy(rng.normal(size=400))
    out = ts.shapes.spreads(gap, 2 * x, x)
    assert out["values_raw"] == pytest.approx(ts.shapes.within_bin_spread(gap, x, normalize=False))
    assert out["scores_raw"] == pytest.approx(2 * out["values_raw"])
    assert out["scores_normalised"] == pytest.approx(out["values_normalised"])
    assert 0.8 < out["values_normalised"] < 1.05  # noise: the bins explain nothing


def test_review_examples(data_dir):
    d = ts.reviews.prepare_reviews("imdb", min_df=2, data_dir=data_dir)
    shown = d.examples(per_class=1, min_len=3, max_len=5)
    labels = d.test.labels[shown].tolist()
    assert labels == [1, -1] and all(3 <= len(d.test_words[i]) <= 5 for i in shown)
    assert d.examples(per_class=2, min_len=100, max_len=200) == []
    pytest.raises(InvalidArgumentError, lambda: d.examples(min_len=5, max_len=4)).match("max_len")


def test_word_table():
    words = ("a", "b", "c")
    t = ex.word_table(words, torch.tensor([2, 0]), {"gap": torch.tensor([0.1, 0.2, 0.3]), "rank": [3, 2, 1]})
    assert list(t.index) == ["c", "a"] and t["gap"].tolist() == pytest.approx([0.3, 0.1])
    assert t["rank"].tolist() == [1, 3]
    pytest.raises(InvalidParameterError, lambda: ex.word_table(words, [5], {})).match("ids")
    pytest.raises(InvalidParameterError, lambda: ex.word_table(words, [0], {"x": [1, 2]})).match("one value per word")


def test_implicit_bias_on_a_batch():
    data = ts.synthetic.assumption1_pairs(40, 2, 10, length=(3, 6), seed=0)
    out = ex.implicit_bias_with_v(data.batch, d=32, steps=200, seed=0)
    assert out.n == data.batch.n and out.tokens == data.batch.vocab_size
