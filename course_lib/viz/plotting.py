"""Figures for the course, in one consistent style.

Every figure has an opaque white background so it stays readable when the site is in dark
mode. Each function returns the ``matplotlib.figure.Figure``, already closed, so a notebook
cell that ends with the call shows it exactly once (and ``glue`` can store it).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import contextmanager

import matplotlib
import matplotlib.pyplot as plt
import numpy as np

__all__ = [
    "STYLE",
    "COLORS",
    "course_style",
    "new_figure",
    "finish_figure",
    "attention_heatmap",
    "loss_curve",
    "positional_heatmap",
    "bar_probs",
    "line_plot",
    "line_panels",
    "vector_plot",
    "matrix_panels",
    "NARROW_MIME",
    "narrow_layout",
    "narrow_bundle",
    "legible_on_a_phone",
    "phone_text_px",
    "MIN_NUMBER_GAP_EM",
    "slot_number",
    "fit_slot_numbers",
]

#: A colour-blind-safe cycle (Okabe & Ito), used by every figure in the book.
COLORS = ["#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442", "#000000"]

STYLE = {
    "figure.facecolor": "white",
    "savefig.facecolor": "white",
    "axes.facecolor": "white",
    "axes.edgecolor": "#333333",
    "axes.labelcolor": "#222222",
    "text.color": "#222222",
    "xtick.color": "#333333",
    "ytick.color": "#333333",
    "axes.grid": False,
    "grid.alpha": 0.3,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.prop_cycle": matplotlib.cycler(color=COLORS),
    "font.size": 11,
    "axes.titlesize": 12,
    "figure.dpi": 100,
    "savefig.dpi": 100,
    "image.cmap": "viridis",
}


@contextmanager
def course_style():
    """Context manager applying the course style (use it around your own figures)."""
    with plt.rc_context(STYLE):
        yield


def new_figure(nrows: int = 1, ncols: int = 1, figsize: tuple[float, float] = (5.5, 3.5), **kw):
    """``plt.subplots`` in the course style; returns (fig, ax or axes)."""
    with course_style():
        fig, ax = plt.subplots(nrows, ncols, figsize=figsize, **kw)
    fig.patch.set_alpha(1.0)
    return fig, ax


def finish_figure(fig, *, narrow=None):
    """Lay out and close ``fig`` and return it, so a cell ending with it shows it once.

    narrow: how the site lays the figure's panels out on a narrow (phone) screen, see
    ``narrow_layout``: None chooses, False keeps the wide layout, "transpose" turns the grid's
    columns into rows, (rows, cols) asks for that grid. Or a Figure: the figure's phone layout,
    drawn apart, for a diagram whose boxes are placed for a wide page (drawn again narrower and
    taller, its text at least ``MIN_PHONE_PX`` on a phone: ``phone_text_px``); it is closed
    here too.
    """
    if isinstance(narrow, matplotlib.figure.Figure):
        plt.close(narrow)
    if narrow is not None:
        fig._course_narrow = narrow  # read by narrow_layout (survives the copy it makes)
    fig.tight_layout()
    if not _has_narrow_layout(fig):
        legible_on_a_phone(fig)
    fit_slot_numbers(fig)
    plt.close(fig)  # the returned figure is displayed once, by the notebook
    return fig


#: The least space between two numbers a figure writes side by side (a heat map's cells, the
#: values over bars), in ems of their text: a space in DejaVu Sans is 0.32 em, and "0.120.34"
#: reads as one number (Fig. 14.2, before). tests/book/test_content_fit_browser.py measures it.
MIN_NUMBER_GAP_EM = 0.5


def slot_number(ax, x: float, y: float, value: float, slot: float = 1.0, **kw):
    """Write ``value`` (2 decimals) centred at (x, y) in a slot ``slot`` data units wide (a
    heat map's cell, a bar's place): ``fit_slot_numbers`` keeps neighbours apart. ``kw`` go
    to ``ax.text``. Returns the Text."""
    t = ax.text(x, y, f"{value:.2f}", **{"ha": "center", "va": "center", **kw})
    t._course_slot = slot
    return t


def _short(text: str) -> str:
    """ "0.25" -> ".25", "−0.25" / "-0.25" -> "−.25": the leading zero says nothing in a cell."""
    sign = text[0] if text[:1] in "-−" else ""
    body = text[len(sign) :]
    return sign + body[1:] if body.startswith("0.") else text


def _slot_room(fig, ax, texts, renderer, min_gap_em: float) -> float:
    """The least (slot width - text width - gap) over ``texts`` of ``ax``, in pixels."""
    worst = np.inf
    for t in texts:
        x, half = t.get_position()[0], t._course_slot / 2
        left, right = (ax.transData.transform((x + d, 0))[0] for d in (-half, half))
        em = t.get_fontsize() * fig.dpi / 72
        width = t.get_window_extent(renderer).width
        worst = min(worst, abs(right - left) - width - min_gap_em * em)
    return worst


def fit_slot_numbers(fig, min_gap_em: float = MIN_NUMBER_GAP_EM):
    """Keep the numbers ``slot_number`` wrote at least ``min_gap_em`` apart: where the widest
    with that gap is wider than its slot (the figure's text was scaled up to be legible on a
    phone, the cells were not), every number of that axes drops its leading zero ("0.25" ->
    ".25"); where even that does not fit, their font shrinks until it does (the colour of a
    cell still tells the value; the number is for a closer look). ``finish_figure`` calls it.
    Returns ``fig``."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    renderer = None
    for ax in fig.axes:
        texts = [t for t in ax.texts if getattr(t, "_course_slot", None) and t.get_visible()]
        if not texts:
            continue
        if renderer is None:
            # (a closed figure's canvas cannot render); drawing lays out fixed-aspect axes,
            # a heat map's square cells, which the measurements need
            canvas = fig.canvas if hasattr(fig.canvas, "get_renderer") else FigureCanvasAgg(fig)
            canvas.draw()
            renderer = canvas.get_renderer()
        for t in texts:  # as written (a narrow layout fits its copy again from these)
            if not hasattr(t, "_course_slot_as_written"):
                t._course_slot_as_written = (t.get_text(), t.get_fontsize())
        if _slot_room(fig, ax, texts, renderer, min_gap_em) >= 0:
            continue
        for t in texts:
            t.set_text(_short(t.get_text()))
        for _ in range(20):
            if _slot_room(fig, ax, texts, renderer, min_gap_em) >= 0:
                break
            for t in texts:
                t.set_fontsize(t.get_fontsize() * 0.95)
    return fig


#: A phone's text column (CSS px, on a 390 px wide screen) and the smallest text (CSS px) a
#: figure may show there. A figure is drawn at its width in points and scaled to the column, so
#: an 11-inch heat map's 11 pt labels came out 4.5 px tall on a phone.
PHONE_COLUMN_PX = 350.0
MIN_PHONE_PX = 8.0


def _texts(fig) -> list:
    return [
        t
        for t in fig.findobj(matplotlib.text.Text)
        if t.get_visible() and t.get_text().strip() and t.get_figure() is fig
    ]


def phone_text_px(fig) -> float:
    """The smallest text of ``fig`` (CSS px) when a phone shows it: its size in points times
    the scale from the figure's width to ``PHONE_COLUMN_PX`` (never enlarged past 4/3 px per
    point, the figure's natural size)."""
    texts = _texts(fig)
    if not texts:
        return float("inf")
    width_pt = fig.get_size_inches()[0] * 72
    return min(t.get_fontsize() for t in texts) * min(4 / 3, PHONE_COLUMN_PX / width_pt)


def legible_on_a_phone(fig, min_px: float = MIN_PHONE_PX):
    """Scale every text of ``fig`` up (the same factor for all, so titles stay above labels)
    until its smallest is ``min_px`` CSS px tall on a phone, and lay the figure out again.
    ``finish_figure`` calls it for figures without a phone layout of their own (wide single
    panels: heat maps, long curves). Diagrams (no axis shown) are left alone: their boxes
    are drawn around text of a fixed size. Returns ``fig``."""
    if all(not ax.axison for ax in fig.axes):
        return fig
    factor = min_px / phone_text_px(fig)
    if factor <= 1:
        return fig
    factor *= 1.02  # 2 %: the SVG rounds its scales
    ticks = [
        (axis, axis.get_majorticklabels()[0].get_fontsize())
        for ax in fig.axes
        for axis in (ax.xaxis, ax.yaxis)
        if axis.get_majorticklabels()
    ]
    for t in _texts(fig):
        t.set_fontsize(t.get_fontsize() * factor)
    for axis, size in ticks:  # tick labels made at the next draw follow too
        axis.set_tick_params(which="both", labelsize=size * factor)
    fig.tight_layout()
    return fig


def _has_narrow_layout(fig) -> bool:
    """Whether ``narrow_layout`` would give ``fig`` a phone layout (without making it)."""
    if isinstance(getattr(fig, "_course_narrow", None), matplotlib.figure.Figure):
        return True
    found = _panels(fig)
    if found is None:
        return False
    panels, (rows, cols) = found
    try:
        return _narrow_cells(panels, rows, cols, getattr(fig, "_course_narrow", None)) is not None
    except ValueError:
        return False


def _to_numpy(x) -> np.ndarray:
    if hasattr(x, "detach"):
        x = x.detach().cpu().numpy()
    return np.asarray(x, dtype=float)


def attention_heatmap(
    weights,
    tokens: Sequence[str],
    query_tokens: Sequence[str] | None = None,
    title: str = "Attention weights",
    annotate: bool | None = None,
):
    """Heatmap of one attention matrix.

    weights: (T_q, T_k) array or tensor; rows are queries, columns keys.
    tokens: the T_k key tokens; query_tokens: the T_q query tokens (default: ``tokens``).
    annotate: write each weight in its cell (default: only when T_k <= 12).
    """
    w = _to_numpy(weights)
    if w.ndim != 2:
        raise ValueError(
            f"attention_heatmap: weights must be one (T_q, T_k) matrix; got shape {w.shape}. "
            "Pick one batch element and head, e.g. weights[0, h]."
        )
    query_tokens = list(tokens) if query_tokens is None else list(query_tokens)
    if w.shape != (len(query_tokens), len(tokens)):
        raise ValueError(
            f"attention_heatmap: weights {w.shape} do not match {len(query_tokens)} query "
            f"and {len(tokens)} key tokens."
        )
    annotate = w.shape[1] <= 12 if annotate is None else annotate
    size = max(3.0, 0.45 * w.shape[1] + 1.5)
    fig, ax = new_figure(figsize=(size + 1.0, max(2.5, 0.45 * w.shape[0] + 1.2)))
    im = ax.imshow(w, vmin=0.0, vmax=1.0, cmap="Blues")
    ax.set_xticks(
        range(len(tokens)), [repr(t)[1:-1] for t in tokens], rotation=90 if len(tokens) > 8 else 0
    )
    ax.set_yticks(range(len(query_tokens)), [repr(t)[1:-1] for t in query_tokens])
    ax.set_xlabel("key (attended to)")
    ax.set_ylabel("query (attending)")
    ax.set_title(title)
    if annotate:
        for i in range(w.shape[0]):
            for j in range(w.shape[1]):
                color = "white" if w[i, j] > 0.6 else "#222222"
                slot_number(ax, j, i, w[i, j], color=color, fontsize=9)
    fig.colorbar(im, ax=ax, fraction=0.046, pad=0.04)
    return finish_figure(fig)


def loss_curve(
    history, title: str = "Loss", ylabel: str = "cross-entropy (nats)", logy: bool = False
):
    """Plot one or more loss curves.

    history: a sequence of losses (one per step), or a mapping with an optional ``"step"``
    list and one list per curve (e.g. ``{"step": [...], "train": [...], "val": [...]}``), or
    an object with such a ``as_dict()`` method.
    """
    if hasattr(history, "as_dict"):
        history = history.as_dict()
    if isinstance(history, Mapping):
        curves = {k: v for k, v in history.items() if k != "step"}
        steps = history.get("step")
    else:
        curves, steps = {"loss": list(history)}, None
    if not curves or any(len(v) == 0 for v in curves.values()):
        raise ValueError("loss_curve: history has no losses to plot.")
    fig, ax = new_figure()
    for name, values in curves.items():
        x = steps if steps is not None and len(steps) == len(values) else range(len(values))
        ax.plot(
            list(x), _to_numpy(values), label=name, marker="o" if len(values) <= 30 else None, ms=3
        )
    ax.set_xlabel("step")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    if logy:
        ax.set_yscale("log")
    ax.grid(True)
    if len(curves) > 1:
        ax.legend()
    return finish_figure(fig)


def positional_heatmap(pe, title: str = "Positional encodings"):
    """Heatmap of a positional-encoding table pe: (T, d), positions down, dimensions across."""
    p = _to_numpy(pe)
    if p.ndim != 2:
        raise ValueError(f"positional_heatmap: pe must be (T, d); got shape {p.shape}.")
    fig, ax = new_figure(figsize=(6.5, 4.0))
    im = ax.imshow(p, aspect="auto", cmap="RdBu_r", vmin=-1, vmax=1, interpolation="nearest")
    ax.set_xlabel("dimension i")
    ax.set_ylabel("position p")
    ax.set_title(title)
    fig.colorbar(im, ax=ax)
    return finish_figure(fig)


def bar_probs(
    probs,
    labels: Sequence[str],
    title: str = "Next-token probabilities",
    highlight: int | None = None,
    *,
    ylabel: str = "probability",
    color: str | None = None,
    ax=None,
):
    """Bar chart of a probability vector probs: (V,), with one label per bar, each bar
    annotated with its value.

    highlight: index of a bar to colour differently (e.g. the target token).
    color: the colour of the other bars (default: the course's first colour).
    ax: draw into this Axes and return it (for a panel of a larger figure); by default a new
    figure is drawn and returned, finished.
    """
    p = _to_numpy(probs)
    if p.ndim != 1 or len(p) != len(labels):
        raise ValueError(
            f"bar_probs: probs must be a vector with one entry per label; got shape {p.shape} "
            f"and {len(labels)} labels."
        )
    fig = None
    if ax is None:
        fig, ax = new_figure(figsize=(max(3.5, 0.6 * len(p) + 1.5), 3.2))
    base = COLORS[0] if color is None else color
    colors = [COLORS[1] if i == highlight else base for i in range(len(p))]
    bars = ax.bar(range(len(p)), p, color=colors)
    ax.set_xticks(range(len(p)), list(labels), fontsize=9 if len(p) > 6 else None)
    ax.set_ylim(0, max(1.0, float(p.max()) * 1.1))
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    for b, v in zip(bars, p):
        slot_number(ax, b.get_x() + b.get_width() / 2, v + 0.01, v, va="bottom", fontsize=9)
    return ax if fig is None else finish_figure(fig)


def _set_scale(ax, axis: str, base: int | None) -> None:
    if base is not None:
        (ax.set_xscale if axis == "x" else ax.set_yscale)("log", base=base)


def line_plot(
    curves: Mapping,
    x=None,
    *,
    xlabel: str = "",
    ylabel: str = "",
    title: str | None = None,
    xlog: int | None = None,
    ylog: int | None = None,
    markers=None,
    styles: Mapping | None = None,
    ylim: tuple[float, float] | None = None,
    hline: float | None = None,
    vlines: Sequence[float] = (),
    legend=None,
    ax=None,
    figsize: tuple[float, float] = (6.0, 3.4),
):
    """Line plot of one or more labelled curves: the course's curves against a length, a step,
    an offset or a width.

    curves: mapping label -> y values (a sequence, array or tensor of N values), or label ->
    (x values, y values) for a curve with its own x. Labels starting with "_" stay out of the
    legend (matplotlib's convention).
    x: the N shared x values (default 0, 1, ..., N - 1).
    xlog, ylog: the base (2 or 10) of a logarithmic axis; None for a linear one.
    markers: one marker for every curve ("o") or a sequence with one per curve.
    styles: optional mapping label -> extra ``Axes.plot`` keywords (colour, line width, ...).
    ylim: the y range; hline: y of a thin grey reference line (e.g. 0); vlines: x values of
    dashed grey lines (e.g. the end of a warmup).
    legend: None shows one when there are two or more labelled curves; False never; True or
    a location string ("upper right") always.
    ax: draw into this Axes and return it (for a panel of a larger figure); by default a new
    figure of ``figsize`` is drawn and returned, finished.
    """
    if not curves:
        raise ValueError("line_plot: curves is empty; pass a mapping label -> y values.")
    fig = None
    if ax is None:
        fig, ax = new_figure(figsize=figsize)
    styles = styles or {}
    marks = (
        [markers] * len(curves) if markers is None or isinstance(markers, str) else list(markers)
    )
    if len(marks) != len(curves):
        raise ValueError(
            f"line_plot: {len(marks)} markers for {len(curves)} curves; give one per curve."
        )
    for (label, values), marker in zip(curves.items(), marks):
        if isinstance(values, tuple) and len(values) == 2:
            xs, ys = _to_numpy(values[0]), _to_numpy(values[1])
        else:
            ys = _to_numpy(values)
            xs = np.arange(len(ys)) if x is None else _to_numpy(x)
        if xs.shape != ys.shape:
            raise ValueError(
                f"line_plot: curve {label!r} has {ys.shape} y values for {xs.shape} x values."
            )
        kw = {"marker": marker, "ms": 4} if marker else {}
        kw.update(styles.get(label, {}))
        ax.plot(xs, ys, label=label, **kw)
    _set_scale(ax, "x", xlog)
    _set_scale(ax, "y", ylog)
    if ylim is not None:
        ax.set_ylim(*ylim)
    if hline is not None:
        ax.axhline(hline, color="#999999", lw=0.8)
    for v in vlines:
        ax.axvline(v, color="#999999", lw=0.8, ls="--")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title)
    ax.grid(True, which="both" if (xlog or ylog) else "major")
    labelled = [k for k in curves if not str(k).startswith("_")]
    if legend is None:
        legend = len(labelled) > 1
    if legend:
        ax.legend(loc=legend if isinstance(legend, str) else "best", fontsize=9)
    return ax if fig is None else finish_figure(fig)


def line_panels(
    panels: Sequence[Mapping],
    *,
    nrows: int = 1,
    figsize: tuple[float, float] = (9.0, 3.4),
    sharey=False,
    **common,
):
    """Side-by-side ``line_plot`` panels in one figure.

    panels: one mapping of ``line_plot`` keywords per panel (each with its own ``curves``),
    filled row by row into an nrows-by-(len(panels) / nrows) grid.
    common: keywords shared by every panel (e.g. ``x=``, ``xlabel=``, ``xlog=2``); a panel's
    own keywords win. Returns the finished figure.
    """
    if not panels or len(panels) % nrows:
        raise ValueError(
            f"line_panels: {len(panels)} panels do not fill {nrows} rows; give a multiple of nrows."
        )
    fig, axes = new_figure(
        nrows, len(panels) // nrows, figsize=figsize, sharey=sharey, squeeze=False
    )
    for ax, panel in zip(axes.ravel(), panels):
        line_plot(ax=ax, **{**common, **panel})
    return finish_figure(fig)


def vector_plot(
    vectors: Sequence[tuple],
    *,
    lim=1.4,
    arrows: bool = True,
    points: bool = False,
    faded: Sequence[tuple] = (),
    unit_circle: bool = False,
    title: str | None = None,
    xlabel: str = "",
    ylabel: str = "",
    ax=None,
    figsize: tuple[float, float] = (4.4, 4.2),
):
    """2-D vectors drawn from the origin (arrows) and/or as labelled points.

    vectors: (label, xy, colour) triples; xy is a length-2 sequence, array or tensor and the
    label ("" for none) is written next to its tip.
    lim: half-width of the square view, or its (low, high) limits on both axes.
    arrows / points: draw an arrow from the origin, a dot at the tip, or both.
    faded: (xy, colour) pairs drawn as thin dashed arrows (e.g. the vectors before a map).
    unit_circle: draw the dotted unit circle. ax: draw into this Axes and return it;
    by default a new figure is drawn and returned, finished.
    """
    import matplotlib.patches as mpatches

    fig = None
    if ax is None:
        fig, ax = new_figure(figsize=figsize)
    lo, hi = (-lim, lim) if np.isscalar(lim) else lim
    ax.axhline(0, color="#cccccc", lw=0.8)
    ax.axvline(0, color="#cccccc", lw=0.8)
    for xy, color in faded:
        ax.annotate(
            "",
            xy=_to_numpy(xy),
            xytext=(0, 0),
            arrowprops=dict(arrowstyle="->", color=color, lw=1.5, ls="--", alpha=0.5),
        )
    for label, xy, color in vectors:
        v = _to_numpy(xy)
        if v.shape != (2,):
            raise ValueError(
                f"vector_plot: vector {label!r} has shape {v.shape}; give two coordinates."
            )
        if arrows:
            ax.annotate(
                "",
                xy=v,
                xytext=(0, 0),
                arrowprops=dict(
                    arrowstyle="->",
                    color=color,
                    lw=2.5 if not points else 1.2,
                    alpha=1.0 if not points else 0.6,
                ),
            )
        if points:
            ax.plot(v[0], v[1], "o", color=color)
        if label:
            ax.annotate(label, v, textcoords="offset points", xytext=(4, 4), color=color)
    if unit_circle:
        ax.add_patch(mpatches.Circle((0, 0), 1, fill=False, ls=":", color="#999999"))
    ax.set_xlim(lo, hi)
    ax.set_ylim(lo, hi)
    ax.set_aspect("equal")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title, fontsize=10)
    return ax if fig is None else finish_figure(fig)


def matrix_panels(
    matrices: Sequence,
    titles: Sequence[str],
    *,
    labels: Sequence[str] | None = None,
    xlabel: str = "key",
    ylabel: str = "query",
    vmax: float = 1.0,
    cell_lines: bool = False,
    colorbar: bool = False,
    figsize: tuple[float, float] = (9.0, 3.2),
    width_ratios: Sequence[float] | None = None,
):
    """Side-by-side heatmaps of 0-to-1 matrices (attention weights, masks), in blues.

    matrices: one (T_q, T_k) array, tensor or boolean mask per panel; titles: one per panel.
    labels: tick labels for both axes (a square matrix's tokens), or None for no ticks.
    vmax: the colour scale's top (1.3 keeps a mask's ones a mid blue); cell_lines: white lines
    between cells; colorbar: a colour bar beside the last panel. The y label goes on the first
    panel, or on every panel when they have no tick labels. Returns the finished figure.
    """
    if len(matrices) != len(titles):
        raise ValueError(
            f"matrix_panels: {len(matrices)} matrices but {len(titles)} titles; give one title "
            "each."
        )
    fig, axes = new_figure(
        1,
        len(matrices),
        figsize=figsize,
        squeeze=False,
        gridspec_kw=None if width_ratios is None else {"width_ratios": list(width_ratios)},
    )
    axes = axes[0]
    for i, (ax, m, title) in enumerate(zip(axes, matrices, titles)):
        w = _to_numpy(m)
        if w.ndim != 2:
            raise ValueError(f"matrix_panels: matrix {i} has shape {w.shape}; give 2-D matrices.")
        im = ax.imshow(w, cmap="Blues", vmin=0.0, vmax=vmax)
        if labels is None:
            ax.set_xticks([])
            ax.set_yticks([])
        else:
            shown = [repr(t)[1:-1] for t in labels]
            ax.set_xticks(range(w.shape[1]), shown, rotation=90 if len(shown) > 8 else 0)
            ax.set_yticks(range(w.shape[0]), shown)
        if cell_lines:
            ax.set_xticks(np.arange(-0.5, w.shape[1], 1), minor=True)
            ax.set_yticks(np.arange(-0.5, w.shape[0], 1), minor=True)
            ax.grid(which="minor", color="white", linewidth=1.5, alpha=1.0)
            ax.tick_params(which="minor", length=0)
        ax.set_xlabel(xlabel)
        if i == 0 or labels is None:
            ax.set_ylabel(ylabel)
        ax.set_title(title, fontsize=10)
    if colorbar:
        fig.colorbar(im, ax=axes[-1], fraction=0.046, pad=0.04)
    return finish_figure(fig)


def loglog_plot(curves: Mapping, **kw):
    """``line_plot`` on log-log axes with plain numbers on the y axis (1.5, 2, 3 rather than
    1.5 x 10^0): for power laws, which are straight lines there, over a narrow range of y
    such as a loss. Takes ``line_plot``'s keywords (xlog and ylog are set here)."""
    from matplotlib.ticker import FormatStrFormatter, LogLocator

    out = line_plot(curves, xlog=10, ylog=10, **kw)
    ax = out if kw.get("ax") is not None else out.axes[0]
    # label the halves too (1.5, 2, 2.5, 3, ...), so a narrow range of y still gets several labels
    ax.yaxis.set_minor_locator(LogLocator(base=10, subs=(1.5, 2, 2.5, 3, 4, 5, 6, 7, 8, 9)))
    ax.yaxis.set_major_formatter(FormatStrFormatter("%g"))
    ax.yaxis.set_minor_formatter(FormatStrFormatter("%g"))
    return out


# --------------------------------------------------------------------------- narrow layouts
#: Width (inches) of a figure's narrow layout. A phone shows it about 360 CSS px wide (a
#: 390 px screen less the page's margins), so its 11-point tick labels are 11 px tall there
#: and 9-point ones 9 px; the wide layout of a 13-inch, four-panel figure shows them at 3-4 px.
NARROW_WIDTH = 5.0
#: The output type carrying the narrow layout (JSON: "svg", "panels", "grid", "tick_pt"). Only
#: the site reads it (book/_ext/course_figures.py); Jupyter and Colab show the usual SVG.
NARROW_MIME = "application/vnd.course.narrow-figure+json"


def _panels(fig):
    """The figure's panels in reading order (its axes other than colour bars) and the grid
    (rows, cols) they sit in, or None when a re-layout cannot move them: an axes outside any
    grid or in another grid, two axes in one cell (twins), a figure-level legend or text."""
    if fig.legends or fig.texts:
        return None
    panels, cells, grid = [], set(), None
    for ax in fig.axes:
        if hasattr(ax, "_colorbar"):  # a colour bar moves with the panel it belongs to
            continue
        spec = ax.get_subplotspec()
        if spec is None:
            return None
        top = spec.get_topmost_subplotspec()
        cell = (top.rowspan.start, top.colspan.start)
        if grid is None:
            grid = top.get_gridspec()
        if top.get_gridspec() is not grid or cell in cells:
            return None
        cells.add(cell)
        panels.append((cell, ax))
    if grid is None:
        return None
    panels.sort(key=lambda p: p[0])
    return [ax for _, ax in panels], grid.get_geometry()


def _small_image(ax) -> bool:
    """A picture without tick labels (a digit, a heat map of patches), roughly square: such
    panels still read two to a row on a phone."""
    if not ax.images or ax.get_aspect() == "auto" or len(ax.get_xticks()) or len(ax.get_yticks()):
        return False
    (x0, x1), (y0, y1) = ax.get_xlim(), ax.get_ylim()
    return 0.5 <= abs(y1 - y0) / abs(x1 - x0) <= 2.0


def _narrow_cells(panels, rows: int, cols: int, narrow):
    """The narrow grid (r, c) and each panel's (row, col) in it, or None for no narrow layout."""
    n = len(panels)
    if narrow is False or cols < 2 or n < 2:
        return None
    images = all(_small_image(ax) for ax in panels)
    if isinstance(narrow, tuple):
        r, c = narrow
        if r * c < n:
            raise ValueError(f"narrow grid {narrow} has fewer cells than the figure's {n} panels.")
        return (r, c), [divmod(i, c) for i in range(n)]
    if narrow not in (None, "transpose"):
        raise ValueError(f"narrow={narrow!r}: give None, False, 'transpose' or (rows, cols).")
    if narrow == "transpose" or (images and rows > 1):
        if n != rows * cols:
            return None
        return (cols, rows), [divmod(i, cols)[::-1] for i in range(n)]
    if images and n >= 4:
        return (-(-n // 2), 2), [divmod(i, 2) for i in range(n)]
    return (n, 1), [(i, 0) for i in range(n)]


def narrow_layout(fig, narrow=None, width: float = NARROW_WIDTH):
    """A copy of a finished multi-panel figure with its panels re-laid out for a narrow screen,
    ``width`` inches wide; None when there is nothing to re-lay out (one column of panels, a
    single panel) or the figure cannot be moved (see ``_panels``). ``fig`` is not changed.

    Side-by-side panels are stacked, one per row, each as tall as in the wide figure. Small
    square pictures without ticks (digits, patch maps) go two to a row instead, and a grid of
    them is transposed (a 2 x 5 grid becomes 5 x 2, so each column of the wide figure becomes a
    row). A panel's colour bar moves with it. Tick labels hidden because panels shared an axis
    side by side are shown again, since stacked panels no longer stand next to the one that
    had them. Fonts keep their sizes: the narrow figure is smaller, so on a phone they are
    shown larger. ``narrow`` (default: what ``finish_figure(fig, narrow=...)`` recorded)
    chooses the layout: None as above, False none, "transpose", or a (rows, cols) grid; a
    Figure (a diagram's own phone drawing) is the narrow layout itself.
    """
    import pickle
    import warnings

    from matplotlib.gridspec import GridSpec, GridSpecFromSubplotSpec

    if narrow is None:
        narrow = getattr(fig, "_course_narrow", None)
    if isinstance(narrow, matplotlib.figure.Figure):
        return narrow
    found = _panels(fig)
    if found is None:
        return None
    panels, (rows, cols) = found
    layout = _narrow_cells(panels, rows, cols, narrow)
    if layout is None:
        return None
    try:
        copy = pickle.loads(pickle.dumps(fig))
    except Exception:  # an artist that cannot be copied (a lambda formatter): keep the wide one
        return None
    plt.close(copy)  # unpickling may register it with pyplot; it is never shown by itself
    panels, _ = _panels(copy)
    (r, c), cells = layout
    w, h = fig.get_size_inches()
    row_h = max(h / rows, 2.0 if c == 1 else 1.6)
    if all(ax.get_aspect() != "auto" for ax in panels):  # pictures: no taller than they need
        ratio = max(
            ax.get_aspect() * abs(np.subtract(*ax.get_ylim())) / abs(np.subtract(*ax.get_xlim()))
            for ax in panels
        )
        row_h = min(row_h, max(1.2, ratio * 0.8 * width / c + 1.0))
    copy.set_size_inches(width, row_h * r)
    grid = GridSpec(r, c, figure=copy)
    for ax, (i, j) in zip(panels, cells):
        spec = ax.get_subplotspec()
        parent = spec.get_gridspec()
        if isinstance(parent, GridSpecFromSubplotSpec):
            parent._subplot_spec = grid[i, j]  # the panel and its colour bar share a sub-grid
        else:
            ax.set_subplotspec(grid[i, j])
        if len(ax.get_shared_y_axes().get_siblings(ax)) > 1:
            ax.yaxis.set_tick_params(which="both", labelleft=True)
        if len(ax.get_shared_x_axes().get_siblings(ax)) > 1:
            ax.xaxis.set_tick_params(which="both", labelbottom=True)
    copy.subplots_adjust()  # every axes to its new cell, before tight_layout measures them
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # tight_layout's "not compatible" notes
        copy.tight_layout()
    # Numbers the wide figure had to shorten or shrink (panels side by side) start again as
    # written: stacked panels are wider.
    for ax in copy.axes:
        for t in ax.texts:
            if hasattr(t, "_course_slot_as_written"):
                t.set_text(t._course_slot_as_written[0])
                t.set_fontsize(t._course_slot_as_written[1])
    return fit_slot_numbers(copy)


def _tick_points(fig) -> float:
    """The smallest font size (points) of the figure's visible tick labels, or of its titles
    and axis labels when no panel has tick labels (pictures), or of every text of a diagram
    (no axis shown)."""

    def sizes(texts):
        return [t.get_fontsize() for t in texts if t.get_visible() and t.get_text()]

    if all(not ax.axison for ax in fig.axes):
        return float(min(sizes(_texts(fig)) or [matplotlib.rcParams["font.size"]]))
    ticks = sizes(t for ax in fig.axes for t in ax.get_xticklabels() + ax.get_yticklabels())
    labels = sizes(t for ax in fig.axes for t in (ax.title, ax.xaxis.label, ax.yaxis.label))
    return float(min(ticks or labels or [matplotlib.rcParams["font.size"]]))


def narrow_bundle(fig) -> dict | None:
    """``{NARROW_MIME: {...}}`` for a figure with a narrow layout (the site's phone version):
    its SVG (as the notebook's inline SVG is saved: tight bounding box), the number of panels,
    the narrow grid and the smallest tick-label size in points; None for other figures."""
    import io

    narrow = narrow_layout(fig)
    if narrow is None:
        return None
    buf = io.StringIO()
    narrow.savefig(buf, format="svg", bbox_inches="tight")
    panels, geometry = _panels(narrow) or (narrow.axes, (1, 1))
    return {
        NARROW_MIME: {
            "svg": buf.getvalue(),
            "panels": len(panels),
            "grid": list(geometry),
            "tick_pt": _tick_points(narrow),
        }
    }
