"""Token statistics and the synthetic generators."""

import numpy as np
import pandas as pd
import pytest
import torch

import tokensel as ts
from tokensel.errors import InvalidBatchError


def test_alpha_both_normalisations():
    b = ts.RaggedBatch.from_sequences([[0, 0, 1], [1, 2]], [1, -1], vocab_size=4)
    expected = torch.tensor([2 / 3 / 2, (1 / 3 - 1 / 2) / 2, -1 / 4, 0.0], dtype=torch.float64)
    assert torch.allclose(ts.statistics.alpha(b), expected)
    assert ts.statistics.alpha(b, "count").tolist() == [2.0, 0.0, -1.0, 0.0]


def test_alpha_equals_freq_times_gap_for_equal_lengths():
    b = ts.synthetic.independent_tokens(200, 30, length=12, delta=0.7, seed=2).batch
    pos, neg = ts.statistics.counts(b)
    freq = (pos + neg) / b.num_tokens
    gap = torch.nan_to_num(ts.statistics.posterior_gap(b))
    assert torch.allclose(ts.statistics.alpha(b), freq * gap, atol=1e-15)


def test_posterior_gap_per_document():
    b = ts.RaggedBatch.from_sequences([[0, 0, 0], [0, 1]], [1, -1], vocab_size=3)
    occ = ts.statistics.posterior_gap(b, "occurrence")
    doc = ts.statistics.posterior_gap(b, "document")
    assert occ[0] == pytest.approx(0.5) and doc[0] == pytest.approx(0.0)
    assert doc[1] == -1 and torch.isnan(doc[2]) and torch.isnan(occ[2])


def test_assumption1_pairs_make_irrelevant_alpha_exactly_zero():
    d = ts.synthetic.assumption1_pairs(300, 4, 25, length=(4, 10), seed=7)
    cls = ts.statistics.token_classes(d.batch)
    a = ts.statistics.alpha(d.batch)
    irr = torch.from_numpy(d.planted == 0)
    assert a[irr].abs().max() < 1e-15
    assert torch.equal(cls["completely_positive"], torch.from_numpy(d.planted == 1))
    assert torch.equal(cls["completely_negative"], torch.from_numpy(d.planted == -1))


def test_iid_irrelevant_has_noisy_alpha():
    d = ts.synthetic.iid_irrelevant(400, 3, 20, length=8, seed=1)
    a = ts.statistics.alpha(d.batch)
    irr = torch.from_numpy(d.planted == 0)
    assert a[irr].abs().max() > 1e-4


def test_independent_tokens_knob():
    d = ts.synthetic.independent_tokens(4000, 20, length=20, delta=1.0, frac_irrelevant=0.5, seed=0)
    gap = ts.statistics.posterior_gap(d.batch).numpy()
    assert np.corrcoef(gap, d.planted_gap)[0, 1] > 0.98
    cls = ts.statistics.token_classes(d.batch)
    assert bool(cls["completely_positive"][np.argmax(d.planted)])
    d0 = ts.synthetic.independent_tokens(4000, 20, length=20, delta=0.0, seed=0)
    assert np.abs(ts.statistics.posterior_gap(d0.batch).numpy()).max() < 0.1


def test_bad_generator_arguments():
    pytest.raises(InvalidBatchError, lambda: ts.synthetic.assumption1_pairs(3, 2, 3, length=(5, 3))).match("empty")
    pytest.raises(InvalidBatchError, lambda: ts.synthetic.iid_irrelevant(5, 2, 3)).match("even")


def test_selection_and_optimal_tokens():
    b = ts.RaggedBatch.from_sequences([[0, 1, 2], [2, 3]], [1, -1], vocab_size=4)
    c = torch.tensor([1.0, 3.0, 3.0, 0.0], dtype=torch.float64)
    assert ts.statistics.selection(b, c).tolist() == [False, True, True, True, False]
    w = torch.tensor([2.0, 0.0, -1.0, 5.0], dtype=torch.float64)
    assert ts.statistics.optimal_tokens(b, w).tolist() == [True, False, False, True, False]
    q = torch.tensor([0.2, 0.3, 0.5, 0.9, 0.1], dtype=torch.float64)
    mask = ts.statistics.selection(b, c)
    assert torch.allclose(ts.statistics.selected_mass(b, q, mask), torch.tensor([0.8, 0.9], dtype=torch.float64))
    assert ts.statistics.contains(b, mask, torch.tensor([False, True, False, False])).tolist() == [True, True]
    assert ts.statistics.contains(b, mask, torch.tensor([True, False, False, False])).tolist() == [False, True]


def test_binned():
    t = ts.shapes.binned(np.array([-1, -0.9, 0.0, 1.0, np.nan]), np.array([1.0, 3.0, 5.0, 7.0, 9.0]), bins=4)
    assert t["count"].tolist() == [2, 0, 1, 1]
    assert t["mean"][0] == 2.0 and np.isnan(t["mean"][1])
    pytest.raises(ValueError, lambda: ts.shapes.binned(np.zeros(3), np.zeros(4))).match("same shape")


def test_alpha_multiclass_and_generator():
    d = ts.synthetic.independent_tokens_multiclass(400, 24, 4, length=10, delta=0.9, seed=0)
    b = d.batch
    a = ts.statistics.alpha_multiclass(b)
    assert a.shape == (24, 4)
    assert a.sum(1).abs().max() <= 1e-15  # sum over k of (1{y=k} - 1/K) = 0
    rel = d.planted >= 0
    assert np.all(a.numpy()[rel].argmax(1) == d.planted[rel])  # the home class has the largest alpha
    # K = 2 with labels y in {0, 1}: alpha_{s,1} equals half the binary alpha with labels 2y - 1
    two = ts.RaggedBatch(b.ids, b.offsets, (b.labels >= 2).long(), 24, num_classes=2)
    binary = ts.RaggedBatch(b.ids, b.offsets, (b.labels >= 2).double() * 2 - 1, 24)
    assert torch.allclose(ts.statistics.alpha_multiclass(two)[:, 1], ts.statistics.alpha(binary) / 2, atol=1e-15)
    with pytest.raises(InvalidBatchError, match="multiple of num_classes"):
        ts.synthetic.independent_tokens_multiclass(10, 24, 4)


def test_separation():
    b = ts.RaggedBatch.from_sequences([[0, 1, 2], [2, 3], [0]], [1, -1, 1], vocab_size=4)
    x = torch.tensor([5.0, 1.0, 2.0, 4.0], dtype=torch.float64)
    mask = torch.tensor([True, False, False, True])
    assert ts.statistics.separation(b, x, mask).tolist() == [3.0, 2.0, float("inf")]
    assert ts.statistics.separation(b, x, ~mask).tolist()[2] == float("-inf")


def test_loss_floor_is_a_lower_bound_and_is_approached():
    data = ts.synthetic.assumption1_pairs(30, 2, 8, length=5, seed=0)
    m = ts.one_step(ts.AttentionModel.init(data.batch.vocab_size, 32, seed=0), data.batch, 80.0)
    floor = ts.statistics.loss_floor(data.batch, m.values())
    assert m.loss(data.batch) > floor
    best = ts.statistics.optimal_tokens(data.batch, m.values())
    svm = ts.max_margin_for_selection(m.E, data.batch, best)
    m.p.copy_(svm.p * 60)  # score gaps >= 60 put all attention on the best-valued tokens
    assert abs(m.loss(data.batch) - floor) < 1e-12


def test_shape_summary_detects_u_and_monotone():
    x = torch.linspace(-1, 1, 201, dtype=torch.float64)
    _, _, u_clean, rho = ts.shapes.shape_summary(x, 5 * x**2, x)
    assert u_clean > 1 and rho == pytest.approx(1.0)
    _, _, u, rho = ts.shapes.shape_summary(x, -5 * x**2, -x)
    assert u < 0 and rho == pytest.approx(-1.0)
    # a token without a gap (NaN) is ignored, also in the score spread, however large its score
    x_nan = torch.cat([x, torch.tensor([float("nan")], dtype=torch.float64)])
    s = torch.cat([5 * x**2, torch.tensor([1e9], dtype=torch.float64)])
    assert ts.shapes.shape_summary(x_nan, s, x_nan)[2] == pytest.approx(u_clean, rel=1e-12)
    two = torch.tensor([1.0, 2.0])
    pytest.raises(ValueError, lambda: ts.shapes.shape_summary(torch.tensor([0.5, 0.6]), two, two)).match("too few")


def test_values_spread_separates_moved_values_from_noise():
    g = torch.Generator().manual_seed(0)
    gap = torch.rand(4000, generator=g, dtype=torch.float64) * 2 - 1
    noise = torch.randn(4000, generator=g, dtype=torch.float64) * 0.1
    _, moved, _, _ = ts.shapes.shape_summary(gap, gap.abs(), 3 * gap + noise)
    _, flat, _, _ = ts.shapes.shape_summary(gap, gap.abs(), noise)
    # bins of width 0.1: the moved values span 3 * 1.9 = 5.7, within-bin std sqrt(0.1^2 + (3 * 0.1)^2 / 12) = 0.132
    assert ts.shapes.values_spread(moved) == pytest.approx(5.7 / 0.132, rel=0.05)
    assert ts.shapes.values_spread(flat) < 1.5  # the range of 20 noisy means of ~200 tokens
    pytest.raises(ValueError, lambda: ts.shapes.values_spread(flat.assign(count=0))).match("too few")
    pytest.raises(ValueError, lambda: ts.shapes.values_spread(flat.assign(std=0.0))).match("zero")


def test_bin_noise_summary_counts_reversals_beyond_the_noise_of_a_bin_mean():
    table = pd.DataFrame(dict(count=[100, 100, 100, 0, 100], mean=[0, 1, 0.5, np.nan, 2], std=[1, 1, 1, np.nan, 1.0]))
    se = ts.shapes.standard_errors(table)
    assert np.allclose(se[[0, 1, 2, 4]], 0.1) and np.isnan(se[3])
    # 1.0 -> 0.5 drops by 0.5 > 2 * sqrt(0.01 + 0.01) = 0.283; with z = 4 (0.566) it is noise
    assert ts.shapes.bin_noise_summary(table) == {"range_se": pytest.approx(20.0), "reversals": 1, "steps": 3}
    assert ts.shapes.bin_noise_summary(table, z=4.0)["reversals"] == 0
    pytest.raises(ValueError, lambda: ts.shapes.bin_noise_summary(table.assign(std=0.0))).match("zero")


def test_positive_side_rise_is_the_slope_over_the_positive_bins_in_standard_errors():
    from scipy.stats import linregress

    rng = np.random.default_rng(0)
    gap = rng.uniform(-1, 1, 4000)
    noise = rng.normal(0, 1, 4000)
    rising = ts.shapes.binned(gap, np.maximum(gap, 0) + noise)  # flat below 0, rising above
    # the same number from the tokens, each placed at its bin's centre
    edges = np.linspace(gap.min(), gap.max(), 21)
    centre = ((edges[:-1] + edges[1:]) / 2)[np.clip(np.searchsorted(edges, gap, side="right") - 1, 0, 19)]
    keep = centre > 0
    fit = linregress(centre[keep], (np.maximum(gap, 0) + noise)[keep])
    assert ts.shapes.positive_side_rise(rising) == pytest.approx(fit.slope / fit.stderr, rel=1e-9)
    assert ts.shapes.positive_side_rise(rising) > 10
    # only the positive side counts: a fall below 0 with a flat positive side is no rise, a fall above 0 is negative
    assert abs(ts.shapes.positive_side_rise(ts.shapes.binned(gap, np.minimum(gap, 0) + noise))) < 3
    assert ts.shapes.positive_side_rise(ts.shapes.binned(gap, -np.maximum(gap, 0) + noise)) < -10
    with pytest.raises(ValueError, match="positive side"):
        ts.shapes.positive_side_rise(ts.shapes.binned(np.linspace(-1, 0, 50), np.zeros(50)))
    with pytest.raises(ValueError, match="exactly on a line"):
        ts.shapes.positive_side_rise(ts.shapes.binned(np.linspace(0.1, 1, 50), np.zeros(50), bins=5))


def test_class_gap_is_one_vs_rest_per_occurrence():
    b = ts.RaggedBatch.from_sequences([[0, 1], [1, 2], [2, 2]], [0, 1, 2], vocab_size=4, num_classes=3)
    g = ts.statistics.class_gap(b)
    assert g[0].tolist() == [1.0, -1.0, -1.0] and g[1].tolist() == [0.0, 0.0, -1.0]
    assert torch.allclose(g[2], torch.tensor([-1.0, -1 / 3, 1 / 3], dtype=torch.float64))
    assert torch.isnan(g[3]).all()
    binary = ts.RaggedBatch.from_sequences([[0, 1], [1, 2]], [0, 1], vocab_size=3, num_classes=2)
    plain = ts.RaggedBatch.from_sequences([[0, 1], [1, 2]], [-1, 1], vocab_size=3)
    assert torch.equal(ts.statistics.class_gap(binary)[:, 1], ts.statistics.posterior_gap(plain))


def test_within_bin_spread_is_scale_free_and_in_raw_units_is_not():
    gap = torch.linspace(-1, 1, 400, dtype=torch.float64)
    noise = torch.sin(torch.arange(400, dtype=torch.float64) * 12.9898)
    x = gap + 0.1 * noise
    s = ts.shapes.within_bin_spread(gap, x)
    assert s == pytest.approx(ts.shapes.within_bin_spread(gap, 1000 * x))  # the scale does not count
    assert s < ts.shapes.within_bin_spread(gap, gap + 1.0 * noise) < 1.2
    raw = ts.shapes.within_bin_spread(gap, 3 * x, normalize=False)
    assert raw == pytest.approx(3 * ts.shapes.within_bin_spread(gap, x, normalize=False))
    pytest.raises(ValueError, lambda: ts.shapes.within_bin_spread(gap, torch.ones(400))).match("does not vary")


def test_direction_rate_recovers_one_over_ln_t():
    # p_t = p* ln t + r with r orthogonal and fixed: the distance of the directions is ~ |r| / (|p*| ln t)
    t = np.logspace(4, 80, 60)
    a, r = 2.0, 0.7
    cos = a * np.log(t) / np.sqrt((a * np.log(t)) ** 2 + r**2)
    slope, _ = ts.statistics.direction_rate(t, cos, t_min=1e6)
    assert abs(slope + 1) < 0.01
    pytest.raises(ts.InvalidParameterError, lambda: ts.statistics.direction_rate(t[:2], cos[:2], t_min=1e6))


def _u_and_monotone(n=2000, seed=0, noise=0.3):
    rng = np.random.default_rng(seed)
    gap = rng.uniform(-1, 1, n)
    return gap, 3 * gap**2 + noise * rng.normal(size=n), gap + noise * rng.normal(size=n)


def test_bootstrap_estimate_is_shape_summary_and_its_interval_covers_it():
    gap, s, v = _u_and_monotone()
    ci = ts.shapes.shape_bootstrap(gap, s, v, n_boot=100, seed=1)
    _, _, u, rho = ts.shapes.shape_summary(gap, s, v)
    assert ci.estimate["u_gap"] == pytest.approx(u, rel=1e-12)
    assert ci.estimate["rho"] == pytest.approx(rho, rel=1e-12)
    assert (ci.low <= ci.estimate).all() and (ci.estimate <= ci.high).all()
    assert ci.low["u_gap"] > 0 and ci.low["rho"] > 0.9
    # reproducible, and a different seed draws other resamples
    assert ci.equals(ts.shapes.shape_bootstrap(gap, s, v, n_boot=100, seed=1))
    assert not ci.equals(ts.shapes.shape_bootstrap(gap, s, v, n_boot=100, seed=2))


def test_bootstrap_interval_of_a_flat_shape_covers_zero():
    rng = np.random.default_rng(3)
    gap = rng.uniform(-1, 1, 2000)
    ci = ts.shapes.shape_bootstrap(gap, rng.normal(size=2000), rng.normal(size=2000), n_boot=100)
    assert ci.low["rho"] < 0 < ci.high["rho"]
    assert ci.low["u_gap"] < 0


def test_frequency_matched_permutes_within_strata_only():
    rng = np.random.default_rng(0)
    counts = np.repeat([1.0, 10.0, 100.0, 1000.0], 50)
    gap = rng.uniform(-1, 1, 200)
    out = ts.shapes.frequency_matched(gap, counts, strata=4, seed=0)
    for c in np.unique(counts):
        same = counts == c
        assert sorted(out[same]) == sorted(gap[same])  # a stratum keeps its own gaps
    assert not np.array_equal(out, gap)
    with_nan = gap.copy()
    with_nan[7] = np.nan  # a token without a gap keeps it, the others are permuted
    out_nan = ts.shapes.frequency_matched(with_nan, counts, strata=4, seed=0)
    assert np.isnan(out_nan[7]) and sorted(np.delete(out_nan, 7)) == sorted(np.delete(with_nan, 7))
    # a shape carried by frequency alone survives the control; one carried by the gap does not
    freq_shape = np.log(counts)
    gap_f = -np.log(counts) / 7 + 0.01 * rng.normal(size=200)
    matched = ts.shapes.frequency_matched(gap_f, counts, strata=4, seed=1)
    assert ts.shapes.shape_summary(matched, freq_shape, freq_shape)[3] < -0.5
    _, _, _, rho_g = ts.shapes.shape_summary(out, gap, gap)
    assert abs(rho_g) < 0.6


def test_bad_arguments_are_named():
    E = ts.errors.TokenselError
    pytest.raises(E, lambda: ts.shapes.shape_bootstrap([0.1, 0.2], [1.0], [1.0])).match("one entry per token")
    pytest.raises(E, lambda: ts.shapes.frequency_matched([0.1, 0.2], [1.0])).match("one entry per token")
    pytest.raises(E, lambda: ts.shapes.frequency_matched([0.1, 0.2], [1.0, np.nan])).match("counts")


def test_shuffled_labels_keep_the_balance_and_the_texts():
    texts = [f"good film number {i}" if i % 2 else f"bad film number {i}" for i in range(60)]
    data = ts.prepare_texts(texts, [i % 2 for i in range(60)], min_df=1, test_fraction=0.25)
    shuffled = ts.reviews.shuffled_labels(data, seed=0)
    assert torch.equal(shuffled.train.ids, data.train.ids) and torch.equal(shuffled.test.labels, data.test.labels)
    assert float(shuffled.train.labels.sum()) == float(data.train.labels.sum())
    assert not torch.equal(shuffled.train.labels, data.train.labels)
    assert "shuffled" in shuffled.name
