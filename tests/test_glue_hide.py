"""book/_ext/course_glue.py: the site's code cells do not show ``glue(...)`` bookkeeping, and
nothing else is taken from them."""

import ast
import html as html_lib
import re
import sys

import pytest
from build_support import get_build, page_builds

from tools import ROOT
from tools.toc import toc_files

sys.path.insert(0, str(ROOT / "book" / "_ext"))
from course_glue import strip_glue  # noqa: E402


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
