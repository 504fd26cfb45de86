"""The content as a reader sees it, measured in Chromium on every page of the built site
(issues 29 and 35), at a laptop size (1280x800), a desktop size (1366x900) and a phone size
(390x844):

- tables: at least ``MIN_CELL_GAP`` px between neighbouring cells (Chapter 5's worked examples
  had 1-2 px of padding: "0.012490.01242"), and every table of a cell's output (the worked
  examples' numbers, ``course_lib.handcalc.worksheet.table_cells``) in one precision;
- display equations: the typeset formula (MathJax's ``mjx-math``, measured) no wider than its
  column, on a phone and on a desktop;
- code cells and outputs: no code box and no output (printed text, an HTML table) scrolls
  sideways on a laptop or a desktop (at 1280 px 156 of 304 code boxes and 44 of 222 outputs did);
- outputs: no exception a cell did not mean to show (a traceback, the build machine's network
  error: "gaierror" on Chapter 12's page), nothing written to stderr;
- numbers written in a figure (a heatmap's cells): at least ``MIN_NUMBER_GAP_EM`` of their
  text's size apart on one line, at every size (Fig. 14.2's ran together);
- figures: no text smaller than ``MIN_TEXT_PX`` on a phone: every text of every figure image
  (tick labels, axis labels, legends, annotations, a diagram's labels: the size it is set in
  in the figure's SVG, times the image's shown scale, for the SVG the ``<picture>`` chose at
  that width), and Vega's axis labels as drawn;
- explorers: drawn at full size on a phone (not scaled down), their controls' names apart from
  their widgets.

Each page is opened once per size (a fresh page at that size, as a reader opens it: the
phone layouts are chosen at load). ``tests/browser_js/content-fit.js`` waits for what it reads
(MathJax's typesetting, every image decoded, every explorer drawn); no fixed sleeps. Counts go
to ``test-output/content-fit-report.json``.
"""

from __future__ import annotations

import json
import os
import re

import pytest
from browser_support import TEST_OUTPUT, browser_js, merge_report, toc_pages

# Numbers side by side in a figure, in ems of their text (one home: the plotting module keeps
# them apart when it draws them)
from course_lib.viz.plotting import MIN_NUMBER_GAP_EM

pytestmark = [pytest.mark.browser, pytest.mark.slow]

PAGES = toc_pages()
SIZES = {
    "laptop": {"width": 1280, "height": 800},
    "desktop": {"width": 1366, "height": 900},
    "phone": {"width": 390, "height": 844},
}
WIDE = ("laptop", "desktop")  # where code and outputs fit the column without scrolling
MIN_CELL_GAP = 8.0  # px between the texts of neighbouring table cells
MIN_TEXT_PX = 8.0  # px, a figure's smallest text on a phone
MIN_CONTROL_GAP = 4.0  # px between an explorer control's name and its widget
# What an exception leaves in an output: a traceback, an exception's name with its message
# ("gaierror: [Errno -3] ...", "ConnectionError: ..."), an OS error's errno, a resolver's words.
EXCEPTION = re.compile(
    r"Traceback \(most recent call last\)"
    r"|\b(?P<name>[A-Za-z_]\w*(?:Error|Exception|error|Warning))\b\s*[:(]"
    r"|\[Errno -?\d+\]|Name or service not known|Temporary failure in name resolution"
)
CONTENT_FIT = browser_js("content-fit.js")
EXPLORERS_DRAWN = (
    "[...document.querySelectorAll('.course-vega-explorer')]"
    ".every(e => e.dataset.ready === 'true' && e.querySelector('svg'))"
)


@pytest.fixture(scope="session")
def measured(browser, base_url):
    """size -> page -> what content-fit.js read there (each page loaded once per size)."""
    out: dict[str, dict[str, dict]] = {}
    for size, viewport in SIZES.items():
        phone = size == "phone"
        context = browser.new_context(viewport=viewport, is_mobile=phone, has_touch=phone)
        context.route(
            "**/*",
            lambda r: (
                r.continue_()
                if r.request.url.startswith((base_url, "data:", "blob:"))
                else r.abort()
            ),
        )
        page = context.new_page()
        try:
            for path in PAGES:
                page.goto(base_url + path, wait_until="load")
                page.wait_for_function(EXPLORERS_DRAWN, timeout=60_000)
                out.setdefault(size, {})[path] = page.evaluate(CONTENT_FIT)
        finally:
            context.close()
    counts = {
        "tables_gap_under_8px": sum(
            t["gap"] < MIN_CELL_GAP for p in out["desktop"].values() for t in p["tables"]
        ),
        "tables": sum(len(p["tables"]) for p in out["desktop"].values()),
        "equations_wider_than_phone": sum(
            e["excess"] > 1 for p in out["phone"].values() for e in p["equations"]
        ),
        "equations": sum(len(p["equations"]) for p in out["phone"].values()),
        "code_boxes_scrolling_desktop": sum(
            c["excess"] > 1 for p in out["desktop"].values() for c in p["code"]
        ),
        "code_boxes_scrolling_laptop": sum(
            c["excess"] > 1 for p in out["laptop"].values() for c in p["code"]
        ),
        "code_boxes": sum(len(p["code"]) for p in out["desktop"].values()),
        "outputs_scrolling_laptop": sum(
            o["excess"] > 1 for p in out["laptop"].values() for o in p["outputs"]
        ),
        "outputs_scrolling_desktop": sum(
            o["excess"] > 1 for p in out["desktop"].values() for o in p["outputs"]
        ),
        "outputs": sum(len(p["outputs"]) for p in out["desktop"].values()),
        "outputs_with_an_exception": len(_exceptions(out["laptop"])),
        "figures_numbers_closer_than_min": sum(
            n["gapEm"] < MIN_NUMBER_GAP_EM for p in out["laptop"].values() for n in p["numbers"]
        ),
        "figures_with_numbers": sum(len(p["numbers"]) for p in out["laptop"].values()),
        "figures_text_under_8px_phone": sum(
            f["px"] < MIN_TEXT_PX for p in out["phone"].values() for f in p["figures"]
        ),
        "figures": sum(len(p["figures"]) for p in out["phone"].values()),
        "figure_texts": sum(f["texts"] for p in out["phone"].values() for f in p["figures"]),
        "tick_labels_under_8px_phone": sum(
            t["px"] < MIN_TEXT_PX for p in out["phone"].values() for t in p["ticks"]
        ),
    }
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    merge_report(TEST_OUTPUT / "content-fit-report.json", worker, counts)
    (TEST_OUTPUT / "content-fit.json").write_text(json.dumps(out, indent=1))
    return out


def _fail(problems: list[str], what: str) -> None:
    assert not problems, f"{len(problems)} {what}:\n  " + "\n  ".join(problems)


def test_table_cells_apart_and_in_one_precision(measured):
    problems = []
    for path, m in measured["desktop"].items():
        for t in m["tables"]:
            if t["gap"] < MIN_CELL_GAP:
                problems.append(f"{path}: cells {t['gap']} px apart: {t['text']!r}")
            if t["output"] and len(t["digits"]) > 1:
                problems.append(
                    f"{path}: numbers with {t['digits']} significant digits in one table: "
                    f"{t['text']!r}"
                )
    _fail(problems, "tables")


@pytest.mark.parametrize("size", sorted(SIZES))
def test_display_equations_fit_the_column(measured, size):
    """The typeset formula's own width (``mjx-math``) against its container's: a formula
    wider than the column is broken into lines in the chapter (aligned, one definition per
    line), not left to scroll."""
    problems = [
        f"{path}: {e['width']} px in a {e['room']} px column: {e['text']!r}"
        for path, m in measured[size].items()
        for e in m["equations"]
        if e["excess"] > 1
    ]
    assert sum(len(m["equations"]) for m in measured[size].values()) > 50, "no equations found"
    _fail(problems, f"display equations wider than the column ({size})")


@pytest.mark.parametrize("size", WIDE)
def test_code_does_not_scroll_on_a_laptop_or_desktop(measured, size):
    problems = [
        f"{path}: scrolls {c['excess']} px: {c['text']!r}"
        for path, m in measured[size].items()
        for c in m["code"]
        if c["excess"] > 1
    ]
    assert sum(len(m["code"]) for m in measured[size].values()) > 100, "no code found"
    _fail(problems, f"code boxes that scroll at {SIZES[size]['width']} px")


@pytest.mark.parametrize("size", WIDE)
def test_outputs_do_not_scroll_on_a_laptop_or_desktop(measured, size):
    """Printed text and HTML tables fit the column (a phone scrolls them, with a scrollbar)."""
    problems = [
        f"{path}: scrolls {o['excess']} px: {o['text']!r}"
        for path, m in measured[size].items()
        for o in m["outputs"]
        if o["excess"] > 1
    ]
    assert sum(len(m["outputs"]) for m in measured[size].values()) > 50, "no outputs found"
    _fail(problems, f"outputs that scroll at {SIZES[size]['width']} px")


def _exceptions(pages: dict[str, dict]) -> list[str]:
    """Outputs that show an exception the cell's code does not catch on purpose (a lesson
    that prints the course's own ``ValueError`` names it in an ``except`` clause), or that
    wrote to stderr."""
    found = []
    for path, m in pages.items():
        for cell in m["cells"]:
            clauses = re.findall(r"\bexcept\b([^:\n]*):", cell["input"])
            caught = {name for c in clauses for name in re.findall(r"\w+", c)}
            for hit in EXCEPTION.finditer(cell["output"]):
                if hit.group("name") and hit.group("name") in caught:
                    continue
                start = max(0, hit.start() - 60)
                found.append(f"{path}: {cell['output'][start : hit.end() + 60]!r}")
                break
            else:
                if cell["stderr"]:
                    found.append(f"{path}: output on stderr: {cell['output'][:120]!r}")
    return found


def test_no_output_shows_an_exception(measured):
    """A cell that may fail on the build machine (Chapter 12's download of GPT-2 small, offline)
    says so in a sentence; no page prints a traceback or a raw network error."""
    assert sum(len(m["cells"]) for m in measured["laptop"].values()) > 100, "no outputs found"
    _fail(_exceptions(measured["laptop"]), "outputs that show an exception")


def test_exception_finder_catches_what_it_must():
    """The finder itself: the build's error is caught, a lesson's caught ValueError is not."""
    page = {
        "cells": [
            {
                "input": "x = hub()",
                "output": "Skipped: gaierror: [Errno -3] Temporary failure",
                "stderr": False,
            },
            {
                "input": "try:\n    f()\nexcept ValueError as err:\n    print('ValueError:', err)",
                "output": "ValueError: shapes (3, 4) and (3, 2)",
                "stderr": False,
            },
            {"input": "g()", "output": "Traceback (most recent call last):", "stderr": False},
            {"input": "h()", "output": "UserWarning: slow", "stderr": True},
            {"input": "k()", "output": "error rate 0.12, max_error 3", "stderr": False},
        ]
    }
    found = _exceptions({"p.html": page})
    assert len(found) == 3 and "gaierror" in found[0] and "Traceback" in found[1], found


@pytest.mark.parametrize("size", sorted(SIZES))
def test_numbers_in_a_figure_are_apart(measured, size):
    """Numbers a figure writes side by side (a heatmap's cells: Fig. 14.2's "0.120.34") have
    at least ``MIN_NUMBER_GAP_EM`` of space between them, in the drawing each size shows."""
    problems = [
        f"{path}: {n['number'] or n['figure']}: {n['pair']!r} {n['gapEm']} em "
        f"({n['gapPx']} px) apart (< {MIN_NUMBER_GAP_EM} em)"
        for path, m in measured[size].items()
        for n in m["numbers"]
        if n["gapEm"] < MIN_NUMBER_GAP_EM
    ]
    assert sum(len(m["numbers"]) for m in measured[size].values()) >= 3, "no numbers found"
    _fail(problems, f"figures whose numbers run together ({size})")


def test_figure_text_legible_on_a_phone(measured):
    """Every text of every figure, not only tick labels: a diagram's labels and rules were
    3.8-3.9 px on a phone (Fig. 7.1's gradient rules, the complete picture's shapes) until
    they got a phone drawing of their own (``finish_figure(fig, narrow=phone_figure)``)."""
    problems = [
        f"{path}: {f['number'] or f['src']} ({f['figure']}): smallest text {f['px']} px "
        f"(< {MIN_TEXT_PX}): {f['text']!r}"
        for path, m in measured["phone"].items()
        for f in m["figures"]
        if f["px"] < MIN_TEXT_PX
    ]
    problems += [
        f"{path}: explorer {t['figure']}: text {t['px']} px (< {MIN_TEXT_PX})"
        for path, m in measured["phone"].items()
        for t in m["ticks"]
        if t["src"] == "vega" and t["px"] < MIN_TEXT_PX
    ]
    figures = [f for m in measured["phone"].values() for f in m["figures"]]
    assert len(figures) > 20, "no figures measured"
    # more than the tick labels: titles, legends, annotations, diagrams
    assert sum(f["texts"] - f["tickTexts"] for f in figures) > len(figures), "texts not found"
    _fail(problems, "figures with text under 8 px on a phone")


@pytest.mark.parametrize("size", sorted(SIZES))
def test_explorers_full_size_and_controls_apart(measured, size):
    problems = []
    explorers = 0
    for path, m in measured[size].items():
        for e in m["explorers"]:
            explorers += 1
            if e["scale"] < 0.95:
                problems.append(f"{path}: explorer drawn at {e['scale']:.0%} of its size")
        for c in m["controls"]:
            if c["gap"] < MIN_CONTROL_GAP:
                problems.append(f"{path}: control {c['name']!r} {c['gap']} px from its widget")
    assert explorers >= 5, f"only {explorers} explorers found"
    _fail(problems, f"explorer problems ({size})")
