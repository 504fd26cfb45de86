"""The finish of the site: what every page carries besides its text.

- **Look**: ``site_static/course-site.css`` on every page: code and outputs fitted to the
  column on a laptop or a desktop (each ``<pre>`` carries its longest line's length,
  ``column_counts``; the CSS sizes its font from it), visible scrollbars where a display
  equation, code or an output is wider than the column (phones and Macs hide unstyled ones),
  long inline code that wraps instead of widening a phone's page, readable table captions in
  dark mode, the licence line.
- **Head**: a favicon (``site_static/favicon.svg``, drawn by hand: a causal attention matrix).
  The description, Open Graph / Twitter tags and each page's social card are
  ``sphinxext-opengraph``'s (its ``ogp_site_url`` set here from ``html.baseurl``), the "last
  updated" date ``sphinx-last-updated-by-git``'s (both in ``_config.yml``). The theme already
  writes ``<meta name="viewport">``.
- **Footer**: the licences: code MIT (``LICENSE``), text CC BY 4.0, the Shakespeare corpus (the
  plays are in the public domain; the corpus file is CC BY 2.5, see
  ``course_lib/corpus_data/PROVENANCE.md``).
- **Accessibility** (axe-core, run by ``tests/book/test_browser.py`` on every page): the theme's
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
    # sphinxext-opengraph: og:url and the social cards' addresses from the site's one address
    # (html.baseurl; its own default is relative URLs, which previews do not follow).
    if not config.ogp_site_url:
        config.ogp_site_url = str(config.html_baseurl or "")
    if config.ogp_site_name is None:  # its default, ``project``, Jupyter Book leaves unset
        config.ogp_site_name = config.html_title or config.project
    if not config.ogp_social_cards:
        config.ogp_social_cards = {"line_color": "#2f6f9f"}  # the favicon's blue
    options = config.html_theme_options
    # "Suggest edit" under the repository button: the page's source on GitHub. (Jupyter Book
    # always sets the option, from html.use_edit_page_button, default off: set here.)
    options["use_edit_page_button"] = True
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


# --------------------------------------------------------------------------- notebooks, citation
NOTEBOOKS_ZIP = "understanding-transformers-notebooks.zip"
ZIP_FOLDERS = {"notebooks": "chapters", "exercises": "exercises"}  # repository -> zip folder


def zip_link(href: str) -> str:
    return (
        f'<p class="course-zip-link"><a href="{html.escape(href)}">Download all notebooks '
        "(zip)</a>: every page as a Jupyter notebook, and the graded exercises.</p>"
    )


def notebook_files(root: Path) -> list[tuple[str, Path]]:
    """What the notebooks' zip holds: ``(name in the zip, file)``, sorted: each page's reader
    notebook (``notebooks/``) and the exercise notebooks with their README."""
    files = []
    for folder, inside in ZIP_FOLDERS.items():
        base = root / folder
        for f in sorted(base.rglob("*")) if base.is_dir() else []:
            if ".ipynb_checkpoints" in f.parts or not f.is_file():
                continue
            if f.suffix == ".ipynb" or f.name == "README.md":
                files.append((f"{inside}/{f.relative_to(base).as_posix()}", f))
    return files


def write_notebooks_zip(root: Path, out: Path) -> int:
    """The notebooks' zip at ``out``, byte for byte the same for the same files (fixed dates
    and order); returns how many files it holds."""
    import zipfile

    files = notebook_files(root)
    top = Path(NOTEBOOKS_ZIP).stem  # the folder it unpacks to, whatever the file is called
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED) as z:
        for name, f in files:
            info = zipfile.ZipInfo(f"{top}/{name}", date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            z.writestr(info, f.read_bytes())
    return len(files)


def zip_notebooks(app, exception) -> None:
    if exception is None and app.builder.name == "html":
        n = write_notebooks_zip(Path(app.srcdir), Path(app.outdir) / NOTEBOOKS_ZIP)
        logger.info(f"course_site: {n} notebooks zipped into {NOTEBOOKS_ZIP}")


def citation(root: Path) -> dict:
    """``CITATION.cff`` (the repository's root) as a dict; {} when missing."""
    import yaml

    path = root / "CITATION.cff"
    return yaml.safe_load(path.read_text(encoding="utf-8")) if path.is_file() else {}


def bibtex(cff: dict) -> str:
    """A ``@misc`` BibTeX entry from ``CITATION.cff``'s fields."""
    authors = " and ".join(
        "{" + a["name"] + "}" if "name" in a else f"{a['family-names']}, {a['given-names']}"
        for a in cff.get("authors", [])
    )
    year = str(cff.get("date-released", ""))[:4]
    fields = [
        ("title", "{" + cff["title"] + "}"),
        ("author", authors),
        ("year", year),
        ("howpublished", "\\url{" + cff.get("url", "") + "}"),
        ("note", "Code: " + cff.get("repository-code", "")),
    ]
    body = ",\n".join(f"  {k} = {{{v}}}" for k, v in fields if v)
    key = re.sub(r"\W+", "", cff["title"].split()[-1].lower()) + year
    return f"@misc{{{key},\n{body}\n}}"


def cite_section(cff: dict) -> str:
    """The landing page's "Cite this course" section."""
    return (
        '<section id="cite-this-course">\n<h2>Cite this course'
        '<a class="headerlink" href="#cite-this-course" title="Link to this heading">#</a></h2>\n'
        "<p>If this course helps your work or your teaching, please cite it (the repository's "
        "<code>CITATION.cff</code> holds the same):</p>\n"
        '<div class="highlight-bibtex notranslate"><div class="highlight"><pre>'
        + html.escape(bibtex(cff))
        + "</pre></div></div>\n</section>\n"
    )


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
    return column_counts(zoomable_images(body))


_PRE = re.compile(r"<pre(?P<attrs>[^>]*)>(?P<text>.*?)</pre>", re.S)
_TAG = re.compile(r"<[^>]+>")


def column_counts(body: str) -> str:
    """Give each ``<pre>`` its longest line's length in characters, ``--course-cols``: on a
    laptop or a desktop the site's CSS fits the block's font to its column with it (code and
    outputs do not scroll at 1280 px: issue 35)."""

    def repl(m: re.Match) -> str:
        if "--course-cols" in m.group("attrs"):
            return m.group(0)
        text = html.unescape(_TAG.sub("", m.group("text")))
        cols = max((len(line.rstrip()) for line in text.split("\n")), default=0)
        attrs = m.group("attrs")
        if 'style="' in attrs:
            attrs = attrs.replace('style="', f'style="--course-cols: {cols}; ', 1)
        else:
            attrs += f' style="--course-cols: {cols}"'
        return f"<pre{attrs}>{m.group('text')}</pre>"

    return _PRE.sub(repl, body)


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
    # sphinx-thebe (Jupyter Book adds it to every page): the site shows no Thebe button
    # (launch_buttons.thebe is off), so its loader and settings would only cost a request.
    for js in scripts:
        name, text = _script_name(js), _script_body(js)
        if name.split("?")[0].endswith("sphinx-thebe.js") or "THEBE_JS_URL" in text:
            drop.add(id(js))
    css = context.get("css_files")
    if isinstance(css, list):
        css[:] = [c for c in css if not _script_name(c).split("?")[0].endswith("sphinx-thebe.css")]
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


# --------------------------------------------------------------------------- numbering
def number_per_page(app, env) -> list[str]:
    """Equations, figures and tables of a page outside the numbered chapters (the landing page,
    "The complete picture", "Where next") count from 1 on that page. (Sphinx keeps one counter
    for all pages without a section number: "Where next"'s only equation was "(10)".)"""
    changed = []
    for docname, kinds in (getattr(env, "toc_fignumbers", None) or {}).items():
        if env.toc_secnumbers.get(docname):
            continue  # a numbered chapter: "(4.2)"
        for kind, numbers in kinds.items():
            ordered = sorted(numbers, key=lambda k: numbers[k])
            fresh = {k: (i + 1,) for i, k in enumerate(ordered)}
            if fresh != numbers:
                kinds[kind] = fresh
                changed.append(docname)
    return sorted(set(changed))


# --------------------------------------------------------------------------- after the build
_VIEWPORT = re.compile(r'<meta name="viewport"[^>]*>\s*')


def single_viewport(page: str) -> str:
    """One ``<meta name="viewport">`` (Sphinx's layout, a template of Jupyter Book's and
    pydata-sphinx-theme each write one): the first is kept."""
    seen = []

    def repl(m):
        seen.append(m)
        return m.group(0) if len(seen) == 1 else ""

    return _VIEWPORT.sub(repl, page)


def landing_redirect(target: str, title: str, description: str, canonical: str = "") -> str:
    """The site's ``index.html``: the redirect to the landing page Sphinx writes, as a page
    with a title, a description and a link (for readers, crawlers and link previews)."""
    e = html.escape
    link = f'<link rel="canonical" href="{e(canonical)}" />\n' if canonical else ""
    return (
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\" />\n"
        f"<title>{e(title)}</title>\n"
        f'<meta name="description" content="{e(description, quote=True)}" />\n'
        f'<meta name="viewport" content="width=device-width, initial-scale=1" />\n{link}'
        f'<meta http-equiv="Refresh" content="0; url={e(target)}" />\n</head>\n'
        f'<body><p><a href="{e(target)}">{e(title)}</a></p></body>\n</html>\n'
    )


_BARE_REDIRECT = re.compile(r'^\s*<meta http-equiv="Refresh" content="0; url=([^"]+)"\s*/>\s*$')


def finish_pages(app, exception) -> None:
    """After an HTML build: one viewport tag per page, ``index.html`` a titled page."""
    if exception is not None or app.builder.format != "html":
        return
    out = Path(app.outdir)
    for page in out.rglob("*.html"):
        if page.relative_to(out).parts[0] in ("_static", "_downloads"):
            continue
        text = page.read_text(encoding="utf-8")
        fixed = single_viewport(text)
        if fixed != text:
            page.write_text(fixed, encoding="utf-8")
    index = out / "index.html"
    site = app.config.html_title or app.config.project
    if index.is_file():
        m = _BARE_REDIRECT.match(index.read_text(encoding="utf-8"))
        if m:
            base = str(getattr(app.config, "html_baseurl", "") or "")
            canonical = base.rstrip("/") + "/" + m.group(1) if base else ""
            index.write_text(
                landing_redirect(m.group(1), site, DESCRIPTION, canonical), encoding="utf-8"
            )


# --------------------------------------------------------------------------- the hook
def default_description(metatags: str) -> str:
    """The course's description for a page sphinxext-opengraph found no paragraph in (the
    bibliography, a generated page): the tags it lacks, or ""."""
    tags = [("name", "description"), ("property", "og:description")]
    e = html.escape
    return "".join(
        f'<meta {attr}="{key}" content="{e(DESCRIPTION, quote=True)}" />\n'
        for attr, key in tags
        if f'{attr}="{key}"' not in metatags
    )


def page_context(app, pagename, templatename, context, doctree) -> None:
    if "body" in context and isinstance(context["body"], str):
        context["body"] = fix_body(context["body"])
    if callable(context.get("generate_toctree_html")):
        context["generate_toctree_html"] = _label_carets(context["generate_toctree_html"])
    context["metatags"] = str(context.get("metatags", "")) + default_description(
        str(context.get("metatags", ""))
    )
    trim_scripts(app, pagename, context)
    if app.builder.name != "html" or not callable(context.get("pathto")):
        return
    links = zip_link(context["pathto"](NOTEBOOKS_ZIP, 1))
    if app.config.course_pdf:
        links = pdf_link(context["pathto"](PDF, 1)) + links
    context["theme_extra_footer"] = links + str(context.get("theme_extra_footer") or "")
    if pagename == app.config.root_doc and isinstance(context.get("body"), str):
        body = insert_after_first_paragraph(context["body"], links)
        cff = citation(Path(app.srcdir))
        if cff:
            end = body.rfind("</section>")
            section = cite_section(cff)
            body = body[:end] + section + body[end:] if end >= 0 else body + section
        context["body"] = body


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
    app.connect("build-finished", zip_notebooks)
    app.connect("build-finished", finish_pages, priority=800)  # after the index redirect
    app.connect("env-get-updated", number_per_page, priority=900)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
