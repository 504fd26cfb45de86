"""book/_ext/course_search.py: math as plain text for the search page's summaries (fast tests).

The conversion itself is pylatexenc's; these tests check what the extension adds around it:
every formula of the book comes out without TeX, sub- and superscripts of more than one symbol
keep their grouping, and the script is served on the search page alone. The search page in a
browser: tests/book/test_search_browser.py.
"""

from __future__ import annotations

import re
import sys
from types import SimpleNamespace

import pytest

from tools import ROOT

sys.path.insert(0, str(ROOT / "book" / "_ext"))
import course_search  # noqa: E402
from course_search import math_text  # noqa: E402

# Left in a summary, any of these is TeX a reader should not see.
TEX = re.compile(r"\\[A-Za-z]+|\\[(\[)\]]|[{}]|&")


def book_math() -> list[str]:
    """Every $...$ and $$...$$ expression in the book's MyST sources (code cells left out)."""
    found = set()
    for path in sorted((ROOT / "book").rglob("*.md")):
        text = re.sub(r"```.*?```", "", path.read_text(encoding="utf-8"), flags=re.S)
        for m in re.finditer(r"\$\$(.+?)\$\$|\$([^$\n]+?)\$", text, flags=re.S):
            found.add((m.group(1) or m.group(2)).strip())
    return sorted(found)


def test_every_formula_of_the_book_reads_without_tex():
    formulas = book_math()
    assert len(formulas) > 300, f"expected the book's formulas, found {len(formulas)}"
    left = {f: math_text(f) for f in formulas if TEX.search(math_text(f)) or not math_text(f)}
    assert not left, f"TeX left in {len(left)} plain-text readings: {list(left.items())[:5]}"


@pytest.mark.parametrize(
    "tex, text",
    [
        (r"\mathrm{softmax}(QK^\top/\sqrt{d_k})", "softmax(QKᵀ/√(d_k))"),
        (r"e^{0.004982} = 1.00499", "e^0.004982 = 1.00499"),
        (r"-\ln 0.250629 = 1.38378", "-ln 0.250629 = 1.38378"),
        (r"\log \sum_j e^{z_j}", "log ∑_j e^(z_j)"),
        (r"\frac{\partial L}{\partial W_O}", "∂L/∂W_O"),
        (r"h^\top (p - y)", "hᵀ(p - y)"),
        (r"\tfrac{x_1 - x_2}{2}", "(x_1 - x_2)/2"),
        (r"(x - \mu)^2 \cdot \sqrt{2}", "(x - μ)² · √2"),
        (r"\begin{bmatrix} 0.1 & -0.2 \\ 0.3 & 0.4 \end{bmatrix}", "[0.1 -0.2; 0.3 0.4]"),
    ],
)
def test_readings(tex, text):
    assert math_text(tex) == text


def test_the_script_is_served_on_the_search_page_only():
    added = []
    app = SimpleNamespace(add_js_file=lambda name, **kw: added.append(name))
    for page in ("intro", "book/worked/ex1_forward", "genindex"):
        course_search.add_script(app, page, "page.html", {}, None)
    assert added == []
    course_search.add_script(app, "search", "search.html", {}, None)
    assert added == [course_search.SCRIPT]
    script = course_search.STATIC / course_search.SCRIPT
    assert script.is_file() and "_static" not in script.parts  # see course_site.py: no _static/
    assert (
        "Search.htmlToText" in script.read_text() and course_search.ATTRIBUTE in script.read_text()
    )
