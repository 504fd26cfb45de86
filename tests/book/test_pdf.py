"""The whole-book PDF (issue 17): ``tools/pdf.py`` prints the single-page build with Chromium.

Fast: the tool's helpers (the single page's path, the server, the outline and its pages read
back with pypdf, the footer) and the site's link helpers (``book/_ext/course_site.py``).

Slow (the clean test build, ``built_book``, prints the PDF before the HTML build where
Chromium is installed): the PDF opens, has a book's page count, the title of every page of the
book, an answer of every chapter's "Check your understanding" and a five-level tab other than
the first (so dropdowns and tabs were expanded), no raw TeX in its text (MathJax finished),
nothing wider than the page, and the site links it.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import re
import unicodedata
import urllib.request
from pathlib import Path
from typing import NamedTuple

import pytest

from tools import ROOT
from tools import pdf as tool
from tools.toc import page_path, toc_files

logging.getLogger("pypdf").setLevel(logging.ERROR)  # Chromium's trailer undercounts objects


def _course_site():
    spec = importlib.util.spec_from_file_location(
        "course_site_pdf", ROOT / "book/_ext/course_site.py"
    )
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


# --------------------------------------------------------------------------- fast
def test_start_page_follows_the_redirect(tmp_path):
    (tmp_path / "index.html").write_text(
        '<meta http-equiv="Refresh" content="0; url=book/intro.html" />'
    )
    assert tool.start_page(tmp_path) == "book/intro.html"
    (tmp_path / "index.html").write_text("<html><body>the book</body></html>")
    assert tool.start_page(tmp_path) == "index.html"


def test_start_page_without_a_build_says_how_to_make_one(tmp_path):
    with pytest.raises(ValueError, match="singlehtml"):
        tool.start_page(tmp_path / "missing")


def test_the_single_page_is_served_at_the_root(tmp_path):
    """Sphinx writes the single page to book/intro.html with links relative to the root; the
    server offers it at the root, where those links resolve."""
    (tmp_path / "book").mkdir()
    (tmp_path / "book" / "intro.html").write_text("the whole book")
    (tmp_path / "_static").mkdir()
    (tmp_path / "_static" / "a.css").write_text("p {}")
    with tool.serve(tmp_path, "book/intro.html") as url:
        assert url.endswith("/" + tool.SERVED_AS)
        assert urllib.request.urlopen(url).read() == b"the whole book"
        base = url.rsplit("/", 1)[0]
        assert urllib.request.urlopen(base + "/_static/a.css").read() == b"p {}"


def test_footer_has_the_page_number_and_an_escaped_title():
    footer = tool.footer_template("A & B")
    assert 'class="pageNumber"' in footer and 'class="totalPages"' in footer
    assert "A &amp; B" in footer and "font-size" in footer


def test_outline_tree_nests_worked_pages_and_drops_missing_targets():
    entries = [
        {"id": "intro", "text": "Intro", "nested": 0, "sections": [{"id": "s1", "text": "S1"}]},
        {"id": "ch5", "text": "5. Worked", "nested": 0, "sections": []},
        {
            "id": "ex1",
            "text": "5.1 Ex 1",
            "nested": 1,
            "sections": [{"id": "step1", "text": "Step 1"}, {"id": "gone", "text": "Gone"}],
        },
        {"id": "nowhere", "text": "Missing", "nested": 0, "sections": []},
        {"id": "ch6", "text": "6. Loss", "nested": 0, "sections": []},
    ]
    pages = {"intro": 3, "s1": 4, "ch5": 10, "ex1": 12, "step1": 13, "ch6": 20}
    assert tool.outline_tree(entries, pages) == [
        ("Intro", 3, [("S1", 4, [])]),
        ("5. Worked", 10, [("5.1 Ex 1", 12, [("Step 1", 13, [])])]),
        ("6. Loss", 20, []),
    ]


def test_outline_and_destinations_round_trip_through_pypdf(tmp_path):
    """``destination_pages`` reads named destinations as Chromium writes them; ``add_outline``
    writes bookmarks that a PDF reader (pypdf) finds on the right pages."""
    from pypdf import PdfReader, PdfWriter

    path = tmp_path / "book.pdf"
    writer = PdfWriter()
    for _ in range(4):
        writer.add_blank_page(width=595, height=842)
    writer.add_named_destination("chapter-one", 1)
    writer.add_named_destination("a-section", 2)
    with open(path, "wb") as f:
        writer.write(f)
    pages = tool.destination_pages(path)
    assert pages == {"chapter-one": 2, "a-section": 3}
    tool.add_outline(
        path, [("1. One", pages["chapter-one"], [("1.1 Section", pages["a-section"], [])])]
    )
    reader = PdfReader(str(path))
    top, children = reader.outline[0], reader.outline[1]
    assert top.title == "1. One" and reader.get_destination_page_number(top) == 1
    assert children[0].title == "1.1 Section"
    assert reader.get_destination_page_number(children[0]) == 2
    assert len(reader.pages) == 4
    assert tool.destination_pages(path) == pages  # the named destinations survive


def test_site_link_goes_after_the_landing_pages_first_paragraph():
    site = _course_site()
    link = site.pdf_link("../" + site.PDF)
    assert 'href="../understanding-transformers.pdf"' in link and "PDF" in link
    body = "<section><h1>Title</h1><p>First.</p><p>Second.</p></section>"
    out = site.insert_after_first_paragraph(body, "<p>LINK</p>")
    assert out.index("First.") < out.index("LINK") < out.index("Second.")
    assert site.insert_after_first_paragraph("<div>no paragraph</div>", "<p>L</p>").startswith(
        "<p>L</p>"
    )
    assert site.PDF == tool.PDF_NAME


# --------------------------------------------------------------------------- slow: the PDF
def _squash(text: str) -> str:
    """Text without whitespace, ligatures (fi, ff) and quotes normalised: PDF extraction breaks
    lines anywhere and keeps the font's ligatures."""
    text = unicodedata.normalize("NFKC", text)
    text = text.replace("\u2019", "'").replace("\u2018", "'").replace("\u201c", '"')
    text = text.replace("\u201d", '"').replace("\u2013", "-").replace("\u2014", "-")
    return re.sub(r"\s+", "", text)


MONO_EM = 0.602  # DejaVu Sans Mono's advance width, in em (every glyph the same)


# Characters the chapters print that DejaVu and Liberation (Chromium's default fonts here)
# lack: emoji and CJK (Chapter 9's tokenizer examples).
WIDE = re.compile("[\u2e80-\u9fff\uac00-\ud7af\U0001f000-\U0001faff]")


class Extracted(NamedTuple):
    """What one pass over the PDF's text finds (pypdf's text extraction is the module's longest
    step: about 30 CPU seconds for the whole book, so it runs once)."""

    texts: list[str]  # each page's text
    ends: list[tuple[float, int, str]]  # where each monospaced line ends: (x in pt, page, line)
    right: float  # the printed column's right edge, in pt
    wide: list[tuple[int, str, str, bool]]  # (page, emoji or CJK character, font, font draws it)


def _draws(font) -> bool:
    """Whether a PDF font draws its own glyphs: Type 3, embedded, or a composite font."""
    return font is not None and (
        "/CharProcs" in font
        or any(
            k in (font.get("/FontDescriptor") or {})
            for k in ("/FontFile", "/FontFile2", "/FontFile3")
        )
        or "/DescendantFonts" in font
    )


@pytest.fixture(scope="module")
def extracted(built_pdf) -> Extracted:
    from pypdf import PdfReader

    reader = PdfReader(str(built_pdf))
    texts, ends, wide = [], [], []
    for number, page in enumerate(reader.pages, 1):

        def visit(text, cm, tm, font, size, number=number):
            for ch in WIDE.findall(text or ""):
                wide.append((number, ch, str((font or {}).get("/BaseFont", "")), _draws(font)))
            if not text.strip() or not font or "Mono" not in str(font.get("/BaseFont", "")):
                return
            x = tm[4] * cm[0] + tm[5] * cm[2] + cm[4]
            em = size * tm[0] * cm[0]
            for line in text.split("\n"):
                ends.append((x + MONO_EM * em * len(line.rstrip()), number, line.strip()[:60]))

        texts.append(page.extract_text(visitor_text=visit) or "")
    width = float(reader.pages[0].mediabox.width)
    right = width - float(tool.MARGIN["right"].removesuffix("mm")) / 25.4 * 72
    return Extracted(texts, ends, right, wide)


@pytest.fixture(scope="module")
def pdf_text(extracted) -> list[str]:
    return extracted.texts


@pytest.fixture(scope="module")
def report(built_pdf) -> dict:
    return json.loads(built_pdf.with_suffix(".json").read_text())


def _pages() -> list[Path]:
    return [page_path(name) for name in toc_files(ROOT)]


def _title(md: Path) -> str:
    m = re.search(r"^# (.+)$", md.read_text(encoding="utf-8"), re.MULTILINE)
    assert m, f"{md} has no title"
    return m.group(1).strip()


PLAIN = re.compile(r"^[A-Za-z][A-Za-z ,;'()-]+$")


def _plain_run(text: str, words: int = 5) -> str | None:
    """The first run of ``words`` words of ``text`` with no markup or mathematics in it."""
    for line in text.splitlines():
        for chunk in re.split(r"[$`*{}\[\]_:.!?\\\"]", line):
            chunk = " ".join(chunk.split())
            if PLAIN.match(chunk) and len(chunk.split()) >= words:
                return " ".join(chunk.split()[:words])
    return None


ANSWER = re.compile(
    r"^(?P<indent>[ \t]*):{3,}\{admonition\}[ \t]*Answer[ \t]*\n(?P<body>.*?)"
    r"^(?P=indent):{3,}[ \t]*$",
    re.MULTILINE | re.DOTALL,
)
TAB = re.compile(
    r"^:{3}\{tab-item\}[ \t]*(?P<label>.*?)[ \t]*\n(?P<body>.*?)^:{3}[ \t]*$",
    re.MULTILINE | re.DOTALL,
)


@pytest.mark.slow
def test_the_pdf_opens_and_has_a_books_length(built_pdf, pdf_text, report):
    assert built_pdf.read_bytes()[:5] == b"%PDF-"
    assert 150 <= len(pdf_text) <= 800, f"{len(pdf_text)} pages"
    assert report["pages"] == len(pdf_text)
    assert report["explorers"] > 0 and report["explorers_not_drawn"] == 0


@pytest.mark.slow
def test_every_page_of_the_book_is_in_it_in_order_with_a_bookmark(built_pdf, pdf_text, report):
    from pypdf import PdfReader

    text = _squash("\n".join(pdf_text))
    titles = [_title(md) for md in _pages()]
    missing = [t for t in titles if _squash(t) not in text]
    assert not missing, f"titles not in the PDF's text: {missing}"
    # The table of contents has every page with its page number, in increasing order.
    contents = report["contents"]
    assert len(contents) == len(titles)
    numbers = [n for _, n in contents]
    assert all(isinstance(n, int) for n in numbers), contents
    assert numbers == sorted(numbers) and numbers[0] > 1
    # ... and those are the numbers printed in it (the first print's, before the cover's
    # sheet and the contents' own).
    toc = _squash("\n".join(pdf_text[1 : numbers[0] - 1]))
    wrong = [(t, n) for t, n in contents if _squash(f"{t}{n}") not in toc]
    assert not wrong, f"the contents print other page numbers for {wrong}"
    reader = PdfReader(str(built_pdf))
    bookmarks = [item.title for item in reader.outline if not isinstance(item, list)]
    assert len(bookmarks) >= 15 and bookmarks[1].startswith("1."), bookmarks


@pytest.mark.slow
def test_the_answers_are_expanded(pdf_text):
    """One answer of each chapter's "Check your understanding" (a dropdown on the site)."""
    text = _squash("\n".join(pdf_text))
    checked, missing = 0, []
    for md in _pages():
        for m in ANSWER.finditer(md.read_text(encoding="utf-8")):
            run = _plain_run(m.group("body"))
            if run:
                checked += 1
                if _squash(run) not in text:
                    missing.append((md.name, run))
                break
    assert checked >= 8, "too few dropdown answers found in the chapters' sources"
    assert not missing, f"answers not in the PDF: {missing}"


@pytest.mark.slow
def test_every_tab_of_the_five_levels_is_printed(pdf_text):
    text = _squash("\n".join(pdf_text))
    checked, missing = 0, []
    for md in _pages():
        source = md.read_text(encoding="utf-8")
        if "five-levels" not in source:
            continue
        for m in TAB.finditer(source):
            if m.group("label") in ("Undergraduate", "Researcher"):
                run = _plain_run(m.group("body"))
                if run:
                    checked += 1
                    if _squash(run) not in text:
                        missing.append((md.name, m.group("label"), run))
    assert checked >= 8
    assert not missing, f"tabs other than the first not in the PDF: {missing}"


RAW_TEX = re.compile(r"\$\$|\\frac|\\\(|\\\[|\\begin\{")
TEX_IN_PROSE = re.compile(r"\$[^$\n]*\\[A-Za-z]+")


@pytest.mark.slow
def test_no_raw_tex_in_the_text(pdf_text):
    """MathJax typeset every formula: no TeX source left in the text. (Code may hold TeX in
    string literals, for matplotlib labels: a line with a quote is code's.)"""
    found = []
    for number, page in enumerate(pdf_text, 1):
        for line in page.splitlines():
            if RAW_TEX.search(line) or (
                '"' not in line and "'" not in line and TEX_IN_PROSE.search(line)
            ):
                found.append(f"page {number}: {line.strip()[:100]}")
    assert not found, "raw TeX in the PDF:\n" + "\n".join(found)


#: What a failing cell leaves in its output: a traceback, an OS error, a resolver's words.
RAW_ERROR = re.compile(
    r"Traceback \(most recent call last\)|\bgaierror\b|\[Errno -?\d+\]"
    r"|Name or service not known|Temporary failure in name resolution"
)


@pytest.mark.slow
def test_no_raw_error_is_printed(pdf_text):
    """The build machine's errors stay out of the book: Chapter 12 printed "Skipped the download
    of GPT-2 small: ... gaierror ..." (issue 35); the pages' outputs are checked in the browser
    (tests/book/test_content_fit_browser.py)."""
    found = [
        f"page {number}: {line.strip()[:100]}"
        for number, page in enumerate(pdf_text, 1)
        for line in page.splitlines()
        if RAW_ERROR.search(line)
    ]
    assert not found, "raw errors in the PDF:\n" + "\n".join(found)


@pytest.mark.slow
def test_nothing_is_wider_than_the_page(report, extracted):
    """Code and outputs wrap, wide equations and tables were scaled to the column: the tool's
    check in print layout found nothing clipped at the page edge, and in the PDF itself no
    line of code or output runs past the right margin."""
    assert report["overflowing"] == []
    ends, right = extracted.ends, extracted.right
    assert len(ends) > 1000, "too little monospaced text found: is code still printed?"
    beyond = [f"page {n}: {line}" for x, n, line in ends if x > right + 1]
    assert not beyond, "code running off the page:\n" + "\n".join(beyond[:20])


@pytest.mark.slow
def test_the_site_links_the_pdf(built_book, built_pdf):
    html = built_book / "html"
    copy = html / tool.PDF_NAME
    assert copy.is_file() and copy.stat().st_size == built_pdf.stat().st_size
    for page in ("book/intro.html", "book/08_training.html", "book/worked/ex1_forward.html"):
        text = (html / page).read_text(encoding="utf-8")
        hrefs = re.findall(r'<a href="([^"]*' + re.escape(tool.PDF_NAME) + ')"', text)
        assert hrefs, f"{page} does not link the PDF"
        for href in hrefs:
            assert ((html / page).parent / href).resolve() == copy.resolve()


# --------------------------------------------------------------------------- issue 29
def _bookmarks(path: Path) -> list[tuple[int, str, int]]:
    """The outline as ``(depth, title, page)`` in order."""
    from pypdf import PdfReader

    reader = PdfReader(str(path))
    out: list[tuple[int, str, int]] = []

    def walk(items, depth):
        for item in items:
            if isinstance(item, list):
                walk(item, depth + 1)
            else:
                out.append((depth, item.title, reader.get_destination_page_number(item) + 1))

    walk(reader.outline, 0)
    return out


@pytest.mark.slow
def test_every_bookmark_lands_in_its_own_chapter(built_pdf, report):
    """A section's bookmark points between its chapter's first page and the next chapter's.
    (The single page repeats ids such as "recap" in every chapter; the printed book renames
    the repeats, or every "Recap" bookmark landed in Chapter 1.)"""
    marks = _bookmarks(built_pdf)
    assert len(marks) > 150 and report["ids_renamed"] > 0
    tops = [(i, page) for i, (depth, _, page) in enumerate(marks) if depth == 0]
    wrong = []
    for k, (i, start) in enumerate(tops):
        end = tops[k + 1][1] if k + 1 < len(tops) else 10**9
        j = i + 1
        while j < len(marks) and marks[j][0] > 0:
            depth, title, page = marks[j]
            if not start <= page <= end:
                wrong.append(f"{marks[i][1]} > {title}: page {page}, not in {start}-{end}")
            j += 1
    assert not wrong, f"{len(wrong)} bookmarks outside their chapter:\n" + "\n".join(wrong[:10])
    # the repeated sections each have their own page
    recaps = [page for _, title, page in marks if title.endswith("Recap")]
    assert len(recaps) >= 10 and len(set(recaps)) == len(recaps), recaps


@pytest.mark.slow
def test_bookmark_titles_keep_their_math(built_pdf):
    """A heading with math reads, in its bookmark, as course_search's plain text of it
    ("Why divide by √(d_k)?"), not as MathJax's text, which loses the root sign."""
    import sys

    sys.path.insert(0, str(ROOT / "book" / "_ext"))
    try:
        from course_search import math_text
    finally:
        sys.path.pop(0)
    # the sections' titles without their numbers ("4.3. ")
    titles = [re.sub(r"^[\d.]+\s+", "", t) for d, t, _ in _bookmarks(built_pdf) if d > 0]
    checked, wrong = 0, []
    for md in _pages():
        for heading in re.findall(r"^## (.*\$.+)$", md.read_text(encoding="utf-8"), re.M):
            before = heading.split("$", 1)[0].strip()
            after = heading.rsplit("$", 1)[1].strip()
            found = [t for t in titles if t.startswith(before) and t.endswith(after)]
            checked += 1
            math = [math_text(m) for m in re.findall(r"\$([^$]+)\$", heading)]
            if not any(all(m in t for m in math) for t in found):
                wrong.append((heading, math, found))
    assert checked >= 1, "no section heading with math in the chapters"
    assert not wrong, wrong


@pytest.mark.slow
def test_no_character_prints_as_an_empty_box(extracted, report):
    """Every character of the book has a font that draws it: the tool's check in the page
    (``pdf_static/glyphs.js``) found none missing, and in the PDF each emoji or CJK character
    is drawn by an embedded font that is not one of the default fonts (which have no such
    glyph: Chromium would draw their empty box)."""
    assert report["missing_glyphs"] == [], (
        f"no font for {report['missing_glyphs']}: {tool.FONTS_HINT}"
    )
    assert extracted.wide, "expected emoji or CJK characters in the book (Chapter 9)"
    wrong = [
        f"page {number}: {ch!r} in {name or 'no font'}"
        for number, ch, name, drawn in extracted.wide
        if not drawn or "DejaVu" in name or "Liberation" in name
    ]
    assert not wrong, "\n".join(sorted(set(wrong))[:20])


@pytest.mark.slow
def test_code_lines_as_wide_as_the_code_box_print_whole(report):
    """The print stylesheet's code font fits a line of 88 characters (the site's code box,
    tests/tools/test_code_style.py) in the printed column: only longer lines wrap (an output's)."""
    short = [w for w in report["wrapped_code"] if w["length"] <= 88]
    assert not short, f"{len(short)} code lines of <= 88 characters wrap: {short[:5]}"


@pytest.mark.browser
@pytest.mark.slow
def test_the_glyph_check_finds_a_character_no_font_has(browser):
    """``pdf_static/glyphs.js`` reports a character no installed font draws (an Egyptian
    hieroglyph) and not the emoji and CJK characters the Noto fonts draw."""
    page = browser.new_page()
    try:
        page.set_content(
            '<article class="bd-article"><p>caf\u00e9 \u4eac \U0001f389 \U00013000</p></article>'
        )
        missing = page.evaluate(tool.static_text(tool.GLYPHS_JS))
    finally:
        page.close()
    assert "\U00013000" in missing
    if not tool.missing_fonts():
        assert missing == ["\U00013000"], missing
