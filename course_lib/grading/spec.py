"""The exercise-notebook format: cell roles, the exercises and checks of a solution notebook,
and the stubs that replace solutions. Read by the grader (``course_lib.grading.grade``) and by
the generator that writes ``exercises/`` (``tools/exercises.py``); documented in
``exercises/README.md``.

Each cell carries ``metadata["course"]`` with a ``role``:

- ``setup``: trusted code run before everything (the Colab cell ``colab-setup``, imports);
- ``answer``: the student's cell; the solution sits between ``### BEGIN SOLUTION`` and
  ``### END SOLUTION`` and is replaced by a ``NotImplementedError("TODO ...")`` stub;
  ``exercise``, ``points``, ``forbid`` (names the answer may not use: the lint checks its source,
  the check helpers refuse torch functions of those names at run time, see ``guard``) and ``wrong``
  (known-wrong answers with the checks they must fail), and ``predict`` (true: the answer is a
  prediction that its check cells measure with ``check_prediction``; the grader reads the
  saved notebook's execution order for it);
- ``check``: trusted code calling ``course_lib.grading.checks``; ``checks`` (name + hint of each
  check) is synced from the cell's source by the generator. A grading runs it whole only in the
  checker; the student's process runs its student program (``split``: the checks' calls of the
  student's code and the inputs they need, no reference);
- ``text``: markdown.
"""

from __future__ import annotations

import ast
import re
import textwrap
import threading
from dataclasses import dataclass, field

from .checks import CHECK_FUNCS

__all__ = [
    "BEGIN",
    "END",
    "MARKER",
    "slug",
    "Check",
    "Exercise",
    "NotebookSpec",
    "role",
    "meta",
    "checks_in_source",
    "parse",
    "load_spec",
    "stub_answer",
    "wrong_answer_source",
]

BEGIN, END = "### BEGIN SOLUTION", "### END SOLUTION"
MARKER = (
    "# EXERCISE {name}:"  # first line of every answer cell; the grader also finds answers by it
)


def slug(name: str) -> str:
    """Cell-id form of an exercise name: sequential_steps -> sequential-steps."""
    return name.replace("_", "-")


_ID_RE = re.compile(r"^[a-z0-9][a-z0-9-]{0,63}$")


@dataclass
class Check:
    name: str
    hint: str
    cell_id: str


@dataclass
class Exercise:
    name: str
    points: float
    answer_id: str
    check_ids: list[str]
    checks: list[Check]
    forbid: list[str]
    wrong: list[dict]
    prev_anchor: str | None  # id of the trusted code cell before the answer (None: none)
    predict: bool = False  # predict, then run: the answer is a prediction its checks measure


@dataclass
class NotebookSpec:
    stem: str
    exercises: list[Exercise]
    setup_ids: list[str]
    trusted_ids: list[str] = field(default_factory=list)  # setup + check cells, in order

    def exercise(self, name: str) -> Exercise:
        for ex in self.exercises:
            if ex.name == name:
                return ex
        raise KeyError(name)

    @property
    def max_score(self) -> float:
        return float(sum(ex.points for ex in self.exercises))


def role(cell) -> str | None:
    return cell.get("metadata", {}).get("course", {}).get("role")


def meta(cell) -> dict:
    return cell.get("metadata", {}).get("course", {})


# --------------------------------------------------------------------------- parsing
_PARSE_LOCK = threading.RLock()


def parse(source: str) -> ast.Module:
    """``ast.parse`` under one lock. CPython 3.11 keeps the AST constructor's recursion depth in
    interpreter-wide state: when a garbage collection inside one thread's parse runs a finalizer
    that lets another thread parse, the first fails with "AST constructor recursion depth
    mismatch" (python/cpython#106905). A batch grades submissions in threads of one process, so
    every parse of the grader goes through here."""
    with _PARSE_LOCK:
        return ast.parse(source)


def checks_in_source(source: str, cell_id: str) -> list[Check]:
    """(name, hint) of every check_* call in a check cell, from its AST. Names and hints must be
    string literals so the grader knows every check without running anything."""
    found = []
    for node in ast.walk(parse(source)):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in CHECK_FUNCS
        ):
            name = node.args[0] if node.args else None
            hint = next((k.value for k in node.keywords if k.arg == "hint"), None)
            if not (isinstance(name, ast.Constant) and isinstance(name.value, str)):
                raise ValueError(
                    f"cell {cell_id}: every {node.func.id}(...) needs a string-literal name as its "
                    "first argument."
                )
            if not (
                isinstance(hint, ast.Constant)
                and isinstance(hint.value, str)
                and hint.value.strip()
            ):
                raise ValueError(
                    f"cell {cell_id}: check {name.value!r} needs a string-literal hint=... (hints "
                    "are required)."
                )
            found.append((node.lineno, node.col_offset, Check(name.value, hint.value, cell_id)))
    return [c for _, _, c in sorted(found, key=lambda t: t[:2])]


def load_spec(nb, stem: str | None = None) -> NotebookSpec:
    """The exercises of a solution notebook, in order, from its cell metadata."""
    stem = stem or nb.metadata.get("course", {}).get("notebook", "")
    exercises: dict[str, Exercise] = {}
    setup_ids, trusted = [], []
    last_trusted = None
    for cell in nb.cells:
        r, m, cid = role(cell), meta(cell), cell.get("id")
        if cell.cell_type != "code":
            continue
        if r == "setup":
            setup_ids.append(cid)
            trusted.append(cid)
            last_trusted = cid
        elif r == "answer":
            name = m["exercise"]
            exercises[name] = Exercise(
                name,
                float(m.get("points", 1)),
                cid,
                [],
                [],
                list(m.get("forbid", [])),
                list(m.get("wrong", [])),
                last_trusted,
                m.get("predict") is True,
            )
        elif r == "check":
            ex = exercises.get(m.get("exercise"))
            if ex is None:
                raise ValueError(
                    f"check cell {cid} names exercise {m.get('exercise')!r}, which has no answer "
                    "cell before it."
                )
            ex.check_ids.append(cid)
            ex.checks.extend(checks_in_source(cell.source, cid))
            trusted.append(cid)
            last_trusted = cid
        else:
            raise ValueError(
                f"code cell {cid} has no course role (setup, answer or check) in its metadata."
            )
    return NotebookSpec(stem, list(exercises.values()), setup_ids, trusted)


# --------------------------------------------------------------------------- stubs
def _regions(source: str) -> list[tuple[int, int, str]]:
    """(begin line, end line, indentation) of every solution region, in order."""
    lines = source.split("\n")
    regions, begin = [], None
    for i, line in enumerate(lines):
        if line.strip() == BEGIN:
            if begin is not None:
                raise ValueError(f"{BEGIN!r} inside another solution region.")
            begin = i
        elif line.strip() == END:
            if begin is None:
                raise ValueError(f"{END!r} without a {BEGIN!r} before it.")
            regions.append(
                (begin, i, lines[begin][: len(lines[begin]) - len(lines[begin].lstrip())])
            )
            begin = None
    if begin is not None or not regions:
        raise ValueError(f"an answer cell needs one or more {BEGIN!r} ... {END!r} regions.")
    return regions


def _replace_regions(source: str, bodies: list[str]) -> str:
    lines = source.split("\n")
    regions = _regions(source)
    if len(bodies) != len(regions):
        raise ValueError(f"{len(bodies)} replacement(s) for {len(regions)} solution region(s).")
    for (b, e, indent), body in reversed(list(zip(regions, bodies))):
        new = textwrap.indent(textwrap.dedent(body).strip("\n"), indent, lambda _line: True).split(
            "\n"
        )
        lines[b : e + 1] = new
    return "\n".join(lines)


def stub_answer(source: str, exercise: str) -> str:
    """The exercise version of an answer cell: every solution region becomes a stub."""
    stub = f'raise NotImplementedError("TODO {exercise}: replace this line with your code")'
    return _replace_regions(source, [stub] * len(_regions(source)))


def wrong_answer_source(source: str, wrong: dict) -> str:
    """The answer cell with its solution region(s) replaced by a known-wrong answer's code
    (``code`` is a string for one region, a list of strings for several)."""
    code = wrong["code"]
    return _replace_regions(source, [code] if isinstance(code, str) else list(code))
