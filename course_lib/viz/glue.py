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

__all__ = ["glue", "sci"]

_SUPERSCRIPT = str.maketrans("0123456789-", "⁰¹²³⁴⁵⁶⁷⁸⁹⁻")


def glue(name: str, value: Any, display: bool = False) -> None:
    """Store ``value`` under ``name`` for the page's prose (returns None, so a cell ending
    with ``glue(...)`` prints nothing)."""
    if _myst_glue is not None:
        _myst_glue(name, value, display=display)
    elif display:
        from IPython.display import display as _show

        _show(value)


def sci(x: float, digits: int = 1) -> str:
    """``x`` in scientific notation for prose, as a reader writes it: ``sci(3.2e-65)`` is
    "3.2 × 10⁻⁶⁵" (not Python's "3.2e-65"); ``digits`` decimals in the mantissa; no power of
    ten between 10⁰ and 10² ("0.1", "42.0")."""
    x = float(x)
    if x == 0 or not abs(x) < float("inf"):
        return f"{x:.{digits}f}"
    mantissa, _, exponent = f"{x:.{digits}e}".partition("e")
    power = int(exponent)
    if -1 <= power <= 2:
        return f"{x:.{max(digits - power, 0)}f}".replace("-", "−")
    return f"{mantissa.replace('-', chr(0x2212))} × 10{str(power).translate(_SUPERSCRIPT)}"
