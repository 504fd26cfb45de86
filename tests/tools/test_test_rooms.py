"""Every test file lives in the folder of the room whose code it tests (CONTRIBUTING.md, "Tests").

``tests/`` holds one folder per room of the code (``ROOMS``: the folder and the code it tests)
and the support modules the rooms share (``conftest.py``, ``build_support.py``...); no
``test_*.py`` sits directly in ``tests/``, in a folder that is not a room, or deeper than its
room's folder. A test of a ``course_lib`` room imports that room's code, so a labs test filed
under the core (or the reverse, when it imports nothing of the core) is named too.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tools import ROOT

TESTS = ROOT / "tests"

# each folder of tests/ and the code it tests (CONTRIBUTING.md, "Rooms")
ROOMS = {
    "core": "course_lib",  # the core modules, flat in the package
    "labs": "course_lib/labs",
    "handcalc": "course_lib/handcalc",
    "viz": "course_lib/viz",
    "grading": "course_lib/grading",  # and the exercise notebooks it grades (tools/exercises.py)
    "book": "book",  # the site: the chapters' pages, the built site, book/_ext
    "tools": "tools",
    "benchmarks": "benchmarks",
}


def misplaced_test_files(tests: Path) -> list[str]:
    """The ``test_*.py`` files under ``tests`` that are not directly in a room's folder
    (relative to ``tests``, sorted)."""
    return [
        path.relative_to(tests).as_posix()
        for path in sorted(tests.rglob("test_*.py"))
        if len(path.relative_to(tests).parts) != 2 or path.relative_to(tests).parts[0] not in ROOMS
    ]


def _imports(path: Path) -> set[str]:
    """Every module a file imports, ``from a import b`` counted as ``a`` and ``a.b``."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names |= {node.module} | {f"{node.module}.{alias.name}" for alias in node.names}
    return names


def _core_modules() -> set[str]:
    return {f"course_lib.{p.stem}" for p in (ROOT / "course_lib").glob("*.py")} - {
        "course_lib.__init__"
    }


def imports_its_room(room: str, imports: set[str]) -> bool:
    """Whether a test file of a ``course_lib`` room's folder imports code of that room."""
    if room == "core":
        return bool(imports & _core_modules())
    package = ROOMS[room].replace("/", ".")
    mine = any(name == package or name.startswith(package + ".") for name in imports)
    return mine or (room == "grading" and "tools.exercises" in imports)


def test_every_test_file_sits_in_the_folder_of_a_room():
    assert not misplaced_test_files(TESTS), (
        "test files outside a room's folder (tests/<room>/test_*.py, rooms: "
        f"{', '.join(ROOMS)}): {misplaced_test_files(TESTS)}"
    )


@pytest.mark.parametrize("room", ROOMS)
def test_every_room_folder_names_code_that_exists(room):
    assert (TESTS / room).is_dir(), f"tests/{room}/ is missing: remove it from ROOMS"
    assert (ROOT / ROOMS[room]).is_dir(), f"tests/{room}/ tests {ROOMS[room]}/, which is gone"


@pytest.mark.parametrize("room", ["core", "labs", "handcalc", "viz", "grading"])
def test_a_test_of_a_package_room_imports_that_room(room):
    strays = [
        path.name
        for path in sorted((TESTS / room).glob("test_*.py"))
        if not imports_its_room(room, _imports(path))
    ]
    assert not strays, f"tests/{room}/ holds tests that import nothing of {ROOMS[room]}: {strays}"


def test_the_check_names_a_flat_layout_and_a_stray_folder(tmp_path):
    """The checker on a made-up tests/ folder: a flat file, a folder that is no room and a file
    below a room's folder are named; support modules and files in a room's folder are not."""
    for rel in (
        "test_flat.py",
        "misc/test_stray.py",
        "labs/deep/test_nested.py",
        "labs/test_placed.py",
        "conftest.py",
        "build_support.py",
    ):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("", encoding="utf-8")
    assert misplaced_test_files(tmp_path) == [
        "labs/deep/test_nested.py",
        "misc/test_stray.py",
        "test_flat.py",
    ]
    assert imports_its_room("labs", {"course_lib.labs.rope", "course_lib.attention"})
    assert not imports_its_room("core", {"course_lib.labs.rope"})
    assert imports_its_room("core", {"course_lib.attention"})
