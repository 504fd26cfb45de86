"""Hover previews (``book/_ext/course_previews.py``) in Chromium, offline: every request outside
the local site is blocked. Resting the pointer on a glossary term, a citation, a cross-reference
to a figure on the page and one to another chapter shows the target's text in a box; a
keyboard focus shows it too and Escape closes it; no page error, no request leaves the site.
"""

from __future__ import annotations

import re

import pytest
from browser_support import open_offline

pytestmark = [pytest.mark.browser, pytest.mark.slow]

PAGE = "book/07_gradients.html"  # glossary terms, citations, figures, other chapters


@pytest.fixture(scope="module")
def page(browser, base_url):
    context, pg, problems = open_offline(browser, base_url, PAGE)
    pg.problems = problems
    yield pg
    context.close()


def _text(html: str) -> str:
    from bs4 import BeautifulSoup

    return " ".join(BeautifulSoup(html, "html.parser").get_text(" ").split())


def _preview_after(page, action) -> str:
    page.keyboard.press("Escape")
    page.mouse.move(1, 1)
    page.wait_for_selector(".course-preview", state="detached", timeout=5_000)
    action()
    box = page.wait_for_selector(".course-preview", state="visible", timeout=15_000)
    return " ".join(box.inner_text().split())


def _first_sentence_words(text: str, n: int = 6) -> str:
    return " ".join(text.split()[:n])


def test_a_glossary_term_shows_its_definition(page, site_dir):
    link = page.locator('article a[href^="glossary.html#term-"]').first
    term = link.get_attribute("href").split("#", 1)[1]
    glossary = (site_dir / "book" / "glossary.html").read_text(encoding="utf-8")
    m = re.search(rf'<dt id="{term}"[^>]*>.*?</dt>\s*<dd>(.*?)</dd>', glossary, re.DOTALL)
    assert m, f"no glossary entry {term}"
    definition = _text(m.group(1))
    shown = _preview_after(page, lambda: link.hover())
    assert _first_sentence_words(definition) in shown, (definition[:80], shown[:200])
    assert not page.problems, page.problems


def test_a_citation_shows_its_reference(page, site_dir):
    link = page.locator('article a[href^="bibliography.html#"]').first
    ref = link.get_attribute("href").split("#", 1)[1]
    bib = (site_dir / "book" / "bibliography.html").read_text(encoding="utf-8")
    m = re.search(rf'<div class="citation" id="{ref}"[^>]*>(.*?)</div>', bib, re.DOTALL)
    assert m, f"no bibliography entry {ref}"
    shown = _preview_after(page, lambda: link.hover())
    entry = re.search(r"<p>(.*?)</p>", m.group(1), re.DOTALL)  # the reference, not its label
    assert _first_sentence_words(_text(entry.group(1)), 4) in shown, shown[:200]
    assert not page.problems, page.problems


def test_a_figure_reference_shows_the_figure(page):
    link = page.locator('article a[href^="#fig-"]').first
    _preview_after(page, lambda: link.hover())
    img = page.locator(".course-preview img").first
    img.wait_for(state="visible", timeout=15_000)
    assert page.evaluate("document.querySelector('.course-preview img').naturalWidth") > 0
    assert page.locator(".course-preview figcaption").count() == 1
    assert not page.problems, page.problems


def test_a_chapter_reference_shows_its_heading_and_is_keyboard_reachable(page, site_dir):
    link = page.locator('article a.reference.internal[href^="0"][href*=".html#"]').first
    target = link.get_attribute("href")
    shown = _preview_after(page, lambda: link.focus())
    title = re.search(
        r"<title>(.*?) &#8212;", (site_dir / "book" / target.split("#")[0]).read_text()
    )
    assert title and _text(title.group(1))[:20] in shown, (target, shown[:200])
    assert link.get_attribute("aria-describedby") == "course-preview"
    page.keyboard.press("Escape")
    page.wait_for_selector(".course-preview", state="detached", timeout=5_000)
    assert not page.problems, page.problems
