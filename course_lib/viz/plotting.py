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


def finish_figure(fig):
    """Lay out and close ``fig`` and return it, so a cell ending with it shows it once."""
    fig.tight_layout()
    plt.close(fig)  # the returned figure is displayed once, by the notebook
    return fig


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
    ax.set_xticks(range(len(tokens)), [repr(t)[1:-1] for t in tokens], rotation=90 if len(tokens) > 8 else 0)
    ax.set_yticks(range(len(query_tokens)), [repr(t)[1:-1] for t in query_tokens])
    ax.set_xlabel("key (attended to)")
    ax.set_ylabel("query (attending)")
    ax.set_title(title)
    if annotate:
        for i in range(w.shape[0]):
            for j in range(w.shape[1]):
                ax.text(j, i, f"{w[i, j]:.2f}", ha="center", va="center",
                        color="white" if w[i, j] > 0.6 else "#222222", fontsize=9)
    fig.colorbar(im, ax=ax, fraction=0.046, pad=0.04)
    return finish_figure(fig)


def loss_curve(history, title: str = "Loss", ylabel: str = "cross-entropy (nats)", logy: bool = False):
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
        ax.plot(list(x), _to_numpy(values), label=name, marker="o" if len(values) <= 30 else None, ms=3)
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


def bar_probs(probs, labels: Sequence[str], title: str = "Next-token probabilities", highlight: int | None = None):
    """Bar chart of a probability vector probs: (V,), with one label per bar.

    highlight: index of a bar to colour differently (e.g. the target token).
    """
    p = _to_numpy(probs)
    if p.ndim != 1 or len(p) != len(labels):
        raise ValueError(
            f"bar_probs: probs must be a vector with one entry per label; got shape {p.shape} "
            f"and {len(labels)} labels."
        )
    fig, ax = new_figure(figsize=(max(3.5, 0.6 * len(p) + 1.5), 3.2))
    colors = [COLORS[1] if i == highlight else COLORS[0] for i in range(len(p))]
    bars = ax.bar(range(len(p)), p, color=colors)
    ax.set_xticks(range(len(p)), list(labels))
    ax.set_ylim(0, max(1.0, float(p.max()) * 1.1))
    ax.set_ylabel("probability")
    ax.set_title(title)
    for b, v in zip(bars, p):
        ax.text(b.get_x() + b.get_width() / 2, v + 0.01, f"{v:.2f}", ha="center", va="bottom", fontsize=9)
    return finish_figure(fig)
