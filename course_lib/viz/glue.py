"""``glue`` that works everywhere a chapter runs.

In the book build, values are glued with myst-nb so the prose can quote them
(``{glue:text}`name:.3f```). On Colab or in plain Jupyter myst-nb may be missing; there the
value is simply shown (or nothing happens with ``display=False``), so the notebook still runs.
A build whose kernel has no myst-nb (the clean test build executes the chapters in a fresh
Colab-like environment, ``tests/colab_env.py``) still glues: the build says so through the
environment (``course_lib.viz.NARROW_ENV``, set for the kernels it starts) and ``glue`` writes
myst-nb's glue output itself.

Numbers for the prose: ``sci`` writes one in scientific notation as a reader does;
``table_column`` writes a column of a glued markdown table in one precision (the tables the
code prints, Chapter 5's, are ``course_lib.handcalc.worksheet.table_cells``). What a chapter
computes from its numbers for the prose, a reader's notebook keeps (``course_lib.viz.numbers``).
"""

from __future__ import annotations

import math
import os
from typing import Any, Iterable

from . import NARROW_ENV as _SITE_BUILD_ENV

try:  # myst-nb is a build dependency, not a runtime one
    from myst_nb import glue as _myst_glue
except ImportError:  # pragma: no cover - exercised by the fresh-Colab test
    _myst_glue = None

__all__ = ["glue", "sci", "table_column"]

_SUPERSCRIPT = str.maketrans("0123456789-", "⁰¹²³⁴⁵⁶⁷⁸⁹⁻")


def glue(name: str, value: Any, display: bool = False) -> None:
    """Store ``value`` under ``name`` for the page's prose (returns None, so a cell ending
    with ``glue(...)`` prints nothing)."""
    if _myst_glue is not None:
        _myst_glue(name, value, display=display)
    elif os.environ.get(_SITE_BUILD_ENV) == "1":
        _glue_for_the_build(name, value, display)
    elif display:
        from IPython.display import display as _show

        _show(value)


def _glue_for_the_build(name: str, value: Any, display: bool) -> None:
    """myst-nb's glue written out (``myst_nb.ext.glue.glue`` of myst-nb 1.4): the value's display
    data under MIME types prefixed so that no front end shows them (unless ``display``), with the
    name in the metadata, where the site build finds it (``tests/book/test_colab.py`` checks that
    this writes what myst-nb writes)."""
    from IPython.core.formatters import format_display_data
    from IPython.display import display as show

    bundle, metadata = format_display_data(value)
    prefix = "" if display else "application/papermill.record/"
    metadata["scrapbook"] = dict(name=name, mime_prefix=prefix)
    show({prefix + k: v for k, v in bundle.items()}, raw=True, metadata=metadata)


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
    return _power_of_ten(mantissa, power)


def _power_of_ten(mantissa: str, power: int) -> str:
    """ "m × 10ᵖ", with the typographic minus."""
    return f"{mantissa.replace('-', chr(0x2212))} × 10{str(power).translate(_SUPERSCRIPT)}"


def table_column(values: Iterable[float], sig: int = 4, decimals: int | None = None) -> list[str]:
    """One column of a glued markdown table, every cell in one precision.

    Positional, with one count of decimals for the whole column: ``decimals`` if given, else
    as many as show ``sig`` significant digits of the column's largest magnitude, so
    ``table_column([0.250629, 0.250723], 6) == ["0.250629", "0.250723"]`` and a column of
    losses ``[1.38378, 1.38341]`` keeps 5 decimals (never "1.3888" beside "1.38378"); whole
    numbers stay whole ("19").
    Where that would write a nonzero value as zero (a column spanning many powers of ten), the
    whole column is written with exponents, ``sig`` significant digits each ("9.384 × 10⁻⁵",
    as ``sci``). The minus is typographic ("−").

    A column of numbers per call: glue each cell (``glue(f"name_{i}", cell)``) and quote them in
    one column of the table, so the column and its format stay one thing.
    """
    xs = [float(v) + 0.0 for v in values]  # + 0.0: no "−0.000"
    if not 1 <= sig <= 15:
        raise ValueError(f"table_column: sig={sig}; give 1 to 15 significant digits.")
    if decimals is not None and decimals < 0:
        raise ValueError(f"table_column: decimals={decimals}; give 0 or more (or None).")
    bad = [x for x in xs if not math.isfinite(x)]
    if bad:
        raise ValueError(
            f"table_column: {bad[0]} is not a finite number; a table cell shows a number "
            "(write a missing value as text in the table itself)."
        )
    largest = max((abs(x) for x in xs), default=0.0)
    if decimals is None and all(x == round(x) for x in xs):
        decimals = 0  # counts and other whole numbers: "19", not "19.00"
    if decimals is None:
        decimals = max(sig - 1 - math.floor(math.log10(largest)), 0)
    cells = [f"{x:.{decimals}f}" for x in xs]
    if any(x != 0 and float(c) == 0 for x, c in zip(xs, cells)):
        cells = [
            "0" if x == 0 else _power_of_ten(m, int(e))
            for x in xs
            for m, _, e in [f"{x:.{sig - 1}e}".partition("e")]
        ]
    return [c.replace("-", "\u2212") for c in cells]
