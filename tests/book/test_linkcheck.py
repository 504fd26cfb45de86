"""No broken link on the built site: LinkChecker (``tools/linkcheck.py``) on every page,
offline. Fast: it finds each kind of broken link on a small site, anchors included (and passes
the good ones). Slow: the clean test build has none (its anchors are the browser tests' to
check, tests/book/test_browser.py; the Pages workflow checks the site it deploys, anchors too)."""

from __future__ import annotations

import pytest

from tools import linkcheck

PAGE = """<!doctype html><html><head><title>{title}</title>
<link rel="stylesheet" href="{up}_static/site.css"></head><body>{body}</body></html>"""


def _site(root):
    (root / "_static").mkdir(parents=True)
    (root / "_static" / "site.css").write_text("body { color: black }")
    (root / "book").mkdir()
    (root / "figure.svg").write_text('<svg xmlns="http://www.w3.org/2000/svg"/>')
    (root / "index.html").write_text(
        PAGE.format(
            title="home",
            up="",
            body='<a href="book/a.html#kept">ok</a> <img src="figure.svg" alt="ok">'
            '<a href="https://example.com/elsewhere">other site</a>'
            '<a href="mailto:someone@example.com">mail</a>'
            '<a href="book/gone.html">missing page</a>'
            '<a href="book/a.html#dropped">missing anchor</a>',
        )
    )
    (root / "book" / "a.html").write_text(
        PAGE.format(
            title="a",
            up="../",
            body='<h1 id="kept">A</h1><a href="../index.html">home</a>'
            '<img src="../missing.png" alt="missing image">'
            '<script src="../_static/missing.js"></script>',
        )
    )
    return root


def test_linkcheck_finds_each_kind_of_broken_link(tmp_path):
    site = _site(tmp_path / "html")
    problems = linkcheck.check(site).problems
    found = {(p.split(":")[0], p.split(": ")[1]) for p in problems}
    assert found == {
        ("index.html", "book/gone.html"),
        ("index.html", "book/a.html#dropped"),
        ("book/a.html", "../missing.png"),
        ("book/a.html", "../_static/missing.js"),
    }, "\n".join(problems)
    assert any("Anchor `dropped'" in p for p in problems)
    # without anchors the same site has the three other problems
    assert len(linkcheck.check(site, anchors=False).problems) == 3


def test_linkcheck_passes_a_site_without_broken_links(tmp_path):
    site = _site(tmp_path / "html")
    (site / "book" / "a.html").write_text(
        PAGE.format(title="a", up="../", body='<h1 id="kept">A</h1><h2 id="dropped">B</h2>')
    )
    (site / "book" / "gone.html").write_text(PAGE.format(title="back", up="../", body=""))
    report = linkcheck.check(site)
    assert report.problems == [] and report.checked >= 8  # pages, style sheet, figure, anchors


def test_linkcheck_needs_a_built_site(tmp_path):
    with pytest.raises(ValueError, match="no built site"):
        linkcheck.check(tmp_path)


@pytest.mark.slow
def test_the_built_site_has_no_broken_links(built_book):
    html = built_book / "html"
    report = linkcheck.check(html, anchors=False)
    assert not report.problems, f"{len(report.problems)} broken link(s) on the built site:\n" + (
        "\n".join(report.problems[:40])
    )
    pages = len(list(html.rglob("*.html")))
    # every page and what the pages load (LinkChecker lists each URL once)
    assert report.checked > pages, f"only {report.checked} links checked in {pages} pages"
