"""Interactive explorers that still say something on the static site.

``explorer(fn, alt=..., **controls)`` shows sliders/dropdowns that redraw ``fn(**values)``
live in Jupyter or Colab. The executed notebook stores the widget state, so the built HTML
renders the controls with the output for the initial values (a sensible static result) even
with no kernel behind the page. A figure drawn inside a widget gets no caption from the page,
so it is shown as an image carrying ``alt`` as its description.
"""
from __future__ import annotations

import base64
import html
import io
from typing import Any, Callable

__all__ = ["explorer", "figure_with_alt"]


def figure_with_alt(fig, alt: str):
    """A Matplotlib figure as an HTML ``<img>`` with alt text (PNG, embedded), drawn at twice
    its display size so it stays sharp on high-resolution screens."""
    from IPython.display import HTML

    if not alt.strip():
        raise ValueError("figure_with_alt: alt text must describe the figure for screen readers.")
    buf = io.BytesIO()
    dpi = fig.get_dpi()
    fig.savefig(buf, format="png", bbox_inches="tight", dpi=2 * dpi)
    width = _png_width(buf.getvalue()) // 2  # CSS pixels: half the drawn pixels
    data = base64.b64encode(buf.getvalue()).decode("ascii")
    return HTML(f'<img src="data:image/png;base64,{data}" width="{width}" '
                f'alt="{html.escape(alt)}">')


def _png_width(png: bytes) -> int:
    """The pixel width stored in a PNG's header (bytes 16-19 of the IHDR chunk)."""
    return int.from_bytes(png[16:20], "big")


def explorer(fn: Callable[..., Any], *, alt: str, **controls: Any) -> None:
    """Display an interactive explorer of ``fn``.

    ``controls`` are what ``ipywidgets.interactive`` accepts: widgets, ``(min, max, step)``
    tuples, lists of options, or fixed values. ``fn`` returns a Figure (shown as an image
    described by ``alt``) or anything displayable; it is drawn at once for the initial values.
    """
    import ipywidgets as widgets
    from IPython.display import display
    from matplotlib.figure import Figure

    if not alt.strip():
        raise ValueError("explorer: give alt text describing what the figure shows.")

    def show(**values):
        out = fn(**values)
        if isinstance(out, Figure):
            out = figure_with_alt(out, alt)
        if out is not None:
            display(out)

    w = widgets.interactive(show, **controls)
    w.layout = widgets.Layout(border="1px solid #ddd", padding="6px")
    for control in w.kwargs_widgets:
        # Every control has a name a screen reader can say: its label, also as a tooltip
        # (the site's widget glue names slider handles after it, see book/_ext/course_assets.py).
        label = control.description or getattr(control, "_kwarg", "") or "value"
        control.description = label
        control.tooltip = label
    display(w)
