"""Formatting for hand calculations: numbers, written-out arithmetic, small tables, worksheets.

Numbers are shown with 4 significant digits in plain positional notation (no exponent), so
they can be copied onto paper: ``fmt(0.0070710678) == "0.007071"``, ``fmt(0) == "0.0"``.
Negative numbers use the typographic minus "−"; binary operators are surrounded by spaces,
so "0.25 − 1 = −0.75" reads unambiguously (and ``tests/test_worked_examples.py`` can parse it).

Worksheets: ``worksheet_html(title, lines, answers=False)`` renders a list of ``Line``s as a
printable HTML page, with a blank where each answer goes, or the answers filled in (the key).
The worksheets of Chapter 5 themselves live in ``course_lib.handcalc.sheets`` (this module
only formats; it imports nothing of the course).
"""
from __future__ import annotations

import html
import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

__all__ = ["fmt", "fmt_latex", "dot_str", "affine_str", "sum_str", "math_eq", "matrix_latex", "html_table", "Line",
           "worksheet_html"]

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


def _op(x: float, sig: int = 4) -> str:
    """An operand after "×" or "+": negative numbers get parentheses."""
    s = fmt(x, sig)
    return f"({s})" if s.startswith(MINUS) else s


def dot_str(a: Sequence[float], b: Sequence[float], sig: int = 4, result: bool = True) -> str:
    """The dot product written out: "a0×b0 + a1×b1 = result"."""
    terms = " + ".join(f"{_op(x, sig)}×{_op(y, sig)}" for x, y in zip(a, b))
    return f"{terms} = {fmt(float(np.dot(a, b)), sig)}" if result else terms


def affine_str(x: Sequence[float], w: Sequence[float], b: float, sig: int = 4) -> str:
    """x·w + b written out: "x0×w0 + x1×w1 + b = result"."""
    return f"{dot_str(x, w, sig, result=False)} + {_op(b, sig)} = {fmt(float(np.dot(x, w) + b), sig)}"


def sum_str(values: Sequence[float], sig: int = 4) -> str:
    """"a + b + c = total"."""
    return " + ".join(_op(v, sig) for v in values) + f" = {fmt(float(np.sum(values)), sig)}"


def matrix_latex(M: np.ndarray, sig: int = 4) -> str:
    """A vector or matrix as a LaTeX bmatrix (a vector becomes one row)."""
    M = np.atleast_2d(np.asarray(M, dtype=float))
    rows = [" & ".join(fmt_latex(v, sig) for v in row) for row in M]
    return "\\begin{bmatrix} " + " \\\\ ".join(rows) + " \\end{bmatrix}"


def math_eq(lhs: str, M: np.ndarray, sig: int = 4):
    """``lhs = [matrix]`` as an ``IPython.display.Math`` (for ``glue`` and ``{glue:math}``)."""
    from IPython.display import Math

    return Math(f"{lhs} = {matrix_latex(M, sig)}")


def html_table(M: np.ndarray, row_labels: Sequence[str] | None = None,
               col_labels: Sequence[str] | None = None, sig: int = 4, caption: str = ""):
    """A small matrix as an HTML table (returns an ``IPython.display.HTML``)."""
    from IPython.display import HTML

    M = np.atleast_2d(np.asarray(M, dtype=float))
    if row_labels is not None and len(row_labels) != M.shape[0]:
        raise ValueError(f"html_table: {len(row_labels)} row labels for {M.shape[0]} rows.")
    if col_labels is not None and len(col_labels) != M.shape[1]:
        raise ValueError(f"html_table: {len(col_labels)} column labels for {M.shape[1]} columns.")
    out = ['<table class="handcalc">']
    if caption:
        out.append(f"<caption>{html.escape(caption)}</caption>")
    if col_labels is not None:
        out.append("<tr>" + ("<th></th>" if row_labels is not None else "")
                   + "".join(f"<th>{html.escape(str(c))}</th>" for c in col_labels) + "</tr>")
    for i, row in enumerate(M):
        head = f"<th>{html.escape(str(row_labels[i]))}</th>" if row_labels is not None else ""
        out.append("<tr>" + head + "".join(f'<td style="text-align:right">{fmt(v, sig)}</td>'
                                           for v in row) + "</tr>")
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


_CSS = """
body { font-family: Georgia, serif; max-width: 46em; margin: 2em auto; color: #111; }
h1 { font-size: 1.4em; } h2 { font-size: 1.1em; margin-top: 1.4em; border-bottom: 1px solid #999; }
li { margin: 0.55em 0; font-family: "DejaVu Sans Mono", monospace; font-size: 0.95em; }
.blank { display: inline-block; min-width: 7em; border-bottom: 1px solid #000; }
.answer { font-weight: bold; color: #0b4f8a; }
@media print { body { margin: 0; } }
"""


def worksheet_html(title: str, intro: str, lines: Sequence[Line], answers: bool = False) -> str:
    """A printable HTML page: the lines grouped by section, blanks or (answers=True) the key."""
    kind = "answer key" if answers else "worksheet"
    parts = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
             f"<title>{html.escape(title)} ({kind})</title><style>{_CSS}</style></head><body>",
             f"<h1>{html.escape(title)}: {kind}</h1>", f"<p>{html.escape(intro)}</p>"]
    section = None
    for line in lines:
        if line.section != section:
            if section is not None:
                parts.append("</ol>")
            section = line.section
            parts.append(f"<h2>{html.escape(section)}</h2><ol>")
        fill = (f'<span class="answer">{html.escape(line.answer)}</span>' if answers
                else '<span class="blank">&nbsp;</span>')
        parts.append("<li>" + html.escape(line.prompt).replace("{}", fill) + "</li>")
    if section is not None:
        parts.append("</ol>")
    parts.append("<p><small>Generated by course_lib.handcalc.worksheet from the same code that computes "
                 "the chapter; numbers are rounded to 4 significant digits.</small></p>")
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"
