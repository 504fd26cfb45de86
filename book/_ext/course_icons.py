"""The theme's icons as inline SVG, without Font Awesome's script.

pydata-sphinx-theme loads ``_static/scripts/fontawesome.js`` (1.5 MB, about 540 KB gzipped) on
every page to turn each ``<i class="fa-solid fa-bars"></i>`` into an ``<svg>``: a third to a
half of a page's weight, for the 16 icons of the header, the sidebar and the buttons. This
extension does the same at build time: after the build, each such ``<i>`` in the written pages
becomes the ``<svg>`` the script would have drawn (its path read from the theme's own
``fontawesome.js``, so the icons stay the theme's), the ``<script>`` tag goes, and the script
and its source map are not shipped. An icon the theme's file does not hold stays an ``<i>``
and is logged. (The admonitions' icons are Font Awesome's web font, in the theme's CSS; they
load only where an admonition shows one.)

``tests/test_icons.py`` checks the parsing and the rewrite; ``tests/test_browser.py`` that
no page loads the script and every icon is drawn.
"""

from __future__ import annotations

import functools
import html
import re
from pathlib import Path

from sphinx.util import logging

logger = logging.getLogger(__name__)

SCRIPT = "fontawesome.js"
# The CSS the script injects for its SVGs (the part the theme's icons use).
CSS = "course-icons.css"
HERE = Path(__file__).resolve().parent

# A pack of icons in fontawesome.js: ``var p={name:[width,height,[aliases],"unicode","path"],
# ...}`` followed, after its loader, by ``d("fab",p)`` (brands), ``d("far",p)`` or ``d("fas",p)``.
_PACK = re.compile(r"var p=\{")
_LOADER = re.compile(r'd\("(fa[bsr])",p\)')
_ICON = re.compile(
    r'(?:"([a-z0-9-]+)"|\b([a-z0-9]+)):\[(\d+),(\d+),\[([^\]]*)\],"[0-9a-f]*","(M[^"]*)"\]'
)
STYLES = {"fab": "fab", "fa-brands": "fab", "far": "far", "fa-regular": "far"}
STYLES.update({"fas": "fas", "fa-solid": "fas", "fa": "fas"})

# <i class="fa-solid fa-bars"></i>, <i class="fab fa-github" aria-hidden="true"></i>
_I = re.compile(r'<i class="([^"]*\bfa[a-z-]*\b[^"]*)"([^>]*)>\s*</i>')
_SCRIPT_TAG = re.compile(
    r'[ \t]*<script[^>]*src="[^"]*scripts/fontawesome\.js[^"]*"[^>]*></script>\n?'
)


def parse_icons(source: str) -> dict[tuple[str, str], tuple[int, int, str]]:
    """The icons of a ``fontawesome.js``: ``(style, name) -> (width, height, path)``, style
    one of ``fas``, ``far``, ``fab``."""
    icons: dict[tuple[str, str], tuple[int, int, str]] = {}
    starts = [m.start() for m in _PACK.finditer(source)] + [len(source)]
    for start, end in zip(starts, starts[1:]):
        chunk = source[start:end]
        loader = _LOADER.search(chunk)
        if loader is None:
            continue
        style = loader.group(1)
        for m in _ICON.finditer(chunk, 0, loader.start()):
            icon = (int(m.group(3)), int(m.group(4)), m.group(6))
            # the name, and its older names (Font Awesome 5's "pencil-alt", ...)
            for name in [m.group(1) or m.group(2), *re.findall(r'"([a-z0-9-]+)"', m.group(5))]:
                icons.setdefault((style, name), icon)
    return icons


@functools.lru_cache(maxsize=1)
def theme_icons() -> dict[tuple[str, str], tuple[int, int, str]]:
    """The icons of the installed pydata-sphinx-theme's ``fontawesome.js``."""
    import pydata_sphinx_theme

    theme = Path(pydata_sphinx_theme.__file__).parent / "theme" / "pydata_sphinx_theme"
    return parse_icons((theme / "static" / "scripts" / SCRIPT).read_text(encoding="utf-8"))


def svg(classes: str, attrs: str, icons: dict) -> str | None:
    """The ``<svg>`` for an ``<i>`` with these classes (None when the icon is unknown)."""
    names = classes.split()
    style = next((STYLES[c] for c in names if c in STYLES), "fas")
    icon = next((c[3:] for c in names if c.startswith("fa-") and (style, c[3:]) in icons), None)
    if icon is None:
        return None
    width, height, path = icons[(style, icon)]
    label = re.search(r'\baria-label="([^"]*)"', attrs)
    a11y = f'role="img" aria-label="{label.group(1)}"' if label else 'aria-hidden="true"'
    return (
        f'<svg class="svg-inline--fa {html.escape(classes)}" {a11y} focusable="false" '
        f'xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}">'
        f'<path fill="currentColor" d="{path}"></path></svg>'
    )


def inline_icons(page: str, icons: dict) -> tuple[str, set[str]]:
    """``page`` with its Font Awesome ``<i>`` icons as ``<svg>`` and the script's tag gone;
    and the classes of the icons left as they were (unknown)."""
    unknown: set[str] = set()

    def repl(m: re.Match) -> str:
        out = svg(m.group(1), m.group(2), icons)
        if out is None:
            unknown.add(m.group(1))
            return m.group(0)
        return out

    return _SCRIPT_TAG.sub("", _I.sub(repl, page)), unknown


def rewrite_pages(app, exception) -> None:
    if exception is not None or app.builder.format != "html":
        return
    out = Path(app.outdir)
    icons = theme_icons()
    unknown: set[str] = set()
    for page in out.rglob("*.html"):
        if page.relative_to(out).parts[0] in ("_static", "_downloads"):
            continue
        text = page.read_text(encoding="utf-8")
        new, missing = inline_icons(text, icons)
        unknown |= missing
        if new != text:
            page.write_text(new, encoding="utf-8")
    for name in (SCRIPT, SCRIPT + ".map", SCRIPT + ".LICENSE.txt"):
        (out / "_static" / "scripts" / name).unlink(missing_ok=True)
    if unknown:
        logger.warning(f"course_icons: no inline SVG for {sorted(unknown)}; left as <i>")


def configure(app, config) -> None:
    config.html_static_path.append(str(HERE / "icons_static"))


def setup(app):
    app.connect("config-inited", configure)
    app.add_css_file(CSS)
    app.connect("build-finished", rewrite_pages)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
