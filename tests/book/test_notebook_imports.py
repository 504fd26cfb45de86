"""Every ``course_lib`` name a notebook or chapter imports exists (fast tier).

The class: a module moves or drops a re-export, the library's own tests pass, and a notebook
that imports the old name only fails when the slow tier executes it (issue 37's cycle work
removed ``course_lib.model.load_pretrained``; notebooks 10 and 12 still imported it). This
reads every code cell of the chapters (``book/*.md``), the solutions, the exercises and the
reader notebooks, and resolves each ``import course_lib.X`` / ``from course_lib.X import Y``.
"""

from __future__ import annotations

import ast
import importlib

import nbformat
import pytest

from tools import ROOT
from tools.format_code import CELL


def _sources() -> list[tuple[str, str]]:
    """(where, code) for every code cell of the course's notebooks and chapters."""
    out = []
    for md in sorted((ROOT / "book").rglob("*.md")):
        for i, m in enumerate(CELL.finditer(md.read_text(encoding="utf-8"))):
            out.append((f"{md.relative_to(ROOT)} cell {i}", m.group("code")))
    for folder in ("solutions", "exercises", "notebooks"):
        for path in sorted((ROOT / folder).rglob("*.ipynb")):
            nb = nbformat.read(path, as_version=4)
            for i, cell in enumerate(nb.cells):
                if cell.cell_type == "code":
                    out.append((f"{path.relative_to(ROOT)} cell {i}", cell.source))
    return out


def course_imports(code: str) -> list[tuple[str, str | None]]:
    """(module, name or None) for each course_lib import in ``code`` (magics skipped)."""
    lines = [ln for ln in code.splitlines() if not ln.lstrip().startswith(("%", "!"))]
    try:
        tree = ast.parse("\n".join(lines))
    except SyntaxError:
        return []  # a TODO stub or a cell meant to fail: the notebook tests judge those
    found: list[tuple[str, str | None]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("course_lib"):
            found += [(node.module, a.name) for a in node.names if a.name != "*"]
        elif isinstance(node, ast.Import):
            found += [(a.name, None) for a in node.names if a.name.startswith("course_lib")]
    return found


def unresolved(imports: list[tuple[str, str | None]]) -> list[str]:
    """The imports that do not resolve, as ``module.name`` strings."""
    bad = []
    for module, name in imports:
        try:
            mod = importlib.import_module(module)
        except ImportError:
            bad.append(module)
            continue
        if name is not None and not hasattr(mod, name):
            try:
                importlib.import_module(f"{module}.{name}")  # a submodule
            except ImportError:
                bad.append(f"{module}.{name}")
    return bad


def test_every_course_lib_import_of_a_notebook_resolves():
    sources = _sources()
    assert len(sources) > 500, "the cells were found"
    problems = [
        f"{where}: {b}" for where, code in sources for b in unresolved(course_imports(code))
    ]
    assert not problems, "imports of names course_lib no longer has:\n" + "\n".join(problems)


def test_the_checker_sees_a_missing_name():
    code = "from course_lib.model import load_pretrained_gone\nimport course_lib.no_such_room\n"
    assert unresolved(course_imports(code)) == [
        "course_lib.model.load_pretrained_gone",
        "course_lib.no_such_room",
    ]


@pytest.mark.parametrize("code", ["from course_lib.checkpoint import load_pretrained"])
def test_a_present_name_passes(code):
    assert unresolved(course_imports(code)) == []
