"""tokensel_book.sphinx_figures: a PNG that records its panels is cut into them (the browser test of
tests/tokensel_book/test_layout.py builds a tiny book and measures how the panels are shown)."""

import matplotlib

matplotlib.use("Agg")

from PIL import Image

from tokensel_book import plots
from tokensel_book.sphinx_figures import cut_panels


def test_the_panels_are_cut_at_the_recorded_boxes_with_the_resolution(tmp_path):
    plots.theme()
    fig, axes = plots.panel_grid(3)
    for ax in axes:
        ax.plot([1, 2])
    path = tmp_path / "fig.png"
    fig.savefig(path, dpi=220)
    boxes = plots.png_panels(path)
    panels = cut_panels(path, boxes)
    assert [p.name for p, _ in panels] == ["fig.panel1.png", "fig.panel2.png", "fig.panel3.png"]
    with Image.open(path) as whole:
        w, h = whole.size
    for (panel, fraction), (x0, y0, x1, y1) in zip(panels, boxes, strict=True):
        with Image.open(panel) as im:
            assert abs(im.size[0] - (x1 - x0) * w) <= 1 and abs(im.size[1] - (y1 - y0) * h) <= 1
            assert round(im.info["dpi"][0]) == 220
        assert fraction == x1 - x0
    stamp = panels[0][0].stat().st_mtime_ns
    cut_panels(path, boxes)  # kept when newer than the figure
    assert panels[0][0].stat().st_mtime_ns == stamp
