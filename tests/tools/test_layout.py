"""The rooms of course_lib and who may import whom (CONTRIBUTING.md, "Rooms").

- core (the modules directly in ``course_lib/``): imports only other core modules;
- ``labs``: core and labs; ``handcalc``: handcalc only; ``viz``: core and viz;
- ``grading``: grading only (its checks run in the student's kernel);
- nothing in ``course_lib`` imports the repository tools (``tools/`` is not installed), and only
  ``viz`` imports matplotlib, myst-nb or ipywidgets (IPython only inside functions).

These rules are what keeps ``import course_lib.model`` light for a training worker and a grading
kernel; the last tests check that in a fresh interpreter.

Core or lab, by one rule: a module directly in ``course_lib/`` is used by two or more chapters, a
module in ``course_lib/labs/`` by exactly one (a chapter: its page and sections in ``_toc.yml``
and its solution notebook; a use counts through every chain of ``course_lib`` imports and the
package's front door).

And no cycles: in ``course_lib`` and ``tools`` no module imports, however indirectly, a module
that imports it back, counting every import (inside functions too: a deferred import hides a
cycle, it does not remove it). ``importlib.import_module`` takes a literal name (an edge like
any other); only the package's front door, ``course_lib/__init__.py``, resolves names lazily.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from tools import ROOT

ROOMS = ("labs", "handcalc", "viz", "grading")
ALLOWED = {
    "core": {"core"},
    "labs": {"core", "labs"},
    "handcalc": {"handcalc"},
    "viz": {"core", "viz"},
    "grading": {"grading"},
}
# IPython: lazily, inside functions (checked below)
DISPLAY_LIBS = {"matplotlib", "myst_nb", "ipywidgets"}


def room_of(module: str) -> str:
    """'course_lib.labs.rope' -> 'labs'; 'course_lib.model' -> 'core'."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in ROOMS else "core"


def module_name(path: Path, root: Path = ROOT) -> str:
    rel = path.relative_to(root).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports(path: Path, root: Path = ROOT) -> list[tuple[int, str]]:
    """(line, absolute module name) of every import in a file, relative imports resolved."""
    me = module_name(path, root)
    package = me if path.name == "__init__.py" else me.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            mod = node.module or ""
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            # each imported name may itself be a module (from .labs import rope); _resolve trims
            found += [(node.lineno, f"{mod}.{a.name}") for a in node.names]
    return found


def _resolve(name: str, root: Path = ROOT) -> str:
    """A course_lib import that names a function (from .attention import x) -> its module."""
    parts = name.split(".")
    while parts and not (
        (root.joinpath(*parts).with_suffix(".py")).exists()
        or (root.joinpath(*parts) / "__init__.py").exists()
    ):
        parts.pop()
    return ".".join(parts)


def violations(root: Path = ROOT) -> list[str]:
    """Every import in ``root/course_lib`` that breaks the rules above, as 'file:line why'."""
    bad = []
    for path in sorted(
        p for p in (root / "course_lib").rglob("*.py") if "__pycache__" not in p.parts
    ):
        me = module_name(path, root)
        if me == "course_lib":
            continue  # the package front door re-exports core names and, lazily, viz names
        mine, where = room_of(me), path.relative_to(root)
        for line, name in imports(path, root):
            if name.split(".")[0] == "tools":
                bad.append(f"{where}:{line} imports the repository tools ({name})")
            elif name.split(".")[0] in DISPLAY_LIBS and mine != "viz":
                bad.append(f"{where}:{line} imports {name}: display libraries belong in viz")
            elif name.startswith("course_lib."):
                module = _resolve(name, root)
                if room_of(module) not in ALLOWED[mine]:
                    bad.append(f"{where}:{line} ({mine}) imports {module} ({room_of(module)})")
    return bad


def test_rooms_import_only_what_they_may():
    bad = violations()
    assert not bad, "imports across rooms that CONTRIBUTING.md forbids:\n" + "\n".join(bad)


def test_the_rule_checker_sees_violations(tmp_path):
    """The checker on a made-up package: a core module importing a lab, a lab importing viz
    through a relative import, grading importing core, and matplotlib outside viz."""
    files = {
        "course_lib/__init__.py": "",
        "course_lib/model.py": "from .labs import rope\n",
        "course_lib/attention.py": "import torch\n",
        "course_lib/labs/__init__.py": "",
        "course_lib/labs/rope.py": (
            "from ..attention import x\nfrom ..viz.plotting import new_figure\n"
        ),
        "course_lib/viz/__init__.py": "",
        "course_lib/viz/plotting.py": "import matplotlib\nfrom ..attention import x\n",
        "course_lib/grading/__init__.py": "",
        "course_lib/grading/checks.py": (
            "import matplotlib.pyplot\nfrom course_lib.model import y\n"
        ),
    }
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    got = violations(tmp_path)
    assert len(got) == 4, got
    assert any("model.py:1 (core) imports course_lib.labs.rope (labs)" in g for g in got)
    assert any("rope.py:2 (labs) imports course_lib.viz.plotting" in g for g in got)
    assert any("checks.py:1 imports matplotlib" in g for g in got)
    assert any("checks.py:2 (grading) imports course_lib.model (core)" in g for g in got)


def _chapters(root: Path) -> dict[str, list[str]]:
    """{chapter: the code of its page, its sections and its solution notebook}: the chapters are
    the entries of ``_toc.yml`` (the root and each part's chapters), a section belongs to the
    chapter whose ``sections`` list it, and ``solutions/NAME.ipynb`` to ``book/NAME``."""
    import json

    import yaml

    from tools.format_code import CELL

    toc = yaml.safe_load((root / "_toc.yml").read_text())
    chapters: dict[str, list[str]] = {}

    def files_of(entry: dict) -> list[str]:  # an entry and its sections, however deep
        return [entry["file"], *(f for s in entry.get("sections", []) for f in files_of(s))]

    for entry in [{"file": toc["root"]}] + [c for p in toc.get("parts", []) for c in p["chapters"]]:
        chapters[entry["file"]] = [
            m["code"]
            for f in files_of(entry)
            for m in CELL.finditer((root / f"{f}.md").read_text())
        ]
    for nb in sorted((root / "solutions").glob("*.ipynb")):
        chapter = f"book/{nb.stem}"
        if chapter not in chapters:
            raise AssertionError(f"{nb.relative_to(root)} has no chapter {chapter} in _toc.yml")
        cells = json.loads(nb.read_text())["cells"]
        chapters[chapter] += ["".join(c["source"]) for c in cells if c["cell_type"] == "code"]
    return chapters


def _front_door(root: Path) -> dict[str, str]:
    """{name: module} of what ``from course_lib import name`` gives: the front door's
    ``from .module import name`` lines and its lazy map ``_LAZY``."""
    names = {}
    for node in ast.parse((root / "course_lib" / "__init__.py").read_text()).body:
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            names.update({a.name: f"course_lib.{node.module}" for a in node.names})
        elif isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "_LAZY":
            names.update(ast.literal_eval(node.value))
    return names


def chapters_using(root: Path = ROOT) -> dict[str, set[str]]:
    """{course_lib module: the chapters that use it}, directly or through any chain of imports
    (deferred ones included)."""
    graph = {
        module_name(p, root): {_resolve(n, root) for _, n in imports(p, root)}
        for p in (root / "course_lib").rglob("*.py")
        if "__pycache__" not in p.parts
    }
    # the front door counts by the names a chapter takes from it (``door``), not as a module:
    # running it imports attention for every chapter that imports any course_lib module
    graph["course_lib"] = set()
    door = _front_door(root)
    used: dict[str, set[str]] = {}
    for chapter, cells in _chapters(root).items():
        direct = set()
        for code in cells:
            code = "\n".join(x for x in code.splitlines() if not x.lstrip().startswith(("%", "!")))
            for node in ast.walk(ast.parse(code)):
                if isinstance(node, ast.Import):
                    direct |= {_resolve(a.name, root) for a in node.names}
                elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                    for a in node.names:
                        if node.module == "course_lib" and a.name in door:
                            direct.add(door[a.name])
                        else:
                            direct.add(_resolve(f"{node.module}.{a.name}", root))
        seen, todo = set(), [m for m in direct if m.startswith("course_lib")]
        while todo:
            m = todo.pop()
            if m not in seen:
                seen.add(m)
                todo += graph.get(m, ())
        for m in seen:
            used.setdefault(m, set()).add(chapter)
    return used


def misplaced(root: Path = ROOT) -> list[str]:
    """Core modules fewer than two chapters use and labs not used by exactly one, as sentences."""
    used = chapters_using(root)
    bad = []
    for path in sorted((root / "course_lib").glob("*.py")) + sorted(
        (root / "course_lib" / "labs").glob("*.py")
    ):
        if path.name == "__init__.py":
            continue
        module = module_name(path, root)
        who = sorted(used.get(module, ()))
        if room_of(module) == "core" and len(who) < 2:
            bad.append(
                f"{module} is core but {len(who)} chapter(s) use it ({', '.join(who) or 'none'}): "
                "move it to course_lib/labs/"
            )
        elif room_of(module) == "labs" and len(who) != 1:
            bad.append(
                f"{module} is a lab but {len(who)} chapters use it ({', '.join(who) or 'none'}): "
                + ("move it to the core" if who else "a lab belongs to the chapter that runs it")
            )
    return bad


def test_core_is_what_two_chapters_use_and_a_lab_what_one_uses():
    bad = misplaced()
    assert not bad, "modules in the wrong room (CONTRIBUTING.md, Rooms):\n" + "\n".join(bad)


def test_the_core_or_lab_rule_sees_a_misplaced_module(tmp_path):
    """A made-up course: a core module one chapter uses (through a lab), a lab two chapters use
    (one through a solution notebook, one through the front door), a lab nobody uses, and a core
    module two chapters use (one through a section, one through a lab the front door exports)."""
    import json

    files = {
        "_toc.yml": (
            "root: book/intro\nparts:\n  - chapters:\n      - file: book/01_a\n"
            "        sections:\n          - file: book/a_section\n      - file: book/02_b\n"
        ),
        "book/intro.md": "```{code-cell} ipython3\nimport numpy\n```\n",
        "book/01_a.md": "```{code-cell} ipython3\nfrom course_lib.labs.one import f\n```\n",
        "book/a_section.md": "```{code-cell} ipython3\nfrom course_lib.shared import g\n```\n",
        "book/02_b.md": (
            "```{code-cell} ipython3\n%matplotlib inline\nfrom course_lib import h\n```\n"
        ),
        "course_lib/__init__.py": "from .labs.two import h\n",
        "course_lib/lonely.py": "x = 1\n",
        "course_lib/shared.py": "g = 1\n",
        "course_lib/labs/__init__.py": "",
        "course_lib/labs/one.py": "from ..lonely import x\nfrom ..shared import g\n",
        "course_lib/labs/two.py": "from ..shared import g\nh = 1\n",
        "course_lib/labs/unused.py": "u = 1\n",
        "solutions/01_a.ipynb": json.dumps(
            {"cells": [{"cell_type": "code", "source": ["from course_lib.labs import two"]}]}
        ),
    }
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    got = misplaced(tmp_path)
    assert got == [
        "course_lib.lonely is core but 1 chapter(s) use it (book/01_a): "
        "move it to course_lib/labs/",
        "course_lib.labs.two is a lab but 2 chapters use it (book/01_a, book/02_b): "
        "move it to the core",
        "course_lib.labs.unused is a lab but 0 chapters use it (none): "
        "a lab belongs to the chapter that runs it",
    ], got


CYCLE_ROOTS = ("course_lib", "tools")
FRONT_DOOR = "course_lib"  # its lazy names point outward only (viz), never back at itself


def import_graph(root: Path = ROOT) -> tuple[dict[str, dict[str, int]], list[str]]:
    """{module: {module it imports: first line}} over ``CYCLE_ROOTS`` (every import, deferred
    ones and ``importlib.import_module("literal")`` included), and the dynamic imports the graph
    cannot see (``import_module`` of a computed name) as 'file:line' problems."""
    graph: dict[str, dict[str, int]] = {}
    unseen = []
    for top in CYCLE_ROOTS:
        for path in sorted(p for p in (root / top).rglob("*.py") if "__pycache__" not in p.parts):
            me = module_name(path, root)
            if me == FRONT_DOOR:
                continue
            found = list(imports(path, root))
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if not (
                    isinstance(node, ast.Call)
                    and isinstance(node.func, (ast.Attribute, ast.Name))
                    and getattr(node.func, "attr", getattr(node.func, "id", "")) == "import_module"
                ):
                    continue
                arg = node.args[0] if node.args else None
                if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                    found.append((node.lineno, arg.value))
                else:
                    unseen.append(
                        f"{path.relative_to(root)}:{node.lineno} import_module(<computed>)"
                    )
            edges = graph.setdefault(me, {})
            for line, name in found:
                if name.split(".")[0] in CYCLE_ROOTS:
                    module = _resolve(name, root)
                    if module and module not in (me, FRONT_DOOR):
                        edges.setdefault(module, line)
    return graph, unseen


def cycles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """The import cycles of ``graph``: its strongly connected components of two or more modules
    (Tarjan's algorithm, iterative), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(graph[start]))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            v, children = work[-1]
            w = next((c for c in children if c in graph), None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(graph[w])))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                component = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    component.append(w)
                    if w == v:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def _describe(graph: dict[str, dict[str, int]], component: list[str]) -> str:
    return "; ".join(
        f"{a} imports {b} (line {graph[a][b]})"
        for a in component
        for b in graph[a]
        if b in component
    )


def test_no_import_cycles_deferred_imports_included():
    graph, unseen = import_graph()
    assert not unseen, "imports the cycle check cannot see (name the module):\n" + "\n".join(unseen)
    found = cycles(graph)
    assert not found, "import cycles (deferred imports count):\n" + "\n".join(
        _describe(graph, c) for c in found
    )


def test_the_cycle_checker_sees_deferred_and_dynamic_imports(tmp_path):
    """A made-up package: a two-way dependency through an import inside a function, a
    three-module ring through ``import_module("...")``, a PEP 562 map's computed name, and a
    one-way chain that is no cycle."""
    files = {
        "course_lib/__init__.py": "from .model import x\n",
        "course_lib/model.py": "from .kv_cache import Cache\n",
        "course_lib/kv_cache.py": "def f():\n    from .model import MiniGPT\n",
        "course_lib/grading/__init__.py": "",
        "course_lib/grading/a.py": (
            "import importlib\nB = importlib.import_module('course_lib.grading.b')\n"
        ),
        "course_lib/grading/b.py": "from course_lib.grading import c\n",
        "course_lib/grading/c.py": "from . import a\n",
        "course_lib/labs/loss.py": "from .attention import y\n",
        "course_lib/attention.py": "import importlib\n"
        "def __getattr__(n):\n    return importlib.import_module(f'course_lib.{n}')\n",
        "tools/__init__.py": "",
        "tools/colab.py": "from .reader import z\n",
        "tools/reader.py": "import course_lib.model\n",
    }
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    graph, unseen = import_graph(tmp_path)
    assert sorted(cycles(graph)) == [
        ["course_lib.grading.a", "course_lib.grading.b", "course_lib.grading.c"],
        ["course_lib.kv_cache", "course_lib.model"],
    ]
    assert unseen == ["course_lib/attention.py:3 import_module(<computed>)"]


HEAVY = (
    "matplotlib",
    "myst_nb",
    "nbformat",
    "nbval",
    "IPython",
    "ipywidgets",
    "pytest",
    "jupytext",
)


@pytest.mark.parametrize(
    "modules",
    [
        ["course_lib.model", "course_lib.train", "course_lib.attention"],
        ["course_lib"],
        ["course_lib.grading.checks"],
    ],
)
def test_core_imports_load_no_display_or_notebook_stack(modules):
    """A training worker (torchrun), a grading kernel and a plain ``import course_lib`` load
    torch, not the plotting or notebook stack."""
    code = (
        "import sys\n"
        + "".join(f"import {m}\n" for m in modules)
        + f"print(' '.join(sorted(m for m in {HEAVY!r} if m in sys.modules)))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True
    )
    assert out.stdout.strip() == "", f"importing {modules} loaded {out.stdout.strip()}"


def test_plotting_names_still_reachable_from_the_package():
    """Chapters write ``from course_lib import attention_heatmap, glue``: resolved on first use."""
    code = (
        "import sys, course_lib\nassert 'matplotlib' not in sys.modules\n"
        "from course_lib import attention_heatmap, glue\nprint('matplotlib' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True
    )
    assert out.stdout.strip() == "True"
