"""Helpers for the browser tests: which pages, where the site is, a local server, Chromium.

While iterating, point the tests at a build of your own instead of the shared clean build:
``COURSE_BROWSER_BUILD=/tmp/me-build/_build`` (the ``_build`` folder, HTML in ``html/``), and
``COURSE_BROWSER_ROOT=/path/to/book/root`` when that build came from another source folder, and
``COURSE_BROWSER_OUTPUT=/tmp/me-out`` to keep screenshots and the report out of ``test-output/``.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from tools import ROOT
from tools.localserver import CHROMIUM_ARGS, chromium_path, serve  # noqa: F401  (for the fixtures)

# Screenshots and the report; COURSE_BROWSER_OUTPUT moves them (a helper's own run).
TEST_OUTPUT = Path(os.environ.get("COURSE_BROWSER_OUTPUT") or ROOT / "test-output")
SCREENSHOTS = TEST_OUTPUT / "screenshots"

# axe-core, the accessibility engine the browser tests inject into each page (an npm
# devDependency, package.json; never copied into the site).
AXE_JS = ROOT / "node_modules" / "axe-core" / "axe.min.js"

# The functions the browser tests run in a page (page.evaluate), one file each.
BROWSER_JS = ROOT / "tests" / "browser_js"


def browser_js(name: str) -> str:
    """The JavaScript function in ``tests/browser_js/<name>``, for ``page.evaluate``."""
    return (BROWSER_JS / name).read_text(encoding="utf-8")


# Debian's Chromium, driven by Playwright; it must never try to reach the network on its own.


def source_root() -> Path:
    return Path(os.environ.get("COURSE_BROWSER_ROOT") or ROOT).resolve()


def custom_build() -> Path | None:
    value = os.environ.get("COURSE_BROWSER_BUILD")
    return Path(value).resolve() if value else None


def toc_pages(root: Path | None = None) -> list[str]:
    """Every page in ``_toc.yml`` as its HTML path relative to the site root."""
    from tools.toc import toc_files

    return [f"{name}.html" for name in toc_files(root or source_root())]


def html_ids(path: Path) -> set[str]:
    """Every ``id`` and ``name`` anchor in an HTML file (targets of ``#fragment`` links)."""
    text = path.read_text(encoding="utf-8", errors="replace")
    return set(re.findall(r'\s(?:id|name)="([^"]+)"', text))


def run_id() -> str:
    """Identifies this pytest run across pytest-xdist workers and the builds it started
    (``COURSE_TEST_RUN``, set in a build's process: tests/book_builds.py)."""
    return (
        os.environ.get("COURSE_TEST_RUN")
        or os.environ.get("PYTEST_XDIST_TESTRUNUID")
        or f"pid-{os.getpid()}"
    )


def merge_report(path: Path, part: str, data: dict) -> dict:
    """Add one worker's ``data`` under ``parts[part]`` of the JSON report at ``path`` (kept
    only for this run), add up the numeric fields over all parts into ``totals``, and
    return the whole report. Safe under pytest-xdist (file lock)."""
    import json

    from filelock import FileLock

    path.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(path) + ".lock"):
        report = json.loads(path.read_text()) if path.exists() else {}
        if report.get("run_id") != run_id():
            report = {"run_id": run_id(), "parts": {}}
        report["parts"][part] = data
        totals: dict = {}
        for p in report["parts"].values():
            for key, value in p.items():
                if isinstance(value, (int, float)) and not isinstance(value, bool):
                    totals[key] = round(totals.get(key, 0) + value, 1)
        report["totals"] = totals
        path.write_text(json.dumps(report, indent=1) + "\n")
    return report


def open_offline(
    browser, base_url: str, path: str, timeout_ms: int = 120_000, requests: list | None = None
):
    """Open ``path`` of the built site at 1366x900 with no network, as in a classroom:
    -> (context, page, problems). Every request outside the site is aborted and recorded, as is
    every uncaught page error; the libraries must come from the site. The long timeout is for a
    loaded machine. ``requests``, if given, receives the URL of every request the page makes,
    from the first. The caller closes the context."""
    context = browser.new_context(viewport={"width": 1366, "height": 900})
    problems: list[str] = []

    def route(r):
        if requests is not None:
            requests.append(r.request.url)
        if r.request.url.startswith(base_url) or r.request.url.startswith(("data:", "blob:")):
            r.continue_()
        else:
            problems.append(f"external request: {r.request.url}")
            r.abort()

    context.route("**/*", route)
    page = context.new_page()
    page.on("pageerror", lambda exc: problems.append(f"uncaught: {exc}"))
    page.goto(base_url + path, wait_until="load", timeout=timeout_ms)
    return context, page, problems
