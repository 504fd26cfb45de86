"""The built site, as a reader meets it: Debian's Chromium (driven by Playwright) loads every page
in the table of contents from a local server, with every request outside 127.0.0.1 blocked, so
the site must render offline (MathJax and the widget manager are served by the site itself).

Per page, at a desktop size (1366×900) and a phone size (390×844), in light and dark mode:
no JavaScript errors, no failed requests to the site, math rendered (no raw TeX left), images
loaded with alt text or a caption, internal links and cross-references resolved, an "Open in
Colab" link on chapter pages whose ``.ipynb`` exists in the repository; no display equation,
code block or output clipped without a visible scrollbar, no page wider than the phone, table
and figure captions at WCAG AA contrast (4.5:1) in both modes; and axe-core (from npm,
injected by the test, never shipped with the site) finds no critical or serious violation.
The browser runs with overlay scrollbars (a phone's, a Mac's: invisible unless the site draws
them), so a box that scrolls but shows no scrollbar counts as clipped. Screenshots go to
``test-output/screenshots/``: the first screen of every page (light, dark, phone), and the whole
page, light and dark, of a page that fails.

Plus: a widget renders, the search finds "attention", every page's head (favicon, viewport,
description, social-preview tags) and licence footer, MathJax and the widget manager only on
pages that need them, no Python reprs in the outputs, and the worksheets read well on a phone
and link back to their chapter. Totals (including every axe finding by rule and impact) go to
``test-output/browser-report.json``.

Under load (a shared machine) each check waits for what it reads, never for a fixed time:
before every screenshot and after each switch (dark mode, the phone's size) the fonts are
ready and every image is loaded and decoded (``browser_js/settle.js``). A failed request to the
site is a failure, except an image request aborted because the page stopped wanting it (a
resize picked another source of a ``<picture>``): one whose URL no image shows now, or that
loaded after all (``Visit.failures``).

Skipped, with a message, only where no ``chromium`` is installed (``apt-get install chromium``).
"""

from __future__ import annotations

import os
import re
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
from browser_support import (
    AXE_JS,
    SCREENSHOTS,
    TEST_OUTPUT,
    browser_js,
    html_ids,
    merge_report,
    source_root,
    toc_pages,
)

from tools import colab

pytestmark = [pytest.mark.browser, pytest.mark.slow]

PAGES = toc_pages()
COLAB_RE = re.compile(
    r"^https://colab\.research\.google\.com/github/([^/]+)/([^/]+)/blob/"
    r"([^/]+)/(.+)$"
)
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
DESKTOP = {"width": 1366, "height": 900}
LAPTOP = {"width": 1280, "height": 800}
PHONE = {"width": 390, "height": 844}
MIN_CONTRAST = 4.5  # WCAG 2 AA, normal text
FAILING_IMPACTS = ("critical", "serious")


# --------------------------------------------------------------------------- fixtures
# `chromium`, `site_dir` (the built site's HTML folder), `base_url` (a local server of it) and
# `browser` (one Chromium for the session) come from tests/conftest.py.


@pytest.fixture(scope="session")
def report():
    """Totals for the closing note, in test-output/browser-report.json (merged over
    pytest-xdist workers)."""
    data = {
        "pages_checked": 0,
        "internal_links_checked": 0,
        "math_elements_checked": 0,
        "images_checked": 0,
        "colab_links_checked": 0,
        "widgets_rendered": 0,
        "screenshots": 0,
        "axe_violations": {},
        "axe_nodes_by_impact": {},
        "blocked_external_requests": [],
        "pages": {},
    }
    start = time.perf_counter()
    yield data
    data["seconds"] = round(time.perf_counter() - start, 1)
    data["unique_internal_links_checked"] = len(_LINK_CACHE)
    data["blocked_external_requests"] = sorted(set(data["blocked_external_requests"]))
    merge_report(
        TEST_OUTPUT / "browser-report.json", os.environ.get("PYTEST_XDIST_WORKER", "main"), data
    )


class Visit:
    """One page load with everything a reader's browser would complain about recorded."""

    def __init__(self, browser, base_url: str, report: dict):
        self.base, self.report = base_url, report
        self.errors: list[str] = []
        self.failed: list[str] = []
        # is_mobile: overlay scrollbars, drawn only when the site styles them (as on a phone
        # or a Mac), and the page's <meta name="viewport"> in force. The desktop size comes
        # first; the phone size is the same page resized.
        self.context = browser.new_context(
            viewport=DESKTOP, color_scheme="light", is_mobile=True, has_touch=True
        )
        self.context.route("**/*", self._route)
        self.page = self.context.new_page()
        self.page.on("pageerror", lambda exc: self.errors.append(f"uncaught: {exc}"))
        self.page.on("console", self._console)
        # Failed requests, judged at the end (``failures``): an image request aborted because
        # the page stopped wanting it (a resize switched a <picture>'s source) is no failure.
        self.aborted: list[tuple[str, str]] = []
        self.page.on("requestfailed", self._request_failed)
        self.page.on(
            "response",
            lambda r: (
                self._own(r.url)
                and r.status >= 400
                and self.failed.append(f"{r.url} (HTTP {r.status})")
            ),
        )

    def _own(self, url: str) -> bool:
        return url.startswith(self.base)

    def _request_failed(self, request):
        if not self._own(request.url):
            return
        if "ERR_ABORTED" in str(request.failure) and request.resource_type == "image":
            self.aborted.append((request.url, str(request.failure)))
        else:
            self.failed.append(f"{request.url} ({request.failure})")

    def settle(self, where: str) -> list[str]:
        """Wait until the page shows what the next check reads (``browser_js/settle.js``:
        fonts, every image loaded and decoded); problems for images that never completed."""
        pending = self.page.evaluate(SETTLE, SETTLE_LIMIT_MS)
        return [f"{where}: image still loading after {SETTLE_LIMIT_MS} ms: {u}" for u in pending]

    def failures(self) -> list[str]:
        """Every failed request to the site, less the image requests that were superseded: an
        aborted image URL that no image of the page shows now, or that loaded after all."""
        shown = {
            (i["src"], i["ok"])
            for i in self.page.evaluate(
                "[...document.images].map(i => ({src: i.currentSrc || i.src, "
                "ok: i.complete && i.naturalWidth > 0}))"
            )
        }
        broken = {src for src, ok in shown if not ok}
        real = [f"{url} ({why})" for url, why in self.aborted if url in broken]
        return self.failed + real

    def _route(self, route):
        url = route.request.url
        if self._own(url) or url.startswith(("data:", "blob:")):
            route.continue_()
        else:  # offline: a CDN or any other host is unreachable, as in a classroom
            self.report["blocked_external_requests"].append(url)
            route.abort()

    def _console(self, msg):
        # Failed loads are reported per request above (blocked external ones are expected).
        if msg.type == "error" and "Failed to load resource" not in msg.text:
            self.errors.append(f"console: {msg.text}")

    def open(self, path: str):
        # A limit, not a wait: the page's load event ends it. On a shared, loaded machine a
        # chapter (MathJax, the explorers' Vega) took over Playwright's default 30 s.
        self.page.goto(self.base + path, wait_until="load", timeout=LOAD_LIMIT_MS)
        return self.page

    def close(self):
        self.context.close()


@pytest.fixture
def visit(browser, base_url, report):
    opened: list[Visit] = []

    def _open(path: str) -> Visit:
        v = Visit(browser, base_url, report)
        opened.append(v)
        v.open(path)
        return v

    yield _open
    for v in opened:
        v.close()


# --------------------------------------------------------------------------- page checks
WAIT_FOR_MATHJAX = browser_js("wait-for-mathjax.js")

MATH_STATE = browser_js("math-state.js")

SETTLE = browser_js("settle.js")
SETTLE_LIMIT_MS = 60_000
LOAD_LIMIT_MS = 180_000

IMAGES = browser_js("images.js")

LINKS = browser_js("links.js")


# Boxes that must never lose their right side: display math, code, outputs, tables.
LAYOUT = browser_js("layout.js")

# WCAG 2 contrast of caption text against what is behind it.
CONTRAST = browser_js("contrast.js")

AXE_RUN = browser_js("axe-run.js")


def _axe(page, only: list[str] | None = None) -> list[dict]:
    """axe-core's violations on the page as it is now (all rules, or ``only`` these)."""
    if not AXE_JS.is_file():
        pytest.fail(f"{AXE_JS} is missing: run `npm ci` (axe-core is a devDependency)")
    if not page.evaluate("typeof window.axe !== 'undefined'"):
        page.add_script_tag(path=str(AXE_JS))
    return page.evaluate(AXE_RUN, only)


def _record_axe(report: dict, violations: list[dict]) -> None:
    for v in violations:
        key = f"{v['impact']}: {v['id']}"
        report["axe_violations"][key] = report["axe_violations"].get(key, 0) + len(v["nodes"])
        report["axe_nodes_by_impact"][v["impact"]] = report["axe_nodes_by_impact"].get(
            v["impact"], 0
        ) + len(v["nodes"])


def _layout_problems(page, where: str) -> list[str]:
    lay = page.evaluate(LAYOUT)
    problems = [f"{where}: {c}" for c in lay["clipped"]]
    if lay["pageWidth"] > lay["viewport"] + 1:
        problems.append(
            f"{where}: the page is {lay['pageWidth']}px wide in a {lay['viewport']}px "
            "viewport (it slides sideways): " + "; ".join(lay["wide"])
        )
    return problems


def _slug(path: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", path.removesuffix(".html"))


_LINK_CACHE: dict[str, str | None] = {}


def _link_problem(url: str, site_dir: Path, base: str) -> str | None:
    """None when ``url`` (on the local site) resolves, else what is wrong with it."""
    if url in _LINK_CACHE:
        return _LINK_CACHE[url]
    parts = urllib.parse.urlsplit(url)
    target = parts._replace(fragment="").geturl()
    problem = None
    try:
        with urllib.request.urlopen(target, timeout=30) as resp:
            resp.read(1)
    except urllib.error.HTTPError as exc:
        problem = f"HTTP {exc.code}"
    if problem is None and parts.fragment:
        rel = urllib.parse.unquote(parts.path).lstrip("/")
        file = site_dir / (rel or "index.html")
        if file.is_dir():
            file = file / "index.html"
        if file.suffix == ".html" and urllib.parse.unquote(parts.fragment) not in html_ids(file):
            problem = f"no anchor #{parts.fragment} in {rel}"
    _LINK_CACHE[url] = problem
    return problem


def _check_colab_href(href: str) -> str | None:
    """None when a Colab URL names this repository, branch and an existing .ipynb."""
    m = COLAB_RE.match(href)
    if not m:
        return f"not a Colab GitHub URL: {href}"
    owner, repo, branch, path = m.groups()
    url, want_branch = colab.repository(source_root())
    if f"https://github.com/{owner}/{repo}" != url or branch != want_branch:
        return f"{href} does not name {url} at branch {want_branch} (_config.yml)"
    if not path.endswith(".ipynb"):
        return f"{href} opens {path}, not a notebook (Colab needs the paired .ipynb)"
    if not (source_root() / path).is_file():
        return f"{href} names {path}, which does not exist in the repository"
    return None


CHAPTERS = {
    md.relative_to(source_root()).with_suffix(".html").as_posix()
    for md in colab.chapter_paths(source_root())
}


@pytest.mark.parametrize("path", PAGES)
def test_page(path, visit, site_dir, base_url, report):
    v = visit(path)
    page = v.page
    state = page.evaluate(WAIT_FOR_MATHJAX)
    assert state != "MathJax never started", f"{path}: MathJax did not load (offline copy missing?)"
    math = page.evaluate(MATH_STATE)
    images = page.evaluate(IMAGES)
    links = page.evaluate(LINKS)
    problems: list[str] = []

    problems += [f"math not rendered: {t!r}" for t in math["unrendered"]]
    problems += [f"raw TeX left in the text: {t!r}" for t in math["raw"]]
    problems += [f"TeX error in an equation: {t!r}" for t in math["errors"]]
    for img in images:
        if img["width"] == 0:
            problems.append(f"image did not load: {img['src'][:100]}")
        if not (img["alt"] or img["caption"]):
            problems.append(f"image without alt text or caption: {img['src'][:100]}")
        if img["output"] and img["width"] and img["shown"] > 50:
            # Figures are vector graphics (course_lib.viz: SVG) or pixels drawn at twice their
            # size, so they stay sharp on high-resolution screens; and a tap opens them full size.
            vector = img["src"].split("?")[0].endswith(".svg") or img["src"].startswith(
                "data:image/svg"
            )
            if not vector and img["width"] < 1.5 * img["shown"]:
                problems.append(
                    f"figure drawn at {img['width']}px, shown {img['shown']:.0f}px wide "
                    f"(blurred on a 2x screen): {img['src'][:80]}"
                )
            if not img["link"] and not img["src"].startswith("data:"):
                problems.append(f"figure does not open full size (no link): {img['src'][:80]}")
    problems += [f"unresolved cross-reference: {t!r}" for t in links["unresolved_xrefs"]]
    internal = sorted({h for h in links["hrefs"] if h.startswith(base_url)})
    for href in internal:
        why = _link_problem(href, site_dir, base_url)
        if why:
            problems.append(f"broken internal link {href}: {why}")

    colab_links = page.locator('a[href^="https://colab.research.google.com/"]')
    hrefs = [colab_links.nth(i).get_attribute("href") for i in range(colab_links.count())]
    if path in CHAPTERS:
        launch = page.locator(".dropdown-launch-buttons")
        if launch.count() == 0:
            problems.append("chapter page has no launch (Open in Colab) button")
        else:
            toggle = launch.locator("button").first
            toggle.click()
            button = launch.locator('a[href^="https://colab.research.google.com/"]')
            if button.count() == 0 or not button.first.is_visible():
                problems.append("no visible Colab link under the launch (rocket) button")
            elif "Open in Colab" not in button.first.inner_text():
                problems.append(
                    f"Colab button reads {button.first.inner_text()!r}, not 'Open in Colab'"
                )
            toggle.click()  # close the menu again before the screenshots
    problems += [why for why in map(_check_colab_href, hrefs) if why]

    # Desktop, light: accessibility, layout, contrast.
    violations = _axe(page)
    _record_axe(report, violations)
    for viol in violations:
        if viol["impact"] in FAILING_IMPACTS:
            problems.append(
                f"axe {viol['impact']} {viol['id']} ({viol['help']}) on "
                f"{len(viol['nodes'])} element(s): " + " | ".join(viol["nodes"][:3])
            )
    problems += _layout_problems(page, "desktop")
    captions = page.evaluate(CONTRAST, MIN_CONTRAST)
    problems += [f"light mode: caption contrast {c} (< {MIN_CONTRAST}:1)" for c in captions["low"]]

    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    problems += v.settle("desktop, light")
    page.screenshot(path=str(SCREENSHOTS / f"{_slug(path)}-light.png"))
    light_bg = page.evaluate("getComputedStyle(document.body).backgroundColor")
    # The reader's system switches to dark: the theme ("auto" mode) must follow it.
    page.emulate_media(color_scheme="dark")
    page.wait_for_function("document.documentElement.dataset.theme === 'dark'", timeout=5_000)
    problems += v.settle("desktop, dark")
    dark_bg = page.evaluate("getComputedStyle(document.body).backgroundColor")
    page.screenshot(path=str(SCREENSHOTS / f"{_slug(path)}-dark.png"))
    if light_bg == dark_bg:
        problems.append(f"dark mode did not change the page background ({light_bg})")
    captions = page.evaluate(CONTRAST, MIN_CONTRAST)
    problems += [f"dark mode: caption contrast {c} (< {MIN_CONTRAST}:1)" for c in captions["low"]]
    dark = [dict(x, id=f"{x['id']} (dark mode)") for x in _axe(page, ["color-contrast"])]
    _record_axe(report, dark)
    violations += dark
    for viol in dark:
        if viol["impact"] in FAILING_IMPACTS:
            problems.append(
                f"axe {viol['impact']} {viol['id']} ({viol['help']}) on "
                f"{len(viol['nodes'])} element(s): " + " | ".join(viol["nodes"][:3])
            )

    # Phone: the same page at 390×844 (dark, then light; the first screen of each).
    page.set_viewport_size(PHONE)
    problems += v.settle("phone")
    problems += _layout_problems(page, "phone")
    page.screenshot(path=str(SCREENSHOTS / f"{_slug(path)}-phone-dark.png"))
    page.emulate_media(color_scheme="light")
    page.wait_for_function("document.documentElement.dataset.theme === 'light'", timeout=5_000)
    problems += v.settle("phone, light")
    page.screenshot(path=str(SCREENSHOTS / f"{_slug(path)}-phone-light.png"))

    blank = page.evaluate(
        "[...document.querySelectorAll('svg.svg-inline--fa')].filter(s => s.checkVisibility()"
        " && s.getBoundingClientRect().width === 0).length"
    )
    if blank:
        problems.append(f"{blank} visible icon(s) drawn with no width")
    problems += [f"JavaScript error: {e}" for e in v.errors]
    problems += [f"failed request to the site: {f}" for f in v.failures()]

    report["pages_checked"] += 1
    report["internal_links_checked"] += len(internal)
    report["math_elements_checked"] += math["count"]
    report["images_checked"] += len(images)
    report["colab_links_checked"] += len(hrefs)
    report["screenshots"] += 4
    report["captions_checked"] = report.get("captions_checked", 0) + captions["checked"]
    report["pages"][path] = {
        "math": math["count"],
        "images": len(images),
        "internal_links": len(internal),
        "colab_links": len(hrefs),
        "axe": {f"{x['impact']}: {x['id']}": len(x["nodes"]) for x in violations},
        "problems": len(problems),
    }
    if problems:
        _whole_page_screenshots(page, path)
    assert not problems, f"{path}:\n  " + "\n  ".join(problems)


def _whole_page_screenshots(page, path: str) -> None:
    """The whole failing page at the desktop size, light and dark, to see what the problems
    name. (A page that passes keeps its first screens only: the whole pages, 870 million pixels
    rendered and encoded, were a third of this test's time.)"""
    page.set_viewport_size(DESKTOP)
    for scheme in ("light", "dark"):
        page.emulate_media(color_scheme=scheme)
        page.wait_for_function(
            f"document.documentElement.dataset.theme === '{scheme}'", timeout=5_000
        )
        page.screenshot(path=str(SCREENSHOTS / f"{_slug(path)}-{scheme}-whole.png"), full_page=True)


def test_every_chapter_has_a_colab_link(site_dir):
    """Chapters (MyST notebooks in the toc) link Colab to their paired notebook."""
    assert CHAPTERS, "no chapter notebooks found in _toc.yml"
    for path in sorted(CHAPTERS):
        html = (site_dir / path).read_text(encoding="utf-8")
        hrefs = re.findall(r'href="(https://colab\.research\.google\.com/[^"]+)"', html)
        assert hrefs, f"{path} has no Colab link"
        for href in hrefs:
            assert _check_colab_href(href) is None, _check_colab_href(href)


def test_a_widget_renders(visit, site_dir, report):
    """Pages with widget state show the live controls, rendered by the site's own manager."""
    pages = [
        p
        for p in PAGES
        if (site_dir / p).exists() and WIDGET_VIEW in (site_dir / p).read_text(encoding="utf-8")
    ]
    # the chapters' explorers are Vega-Lite now (tests/book/test_explorers_browser.py)
    if not pages:
        pytest.skip("no page in the table of contents shows an ipywidgets widget")
    for path in pages:
        v = visit(path)
        widget = v.page.locator(".widget-interact").first
        widget.wait_for(state="visible", timeout=30_000)
        box = widget.bounding_box()
        assert box and box["height"] > 20, f"{path}: the widget is empty"
        controls = v.page.locator(
            ".widget-interact .widget-slider, .widget-interact select, "
            ".widget-interact .widget-dropdown"
        )
        assert controls.count() > 0, f"{path}: the widget has no controls"
        widget.screenshot(path=str(SCREENSHOTS / f"{_slug(path)}-widget.png"))
        assert not v.errors, f"{path}: JavaScript errors: {v.errors}"
        assert not v.failures(), f"{path}: failed requests: {v.failures()}"
        report["widgets_rendered"] += v.page.locator(".widget-interact").count()


def test_the_intro_has_a_card_for_every_chapter(visit):
    """The intro's "parts of the course": every chapter of every part of ``_toc.yml`` is linked
    from a card, shown at 1280x800 and on a phone (Chapters 13-15 had none: issue 35)."""
    from tools.toc import toc_parts

    v = visit("book/intro.html")
    problems = []
    for size in (LAPTOP, PHONE):
        v.page.set_viewport_size(size)
        cards = v.page.evaluate(
            "[...document.querySelectorAll('article .sd-card')].map(c => ({"
            " title: (c.querySelector('.sd-card-title') || c).innerText.trim(),"
            " shown: c.checkVisibility() && c.getBoundingClientRect().right <= innerWidth,"
            " links: [...c.querySelectorAll('a[href]')].map(a => new URL(a.href).pathname)}))"
        )
        for caption, chapters in toc_parts(source_root()):
            for chapter in chapters:
                holders = [
                    c for c in cards if any(p.endswith(f"/{chapter}.html") for p in c["links"])
                ]
                if not holders:
                    problems.append(f"{size['width']} px: no card links {chapter} ({caption})")
                elif not all(c["shown"] for c in holders):
                    problems.append(f"{size['width']} px: the card of {chapter} is not shown")
    assert not problems, "\n".join(problems)
    assert not v.errors, v.errors


def test_search_finds_attention(visit):
    v = visit("search.html?q=attention")
    results = v.page.locator("#search-results li")
    results.first.wait_for(state="visible", timeout=30_000)
    titles = [results.nth(i).inner_text() for i in range(min(results.count(), 20))]
    assert titles, "searching for 'attention' found nothing"
    assert not v.errors, f"search page: JavaScript errors: {v.errors}"


# --------------------------------------------------------------------------- whole-site checks
def _pages_html(site_dir: Path) -> dict[str, str]:
    return {p: (site_dir / p).read_text(encoding="utf-8") for p in PAGES if (site_dir / p).exists()}


def test_every_page_has_head_and_licence(site_dir):
    """Favicon, viewport, a description and social-preview tags in every page's head; the
    licences (code MIT, text CC BY 4.0, the corpus's source) in its footer."""
    problems = []
    for path, html in _pages_html(site_dir).items():
        head = html.split("</head>", 1)[0]
        for what, pattern in [
            ("viewport", r'<meta name="viewport" content="width=device-width'),
            ("favicon", r'<link rel="icon" href="[^"]*favicon\.svg"'),
            ("description", r'<meta name="description" content="[^"]{20,}"'),
            ("og:title", r'<meta property="og:title" content="[^"]+"'),
            ("og:description", r'<meta property="og:description" content="[^"]+"'),
            ("twitter:card", r'<meta name="twitter:card" content="summary'),
            ("og:url", r'<meta property="og:url" content="https://[^"]+' + re.escape(path) + '"'),
            ("og:image", r'<meta property="og:image" content="https://[^"]+\.png"'),
            ("canonical", r'<link rel="canonical" href="https://[^"]+' + re.escape(path) + '"'),
        ]:
            if not re.search(pattern, head):
                problems.append(f"{path}: no {what} in <head>")
        viewports = len(re.findall(r'<meta name="viewport"', head))
        if viewports != 1:
            problems.append(f"{path}: {viewports} viewport tags (one, or phones pick either)")
        footer = "".join(part.split("</footer>", 1)[0] for part in html.split("<footer")[1:])
        for words in ("MIT License", "CC BY 4.0", "Shakespeare", "public domain"):
            if words not in footer:
                problems.append(f"{path}: the footer does not say {words!r}")
    assert (site_dir / "_static" / "favicon.svg").is_file(), "favicon.svg not shipped"
    # each page's social card (sphinxext-opengraph), shipped where its og:image says
    for path, html in _pages_html(site_dir).items():
        m = re.search(r'property="og:image" content="https://[^"]+?/(_images/[^"]+\.png)"', html)
        card = site_dir / m.group(1) if m else None
        if not (card and card.is_file() and card.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"):
            problems.append(f"{path}: its social card {card} is not in the site")
    index = (site_dir / "index.html").read_text(encoding="utf-8")
    assert re.search(r"<title>[^<]+</title>", index), "index.html has no title"
    assert re.search(r'http-equiv="Refresh" content="0; url=book/intro\.html"', index)
    assert not problems, "\n".join(problems)


def test_every_page_has_an_edit_link_and_a_date(site_dir):
    """Each chapter page links its source on GitHub for editing ("Suggest edit") and says when
    it last changed: the date of the source's last commit, not the build's (so two builds of
    one commit are the same)."""
    from tools import ROOT

    problems = []
    for path, html in _pages_html(site_dir).items():
        source = Path(path).with_suffix(".md").as_posix()
        if not re.search(r'href="https://github\.com/[^"]+/edit/[^"]+/' + re.escape(source), html):
            problems.append(f"{path}: no edit link to {source}")
        m = re.search(r"Last updated on (\d{4}-\d{2}-\d{2})", html)
        if not m:
            problems.append(f"{path}: no 'Last updated' date")
            continue
        # sphinx-last-updated-by-git: the author date (UTC) of the last commit that changed the
        # source or a file it includes, so between the source's own and the newest commit's
        day = m.group(1)
        source_day, newest_day = (_commit_day(source), _commit_day("."))
        if source_day and not source_day <= day <= newest_day:
            problems.append(f"{path}: last updated {day}, its source's last commit {source_day}")
    assert ROOT.is_dir() and not problems, "\n".join(problems)


def _commit_day(path: str) -> str:
    """The UTC day (YYYY-MM-DD) of the author date of the last commit that changed ``path``."""
    import subprocess

    out = subprocess.run(
        ["git", "log", "-1", "--format=%ad", "--date=format-local:%Y-%m-%d", "--", path],
        cwd=source_root(),
        capture_output=True,
        text=True,
        env={**os.environ, "TZ": "UTC"},
    )
    return out.stdout.strip()


def test_unnumbered_pages_number_their_equations_from_one(site_dir):
    """A page outside the numbered chapters counts its equations from (1) (Sphinx's single
    counter for them gave "Where next"'s only equation the number 10)."""
    checked = 0
    for path, html in _pages_html(site_dir).items():
        numbers = re.findall(r'class="eqno">\(([0-9.]+)\)', html)
        if numbers and "." not in numbers[0]:
            checked += 1
            assert numbers[0] == "1", f"{path}: its first equation is ({numbers[0]})"
    assert checked >= 2, "expected equations on at least two unnumbered pages"


def test_icons_are_inline_svg(site_dir):
    """The theme's icons are inline SVG written at build time (book/_ext/course_icons.py): no
    page loads Font Awesome's 1.5 MB script, and no icon is left for it to draw."""
    problems = []
    for path, html in _pages_html(site_dir).items():
        if "fontawesome.js" in html:
            problems.append(f"{path}: loads fontawesome.js")
        left = re.findall(r'<(?:i|span) class="fa[^"]*"', html)
        if left:
            problems.append(f"{path}: icons left for the script: {left[:3]}")
        if html.count('<svg class="svg-inline--fa') < 5:
            problems.append(f"{path}: the header's icons are missing")
        if "sphinx-thebe" in html or "THEBE_JS_URL" in html:
            problems.append(f"{path}: loads sphinx-thebe (the site has no Thebe button)")
    assert not (site_dir / "_static" / "scripts" / "fontawesome.js").exists()
    assert not (site_dir / "_static" / "course-assets" / "jupyter-widgets").exists(), (
        "the widget manager is shipped though no page shows a widget"
    )
    assert not problems, "\n".join(problems)


def test_heavy_scripts_only_where_needed(site_dir):
    """MathJax only on pages with math; the widget manager (3.6 MB) only on pages that show a
    live widget (not for a saved progress bar's state); axe-core never in the site."""
    problems = []
    for path, html in _pages_html(site_dir).items():
        body = html.split("<body", 1)[-1]
        has_math = 'class="math' in body or "\\(" in body or "$$" in body
        loads_mathjax = "mathjax/tex-mml-chtml.js" in html
        if loads_mathjax and not has_math:
            problems.append(f"{path}: loads MathJax but has no math")
        if has_math and not loads_mathjax:
            problems.append(f"{path}: has math but does not load MathJax")
        loads_widgets = "embed-amd.js" in html
        if loads_widgets != (WIDGET_VIEW in html):
            problems.append(
                f"{path}: widget manager {'loaded' if loads_widgets else 'missing'} "
                f"but {'no' if loads_widgets else 'a'} widget view on the page"
            )
    assert not list(site_dir.rglob("axe*.js")), "axe-core is test-only: it must not be in the site"
    assert not problems, "\n".join(problems)


#: What a print of a number, tensor or array leaves behind instead of the number.
REPRS = (
    "np.float64(",
    "tensor(",
    "[['",
    "torch.Size(",
    "array(",
    "dtype=",
    "device=",
    "grad_fn=",
    "Parameter containing",
    "object at 0x",
)
FLOAT_NOISE = re.compile(r"\d\.\d*(?:0{7,}|9{7,})\d")  # 0.30000000000000004


def sloppy(text: str) -> bool:
    """A Python/NumPy/torch repr or float noise in text a reader sees."""
    return any(r in text for r in REPRS) or FLOAT_NOISE.search(text) is not None


def test_the_sloppy_patterns_catch_what_they_should():
    assert sloppy("causal -> torch.Size([2, 4, 5, 5])") and sloppy("x = 0.30000000000000004")
    assert sloppy("array([0.1, 0.2])") and sloppy("tensor([1.], device='cuda:0')")
    assert sloppy("{'A': np.float64(0.2506)}") and sloppy("K = [['0.1', '0.0']]")
    assert not sloppy("causal -> (2, 4, 5, 5)") and not sloppy("loss 1.38378, lr 1.00e-05")


def _output_text(html: str) -> list[str]:
    """What the page shows besides code: cell outputs and prose (inline code and code cells
    left out: ``torch.tensor(...)`` in code is code, not a repr)."""
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(html, "html.parser")
    article = soup.find("article") or soup
    for tag in article.select("div.cell_input, code, script, style, .highlight"):
        if not tag.find_parent("div", class_="cell_output"):
            tag.decompose()
    return [t for t in article.stripped_strings]


def _repr_offenders(site_dir: Path) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for path, html in _pages_html(site_dir).items():
        hits = [t[:80] for t in _output_text(html) if sloppy(t)]
        if hits:
            found[path] = hits
    return found


def test_no_python_reprs_in_outputs(site_dir):
    """Outputs and prose show numbers, not Python, NumPy or torch reprs (``np.float64(0.25)``,
    ``tensor(...)``, ``[['0.1', ...``, ``torch.Size([2, 4])``, an object's address) or float
    noise (``0.30000000000000004``), on every page. (Code, inline or in cells, is code.)"""
    found = _repr_offenders(site_dir)
    assert not found, "reprs or float noise shown to readers:\n" + "\n".join(
        f"{p}: {h[:3]}" for p, h in found.items()
    )


def test_worksheets_read_well_on_a_phone(browser, base_url, site_dir):
    """Chapter 5's worksheets and answer keys: a viewport, no sideways scrolling on a phone, no
    Python reprs, and a link back to their chapter that resolves."""
    sheets = sorted(site_dir.glob("_downloads/*/*_worksheet.html")) + sorted(
        site_dir.glob("_downloads/*/*_answers.html")
    )
    assert len(sheets) == 12, f"expected 6 worksheets and 6 keys, found {len(sheets)}"
    ctx = browser.new_context(viewport=PHONE, is_mobile=True, has_touch=True)
    page = ctx.new_page()
    problems = []
    try:
        for sheet in sheets:
            rel = sheet.relative_to(site_dir).as_posix()
            html = sheet.read_text(encoding="utf-8")
            if '<meta name="viewport"' not in html:
                problems.append(f"{rel}: no <meta name=viewport>")
            if any(r in html for r in REPRS) or "['" in html:
                problems.append(f"{rel}: shows a Python repr")
            page.goto(base_url + rel)
            width = page.evaluate(
                "document.documentElement.scrollWidth - document.documentElement.clientWidth"
            )
            if width > 1:
                problems.append(f"{rel}: {width}px wider than a phone")
            back = page.locator("nav a", has_text="Back to")
            if back.count() != 1:
                problems.append(f"{rel}: no link back to the chapter")
                continue
            href = back.first.evaluate("a => a.href")
            if _link_problem(href, site_dir, base_url) or not href.endswith(".html"):
                problems.append(f"{rel}: the link back ({href}) does not resolve")
    finally:
        ctx.close()
    assert not problems, "\n".join(problems)
