"""One theme and the figure types the chapters share, so no chapter copies plotting code.

**Figures on a phone.** A figure of several panels made here (:func:`subplots`, :func:`panel_grid`,
:func:`mosaic` and the figure types built on them) records where each panel lies in the PNG it is saved as:
a text chunk ``tokensel-panels`` with one box ``[left, top, right, bottom]`` per panel, in fractions of the
image, the boxes cut halfway between neighbouring panels (labels and ticks included). The book's HTML
(``tokensel_book.sphinx_figures``) cuts the image into its panels and, on a screen of 640 px or less,
shows them one under the other above the caption instead of the whole figure.
"""

from __future__ import annotations

import json

import numpy as np

from tokensel.errors import InvalidArgumentError

#: colours safe for the common colour-vision deficiencies (Okabe and Ito's palette)
PALETTE = {"positive": "#0072B2", "negative": "#D55E00", "irrelevant": "#999999", "p": "#009E73", "v": "#CC79A7"}
#: a second cue for the token roles, so that no figure relies on colour alone
MARKERS = {"positive": "^", "negative": "v", "irrelevant": "o"}


#: the size of word labels and annotations in figures (points)
ANNOTATION_PT = 9.5


def tick_label_pt() -> float:
    """The size in points of the tick labels under the current theme: the smallest text of every figure."""
    import matplotlib as mpl
    from matplotlib.font_manager import FontProperties

    return min(
        FontProperties(size=mpl.rcParams[k]).get_size_in_points() for k in ("xtick.labelsize", "ytick.labelsize")
    )


def theme() -> None:
    """The book's theme (seaborn's whitegrid style at the notebook context; call once per chapter).

    Introduced in chapter 01."""
    import matplotlib as mpl
    import seaborn as sns

    sns.set_theme(context="notebook", style="whitegrid", font_scale=0.95)
    mpl.rcParams.update(
        {
            "figure.dpi": 110,
            "savefig.dpi": 110,
            "figure.figsize": (6.4, 4.0),
            "axes.titlesize": "medium",
            "figure.autolayout": False,
        }
    )
    _retina()


def _retina() -> None:
    """In a notebook, figures as PNG at twice the pixel density, shown at their normal size (sharp on
    high-density screens and when zoomed)."""
    try:
        from IPython import get_ipython
        from matplotlib_inline.backend_inline import set_matplotlib_formats
    except ImportError:
        return
    if get_ipython() is not None:
        set_matplotlib_formats("retina")


#: the PNG text chunk that holds a figure's panel boxes
PANELS_KEY = "tokensel-panels"


def subplots(ncols: int = 1, nrows: int = 1, width: float = 4.2, height: float = 3.4, **kw):
    """``ncols`` x ``nrows`` panels of ``width`` x ``height`` inches each (matplotlib's ``subplots`` with the
    constrained layout): the figure and its axes, the panels recorded for phones (see the module).

    Introduced in chapter 01."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(nrows, ncols, figsize=(width * ncols, height * nrows), constrained_layout=True, **kw)
    _record_panels(fig)
    return fig, axes


def panel_boxes(fig, renderer=None) -> list[list[float]]:
    """The box ``[left, top, right, bottom]`` (fractions of the figure as drawn, top = 0) of every visible panel
    of ``fig`` placed on a grid, in reading order: the grid's cells cut halfway between the drawn extents
    (labels and ticks included) of neighbouring rows and columns; a panel spanning cells gets their union.
    Empty for a figure of one panel."""
    axes = [ax for ax in fig.axes if ax.get_visible() and ax.get_subplotspec() is not None]
    if len(axes) < 2:
        return []
    renderer = renderer or fig.canvas.get_renderer()
    box = fig.bbox
    spans, extents = [], []
    for ax in axes:
        spec = ax.get_subplotspec()
        nrows, ncols = spec.get_gridspec().get_geometry()
        spans.append((spec.rowspan.start, spec.rowspan.stop, spec.colspan.start, spec.colspan.stop))
        bb = ax.get_tightbbox(renderer)
        extents.append(
            (
                (bb.x0 - box.x0) / box.width,
                1 - (bb.y1 - box.y0) / box.height,
                (bb.x1 - box.x0) / box.width,
                1 - (bb.y0 - box.y0) / box.height,
            )
        )

    def cuts(n, first, last, low, high):
        out = [0.0]
        for k in range(1, n):
            before = [e[high] for s, e in zip(spans, extents, strict=True) if s[last] == k]
            after = [e[low] for s, e in zip(spans, extents, strict=True) if s[first] == k]
            out.append((max(before) + min(after)) / 2 if before and after else k / n)
        return out + [1.0]

    xs = cuts(ncols, 2, 3, 0, 2)
    ys = cuts(nrows, 0, 1, 1, 3)
    order = sorted(range(len(axes)), key=lambda i: (spans[i][0], spans[i][2]))
    return [
        [round(min(max(v, 0.0), 1.0), 5) for v in (xs[spans[i][2]], ys[spans[i][0]], xs[spans[i][3]], ys[spans[i][1]])]
        for i in order
    ]


def _record_panels(fig) -> None:
    """Mark ``fig`` so that its PNG carries its panel boxes (:data:`PANELS_KEY`)."""
    fig._tokensel_panels = True
    _install_png_metadata()


def _install_png_metadata() -> None:
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    if getattr(FigureCanvasAgg.print_png, "_tokensel", False):
        return
    original = FigureCanvasAgg.print_png

    def print_png(self, filename_or_obj, *, metadata=None, pil_kwargs=None, **ignored):
        # matplotlib passes a print method outside its own modules the options of other renderers too (dpi,
        # facecolor, edgecolor, orientation, bbox_inches_restore): the Agg method takes none of them
        if getattr(self.figure, "_tokensel_panels", False):
            try:
                boxes = panel_boxes(self.figure, self.get_renderer())
            except Exception:  # noqa: BLE001 - a figure whose panels cannot be placed is saved whole
                boxes = []
            if boxes:
                metadata = {**(metadata or {}), PANELS_KEY: json.dumps(boxes)}
        return original(self, filename_or_obj, metadata=metadata, pil_kwargs=pil_kwargs)

    print_png._tokensel = True  # type: ignore[attr-defined]
    FigureCanvasAgg.print_png = print_png  # type: ignore[method-assign]


def png_panels(path) -> list[list[float]]:
    """The panel boxes a PNG written by a figure of this module records (empty when it records none)."""
    from PIL import Image

    with Image.open(path) as im:
        text = im.info.get(PANELS_KEY) if getattr(im, "info", None) else None
    if not text:
        return []
    try:
        boxes = json.loads(text)
    except ValueError:
        return []
    ok = isinstance(boxes, list) and all(
        isinstance(b, list) and len(b) == 4 and all(isinstance(v, (int, float)) for v in b) for b in boxes
    )
    return boxes if ok else []


def binned_band(ax, table, label: str | None = None, color=None, spread: str = "std"):
    """Per-bin mean with a band (``spread="std"``: mean ± std, the token-to-token spread; ``"se"``: mean ± 2
    standard errors of the bin mean, its noise level; ``"quantiles"``: 10%–90%) from
    :func:`tokensel.analysis.shapes.binned`. Empty bins are left out.

    Introduced in chapter 05."""
    from tokensel.analysis.shapes import standard_errors
    from tokensel.validation import check_choice

    check_choice(spread, "spread", ("std", "se", "quantiles"))
    t = table[table["count"] > 0]
    if spread == "quantiles":
        lo, hi = t["q10"], t["q90"]
    else:
        half = t["std"] if spread == "std" else 2 * standard_errors(t)
        lo, hi = t["mean"] - half, t["mean"] + half
    ax.plot(t["center"], t["mean"], "o-", ms=3.5, color=color, label=label)
    ax.fill_between(t["center"], lo, hi, color=color, alpha=0.2, lw=0)
    return ax


def score_value_bands(ax_p, ax_v, bins_p, bins_v, xlabel: str = r"posterior gap $\Delta_s$", title=None):
    """The paper's two shapes side by side: binned ``E_s^T p`` on ``ax_p`` and ``E_s^T v`` on ``ax_v``
    (tables of :func:`tokensel.analysis.shapes.binned`), each mean ± std against ``xlabel``.

    Introduced in chapter 05."""
    binned_band(ax_p, bins_p, color=PALETTE["p"])
    binned_band(ax_v, bins_v, color=PALETTE["v"])
    ax_p.set(xlabel=xlabel, ylabel=r"$E_s^\top p$")
    ax_v.set(xlabel=xlabel, ylabel=r"$E_s^\top v$")
    if title is not None:
        ax_p.set_title(title)
    return ax_p, ax_v


def mosaic(layout, width: float = 3.4, height: float = 2.8, **kw):
    """Panels placed by name (matplotlib's ``subplot_mosaic``; a name repeated spans cells), each cell
    ``width`` x ``height`` inches: the figure and a dict of its axes. Keep rows to two cells so the figure
    stays legible on a narrow screen.

    Introduced in chapter 06."""
    import matplotlib.pyplot as plt

    if (
        not isinstance(layout, list)
        or not layout
        or not all(isinstance(r, list) and r for r in layout)
        or len({len(r) for r in layout}) != 1
    ):
        raise InvalidArgumentError(
            "layout must be a non-empty list of rows of equal length, each a list of "
            "panel names, e.g. [['p', 'v'], ['tokens', 'tokens']]"
        )
    rows = kw.pop("height_ratios", None)
    total = sum(rows) if rows else len(layout)
    fig, axd = plt.subplot_mosaic(
        layout, figsize=(width * len(layout[0]), height * total), constrained_layout=True, height_ratios=rows, **kw
    )
    _record_panels(fig)
    return fig, axd


#: the most x ticks a panel of :func:`panel_grid` shows
MAX_X_TICKS = 5


def _compact_x_ticks(ax, max_ticks: int = MAX_X_TICKS):
    """At most ``max_ticks`` x ticks on ``ax`` at round values, their labels short: values below 0.01 or from
    1000 up in magnitude are written as multiples of a power of ten, shown once at the end of the axis
    (``×10⁻³``). A later ``set_xscale`` or ``set_xticks`` replaces these ticks."""
    from matplotlib.ticker import MaxNLocator, ScalarFormatter

    ax.xaxis.set_major_locator(MaxNLocator(nbins=max_ticks - 1, steps=[1, 2, 2.5, 5, 10]))
    formatter = ScalarFormatter(useMathText=True)
    formatter.set_powerlimits((-2, 3))
    ax.xaxis.set_major_formatter(formatter)


def panel_grid(n: int, ncols: int = 2, width: float = 3.4, height: float = 2.8, ylabel: str | None = None, **kw):
    """``n`` panels in rows of ``ncols`` (two by default, so a figure stays legible on a narrow screen): the
    figure and a flat array of its first ``n`` axes (unused cells of the last row are hidden); ``ylabel`` goes
    on the first column. Each panel's x axis has at most :data:`MAX_X_TICKS` ticks, and values far from 1 are
    written as multiples of a power of ten shown once at the axis' end, so the tick
    labels of a narrow panel never run into each other.

    Introduced in chapter 02."""
    from tokensel.validation import check_int

    check_int(n, "n", min=1)
    check_int(ncols, "ncols", min=1)
    ncols = min(ncols, n)
    nrows = -(-n // ncols)
    fig, axes = subplots(ncols, nrows, width=width, height=height, squeeze=False, **kw)
    for ax in axes.flat[n:]:
        ax.set_visible(False)
    for ax in axes.flat[:n]:
        _compact_x_ticks(ax)
    if ylabel is not None:
        for ax in axes[:, 0]:
            ax.set_ylabel(ylabel)
    return fig, axes.flat[:n]


def shape_bins(bins: dict, width: float = 3.4, height: float = 2.6):
    """One row per model of ``bins`` (``name -> (bins of E_s^T p, bins of E_s^T v)``): the scores on the
    left, the values on the right, against the posterior gap; x labels on the last row only.

    Introduced in chapter 07."""
    fig, axes = subplots(2, len(bins), width=width, height=height, squeeze=False)
    for i, (name, (bp, bv)) in enumerate(bins.items()):
        score_value_bands(axes[i, 0], axes[i, 1], bp, bv, xlabel=r"$\Delta_s$")
        axes[i, 0].set_title(name, loc="left")
        if i < len(bins) - 1:
            axes[i, 0].set(xlabel="")
            axes[i, 1].set(xlabel="")
    return fig, axes


def value_bins(bins: dict, width: float = 3.4, height: float = 2.6):
    """One row per model of ``bins`` (``name -> (bins of E_s^T v, bins of the token values as the model
    reads them)``): ``E_s^T v`` on the left, the token values on the right, each bin mean ± 2 standard errors
    of the mean, against the posterior gap.

    Introduced in chapter 07."""
    fig, axes = subplots(2, len(bins), width=width, height=height, squeeze=False)
    for i, (name, (bv, bh)) in enumerate(bins.items()):
        binned_band(axes[i, 0], bv, color=PALETTE["v"], spread="se")
        binned_band(axes[i, 1], bh, color=PALETTE["p"], spread="se")
        axes[i, 0].set_title(name, loc="left")
        axes[i, 0].set(ylabel=r"$E_s^\top v$")
        axes[i, 1].set(ylabel="token value")
    axes[-1, 0].set(xlabel=r"$\Delta_s$")
    axes[-1, 1].set(xlabel=r"$\Delta_s$")
    return fig, axes


def token_scatter(ax, x, y, roles=None, labels=None, s: float = 10, alpha: float = 0.6):
    """Scatter of one point per token, coloured by role (+1 positive, -1 negative, 0 irrelevant).

    Introduced in chapter 01."""
    x, y = np.asarray(x), np.asarray(y)
    if roles is None:
        ax.scatter(x, y, s=s, alpha=alpha, color=PALETTE["p"], lw=0)
    else:
        roles = np.asarray(roles)
        for val, name in ((0, "irrelevant"), (1, "positive"), (-1, "negative")):
            m = np.sign(roles) == val
            if m.any():
                ax.scatter(x[m], y[m], s=s, alpha=alpha, color=PALETTE[name], marker=MARKERS[name], lw=0, label=name)
    if labels is not None:
        label_points(ax, x, y, labels)
    return ax


def label_points(ax, x, y, labels, fontsize: float = ANNOTATION_PT):
    """Label points ``(x[i], y[i])`` for ``(i, text)`` in ``labels`` without overprinting: each label goes
    to the side of its point away from the nearer edge, and the labels of a side are spread vertically to
    one line apart, each joined to its point by a thin line. Returns the text artists.

    Introduced in chapter 07."""
    labels = list(labels)
    if not labels:
        return []
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    ax.autoscale_view()
    (x0, x1), (y0, y1) = ax.get_xlim(), ax.get_ylim()
    fx = (x[[i for i, _ in labels]] - x0) / (x1 - x0)
    fy = (y[[i for i, _ in labels]] - y0) / (y1 - y0)
    height_pt = ax.figure.get_size_inches()[1] * 72 * ax.get_position().height
    gap = 1.3 * fontsize / max(height_pt, 1.0)  # one line, as a fraction of the axes' height
    texts = []
    for right in (False, True):
        side = [k for k in range(len(labels)) if (fx[k] > 0.5) == right]
        side.sort(key=lambda k: fy[k])
        placed: list[float] = []
        for k in side:
            placed.append(max(fy[k], placed[-1] + gap) if placed else fy[k])
        overflow = (placed[-1] - 0.97) if placed else 0.0
        if overflow > 0:  # push the column down, keeping the spacing, as far as the bottom allows
            placed = [max(p - overflow, 0.03 + gap * j) for j, p in enumerate(placed)]
        for k, ty in zip(side, placed, strict=True):
            i, text = labels[k]
            tx = fx[k] - 0.06 if right else fx[k] + 0.06
            texts.append(
                ax.annotate(
                    text,
                    (x[i], y[i]),
                    xytext=(tx, ty),
                    textcoords="axes fraction",
                    fontsize=fontsize,
                    ha="right" if right else "left",
                    va="center",
                    arrowprops={"arrowstyle": "-", "lw": 0.5, "color": "0.4"},
                )
            )
    return texts


def convergence(ax, x, y, label: str | None = None, logx: bool = True, logy: bool = True, **kw):
    """A convergence curve on log axes (e.g. ``1 - cos`` against ``t`` or ``||p_t||``).

    Introduced in chapter 02."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    keep = np.isfinite(x) & np.isfinite(y) & ((x > 0) if logx else True) & ((y > 0) if logy else True)
    ax.plot(x[keep], y[keep], label=label, **kw)
    if logx:
        ax.set_xscale("log")
    if logy:
        ax.set_yscale("log")
    return ax


def phase_diagram(
    panels: dict,
    x: str,
    y: str,
    value: str,
    annot: str | None = None,
    xlabel: str | None = None,
    ylabel: str | None = None,
    cbar_label: str | None = None,
    vmin=0.0,
    vmax=1.0,
    cmap: str = "viridis",
    fmt: str = "{:.2f}",
    width: float = 6.4,
    height: float = 3.4,
):
    """Heat maps of ``value`` over the grid ``x`` (columns) by ``y`` (rows) of long DataFrames, one row of the
    figure per ``title: table`` of ``panels`` and one colour bar under them (rows fit a narrow column and a
    phone shows them one by one); cells show ``value`` and, if given, ``annot`` in brackets. Returns the figure.

    Introduced in chapter 04."""
    import seaborn as sns

    fig, axes = subplots(1, len(panels), width=width, height=height)
    for ax, (title, table) in zip(np.atleast_1d(axes), panels.items(), strict=True):
        grid = table.pivot(index=y, columns=x, values=value).sort_index(ascending=False)
        labels = grid.map(fmt.format)
        if annot is not None:
            extra = table.pivot(index=y, columns=x, values=annot).sort_index(ascending=False)
            labels = labels + "\n(" + extra.map(fmt.format) + ")"
        sns.heatmap(
            grid,
            ax=ax,
            vmin=vmin,
            vmax=vmax,
            cmap=cmap,
            annot=labels.values,
            fmt="",
            annot_kws={"fontsize": ANNOTATION_PT},
            xticklabels=[f"{c:g}" for c in grid.columns],
            cbar=False,
        )
        ax.set(title=title, xlabel=xlabel or x, ylabel=ylabel or y)
        ax.tick_params(axis="y", labelrotation=0)
    fig.colorbar(ax.collections[0], ax=axes, location="bottom", shrink=0.6, label=cbar_label or value)
    return fig
