"""Sphinx role ``{exercise-links}`04_attention``` : "Open in Colab" and download links for an
exercise notebook, built from the repository URL and branch in ``_config.yml`` (the one place
that names them).

A notebook that does not exist yet renders as plain text and logs a message (not a warning,
so a chapter can land before its exercises); ``tests/book/test_book.py`` fails if any chapter's
exercise notebook is missing.
"""

from __future__ import annotations

import sys
from pathlib import Path

from docutils import nodes
from sphinx import addnodes
from sphinx.util import logging

logger = logging.getLogger(__name__)


def exercise_links_role(name, rawtext, text, lineno, inliner, options=None, content=None):
    env = inliner.document.settings.env
    stem = text.strip()
    rel = f"exercises/{stem}.ipynb"
    if not (Path(env.srcdir) / rel).exists():
        logger.info(f"exercise notebook {rel} does not exist yet", location=(env.docname, lineno))
        return [nodes.emphasis(text=f"(exercise notebook {rel}: coming soon)")], []
    from tools.colab import colab_url  # the Colab URL's one home (setup puts tools on the path)

    url = colab_url(rel, root=Path(env.srcdir))
    colab = nodes.reference("", "Open in Colab", refuri=url, classes=["colab-link"])
    download = addnodes.download_reference(
        "",
        "",
        nodes.literal(text=f"{stem}.ipynb"),
        reftarget="/" + rel,
        refdoc=env.docname,
        refexplicit=True,
        refdomain="",
        reftype="download",
    )
    return [colab, nodes.Text(" · download "), download], []


def name_colab_button(app, pagename, templatename, context, doctree):
    """Label the theme's launch button "Open in Colab" (the theme says just "Colab"), the
    words the course uses everywhere. Runs after sphinx-book-theme adds the button (501)."""
    for group in context.get("header_buttons", []):
        for button in group.get("buttons", []) if isinstance(group, dict) else []:
            if str(button.get("url", "")).startswith("https://colab.research.google.com/"):
                button["text"] = "Open in Colab"
                button["tooltip"] = "Open this chapter's notebook in Google Colab"


def setup(app):
    # The book's source folder is the repository root (``_config.yml`` lives there), and the
    # repository tools are not installed: Jupyter Book puts only ``book/_ext`` on the path.
    root = str(Path(app.srcdir).resolve())
    if root not in sys.path:
        sys.path.insert(0, root)
    app.add_role("exercise-links", exercise_links_role)
    app.connect("html-page-context", name_colab_button, priority=510)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
