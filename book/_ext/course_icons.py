"""The theme's icons as inline SVG, without Font Awesome's script.

pydata-sphinx-theme loads ``_static/scripts/fontawesome.js`` (1.5 MB, about 540 KB gzipped) on
every page to turn each ``<i class="fa-solid fa-bars"></i>`` into an ``<svg>``: a third to a
half of a page's weight, for the 16 icons of the header, the sidebar and the buttons. This
extension does the same at build time: after the build, each such ``<i>`` in the written pages
(and each empty ``<span class="fa-solid ...">``, which the web font would draw)
becomes the ``<svg>`` the script would have drawn (its path read from the theme's own
``fontawesome.js``, so the icons stay the theme's), the ``<script>`` tag goes, and the script
and its source map are not shipped. An icon the theme's file does not hold stays an ``<i>``
and is logged.

The theme's CSS draws a few more icons with Font Awesome's web font (``fa-solid-900.woff2``,
150 KB, fetched by every page that shows one: an admonition's title, a download link, the
external-link arrow, "Hide search matches", the secondary sidebar's chevron): a ``::before`` or
``::after`` whose ``content`` is the icon's character. ``icon_mask_css`` rewrites each such rule
of the theme's stylesheets into one that draws the same icon as a CSS mask (the SVG path from
``fontawesome.js``, as a ``data:`` URL, painted in the rule's own colour), with an empty
``content``, so no text needs the font and no page downloads it. The rules go at the end of
``course-icons.css``, after the theme's.

``tests/book/test_icons.py`` checks the parsing and the rewrites; ``tests/book/test_browser.py``
that no page loads the script and every icon is drawn; ``tests/book/test_icon_font_browser.py`` that
no page requests Font Awesome's fonts and that the admonitions still show their icons.
"""

from __future__ import annotations

import functools
import html
import re
import urllib.parse
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
    r'(?:"([a-z0-9-]+)"|\b([a-z0-9]+)):\[(\d+),(\d+),\[([^\]]*)\],"([0-9a-f]*)","(M[^"]*)"\]'
)
STYLES = {"fab": "fab", "fa-brands": "fab", "far": "far", "fa-regular": "far"}
STYLES.update({"fas": "fas", "fa-solid": "fas", "fa": "fas"})

# <i class="fa-solid fa-bars"></i>, <i class="fab fa-github" aria-hidden="true"></i>
_I = re.compile(r'<i class="([^"]*\bfa[a-z-]*\b[^"]*)"([^>]*)>\s*</i>')
# <span class="fa-solid fa-bars"></span> (sphinx-book-theme's header buttons): the same icon,
# which the web font would draw; only with a style class, so a "fancy" span stays a span.
_SPAN = re.compile(
    r'<span class="((?:[^"]*\s)?(?:fa-solid|fa-regular|fa-brands|fas|far|fab)(?=[\s"])[^"]*)"'
    r'([^>]*)>\s*</span>'
)
_SCRIPT_TAG = re.compile(
    r'[ \t]*<script[^>]*src="[^"]*scripts/fontawesome\.js[^"]*"[^>]*></script>\n?'
)


def parse_icons(source: str) -> dict[tuple[str, str], tuple[int, int, str]]:
    """The icons of a ``fontawesome.js``: ``(style, name) -> (width, height, path)``, style
    one of ``fas``, ``far``, ``fab``; each also under ``(style, character)``, the character
    of the web font that draws it (``(fas, "\uf05a")``: the circled "i")."""
    icons: dict[tuple[str, str], tuple[int, int, str]] = {}
    starts = [m.start() for m in _PACK.finditer(source)] + [len(source)]
    for start, end in zip(starts, starts[1:]):
        chunk = source[start:end]
        loader = _LOADER.search(chunk)
        if loader is None:
            continue
        style = loader.group(1)
        for m in _ICON.finditer(chunk, 0, loader.start()):
            icon = (int(m.group(3)), int(m.group(4)), m.group(7))
            # the name, and its older names (Font Awesome 5's "pencil-alt", ...)
            for name in [m.group(1) or m.group(2), *re.findall(r'"([a-z0-9-]+)"', m.group(5))]:
                icons.setdefault((style, name), icon)
            if m.group(6):  # the character the web font draws it for: (style, "\uf05a")
                icons.setdefault((style, chr(int(m.group(6), 16))), icon)
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
    """``page`` with its Font Awesome ``<i>`` (and empty ``<span>``) icons as ``<svg>`` and the
    script's tag gone;
    and the classes of the icons left as they were (unknown)."""
    unknown: set[str] = set()

    def repl(m: re.Match) -> str:
        out = svg(m.group(1), m.group(2), icons)
        if out is None:
            unknown.add(m.group(1))
            return m.group(0)
        return out

    return _SCRIPT_TAG.sub("", _SPAN.sub(repl, _I.sub(repl, page))), unknown


# --------------------------------------------------------------------- the web font's icons
# The theme's stylesheets that draw icons with the web font, in _static.
THEME_CSS = ("styles/pydata-sphinx-theme.css", "styles/sphinx-book-theme.css")
_COMMENT = re.compile(r"/\*.*?\*/", re.S)
_TOKEN = re.compile(r"([^{}]*)([{}])")
_VAR = re.compile(r"(--[\w-]+):\s*(\"(?:\\.|[^\"\\])*\"|var\(--[\w-]+\))")
_CONTENT = re.compile(r"(?<![\w-])content:\s*(\"(?:\\.|[^\"\\])*\"|var\(--[\w-]+\))")
_FA_CLASS = re.compile(r"\.fa[a-z]?\b|\.fa-")
# The drawing: the rule's colour through the icon's shape, a 1em box where the glyph stood;
# the font is the text's, not Font Awesome's (an empty box still asks its font for a strut, and
# Chromium fetches the font for that).
MASK = (
    "font-family:inherit;font-weight:inherit;display:inline-block;min-width:1em;min-height:1em;vertical-align:-0.125em;"
    "background-color:currentColor;-webkit-mask:{url} center/contain no-repeat;"
    "mask:{url} center/contain no-repeat"
)


def css_rules(css: str) -> list[tuple[tuple[str, ...], str, str]]:
    """The style rules of a stylesheet, ``(at-rules around it, selector, declarations)``: a
    rule inside ``@media (min-width:1200px){...}`` keeps that condition."""
    rules, stack = [], []
    for m in _TOKEN.finditer(_COMMENT.sub("", css)):
        text = " ".join(m.group(1).split())
        if m.group(2) == "{":
            stack.append(text)
        elif stack:
            prelude = stack.pop()
            if not prelude.startswith("@"):
                rules.append((tuple(stack), prelude, text))
    return rules


def _css_string(value: str) -> str:
    """A CSS string's text: ``"\\f107"`` and ``"\uf107"`` are both ``"\uf107"``."""
    body = value[1:-1]
    return re.sub(
        r"\\([0-9a-fA-F]{1,6})\s?|\\(.)",
        lambda m: chr(int(m.group(1), 16)) if m.group(1) else m.group(2),
        body,
    )


def _icon_of(icons: dict, glyph: str) -> tuple[int, int, str] | None:
    """The icon the web font draws for ``glyph``: solid first (the theme's ``--fa-font-solid``),
    then brands, then regular."""
    return next((icons[(s, glyph)] for s in ("fas", "fab", "far") if (s, glyph) in icons), None)


def _font_glyph(text: str) -> str | None:
    """The one private-use character (where Font Awesome puts its icons) ``text`` is, or None."""
    return text if len(text) == 1 and 0xE000 <= ord(text) <= 0xF8FF else None


def mask_url(width: int, height: int, path: str) -> str:
    """An icon as a ``url("data:image/svg+xml,...")`` for ``mask``."""
    svg = (
        f"<svg xmlns='http://www.w3.org/2000/svg' viewBox='0 0 {width} {height}'>"
        f"<path d='{path}'/></svg>"
    )
    return 'url("data:image/svg+xml,' + urllib.parse.quote(svg, safe=" /=:',.-") + '")'


def icon_mask_css(stylesheets: list[str], icons: dict) -> tuple[str, set[str]]:
    """CSS that draws every web-font icon of ``stylesheets`` as a mask: for each rule whose
    ``content`` is a Font Awesome character (directly or through a ``--pst-icon-*`` variable),
    the same selector with ``content: ""`` and the icon's shape; each icon's data URL once, as
    a custom property of ``:root``. Rules for Font Awesome's own classes (``.fa-bars:before``:
    the ``<i>`` icons, inline SVG already) are left alone. Returns the CSS and the characters
    with no icon in ``icons`` (their rules are left as they were)."""
    rules_in = [rule for sheet in stylesheets for rule in css_rules(sheet)]
    values = {name: value for _, _, body in rules_in for name, value in _VAR.findall(body)}

    def resolve(value: str, depth: int = 0) -> str | None:
        if value.startswith("var(") and depth < 10:
            inner = values.get(value[4:-1])
            return resolve(inner, depth + 1) if inner else None
        return _css_string(value) if value.startswith('"') else None

    used: dict[str, str] = {}  # glyph -> custom property
    rules: list[str] = []
    unknown: set[str] = set()
    for around, selector, body in rules_in:
        content = _CONTENT.search(body)
        if not content or _FA_CLASS.search(selector):
            continue
        glyph = _font_glyph(resolve(content.group(1)) or "")
        if glyph is None:
            continue
        if _icon_of(icons, glyph) is None:
            unknown.add(f"U+{ord(glyph):04X}")
            continue
        prop = used.setdefault(glyph, f"--course-icon-{ord(glyph):x}")
        rule = f'{selector}{{content:"";' + MASK.format(url=f"var({prop})") + "}"
        for at in reversed(around):  # inside its @media, as in the theme
            rule = f"{at}{{{rule}}}"
        rules.append(rule)
    root = ";".join(f"{prop}:{mask_url(*_icon_of(icons, glyph))}" for glyph, prop in used.items())
    head = "/* Generated by course_icons.icon_mask_css: the theme's web-font icons as masks. */\n"
    return (head + f":root{{{root}}}\n" + "\n".join(rules) + "\n") if rules else "", unknown


def write_icon_css(out: Path, icons: dict) -> set[str]:
    """``_static/course-icons.css``: the SVG rules (``icons_static``) and the web font's icons
    as masks (``icon_mask_css`` of the theme's stylesheets in ``out``)."""
    sheets = [
        (out / "_static" / name).read_text(encoding="utf-8")
        for name in THEME_CSS
        if (out / "_static" / name).exists()
    ]
    masks, unknown = icon_mask_css(sheets, icons)
    base = (HERE / "icons_static" / CSS).read_text(encoding="utf-8")
    (out / "_static" / CSS).write_text(base + "\n" + masks, encoding="utf-8")
    return unknown


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
    glyphs = write_icon_css(out, icons)
    if glyphs:
        logger.warning(f"course_icons: no icon for the web font's {sorted(glyphs)}; left as text")


def configure(app, config) -> None:
    config.html_static_path.append(str(HERE / "icons_static"))


def setup(app):
    app.connect("config-inited", configure)
    app.add_css_file(CSS)
    app.connect("build-finished", rewrite_pages)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
