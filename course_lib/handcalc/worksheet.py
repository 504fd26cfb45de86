"""Formatting for hand calculations: numbers, written-out arithmetic, small tables, worksheets.

Numbers are shown with 4 significant digits in plain positional notation (no exponent), so
they can be copied onto paper: ``fmt(0.0070710678) == "0.007071"``, ``fmt(0) == "0.0"``.
Negative numbers use the typographic minus "−"; binary operators are surrounded by spaces,
so "0.25 − 1 = −0.75" reads unambiguously (and ``tests/book/test_worked_examples.py`` can parse it).
The written-out arithmetic has a math-mode variant (``tex=True``: ``\times``, ASCII minus) for
the pages, where ``inline_math`` wraps it for ``glue`` and the ``{glue}`` role, so a computed
line like ``e^{0.004982} = 1.00499`` is typeset by MathJax like the formula beside it; the
worksheets keep the plain text.

Worksheets: ``worksheet_html(title, intro, lines, answers=False, back=...)`` renders a list of
``Line``s as an HTML page styled like the site (readable on a phone, printable, dark mode),
with a blank where each answer goes, or the answers filled in (the key), and a link back to
the chapter. Lists of numbers show as ``[0.1, 0.0]``, never as Python reprs.
The worksheets of Chapter 5 themselves live in ``course_lib.handcalc.sheets`` (this module
only formats; it imports nothing of the course).
"""

from __future__ import annotations

import ast
import html
import math
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Sequence

import numpy as np

__all__ = [
    "fmt",
    "fmt_latex",
    "dot_str",
    "affine_str",
    "sum_str",
    "math_eq",
    "inline_math",
    "matrix_latex",
    "html_table",
    "table_cells",
    "Line",
    "worksheet_html",
    "plain_lists",
    "significant_digits",
]

MINUS = "\u2212"


def fmt(x: float, sig: int = 4) -> str:
    """``x`` with ``sig`` significant digits, positional, trailing zeros trimmed ("0.1", "0.0")."""
    x = float(x)
    if math.isinf(x):
        return ("" if x > 0 else MINUS) + "∞"
    if x == 0 or abs(x) < 1e-15:
        return "0.0"
    s = np.format_float_positional(x, precision=sig, unique=False, fractional=False, trim="0")
    return s.replace("-", MINUS)


def fmt_latex(x: float, sig: int = 4) -> str:
    """Like ``fmt`` but for LaTeX: ASCII minus and ``\\infty``."""
    return fmt(x, sig).replace(MINUS, "-").replace("∞", "\\infty")


def _op(x: float, sig: int = 4, tex: bool = False) -> str:
    """An operand after "×" or "+": negative numbers get parentheses."""
    s = fmt_latex(x, sig) if tex else fmt(x, sig)
    return f"({s})" if s.startswith(("-", MINUS)) else s


def _num(x: float, sig: int = 4, tex: bool = False) -> str:
    return fmt_latex(x, sig) if tex else fmt(x, sig)


def dot_str(
    a: Sequence[float], b: Sequence[float], sig: int = 4, result: bool = True, tex: bool = False
) -> str:
    """The dot product written out: "a0×b0 + a1×b1 = result" (``tex``: ``\\times``, for math)."""
    times = r" \times " if tex else "×"
    terms = " + ".join(f"{_op(x, sig, tex)}{times}{_op(y, sig, tex)}" for x, y in zip(a, b))
    return f"{terms} = {_num(float(np.dot(a, b)), sig, tex)}" if result else terms


def affine_str(
    x: Sequence[float], w: Sequence[float], b: float, sig: int = 4, tex: bool = False
) -> str:
    """x·w + b written out: "x0×w0 + x1×w1 + b = result"."""
    return (
        f"{dot_str(x, w, sig, result=False, tex=tex)} + {_op(b, sig, tex)} = "
        f"{_num(float(np.dot(x, w) + b), sig, tex)}"
    )


def sum_str(values: Sequence[float], sig: int = 4, tex: bool = False) -> str:
    """ "a + b + c = total"."""
    return (
        " + ".join(_op(v, sig, tex) for v in values) + f" = {_num(float(np.sum(values)), sig, tex)}"
    )


def inline_math(tex: str):
    """``tex`` (no dollar signs) as inline math for ``glue``: the ``{glue}`` role typesets it
    where the prose pastes it (an ``IPython.display.Latex`` holding ``$tex$``)."""
    from IPython.display import Latex

    if "$" in tex:
        raise ValueError(f"inline_math: pass the TeX without dollar signs, got {tex!r}.")
    return Latex(f"${tex}$")


#: The widest matrix row (characters of its numbers, two per gap) a phone shows whole: a
#: matrix with wider rows is written transposed, ``[...]^T`` (same matrix, narrow on a phone).
PHONE_ROW_CHARS = 28


def matrix_latex(M: np.ndarray, sig: int = 4, transpose_wide: bool = False) -> str:
    """A vector or matrix as a LaTeX bmatrix (a vector becomes one row). ``transpose_wide``:
    a matrix with more columns than rows whose rows are wider than ``PHONE_ROW_CHARS`` is
    written as its transpose with a ``^\\top`` (the 1 x 4 logits as a column)."""
    M = np.atleast_2d(np.asarray(M, dtype=float))
    cells = [[fmt_latex(v, sig) for v in row] for row in M]
    width = max(sum(len(c) + 2 for c in row) for row in cells)
    flip = transpose_wide and M.shape[1] > M.shape[0] and width > PHONE_ROW_CHARS
    if flip:
        cells = [list(col) for col in zip(*cells)]
    body = "\\begin{bmatrix} " + " \\\\ ".join(" & ".join(r) for r in cells) + " \\end{bmatrix}"
    return body + "^{\\top}" if flip else body


def math_eq(lhs: str, M: np.ndarray, sig: int = 4):
    """``lhs = [matrix]`` as an ``IPython.display.Math`` (for ``glue`` and ``{glue:math}``); a
    wide matrix is written transposed (``matrix_latex``), so it fits a phone's column."""
    from IPython.display import Math

    return Math(f"{lhs} = {matrix_latex(M, sig, transpose_wide=True)}")


#: Table cells nearer zero than this are written with an exponent ("1.768×10⁻⁵"): positional,
#: "−0.00001768" hides its magnitude in a row of zeros.
SCI_BELOW = 1e-3


def _digits_needed(x: float, sig: int) -> int:
    """Significant digits ``fmt(x, sig)`` shows once trailing zeros are trimmed (0 for zero)."""
    return len(fmt(x, sig).lstrip(MINUS).replace(".", "").lstrip("0").rstrip("0"))


def table_cells(M: np.ndarray, sig: int = 4) -> list[list[str]]:
    """The cells of ``M`` as a table shows them, in one precision for the whole table.

    Every nonzero number shows the same count of significant digits ``p``: the most any of
    them needs (trailing zeros trimmed), at least 2 and at most ``sig``; trailing zeros are kept
    so that "1.388800" and "1.383780" stand as equals (trimmed, "1.3888" looked less precise).
    Exact zeros read "0.0"; numbers nearer zero than ``SCI_BELOW`` get an exponent
    ("−1.768×10<sup>−5</sup>", HTML), the same ``p`` digits in the mantissa.
    """
    M = np.atleast_2d(np.asarray(M, dtype=float))
    if not 1 <= sig <= 15:
        raise ValueError(f"table_cells: sig={sig}; give 1 to 15 significant digits.")
    finite = [float(v) for v in M.ravel() if math.isfinite(v) and abs(v) >= 1e-15]
    p = min(sig, max([2] + [_digits_needed(v, sig) for v in finite]))

    def cell(v: float) -> str:
        if not math.isfinite(v) or abs(v) < 1e-15:
            return fmt(v)
        if abs(v) < SCI_BELOW:
            mantissa, exponent = f"{v:.{p - 1}e}".split("e")
            return (
                f"{mantissa.replace('-', MINUS)}×10<sup>{MINUS if int(exponent) < 0 else ''}"
                f"{abs(int(exponent))}</sup>"
            )
        if abs(v) >= 10**p:  # more integer digits than the precision: the integer
            return f"{v:.0f}".replace("-", MINUS)
        return f"{v:#.{p}g}".removesuffix(".").replace("-", MINUS)  # "#": zeros kept

    return [[cell(float(v)) for v in row] for row in M]


_SUBSCRIPT = re.compile(r"\b([A-Za-z])_([A-Za-z0-9]+)\b")


def _caption_html(caption: str) -> str:
    """A caption's text, escaped, with "W_O" written as W<sub>O</sub> (as the prose's math)."""
    return _SUBSCRIPT.sub(r"<i>\1</i><sub>\2</sub>", html.escape(caption))


def html_table(
    M: np.ndarray,
    row_labels: Sequence[str] | None = None,
    col_labels: Sequence[str] | None = None,
    sig: int = 4,
    caption: str = "",
):
    """A small matrix as an HTML table (returns an ``IPython.display.HTML``), its numbers in one
    precision (``table_cells``); "W_O" in the caption is set as W with subscript O."""
    from IPython.display import HTML

    M = np.atleast_2d(np.asarray(M, dtype=float))
    if row_labels is not None and len(row_labels) != M.shape[0]:
        raise ValueError(f"html_table: {len(row_labels)} row labels for {M.shape[0]} rows.")
    if col_labels is not None and len(col_labels) != M.shape[1]:
        raise ValueError(f"html_table: {len(col_labels)} column labels for {M.shape[1]} columns.")
    out = ['<table class="handcalc">']
    if caption:
        out.append(f"<caption>{_caption_html(caption)}</caption>")
    if col_labels is not None:
        # The corner above the row labels is an empty data cell, not an empty header.
        out.append(
            "<tr>"
            + ("<td></td>" if row_labels is not None else "")
            + "".join(f'<th scope="col">{html.escape(str(c))}</th>' for c in col_labels)
            + "</tr>"
        )
    for i, row in enumerate(table_cells(M, sig)):
        head = (
            f'<th scope="row">{html.escape(str(row_labels[i]))}</th>'
            if row_labels is not None
            else ""
        )
        out.append(
            "<tr>" + head + "".join(f'<td style="text-align:right">{c}</td>' for c in row) + "</tr>"
        )
    out.append("</table>")
    return HTML("".join(out))


# --------------------------------------------------------------------------------------------
# Worksheets
# --------------------------------------------------------------------------------------------
@dataclass
class Line:
    """One worksheet line: ``prompt`` contains "{}" where the answer goes."""

    section: str
    prompt: str
    answer: str


#: Lines whose answer shows more than this many significant digits ask for ``WIDE_SIG``.
SIG = 4
WIDE_SIG = 6

# A Python list literal of strings, e.g. "['0.1', '−0.7']" or "[['0.1', '0.0'], ['0.0', '0.1']]",
# as ``str(list_of_strings)`` writes it: shown without quotes ("[0.1, −0.7]").
_LIST_REPR = re.compile(r"\[(?:\[(?:'[^'\[\]]*'(?:, )?)*\](?:, )?|'[^'\[\]]*'(?:, )?)+\]")


def plain_lists(text: str) -> str:
    """``text`` with every Python list-of-strings repr in it written as plain math notation:
    ``"K = [['0.1', '0.0'], ['0.0', '0.1']]"`` becomes ``"K = [[0.1, 0.0], [0.0, 0.1]]"``."""

    def show(value) -> str:
        if isinstance(value, list):
            return "[" + ", ".join(show(v) for v in value) + "]"
        return str(value)

    def repl(m: re.Match) -> str:
        try:
            return show(ast.literal_eval(m.group(0)))
        except (ValueError, SyntaxError):  # not a literal after all: leave it
            return m.group(0)

    return _LIST_REPR.sub(repl, text)


def significant_digits(answer: str) -> int:
    """The most significant digits shown by any number in ``answer`` ("0.004982" -> 4)."""
    best = 0
    for num in re.findall(r"\d+(?:\.\d+)?", answer):
        digits = num.replace(".", "").lstrip("0")
        best = max(best, len(digits))
    return best


def worksheet_html(
    title: str,
    intro: str,
    lines: Sequence[Line],
    answers: bool = False,
    back: str | None = None,
    back_title: str | None = None,
    other: str | None = None,
) -> str:
    """A printable HTML page (the Jinja2 template ``templates/worksheet.html``): the lines
    grouped by section, blanks or (answers=True) the key.

    ``back`` links to the chapter (``back_title`` names it, default ``title``); ``other`` to the
    worksheet's key or the key's worksheet. Lines whose answer has more than ``SIG``
    significant digits say that they want ``WIDE_SIG``; the footer states both."""
    links = []
    if back:
        links.append((back, f"\u2190 Back to {back_title or title}"))
    if other:
        links.append((other, "The worksheet (blanks)" if answers else "The answer key"))
    sections: list[dict] = []
    for line in lines:
        if not sections or sections[-1]["title"] != plain_lists(line.section):
            sections.append({"title": plain_lists(line.section), "lines": []})
        answer = plain_lists(line.answer)
        sections[-1]["lines"].append(
            {
                "pieces": plain_lists(line.prompt).split("{}"),  # the blank goes between pieces
                "answer": answer,
                "wide": significant_digits(answer) > SIG,
            }
        )
    return _template().render(
        title=title,
        kind="answer key" if answers else "worksheet",
        intro=plain_lists(intro),
        links=links,
        sections=sections,
        answers=answers,
        sig=SIG,
        wide_sig=WIDE_SIG,
        wide=any(line["wide"] for section in sections for line in section["lines"]),
    )


@lru_cache(maxsize=1)
def _template():
    import jinja2  # altair's dependency, so wherever course_lib is installed

    env = jinja2.Environment(
        loader=jinja2.PackageLoader("course_lib.handcalc", "templates"),
        autoescape=True,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        undefined=jinja2.StrictUndefined,
    )
    return env.get_template("worksheet.html")
