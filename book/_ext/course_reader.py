"""The page's "Open in Colab" and download buttons open the page's *reader notebook*.

A chapter's MyST source renders only on the site; what a reader opens in Jupyter or Colab is
its reader notebook ``notebooks/<page>.ipynb`` (``tools/reader.py``: the glued numbers written
in, cross-references as links to the site). sphinx-book-theme points its Colab button at the
source's paired ``.ipynb`` and its ``.ipynb`` download at myst-nb's copy of the source; both
are pointed here at the reader notebook, which is copied into the site as
``_notebooks/<page>.ipynb``. Pages without a reader notebook keep the theme's buttons.

The reader notebooks quote what only the executed build knows (glued values, figure, section
and equation numbers, label titles, glossary anchors, download paths): when an HTML build
finishes, ``write_site_data`` writes it from the build's environment to ``<build>/site.json``
(beside ``html/`` and ``jupyter_execute/``), in the format of ``notebooks/site.json``, which
``./course sync --from-build`` copies (``tools/reader.py``).
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

from sphinx.util import logging

_REPO = Path(__file__).resolve().parents[2]
if str(_REPO) not in sys.path:
    sys.path.insert(0, str(_REPO))
from tools.colab import colab_url  # noqa: E402
from tools.reader import READER_DIR, SITE_BUILD_FILE, glue_entries, site_data_text  # noqa: E402

logger = logging.getLogger(__name__)
OUT_DIR = "_notebooks"


def reader_rel(pagename: str) -> str:
    """``book/04_attention`` -> ``04_attention.ipynb`` (relative to ``notebooks/``)."""
    parts = pagename.split("/")
    return "/".join(parts[1:] if parts[0] == "book" else parts) + ".ipynb"


def point_buttons(app, pagename, templatename, context, doctree):
    rel = reader_rel(pagename)
    if not (Path(app.srcdir) / READER_DIR / rel).is_file():
        return
    colab = colab_url(f"{READER_DIR}/{rel}", root=Path(app.srcdir))
    download = context["pathto"](f"{OUT_DIR}/{rel}", 1)
    for group in context.get("header_buttons", []):
        buttons = group.get("buttons", []) if isinstance(group, dict) else []
        for button in buttons:
            if str(button.get("url", "")).startswith("https://colab.research.google.com/"):
                button["url"] = colab
        if isinstance(group, dict) and group.get("label") == "download-buttons":
            notebook = next(
                (b for b in buttons if b.get("label") == "download-notebook-button"), None
            )
            if notebook is None:
                notebook = {
                    "type": "link",
                    "text": ".ipynb",
                    "icon": "fas fa-code",
                    "label": "download-notebook-button",
                }
                buttons.insert(0, notebook)
            notebook["url"] = download
            notebook["tooltip"] = (
                "Download the notebook (for Jupyter: numbers and links written in)"
            )


def copy_notebooks(app, exception):
    if exception is not None or app.builder.format != "html":
        return
    src = Path(app.srcdir) / READER_DIR
    out = Path(app.outdir) / OUT_DIR
    n = 0
    for nb in sorted(src.rglob("*.ipynb")) if src.is_dir() else []:
        if ".ipynb_checkpoints" in nb.parts:
            continue
        target = out / nb.relative_to(src)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(nb, target)
        n += 1
    if n:
        logger.info(f"course_reader: {n} reader notebook(s) copied to {OUT_DIR}/")


# --------------------------------------------------------------------------- site data
_SKIP_LABELS = ("genindex", "modindex", "search", "py-")


def glue_values(glue_file: Path) -> dict:
    """A page's glued values as the reader notebooks need them (myst-nb's ``.glue.json``)."""
    return glue_entries(json.loads(glue_file.read_text(encoding="utf-8")))


def _number(env, docname: str, anchor: str) -> tuple[str, str] | None:
    """(figure type, "2.1") of a numbered target of a page, or None."""
    for figtype, numbers in env.toc_fignumbers.get(docname, {}).items():
        if anchor in numbers:
            return figtype, ".".join(map(str, numbers[anchor]))
    return None


def _labels(env) -> dict[str, dict]:
    """Every label of a page: its page, anchor and title, and its number (a figure's, a
    table's, a section's) where it has one."""
    std = env.get_domain("std")
    labels = {}
    for name, (doc, anchor, title) in std.labels.items():
        if doc in env.titles and not name.startswith(_SKIP_LABELS):
            labels[name] = {"page": doc, "anchor": anchor, "title": title}
    for name, (doc, anchor) in std.anonlabels.items():
        if doc in env.titles and name not in labels and not name.startswith(_SKIP_LABELS):
            labels[name] = {"page": doc, "anchor": anchor, "title": ""}
    for entry in labels.values():
        found = _number(env, entry["page"], entry["anchor"])
        key = "" if entry["anchor"] == "" else f"#{entry['anchor']}"
        secnum = env.toc_secnumbers.get(entry["page"], {}).get(key)
        if found:
            entry["type"], entry["number"] = found
        elif secnum:
            entry["type"], entry["number"] = "section", ".".join(map(str, secnum))
    return labels


def site_data(app) -> dict:
    """What the reader notebooks need from this build: every page's glued values (myst-nb's
    output folder) and, from the build environment's domains and tables of contents, labels
    with their titles and numbers, equation numbers, glossary anchors, page titles, section
    numbers, downloads and the numbering formats."""
    from docutils import nodes

    env = app.env
    glue_dir = Path(env.mystnb_config.output_folder)
    pages = {}
    for doc in sorted(env.all_docs):
        glue_file = glue_dir / f"{doc}.glue.json"
        if glue_file.is_file():
            pages[doc] = {"glue": glue_values(glue_file)}

    std = env.get_domain("std")
    labels = _labels(env)
    equations = {}
    for name, (doc, eqno) in env.get_domain("math").equations.items():
        anchor = f"equation-{name}"
        found = _number(env, doc, anchor)
        equations[name] = {
            "page": doc,
            "anchor": anchor,
            "number": found[1] if found else str(eqno),
        }
    terms = {
        name.lower(): {"page": doc, "anchor": anchor}
        for (kind, name), (doc, anchor) in std.objects.items()
        if kind == "term"
    }
    titles = {doc: node.astext() for doc, node in env.titles.items()}
    headings = {}  # the site's section numbers, in page order (numbered parts only)
    for doc, secnums in env.toc_secnumbers.items():
        if doc not in env.tocs:
            continue
        found = [
            [ref.astext(), ".".join(map(str, secnums[ref["anchorname"] or ""]))]
            for ref in env.tocs[doc].findall(nodes.reference)
            if secnums.get(ref["anchorname"] or "")
        ]
        if found:
            headings[doc] = found
    sections = {
        doc: ".".join(map(str, env.toc_secnumbers.get(doc, {}).get("", ()))) for doc in titles
    }
    downloads = {path: f"_downloads/{dest}" for path, (_docs, dest) in env.dlfiles.items()}
    config = app.config
    return {
        "formats": {
            "numfig": dict(config.numfig_format or {}),
            "eqref": config.math_eqref_format or "({number})",
        },
        "pages": pages,
        "titles": dict(sorted(titles.items())),
        "headings": dict(sorted(headings.items())),
        "numbers": {k: v for k, v in sorted(sections.items()) if v},
        "labels": dict(sorted(labels.items())),
        "equations": dict(sorted(equations.items())),
        "terms": dict(sorted(terms.items())),
        "downloads": dict(sorted(downloads.items())),
    }


def write_site_data(app, exception) -> None:
    """After an HTML build (not the single page of the PDF): ``<build>/site.json``."""
    if exception is not None or app.builder.name != "html":
        return
    target = Path(app.outdir).parent / SITE_BUILD_FILE
    target.write_text(site_data_text(site_data(app)), encoding="utf-8")
    logger.info(f"course_reader: the reader notebooks' site data written to {target}")


def setup(app):
    # read by tools/colab.py from _config.yml; declared so that Sphinx knows the value
    app.add_config_value("course_colab_branch", "main", "html")
    # after sphinx-book-theme adds the buttons (501) and course_links names Colab's (510)
    app.connect("html-page-context", point_buttons, priority=520)
    app.connect("build-finished", copy_notebooks)
    app.connect("build-finished", write_site_data)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
