"""A Matplotlib figure as an image that carries its own alt text.

``figure_with_alt(fig, alt)`` is for a figure shown outside a MyST ``figure`` (which has its
own caption and alt text). The chapters' interactive explorers are Vega-Lite charts that
recompute in the browser: ``course_lib.viz.explorers``.
"""
from __future__ import annotations

import base64
import html
import io

__all__ = ["figure_with_alt"]


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
