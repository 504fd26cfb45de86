"""The content as a reader sees it, measured in Chromium on every page of the built site
(issue 29), at a desktop size (1366x900) and a phone size (390x844):

- tables: at least ``MIN_CELL_GAP`` px between neighbouring cells (Chapter 5's worked examples
  had 1-2 px of padding: "0.012490.01242"), and every table of a cell's output (the worked
  examples' numbers, ``course_lib.handcalc.worksheet.table_cells``) in one precision;
- display equations: the typeset formula (MathJax's ``mjx-math``, measured) no wider than its
  column, on a phone and on a desktop;
- code cells: no code box scrolls sideways on a desktop;
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

import pytest
from browser_support import TEST_OUTPUT, browser_js, merge_report, toc_pages

pytestmark = [pytest.mark.browser, pytest.mark.slow]

PAGES = toc_pages()
SIZES = {"desktop": {"width": 1366, "height": 900}, "phone": {"width": 390, "height": 844}}
MIN_CELL_GAP = 8.0  # px between the texts of neighbouring table cells
MIN_TEXT_PX = 8.0  # px, a figure's smallest text on a phone
MIN_CONTROL_GAP = 4.0  # px between an explorer control's name and its widget
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
        "code_boxes": sum(len(p["code"]) for p in out["desktop"].values()),
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


def test_code_does_not_scroll_on_a_desktop(measured):
    problems = [
        f"{path}: scrolls {c['excess']} px: {c['text']!r}"
        for path, m in measured["desktop"].items()
        for c in m["code"]
        if c["excess"] > 1
    ]
    assert sum(len(m["code"]) for m in measured["desktop"].values()) > 100, "no code found"
    _fail(problems, "code boxes that scroll at 1366 px")


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
