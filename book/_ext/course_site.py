"""The finish of the site: what every page carries besides its text.

- **Look**: ``site_static/course-site.css`` on every page: visible scrollbars where a display
  equation, code or an output is wider than the column (phones and Macs hide unstyled ones),
  long inline code that wraps instead of widening a phone's page, readable table captions in
  dark mode, the licence line.
- **Head**: a favicon (``site_static/favicon.svg``, drawn by hand: a causal attention matrix), a
  ``<meta name="description">`` per page (its first paragraph) and Open Graph / Twitter
  preview tags. The theme already writes ``<meta name="viewport">``.
- **Footer**: the licences: code MIT (``LICENSE``), text CC BY 4.0, the Shakespeare corpus (the
  plays are in the public domain; the corpus file is CC BY 2.5, see
  ``course_lib/corpus_data/PROVENANCE.md``).
- **Accessibility** (axe-core, run by ``tests/test_browser.py`` on every page): the theme's
  search and colour-mode buttons (``site_templates/``: names that match what they show), the
  sidebar's expand carets and myst-nb's "Show code cell content" toggles (names from their
  text), the bibliography's list roles.
- **Weight**: MathJax only on pages with math (Sphinx's math domain counts a page's whole
  sub-tree, so the landing page loaded it), the widget manager (3.6 MB) only on pages that
  show a live widget (a saved tqdm progress bar leaves widget *state* but no *view*).
- **Figures**: an output image opens full size when tapped (a link to the image file).
- **Downloads**: the worksheets' links back to their chapter still work from ``_downloads/``.
- **The book as one PDF** (``tools/pdf.py`` prints it into ``_build/pdf/`` before the HTML
  build when Chromium is installed): copied into the site and linked from every page's footer
  and the landing page, only when it exists (no broken link without it). Printing (a page, or
  the PDF): ``site_static/course-print.css``.

All of it happens at build time, in Python. The site's own JavaScript is small and served only
where needed: the widget glue in ``course_assets.py``, the explorers' embedding in
``course_vega.py``, and the search page's plain-text math in ``course_search.py``. Templates
and assets live next to this file, not in a ``_static/`` source folder (Jupyter Book would
inject every ``.js`` found there into every page).
"""

from __future__ import annotations

import html
import posixpath
import re
from functools import partial
from pathlib import Path

from docutils import nodes
from sphinx.util import logging

logger = logging.getLogger(__name__)

HERE = Path(__file__).resolve().parent
STATIC = HERE / "site_static"
TEMPLATES = HERE / "site_templates"
CSS = "course-site.css"
PRINT_CSS = "course-print.css"  # a printed page, and the whole-book PDF (tools/pdf.py)
FAVICON = "favicon.svg"

DESCRIPTION = (
    "A course that builds a GPT from its parts: attention, cross-entropy and "
    "backpropagation computed by hand, then in PyTorch, then trained on Shakespeare."
)
CORPUS_PROVENANCE = "course_lib/corpus_data/PROVENANCE.md"
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
PDF = "understanding-transformers.pdf"  # tools.pdf.PDF_NAME


# --------------------------------------------------------------------------- configuration
def configure(app, config) -> None:
    config.templates_path.insert(0, str(TEMPLATES))
    config.html_static_path.append(str(STATIC))
    if not config.html_favicon:
        config.html_favicon = str(STATIC / FAVICON)
    # The link to the PDF is on the pages only when the PDF exists; a config value of its own
    # ("html" rebuild) rewrites every page when that changes.
    config.course_pdf = PDF if pdf_source(app).is_file() else ""
    options = config.html_theme_options
    if not options.get("extra_footer"):
        options["extra_footer"] = footer_html(
            options.get("repository_url", ""), options.get("repository_branch", "main")
        )


def pdf_source(app) -> Path:
    """Where ``tools/pdf.py`` writes the PDF: ``<build>/pdf/``, beside ``<build>/html/``."""
    return Path(app.outdir).parent / "pdf" / PDF


def pdf_link(href: str) -> str:
    return (
        f'<p class="course-pdf-link"><a href="{html.escape(href)}">Download the book as '
        "PDF</a>: every chapter in one file, with the answers and all tabs shown.</p>"
    )


def insert_after_first_paragraph(body: str, snippet: str) -> str:
    """``snippet`` after the first paragraph that follows the page's title (or at the top)."""
    title = body.find("</h1>")
    end = body.find("</p>", max(title, 0))
    if end < 0:
        return snippet + body
    end += len("</p>")
    return body[:end] + "\n" + snippet + body[end:]


def copy_pdf(app, exception) -> None:
    if exception is None and app.builder.name == "html" and app.config.course_pdf:
        import shutil

        shutil.copyfile(pdf_source(app), Path(app.outdir) / PDF)


def footer_html(repo_url: str, branch: str) -> str:
    """The licence line under every page."""

    def link(path: str, text: str) -> str:
        if not repo_url:
            return text
        return f'<a href="{html.escape(repo_url)}/blob/{html.escape(branch)}/{path}">{text}</a>'

    return (
        '<p class="course-licence">Code: '
        + link("LICENSE", "MIT License")
        + '. Text and figures: <a href="https://creativecommons.org/licenses/by/4.0/">'
        "CC BY 4.0</a>. Training text: Shakespeare's plays (public domain), from Project "
        "Gutenberg via the Open Knowledge Foundation's <code>shakespeare</code> package "
        "(CC BY 2.5; " + link(CORPUS_PROVENANCE, "provenance") + ").</p>"
    )


# --------------------------------------------------------------------------- head
def page_description(doctree, limit: int = 160) -> str:
    """The page's first real paragraph, cut at a word, or the course's description."""
    if doctree is None:
        return DESCRIPTION
    for para in doctree.findall(nodes.paragraph):
        if any(
            isinstance(
                a,
                (
                    nodes.Admonition,
                    nodes.caption,
                    nodes.topic,
                    nodes.footnote,
                    nodes.citation,
                    nodes.field_list,
                    nodes.table,
                ),
            )
            for a in _ancestors(para)
        ):
            continue
        if any(
            "cell" in (getattr(a, "get", lambda *_: [])("classes", []) or [])
            for a in _ancestors(para)
        ):
            continue
        text = " ".join(para.astext().split())
        if len(text) < 40:
            continue
        if len(text) > limit:
            text = text[: limit - 1].rsplit(" ", 1)[0].rstrip(",;:") + "…"
        return text
    return DESCRIPTION


def _ancestors(node):
    node = node.parent
    while node is not None:
        yield node
        node = node.parent


def meta_tags(title: str, site: str, description: str) -> str:
    e = html.escape
    page_title = f"{title} — {site}" if title and title != site else site
    tags = [
        ("name", "description", description),
        ("property", "og:type", "website"),
        ("property", "og:site_name", site),
        ("property", "og:title", page_title),
        ("property", "og:description", description),
        ("name", "twitter:card", "summary"),
        ("name", "twitter:title", page_title),
        ("name", "twitter:description", description),
    ]
    return "".join(
        f'<meta {attr}="{e(key)}" content="{e(value, quote=True)}" />\n'
        for attr, key, value in tags
    )


# --------------------------------------------------------------------------- body fixes
_SUMMARY_LABEL = re.compile(r'<summary aria-label="Toggle hidden content">')
_CITATION_ROLE = re.compile(r'(<div class="citation"[^>]*?) role="doc-biblioentry"')
_IMG = re.compile(r'<img\b[^>]*>')
_SRC = re.compile(r'\bsrc="([^"]+)"')


def fix_body(body: str) -> str:
    """String-level fixes of the rendered page body (see the module docstring)."""
    # myst-nb's hide-input toggles: the name "Toggle hidden content" did not contain the visible
    # "Show code cell content" (axe: label-content-name-mismatch); the text names it.
    body = _SUMMARY_LABEL.sub("<summary>", body)
    # The bibliography: role="list" with children of the (deprecated) role doc-biblioentry,
    # which is not a list item (axe: aria-required-children, critical).
    body = _CITATION_ROLE.sub(r'\1 role="listitem"', body)
    return zoomable_images(body)


def zoomable_images(body: str) -> str:
    """Wrap each image of the site (not a data: URI) that is not already a link in a link to
    itself, so a tap opens it full size."""
    out, pos = [], 0
    for m in _IMG.finditer(body):
        src = _SRC.search(m.group(0))
        before = body[: m.start()]
        inside_link = before.rfind("<a ") > before.rfind("</a>")
        if src and not src.group(1).startswith(("data:", "http:", "https:")) and not inside_link:
            out.append(body[pos : m.start()])
            out.append(
                f'<a class="course-zoom" href="{src.group(1)}" '
                f'title="Open the figure full size">{m.group(0)}</a>'
            )
            pos = m.end()
    out.append(body[pos:])
    return "".join(out)


def _label_carets(generate):
    """Wrap pydata-sphinx-theme's ``generate_toctree_html``: its expand carets in the sidebar
    are ``<summary>`` elements with only an icon (axe: summary-name). Each gets a
    visually hidden name after the page it expands."""
    caret = re.compile(
        r'(<a class="[^"]*reference internal[^"]*" href="[^"]*">'
        r'((?:(?!</a>)[^<]|<(?!/a>))*)</a>\s*<details[^>]*>\s*)<summary>'
    )

    def wrapped(*args, **kwargs):
        out = generate(*args, **kwargs)
        text = str(out)

        def repl(m):
            name = re.sub(r"<[^>]+>", "", m.group(2)).strip()
            return (
                m.group(1)
                + '<summary><span class="visually-hidden">Sections of '
                + name
                + "</span>"
            )

        fixed = caret.sub(repl, text)
        # Section captions ("Foundations") as summaries already have text; anything left
        # bare gets a generic name.
        fixed = fixed.replace(
            "<summary><span class=\"toctree-toggle\"",
            '<summary><span class="visually-hidden">Sections</span><span class="toctree-toggle"',
        )
        from markupsafe import Markup

        return Markup(fixed)  # the template prints it as it is

    return wrapped


# --------------------------------------------------------------------------- page weight
def _script_name(js) -> str:
    return str(getattr(js, "filename", js) or "")


def _script_body(js) -> str:
    return str((getattr(js, "attributes", {}) or {}).get("body", ""))


def page_has_math(body: str) -> bool:
    return 'class="math' in body or "\\(" in body or "\\[" in body or "$$" in body


def trim_scripts(app, pagename, context) -> None:
    scripts = context.get("script_files")
    if not isinstance(scripts, list):
        return
    body = context.get("body", "") or ""
    drop = set()
    if not page_has_math(body):
        mathjax = str(app.config.mathjax_path or "")
        for js in scripts:
            name, text = _script_name(js), _script_body(js)
            if (mathjax and name.endswith(mathjax)) or text.startswith("window.MathJax"):
                drop.add(id(js))
    if WIDGET_VIEW not in body:
        widget_js = [k.split("?")[0] for k in (getattr(app.config, "nb_ipywidgets_js", {}) or {})]
        for js in scripts:
            name = _script_name(js).split("?")[0]
            if any(
                name.endswith(k) or k.endswith(name) for k in widget_js if name
            ) or "widget-state+json" in str(getattr(js, "attributes", {})):
                drop.add(id(js))
    if drop:
        scripts[:] = [js for js in scripts if id(js) not in drop]


# --------------------------------------------------------------------------- downloads
_HREF = re.compile(r'href="([^"#:]+)(#[^"]*)?"')


def _relink(m: re.Match, rel: str, dest: str, dl: dict, src: Path) -> str:
    """One link ``m`` of page ``rel``, now at ``_downloads/<dest>``, pointed at its target."""
    target = posixpath.normpath(posixpath.join(posixpath.dirname(rel), m.group(1)))
    if target in dl:
        new = f"_downloads/{dl[target][1]}"
    elif target.endswith(".html") and any(
        (src / target).with_suffix(ext).is_file() for ext in (".md", ".ipynb")
    ):
        new = target  # a page of the book: same path in the site
    else:
        return m.group(0)
    here = posixpath.dirname(f"_downloads/{dest}")
    return f'href="{posixpath.relpath(new, here)}{m.group(2) or ""}"'


def relink_downloads(app, exception) -> None:
    """HTML files offered with ``{download}`` (the worksheets of Chapter 5) are copied to
    ``_downloads/<hash>/``; their relative links (back to the chapter, to the answer key) were
    written for the source folder. Point them at the same targets from the new place."""
    if exception is not None or app.builder.format != "html":
        return
    dl = getattr(app.env, "dlfiles", {}) or {}
    src = Path(app.srcdir)
    fixed = 0
    for rel, (_docs, dest) in dl.items():
        if not rel.endswith(".html"):
            continue
        out = Path(app.outdir) / "_downloads" / dest
        if not out.is_file():
            continue
        text = out.read_text(encoding="utf-8")
        new_text = _HREF.sub(partial(_relink, rel=rel, dest=dest, dl=dl, src=src), text)
        if new_text != text:
            out.write_text(new_text, encoding="utf-8")
            fixed += 1
    if fixed:
        logger.info(f"course_site: relinked {fixed} downloadable HTML file(s)")


# --------------------------------------------------------------------------- single page
def singlehtml_handlers(app) -> None:
    """The whole-book PDF (``tools/pdf.py``) is printed from a single-page build. Sphinx looks
    up the handlers of custom nodes under the builder's name first: since sphinx-exercise
    registers its nodes for ``singlehtml``, the nodes registered only for ``html`` (myst-nb's
    hidden-input toggle, ...) would be unknown there. They get their ``html`` handlers."""
    if app.builder.name != "singlehtml":
        return
    handlers = app.registry.translation_handlers
    single = handlers.setdefault("singlehtml", {})
    for name, pair in handlers.get("html", {}).items():
        single.setdefault(name, pair)


# --------------------------------------------------------------------------- the hook
def page_context(app, pagename, templatename, context, doctree) -> None:
    if "body" in context and isinstance(context["body"], str):
        context["body"] = fix_body(context["body"])
    if callable(context.get("generate_toctree_html")):
        context["generate_toctree_html"] = _label_carets(context["generate_toctree_html"])
    site = app.config.html_title or app.config.project
    title = re.sub(r"<[^>]+>", "", str(context.get("title", "")))
    description = page_description(doctree)
    context["metatags"] = str(context.get("metatags", "")) + meta_tags(title, site, description)
    trim_scripts(app, pagename, context)
    if app.config.course_pdf and app.builder.name == "html" and callable(context.get("pathto")):
        link = pdf_link(context["pathto"](PDF, 1))
        context["theme_extra_footer"] = link + str(context.get("theme_extra_footer") or "")
        if pagename == app.config.root_doc and isinstance(context.get("body"), str):
            context["body"] = insert_after_first_paragraph(context["body"], link)


def setup(app):
    app.add_config_value("course_pdf", "", "html")
    app.connect("config-inited", configure, priority=450)
    app.add_css_file(CSS)
    app.add_css_file(PRINT_CSS, media="print")
    # After the theme (pydata/book: 500/501), Sphinx's mathjax (500) and myst-nb's scripts.
    app.connect("html-page-context", page_context, priority=600)
    app.connect("build-finished", relink_downloads)
    app.connect("builder-inited", singlehtml_handlers)
    app.connect("build-finished", copy_pdf)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
