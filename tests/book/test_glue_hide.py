"""``tools/glue_code.py``: the site's code cells (book/_ext/course_glue.py) and the reader
notebooks' (tools/reader.py) do not show ``glue(...)`` bookkeeping, and nothing else is taken
from them."""

import ast
import html as html_lib
import re

import nbformat
import pytest
from build_support import get_build, page_builds

from tools import ROOT, colab, reader
from tools.glue_code import reader_code, strip_glue
from tools.toc import toc_files


def test_glue_calls_go_and_computation_stays():
    src = (
        "import math\n"
        "from course_lib import glue\n"
        "\n"
        "loss = math.log(81)\n"
        "# numbers for the prose\n"
        "glue(\"loss\", f\"{loss:.3f}\")\n"
        "glue(\"long\",\n"
        "     loss * 2)\n"
        "\n"
        "\n"
        "print(loss)\n"
    )
    out = strip_glue(src)
    assert out == "import math\n\nloss = math.log(81)\n\nprint(loss)"
    ast.parse(out)  # still valid Python


def test_loops_and_branches_that_only_glue_go_but_mixed_ones_stay():
    src = (
        "for k, v in d.items():\n"
        "    glue(k, v)\n"
        "for k, v in d.items():\n"
        "    glue(k, v)\n"
        "    total += v\n"
        "if flag:\n"
        "    glue('a', 1)\n"
        "else:\n"
        "    glue('a', 2)\n"
    )
    out = strip_glue(src)
    assert out == "for k, v in d.items():\n    total += v"


def test_glue_inside_blocks_goes_when_the_block_keeps_a_statement():
    src = (
        "for a in (0.6, 0.8):\n"
        "    e = a * 2\n"
        "    print(e)\n"
        "    # for the prose\n"
        "    glue(f'e_{a}', e)\n"
        "def f(x):\n"
        "    glue('x', x)\n"
        "    return x\n"
        "try:\n"
        "    y = f(1)\n"
        "except ValueError:\n"
        "    glue('y', 0)\n"
    )
    out = strip_glue(src)
    assert out == (
        "for a in (0.6, 0.8):\n    e = a * 2\n    print(e)\n"
        "def f(x):\n    return x\n"
        "try:\n    y = f(1)\nexcept ValueError:\n    glue('y', 0)"  # a block cannot be empty
    )
    ast.parse(out)


def test_methods_named_glue_and_other_calls():
    assert strip_glue("viz.glue('x', 1)\nplot(x)") == "plot(x)"
    assert strip_glue("x = glue_factor(2)\nprint(x)") == "x = glue_factor(2)\nprint(x)"
    # An assignment from a call is computation a reader may need: kept.
    assert strip_glue("y = glue('x', 1)") == "y = glue('x', 1)"
    # An import that brings other names stays whole.
    assert (
        strip_glue("from course_lib import glue, plot\nplot()")
        == "from course_lib import glue, plot\nplot()"
    )


def test_a_cell_of_only_glue_becomes_empty_and_unparsable_source_is_kept():
    assert strip_glue("# for the prose\nglue('a', 1)\nglue('b', 2)\n") == ""
    magic = "%timeit f()\nglue('a', 1)"
    assert strip_glue(magic) == magic
    assert strip_glue("print(1)\n") == "print(1)\n"  # untouched source comes back byte for byte


def test_reader_code_leaves_no_glue_and_no_import_only_glue_used():
    cells = [
        "import math\nfrom IPython.display import Latex  # for glue\n"
        "from course_lib import glue, plot, sci  # helpers\n",
        "x = math.log(2)\nplot(x)\nglue('x', sci(x))\nglue('t', Latex('$x$'))",
        "try:\n    y = f(1)\nexcept ValueError:\n    # the prose's fallback\n    glue('y', 0)\n",
        "# numbers for the prose\nglue('a', 1)\n",
        "print(1)\n",
    ]
    out = reader_code(cells)
    assert out[0] == "import math\nfrom course_lib import plot  # helpers"
    assert out[1] == "x = math.log(2)\nplot(x);"  # ended in glue (None): shows nothing still
    assert out[2] == "try:\n    y = f(1)\nexcept ValueError:\n    pass"
    assert out[3] == ""  # a cell of nothing but glue: the reader notebook drops it
    assert out[4] == "print(1)\n"  # untouched source comes back byte for byte
    for src in out:
        ast.parse(src)
    # a name the remaining code still uses keeps its import; a long import wraps as ruff's
    kept = reader_code(["from course_lib import glue, sci\n", "glue('a', sci(1))\nprint(sci(2))"])
    assert kept == ["from course_lib import sci", "print(sci(2))"]
    long = "from course_lib.some_long_module import " + ", ".join(f"name_{i}" for i in range(12))
    wrapped = reader_code([long + ", glue\n", "glue('a', 1)\nprint(name_0)"])[0]
    assert "glue" not in wrapped and all(len(line) <= 88 for line in wrapped.splitlines())
    assert ast.parse(wrapped)


def test_strip_glue_refuses_an_unknown_mode():
    with pytest.raises(ValueError, match="empty_blocks"):
        strip_glue("glue('a', 1)", empty_blocks="drop")


@pytest.mark.parametrize("md", colab.chapter_paths(ROOT), ids=lambda p: p.stem)
def test_reader_notebooks_code_has_no_glue(md):
    """What Colab opens: no code cell calls or imports ``glue`` (issue 35: 831 calls in 172
    cells were shown), and every computation of the paired notebook is still there."""
    nb = nbformat.read(reader.reader_path(md), as_version=4)
    shown = [c.source for c in nb.cells if c.cell_type == "code"]
    problems = [src for src in shown if re.search(r"\bglue\b", src)]
    assert not problems, f"{md.name}: glue in {len(problems)} code cell(s): {problems[0][:200]!r}"
    pair = nbformat.read(md.with_suffix(".ipynb"), as_version=4)
    kept = [s for s in reader_code([c.source for c in pair.cells if c.cell_type == "code"]) if s]
    assert shown == kept, f"{md.name}: the reader notebook's code is not the paired notebook's"


@pytest.mark.slow
@pytest.mark.parametrize(
    "page, build",
    page_builds([f for f in toc_files() if "glue(" in (ROOT / f"{f}.md").read_text()]),
)
def test_built_pages_show_no_glue_but_keep_their_glued_values(page, build, request):
    text = (get_build(request, build).path / "html" / f"{page}.html").read_text()
    code = " ".join(re.findall(r'<div class="cell_input.*?</pre>', text, flags=re.S))
    plain = html_lib.unescape(re.sub(r"<[^>]+>", "", code))
    assert not re.search(r"^\s*glue\(", plain, flags=re.M), f"{page}: a glue(...) line is shown"
    assert "{glue" not in text  # the prose still received every value
