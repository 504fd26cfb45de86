"""Interactive explorers that still say something on the static site.

``explorer(fn, **controls)`` shows sliders/dropdowns that redraw ``fn(**values)`` live in
Jupyter or Colab. The executed notebook stores the widget state, so the built HTML renders
the controls with the output for the initial values (a sensible static result) even with no
kernel behind the page.
"""
from __future__ import annotations

from typing import Any, Callable

__all__ = ["explorer"]


def explorer(fn: Callable[..., Any], **controls: Any):
    """Display an interactive explorer of ``fn`` and return the widget.

    ``controls`` are what ``ipywidgets.interactive`` accepts: widgets, ``(min, max, step)``
    tuples, lists of options, or fixed values. ``fn`` returns a Figure (or anything
    displayable); it is drawn immediately for the initial values.
    """
    import ipywidgets as widgets
    from IPython.display import display

    def show(**values):
        out = fn(**values)
        if out is not None:
            display(out)

    w = widgets.interactive(show, **controls)
    w.layout = widgets.Layout(border="1px solid #ddd", padding="6px")
    display(w)
    return None
