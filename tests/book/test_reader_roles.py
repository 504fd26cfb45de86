"""The reader notebooks' role renderers are one table, ``tools.reader.ROLES`` (issue 37).

Fast: every role the book's sources use has a renderer; every renderer turns a sample of its
role into Markdown with no MyST left (nbconvert's renderer, what Jupyter shows); a role
without one fails naming the table.
"""

from __future__ import annotations

import pytest

from tools import ROOT, reader

SITE = {
    "formats": {"numfig": {"figure": "Fig. %s"}, "eqref": "({number})"},
    "pages": {
        "book/x": {
            "glue": {
                "w": {"text/plain": "0.4712"},
                "q": {"text/plain": "'quoted'", "strip_text_quotes": True},
                "m": {"text/plain": "<M>", "text/markdown": "**bold**"},
            }
        }
    },
    "titles": {"book/y": "Page Y"},
    "labels": {
        "fig-a": {
            "page": "book/y",
            "anchor": "fig-a",
            "title": "",
            "type": "figure",
            "number": "4.2",
        }
    },
    "equations": {"eq-a": {"page": "book/y", "anchor": "equation-eq-a", "number": "4.1"}},
    "terms": {"attention": {"page": "book/glossary", "anchor": "term-attention"}},
    "downloads": {"book/w/s.html": "_downloads/abc/s.html"},
}

# one sample per role (a role added to ROLES without a sample here fails below)
SAMPLES = {
    "glue:text": ("w:.2f", "0.47"),
    "glue": ("q", "quoted"),
    "glue:any": ("w", "0.4712"),
    "glue:md": ("m", "**bold**"),
    "term": ("heads <attention>", "[heads]("),
    "ref": ("fig-a", "](https://"),
    "numref": ("fig-a", "[Fig. 4.2]("),
    "eq": ("eq-a", "[(4.1)]("),
    "doc": ("y", "[Page Y]("),
    "download": ("sheet <w/s.html>", "[sheet]("),
    "exercise-links": ("04_attention", "[Open in Colab]("),
    "cite": ("vaswani2017attention", "(Vaswani et al., 2017)"),
    "cite:p": ("vaswani2017attention", "(Vaswani et al., 2017)"),
    "cite:ps": ("vaswani2017attention", "(Vaswani et al., 2017)"),
    "cite:alp": ("vaswani2017attention", "(Vaswani et al., 2017)"),
    "cite:t": ("vaswani2017attention", "Vaswani et al. (2017)"),
    "cite:ts": ("vaswani2017attention", "Vaswani et al. (2017)"),
    "cite:year": ("vaswani2017attention", "2017"),
    "math": ("x^2", "$x^2$"),
}


def _ctx():
    return reader.MarkdownContext("book/x", SITE, ROOT)


def test_every_role_of_the_table_has_a_sample():
    assert set(SAMPLES) == set(reader.ROLES)


@pytest.mark.parametrize("role", sorted(reader.ROLES))
def test_each_role_renders_to_markdown(role):
    from nbconvert.filters.markdown import markdown2html_mistune

    body, expected = SAMPLES[role]
    out = reader.render_markdown(f"Text {{{role}}}`{body}` here.", _ctx())
    assert expected in out, out
    assert f"{{{role}}}" not in out and "`" not in out.replace("`04_attention.ipynb`", "")
    assert "{" not in markdown2html_mistune(out).replace("{number}", "")


def test_every_role_the_book_uses_has_a_renderer():
    used = {
        m.group("name")
        for md in (ROOT / "book").rglob("*.md")
        if "_build" not in md.parts
        for m in reader._ROLE.finditer(md.read_text(encoding="utf-8"))
    }
    assert used, "no role found: the pattern is wrong"
    assert not used - set(reader.ROLES), f"roles without a renderer: {used - set(reader.ROLES)}"


def test_a_role_without_a_renderer_names_the_table():
    with pytest.raises(ValueError, match=r"role \{kbd\} has no reader rendering \(add it to ROLES"):
        reader.render_markdown("{kbd}`Ctrl`", _ctx())
