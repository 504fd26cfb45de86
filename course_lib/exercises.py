"""Exercise notebooks: the format, and the generator that writes ``exercises/`` from ``solutions/``.

``solutions/NN_name.ipynb`` is the single source (format in ``exercises/README.md``). Each cell
carries ``metadata["course"]`` with a ``role``:

- ``setup``: trusted code run before everything (the Colab cell ``colab-setup``, imports);
- ``answer``: the student's cell; the solution sits between ``### BEGIN SOLUTION`` and
  ``### END SOLUTION`` and is replaced by a ``NotImplementedError("TODO ...")`` stub;
  ``exercise``, ``points``, ``forbid`` (attribute names the answer may not use) and ``wrong``
  (known-wrong answers with the checks they must fail);
- ``check``: trusted code calling ``course_lib.checks``; ``checks`` (name + hint of each check)
  is synced from the cell's source by the generator;
- ``text``: markdown.

Commands::

    python -m course_lib.exercises            # sync check metadata, write exercises/*.ipynb
    python -m course_lib.exercises --check    # exit 1 if anything is stale or malformed
    python -m course_lib.exercises --execute  # re-execute solutions/ (refresh outputs), then write
"""
from __future__ import annotations

import argparse
import ast
import copy
import json
import re
import sys
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

__all__ = [
    "ROOT", "SOLUTIONS", "EXERCISES", "NotebookSpec", "Exercise", "Check", "load_spec",
    "make_exercise", "make_submission", "stub_answer", "wrong_answer_source", "sync_checks", "validate",
    "new_notebook", "setup_cell", "text_cell", "answer_cell", "check_cell", "colab_setup_source",
]

ROOT = Path(__file__).resolve().parents[1]
SOLUTIONS = ROOT / "solutions"
EXERCISES = ROOT / "exercises"

BEGIN, END = "### BEGIN SOLUTION", "### END SOLUTION"
MARKER = "# EXERCISE {name}:"  # first line of every answer cell; the grader also finds answers by it
CHECK_FUNCS = ("check_close", "check_equal", "check_true", "check_raises")
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
def checks_in_source(source: str, cell_id: str) -> list[Check]:
    """(name, hint) of every check_* call in a check cell, from its AST. Names and hints must be
    string literals so the grader knows every check without running anything."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in CHECK_FUNCS:
            name = node.args[0] if node.args else None
            hint = next((k.value for k in node.keywords if k.arg == "hint"), None)
            if not (isinstance(name, ast.Constant) and isinstance(name.value, str)):
                raise ValueError(f"cell {cell_id}: every {node.func.id}(...) needs a string-literal name as its first argument.")
            if not (isinstance(hint, ast.Constant) and isinstance(hint.value, str) and hint.value.strip()):
                raise ValueError(f"cell {cell_id}: check {name.value!r} needs a string-literal hint=... (hints are required).")
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
            exercises[name] = Exercise(name, float(m.get("points", 1)), cid, [], [], list(m.get("forbid", [])),
                                       list(m.get("wrong", [])), last_trusted)
        elif r == "check":
            ex = exercises.get(m.get("exercise"))
            if ex is None:
                raise ValueError(f"check cell {cid} names exercise {m.get('exercise')!r}, which has no answer cell before it.")
            ex.check_ids.append(cid)
            ex.checks.extend(checks_in_source(cell.source, cid))
            trusted.append(cid)
            last_trusted = cid
        else:
            raise ValueError(f"code cell {cid} has no course role (setup, answer or check) in its metadata.")
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
            regions.append((begin, i, lines[begin][: len(lines[begin]) - len(lines[begin].lstrip())]))
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
        new = textwrap.indent(textwrap.dedent(body).strip("\n"), indent, lambda l: True).split("\n")
        lines[b:e + 1] = new
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


def solution_code(source: str) -> str:
    return source


# --------------------------------------------------------------------------- generator
def sync_checks(nb) -> bool:
    """Write each check cell's ``checks`` metadata from its source; True if anything changed."""
    changed = False
    for cell in nb.cells:
        if cell.cell_type == "code" and role(cell) == "check":
            want = [{"name": c.name, "hint": c.hint} for c in checks_in_source(cell.source, cell.id)]
            if cell.metadata["course"].get("checks") != want:
                cell.metadata["course"]["checks"] = want
                changed = True
    return changed


def make_exercise(nb):
    """The student notebook generated from a solution notebook (no outputs, stubs, locks)."""
    ex = nbformat.v4.new_notebook()
    ex.metadata = copy.deepcopy(nb.metadata)
    ex.nbformat, ex.nbformat_minor = 4, 5
    for cell in nb.cells:
        m = meta(cell)
        if cell.cell_type == "markdown":
            new = nbformat.v4.new_markdown_cell(cell.source)
            new.metadata = {"course": {"role": "text"}}
        else:
            r = m["role"]
            if r == "answer":
                new = nbformat.v4.new_code_cell(stub_answer(cell.source, m["exercise"]))
                new.metadata = {"course": {"role": "answer", "exercise": m["exercise"], "points": m.get("points", 1)}}
            else:
                new = nbformat.v4.new_code_cell(cell.source)
                new.metadata = {"editable": False, "deletable": False, "course": {"role": r}}
                if r == "check":
                    new.metadata["course"]["exercise"] = m["exercise"]
            if cell.metadata.get("tags"):
                new.metadata["tags"] = list(cell.metadata["tags"])
        new.id = cell.id
        ex.cells.append(new)
    return ex


def make_submission(sol, choose: dict | None = None):
    """An exercise notebook as a student would save it, with chosen answers (for tests and for
    trying a grader change). ``choose`` maps an exercise name to ``"solution"``, an int (index of
    a known-wrong answer in the metadata), ``{"code": "..."}`` (the whole answer cell), or None
    (the untouched stub, the default)."""
    nb = make_exercise(sol)
    spec = load_spec(sol)
    sol_src = {meta(c)["exercise"]: c.source for c in sol.cells if role(c) == "answer"}
    for cell in nb.cells:
        if role(cell) != "answer":
            continue
        name = meta(cell)["exercise"]
        ch = (choose or {}).get(name)
        if ch == "solution":
            cell.source = sol_src[name]
        elif isinstance(ch, int):
            cell.source = wrong_answer_source(sol_src[name], spec.exercise(name).wrong[ch])
        elif isinstance(ch, dict):
            cell.source = ch["code"]
    return nb


def dumps(nb) -> str:
    return nbformat.writes(nb) + "\n" if not nbformat.writes(nb).endswith("\n") else nbformat.writes(nb)


def validate(nb, stem: str) -> list[str]:
    """Authoring problems in a solution notebook (empty list: fine)."""
    problems = []
    try:
        spec = load_spec(nb, stem)
    except (ValueError, KeyError) as exc:
        return [f"{stem}: {exc}"]
    if nb.metadata.get("course", {}).get("notebook") != stem:
        problems.append(f"{stem}: notebook metadata course.notebook must be {stem!r}.")
    first = next((c for c in nb.cells if c.cell_type == "code"), None)
    if first is None or first.id != "colab-setup" or "remove-cell" not in first.metadata.get("tags", []):
        problems.append(f"{stem}: the first code cell must be the Colab set-up cell (id colab-setup, tag remove-cell).")
    ids = [c.get("id") for c in nb.cells]
    if len(set(ids)) != len(ids) or not all(isinstance(i, str) and _ID_RE.match(i) for i in ids):
        problems.append(f"{stem}: cell ids must be unique, lower-case, readable (a-z, 0-9, -).")
    for cell in nb.cells:
        if "raises-exception" in cell.metadata.get("tags", []):
            problems.append(f"{stem}: cell {cell.id}: do not use the raises-exception tag (nbval and Jupyter Book both act on it).")
        if cell.cell_type == "code" and role(cell) in ("setup", "check") and cell.outputs and cell.execution_count is None:
            problems.append(f"{stem}: cell {cell.id} has outputs but no execution count (nbval would not compare it).")
        if cell.cell_type == "code" and role(cell) == "check":
            if cell.execution_count is None:
                problems.append(f"{stem}: check cell {cell.id} is not executed; run `python -m course_lib.exercises --execute`.")
            names = [c.name for c in checks_in_source(cell.source, cell.id)]
            text = "".join(o.get("text", "") for o in cell.outputs if o.get("output_type") == "stream")
            if text.splitlines() != [f"[PASS] {n}" for n in names]:
                problems.append(f"{stem}: check cell {cell.id}: stored output is not exactly one [PASS] line per check (re-execute).")
    names = [ex.name for ex in spec.exercises]
    if len(set(names)) != len(names):
        problems.append(f"{stem}: exercise names must be unique.")
    for ex in spec.exercises:
        where = f"{stem}: exercise {ex.name}"
        if ex.answer_id != f"{slug(ex.name)}-answer":
            problems.append(f"{where}: answer cell id must be {slug(ex.name)}-answer.")
        for i, cid in enumerate(ex.check_ids, 1):
            if cid != f"{slug(ex.name)}-check-{i}":
                problems.append(f"{where}: check cell ids must be {slug(ex.name)}-check-1, -2, ...; got {cid}.")
        if len(ex.checks) < 2:
            problems.append(f"{where}: needs at least 2 checks.")
        cnames = [c.name for c in ex.checks]
        if len(set(cnames)) != len(cnames):
            problems.append(f"{where}: check names must be unique.")
        if not ex.wrong:
            problems.append(f"{where}: needs at least one known-wrong answer in metadata 'wrong'.")
        for w in ex.wrong:
            fails = cnames if w.get("fails") == "all" else w.get("fails", [])
            if not fails or any(f not in cnames for f in fails) or not w.get("why") or not w.get("code"):
                problems.append(f"{where}: wrong answer {w.get('why')!r} needs why, code and fails (check names or 'all').")
        answer = next(c for c in nb.cells if c.get("id") == ex.answer_id)
        try:
            for w in ex.wrong:
                wrong_answer_source(answer.source, w)
        except ValueError as exc:
            problems.append(f"{where}: {exc}")
        if not answer.source.startswith(MARKER.format(name=ex.name)):
            problems.append(f"{where}: the answer cell must start with {MARKER.format(name=ex.name)!r}.")
        if not any(w.get("fails") == "all" for w in ex.wrong):
            problems.append(f"{where}: needs a trivial-stub wrong answer (identity/zeros/input) with fails: 'all'.")
    return problems


def execute_solution(path: Path, timeout: int = 300) -> None:
    """Re-execute a solution notebook in place (fresh kernel, one thread for stable output)."""
    import os

    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    env_threads = os.environ.get("OMP_NUM_THREADS")
    os.environ["OMP_NUM_THREADS"] = "1"
    try:
        NotebookClient(nb, timeout=timeout, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}).execute()
    finally:
        if env_threads is None:
            os.environ.pop("OMP_NUM_THREADS", None)
        else:
            os.environ["OMP_NUM_THREADS"] = env_threads
    for cell in nb.cells:  # answer cells: keep the source only (their output is never compared)
        if cell.cell_type == "code" and role(cell) == "answer":
            cell.outputs = []
    nbformat.write(nb, path)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m course_lib.exercises", description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="write nothing; exit 1 if exercises/ or metadata are stale")
    ap.add_argument("--execute", action="store_true", help="re-execute the solution notebooks first")
    ap.add_argument("names", nargs="*", help="notebook stems (default: every solutions/*.ipynb)")
    args = ap.parse_args(argv)
    paths = sorted(SOLUTIONS.glob("*.ipynb")) if not args.names else [SOLUTIONS / f"{n}.ipynb" for n in args.names]
    problems: list[str] = []
    for path in paths:
        stem = path.stem
        if args.execute and not args.check:
            execute_solution(path)
        nb = nbformat.read(path, as_version=4)
        if sync_checks(nb):
            if args.check:
                problems.append(f"{stem}: check metadata out of date; run python -m course_lib.exercises")
            else:
                nbformat.write(nb, path)
        problems += validate(nb, stem)
        out = EXERCISES / path.name
        text = dumps(make_exercise(nb))
        if args.check:
            if not out.exists() or out.read_text() != text:
                problems.append(f"{stem}: exercises/{path.name} differs from regenerating it; run python -m course_lib.exercises")
        else:
            out.parent.mkdir(exist_ok=True)
            out.write_text(text)
            print(f"wrote {out.relative_to(ROOT)}")
    for p in problems:
        print(p, file=sys.stderr)
    return 1 if problems else 0


# --------------------------------------------------------------------------- authoring helpers
def colab_setup_source() -> str:
    """The Colab set-up cell, copied from the first code cell of Chapter 1."""
    import jupytext

    nb = jupytext.read(ROOT / "book" / "01_why_transformers.md")
    return next(c for c in nb.cells if c.cell_type == "code").source


def new_notebook(stem: str, title: str):
    nb = nbformat.v4.new_notebook()
    nb.metadata = {
        "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
        "language_info": {"name": "python"},
        "course": {"notebook": stem, "title": title},
    }
    return nb


def _cell(kind, source, cid, course, tags=None):
    c = nbformat.v4.new_code_cell(source) if kind == "code" else nbformat.v4.new_markdown_cell(source)
    c.id = cid
    c.metadata = {"course": course}
    if tags:
        c.metadata["tags"] = tags
    return c


def setup_cell(source: str, cid: str, tags=None):
    return _cell("code", source.strip("\n"), cid, {"role": "setup"}, tags)


def text_cell(source: str, cid: str):
    return _cell("markdown", textwrap.dedent(source).strip("\n"), cid, {"role": "text"})


def answer_cell(exercise: str, source: str, points: float, wrong: list[dict], forbid=()):
    src = MARKER.format(name=exercise) + " your answer goes in this cell (add cells below it if you like).\n"
    src += textwrap.dedent(source).strip("\n")
    course = {"role": "answer", "exercise": exercise, "points": points, "forbid": list(forbid),
              "wrong": [{**w, "code": _dedent(w["code"])} for w in wrong]}
    return _cell("code", src, f"{slug(exercise)}-answer", course)


def _dedent(code):
    if isinstance(code, str):
        return textwrap.dedent(code).strip("\n")
    return [textwrap.dedent(c).strip("\n") for c in code]


def check_cell(exercise: str, n: int, source: str):
    return _cell("code", textwrap.dedent(source).strip("\n"), f"{slug(exercise)}-check-{n}",
                 {"role": "check", "exercise": exercise})


if __name__ == "__main__":
    sys.exit(main())
