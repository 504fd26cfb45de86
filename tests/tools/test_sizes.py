"""No function over ``MAX_FUNCTION`` lines and no library file over ``MAX_FILE`` lines unless
CONTRIBUTING.md's "Long on purpose" table says why; and no row there that is no longer needed.
Library code: ``course_lib/``, ``tools/``, ``book/_ext/``. A function is a ``def`` (a method
too), counted from its first decorator to its last line."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from tools import ROOT

MAX_FUNCTION = 80
MAX_FILE = 600
LIBRARY = ("course_lib", "tools", "book/_ext")
HEADING = "### Long on purpose"


def long_ones(root: Path = ROOT) -> dict[str, int]:
    """{"path" or "path::qualified.name": lines} of every file and function over the limits."""
    found: dict[str, int] = {}
    for top in LIBRARY:
        for path in sorted((root / top).rglob("*.py")):
            if "__pycache__" in path.parts:
                continue
            rel = path.relative_to(root).as_posix()
            text = path.read_text(encoding="utf-8")
            if len(text.splitlines()) > MAX_FILE:
                found[rel] = len(text.splitlines())

            def visit(node: ast.AST, prefix: str, rel: str = rel) -> None:
                for child in ast.iter_child_nodes(node):
                    name = getattr(child, "name", None)
                    if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                        first = min([child.lineno] + [d.lineno for d in child.decorator_list])
                        lines = child.end_lineno - first + 1
                        if lines > MAX_FUNCTION:
                            found[f"{rel}::{prefix}{name}"] = lines
                    visit(child, f"{prefix}{name}." if name else prefix)

            visit(ast.parse(text, rel), "")
    return found


def listed(text: str) -> dict[str, str]:
    """{what: why} of CONTRIBUTING's "Long on purpose" table."""
    section = text.split(HEADING, 1)[1].split("\n#", 1)[0]
    rows = re.findall(r"^\| `([^`]+)` \| (.+?) \|$", section, flags=re.M)
    return dict(rows)


def test_every_long_file_and_function_says_why():
    table = listed((ROOT / "CONTRIBUTING.md").read_text(encoding="utf-8"))
    long = long_ones()
    unexplained = sorted(f"{k} ({n} lines)" for k, n in long.items() if k not in table)
    assert not unexplained, (
        f"over {MAX_FUNCTION} lines (a function) or {MAX_FILE} (a file), and not in "
        "CONTRIBUTING.md's 'Long on purpose' table: split it, or add a row saying why:\n"
        + "\n".join(unexplained)
    )
    stale = sorted(k for k in table if k not in long)
    assert not stale, f"rows of 'Long on purpose' no longer needed (remove them): {stale}"
    assert all(len(why) > 20 for why in table.values()), table


def test_the_size_check_sees_nested_and_decorated_functions(tmp_path):
    body = "".join(f"    x{i} = {i}\n" for i in range(MAX_FUNCTION))
    (tmp_path / "tools").mkdir()
    (tmp_path / "tools" / "a.py").write_text(
        "class C:\n    @staticmethod\n    def long():\n"
        + body.replace("    ", "        ")
        + "def short():\n    return 1\n"
        + "def outer():\n    def inner():\n"
        + body.replace("    ", "        ")
    )
    (tmp_path / "tools" / "b.py").write_text("x = 1\n" * (MAX_FILE + 1))
    got = long_ones(tmp_path)
    assert set(got) == {
        "tools/a.py::C.long",
        "tools/a.py::outer",
        "tools/a.py::outer.inner",
        "tools/b.py",
    }, got
