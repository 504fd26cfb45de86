"""The generator that writes ``exercises/`` from ``solutions/`` (a repository tool).

``solutions/NN_name.ipynb`` is the single source; the format is ``course_lib.grading.spec``
(documented in ``exercises/README.md``). Commands::

    python -m tools.exercises            # sync check metadata, write exercises/*.ipynb
    python -m tools.exercises --check    # exit 1 if anything is stale or malformed
    python -m tools.exercises --execute  # re-execute solutions/ (refresh outputs), then write
    python -m tools.exercises --kinds    # per notebook: exercises, points, thinking share

Authoring a new notebook: build it with ``new_notebook``, ``setup_cell``, ``text_cell``,
``answer_cell`` and ``check_cell`` (the Colab set-up cell comes from ``tools.colab``), save it
as ``solutions/NN_name.ipynb``, then run ``python -m tools.exercises --execute NN_name``.
"""

from __future__ import annotations

import argparse
import copy
import json
import re
import sys
import textwrap
from collections import Counter
from pathlib import Path

import nbformat

from course_lib.grading.spec import (
    KINDS,
    MARKER,
    THINKING_KINDS,
    checks_in_source,
    load_spec,
    meta,
    role,
    slug,
    stub_answer,
    wrong_answer_source,
)
from course_lib.grading.verdict import MEASURED, pass_lines

from . import ROOT

__all__ = [
    "SOLUTIONS",
    "EXERCISES",
    "make_exercise",
    "kinds_table",
    "exercise_kinds",
    "make_submission",
    "sync_checks",
    "validate",
    "new_notebook",
    "setup_cell",
    "text_cell",
    "answer_cell",
    "check_cell",
    "colab_setup_cell",
]

SOLUTIONS = ROOT / "solutions"
EXERCISES = ROOT / "exercises"
_ID_RE = re.compile(r"^[a-z0-9][a-z0-9-]{0,63}$")


# --------------------------------------------------------------------------- generator
def sync_checks(nb) -> bool:
    """Write each check cell's ``checks`` metadata from its source; True if anything changed."""
    changed = False
    for cell in nb.cells:
        if cell.cell_type == "code" and role(cell) == "check":
            want = [
                {"name": c.name, "hint": c.hint} for c in checks_in_source(cell.source, cell.id)
            ]
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
                new.metadata = {
                    "course": {
                        "role": "answer",
                        "exercise": m["exercise"],
                        "points": m.get("points", 1),
                        "kind": m.get("kind"),
                        **({"predict": True} if m.get("predict") is True else {}),
                    }
                }
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


def make_submission(sol, choose: dict | None = None, ran_in_order: bool = True):
    """An exercise notebook as a student would save it, with chosen answers (for tests and for
    trying a grader change). ``choose`` maps an exercise name to ``"solution"``, an int (index of
    a known-wrong answer in the metadata), ``{"code": "..."}`` (the whole answer cell), or None
    (the untouched stub, the default). ``ran_in_order``: the code cells carry execution counts
    1, 2, ... in notebook order, as after Run All (outputs are not written)."""
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
    if ran_in_order:  # as after Run All: the predict-then-run checks read this order
        for n, cell in enumerate((c for c in nb.cells if c.cell_type == "code"), 1):
            cell.execution_count = n
    return nb


def dumps(nb) -> str:
    return (
        nbformat.writes(nb) + "\n"
        if not nbformat.writes(nb).endswith("\n")
        else nbformat.writes(nb)
    )


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
    if (
        first is None
        or first.id != "colab-setup"
        or "remove-cell" not in first.metadata.get("tags", [])
    ):
        problems.append(
            f"{stem}: the first code cell must be the Colab set-up cell (id colab-setup, tag "
            "remove-cell)."
        )
    ids = [c.get("id") for c in nb.cells]
    if len(set(ids)) != len(ids) or not all(isinstance(i, str) and _ID_RE.match(i) for i in ids):
        problems.append(f"{stem}: cell ids must be unique, lower-case, readable (a-z, 0-9, -).")
    for cell in nb.cells:
        if "raises-exception" in cell.metadata.get("tags", []):
            problems.append(
                f"{stem}: cell {cell.id}: do not use the raises-exception tag (nbval and Jupyter "
                "Book both act on it)."
            )
        if (
            cell.cell_type == "code"
            and role(cell) in ("setup", "check")
            and cell.outputs
            and cell.execution_count is None
        ):
            problems.append(
                f"{stem}: cell {cell.id} has outputs but no execution count (nbval would not "
                "compare it)."
            )
        if cell.cell_type == "code" and role(cell) == "check":
            if cell.execution_count is None:
                problems.append(
                    f"{stem}: check cell {cell.id} is not executed; run `python -m tools.exercises "
                    "--execute`."
                )
            names = [c.name for c in checks_in_source(cell.source, cell.id)]
            text = "".join(
                o.get("text", "") for o in cell.outputs if o.get("output_type") == "stream"
            )
            lines = [ln for ln in text.splitlines() if not ln.startswith(MEASURED)]
            if lines != pass_lines(names):
                problems.append(
                    f"{stem}: check cell {cell.id}: stored output is not exactly one [PASS] line "
                    "per check (re-execute)."
                )
    names = [ex.name for ex in spec.exercises]
    if len(set(names)) != len(names):
        problems.append(f"{stem}: exercise names must be unique.")
    for ex in spec.exercises:
        where = f"{stem}: exercise {ex.name}"
        if ex.answer_id != f"{slug(ex.name)}-answer":
            problems.append(f"{where}: answer cell id must be {slug(ex.name)}-answer.")
        for i, cid in enumerate(ex.check_ids, 1):
            if cid != f"{slug(ex.name)}-check-{i}":
                problems.append(
                    f"{where}: check cell ids must be {slug(ex.name)}-check-1, -2, ...; got {cid}."
                )
        if len(ex.checks) < 2:
            problems.append(f"{where}: needs at least 2 checks.")
        cnames = [c.name for c in ex.checks]
        if len(set(cnames)) != len(cnames):
            problems.append(f"{where}: check names must be unique.")
        if not ex.wrong:
            problems.append(f"{where}: needs at least one known-wrong answer in metadata 'wrong'.")
        for w in ex.wrong:
            fails = cnames if w.get("fails") == "all" else w.get("fails", [])
            if (
                not fails
                or any(f not in cnames for f in fails)
                or not w.get("why")
                or not w.get("code")
            ):
                problems.append(
                    f"{where}: wrong answer {w.get('why')!r} needs why, code and fails (check "
                    "names or 'all')."
                )
        answer = next(c for c in nb.cells if c.get("id") == ex.answer_id)
        try:
            for w in ex.wrong:
                wrong_answer_source(answer.source, w)
        except ValueError as exc:
            problems.append(f"{where}: {exc}")
        if not answer.source.startswith(MARKER.format(name=ex.name)):
            problems.append(
                f"{where}: the answer cell must start with {MARKER.format(name=ex.name)!r}."
            )
        if not any(w.get("fails") == "all" for w in ex.wrong):
            problems.append(
                f"{where}: needs a trivial-stub wrong answer (identity/zeros/input) with fails: "
                "'all'."
            )
    return problems


def execute_solution(path: Path, timeout: int = 300) -> None:
    """Re-execute a solution notebook in place (fresh kernel, one thread for stable output)."""
    import os

    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    env_threads = os.environ.get("OMP_NUM_THREADS")
    os.environ["OMP_NUM_THREADS"] = "1"
    try:
        NotebookClient(
            nb,
            timeout=timeout,
            kernel_name="python3",
            resources={"metadata": {"path": str(path.parent)}},
        ).execute()
    finally:
        if env_threads is None:
            os.environ.pop("OMP_NUM_THREADS", None)
        else:
            os.environ["OMP_NUM_THREADS"] = env_threads
    for cell in nb.cells:  # answer cells: keep the source only (their output is never compared)
        if cell.cell_type == "code" and role(cell) == "answer":
            cell.outputs = []
    nbformat.write(nb, path)


def exercise_kinds(root: Path) -> dict[str, list[tuple[str, str, float]]]:
    """(name, kind, points) of every exercise, per solution notebook, from the answer cells'
    metadata (``kind`` is validated by ``course_lib.grading.spec.load_spec``)."""
    out = {}
    for sol in sorted((root / "solutions").glob("*.ipynb")):
        cells = json.loads(sol.read_text(encoding="utf-8"))["cells"]
        out[sol.stem] = [
            (m["exercise"], m.get("kind", "?"), float(m.get("points", 1)))
            for m in (c["metadata"].get("course", {}) for c in cells)
            if m.get("role") == "answer"
        ]
    return out


def kinds_table(root: Path = ROOT) -> str:
    """Per solution notebook: its exercises, their points, and the points and share of the kinds
    that make the student think (``spec.THINKING_KINDS``), with the total; plain text."""
    rows = [("notebook", "exercises", "points", "thinking", "share", "kinds")]
    count, total, think_total = 0, 0.0, 0.0
    for stem, answers in exercise_kinds(Path(root)).items():
        points = sum(p for *_, p in answers)
        think = sum(p for _, k, p in answers if k in THINKING_KINDS)
        n_kind = Counter(k for _, k, _ in answers)
        kinds = ", ".join(f"{k} {n_kind[k]}" for k in KINDS if n_kind[k])
        count, total, think_total = count + len(answers), total + points, think_total + think
        rows.append(
            (
                stem,
                len(answers),
                f"{points:g}",
                f"{think:g} of {points:g}",
                f"{100 * think / points:.0f} %",
                kinds,
            )
        )
    rows.append(
        (
            "all",
            count,
            f"{total:g}",
            f"{think_total:g} of {total:g}",
            f"{100 * think_total / total:.0f} %",
            "",
        )
    )
    widths = [max(len(str(r[i])) for r in rows) for i in range(len(rows[0]))]
    rows.insert(1, tuple("-" * w for w in widths))
    return "\n".join(
        "| " + " | ".join(str(v).ljust(w) for v, w in zip(r, widths)) + " |" for r in rows
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m tools.exercises", description=__doc__.split("\n\n")[0]
    )
    ap.add_argument(
        "--check",
        action="store_true",
        help="write nothing; exit 1 if exercises/ or metadata are stale",
    )
    ap.add_argument(
        "--execute", action="store_true", help="re-execute the solution notebooks first"
    )
    ap.add_argument(
        "--kinds",
        action="store_true",
        help="print each notebook's exercises, points and thinking share, and nothing else",
    )
    ap.add_argument("names", nargs="*", help="notebook stems (default: every solutions/*.ipynb)")
    args = ap.parse_args(argv)
    if args.kinds:
        print(kinds_table())
        return 0
    paths = (
        sorted(SOLUTIONS.glob("*.ipynb"))
        if not args.names
        else [SOLUTIONS / f"{n}.ipynb" for n in args.names]
    )
    problems: list[str] = []
    for path in paths:
        stem = path.stem
        if args.execute and not args.check:
            execute_solution(path)
        nb = nbformat.read(path, as_version=4)
        if sync_checks(nb):
            if args.check:
                problems.append(
                    f"{stem}: check metadata out of date; run python -m tools.exercises"
                )
            else:
                nbformat.write(nb, path)
        problems += validate(nb, stem)
        out = EXERCISES / path.name
        text = dumps(make_exercise(nb))
        if args.check:
            if not out.exists() or out.read_text() != text:
                problems.append(
                    f"{stem}: exercises/{path.name} differs from regenerating it; run python -m "
                    "tools.exercises"
                )
        else:
            out.parent.mkdir(exist_ok=True)
            out.write_text(text)
            print(f"wrote {out.relative_to(ROOT)}")
    for p in problems:
        print(p, file=sys.stderr)
    return 1 if problems else 0


# --------------------------------------------------------------------------- authoring helpers
def colab_setup_cell():
    """The Colab set-up cell (id ``colab-setup``, tag ``remove-cell``), as ``tools.colab`` writes
    it."""
    from .colab import SETUP_CELL_ID, SETUP_TAG, setup_cell_source

    return setup_cell(setup_cell_source(), SETUP_CELL_ID, tags=[SETUP_TAG])


def new_notebook(stem: str, title: str):
    nb = nbformat.v4.new_notebook()
    nb.metadata = {
        "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
        "language_info": {"name": "python"},
        "course": {"notebook": stem, "title": title},
    }
    return nb


def _cell(kind, source, cid, course, tags=None):
    c = (
        nbformat.v4.new_code_cell(source)
        if kind == "code"
        else nbformat.v4.new_markdown_cell(source)
    )
    c.id = cid
    c.metadata = {"course": course}
    if tags:
        c.metadata["tags"] = tags
    return c


def setup_cell(source: str, cid: str, tags=None):
    return _cell("code", source.strip("\n"), cid, {"role": "setup"}, tags)


def text_cell(source: str, cid: str):
    return _cell("markdown", textwrap.dedent(source).strip("\n"), cid, {"role": "text"})


def answer_cell(
    exercise: str, source: str, points: float, wrong: list[dict], forbid=(), *, kind: str
):
    """An answer cell; ``kind`` is one of ``course_lib.grading.spec.KINDS`` (``"predict"``
    also sets ``predict: true``)."""
    src = (
        MARKER.format(name=exercise)
        + " your answer goes in this cell (add cells below it if you like).\n"
    )
    src += textwrap.dedent(source).strip("\n")
    course = {
        "role": "answer",
        "exercise": exercise,
        "points": points,
        "kind": kind,
        "forbid": list(forbid),
        "wrong": [{**w, "code": _dedent(w["code"])} for w in wrong],
    }
    if kind == "predict":
        course["predict"] = True
    return _cell("code", src, f"{slug(exercise)}-answer", course)


def _dedent(code):
    if isinstance(code, str):
        return textwrap.dedent(code).strip("\n")
    return [textwrap.dedent(c).strip("\n") for c in code]


def check_cell(exercise: str, n: int, source: str):
    return _cell(
        "code",
        textwrap.dedent(source).strip("\n"),
        f"{slug(exercise)}-check-{n}",
        {"role": "check", "exercise": exercise},
    )


if __name__ == "__main__":
    sys.exit(main())
