"""Hover previews (``book/_ext/course_previews.py``) in Chromium, offline: every request outside
the local site is blocked. Resting the pointer on a glossary term, a citation, a cross-reference
to a figure on the page and one to another chapter shows the target's text in a box; a
keyboard focus shows it too and Escape closes it; no page error, no request leaves the site.

At 1280x800 (issue 35): every glossary term, each synonym of an entry too ("LoRA" and
"low-rank adaptation" share one definition), previews its definition; a link to every page of
the table of contents previews its title and first paragraph, not the title alone; and axe finds
nothing with a preview of each kind open (its copy of a glossary entry or a bibliography entry
stays inside a list of its kind).
"""

from __future__ import annotations

import re

import pytest
from browser_support import AXE_JS, browser_js, open_offline, toc_pages

pytestmark = [pytest.mark.browser, pytest.mark.slow]

PAGE = "book/07_gradients.html"  # glossary terms, citations, figures, other chapters
PREVIEW_OF = browser_js("preview-of.js")  # a link's preview as a keyboard reader opens it


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


def _words_in(text: str, shown: str, n: int = 6) -> bool:
    """The first ``n`` words of ``text`` appear in order in ``shown`` (punctuation, spacing
    and the math taken out of both aside)."""
    want, have = re.findall(r"\w+", text)[:n], re.findall(r"\w+", shown)
    return bool(want) and any(have[i : i + len(want)] == want for i in range(len(have)))


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
    # and the section's first paragraph, not its title alone (issue 35)
    html = (site_dir / "book" / target.split("#")[0]).read_text(encoding="utf-8")
    first = _first_paragraph(html, target.split("#")[1])
    words = page.evaluate(PREVIEW_OF, [target])[0]["words"]
    assert first and _words_in(first, words, 8), (target, first[:80], words[:200])
    assert not page.problems, page.problems


# --------------------------------------------------------------------------- issue 35, at 1280 px
LAPTOP = {"width": 1280, "height": 800}


@pytest.fixture(scope="module")
def laptop(browser, base_url):
    context, pg, problems = open_offline(browser, base_url, PAGE)
    pg.set_viewport_size(LAPTOP)
    pg.problems = problems
    yield pg
    context.close()


def _glossary_entries(site_dir) -> dict[str, tuple[list[str], str]]:
    """term id -> (the entry's terms, its definition's text), from the built glossary, in the
    glossary's order; the synonyms of an entry are the <dt>s before its one <dd>."""
    from bs4 import BeautifulSoup

    soup = BeautifulSoup((site_dir / "book" / "glossary.html").read_text(), "html.parser")
    for x in soup.select("a.headerlink, span.math, div.math"):  # the definition's words
        x.decompose()
    entries: dict[str, tuple[list[str], str]] = {}
    for dl in soup.select("dl.glossary"):
        terms: list = []
        for item in dl.find_all(["dt", "dd"], recursive=False):
            if item.name == "dt":
                terms.append(item)
                continue
            names = [" ".join(t.get_text(" ").split()) for t in terms]
            for t in terms:
                entries[t["id"]] = (names, " ".join(item.get_text(" ").split()))
            terms = []
    return entries


def test_every_glossary_term_and_synonym_previews_its_definition(laptop, site_dir):
    entries = _glossary_entries(site_dir)
    synonyms = [i for i, (names, _) in entries.items() if len(names) > 1]
    assert len(entries) > 100 and len(synonyms) > 10, (len(entries), len(synonyms))
    shown = laptop.evaluate(PREVIEW_OF, [f"glossary.html#{i}" for i in entries])
    problems = []
    for (term, (names, definition)), got in zip(entries.items(), shown):
        if not _words_in(definition, got["words"]):
            problems.append(f"{term}: {got['text'][:80]!r}")
        elif not all(_words_in(n, got["words"]) for n in names):
            problems.append(f"{term}: not all of {names} named: {got['text'][:80]!r}")
    assert not problems, (
        f"{len(problems)} of {len(entries)} terms ({len(synonyms)} synonyms) preview no "
        "definition:\n  " + "\n  ".join(problems)
    )
    assert not laptop.problems, laptop.problems


#: Where a paragraph is not the page's prose: the learning objectives, a figure, a cell.
_ASIDE_TAGS = {"figure", "table", "aside", "nav"}
_ASIDE_CLASSES = {"admonition", "cell", "cell_output", "sd-card", "topic"}


def _first_paragraph(html: str, anchor: str | None = None) -> str:
    """The text of the first paragraph of prose of a page's first section, or of the section
    ``anchor`` names, as the preview should pick it: the first in the section or its
    subsections (a chapter opens with its learning objectives), not in any of ``_ASIDE_*``."""
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(html, "html.parser")
    section = soup.select_one("article section")
    if anchor:
        section = soup.find(id=anchor)
        if section is not None and section.name != "section":
            # a label: in a section before its heading (a chapter's), or before a section
            heading = section.find_next_sibling()
            inside = heading is not None and heading.name in ("h1", "h2", "h3", "h4")
            section = section.parent if inside else section.find_next("section")
    if section is None:
        return ""

    def prose(p) -> bool:
        for parent in p.parents:
            if parent is section:
                return bool(p.get_text().strip())
            if parent.name in _ASIDE_TAGS or _ASIDE_CLASSES & set(parent.get("class") or []):
                return False
        return False

    first = next((p for p in section.find_all("p") if prose(p)), None)
    if first is None:
        return ""
    for x in first.select("span.math"):  # its words (the box's math is typeset)
        x.decompose()
    return " ".join(first.get_text(" ").split())


def test_a_link_to_any_page_previews_its_title_and_first_paragraph(laptop, site_dir):
    """{doc} links (the intro's cards, "see Chapter 12") name a page, not a fragment: the box
    shows its title and its first paragraph."""
    pages = [p for p in toc_pages() if p != "book/07_gradients.html"]
    # PAGE is book/07_gradients.html: the hrefs are relative to book/
    hrefs = [("../" + p) if not p.startswith("book/") else p.removeprefix("book/") for p in pages]
    shown = laptop.evaluate(PREVIEW_OF, hrefs)
    problems = []
    for path, got in zip(pages, shown):
        html = (site_dir / path).read_text(encoding="utf-8")
        title = re.search(r"<h1>((?:(?!</h1>).)*?)<a class=\"headerlink", html, re.S)
        first = _first_paragraph(html)
        if not title or not _words_in(_text(title.group(1)), got["words"]):
            problems.append(f"{path}: no title in {got['text'][:80]!r}")
        elif not first or not _words_in(first, got["words"], 8):
            problems.append(
                f"{path}: not its first paragraph ({first[:60]!r}): {got['text'][:120]!r}"
            )
    assert not problems, f"{len(problems)} of {len(pages)} pages:\n  " + "\n  ".join(problems)
    assert not laptop.problems, laptop.problems


AXE_RUN = browser_js("axe-run.js")


@pytest.mark.parametrize("kind", ["synonym", "term", "citation", "figure", "chapter", "section"])
def test_axe_finds_nothing_with_a_preview_open(laptop, site_dir, kind):
    """axe-core, every rule, on the page with the box open (the box's copy of a glossary entry
    was a <dt>/<dd> outside any <dl>: dlitem; of a bibliography entry, a list item outside its
    list: aria-required-parent)."""
    entries = _glossary_entries(site_dir)
    # an entry's first term (the <dt> with its synonyms after it), and a term without synonyms
    first = next(i for i, (names, _) in entries.items() if len(names) > 1)
    single = next(i for i, (names, _) in entries.items() if len(names) == 1)
    selector = {
        "citation": 'article a[href^="bibliography.html#"]',
        "figure": 'article a[href^="#fig-"]',
        "section": 'article a.reference.internal[href^="0"][href*=".html#"]',
    }
    href = {
        "synonym": f"glossary.html#{first}",
        "term": f"glossary.html#{single}",
        "chapter": "08_training.html",
    }.get(kind) or laptop.locator(selector[kind]).first.get_attribute("href")
    if not laptop.evaluate("typeof window.axe !== 'undefined'"):
        laptop.add_script_tag(path=str(AXE_JS))
    laptop.evaluate(
        "(href) => { const p = document.createElement('p'); p.id = 'axe-probe';"
        " const a = document.createElement('a'); a.className = 'reference internal';"
        " a.href = href; a.textContent = 'preview probe'; p.append(a);"
        " document.querySelector('article section').prepend(p); a.focus(); }",
        href,
    )
    box = laptop.wait_for_selector(".course-preview", state="visible", timeout=15_000)
    assert box.inner_text().strip(), f"{kind}: an empty preview"
    try:
        violations = laptop.evaluate(AXE_RUN, None)
    finally:
        laptop.evaluate("document.getElementById('axe-probe').remove()")
        laptop.keyboard.press("Escape")
    assert not violations, f"{kind} ({href}): " + "; ".join(
        f"{v['impact']} {v['id']}: {v['nodes'][:2]}" for v in violations
    )
