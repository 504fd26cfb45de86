"""The search page on the built site, in Chromium, offline: result summaries read as text.

Sphinx's search page cuts each result's summary from the page's text, where math is MathJax's
TeX source; book/_ext/course_search.py gives every math element a plain-text reading and
serves a small script, on search.html only, that puts it in place of the TeX. Here a reader
searches for words that stand next to formulas and reads the summaries: the search term is
there, the TeX is not. (The conversion itself: tests/book/test_search.py.)

Uses the site build of tests/book/test_browser.py (``COURSE_BROWSER_BUILD`` to point at your own).
"""

from __future__ import annotations

import re

import pytest
from browser_support import browser_js, open_offline

pytestmark = [pytest.mark.browser, pytest.mark.slow]

SCRIPT = "course-search.js"
# TeX a reader should not see in a summary: \( \) \[ \], commands, braces, ^\top.
TEX = re.compile(r"\\[()\[\]]|\\[A-Za-z]+|[{}]|\^\\top")
# Words that sit next to math on many pages (attention, cross-entropy, the worked examples).
QUERIES = ["softmax", "cross-entropy", "logits"]

# The search has finished and every result has its summary (fetched after the result is listed)
# or its description.
FINISHED = browser_js("search-finished.js")
SUMMARIES = browser_js("search-summaries.js")


@pytest.fixture(scope="module")
def open_search(browser, base_url):
    """open_search(query) -> (results, problems): the search page's results, offline."""
    contexts = []

    def search(query: str):
        context, page, problems = open_offline(browser, base_url, f"search.html?q={query}")
        contexts.append(context)
        page.wait_for_function(FINISHED, timeout=60_000)
        search.last_page = page
        return page.evaluate(SUMMARIES), problems

    yield search
    for context in contexts:
        context.close()


def test_the_script_is_on_the_search_page_only(site_dir):
    assert SCRIPT in (site_dir / "search.html").read_text(encoding="utf-8")
    assert (site_dir / "_static" / SCRIPT).is_file()
    carrying = [
        p.relative_to(site_dir).as_posix()
        for p in site_dir.rglob("*.html")
        if p.name != "search.html" and SCRIPT in p.read_text(encoding="utf-8")
    ]
    assert not carrying, f"{SCRIPT} loaded outside the search page: {carrying[:5]}"


def test_math_carries_its_plain_text(site_dir):
    html = (site_dir / "book" / "04_attention.html").read_text(encoding="utf-8")
    pasted = (site_dir / "book" / "worked" / "ex1_forward.html").read_text(encoding="utf-8")
    assert re.search(r'class="[^"]*text_latex[^"]*math[^"]*"[^>]*data-course-text="e\^', pasted), (
        "the glued inline math of Example 1 carries no plain-text reading"
    )
    maths = re.findall(r'<(?:span|div) class="[^"]*\bmath\b[^"]*"([^>]*)>', html)
    assert len(maths) > 20, "expected many formulas in Chapter 4"
    bare = [m for m in maths if "data-course-text=" not in m]
    assert not bare, f"{len(bare)} of {len(maths)} math elements without a plain-text reading"


@pytest.mark.parametrize("query", QUERIES)
def test_summaries_show_text_not_tex(query, open_search):
    results, problems = open_search(query)
    assert results, f"searching for {query!r} found nothing"
    with_summary = [r for r in results if r["summary"].strip()]
    assert len(with_summary) >= 3, f"{query!r}: too few summaries: {results[:3]}"
    tex = [
        (r["title"], TEX.findall(r["summary"]), r["summary"][:160])
        for r in with_summary
        if TEX.search(r["summary"])
    ]
    assert not tex, f"{query!r}: TeX in {len(tex)} summaries, e.g. {tex[:3]}"
    # Sphinx searches each word of the query and cuts the summary around the last one it finds
    words = [w for w in re.split(r"\W+", query.lower()) if w]
    missing = [
        r["title"] for r in with_summary if not any(w in r["summary"].lower() for w in words)
    ]
    assert not missing, f"{query!r} missing from the summaries of {missing[:5]}"
    assert not problems, f"search page: {problems}"


# What a code cell leaves in a summary: an import, a print, a definition, an assignment to _.
CODE = re.compile(r"\bimport \w+|\bprint\(|\bdef \w+\(|\b_ = |\bglue\(|code cell content")
CODE_SELECTOR = "div.cell_input, div.cell_output, div.highlight, pre, details.hide > summary"
LINKED_SUMMARIES = """() => [...document.querySelectorAll("#search-results li")].map((li) => ({
  href: (li.querySelector("a") || {href: ""}).href,
  summary: (li.querySelector("p.context") || {textContent: ""}).textContent,
}))"""


def _prose(path) -> str:
    """A page's text without its code cells, outputs and code blocks."""
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(path.read_text(encoding="utf-8"), "html.parser")
    main = soup.select_one('[role="main"]') or soup
    for tag in main.select(CODE_SELECTOR):
        tag.decompose()
    return " ".join(main.get_text(" ").split()).lower()


@pytest.mark.parametrize("query", ["torch", "model", "loss"])
def test_summaries_are_prose_where_the_prose_has_the_word(query, open_search, site_dir):
    """Words that code cells use often: where a page's prose has the word, its summary is cut
    from the prose (code cells, outputs and code blocks left out), never a line of code."""
    import urllib.parse

    open_search(query)  # the search, its summaries
    page = open_search.last_page
    results = page.evaluate(LINKED_SUMMARIES)
    checked, code = 0, []
    for r in results:
        if not r["summary"].strip():
            continue
        rel = urllib.parse.urlsplit(r["href"]).path.lstrip("/")
        source = site_dir / rel
        if not source.is_file() or query not in _prose(source):
            continue
        checked += 1
        if CODE.search(r["summary"]):
            code.append((rel, r["summary"][:160]))
    assert checked >= 3, f"{query!r}: too few pages with it in the prose: {len(results)} results"
    assert not code, f"{query!r}: code in {len(code)} summaries, e.g. {code[:3]}"
