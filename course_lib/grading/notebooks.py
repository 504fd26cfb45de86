"""Reading: the submission (any file a student may hand in), the solution it is graded against,
and the student's answer code in it (``extract_answers``)."""
from __future__ import annotations

import json
import re
from pathlib import Path

import nbformat

from .spec import MARKER, NotebookSpec

__all__ = ["Unreadable", "GraderError", "read_notebook", "find_solutions_dir", "find_solution", "extract_answers"]


class Unreadable(Exception):
    """The submission is not a readable notebook (exit code 2)."""


class GraderError(Exception):
    """Something went wrong on the grader's side (exit code 3)."""


# --------------------------------------------------------------------------- reading
def read_notebook(path: Path):
    path = Path(path)
    if not path.is_file():
        raise Unreadable(f"{path}: no such file.")
    raw = path.read_bytes()
    if not raw.strip():
        raise Unreadable(f"{path}: the file is empty. Save the notebook again in Jupyter (File > Save) and re-submit.")
    try:
        text = raw.decode("utf-8")
        data = json.loads(text)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise Unreadable(
            f"{path}: not valid notebook JSON ({exc}). The file is probably truncated or was edited "
            "outside Jupyter; save it again from Jupyter, or start again from a fresh copy of the exercise notebook."
        ) from None
    if not isinstance(data, dict) or "cells" not in data:
        raise Unreadable(f"{path}: valid JSON but not a Jupyter notebook (no 'cells'); submit the .ipynb file itself.")
    try:
        nb = nbformat.reads(text, as_version=4)
    except Exception as exc:  # nbformat raises several types for malformed notebooks
        raise Unreadable(f"{path}: not a valid Jupyter notebook ({type(exc).__name__}: {exc}).") from None
    for cell in nb.cells:
        if not isinstance(cell.get("source", ""), str) or cell.get("cell_type") not in ("code", "markdown", "raw"):
            raise Unreadable(f"{path}: a cell is malformed (bad source or cell_type); save it again from Jupyter.")
    return nb


def find_solutions_dir(near: Path) -> Path:
    """The course's ``solutions/`` folder: in the current folder, or in a folder above the
    notebook (a clone of the course repository). ``find_solution`` explains when there is none."""
    for base in (Path.cwd(), *Path(near).resolve().parents):
        if (base / "solutions").is_dir():
            return base / "solutions"
    return Path.cwd() / "solutions"


def find_solution(sub, path: Path, solutions_dir: Path) -> Path:
    if not Path(solutions_dir).is_dir():
        raise GraderError(
            f"the solutions folder {solutions_dir} does not exist: grade from a clone of the course "
            "repository (pip-installed course_lib has no solutions), or pass --solutions DIR."
        )
    stem = sub.metadata.get("course", {}).get("notebook")
    if stem and (solutions_dir / f"{stem}.ipynb").is_file():
        return solutions_dir / f"{stem}.ipynb"
    for sol in sorted(solutions_dir.glob("*.ipynb")):
        if sol.stem in Path(path).name:
            return sol
    raise Unreadable(
        f"{path}: cannot tell which exercise notebook this is (no course.notebook metadata and no "
        f"solution stem such as 04_attention in the file name); pass --solution PATH."
    )


# --------------------------------------------------------------------------- answers
_NBVAL_MARKER = re.compile(r"^(\s*)#+\s*(NBVAL_[A-Z_]+|PYTEST_VALIDATE_IGNORE_OUTPUT)\s*$", re.M)


def _neutralise_markers(code: str) -> str:
    """Comment markers such as ``# NBVAL_SKIP`` would change how nbval treats the cell."""
    return _NBVAL_MARKER.sub(r"\1# (nbval marker \2 ignored by the grader)", code)


def extract_answers(sub, spec: NotebookSpec, sol) -> tuple[dict[str, list[str]], list[str]]:
    """{exercise: [code of each student cell]}: every code cell between the trusted cells around
    an answer (so added helper cells and split cells count), plus notes for the report."""
    trusted = set(spec.trusted_ids)
    pos = {cid: i for i, cid in enumerate(spec.trusted_ids)}
    after: dict[str, str | None] = {}  # trusted id -> the exercise whose answer comes next
    for cid in spec.trusted_ids:
        after[cid] = next((ex.name for ex in spec.exercises
                           if ex.prev_anchor is not None and pos[ex.prev_anchor] >= pos[cid]), None)
    answer_ids = {ex.answer_id: ex.name for ex in spec.exercises}
    markers = {MARKER.format(name=ex.name): ex.name for ex in spec.exercises}
    answers: dict[str, list[str]] = {ex.name: [] for ex in spec.exercises}
    notes: list[str] = []
    by_source = {c.source.strip(): c.id for c in sol.cells if c.cell_type == "code" and c.id in trusted}
    current = None
    for cell in sub.cells:
        cid, src = cell.get("id"), cell.get("source", "")
        named = answer_ids.get(cid) or next((n for m, n in markers.items() if src.lstrip().startswith(m)), None)
        if cell.cell_type == "code" and not named:
            # a trusted cell is known by its id, or by its source (a tool that drops cell ids, a copy)
            tid = cid if cid in trusted else by_source.get(src.strip())
            if tid is not None:
                current = after[tid]
                continue
        if cell.cell_type != "code":
            if named:
                notes.append(f"{named}: the answer cell is a {cell.cell_type} cell, so its code was not run; "
                             "change it back to a code cell (Cell > Cell Type > Code).")
            continue
        if named:
            current = named
        if current is None:
            if src.strip():
                notes.append("code outside the exercises (before the first answer or after the last check) was ignored.")
            continue
        if src.strip():
            answers[current].append(_neutralise_markers(src))
    for ex in spec.exercises:
        if not answers[ex.name]:
            notes.append(f"{ex.name}: no answer code found (was the answer cell deleted or turned into markdown?).")
    return answers, notes
