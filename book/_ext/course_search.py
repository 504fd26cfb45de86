"""Readable search results: the summaries on ``search.html`` show math as plain text.

Sphinx's search page (``searchtools.js``) fetches each hit's HTML and cuts its summary from the
page's text, where MathJax's source is still raw TeX:
``\\(\\mathrm{softmax}(QK^\\top/\\sqrt{d_k})\\)``. This extension

- converts every math node to a plain-text (Unicode) rendering at build time with pylatexenc's
  ``LatexNodes2Text`` (:func:`math_text`: ``softmax(QKᵀ/√(d_k))``), and writes it into the
  node's HTML element as ``data-course-text`` (the math renderer's tag, whatever renderer is
  configured; nothing visible changes on the page);
- serves ``search_static/course-search.js`` on the search page only (added during
  ``html-page-context``, so Sphinx adds it to that page alone; the folder is not called
  ``_static`` because Jupyter Book would inject every ``.js`` found there into every page). The
  script wraps the narrowest hook, ``Search.htmlToText``: before the page's text is taken, each
  element carrying ``data-course-text`` is replaced by that text.

:func:`math_text` is pure and tested in ``tests/book/test_search.py``; the search page itself in
``tests/book/test_search_browser.py``.
"""

from __future__ import annotations

import functools
import html
import re
from pathlib import Path

from docutils import nodes

HERE = Path(__file__).resolve().parent
STATIC = HERE / "search_static"
SCRIPT = "course-search.js"
ATTRIBUTE = "data-course-text"

# Operators and relations: pylatexenc glues them to the next symbol ("a →b"); spaced here.
_SPACED = {
    "cdot": "·",
    "times": "×",
    "odot": "⊙",
    "to": "→",
    "leftarrow": "←",
    "rightarrow": "→",
    "mapsto": "↦",
    "in": "∈",
    "mid": "|",
    "approx": "≈",
    "le": "≤",
    "leq": "≤",
    "ge": "≥",
    "geq": "≥",
    "ne": "≠",
    "neq": "≠",
    "propto": "∝",
    "ll": "≪",
    "gg": "≫",
    "pm": "±",
    "sim": "∼",
    "equiv": "≡",
    "cdots": "⋯",
    "dots": "…",
    "ldots": "…",
}
# Function names: pylatexenc writes "\sin 1" as "sin1".
_FUNCTIONS = ["log", "ln", "exp", "sin", "cos", "tan", "tanh", "max", "min", "arg", "det"]
_SUPERSCRIPT = str.maketrans("0123456789-", "⁰¹²³⁴⁵⁶⁷⁸⁹⁻")


def _frac(node, l2tobj) -> str:
    """``\\frac{a}{b}`` as ``a/b``, parenthesising a part that is more than one symbol."""
    args = node.nodeargd.argnlist if node.nodeargd else []
    if len(args) != 2:
        return l2tobj.nodelist_to_text(args)
    parts = []
    for arg in args:
        text = l2tobj.nodelist_to_text([arg]).strip()
        parts.append(text if re.fullmatch(r"[\w.∂√²]+|∂\w+", text) else f"({text})")
    return "/".join(parts)


@functools.lru_cache(maxsize=1)
def _converter():
    from pylatexenc import latex2text as l2t

    db = l2t.get_default_latex_context_db()
    macros = [l2t.MacroTextSpec(name, simplify_repl=f" {sym} ") for name, sym in _SPACED.items()]
    macros += [l2t.MacroTextSpec(name, simplify_repl=f"{name} ") for name in _FUNCTIONS]
    macros += [l2t.MacroTextSpec(name, simplify_repl=_frac) for name in ("frac", "tfrac", "dfrac")]
    macros += [l2t.MacroTextSpec(name, simplify_repl=" ") for name in ("quad", "qquad")]
    db = db.filter_context(keep_categories=db.categories())  # a copy; the default stays
    db.add_context_category("course-search", prepend=True, macros=macros)
    return l2t.LatexNodes2Text(latex_context=db, math_mode="text", strict_latex_spaces=False)


def _group_scripts(tex: str) -> str:
    """``x^{a+b}`` becomes ``x^{(a+b)}`` so the text reads ``x^(a+b)``; a single symbol,
    number or command (``^{2}``, ``_{k}``, ``^{\\top}``, ``_{\\text{model}}``) keeps no brackets."""
    out, i = [], 0
    while i < len(tex):
        ch = tex[i]
        if ch in "^_" and tex[i + 1 : i + 2] == "{":
            depth, j = 0, i + 1
            while j < len(tex):
                depth += {"{": 1, "}": -1}.get(tex[j], 0)
                if depth == 0:
                    break
                j += 1
            inner = tex[i + 2 : j]
            simple = re.fullmatch(r"\s*(-?\d+(\.\d+)?|\w|\\[A-Za-z]+(\{[^{}]*\})?)\s*", inner)
            out.append(f"{ch}{{{inner}}}" if simple else f"{ch}{{({_group_scripts(inner)})}}")
            i = j + 1
            continue
        out.append(ch)
        i += 1
    return "".join(out)


def math_text(tex: str) -> str:
    """A plain-text (Unicode) reading of a TeX math expression, for search summaries:
    ``math_text(r"\\mathrm{softmax}(QK^\\top/\\sqrt{d_k})") == "softmax(QKᵀ/√(d_k))"``."""
    tex = re.sub(r"\\(begin|end)\{(aligned|align\*?|equation\*?|gather\*?|split)\}", " ", tex)
    tex = tex.replace("&", " ").replace(r"\\", "; ")
    tex = re.sub(r"\\[td]frac\b", r"\\frac", tex)  # their arguments parse like \frac's
    text = _converter().latex_to_text(_group_scripts(tex))
    text = re.sub(r"\^[⊤T](?!\w)", "ᵀ", text)
    text = re.sub(r"\^(-?\d)(?![\d.])", lambda m: m.group(1).translate(_SUPERSCRIPT), text)
    text = re.sub(r"\b(" + "|".join(_FUNCTIONS) + r") (?=[(_^\[])", r"\1", text)
    text = re.sub(r"√\(([A-Za-z0-9.]+)\)", r"√\1", text)  # √2, but √(d_k)
    text = re.sub(r"(?<=\S)([∑∏])", r" \1", text)
    text = re.sub(r"\s+", " ", text)
    text = re.sub(r"([(\[]) ", r"\1", text)
    text = re.sub(r" ([)\],;])", r"\1", text)
    return text.strip(" ;")


# --------------------------------------------------------------------------- the HTML
def _with_text(visit):
    """Wrap a math renderer's visitor: its opening tag gets ``data-course-text``."""

    def annotate(self, node, start: int) -> None:
        try:
            text = math_text(node.astext())
        except Exception:  # noqa: BLE001 - a summary falls back to the TeX, the page is unchanged
            return
        attr = f' {ATTRIBUTE}="{html.escape(text, quote=True)}"'
        for i in range(start, len(self.body)):
            piece = self.body[i]
            # the renderer's tag; myst-nb's pasted math adds classes before "math"
            if re.match(r"<(span|div)\b[^>]*\bclass=\"[^\"]*\bmath\b", piece):
                end = piece.index(">")
                self.body[i] = piece[:end] + attr + piece[end:]
                return

    def visit_with_text(self, node):
        start = len(self.body)
        try:
            visit(self, node)
        except nodes.SkipNode:
            annotate(self, node, start)
            raise
        annotate(self, node, start)

    visit_with_text.course_search = True
    return visit_with_text


def wrap_math_renderers(app) -> None:
    registry = app.registry
    for table in (registry.html_inline_math_renderers, registry.html_block_math_renderers):
        for name, (visit, depart) in list(table.items()):
            if visit is not None and not getattr(visit, "course_search", False):
                table[name] = (_with_text(visit), depart)


def configure(app, config) -> None:
    config.html_static_path.append(str(STATIC))


def add_script(app, pagename, templatename, context, doctree) -> None:
    """The summary fix on the search page only (added here, so to this page alone)."""
    if pagename == "search":
        app.add_js_file(SCRIPT)


def setup(app):
    app.connect("config-inited", configure)
    # builder-inited: after every extension (sphinx.ext.mathjax included) registered its renderer
    app.connect("builder-inited", wrap_math_renderers)
    app.connect("html-page-context", add_script)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
