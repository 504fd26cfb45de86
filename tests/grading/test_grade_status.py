"""The grader's statuses have one home, ``course_lib.grading.status.Status`` (issue 37).

Fast: no module of ``course_lib/grading`` spells a status as a bare string (a typo there would
be a status no report, gradebook or count knows); a ``Status`` goes through JSON, CSV and
f-strings as its value, and a value read back compares equal to it.
"""

from __future__ import annotations

import ast
import csv
import io
import json
from pathlib import Path

import pytest

from course_lib.grading import status as status_mod
from course_lib.grading.status import EXERCISE_STATUSES, SUBMISSION_STATUSES, Status

GRADING = Path(status_mod.__file__).parent
VALUES = {s.value for s in Status}


def _docstrings(tree: ast.AST) -> set[int]:
    """ids of the string constants that are docstrings (a body's first expression)."""
    found = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr):
            value = body[0].value
            if isinstance(value, ast.Constant) and isinstance(value.value, str):
                found.add(id(value))
    return found


def bare_statuses(source: str) -> list[tuple[int, str]]:
    """(line, text) of every string constant in ``source`` that is a status's value, docstrings
    aside (f-strings and dictionary keys included)."""
    tree = ast.parse(source)
    docs = _docstrings(tree)
    return [
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and node.value in VALUES
        and id(node) not in docs
    ]


@pytest.mark.parametrize(
    "path",
    sorted(p for p in GRADING.glob("*.py") if p.name != "status.py"),
    ids=lambda p: p.name,
)
def test_no_module_of_the_grader_spells_a_status_as_a_bare_string(path):
    found = bare_statuses(path.read_text(encoding="utf-8"))
    assert not found, (
        f"{path.name}: status strings {found}: use course_lib.grading.status.Status instead"
    )


def test_the_scan_finds_a_bare_status_and_skips_docstrings():
    source = (
        '"""A module: "graded" in its docstring is prose."""\n'
        "def f(r):\n"
        '    """"crashed" here too."""\n'
        "    return r['status'] == 'graded' or f\"{r['grader error']}\"\n"
    )
    assert bare_statuses(source) == [(4, "graded"), (4, "grader error")]


def test_a_status_travels_as_its_value():
    row = {"status": Status.GRADER_ERROR, "n": 1}
    assert json.loads(json.dumps(row))["status"] == "grader error" == Status.GRADER_ERROR
    out = io.StringIO()
    csv.writer(out).writerow([Status.TIMED_OUT])
    assert out.getvalue().strip() == "timed out"
    assert f"{Status.CRASHED}" == "crashed" and str(Status.REJECTED) == "rejected"
    assert Status("unreadable") is Status.UNREADABLE


def test_every_status_is_an_exercises_or_a_submissions():
    assert set(EXERCISE_STATUSES) | set(SUBMISSION_STATUSES) == set(Status)
    assert set(EXERCISE_STATUSES) & set(SUBMISSION_STATUSES) == {Status.GRADED}
