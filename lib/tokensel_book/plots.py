"""One theme and the figure types the chapters share, so no chapter copies plotting code.

A multi-panel figure (:func:`subplots`, :func:`panel_grid`, :func:`mosaic`) records its panels' boxes in the PNG
chunk ``tokensel-panels``, so the HTML (``tokensel_book.sphinx_figures``) can stack them on a phone."""

from __future__ import annotations

import json
import re

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
    """The book's theme (seaborn whitegrid, notebook context; call once per chapter). Introduced in chapter 01."""
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
    """Notebook figures as PNG at twice the pixel density, sharp on high-density screens."""
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
    """``ncols`` x ``nrows`` panels of ``width`` x ``height`` inches: the figure and its axes, panels recorded.
    Introduced in chapter 01."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(nrows, ncols, figsize=(width * ncols, height * nrows), constrained_layout=True, **kw)
    _record_panels(fig)
    return fig, axes


def panel_boxes(fig, renderer=None) -> list[list[float]]:
    """Each visible panel's box ``[left, top, right, bottom]`` (figure fractions, top = 0) in reading order,
    cut halfway between neighbours' drawn extents; empty for one panel."""
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
        # matplotlib passes other renderers' options (dpi, facecolor, ...) that the Agg method does not take
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
    """Per-bin mean with a band (``"std"``, ``"se"``: ±2 standard errors, ``"quantiles"``: 10%–90%) from
    :func:`tokensel.analysis.shapes.binned`. Introduced in chapter 05."""
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
    """Binned ``E_s^T p`` on ``ax_p`` and ``E_s^T v`` on ``ax_v`` (mean ± std) against ``xlabel``.
    Introduced in chapter 05."""
    binned_band(ax_p, bins_p, color=PALETTE["p"])
    binned_band(ax_v, bins_v, color=PALETTE["v"])
    ax_p.set(xlabel=xlabel, ylabel=r"$E_s^\top p$")
    ax_v.set(xlabel=xlabel, ylabel=r"$E_s^\top v$")
    if title is not None:
        ax_p.set_title(title)
    return ax_p, ax_v


def mosaic(layout, width: float = 3.4, height: float = 2.8, **kw):
    """Panels placed by name (``subplot_mosaic``), each cell ``width`` x ``height`` inches: the figure and its axes
    dict. Keep rows to two cells for narrow screens. Introduced in chapter 06."""
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
    """At most ``max_ticks`` round x ticks on ``ax``, small or large values as multiples of a power of ten
    shown once (``×10⁻³``), so narrow panels' labels never collide."""
    from matplotlib.ticker import MaxNLocator, ScalarFormatter

    ax.xaxis.set_major_locator(MaxNLocator(nbins=max_ticks - 1, steps=[1, 2, 2.5, 5, 10]))
    formatter = ScalarFormatter(useMathText=True)
    formatter.set_powerlimits((-2, 3))
    ax.xaxis.set_major_formatter(formatter)


def panel_grid(n: int, ncols: int = 2, width: float = 3.4, height: float = 2.8, ylabel: str | None = None, **kw):
    """``n`` panels in rows of ``ncols`` (two: legible on a phone): the figure and a flat array of its ``n`` axes,
    ``ylabel`` on the first column, x ticks compacted (:data:`MAX_X_TICKS`). Introduced in chapter 02."""
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
    """One row per model of ``bins`` (``name -> (bins of E_s^T p, bins of E_s^T v)``) against the posterior gap.
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
    """One row per model of ``bins`` (``name -> (bins of E_s^T v, bins of token values)``), mean ± 2 standard
    errors against the posterior gap. Introduced in chapter 07."""
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
    """Scatter of one point per token, coloured by role (+1, -1, 0). Introduced in chapter 01."""
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
    """Label points ``(x[i], y[i])`` for ``(i, text)`` in ``labels`` without overprinting (spread per side, joined
    by thin lines); returns the text artists. Introduced in chapter 07."""
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
    """A convergence curve on log axes (e.g. ``1 - cos`` against ``t``). Introduced in chapter 02."""
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
    """Heat maps of ``value`` over ``x`` by ``y``, one figure row per ``title: table`` of ``panels``, one colour
    bar, cells annotated with ``annot`` if given. Returns the figure. Introduced in chapter 04."""
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


# --- figures a reader explores on the HTML page: plotly twins of static figures, shown via explorable() ----------

#: the class of an explorable output's HTML, which the book's pages look for (:mod:`tokensel_book.sphinx_mathjax`)
EXPLORABLE = "tokensel-explorable"


def explorable(static_fig, live_fig) -> None:
    """Show ``static_fig`` (matplotlib) and ``live_fig`` (plotly) as one output under one caption: HTML draws the
    live one, notebooks and the PDF the PNG. Introduced in chapter 02."""
    import base64
    import io

    import matplotlib.pyplot as plt
    from IPython.display import display
    from PIL import Image

    if not hasattr(static_fig, "savefig") or not hasattr(live_fig, "to_json"):
        raise InvalidArgumentError("explorable takes a matplotlib figure and a plotly figure (e.g. of phase_explorer)")
    buf = io.BytesIO()
    static_fig.savefig(buf, format="png", dpi=2 * static_fig.dpi, bbox_inches="tight")  # sharp on dense screens
    plt.close(static_fig)  # shown here, not again by the notebook's backend
    width = Image.open(buf).size[0] // 2
    png = base64.b64encode(buf.getvalue()).decode("ascii")
    figure = live_fig.to_json().replace("</", "<\\/")  # no "</script>" inside the script element
    html = (
        f'<div class="{EXPLORABLE}"><div class="{EXPLORABLE}-static"><img src="data:image/png;base64,{png}" '
        f'alt="{_alt(static_fig)}" style="width: {width}px"></div><div class="{EXPLORABLE}-live"></div>'
        f'<script type="application/json">{figure}</script></div>'
    )
    display({"image/png": png, "text/html": html}, raw=True, metadata={"image/png": {"width": width}})


def _alt(fig) -> str:
    """A PNG's alt text read off its panels (what each plots against what), without TeX: a screen reader's words."""
    import html

    plain = [(re.sub(r"[$\\{}]", "", a.get_ylabel()), re.sub(r"[$\\{}]", "", a.get_xlabel())) for a in fig.axes]
    panels = sorted({f"{y} against {x}" for y, x in plain if y.strip() and x.strip()})
    return html.escape("Plot of " + "; ".join(panels) if panels else "The figure's static image", quote=True)


def _styled(fig, height: int, **layout):
    """``fig`` in the book's style, as wide as the text column at any screen width and ``height`` pixels high."""
    base = {
        "template": "plotly_white",
        "height": height,
        "autosize": True,
        "margin": {"l": 60, "r": 10, "t": 60, "b": 50},
    }
    return fig.update_layout({**base, "title": {"font": {"size": 13}, "x": 0.01, "xanchor": "left"}}, **layout)


def _slider(steps: list[dict], prefix: str) -> list[dict]:
    """A slider over ``steps`` (plotly's ``{"label", "method", "args"}``) under the plot."""
    return [{"steps": steps, "active": 0, "currentvalue": {"prefix": prefix}, "pad": {"t": 50}, "len": 1.0, "x": 0}]


def phase_explorer(panels: dict, x: str = "eta0", y: str = "d"):
    """Explorable phase diagram: a heat map of ``p_full`` per panel of
    :func:`tokensel.experiments.phase.phase_probabilities`, hover shows the Clopper-Pearson 95% interval and counts.
    Introduced in chapter 04."""
    import plotly.graph_objects as go
    from scipy.stats import beta

    if not isinstance(panels, dict) or not panels:
        raise InvalidArgumentError("panels must be a non-empty dict: title -> table of phase_probabilities")
    fig = go.Figure()
    for k, (title, table) in enumerate(panels.items()):
        grid = {c: table.pivot(index=y, columns=x, values=c).sort_index() for c in ("runs", "p_full", "p_trapped")}
        n = grid["runs"].to_numpy(dtype=float)
        sel, trap = np.rint(grid["p_full"].to_numpy() * n), np.rint(grid["p_trapped"].to_numpy() * n)
        with np.errstate(invalid="ignore"):  # the interval of 0 (of n) starts at 0, of n ends at 1: NaN there
            lo = np.nan_to_num(beta.ppf(0.025, sel, n - sel + 1), nan=0.0)
            hi = np.nan_to_num(beta.ppf(0.975, sel + 1, n - sel), nan=1.0)
        fig.add_heatmap(
            x=[f"{v:g}" for v in grid["runs"].columns],
            y=[f"{v:g}" for v in grid["runs"].index],
            z=grid["p_full"].to_numpy(),
            customdata=np.stack([lo, hi, grid["p_trapped"].to_numpy(), sel, trap, n], axis=-1),
            zmin=0,
            zmax=1,
            colorscale="Viridis",
            texttemplate="%{z:.2f}",
            textfont={"size": 10},
            colorbar={"title": {"text": "P(select)", "side": "right"}, "thickness": 12},
            visible=k == 0,
            name=title,
            hovertemplate="d = %{y}, η₀ = %{x}<br>P(select) = %{z:.2f} (95%: %{customdata[0]:.2f} to "
            "%{customdata[1]:.2f})<br>trapped: %{customdata[2]:.2f}<br>%{customdata[3]} selected, "
            "%{customdata[4]} trapped of %{customdata[5]} runs<extra></extra>",
        )
    menu = [
        {"label": t, "method": "restyle", "args": [{"visible": [j == k for j in range(len(panels))]}]}
        for k, t in enumerate(panels)
    ]
    return _styled(
        fig,
        460,
        xaxis={"title": {"text": "first step size η₀"}, "type": "category"},
        yaxis={"title": {"text": "d"}, "type": "category"},
        updatemenus=[{"buttons": menu, "x": 0, "xanchor": "left", "y": 1.03, "yanchor": "bottom"}],
    )


def rate_explorer(runs, rate: float = -0.5, fit=None):
    """Explorable rate sweep: ``err`` against ``d`` on log axes with the fit, and a slider over ``d`` that draws
    ``∝ d^rate`` through that width's mean. Introduced in chapter 02."""
    import plotly.graph_objects as go

    means = runs.groupby("d")["err"].mean()
    dims = means.index.to_numpy(dtype=float)
    steps: list[dict] = []
    for d, mean in means.items():
        chosen = runs[runs["d"] == d]
        data = {
            "x": [chosen["d"].to_numpy(float), dims],
            "y": [chosen["err"].to_numpy(float), mean * (dims / d) ** rate],
        }
        title = f"mean error at d = {d:g}: {mean:.3g}"
        steps.append({"label": f"{d:g}", "method": "update", "args": [data, {"title.text": title}, [1, 2]]})
    (data, title, _) = steps[0]["args"]
    fig = go.Figure()
    fig.add_scatter(x=runs["d"], y=runs["err"], mode="markers", name="runs", marker={"color": PALETTE["v"]})
    ring = {"color": "black", "size": 12, "symbol": "circle-open"}
    fig.add_scatter(x=data["x"][0], y=data["y"][0], mode="markers", name="runs at this d", marker=ring)
    fig.add_scatter(
        x=dims, y=data["y"][1], mode="lines", name=f"∝ d^{rate:g} through them", line={"dash": "dot", "color": "black"}
    )
    if fit is not None:
        slope, intercept = fit
        line = {"color": "black", "width": 1}
        fig.add_scatter(
            x=dims, y=np.exp(intercept) * dims**slope, mode="lines", name=f"fit: slope {slope:.3f}", line=line
        )
    return _styled(
        fig,
        440,
        title={"text": title["title.text"]},
        xaxis={"title": {"text": "embedding dimension d"}, "type": "log"},
        yaxis={"title": {"text": "relative error"}, "type": "log"},
        legend={"x": 1, "xanchor": "right", "y": 1, "bgcolor": "rgba(255, 255, 255, 0.7)"},
        sliders=_slider(steps, "d = "),
    )


def word_explorer(words, alpha, reviews, scores, values, roles=None, marked=()):
    """Every word's ``E_s^T p`` against ``E_s^T v``, coloured by the sign of ``roles``, ``marked`` words labelled;
    hover shows word, ``alpha``, ``reviews``. Introduced in chapter 06."""
    import plotly.graph_objects as go

    words = np.asarray(words, dtype=object)
    alpha, reviews, scores, values = (np.asarray(a, dtype=float) for a in (alpha, reviews, scores, values))
    roles = np.zeros(len(words)) if roles is None else np.sign(np.asarray(roles, dtype=float))
    fig = go.Figure()
    for val, name, symbol in (
        (0, "irrelevant", "circle"),
        (1, "positive", "triangle-up"),
        (-1, "negative", "triangle-down"),
    ):
        m = roles == val
        fig.add_scatter(
            x=values[m],
            y=scores[m],
            text=words[m],
            customdata=np.stack([alpha[m], reviews[m]], axis=-1),
            mode="markers",
            name=name,
            marker={"color": PALETTE[name], "symbol": symbol, "size": 6, "opacity": 0.6},
            hovertemplate="<b>%{text}</b><br>α = %{customdata[0]:.3g}, in %{customdata[1]} reviews<br>"
            "score Eᵀp = %{y:.3g}, value Eᵀv = %{x:.3g}<extra></extra>",
        )
    marked = list(marked)
    if marked:
        fig.add_scatter(
            x=values[marked],
            y=scores[marked],
            text=words[marked],
            mode="text",
            textposition="top center",
            textfont={"size": 10},
            hoverinfo="skip",
            showlegend=False,
        )
    return _styled(
        fig,
        520,
        xaxis={"title": {"text": "value E_sᵀv"}},
        yaxis={"title": {"text": "score E_sᵀp"}},
        legend={"orientation": "h", "x": 0, "y": 1.02, "yanchor": "bottom"},
    )


def trajectory_explorer(table, columns: dict, time: str = "t", log_y=()):
    """A run's ``columns`` of ``table`` against log ``time``, one panel each (``log_y`` on log scale);
    a slider marks the run's position. Introduced in chapter 03."""
    from plotly.subplots import make_subplots

    if not isinstance(columns, dict) or not columns:
        raise InvalidArgumentError("columns must be a non-empty dict: label -> column of the table")
    table = table[table[time] > 0]
    t = table[time].to_numpy(float)
    ys = {label: table[col].to_numpy(float) for label, col in columns.items()}
    fig = make_subplots(rows=len(columns), cols=1, shared_xaxes=True, vertical_spacing=0.06)
    for r, (label, y) in enumerate(ys.items(), 1):
        fig.add_scatter(x=t, y=y, mode="lines", name=label, row=r, col=1, line={"color": PALETTE["p"]})
        fig.update_yaxes(title_text=label, type="log" if columns[label] in log_y else "linear", row=r, col=1)
    for r, y in enumerate(ys.values(), 1):
        fig.add_scatter(x=t[:1], y=y[:1], mode="markers", row=r, col=1, marker={"color": "black", "size": 10})
    fig.update_xaxes(type="log", title_text=time, row=len(columns), col=1)
    marks = list(range(len(ys), 2 * len(ys)))
    steps: list[dict] = []
    for k, tk in enumerate(t):
        title = f"{time} = {tk:.3g}: " + ", ".join(f"{label} = {y[k]:.4g}" for label, y in ys.items())
        data = {"x": [[tk]] * len(ys), "y": [[y[k]] for y in ys.values()]}
        steps.append({"label": f"{tk:.2g}", "method": "update", "args": [data, {"title.text": title}, marks]})
    return _styled(
        fig,
        200 + 200 * len(ys),
        showlegend=False,
        title={"text": steps[0]["args"][1]["title.text"]},
        sliders=_slider(steps, f"{time} = "),
    )
