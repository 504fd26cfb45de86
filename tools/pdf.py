"""The whole book as one PDF: Chromium prints the single-page build (``python -m tools.pdf``).

    python -m tools.pdf                  # builds _build/singlehtml, writes _build/pdf/<PDF_NAME>
    python -m tools.pdf --no-build       # only prints (the single-page build is up to date)
    python -m tools.pdf --path-output test-output/book   # a build folder elsewhere

1. ``jupyter-book build --builder singlehtml`` into the same ``--path-output`` as the HTML site:
   it shares the site's doctrees and execution cache, so no chapter runs twice.
2. The page is served on 127.0.0.1 and opened in Debian's Chromium through Playwright (it
   cannot download a browser of its own here), emulating print media at the printed column's
   width, in light mode.
3. Prepared for print (``pdf_static/prepare.js``): every ``<details>`` opened (the answers of
   "Check your understanding", hidden code cells, worked solutions); MathJax and the Vega-Lite
   explorers finished (an explorer prints as its figure at the default settings, with a line
   saying it is interactive on the site); links to other files of the site dropped (a PDF
   cannot follow them); display equations and tables wider than the column scaled down to fit;
   headings renumbered by nesting (each page of the book an ``h1``, as the tagged PDF's
   structure); a cover (with the licences) and a table of contents added; each page of the book
   starts a new sheet. The rules that a printed page of the site shares (tabs one after the
   other, code that wraps, figures kept whole, boxes that may split, no navigation) are the
   site's print stylesheet, ``book/_ext/site_static/course-print.css``.
4. Checked: nothing wider than the column (``overflowing``). Printed on A4 with page numbers
   (tagged); the table of contents gets its page numbers from the first print's named
   destinations and the book is printed again; pypdf adds the outline (bookmarks: each page of
   the book and its sections; Chromium's own outline nests chapters under the landing page).
   ``<PDF_NAME>.json`` beside the PDF records pages, size, time and what did not fit.

``./course build`` runs this before the HTML build when Chromium is installed, and the site
links the PDF (``book/_ext/course_site.py``) when it exists.
"""

from __future__ import annotations

import argparse
import contextlib
import html
import json
import re
import subprocess
import sys
import time
from pathlib import Path

from . import ROOT, localserver
from .localserver import CHROMIUM_ARGS, QuietHandler, chromium_path

PDF_NAME = "understanding-transformers.pdf"  # also in book/_ext/course_site.py (the link)
TITLE = "Understanding Transformers"
# The printed column: A4 (210 mm) less the side margins, in CSS pixels (96 per inch).
MARGIN = {"top": "16mm", "bottom": "18mm", "left": "16mm", "right": "16mm"}
COLUMN_PX = round((210 - 2 * 16) / 25.4 * 96)
INSTALL_HINT = "apt-get install -y chromium"
# Emoji and Chinese/Japanese characters in the chapters (🎉, 京): without these fonts Chromium
# prints each as an empty box.
FONTS = {"Noto Color Emoji": "fonts-noto-color-emoji", "Noto Sans CJK": "fonts-noto-cjk"}
FONTS_HINT = "apt-get install -y " + " ".join(FONTS.values())


def start_page(singlehtml: Path) -> str:
    """The single page's path inside the build: Sphinx writes ``index.html`` as a redirect to
    the root document (``book/intro.html``) when the root document is not ``index``."""
    index = singlehtml / "index.html"
    if not index.is_file():
        raise ValueError(
            f"no single-page build in {singlehtml}: run `jupyter-book build . "
            "--builder singlehtml` (or python -m tools.pdf without --no-build)"
        )
    m = re.search(
        r'http-equiv="Refresh"\s+content="\d+;\s*url=([^"]+)"', index.read_text(), re.IGNORECASE
    )
    return m.group(1) if m else "index.html"


# The single page is served under this name at the build's root: Sphinx writes it to the root
# document's folder (book/intro.html) but with every link relative to the root (_static/...).
SERVED_AS = "course-book.html"


def footer_template(title: str = TITLE) -> str:
    """Chromium's footer: the book's title and the page number (its own tiny document: styles
    inline, a font size given, or it prints nothing readable)."""
    return (
        '<div style="font-size:8px; width:100%; margin:0 16mm; display:flex; '
        'justify-content:space-between; color:#555; font-family:sans-serif;">'
        f'<span>{html.escape(title)}</span>'
        '<span><span class="pageNumber"></span> / <span class="totalPages"></span></span>'
        '</div>'
    )


def destination_pages(path: Path) -> dict[str, int]:
    """The PDF's named destinations (Chromium writes one per element that an in-page link
    targets, named by its ``id``) and their 1-based page numbers."""
    import logging

    from pypdf import PdfReader

    # Chromium's trailer undercounts its objects; pypdf says so on every read.
    logging.getLogger("pypdf").setLevel(logging.ERROR)
    reader = PdfReader(str(path))
    return {
        name.lstrip("/"): reader.get_destination_page_number(dest) + 1
        for name, dest in reader.named_destinations.items()
    }


def outline_tree(entries: list[dict], pages: dict[str, int]) -> list[tuple]:
    """The outline as ``(title, page, children)``: each page of the book (``entries`` from
    ``pdf_static/prepare.js``: ``id``, ``text``, ``nested``, ``sections``) with its sections; a
    nested page (Chapter 5's worked examples) goes under the page before it that is not nested.
    Entries whose destination is missing are left out."""
    tree: list[tuple] = []
    for e in entries:
        if e["id"] not in pages:
            continue
        sections = [
            (s["text"], pages[s["id"]], []) for s in e.get("sections", []) if s["id"] in pages
        ]
        item = (e["text"], pages[e["id"]], sections)
        if e.get("nested") and tree:
            tree[-1][2].append(item)
        else:
            tree.append(item)
    return tree


def add_outline(path: Path, tree: list[tuple]) -> None:
    """Write ``tree`` (``outline_tree``) as the PDF's bookmarks, opened beside the pages."""
    from pypdf import PdfWriter

    writer = PdfWriter(clone_from=str(path))

    def add(items, parent=None):
        for title, page, children in items:
            node = writer.add_outline_item(title=title, page_number=page - 1, parent=parent)
            add(children, node)

    add(tree)
    writer.page_mode = "/UseOutlines"
    tmp = path.with_suffix(".tmp.pdf")
    with open(tmp, "wb") as f:
        writer.write(f)
    tmp.replace(path)


# --------------------------------------------------------------------------- the browser side
# The JavaScript Chromium runs and the print rules it adds, files in tools/pdf_static/ (read
# when a book is printed): prepare.js gets the page ready and returns the outline's entries,
# book.css holds the book-only print rules (the cover, the contents, one sheet per page of the
# book), overflow.js finds what is wider than the printed column, number-toc.js numbers the
# contents.
STATIC = Path(__file__).resolve().parent / "pdf_static"
PREPARE_JS, BOOK_CSS, OVERFLOW_JS, NUMBER_TOC_JS, GLYPHS_JS = (
    "prepare.js",
    "book.css",
    "overflow.js",
    "number-toc.js",
    "glyphs.js",
)


def static_text(name: str) -> str:
    """The text of ``tools/pdf_static/<name>``."""
    return (STATIC / name).read_text(encoding="utf-8")


class _Handler(QuietHandler):
    page = ""  # the single page's path in the build, served as /SERVED_AS

    def translate_path(self, path):
        if path.split("?")[0].split("#")[0] == "/" + SERVED_AS:
            path = "/" + self.page
        return super().translate_path(path)


@contextlib.contextmanager
def serve(directory: Path, page: str):
    """Serve ``directory`` (``tools.localserver``) with ``page`` also at ``/SERVED_AS``; yields
    that page's URL. (MathJax's fonts do not load from ``file://``.)"""
    with localserver.serve(directory, type("Handler", (_Handler,), {"page": page})) as base:
        yield base + SERVED_AS


def _meta() -> dict:
    """The cover's text: title, the site's description, author and repository (from
    ``_config.yml`` and ``book/_ext/course_site.py``)."""
    import yaml

    config = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))
    sys.path.insert(0, str(ROOT / "book" / "_ext"))
    try:
        from course_site import DESCRIPTION
    finally:
        sys.path.pop(0)
    author = config.get("author", "")
    repo = (config.get("repository") or {}).get("url", "")
    return {
        "title": config.get("title", TITLE),
        "subtitle": DESCRIPTION,
        "byline": " · ".join(x for x in (author, repo) if x),
        "note": "On the website this figure is interactive: its sliders change it. "
        "Printed here at its default settings.",
    }


def prepare(page, meta: dict) -> dict:
    page.add_style_tag(content=static_text(BOOK_CSS))
    return page.evaluate(static_text(PREPARE_JS), meta)


def overflowing(page) -> list[str]:
    """Elements wider than the printed column (code, equations, tables, figures): each would
    be clipped at the page edge."""
    return page.evaluate(static_text(OVERFLOW_JS))


def missing_glyphs(page) -> list[str]:
    """Characters of the book that no installed font draws (printed as empty boxes)."""
    return page.evaluate(static_text(GLYPHS_JS))


def missing_fonts() -> list[str]:
    """The Debian packages of ``FONTS`` that fontconfig does not find (``[]`` where fontconfig
    itself is missing: the glyph check in the page still runs)."""
    import shutil

    if shutil.which("fc-list") is None:
        return []
    listed = subprocess.run(
        ["fc-list", ":", "family"], capture_output=True, text=True, check=False
    ).stdout
    return [pkg for family, pkg in FONTS.items() if family not in listed]


def print_pdf(page, path: Path, title: str) -> None:
    page.pdf(
        path=str(path),
        format="A4",
        margin=MARGIN,
        print_background=True,
        display_header_footer=True,
        header_template="<span></span>",
        footer_template=footer_template(title),
        tagged=True,
    )


def number_toc(page, numbers: list[int | None]) -> None:
    """Fill in the page numbers of the table of contents (in its order)."""
    page.evaluate(static_text(NUMBER_TOC_JS), numbers)


def make_pdf(build: Path, out: Path, *, log=print) -> dict:
    """Print ``build/singlehtml`` to ``out``; returns what was measured (pages, MB, seconds,
    elements wider than the page, the contents with their pages)."""
    from playwright.sync_api import sync_playwright
    from pypdf import PdfReader

    chromium = chromium_path()
    if chromium is None:
        raise RuntimeError(f"the PDF needs Chromium: {INSTALL_HINT}")
    single = build / "singlehtml"
    start = start_page(single)
    meta = _meta()
    out.parent.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    with serve(single, start) as url, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS, headless=True)
        try:
            context = browser.new_context(
                viewport={"width": COLUMN_PX, "height": 1100}, color_scheme="light"
            )
            page = context.new_page()
            page.emulate_media(media="print", color_scheme="light")
            page.goto(url, wait_until="load", timeout=300_000)
            info = prepare(page, meta)
            if info["notReady"]:
                log(f"tools.pdf: {info['notReady']} explorer(s) did not finish drawing")
            wide = overflowing(page)
            for w in wide:
                log(f"tools.pdf: wider than the page: {w}")
            glyphs = missing_glyphs(page)
            if glyphs:
                log(
                    f"tools.pdf: no installed font draws {' '.join(glyphs)}: they print as "
                    f"empty boxes ({FONTS_HINT})"
                )
            # Printed twice: the first print says on which page each part starts (its named
            # destinations), the second has those numbers in the table of contents.
            print_pdf(page, out, meta["title"])
            entries = info["entries"]
            numbers = [destination_pages(out).get(e["id"]) for e in entries]
            number_toc(page, numbers)
            print_pdf(page, out, meta["title"])
        finally:
            browser.close()
    pages = destination_pages(out)
    add_outline(out, outline_tree(entries, pages))
    seconds = time.perf_counter() - t0
    result = {
        "pages": len(PdfReader(str(out)).pages),
        "mb": round(out.stat().st_size / 1e6, 1),
        "seconds": round(seconds, 1),
        "overflowing": wide,
        "explorers": info["explorers"],
        "explorers_not_drawn": info["notReady"],
        "scaled_to_fit": info["scaled"],
        "ids_renamed": info["renamed"],
        "missing_glyphs": glyphs,
        "wrapped_code": info["wrapped"],
        "contents": [[e["text"], pages.get(e["id"])] for e in entries],
    }
    # What the tests read besides the PDF (tests/book/test_pdf.py).
    out.with_suffix(".json").write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    return result


def build_singlehtml(
    path_output: Path, capture: bool = False, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess:
    """``jupyter-book build --builder singlehtml -W --keep-going`` into ``path_output`` (its
    ``_build/``, shared with the HTML build: doctrees and execution cache); ``env``: the
    build's environment (the kernels that execute the chapters inherit it)."""
    jb = Path(sys.executable).with_name("jupyter-book")
    cmd = [
        str(jb) if jb.exists() else "jupyter-book",
        "build",
        str(ROOT),
        "--path-output",
        str(path_output),
        "--builder",
        "singlehtml",
        "-W",
        "--keep-going",
    ]
    return subprocess.run(cmd, cwd=ROOT, capture_output=capture, text=True, check=False, env=env)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.pdf", description=__doc__.split("\n")[0])
    parser.add_argument(
        "--path-output",
        type=Path,
        default=ROOT,
        help="the folder holding _build/ (as jupyter-book's --path-output)",
    )
    parser.add_argument(
        "--no-build",
        action="store_true",
        help="print the existing single-page build, do not rebuild it",
    )
    args = parser.parse_args(argv)
    if chromium_path() is None:
        print(f"tools.pdf: Chromium not found; the PDF needs it ({INSTALL_HINT}).", file=sys.stderr)
        return 1
    build = args.path_output.resolve() / "_build"
    if not args.no_build:
        t0 = time.perf_counter()
        rc = build_singlehtml(args.path_output.resolve()).returncode
        if rc:
            print("tools.pdf: the single-page build failed (above)", file=sys.stderr)
            return rc
        print(f"tools.pdf: single-page build {time.perf_counter() - t0:.0f} s")
    fonts = missing_fonts()
    if fonts:
        print(
            f"tools.pdf: fonts missing ({', '.join(fonts)}): emoji and CJK characters will "
            f"print as empty boxes; install them with `{FONTS_HINT}`",
            file=sys.stderr,
        )
    out = build / "pdf" / PDF_NAME
    r = make_pdf(build, out)
    print(f"tools.pdf: {out} ({r['pages']} pages, {r['mb']} MB, printed in {r['seconds']} s)")
    if r["overflowing"]:
        print(
            f"tools.pdf: {len(r['overflowing'])} element(s) wider than the page (above)",
            file=sys.stderr,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
