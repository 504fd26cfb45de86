"""The site's finish without a build: book/_ext/course_site.py's string fixes and head tags,
and the worksheets' rendering (course_lib.handcalc.worksheet). The built pages themselves are
checked in a real browser by tests/book/test_browser.py."""

from __future__ import annotations

import importlib.util
import re

import numpy as np
import pytest

from course_lib.handcalc.worksheet import (
    Line,
    html_table,
    plain_lists,
    significant_digits,
    worksheet_html,
)
from tools import ROOT


def _site():
    spec = importlib.util.spec_from_file_location("course_site", ROOT / "book/_ext/course_site.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


site = _site()


def test_list_reprs_become_plain_notation():
    assert plain_lists("K = [['0.1', '0.0'], ['0.0', '0.1']]") == "K = [[0.1, 0.0], [0.0, 0.1]]"
    assert plain_lists("Token A = ['1.0', '\u22120.5'] here") == "Token A = [1.0, \u22120.5] here"
    assert plain_lists("no list [A, B] here") == "no list [A, B] here"


def test_significant_digits_counts_what_is_shown():
    assert significant_digits("0.004982") == 4
    assert significant_digits("1.00499") == 6
    assert significant_digits("\u22120.25") == 2
    assert significant_digits("0.0") == 0


def test_worksheet_page_fits_a_phone_and_links_back():
    lines = [Line("S", "K = {}", str([["0.1", "0.0"]])), Line("S", "P = {}", "0.250621")]
    key = worksheet_html(
        "Example", "Intro", lines, answers=True, back="../ex.html", other="ex_worksheet.html"
    )
    assert '<meta name="viewport" content="width=device-width' in key
    assert 'href="../ex.html"' in key and 'href="ex_worksheet.html"' in key
    assert "['" not in key and "[[0.1, 0.0]]" in key
    # the six-digit line says so, and the footer promises both
    assert "(6 significant digits)" in key and "or 6 where a line says so" in key
    # the template escapes every value; the blank sits where the prompt's {} was
    odd = worksheet_html("A <b>", "x & y", [Line("S", "a {} < b", "1")], answers=True)
    assert "A &lt;b&gt;: answer key" in odd and "<p>x &amp; y</p>" in odd
    assert '<li>a <span class="answer">1</span> &lt; b</li>' in odd
    sheet = worksheet_html("Example", "Intro", lines[:1])
    assert "6 significant digits" not in sheet and "0.1" not in sheet.split("<main>")[1]


def test_table_corner_is_not_an_empty_header():
    out = html_table(np.eye(2), row_labels=["a", "b"], col_labels=["x", "y"]).data
    assert "<th></th>" not in out and "<td></td>" in out
    assert out.count('scope="col"') == 2 and out.count('scope="row"') == 2


def test_body_fixes():
    body = (
        '<details class="hide above-input"><summary aria-label="Toggle hidden content">'
        '<p>Show code cell content</p></summary></details>'
        '<div role="list" class="citation-list"><div class="citation" id="x" '
        'role="doc-biblioentry">A</div></div>'
        '<div class="cell_output"><img alt="a" src="../_images/a.png" /></div>'
        '<a class="reference" href="../_images/b.png"><img alt="b" src="../_images/b.png" /></a>'
        '<img alt="c" src="data:image/png;base64,AAAA" />'
    )
    out = site.fix_body(body)
    assert 'aria-label="Toggle hidden content"' not in out
    assert 'role="doc-biblioentry"' not in out and 'role="listitem"' in out
    assert '<a class="course-zoom" href="../_images/a.png"' in out
    assert out.count("<a ") == 2  # b was a link already; the data: image stays as it is


def test_every_pre_carries_its_longest_line():
    """The CSS fits a code or output block's font to its column from ``--course-cols``."""
    body = (
        '<div class="highlight"><pre><span></span><span class="n">x</span> = 1\n'
        "print(&quot;&lt;ab&gt;&quot;)  \n</pre></div>"
        '<pre style="color: red">12345\n1</pre><pre></pre>'
    )
    out = site.column_counts(body)
    assert '<pre style="--course-cols: 13">' in out  # print("<ab>"), entities as characters
    assert '<pre style="--course-cols: 5; color: red">' in out
    assert '<pre style="--course-cols: 0"></pre>' in out
    assert site.column_counts(out) == out  # once only
    assert "--course-cols" in site.fix_body(body)


def test_head_tags_and_date_come_from_the_libraries(tmp_path, monkeypatch):
    """The head tags and the "last updated" date as _config.yml configures them
    (sphinxext-opengraph, sphinx-last-updated-by-git, course_site setting og's site address from
    html.baseurl): a two-page Sphinx build in a git repository whose commit has a known date."""
    import io
    import subprocess

    import yaml
    from sphinx.application import Sphinx

    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    extensions = [e for e in config["sphinx"]["extra_extensions"] if "opengraph" in e or "git" in e]
    assert len(extensions) == 2, config["sphinx"]["extra_extensions"]
    overrides = {
        k: v
        for k, v in config["sphinx"]["config"].items()
        if k.startswith(("ogp_", "git_", "html_last_updated"))
    }
    src = tmp_path / "src"
    src.mkdir()
    first = "The opening paragraph of the page, long enough to be its description. " * 4
    toc = "\n\n.. toctree::\n\n   attention\n   empty\n"
    (src / "index.rst").write_text("Home\n====\n\n" + first + toc)
    (src / "empty.rst").write_text("Bibliography\n============\n")
    body = "A <b> page. " * 9
    (src / "attention.rst").write_text('Attention "quoted"\n' + "=" * 18 + "\n\n" + body)
    env = {
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.org",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.org",
        "GIT_AUTHOR_DATE": "2024-03-05T23:30:00-05:00",  # 2024-03-06 in UTC
        "GIT_COMMITTER_DATE": "2024-03-05T23:30:00-05:00",
        "PATH": __import__("os").environ["PATH"],
    }
    for cmd in (["init", "-q"], ["add", "."], ["commit", "-q", "-m", "pages"]):
        subprocess.run(["git", *cmd], cwd=src, env=env, check=True)
    base = "https://example.org/course/"
    monkeypatch.syspath_prepend(str(ROOT / "book" / "_ext"))
    app = Sphinx(
        str(src),
        None,
        str(tmp_path / "html"),
        str(tmp_path / "doctrees"),
        "html",
        confoverrides={
            "extensions": [*extensions, "course_site"],
            "html_theme": "sphinx_book_theme",
            "html_baseurl": base,
            "html_title": "Course",  # what Jupyter Book sets from _config.yml's title
            # as Jupyter Book sets them from _config.yml's repository
            "html_theme_options": {"repository_url": "https://github.com/o/r"},
            "html_context": {"github_user": "o", "github_repo": "r", "github_version": "main"},
            **overrides,
        },
        status=None,
        warning=(warnings := io.StringIO()),
    )
    app.build()
    assert "WARNING" not in warnings.getvalue(), warnings.getvalue()
    page = (tmp_path / "html" / "attention.html").read_text(encoding="utf-8")
    head = page.split("</head>", 1)[0]
    assert re.search(r'<meta name="description" content="A &lt;b&gt; page\.', head), head
    assert re.search(r'<meta property="og:title" content="Attention \S+quoted\S+"', head), head
    assert f'<meta property="og:url" content="{base}attention.html"' in head
    assert '<meta name="twitter:card" content="summary_large_image"' in head
    assert '<meta property="og:site_name" content="Course"' in head
    image = re.search(rf'<meta property="og:image" content="{re.escape(base)}([^"]+\.png)"', head)
    assert image, head
    card = tmp_path / "html" / image.group(1)
    assert card.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # the commit's date in UTC, not the build's, not the author's own time zone
    assert "Last updated on 2024-03-06" in page
    # a page without a paragraph of its own: the course's description (course_site)
    empty = (tmp_path / "html" / "empty.html").read_text(encoding="utf-8").split("</head>")[0]
    for tag in ('name="description"', 'property="og:description"'):
        assert len(re.findall(tag, empty)) == 1, tag
        assert f'{tag} content="{site.DESCRIPTION}"' in empty
    description = re.search(r'<meta name="description" content="([^"]+)"', head).group(1)
    assert len(description) <= overrides["ogp_description_length"] + 3


def test_footer_names_the_licences():
    footer = site.footer_html("https://github.com/o/r", "main")
    assert 'href="https://github.com/o/r/blob/main/LICENSE"' in footer
    for words in ("MIT License", "CC BY 4.0", "public domain", "PROVENANCE.md"):
        assert words in footer


def test_math_detection():
    assert site.page_has_math('<div class="math notranslate">x</div>')
    assert not site.page_has_math("<p>no math here, $5 only</p>")


def test_sidebar_carets_get_names():
    html = (
        '<li><a class="reference internal" href="a.html">1. A</a></li>'
        '<li class="has-children"><a class="current reference internal" href="#">5. <em>W</em>'
        ' ex</a><details open="open"><summary><span class="toctree-toggle" role="presentation">'
        '<i></i></span></summary></details></li>'
    )
    out = str(site._label_carets(lambda: html)())
    assert '<summary><span class="visually-hidden">Sections of 5. W ex</span>' in out
    assert out.count("visually-hidden") == 1


def _shown_digits(cell: str) -> int | None:
    """Significant digits a table cell shows (the mantissa's, with an exponent); None for 0."""
    mantissa = cell.split("×")[0].lstrip("\u2212")
    digits = mantissa.replace(".", "").lstrip("0")
    return len(digits) if digits else None


def test_a_table_shows_one_precision():
    """Issue 29: "−0.0376 beside −0.03734", "1.3888 beside 1.38378" (trailing zeros trimmed) and
    "−0.0000176773" beside "0.100018": every nonzero number of a table shows the same count of
    significant digits, small ones with an exponent, and the values read back."""
    from course_lib.handcalc.worksheet import SCI_BELOW, table_cells

    M = np.array([[1.3888, 1.38378, -0.0376, -0.03734], [0.1, 0.0, -0.0000176773, 0.100018]])
    cells = table_cells(M, sig=6)
    assert cells[0] == ["1.38880", "1.38378", "\u22120.0376000", "\u22120.0373400"]
    assert cells[1][1] == "0.0" and cells[1][2] == "\u22121.76773×10<sup>\u22125</sup>"
    assert {_shown_digits(c) for row in cells for c in row} - {None} == {6}
    # the numbers read back to what was given, to the precision shown
    for v, c in zip(M.ravel(), [c for row in cells for c in row]):
        text = c.replace("\u2212", "-").replace("×10<sup>", "e").replace("</sup>", "")
        assert float(text) == pytest.approx(v, rel=1e-5, abs=1e-15)
    # a table of round numbers stays short: the fewest digits that show every value (>= 2)
    assert table_cells(np.eye(2) * 0.1) == [["0.10", "0.0"], ["0.0", "0.10"]]
    assert table_cells([[0.01249, 0.0124901, -0.0373]]) == [["0.01249", "0.01249", "\u22120.03730"]]
    assert SCI_BELOW == 1e-3 and table_cells([[0.001, 0.0009995]], 4) == [
        ["0.001000", "9.995×10<sup>\u22124</sup>"]
    ]
    with pytest.raises(ValueError, match="significant digits"):
        table_cells(M, sig=0)


def test_table_captions_set_subscripts():
    out = html_table(np.eye(2), caption="∂L/∂W_O (d_model × 2) & more").data
    assert "∂L/∂<i>W</i><sub>O</sub> (<i>d</i><sub>model</sub> × 2) &amp; more" in out
    assert "W_O" not in out


def test_wide_matrices_are_written_transposed():
    """A 1 x 4 row of six-digit numbers ran 216 px past a phone's column: written as its
    transpose (a column, ``^\\top``), the same matrix; narrow ones stay as they are."""
    from course_lib.handcalc.worksheet import math_eq, matrix_latex

    z = np.array([[0.00485701, -0.000124689, 0.00539237, -0.000124689]])
    tex = math_eq("z", z, sig=6).data
    assert tex.endswith("\\end{bmatrix}^{\\top}") and tex.count("\\\\") == 3
    assert matrix_latex(z, 6) == (
        "\\begin{bmatrix} 0.00485701 & -0.000124689 & 0.00539237 & -0.000124689 \\end{bmatrix}"
    )
    assert "top" not in math_eq("K", np.eye(2) * 0.1).data
    assert "top" not in math_eq("W", np.full((2, 4), 0.1)).data  # short rows fit
