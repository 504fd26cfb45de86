"""``glue`` that works everywhere a chapter runs.

In the book build, values are glued with myst-nb so the prose can quote them
(``{glue:text}`name:.3f```). On Colab or in plain Jupyter myst-nb may be missing; there the
value is simply shown (or nothing happens with ``display=False``), so the notebook still runs.
"""
from __future__ import annotations

from typing import Any

try:  # myst-nb is a build dependency, not a runtime one
    from myst_nb import glue as _myst_glue
except ImportError:  # pragma: no cover - exercised by the fresh-Colab test
    _myst_glue = None

__all__ = ["glue"]


def glue(name: str, value: Any, display: bool = False) -> None:
    """Store ``value`` under ``name`` for the page's prose (returns None, so a cell ending
    with ``glue(...)`` prints nothing)."""
    if _myst_glue is not None:
        _myst_glue(name, value, display=display)
    elif display:
        from IPython.display import display as _show

        _show(value)
