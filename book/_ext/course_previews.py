"""Hover previews: a glossary term, a citation or a cross-reference shows its target in a small
box when the pointer rests on it (or the link has keyboard focus), so a reader need not leave
the page.

``previews_static/course-previews.js`` fetches the target page from the site itself (the
same origin: no service, no network beyond the site, so it works offline and from a local
server), takes the fragment the link names (a glossary entry: its terms, synonyms included,
and its definition; a bibliography entry, a figure, an equation, a section's heading and first
paragraph) or, for a link to a whole page (``{doc}``), the page's title and first paragraph of
prose, and shows a copy of it; pages are fetched once and kept. A copied glossary or
bibliography entry goes into an empty copy of its list, so the box is valid markup for
assistive technology. Links inside the article only; the theme's navigation has no previews.
Escape or moving away closes the box. Not in print.

``tests/book/test_previews_browser.py`` hovers each kind of link offline in Chromium, previews every
glossary term and every page, and runs axe-core with a preview of each kind open.
"""

from __future__ import annotations

from pathlib import Path

HERE = Path(__file__).resolve().parent
STATIC = HERE / "previews_static"
SCRIPT = "course-previews.js"
CSS = "course-previews.css"


def configure(app, config) -> None:
    config.html_static_path.append(str(STATIC))


def setup(app):
    app.connect("config-inited", configure)
    app.add_js_file(SCRIPT, loading_method="defer")
    app.add_css_file(CSS)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
