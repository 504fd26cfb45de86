"""Multi-panel figures on the built site, in Chromium: stacked on a phone, side by side on a
desktop (book/_ext/course_figures.py, course_lib.viz.plotting.narrow_layout).

- Which figures: every figure cell of the chapters whose code draws panels side by side
  (``new_figure(rows, cols >= 2)``, ``line_panels``, ``matrix_panels``, also through a function
  the chapter defines) or a phone drawing of its own (``finish_figure(fig, narrow=other_fig)``,
  in the chapter or in a ``course_lib.viz`` function it calls: a diagram drawn taller) must
  have a narrow layout on the site, and no other figure has one.
- At 390 x 844 (a phone) each such figure shows its narrow layout, fetches only that one, fits
  the screen, and its tick labels are drawn at least ``MIN_TICK_PX`` CSS px tall (their size in
  points, from the page, times the image's shown-to-natural scale).
- At 1366 x 900 each shows its wide layout and fetches only that one.
- Either way the figure keeps its number, caption and alt text, and a tap opens it full size.

Uses the site build of tests/book/test_browser.py (``COURSE_BROWSER_BUILD`` to point at your own);
element screenshots of the figures on the phone go to ``screenshots/figures/``.
"""

from __future__ import annotations

import re

import pytest
from browser_support import SCREENSHOTS, browser_js, source_root, toc_pages

pytestmark = [pytest.mark.browser, pytest.mark.slow]

PHONE = {"width": 390, "height": 844}
DESKTOP = {"width": 1366, "height": 900}
#: Smallest tick-label height (CSS px) on the phone; the wide layouts showed 3-4 px there.
MIN_TICK_PX = 8.0

_CELL = re.compile(r"^```\{code-cell\}[^\n]*\n(.*?)^```", re.S | re.M)
_NAME = re.compile(r"^\s+name:\s*(\S+)", re.M)
_GRID = re.compile(r"new_figure\(\s*(\d+)\s*,\s*(\d+)")
_PANELS = re.compile(r"\b(line_panels|matrix_panels)\(")
_DEF = re.compile(r"^def (\w+)\(", re.M)
#: ``narrow=`` given a figure (not False, None, "transpose" or a grid): a phone drawing.
_DRAWN = re.compile(r"\bnarrow=(?!False\b|None\b)[A-Za-z_]")


def _side_by_side(code: str) -> bool:
    if "narrow=False" in code:
        return False
    return bool(_PANELS.search(code)) or any(int(c) >= 2 for _, c in _GRID.findall(code))


def _library_drawings() -> set[str]:
    """The ``course_lib.viz`` functions that give their figure a phone drawing."""
    names = set()
    for path in (source_root() / "course_lib" / "viz").glob("*.py"):
        text = path.read_text(encoding="utf-8")
        starts = [(m.start(), m.group(1)) for m in _DEF.finditer(text)] + [(len(text), "")]
        for (a, name), (b, _) in zip(starts, starts[1:]):
            if _DRAWN.search(text[a:b]):
                names.add(name)
    return names


def _phone_drawing(code: str, library: set[str]) -> bool:
    return bool(_DRAWN.search(code)) or any(re.search(rf"\b{n}\(", code) for n in library)


def expected_figures() -> dict[str, set[str]]:
    """page -> the names of its figures drawn with panels side by side (from the sources)."""
    out: dict[str, set[str]] = {}
    library = _library_drawings()
    for page in toc_pages():
        md = source_root() / page.replace(".html", ".md")
        if not md.exists():
            continue
        cells = _CELL.findall(md.read_text(encoding="utf-8"))
        defs = {name: cell for cell in cells for name in _DEF.findall(cell)}
        for cell in cells:
            if not cell.startswith("---\n"):
                continue
            _, meta, code = cell.split("---\n", 2)  # the cell's YAML metadata, then its code
            names = _NAME.findall(meta)
            if "figure:" not in meta or not names:
                continue
            called = [body for name, body in defs.items() if re.search(rf"\b{name}\(", code)]
            if any(_side_by_side(c) or _phone_drawing(c, library) for c in [code, *called]):
                out.setdefault(page, set()).add(names[0])
    return out


FIGURES_JS = browser_js("figures.js")


@pytest.fixture(scope="session")
def figure_pages(site_dir):
    """page -> ids of the figures with a narrow layout on the built site."""
    out = {}
    for page in toc_pages():
        path = site_dir / page
        if not path.exists():
            continue
        text = path.read_text(encoding="utf-8")
        ids = set()
        for m in re.finditer(r'<figure\b[^>]*\bid="([^"]+)"(.*?)</figure>', text, re.S):
            if 'class="course-narrow-figure"' in m.group(2):
                ids.add(m.group(1))
        if ids:
            out[page] = ids
    return out


def test_every_side_by_side_figure_has_a_narrow_layout(figure_pages):
    expected = expected_figures()
    assert expected, "no multi-panel figure found in the chapters: the source scan is broken"
    assert figure_pages == expected


def _open(browser, base_url, path, viewport):
    context = browser.new_context(
        viewport=viewport,
        device_scale_factor=2 if viewport is PHONE else 1,
        is_mobile=viewport is PHONE,
        has_touch=viewport is PHONE,
    )
    fetched: list[str] = []
    context.route(
        "**/*",
        lambda r: (
            r.continue_() if r.request.url.startswith((base_url, "data:", "blob:")) else r.abort()
        ),
    )
    page = context.new_page()
    page.on("request", lambda req: fetched.append(req.url))
    page.goto(base_url + path, wait_until="load")
    page.wait_for_load_state("networkidle")
    return context, page, fetched


def _common_checks(fig, base_url):
    problems = []
    if not re.fullmatch(r"Fig\. \d+(\.\d+)?", fig["number"] or ""):  # "Fig. 1": unnumbered page
        problems.append(f"number {fig['number']!r}")
    if not fig["caption"]:
        problems.append("no caption")
    if not (fig["alt"] or "").strip():
        problems.append("no alt text")
    if fig["link"] != fig["wide"]:
        problems.append(f"tap opens {fig['link']!r}, not the full-size figure")
    if not fig["complete"] or not fig["natural"]:
        problems.append("image not loaded")
    return problems


@pytest.mark.parametrize("viewport", [PHONE, DESKTOP], ids=["phone", "desktop"])
def test_narrow_on_a_phone_wide_on_a_desktop(viewport, figure_pages, browser, base_url):
    assert figure_pages, "no figure with a narrow layout on the site"
    phone = viewport is PHONE
    problems, smallest = [], {}
    for path, ids in sorted(figure_pages.items()):
        context, page, fetched = _open(browser, base_url, path, viewport)
        try:
            figs = {f["id"]: f for f in page.evaluate(FIGURES_JS) if f["narrow"]}
            assert set(figs) == ids, path
            for fid, fig in figs.items():
                where = f"{path}#{fid}"
                issues = _common_checks(fig, base_url)
                shown, hidden = (
                    (fig["narrowSrc"], fig["wide"]) if phone else (fig["wide"], fig["narrowSrc"])
                )
                if fig["current"] != shown:
                    issues.append(
                        f"shows {fig['current']}, expected the {'narrow' if phone else 'wide'} "
                        "layout"
                    )
                if hidden in fetched:
                    issues.append("fetched the layout it does not show")
                if phone:
                    tick_px = fig["tickPt"] * 4 / 3 * fig["shown"] / fig["natural"]
                    smallest[where] = round(tick_px, 1)
                    if tick_px < MIN_TICK_PX:
                        issues.append(f"tick labels {tick_px:.1f} px tall (< {MIN_TICK_PX})")
                    if fig["right"] > PHONE["width"]:
                        issues.append(f"runs off the screen (right edge at {fig['right']:.0f} px)")
                    out = SCREENSHOTS / "figures"
                    out.mkdir(parents=True, exist_ok=True)
                    name = path.rsplit("/", 1)[-1].removesuffix(".html")
                    page.locator(f"figure#{fid}").screenshot(
                        path=str(out / f"{name}-{fid}-phone.png")
                    )
                problems += [f"{where}: {i}" for i in issues]
        finally:
            context.close()
    assert not problems, "\n".join(problems)
    if phone:
        print(
            "\nsmallest tick labels on a 390 px phone (CSS px):",
            ", ".join(f"{k.split('/')[-1]} {v}" for k, v in sorted(smallest.items())),
        )
