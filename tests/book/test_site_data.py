"""The site data of the reader notebooks is made by the build (issue 37).

``book/_ext/course_reader.py`` writes ``<build>/site.json`` when an HTML build finishes, from
the build environment (no reading of Sphinx's private ``environment.pickle``); ``./course sync
--from-build`` copies it to ``notebooks/site.json`` (``tools/reader.py``). Here a small Sphinx
project (myst-nb, a numbered toctree, a glued value, a figure, an equation, a glossary term, a
download; nothing executes) is built, and every entry of its ``site.json`` is checked against
the HTML that Sphinx wrote. The slow test in ``tests/book/test_reader.py`` compares the whole book's
with the committed ``notebooks/site.json``.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from tools import ROOT, reader

PNG = bytes.fromhex(  # a 1x1 white PNG
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c63f8ffff3f0005fe02fea7d605860000000049454e44ae426082"
)

CONF = f"""
import sys
sys.path.insert(0, {str(ROOT / "book" / "_ext")!r})
project = "Tiny"
extensions = ["myst_nb", "course_reader"]
numfig = True
myst_enable_extensions = ["dollarmath", "amsmath"]
nb_execution_mode = "off"
exclude_patterns = ["_build"]
"""

INDEX = """# The book

```{toctree}
:numbered:
page
glossary
```
"""

PAGE_TEXT = """(sec-start)=
# A page

## Part one

```{figure} pic.png
:name: fig-a

A caption.
```

$$
a = b
$$ (eq-a)

Read {download}`the sheet <sheet.txt>` about {term}`attention`; the value is {glue:text}`n`.
"""

GLOSSARY = """# Glossary

```{glossary}
Attention
  What a head does.
```
"""


def _page() -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    glued = nbformat.v4.new_output(
        "display_data",
        data={
            "application/papermill.record/text/plain": "3",
            "application/papermill.record/text/latex": "$3$",
        },
        metadata={"scrapbook": {"name": "n", "mime_prefix": "application/papermill.record/"}},
    )
    code = nbformat.v4.new_code_cell("glue('n', 3)", outputs=[glued])
    nb.cells = [nbformat.v4.new_markdown_cell(PAGE_TEXT), code]
    return nb


@pytest.fixture(scope="module")
def tiny_build(tmp_path_factory) -> Path:
    """The ``_build`` folder of the small project's HTML build."""
    root = tmp_path_factory.mktemp("tiny")
    src = root / "src"
    src.mkdir()
    (src / "conf.py").write_text(CONF)
    (src / "index.md").write_text(INDEX)
    (src / "glossary.md").write_text(GLOSSARY)
    (src / "pic.png").write_bytes(PNG)
    (src / "sheet.txt").write_text("1 + 1 = 2\n")
    nbformat.write(_page(), src / "page.ipynb")
    build = root / "_build"
    cmd = [sys.executable, "-m", "sphinx", "-b", "html", "-q", "-W", "-d", str(build / ".doctrees")]
    proc = subprocess.run(
        [*cmd, str(src), str(build / "html")], capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return build


def test_the_html_build_writes_the_site_data_beside_its_html(tiny_build):
    data = reader.site_data_from_build(tiny_build)
    text = (tiny_build / reader.SITE_BUILD_FILE).read_text(encoding="utf-8")
    assert text == reader.site_data_text(data), "not in notebooks/site.json's format"
    assert set(data) == {
        "formats", "pages", "titles", "headings", "numbers", "labels", "equations", "terms",
        "downloads",
    }  # fmt: skip
    assert data["pages"] == {"page": {"glue": {"n": {"text/plain": "3", "text/latex": "$3$"}}}}


def test_every_number_and_anchor_is_the_one_the_html_shows(tiny_build):
    data = reader.site_data_from_build(tiny_build)
    html = {
        p.relative_to(tiny_build / "html").with_suffix("").as_posix(): p.read_text(encoding="utf-8")
        for p in (tiny_build / "html").glob("*.html")
    }
    assert data["titles"]["page"] == "A page" and data["numbers"]["page"] == "1"
    assert "<title>1. A page" in html["page"] or "<title>A page" in html["page"]
    assert data["headings"]["page"] == [["A page", "1"], ["Part one", "1.1"]]
    for title, number in data["headings"]["page"]:
        assert f'<span class="section-number">{number}. </span>{title}' in html["page"]

    fig = data["labels"]["fig-a"]
    assert (fig["page"], fig["type"]) == ("page", "figure")
    assert re.search(
        rf'id="{fig["anchor"]}".*?Fig\. {re.escape(fig["number"])}', html["page"], re.S
    ), fig
    start = data["labels"]["sec-start"]
    assert (start["page"], start["title"]) == ("page", "A page")
    assert f'id="{start["anchor"]}"' in html["page"]

    eq = data["equations"]["eq-a"]
    assert eq["page"] == "page"
    assert re.search(
        rf'id="{eq["anchor"]}".*?class="eqno">\({re.escape(eq["number"])}\)', html["page"], re.S
    ), eq

    term = data["terms"]["attention"]
    assert term["page"] == "glossary" and f'id="{term["anchor"]}"' in html["glossary"]

    dest = data["downloads"]["sheet.txt"]
    assert (tiny_build / "html" / dest).read_text() == "1 + 1 = 2\n"
    assert data["formats"]["numfig"]["figure"].startswith("Fig.")
    assert json.loads(json.dumps(data)) == data


def test_nothing_reads_sphinx_s_private_environment_pickle():
    """The site data comes from the build's own event, not from Sphinx's pickled environment."""
    readers = [
        p.relative_to(ROOT).as_posix()
        for folder in ("tools", "book/_ext", "course_lib")
        for p in (ROOT / folder).rglob("*.py")
        if "environment.pickle" in p.read_text(encoding="utf-8")
    ]
    assert not readers, f"these read Sphinx's private environment.pickle: {readers}"
