"""No page fetches Font Awesome's web font, and the icons it drew are still drawn (issue 29).

``book/_ext/course_icons.py`` writes the theme's icons as inline SVG and turns the theme's CSS
icons (an admonition's title, a download link, a GitHub link, the sidebar's chevron) into CSS
masks. Here Chromium opens a few pages offline, recording every request from the first: none
may be one of Font Awesome's fonts (``fa-solid-900.woff2`` and the like) or its stylesheet, and
``document.fonts`` holds no Font Awesome face that loaded. Each admonition's title still shows
its icon: a visible ``::after`` box with a mask from a ``data:`` SVG, painted in a colour.
"""

from __future__ import annotations

import re

import pytest
from browser_support import open_offline

pytestmark = [pytest.mark.browser, pytest.mark.slow]

# The home page, a chapter with admonitions of several kinds, a worked example with download
# links, the bibliography (GitHub links: the brands font) and the search page.
PAGES = [
    "book/intro.html",
    "book/04_attention.html",
    "book/worked/ex2_output_step.html",
    "book/bibliography.html",
    "search.html",
]
FONT_AWESOME = re.compile(r"fontawesome|/fa-(?:solid|regular|brands|v4compatibility)[\w-]*\.", re.I)

LOADED_FACES = """() => [...document.fonts].filter(f => /awesome/i.test(f.family)
  && f.status !== 'unloaded').map(f => `${f.family} ${f.weight}: ${f.status}`)"""

ADMONITION_ICONS = """() => [...document.querySelectorAll('.admonition > .admonition-title')]
  .filter(t => t.checkVisibility())
  .map(t => {
    const s = getComputedStyle(t, '::after');
    const mask = s.maskImage || s.webkitMaskImage || '';
    return {title: t.textContent.trim().slice(0, 40), content: s.content, mask: mask.slice(0, 40),
            width: parseFloat(s.width) || 0, height: parseFloat(s.height) || 0,
            paint: s.backgroundColor, font: s.fontFamily};
  })"""


@pytest.mark.parametrize("path", PAGES)
def test_no_page_requests_the_icon_font(browser, base_url, path):
    requests: list[str] = []
    context, page, problems = open_offline(browser, base_url, path, requests=requests)
    try:
        page.evaluate("document.fonts.ready.then(() => true)")
        faces = page.evaluate(LOADED_FACES)
    finally:
        context.close()
    assert len(requests) > 5, f"{path}: expected the page's requests to be recorded: {requests}"
    fetched = [u for u in requests if FONT_AWESOME.search(u)]
    assert not fetched, f"{path} requests Font Awesome: {fetched}"
    assert not faces, f"{path} uses Font Awesome's font faces: {faces}"
    assert not problems, f"{path}: {problems}"


def test_admonition_titles_still_show_their_icon(browser, base_url):
    context, page, problems = open_offline(browser, base_url, "book/04_attention.html")
    try:
        icons = page.evaluate(ADMONITION_ICONS)
    finally:
        context.close()
    assert len(icons) >= 3, f"expected several admonitions on the page, found {icons}"
    bad = [
        i
        for i in icons
        if i["content"] in ("none", "normal")
        or "data:image/svg+xml" not in i["mask"]
        or min(i["width"], i["height"]) < 8
        or i["paint"] in ("rgba(0, 0, 0, 0)", "transparent")
        or "awesome" in i["font"].lower()
    ]
    assert not bad, f"admonition titles without a drawn icon: {bad}"
    assert not problems, problems
