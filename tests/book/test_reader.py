"""Reader notebooks (``notebooks/``, ``tools/reader.py``): what Jupyter and Colab show.

Fast: every reader notebook, its Markdown rendered by nbconvert's renderer (what Jupyter
shows), holds no MyST markup; its code cells are the source's (less the glue calls); the glue
formatting is myst-nb's; the conversions of each construct on small examples.

Slow (after the clean builds, native and simulated AVX2): ``notebooks/site.json`` agrees with
what each build computed (what a training run measures within its measured spread), and
every paragraph of every built page has its numbers in the matching paragraph of the reader
notebook written from that build's numbers; the page's Colab and ``.ipynb`` buttons lead to
the reader notebook.
"""

from __future__ import annotations

import copy
import re
from collections import Counter
from difflib import SequenceMatcher
from functools import lru_cache
from pathlib import Path

import nbformat
import pytest
from build_support import BUILD_NAMES, get_build, page_builds

from tools import ROOT, colab, reader
from tools.glue_code import reader_code

PAGES = colab.chapter_paths(ROOT)


def _rel(p: Path) -> str:
    return p.relative_to(ROOT).as_posix()


def _markdown_html(source: str) -> str:
    from nbconvert.filters.markdown import markdown2html_mistune

    return markdown2html_mistune(source)


# --------------------------------------------------------------------------- fast
MYST = re.compile(
    r"\{glue|\{(term|ref|numref|eq|doc|download|cite[:\w]*|exercise-links)\}`"
    r"|:::|^\s*\(\S+\)=\s*$|```\{|\{tab-|\{admonition\}|\{dropdown\}",
    re.M,
)


@pytest.mark.parametrize("md", PAGES, ids=_rel)
def test_reader_notebook_shows_no_myst_markup(md):
    path = reader.reader_path(md)
    assert path.is_file(), f"{_rel(path)} is missing: run `./course sync`"
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    for cell in nb.cells:
        if cell.cell_type != "markdown":
            continue
        for shown in (cell.source, _markdown_html(cell.source)):
            m = MYST.search(shown)
            assert not m, (
                f"{_rel(path)}, cell {cell.id}: MyST markup left: "
                f"{shown[max(0, m.start() - 60) : m.end() + 60]!r}"
            )


@pytest.mark.parametrize("md", PAGES, ids=_rel)
def test_reader_notebook_runs_the_sources_code(md):
    """The code cells are the paired notebook's, less their glue bookkeeping
    (``tools.glue_code.reader_code``; a cell of nothing else goes), so running the notebook
    recomputes the numbers its prose quotes; no outputs are stored."""
    pair = nbformat.read(md.with_suffix(".ipynb"), as_version=4)
    nb = nbformat.read(reader.reader_path(md), as_version=4)
    code = [(c.id, c.source, c.metadata) for c in nb.cells if c.cell_type == "code"]
    cells = [c for c in pair.cells if c.cell_type == "code"]
    shown = reader_code([c.source for c in cells])
    assert code == [(c.id, s, c.metadata) for c, s in zip(cells, shown) if s]
    assert all(not c.outputs for c in nb.cells if c.cell_type == "code")
    assert len({c.id for c in nb.cells}) == len(nb.cells), "repeated cell ids"
    assert "jupytext" not in nb.metadata, "a reader notebook must not be paired by jupytext"


@pytest.mark.parametrize(
    "text, spec",
    [
        ("'0.4712'", "s"),
        ("0.47123456", ".3f"),
        ("'0.47123456'", ".2f"),
        ("12", "d"),
        ("'65536'", ",d"),
        ("0.25", ".1%"),
        ("3.2e-05", ".2e"),
        ("'abc'", ""),
        ("array([1])", "s"),
        ("True", "s"),
        ("1234.5", ",.1f"),
        ("-0.5", "+.2f"),
    ],
)
def test_glue_text_formats_like_myst_nb(text, spec):
    from myst_nb.core.variables import format_plain_text

    assert reader.format_plain_text(text, spec) == format_plain_text(text, spec)


SITE = {
    "formats": {"numfig": {"figure": "Fig. %s", "section": "Section %s"}, "eqref": "Eq. {number}"},
    "pages": {
        "book/x": {
            "glue": {
                "w": {"text/plain": "0.4712"},
                "s": {"text/plain": "'a_b*'"},
                "m": {"text/plain": "<Latex>", "text/latex": "$x^2$"},
            }
        }
    },
    "titles": {"book/x": "Page X", "book/y": "Page Y"},
    "labels": {
        "sec-a": {"page": "book/y", "anchor": "sec-a", "title": "Section A"},
        "fig-a": {
            "page": "book/y",
            "anchor": "fig-a",
            "title": "",
            "type": "figure",
            "number": "4.2",
        },
    },
    "equations": {"eq-a": {"page": "book/y", "anchor": "equation-eq-a", "number": "4.1"}},
    "terms": {"attention": {"page": "book/glossary", "anchor": "term-attention"}},
    "downloads": {"book/w/s.html": "_downloads/abc/s.html"},
}


def _ctx():
    return reader.MarkdownContext("book/x", SITE, ROOT)


def test_roles_become_values_and_site_links():
    base = reader.base_url(ROOT)
    ctx = _ctx()
    out = reader.render_markdown(
        "w = {glue:text}`w:.2f`, raw {glue:text}`w`, {glue:text}`s`, {glue}`m`; "
        "{term}`heads <attention>`, {ref}`sec-a`, {ref}`here <sec-a>`, {numref}`fig-a`, "
        "{numref}`Figure {number} <fig-a>`, {eq}`eq-a`, {doc}`y`, {download}`sheet <w/s.html>`",
        ctx,
    )
    assert out.startswith(r"w = 0.47, raw 0.4712, a\_b\*, $x^2$; ")
    assert f"[heads]({base}book/glossary.html#term-attention)" in out
    assert (
        f"[Section A]({base}book/y.html#sec-a)" in out and f"[here]({base}book/y.html#sec-a)" in out
    )
    assert f"[Fig. 4.2]({base}book/y.html#fig-a)" in out and "[Figure 4.2](" in out
    assert f"[Eq. 4.1]({base}book/y.html#equation-eq-a)" in out
    assert f"[Page Y]({base}book/y.html)" in out
    assert f"[sheet]({base}_downloads/abc/s.html)" in out


def test_repository_paths_become_links_to_the_repository():
    """A Colab session has the installed package, not the repository: every code span that
    names a file or folder of the repository links to it on GitHub (package data written
    from inside the package, ``configs/x.json``, too); other code stays code."""
    url, branch = colab.repository(ROOT)
    out = reader.render_markdown(
        "`benchmarks/speedrun.py` trains; `tests/book/test_reader.py` checks; "
        "`course_lib/configs/long.json` and `configs/chapter.json`; the folder `benchmarks/`; "
        "`no/such/file.py`, `x = a/b`, `course_lib.model` and {term}`heads <attention>`.",
        _ctx(),
    )
    for shown, path, kind in [
        ("benchmarks/speedrun.py", "benchmarks/speedrun.py", "blob"),
        ("tests/book/test_reader.py", "tests/book/test_reader.py", "blob"),
        ("course_lib/configs/long.json", "course_lib/configs/long.json", "blob"),
        ("configs/chapter.json", "course_lib/configs/chapter.json", "blob"),
        ("benchmarks/", "benchmarks", "tree"),
    ]:
        assert f"[`{shown}`]({url}/{kind}/{branch}/{path})" in out
    assert "`no/such/file.py`," in out and "[`no/such" not in out
    assert "`x = a/b`" in out and "`course_lib.model`" in out


@pytest.mark.parametrize("md", PAGES, ids=_rel)
def test_reader_notebook_links_every_repository_path_and_says_numbers_may_differ(md):
    """In the committed reader notebooks no repository path is left as bare code, and every
    notebook that runs code says, under its title, that a run recomputes the numbers."""
    nb = nbformat.read(reader.reader_path(md), as_version=4)
    url, _ = colab.repository(ROOT)
    text = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    bare = [
        m.group(0)
        for m in reader._CODE_PATH.finditer(text)
        if reader._repository_file(m.group("path"), ROOT) and not text[m.end() :].startswith("](")
    ]
    assert not bare, f"{_rel(md)}: repository paths not linked: {bare}"
    assert f"]({url}/" in text or not re.search(r"`(benchmarks|tests)/", text)
    if any(c.cell_type == "code" and c.get("id") != "colab-setup" for c in nb.cells):
        assert nb.cells[1].get("id") == "reader-note", f"{_rel(md)}: no note under the title"
        assert "recomputes" in nb.cells[1].source


def test_citations_are_author_year_with_a_reference_list():
    ctx = _ctx()
    out = reader.render_markdown(
        "As {cite:t}`vaswani2017attention` show {cite}`vaswani2017attention,jurafsky2025slp`.", ctx
    )
    assert out == (
        "As Vaswani et al. (2017) show (Vaswani et al., 2017; Jurafsky and Martin, 2025)."
    )
    assert ctx.cited == ["vaswani2017attention", "jurafsky2025slp"]
    line = reader.reference_line(ctx.bib["vaswani2017attention"])
    assert line.startswith("Vaswani, A., Shazeer, N.") and "(2017)" in line
    assert "*Attention Is All You Need*" in line and "Kaiser, Ł." in line


def test_blocks_become_markdown_jupyter_renders():
    ctx = _ctx()
    src = "\n".join(
        [
            "(sec-a)=",
            "## Heading",
            "",
            ":::{admonition} Learning objectives",
            ":class: tip",
            "- one",
            "- two",
            ":::",
            "",
            "1. Question?",
            "",
            "   :::{admonition} Answer",
            "   :class: dropdown",
            "   It is {glue:text}`w:.1f`.",
            "   :::",
            "",
            "$$",
            "a = b",
            "$$ (eq-a)",
            "",
            "```{glue:math} m",
            "```",
            "",
            "::::{tab-set}",
            ":::{tab-item} Child",
            "Simple words.",
            ":::",
            ":::{tab-item} Researcher",
            "Hard words.",
            ":::",
            "::::",
        ]
    )
    out = reader.render_markdown(src, ctx)
    assert "(sec-a)=" not in out and out.startswith("## Heading")
    assert "> **Learning objectives**\n>\n> - one\n> - two" in out
    assert "   <details><summary><b>Answer</b></summary>\n\n   It is 0.5.\n\n   </details>" in out
    assert "$$\na = b\n\\tag{4.1}\n$$" in out
    assert "$$\nx^2\n$$" in out
    assert "**Child.** Simple words." in out and "**Researcher.** Hard words." in out
    html = _markdown_html(out)
    assert "<blockquote>" in html and "<details>" in html and not MYST.search(html)


def test_headings_get_the_sites_section_numbers():
    headings = [
        ["Attention, from intuition", "4"],
        ["Why divide by \\sqrt{d_k}?", "4.3"],
        ["Recap", "4.11"],
    ]
    md = (
        "# Attention, from intuition\n\n```python\n# Recap\n```\n\n"
        "## Why divide by $\\sqrt{d_k}$?\n\ntext\n\n## Not on the site\n"
    )
    out = reader.number_headings(md, headings)
    assert out.startswith("# 4. Attention, from intuition\n")
    assert "```python\n# Recap\n```" in out, "a comment in a code block is not a heading"
    assert "## 4.3. Why divide by $\\sqrt{d_k}$?" in out and "## Not on the site" in out
    assert reader.number_headings("## Recap", headings) == "## 4.11. Recap"
    assert headings == [], "each number is used once, in page order"


def test_unknown_constructs_fail_loudly():
    with pytest.raises(ValueError, match="has no reader rendering"):
        reader.render_markdown(":::{figure} x.png\n:::", _ctx())
    with pytest.raises(ValueError, match="has no reader rendering"):
        reader.render_markdown("{kbd}`Ctrl`", _ctx())
    with pytest.raises(ValueError, match="no glued text/plain value 'nope'"):
        reader.render_markdown("{glue:text}`nope`", _ctx())
    with pytest.raises(ValueError, match="unknown label"):
        reader.render_markdown("{ref}`nope`", _ctx())


def test_every_glued_value_is_known_to_the_site_data():
    """Every page's glue keys are in notebooks/site.json (else `./course sync --from-build`)."""
    site = reader.load_site_data(ROOT)
    missing = []
    for md in PAGES:
        page = md.relative_to(ROOT).with_suffix("").as_posix()
        keys = set(re.findall(r"\{glue(?::\w+)?\}`([^`:]+)", md.read_text(encoding="utf-8")))
        keys |= set(
            re.findall(
                r"^[ \t]*[`:]{3,}\{glue(?::\w+)?\}[ \t]+(\S+)", md.read_text(encoding="utf-8"), re.M
            )
        )
        have = set(site["pages"].get(page, {}).get("glue", {}))
        missing += [f"{page}: {k}" for k in sorted(keys - have)]
    assert not missing, (
        "glued names not in notebooks/site.json (build, then `./course sync "
        "--from-build`): " + ", ".join(missing[:20])
    )


# --------------------------------------------------------------------------- slow: the build
@pytest.mark.slow
@pytest.mark.parametrize("build", BUILD_NAMES)
def test_site_data_is_what_the_build_computed(build, request):
    """notebooks/site.json, the published numbers, agrees with what each build computed: glue
    values, labels, numbers, anchors, downloads equal, except what a training run measures
    (within the spread measured over simulated CPUs and seeds, ``tools.spread``) and the
    timings (``reader.MEASURED``, which must exist). The AVX2 build is judged on the pages it
    executed."""
    b = get_build(request, build)
    problems = reader.site_data_differences(
        reader.load_site_data(ROOT), reader.site_data_from_build(b.path), b.pages
    )
    assert not problems, (
        f"notebooks/site.json and the {build} build differ beyond what a CPU may change"
        " (a changed page: build, then `./course sync --from-build`; a new value a training"
        " run measures: python benchmarks/isa_spread.py --pages PAGE):\n" + "\n".join(problems[:20])
    )


def test_site_data_differences_ignore_only_measured_values(monkeypatch):
    # the synthetic site data below holds one page: measure only its timings
    monkeypatch.setattr(
        reader, "MEASURED", {"book/11_encoders": reader.MEASURED["book/11_encoders"]}
    )
    built = {
        "pages": {
            "book/11_encoders": {
                "glue": {
                    "mlm_seconds": {"text/plain": "'31'"},
                    "vit_s": {"text/plain": "'9'"},
                    "n": {"text/plain": "3"},
                }
            }
        },
        "labels": {},
    }
    same = {
        "pages": {
            "book/11_encoders": {
                "glue": {
                    "mlm_seconds": {"text/plain": "'10'"},
                    "vit_s": {"text/plain": "'28'"},
                    "n": {"text/plain": "3"},
                }
            }
        },
        "labels": {},
    }
    assert reader.site_data_differences(same, built) == []
    same["pages"]["book/11_encoders"]["glue"]["n"] = {"text/plain": "4"}
    same["labels"] = {"x": {}}
    problems = reader.site_data_differences(same, built)
    assert len(problems) == 2 and "glued n" in problems[0] and "[labels]" in problems[1]


_BLOCKS = (
    "p",
    "li",
    "td",
    "th",
    "dt",
    "dd",
    "figcaption",
    "summary",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
)  # headings too: their section numbers
_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")
_WORD = re.compile(r"[^\W\d_]+")
# math as Jupyter finds it in rendered Markdown (an escaped \\$ or \\[ is text, not math)
_MATH_TEXT = re.compile(r"(?<!\\)\$\$.*?(?<!\\)\$\$|(?<!\\)\$[^$]+?(?<!\\)\$", re.S)


def _blocks(soup) -> list[str]:
    """Text of each innermost block (a paragraph, list item, cell...), math removed."""
    import copy as _copy

    out = []
    for el in soup.find_all(_BLOCKS):
        el = _copy.copy(el)
        for inner in el.find_all(_BLOCKS):
            inner.decompose()
        text = _MATH_TEXT.sub(" ", el.get_text(" "))
        if text.strip():
            out.append(" ".join(text.split()))
    return out


def _site_blocks(html_path: Path) -> list[str]:
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(html_path.read_text(encoding="utf-8"), "html.parser")
    article = soup.find("article") or soup
    for sel in (
        "div.cell_output",
        "div.cell_input",
        "pre",
        "script",
        "style",
        "nav",
        "div.toctree-wrapper",
        "a.headerlink",
        "span.math",
        "div.math",
        "span.eqno",
        "div.sd-tab-set > label",
        "footer",
        "div.prev-next-area",
        "div.output",
    ):
        for el in article.select(sel):
            el.decompose()
    return _blocks(article)


def _notebook_blocks(nb) -> list[str]:
    from bs4 import BeautifulSoup

    html = "\n".join(_markdown_html(c.source) for c in nb.cells if c.cell_type == "markdown")
    return _blocks(BeautifulSoup(html, "html.parser"))


def _words(text: str) -> list[str]:
    return [w.lower() for w in _WORD.findall(text)]


def paragraph_problems(site: list[str], notebook: list[str], ignore: set[str]) -> list[str]:
    """Site paragraphs whose numbers are not all in the matching notebook paragraph (matched
    by their words: exactly, else the most similar one)."""
    by_words: dict[tuple, list[int]] = {}
    nb_words = [_words(t) for t in notebook]
    for i, w in enumerate(nb_words):
        by_words.setdefault(tuple(w), []).append(i)
    problems = []
    for text in site:
        numbers = Counter(n for n in _NUMBER.findall(text) if n not in ignore)
        if not numbers:
            continue
        words = _words(text)
        candidates = by_words.get(tuple(words))
        if not candidates:
            best, best_i = 0.0, None
            for i, w in enumerate(nb_words):
                sm = SequenceMatcher(None, words, w, autojunk=False)
                if sm.real_quick_ratio() <= best or sm.quick_ratio() <= best:
                    continue
                r = sm.ratio()
                if r > best:
                    best, best_i = r, i
            candidates = [best_i] if best_i is not None and best >= 0.6 else []
        if not candidates:
            problems.append(f"no paragraph of the notebook matches: {text[:160]!r}")
            continue
        if not any(set(numbers) <= set(_NUMBER.findall(notebook[i])) for i in candidates):
            i = candidates[0]
            missing = sorted(set(numbers) - set(_NUMBER.findall(notebook[i])))
            problems.append(
                f"numbers {missing} of {text[:160]!r} are not in the notebook's "
                f"{notebook[i][:160]!r}"
            )
    return problems


def test_paragraph_matcher_catches_a_missing_number():
    site = ["The weights are 0.47 and 0.47, lion gets 0.06."]
    assert paragraph_problems(site, ["The weights are 0.47 and 0.47, lion gets 0.06."], set()) == []
    bad = paragraph_problems(site, ["The weights are 0.47 and 0.47, lion gets 0.07."], set())
    assert len(bad) == 1 and "0.06" in bad[0]
    assert paragraph_problems(site, ["Something else entirely, 0.06."], set())


@lru_cache(maxsize=2)
def _build_site_data(build: Path, pages: tuple[str, ...] | None) -> dict:
    """The site data a build computed; for a build that executed only ``pages``, the published
    data with those pages' glue replaced by the build's."""
    built = reader.site_data_from_build(build)
    if pages is None:
        return built
    site = copy.deepcopy(reader.load_site_data(ROOT))
    for page in pages:
        site["pages"][page] = built["pages"][page]
    return site


@pytest.mark.slow
@pytest.mark.parametrize(
    "md, build", page_builds(PAGES), ids=lambda v: _rel(v) if isinstance(v, Path) else v
)
def test_built_paragraphs_numbers_are_in_the_reader_notebook(md, build, request):
    """Every paragraph of a built page has its numbers in the matching paragraph of the reader
    notebook written from that build's numbers (as `./course sync --from-build` would write
    it): the reader notebook quotes whatever the site shows, on any machine."""
    b = get_build(request, build)
    page = md.relative_to(ROOT).with_suffix("").as_posix()
    html = b.path / "html" / f"{page}.html"
    site = _build_site_data(b.path, b.pages)
    nb = nbformat.reads(reader.reader_notebook_text(md, ROOT, site=site), as_version=4)
    problems = paragraph_problems(_site_blocks(html), _notebook_blocks(nb), set())
    assert not problems, f"{_rel(md)} ({build} build):\n" + "\n".join(problems[:15])


@pytest.mark.slow
def test_page_buttons_open_the_reader_notebook(built_book):
    html_dir = built_book / "html"
    for md in PAGES:
        page = md.relative_to(ROOT).with_suffix("").as_posix()
        text = (html_dir / f"{page}.html").read_text(encoding="utf-8")
        rel = reader.reader_rel(md)
        assert colab.colab_url(rel) in text, f"{page}: the Colab button does not open {rel}"
        hrefs = re.findall(r'href="([^"]*_notebooks/[^"]+\.ipynb)"', text)
        assert hrefs, f"{page}: no .ipynb download of the reader notebook"
        target = (html_dir / page).parent / hrefs[0]
        assert target.resolve().read_bytes() == reader.reader_path(md).read_bytes()
        assert f"blob/main/{md.relative_to(ROOT).with_suffix('.ipynb').as_posix()}" not in text


def test_buttons_are_pointed_at_the_reader_notebook(tmp_path):
    """book/_ext/course_reader.py on the header buttons sphinx-book-theme makes (fast; the
    slow test above reads the built pages)."""
    import sys
    import types

    sys.path.insert(0, str(ROOT / "book" / "_ext"))
    try:
        import course_reader
    finally:
        sys.path.remove(str(ROOT / "book" / "_ext"))
    old = colab.colab_url("book/04_attention.ipynb")
    context = {
        "pathto": lambda target, resource=0: f"../{target}",
        "header_buttons": [
            {
                "type": "group",
                "label": "launch-buttons",
                "buttons": [{"type": "link", "text": "Colab", "url": old}],
            },
            {
                "type": "group",
                "label": "download-buttons",
                "buttons": [
                    {
                        "type": "link",
                        "text": ".md",
                        "url": "../_sources/book/04_attention.md",
                        "label": "download-source-button",
                    }
                ],
            },
        ],
    }
    app = types.SimpleNamespace(srcdir=str(ROOT))
    course_reader.point_buttons(app, "book/04_attention", "page.html", context, None)
    launch, download = context["header_buttons"]
    assert launch["buttons"][0]["url"] == colab.colab_url("notebooks/04_attention.ipynb")
    notebook = download["buttons"][0]
    assert notebook["label"] == "download-notebook-button"
    assert notebook["url"] == "../_notebooks/04_attention.ipynb"
    # a page without a reader notebook (the glossary) keeps the theme's buttons
    context["header_buttons"][0]["buttons"][0]["url"] = old
    course_reader.point_buttons(app, "book/glossary", "page.html", context, None)
    assert context["header_buttons"][0]["buttons"][0]["url"] == old

    out = tmp_path / "html"
    course_reader.copy_notebooks(
        types.SimpleNamespace(
            srcdir=str(ROOT), outdir=str(out), builder=types.SimpleNamespace(format="html")
        ),
        None,
    )
    assert (out / "_notebooks" / "worked" / "ex1_forward.ipynb").read_bytes() == (
        ROOT / "notebooks" / "worked" / "ex1_forward.ipynb"
    ).read_bytes()
