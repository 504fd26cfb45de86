"""The code a reader sees on the site fits the code box: every shown code cell is formatted by
ruff (tools/format_code.py, settings in pyproject.toml) and no line of it is wider than
WIDTH columns, ``glue(...)`` bookkeeping aside (the site hides it: tools/glue_code.py)."""

import pytest

from tools import ROOT
from tools.format_code import WIDTH, code_cells, format_page, pages, place_comments
from tools.glue_code import strip_glue

PAGES = [p.relative_to(ROOT).as_posix() for p in pages()]


@pytest.mark.parametrize("page", PAGES)
def test_code_cells_are_formatted(page):
    text = (ROOT / page).read_text()
    assert format_page(text) == text, (
        f"{page}: code cells are not formatted; run "
        f"`python -m tools.format_code {page} && python -m tools.colab {page}`"
    )


@pytest.mark.parametrize("page", PAGES)
def test_shown_code_fits_the_code_box(page):
    wide = [
        line
        for cell in code_cells((ROOT / page).read_text())
        for line in strip_glue(cell).splitlines()
        if len(line) > WIDTH
    ]
    assert not wide, (
        f"{page}: {len(wide)} code line(s) wider than {WIDTH} columns (ruff cannot "
        f"split strings or comments: split them by hand), e.g. {wide[0]!r}"
    )


def test_format_page_touches_only_shown_code():
    page = (
        "---\nkernelspec:\n  name: python3\n---\n# Title with  two spaces\n\n"
        "```{code-cell} ipython3\n:tags: [remove-cell]\nx=[1,2]\n```\n\n"
        "```{code-cell} ipython3\ny=[1,2]\n```\n\n"
        "```{code-cell} ipython3\n%timeit  f( )\n```\n"
    )
    out = format_page(page)
    assert "x=[1,2]" in out  # removed cells (the Colab set-up cell) are tools.colab's
    assert "y = [1, 2]" in out and "y=[1,2]" not in out
    assert "%timeit  f( )" in out  # magics do not parse: left alone
    assert out.startswith("---\nkernelspec:\n  name: python3\n---\n# Title with  two spaces\n")


def test_long_trailing_comments_move_above_and_long_comments_wrap():
    src = "total = compute(a, b)  # " + "why " * 25 + "\n    # short\n"
    out = place_comments(src)
    lines = out.splitlines()
    assert lines[-2] == "total = compute(a, b)" and lines[0].startswith("# why")
    assert all(len(line) <= WIDTH for line in lines)
    assert " ".join(line.lstrip("# ") for line in lines[:-2]).split() == ["why"] * 25
    assert place_comments("x = 1  # fine\n") == "x = 1  # fine\n"
