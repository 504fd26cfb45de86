"""Issue 29, "one precision per table": every column of numbers in a table of the built site is
written in one precision, and the formatter the chapters glue table cells with
(``course_lib.viz.glue.table_column``) writes them so.

A column of numbers (every body cell a number) passes when its numbers are all whole, all
positional with one count of decimals, or all written with a power of ten whose mantissas have
one count of decimals. "−0.0376" beside "−0.03734", "1.3888" beside "1.38378", "1" beside
"0.001" and "0.00009384" beside "0.250629" fail. A column mixed on purpose is named in
``MIXED_ON_PURPOSE`` with its reason; an entry that no longer matches a mixed column fails too.

Chapter 5's hand-calculation tables (``table class="handcalc"``, written by
``course_lib.handcalc.worksheet.table_cells``) follow the worked examples' own rule instead: one
count of significant digits per table (4, 6 for probabilities and losses), the digits a reader
copies onto paper; tests/book/test_site_finish.py and tests/book/test_content_fit_browser.py
check it.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest
from build_support import BUILD_NAMES, get_build

from course_lib.viz.glue import table_column

#: Table classes with a precision rule of their own (see the module docstring).
OWN_RULE = {"handcalc": "one count of significant digits per table (worksheet.table_cells)"}

#: (page, column header) -> why the column mixes precisions. Empty: none does today.
MIXED_ON_PURPOSE: dict[tuple[str, str], str] = {}

_SUP = str.maketrans("⁰¹²³⁴⁵⁶⁷⁸⁹⁻", "0123456789-")
_POSITIONAL = re.compile(r"^[-\u2212+]?(\d{1,3}(?:,\d{3})+|\d+)(?:\.(\d+))?$")
# "9.384 × 10⁻⁵" (glue.sci, table_column) or "9.384×10−5" (an HTML <sup>'s text)
_POWER = re.compile(r"^[-\u2212+]?\d+(?:\.(\d+))?\s*×\s*10\s*([-\u2212\u207b]?[\d⁰¹²³⁴⁵⁶⁷⁸⁹]+)$")


def cell_format(text: str) -> tuple[str, int] | None:
    """How a cell writes its number: ("int", 0), ("fixed", decimals) or ("power", mantissa
    decimals); None when the cell is not a number."""
    text = " ".join(text.split())
    m = _POWER.match(text)
    if m:
        return ("power", len(m.group(1) or ""))
    m = _POSITIONAL.match(text)
    if m:
        return ("fixed", len(m.group(2))) if m.group(2) else ("int", 0)
    return None


def column_problem(cells: list[str]) -> str | None:
    """Why a column of numbers mixes precisions (None when it does not, or holds other text)."""
    cells = [c for c in cells if c.strip()]
    formats = [cell_format(c) for c in cells]
    if len(cells) < 2 or None in formats:
        return None
    kinds = {k for k, _ in formats}
    if kinds == {"int"}:
        return None
    if "power" in kinds and kinds != {"power"}:
        return f"powers of ten beside positional numbers: {cells}"
    if len(set(formats)) > 1:
        shown = sorted({d for _, d in formats})
        return f"{shown} decimals in one column: {cells}"
    return None


def table_columns(html: str) -> list[tuple[str, str, list[str]]]:
    """(table class, column header, body cells) of every column of every table in a page."""
    from bs4 import BeautifulSoup

    out = []
    for table in BeautifulSoup(html, "html.parser").find_all("table"):
        kind = " ".join(table.get("class") or [])
        rows = [
            [" ".join(c.get_text(" ").split()) for c in tr.find_all(["td", "th"])]
            for tr in table.find_all("tr")
        ]
        first = table.find("tr")
        header_row = first is not None and not first.find("td")  # only <th>: the headers
        head, body = (rows[0], rows[1:]) if header_row else ([], rows)
        width = max((len(r) for r in rows), default=0)
        for j in range(width):
            header = head[j] if j < len(head) else f"column {j + 1}"
            out.append((kind, header, [r[j] for r in body if j < len(r)]))
    return out


def mixed_columns(
    site: Path, pages: tuple[str, ...] | None = None
) -> tuple[dict[tuple[str, str], str], int]:
    """(page, column header) -> problem, for every table of every page of the built site (or
    of ``pages``, docnames, only); and how many columns of numbers were judged."""
    found, judged = {}, 0
    for page in sorted(site.rglob("*.html")):
        rel = page.relative_to(site).as_posix()
        if rel.startswith(("_static/", "_downloads/", "_sources/")) or rel == "genindex.html":
            continue
        if pages is not None and rel.removesuffix(".html") not in pages:
            continue
        for kind, header, cells in table_columns(page.read_text(encoding="utf-8")):
            if any(k in OWN_RULE for k in kind.split()):
                continue
            judged += bool(cells) and all(cell_format(c) for c in cells if c.strip())
            why = column_problem(cells)
            if why:
                found[(rel, header)] = why
    return found, judged


# ----------------------------------------------------------------------------- the judge
@pytest.mark.parametrize(
    "cells",
    [
        ["−0.0376", "−0.03734"],
        ["1.3888", "1.38378"],
        ["1", "0.1", "0.01", "0.001"],
        ["0.250629", "1.38378"],
        ["0.00009384", "9.384 × 10⁻⁵"],
        ["9.38 × 10⁻⁵", "−3.744 × 10⁻⁴"],
        ["1.768×10−5", "0.100018"],
    ],
)
def test_a_mixed_column_is_caught(cells):
    assert column_problem(cells)


@pytest.mark.parametrize(
    "cells",
    [
        ["19", "22", "43", "50"],
        ["0.250629", "0.250723", "−0.000094"],
        ["1.000", "0.100", "0.010", "0.001"],
        ["9.384 × 10⁻⁵", "−3.744 × 10⁻⁴"],
        ["12,345", "7"],
        ["attention", "0.5"],  # not a column of numbers
    ],
)
def test_a_column_in_one_precision_passes(cells):
    assert column_problem(cells) is None


def test_columns_are_read_from_a_table_with_its_headers():
    html = (
        '<table class="table"><thead><tr><th>w</th><th>P(C)</th><th>loss</th></tr></thead>'
        "<tbody><tr><td>before</td><td>0.250629</td><td>1.38378</td></tr>"
        "<tr><td>after</td><td>0.250723</td><td>1.3834</td></tr></tbody></table>"
        '<table class="handcalc"><tr><td>0.1000</td><td>0.0</td></tr></table>'
    )
    cols = table_columns(html)
    assert cols[:3] == [
        ("table", "w", ["before", "after"]),
        ("table", "P(C)", ["0.250629", "0.250723"]),
        ("table", "loss", ["1.38378", "1.3834"]),
    ]
    assert column_problem(cols[2][2]) and not column_problem(cols[1][2])
    assert cols[3][0] == "handcalc" and cols[3][2] == ["0.1000"]


# ------------------------------------------------------------------------ the formatter
@pytest.mark.parametrize(
    "values, sig",
    [
        ([0.250629, 0.2507231, 0.25080444], 6),
        ([1.3837838, 1.3834109, 1.383081], 6),
        ([1.0, 0.1, 0.01, 0.001], 4),
        ([0.2506, -0.0375, 0.5], 3),
        ([9.3841e-5, -3.7441e-4], 4),
        ([0.25, 1e-7, -2.5e-3], 4),
        ([19, 22, 43, 50], 4),
        ([-0.0, 0.5, 123.456], 4),
    ],
)
def test_table_column_writes_one_precision_that_reads_back(values, sig):
    cells = table_column(values, sig=sig)
    assert column_problem(cells) is None, cells
    for v, c in zip(values, cells):
        text = c.replace("\u2212", "-").replace(" × 10", "e").translate(_SUP)
        # to the column's precision: half a unit of its last shown digit
        fmt = cell_format(c)
        assert fmt is not None and not c.startswith("-"), c  # the typographic minus
        if fmt[0] == "power":
            assert float(text) == pytest.approx(v, rel=0.51 * 10 ** -(sig - 1))
        else:
            assert abs(float(text) - v) <= 0.5 * 10.0 ** -fmt[1] + 1e-12
    kind, decimals = cell_format(cells[0])
    if kind == "fixed":  # as many decimals as give the largest value `sig` significant digits
        assert decimals == max(sig - 1 - math.floor(math.log10(max(map(abs, values)))), 0)


def test_table_column_decimals_and_bad_input():
    assert table_column([1.0, 0.1, 0.01, 0.001], decimals=3) == ["1.000", "0.100", "0.010", "0.001"]
    assert table_column([0.5406, -0.4161], decimals=3) == ["0.541", "\u22120.416"]
    assert table_column([0.5, 1e-9], decimals=3)[1] == "1.000 × 10⁻⁹"  # never written as 0.000
    for bad, match in [
        (dict(values=[1.0, math.nan]), "not a finite number"),
        (dict(values=[1.0], sig=0), "significant digits"),
        (dict(values=[1.0], decimals=-1), "decimals"),
    ]:
        with pytest.raises(ValueError, match=match):
            table_column(**bad)


# ------------------------------------------------------------------------ the built site
@pytest.mark.slow
@pytest.mark.parametrize("build", BUILD_NAMES)
def test_every_table_column_of_the_built_site_has_one_precision(build, request):
    """Every built table column of numbers in one precision; the AVX2 build's pages too (a
    column of trained numbers must keep its format whatever the CPU computes)."""
    b = get_build(request, build)
    found, judged = mixed_columns(b.path / "html", b.pages)
    if b.pages is not None and judged == 0:
        pytest.skip(f"the pages the {build} build executed ({', '.join(b.pages)}) have no table")
    assert judged >= 10, f"expected the chapters' tables of numbers; judged {judged} columns"
    stale = sorted(
        key
        for key in set(MIXED_ON_PURPOSE) - set(found)
        if b.executed(key[0].removesuffix(".html"))
    )
    assert not stale, f"MIXED_ON_PURPOSE names columns that are no longer mixed: {stale}"
    problems = [
        f"{page}, column {header!r}: {why}"
        for (page, header), why in sorted(found.items())
        if (page, header) not in MIXED_ON_PURPOSE
    ]
    assert not problems, (
        f"{len(problems)} table column(s) mix precisions (glue each column with "
        "course_lib.viz.glue.table_column, or name it in MIXED_ON_PURPOSE with a reason):\n  "
        + "\n  ".join(problems)
    )
