"""The built site, as a reader meets it: Debian's Chromium (driven by Playwright) loads every page
in the table of contents from a local server, with every request outside 127.0.0.1 blocked, so
the site must render offline (MathJax and the widget manager are served by the site itself).

Per page: no JavaScript errors, no failed requests to the site, math rendered (no raw TeX left),
images loaded with alt text or a caption, internal links and cross-references resolved, an
"Open in Colab" link on chapter pages whose ``.ipynb`` exists in the repository, and a
screenshot in light and dark mode under ``test-output/screenshots/``. Plus: a widget renders,
and the site's search finds "attention". Totals go to ``test-output/browser-report.json``.

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

from browser_support import (CHROMIUM_ARGS, SCREENSHOTS, TEST_OUTPUT, chromium_path,
                             custom_build, html_ids, merge_report, serve, source_root,
                             toc_pages)
from tools import colab

pytestmark = [pytest.mark.browser, pytest.mark.slow]

PAGES = toc_pages()
COLAB_RE = re.compile(r"^https://colab\.research\.google\.com/github/([^/]+)/([^/]+)/blob/"
                      r"([^/]+)/(.+)$")
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


# --------------------------------------------------------------------------- fixtures
@pytest.fixture(scope="session")
def chromium() -> str:
    path = chromium_path()
    if path is None:
        pytest.skip("browser tests need Debian's Chromium: `apt-get install -y chromium` "
                    "(Playwright cannot download a browser here)")
    return path


@pytest.fixture(scope="session")
def site_dir(chromium, request) -> Path:
    """The HTML folder: COURSE_BROWSER_BUILD's, or the shared clean build's."""
    build = custom_build() or request.getfixturevalue("built_book")
    html = Path(build) / "html"
    assert (html / "index.html").exists(), f"no built site in {html}"
    return html


@pytest.fixture(scope="session")
def base_url(site_dir):
    with serve(site_dir) as url:
        yield url


@pytest.fixture(scope="session")
def report():
    """Totals for the closing note, in test-output/browser-report.json (merged over
    pytest-xdist workers)."""
    data = {"pages_checked": 0, "internal_links_checked": 0, "math_elements_checked": 0,
            "images_checked": 0, "colab_links_checked": 0, "widgets_rendered": 0,
            "screenshots": 0, "blocked_external_requests": [], "pages": {}}
    start = time.perf_counter()
    yield data
    data["seconds"] = round(time.perf_counter() - start, 1)
    data["unique_internal_links_checked"] = len(_LINK_CACHE)
    data["blocked_external_requests"] = sorted(set(data["blocked_external_requests"]))
    merge_report(TEST_OUTPUT / "browser-report.json",
                 os.environ.get("PYTEST_XDIST_WORKER", "main"), data)


@pytest.fixture(scope="session")
def browser(chromium):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS, headless=True)
        yield b
        b.close()


class Visit:
    """One page load with everything a reader's browser would complain about recorded."""

    def __init__(self, browser, base_url: str, report: dict):
        self.base, self.report = base_url, report
        self.errors: list[str] = []
        self.failed: list[str] = []
        self.context = browser.new_context(viewport={"width": 1280, "height": 900},
                                           color_scheme="light")
        self.context.route("**/*", self._route)
        self.page = self.context.new_page()
        self.page.on("pageerror", lambda exc: self.errors.append(f"uncaught: {exc}"))
        self.page.on("console", self._console)
        self.page.on("requestfailed", lambda r: self._own(r.url) and self.failed.append(
            f"{r.url} ({r.failure})"))
        self.page.on("response", lambda r: self._own(r.url) and r.status >= 400 and
                     self.failed.append(f"{r.url} (HTTP {r.status})"))

    def _own(self, url: str) -> bool:
        return url.startswith(self.base)

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
        self.page.goto(self.base + path, wait_until="load")
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
WAIT_FOR_MATHJAX = """async () => {
  if (!document.querySelector('.math')) return 'no math';
  for (let i = 0; i < 200 && !(window.MathJax && MathJax.startup && MathJax.startup.promise); i++)
    await new Promise(r => setTimeout(r, 100));
  if (!(window.MathJax && MathJax.startup && MathJax.startup.promise)) return 'MathJax never started';
  await MathJax.startup.promise;
  return 'typeset';
}"""

MATH_STATE = """() => {
  const maths = [...document.querySelectorAll('.math')];
  const unrendered = maths.filter(e => !e.querySelector('mjx-container'))
                          .map(e => e.textContent.trim().slice(0, 60));
  const raw = [];
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  const skip = 'pre, code, script, style, textarea, .highlight, mjx-assistive-mml';
  for (let n = walker.nextNode(); n; n = walker.nextNode()) {
    const t = n.textContent;
    if ((t.includes('\\\\(') || t.includes('\\\\[') || t.includes('$$')) && !n.parentElement.closest(skip))
      raw.push(t.trim().slice(0, 80));
  }
  return {count: maths.length, unrendered, raw};
}"""

IMAGES = """async () => {
  const imgs = [...document.images];
  await Promise.all(imgs.map(i => i.complete ? null : new Promise(r => {
    i.addEventListener('load', r); i.addEventListener('error', r); setTimeout(r, 15000); })));
  return imgs.map(i => ({src: i.currentSrc || i.src, width: i.naturalWidth,
    alt: (i.getAttribute('alt') || '').trim(),
    caption: !!(i.closest('figure') && i.closest('figure').querySelector('figcaption')
                && i.closest('figure').querySelector('figcaption').textContent.trim())}));
}"""

LINKS = """() => ({
  hrefs: [...document.querySelectorAll('a[href]')].map(a => a.href),
  unresolved_xrefs: [...document.querySelectorAll('.xref')].filter(e => !e.closest('a'))
                      .map(e => e.textContent.trim()),
})"""


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


CHAPTERS = {md.relative_to(source_root()).with_suffix(".html").as_posix()
            for md in colab.chapter_paths(source_root())}


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
    for img in images:
        if img["width"] == 0:
            problems.append(f"image did not load: {img['src'][:100]}")
        if not (img["alt"] or img["caption"]):
            problems.append(f"image without alt text or caption: {img['src'][:100]}")
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
                problems.append(f"Colab button reads {button.first.inner_text()!r}, "
                                "not 'Open in Colab'")
            toggle.click()  # close the menu again before the screenshots
    problems += [why for why in map(_check_colab_href, hrefs) if why]

    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"{_slug(path)}-light.png"), full_page=True)
    light_bg = page.evaluate("getComputedStyle(document.body).backgroundColor")
    # The reader's system switches to dark: the theme ("auto" mode) must follow it.
    page.emulate_media(color_scheme="dark")
    page.wait_for_function("document.documentElement.dataset.theme === 'dark'", timeout=5_000)
    page.wait_for_timeout(200)
    dark_bg = page.evaluate("getComputedStyle(document.body).backgroundColor")
    page.screenshot(path=str(SCREENSHOTS / f"{_slug(path)}-dark.png"), full_page=True)
    if light_bg == dark_bg:
        problems.append(f"dark mode did not change the page background ({light_bg})")

    problems += [f"JavaScript error: {e}" for e in v.errors]
    problems += [f"failed request to the site: {f}" for f in v.failed]

    report["pages_checked"] += 1
    report["internal_links_checked"] += len(internal)
    report["math_elements_checked"] += math["count"]
    report["images_checked"] += len(images)
    report["colab_links_checked"] += len(hrefs)
    report["screenshots"] += 2
    report["pages"][path] = {"math": math["count"], "images": len(images),
                             "internal_links": len(internal), "colab_links": len(hrefs),
                             "problems": len(problems)}
    assert not problems, f"{path}:\n  " + "\n  ".join(problems)


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
    pages = [p for p in PAGES if (site_dir / p).exists()
             and WIDGET_VIEW in (site_dir / p).read_text(encoding="utf-8")]
    assert pages, "no page in the table of contents has a widget (course_lib.viz.widgets.explorer)"
    for path in pages:
        v = visit(path)
        widget = v.page.locator(".widget-interact").first
        widget.wait_for(state="visible", timeout=30_000)
        box = widget.bounding_box()
        assert box and box["height"] > 20, f"{path}: the widget is empty"
        controls = v.page.locator(".widget-interact .widget-slider, .widget-interact select, "
                                  ".widget-interact .widget-dropdown")
        assert controls.count() > 0, f"{path}: the widget has no controls"
        widget.screenshot(path=str(SCREENSHOTS / f"{_slug(path)}-widget.png"))
        assert not v.errors, f"{path}: JavaScript errors: {v.errors}"
        assert not v.failed, f"{path}: failed requests: {v.failed}"
        report["widgets_rendered"] += v.page.locator(".widget-interact").count()


def test_search_finds_attention(visit):
    v = visit("search.html?q=attention")
    results = v.page.locator("#search-results li")
    results.first.wait_for(state="visible", timeout=30_000)
    titles = [results.nth(i).inner_text() for i in range(min(results.count(), 20))]
    assert titles, "searching for 'attention' found nothing"
    assert not v.errors, f"search page: JavaScript errors: {v.errors}"
