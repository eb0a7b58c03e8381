"""tokensel_book.plots: the figure types the chapters share."""

import matplotlib

matplotlib.use("Agg")

import numpy as np
import pytest
import torch  # noqa: E402

import tokensel as ts  # noqa: E402
import tokensel_book as tb  # noqa: E402


def test_shape_bins_has_a_row_per_model_and_two_panels_per_row():
    gap = torch.linspace(-1, 1, 300, dtype=torch.float64)
    bp, bv, _, _ = ts.shapes.shape_summary(gap, gap.abs(), gap)
    fig, axes = tb.plots.shape_bins({"a": (bp, bv), "b": (bp, bv), "c": (bp, bv)})
    assert axes.shape == (3, 2)  # at most two panels per row: legible on a narrow screen
    assert [ax.get_title(loc="left") for ax in axes[:, 0]] == ["a", "b", "c"]
    assert "p" in axes[0, 0].get_ylabel() and "v" in axes[0, 1].get_ylabel()
    assert not axes[0, 0].get_xlabel() and axes[2, 0].get_xlabel()  # x labels on the last row only
    assert len(axes[2, 1].lines) == 1 and len(axes[2, 1].collections) == 1  # the mean and its band
    one, axes1 = tb.plots.shape_bins({"only": (bp, bv)})  # a single model still gets a 1 x 2 grid
    assert axes1.shape == (1, 2)
    matplotlib.pyplot.close("all")


def test_score_value_bands_label_their_axes():
    gap = torch.linspace(-1, 1, 300, dtype=torch.float64)
    bp, bv, _, _ = ts.shapes.shape_summary(gap, gap.abs(), gap)
    fig, (a, b) = tb.plots.subplots(2)
    tb.plots.score_value_bands(a, b, bp, bv, xlabel="x")
    assert a.get_xlabel() == b.get_xlabel() == "x" and "p" in a.get_ylabel() and "v" in b.get_ylabel()
    matplotlib.pyplot.close("all")


def test_value_bins_show_the_noise_of_a_bin_mean():
    gap = torch.linspace(-1, 1, 400, dtype=torch.float64)
    noisy = gap + torch.randn(400, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    bv = ts.shapes.binned(gap, noisy, bins=10)
    fig, axes = tb.plots.value_bins({"a": (bv, bv), "b": (bv, bv)})
    assert axes.shape == (2, 2) and [ax.get_title(loc="left") for ax in axes[:, 0]] == ["a", "b"]
    band = axes[0, 0].collections[0].get_paths()[0].vertices[:, 1]
    se = ts.shapes.standard_errors(bv).to_numpy()
    # the band spans mean ± 2 SE, far narrower than mean ± std
    assert np.ptp(band) < float(bv["mean"].max() - bv["mean"].min()) + 4 * se.max() + 1e-9
    pytest.raises(ValueError, lambda: tb.plots.binned_band(axes[0, 0], bv, spread="iqr")).match("spread")
    matplotlib.pyplot.close("all")


def test_panel_grid_puts_at_most_two_panels_in_a_row():
    fig, axes = tb.plots.panel_grid(4, ylabel="y")
    assert len(axes) == 4 and fig.axes[0].get_gridspec().get_geometry() == (2, 2)
    assert axes[0].get_ylabel() == axes[2].get_ylabel() == "y" and not axes[1].get_ylabel()
    fig3, axes3 = tb.plots.panel_grid(3)
    assert len(axes3) == 3 and sum(ax.get_visible() for ax in fig3.axes) == 3  # the fourth cell hidden
    pytest.raises(ValueError, lambda: tb.plots.panel_grid(0)).match("n")
    matplotlib.pyplot.close("all")


def test_mosaic_places_panels_by_name():
    fig, axd = tb.plots.mosaic([["p", "v"], ["tokens", "tokens"]], height_ratios=[1, 1.5])
    assert set(axd) == {"p", "v", "tokens"}
    w, h = fig.get_size_inches()
    assert w == pytest.approx(6.8) and h == pytest.approx(2.8 * 2.5)
    assert axd["tokens"].get_position().width > 1.8 * axd["p"].get_position().width  # spans both columns
    pytest.raises(ValueError, lambda: tb.plots.mosaic([["a", "b"], ["c"]])).match("layout")
    matplotlib.pyplot.close("all")


def test_label_points_keeps_labels_one_line_apart():
    fig, ax = tb.plots.subplots(1)
    x = np.r_[np.full(6, -1.0), np.full(6, 1.0)]
    y = np.r_[np.full(6, 0.0), np.linspace(0, 0.01, 6)]  # two tight clusters: labels would overprint
    ax.scatter(x, y)
    texts = tb.plots.label_points(ax, x, y, [(i, f"word{i}") for i in range(12)])
    assert len(texts) == 12
    for side in (texts[:6], texts[6:]):
        ys = sorted(t.xyann[1] for t in side)
        assert min(np.diff(ys)) > 0.02  # spread, not stacked
        assert 0 <= ys[0] and ys[-1] <= 1
    assert {t.get_ha() for t in texts} == {"left", "right"}  # each side away from its nearer edge
    assert tb.plots.label_points(ax, x, y, []) == []
    matplotlib.pyplot.close("all")


def test_a_figure_of_several_panels_records_them_in_its_png(tmp_path):
    matplotlib.use("Agg")
    from tokensel_book import plots

    plots.theme()
    fig, (a, b) = plots.subplots(2)
    a.plot([1, 2])
    b.plot([2, 1])
    b.set_ylabel("a long label on the right panel")
    fig.savefig(tmp_path / "two.png", bbox_inches="tight")
    (left, right) = plots.png_panels(tmp_path / "two.png")
    assert left[0] == 0 and left[2] == right[0] and right[2] == 1 and left[1] == 0 and left[3] == 1
    assert 0.4 < left[2] < 0.6
    # the cut lies between the left panel's drawing and the right panel's label
    renderer = fig.canvas.get_renderer()
    assert a.get_tightbbox(renderer).x1 <= left[2] * fig.bbox.width + fig.bbox.x0 + 1
    fig, axd = plots.mosaic([["p", "v"], ["t", "t"]])
    fig.savefig(tmp_path / "mosaic.png")
    boxes = plots.png_panels(tmp_path / "mosaic.png")
    assert len(boxes) == 3 and boxes[2][0] == 0 and boxes[2][2] == 1  # the spanning panel spans the width
    fig, ax = plots.subplots(1)
    fig.savefig(tmp_path / "one.png")
    assert plots.png_panels(tmp_path / "one.png") == []  # one panel: nothing to cut
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2)  # not made by tb.plots: saved as matplotlib saves it
    fig.savefig(tmp_path / "plain.png")
    assert plots.png_panels(tmp_path / "plain.png") == []
    plt.close("all")


def _tick_label_overlaps(ax, renderer) -> list[tuple[str, str]]:
    """The pairs of drawn x tick labels of ``ax`` whose boxes on the canvas overlap."""
    lo, hi = sorted(ax.get_xlim())
    boxes = [
        (t.get_text(), t.get_window_extent(renderer))
        for tick, t in zip(ax.xaxis.get_major_ticks(), ax.get_xticklabels(), strict=True)
        if t.get_visible() and t.get_text() and tick.get_loc() is not None and lo <= tick.get_loc() <= hi
    ]
    return [(a, b) for i, (a, ba) in enumerate(boxes) for b, bb in boxes[i + 1 :] if ba.overlaps(bb)]


def test_panel_grid_tick_labels_do_not_overlap_on_small_values():
    tb.plots.theme()
    # the ranges of chapter 7's four-class panels (alpha_{s,k} of IMDB's rating classes): about 1e-3
    ranges = [(-0.0002, 0.00195), (-0.0025, 0.00005), (-0.0013, 0.0002), (-0.0003, 0.0018)]
    fig, axes = tb.plots.panel_grid(4, sharey=True, ylabel="y")
    for ax, (lo, hi) in zip(axes, ranges, strict=True):
        x = np.linspace(lo, hi, 200)
        ax.scatter(x, 800 * x, s=6)
        ax.set(xlabel=r"$\alpha_{s,k}$")
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    for ax in axes:
        shown = [t for t in ax.get_xticklabels() if t.get_text()]
        assert 2 <= len(ax.get_xticks()) <= tb.plots.MAX_X_TICKS
        assert _tick_label_overlaps(ax, renderer) == [], [t.get_text() for t in shown]
    # the measurement sees overlapping labels where they exist: eight four-decimal labels on a narrow panel
    fig2, ax2 = tb.plots.subplots(1, width=3.4, height=2.8)
    ax2.scatter(np.linspace(-0.0030, 0.0005, 50), np.zeros(50))
    ax2.set_xticks(np.linspace(-0.0030, 0.0005, 8))
    ax2.xaxis.set_major_formatter(matplotlib.ticker.FormatStrFormatter("%.4f"))
    fig2.canvas.draw()
    assert _tick_label_overlaps(ax2, fig2.canvas.get_renderer())
    matplotlib.pyplot.close("all")


def test_the_phase_diagram_stacks_its_panels_in_rows_over_one_colour_bar():
    import pandas as pd

    table = pd.DataFrame({"eta0": [1, 1, 2, 2], "d": [8, 16, 8, 16], "P": [0.1, 0.2, 0.3, 0.4], "n": [9] * 4})
    fig = tb.plots.phase_diagram({"(a) all": table, "(b) trap": table}, "eta0", "d", "P", annot="n")
    heat, bar = fig.axes[:2], fig.axes[2:]
    assert len(bar) == 1 and bar[0].get_xlabel() == "P"  # one colour bar, below the panels
    (x0, y0), (x1, y1) = (ax.get_position().p0 for ax in heat)
    assert abs(x0 - x1) < 1e-9 and y1 < y0  # one panel per row, (a) above (b)
    assert [ax.get_title() for ax in heat] == ["(a) all", "(b) trap"]
    assert heat[0].texts[0].get_text() == "0.20\n(9.00)"  # each cell says its value and its count
    matplotlib.pyplot.close("all")
