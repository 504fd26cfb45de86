"""The site's head and icons at build time (``book/_ext/course_icons.py``,
``book/_ext/course_site.py``): fast tests of the rewrites; the built site in
tests/book/test_browser.py (``test_icons_are_inline_svg``,
``test_every_page_has_head_and_licence``).
The head's Open Graph tags are sphinxext-opengraph's (tests/book/test_site_finish.py).
"""

from __future__ import annotations

import importlib.util
import types

from tools import ROOT
from tools import pdf as pdf_tool


def _ext(name: str):
    spec = importlib.util.spec_from_file_location(f"{name}_t", ROOT / "book/_ext" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


icons = _ext("course_icons")
site = _ext("course_site")

# Three packs as fontawesome.js holds them: a name, a quoted name with an alias, the loader.
FAKE = (
    'var p={github:[496,512,[],"f09b","M1 1Z"]};d("fab",p)'
    'var p={"bars":[448,512,["navicon"],"f0c9","M2 2Z"],"file-pdf":[384,512,[],"f1c1","M3 3Z"]};'
    'd("fas",p)'
    'var p={"file-pdf":[384,512,[],"f1c1","M4 4Z"]};d("far",p)'
)


def test_icons_are_read_per_pack_with_their_aliases():
    got = icons.parse_icons(FAKE)
    assert got[("fab", "github")] == (496, 512, "M1 1Z")
    assert got[("fas", "bars")] == got[("fas", "navicon")] == (448, 512, "M2 2Z")
    assert got[("fas", "file-pdf")][2] == "M3 3Z" and got[("far", "file-pdf")][2] == "M4 4Z"


def test_an_icon_becomes_inline_svg_and_the_script_goes():
    page = (
        '<script defer src="../_static/scripts/fontawesome.js?digest=1"></script>\n'
        '<button><i class="fa-solid fa-bars"></i></button><i class="fab fa-github"></i>'
        '<i class="far fa-file-pdf" aria-label="PDF"></i><i class="fa-solid fa-unknown"></i>'
    )
    out, unknown = icons.inline_icons(page, icons.parse_icons(FAKE))
    assert "fontawesome.js" not in out
    assert '<svg class="svg-inline--fa fa-solid fa-bars" aria-hidden="true"' in out
    assert 'viewBox="0 0 448 512"><path fill="currentColor" d="M2 2Z">' in out
    assert 'viewBox="0 0 496 512"' in out  # the brands pack for "fab"
    assert 'role="img" aria-label="PDF"' in out and 'd="M4 4Z"' in out  # "far": regular
    assert unknown == {"fa-solid fa-unknown"} and '<i class="fa-solid fa-unknown">' in out


def test_the_installed_theme_has_every_icon_the_site_uses():
    have = icons.theme_icons()
    for name in ("bars", "list", "magnifying-glass", "angle-left", "arrow-up", "download"):
        assert ("fas", name) in have, name
    assert ("fab", "github") in have and ("fas", "pencil-alt") in have


def test_one_viewport_tag_is_kept():
    head = (
        '<meta name="viewport" content="width=device-width, initial-scale=1.0" />'
        '<meta name="viewport" content="width=device-width, initial-scale=1" />\n<title>x</title>'
        '  <meta name="viewport" content="width=device-width, initial-scale=1"/>\n'
    )
    out = site.single_viewport(head)
    assert out.count('name="viewport"') == 1 and "<title>x</title>" in out


def test_the_index_page_has_a_title_and_still_redirects(tmp_path):
    page = site.landing_redirect(
        "book/intro.html", "A & B", "About it.", "https://x/book/intro.html"
    )
    assert "<title>A &amp; B</title>" in page and 'rel="canonical"' in page
    (tmp_path / "index.html").write_text(page)
    assert pdf_tool.start_page(tmp_path) == "book/intro.html"  # the PDF printer follows it
    assert site._BARE_REDIRECT.match(
        '<meta http-equiv="Refresh" content="0; url=book/intro.html" />\n'
    )


def test_unnumbered_pages_count_their_equations_from_one():
    env = types.SimpleNamespace(
        toc_secnumbers={"book/04": {"": (4,)}, "book/where_next": {}},
        toc_fignumbers={
            "book/04": {"displaymath": {"e1": (4, 1), "e2": (4, 2)}},
            "book/complete": {"displaymath": {"a": (1,), "b": (2,)}},
            "book/where_next": {"displaymath": {"c": (10,)}, "figure": {"f": (3,), "g": (2,)}},
        },
    )
    changed = site.number_per_page(None, env)
    assert changed == ["book/where_next"]
    assert env.toc_fignumbers["book/where_next"]["displaymath"] == {"c": (1,)}
    assert env.toc_fignumbers["book/where_next"]["figure"] == {"g": (1,), "f": (2,)}
    assert env.toc_fignumbers["book/04"]["displaymath"]["e2"] == (4, 2)  # chapters untouched


def test_an_empty_fa_span_becomes_inline_svg_and_other_spans_stay():
    page = (
        '<button><span class="fa-solid fa-bars"></span></button>'
        '<span class="fancy">text</span><span class="fa-bars"></span>'
    )
    out, unknown = icons.inline_icons(page, icons.parse_icons(FAKE))
    assert '<svg class="svg-inline--fa fa-solid fa-bars" aria-hidden="true"' in out
    assert '<span class="fancy">text</span><span class="fa-bars"></span>' in out  # no style
    assert not unknown


def test_icons_are_also_found_by_the_web_fonts_character():
    got = icons.parse_icons(FAKE)
    assert got[("fas", "\uf0c9")] == got[("fas", "bars")]
    assert got[("fab", "\uf09b")] == got[("fab", "github")]


# A theme stylesheet in miniature: the icon variables, a rule through a variable, one with an
# escaped character inside @media, Font Awesome's own class rule, a glyph it has no icon for,
# and ordinary content.
THEME = (
    ':root{--pst-icon-bars:"\uf0c9";--pst-icon-note:var(--pst-icon-bars)}'
    "/* a comment { with braces } */"
    ".admonition>.admonition-title:after{content:var(--pst-icon-note);font:var(--fa-font-solid)}"
    '@media (min-width:1200px){.x .onthispage:after{content:"\\f1c1";font-weight:900}}'
    '.fa-bars:before{content:"\\f0c9"}'
    '.odd:before{content:"\\e0ff"}'
    '.quote:before{content:"\\201c"}'
)


def test_the_themes_font_icons_become_masks():
    css, unknown = icons.icon_mask_css([THEME], icons.parse_icons(FAKE))
    assert unknown == {"U+E0FF"}
    rules = css.splitlines()
    root = next(r for r in rules if r.startswith(":root{"))
    # each icon once, as a data: SVG of its path
    assert "--course-icon-f0c9:url(\"data:image/svg+xml," in root and "M2 2Z" in root
    assert "--course-icon-f1c1:" in root and "M3 3Z" in root  # solid before regular (M4 4Z)
    adm = next(r for r in rules if r.startswith(".admonition>.admonition-title:after{"))
    assert 'content:"";' in adm and "mask:var(--course-icon-f0c9)" in adm
    assert "font-family:inherit" in adm and "background-color:currentColor" in adm
    assert "@media (min-width:1200px){.x .onthispage:after{" in css  # its condition kept
    assert ".fa-bars" not in css and ".quote" not in css and ".odd" not in css


def test_css_rules_keep_their_at_rules():
    got = icons.css_rules("a{b:c}@media print{@supports (x:y){p q{r:s}}}/* {} */t{u:v}")
    assert got == [
        ((), "a", "b:c"),
        (("@media print", "@supports (x:y)"), "p q", "r:s"),
        ((), "t", "u:v"),
    ]
