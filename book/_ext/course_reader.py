"""The page's "Open in Colab" and download buttons open the page's *reader notebook*.

A chapter's MyST source renders only on the site; what a reader opens in Jupyter or Colab is
its reader notebook ``notebooks/<page>.ipynb`` (``tools/reader.py``: the glued numbers written
in, cross-references as links to the site). sphinx-book-theme points its Colab button at the
source's paired ``.ipynb`` and its ``.ipynb`` download at myst-nb's copy of the source; both
are pointed here at the reader notebook, which is copied into the site as
``_notebooks/<page>.ipynb``. Pages without a reader notebook keep the theme's buttons.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

from sphinx.util import logging

_REPO = Path(__file__).resolve().parents[2]
if str(_REPO) not in sys.path:
    sys.path.insert(0, str(_REPO))
from tools.colab import colab_url  # noqa: E402
from tools.reader import READER_DIR  # noqa: E402

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


def setup(app):
    # read by tools/colab.py from _config.yml; declared so that Sphinx knows the value
    app.add_config_value("course_colab_branch", "main", "html")
    # after sphinx-book-theme adds the buttons (501) and course_links names Colab's (510)
    app.connect("html-page-context", point_buttons, priority=520)
    app.connect("build-finished", copy_notebooks)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
