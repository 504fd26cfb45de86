"""The authoring helpers of tools/exercises.py build a notebook that the format accepts: the
generator's validate() finds nothing wrong once the checks have run, and the student version
has the stub instead of the solution."""

from __future__ import annotations

import nbformat

from course_lib.grading.spec import load_spec
from tools.colab import SETUP_CELL_ID, setup_cell_source
from tools.exercises import (
    answer_cell,
    check_cell,
    colab_setup_cell,
    make_exercise,
    new_notebook,
    setup_cell,
    text_cell,
    validate,
)


def _notebook():
    nb = new_notebook("99_demo", "Demo")
    nb.cells = [
        text_cell("# Demo\nDouble a tensor.", "intro"),
        colab_setup_cell(),
        setup_cell(
            "import torch\nfrom course_lib.grading.checks import check_close, check_equal, randn",
            "imports",
        ),
        answer_cell(
            "double",
            """
            def double(x):
                ### BEGIN SOLUTION
                return 2 * x
                ### END SOLUTION
            """,
            points=1,
            kind="implement",
            wrong=[
                {"why": "trivial stub: returns the input", "code": "return x", "fails": "all"},
                {"why": "adds one", "code": "return x + 1", "fails": ["double: values"]},
            ],
        ),
        check_cell(
            "double",
            1,
            """
            x = randn(3, seed=0)
            check_close("double: values", lambda: double(x), 2 * x, hint="multiply by two")
            check_equal("double: shape", lambda: tuple(double(x).shape), (3,), hint="keep shape")
            """,
        ),
    ]
    return nb


def test_helpers_build_a_valid_notebook_once_its_checks_have_run():
    nb = _notebook()
    first = next(c for c in nb.cells if c.cell_type == "code")
    assert first.id == SETUP_CELL_ID and first.source == setup_cell_source()
    spec = load_spec(nb, "99_demo")
    (ex,) = spec.exercises
    assert ex.name == "double" and [c.name for c in ex.checks] == [
        "double: values",
        "double: shape",
    ]
    problems = validate(nb, "99_demo")
    assert problems and all("not executed" in p or "stored output" in p for p in problems), problems
    for cell in nb.cells:  # what `python -m tools.exercises --execute` stores
        if cell.cell_type == "code":
            cell.execution_count = 1
        if cell.get("id") == "double-check-1":
            cell.outputs = [
                nbformat.v4.new_output(
                    "stream", name="stdout", text="[PASS] double: values\n[PASS] double: shape\n"
                )
            ]
    assert validate(nb, "99_demo") == []


def test_student_version_has_the_stub_and_no_solution():
    student = make_exercise(_notebook())
    answer = next(c for c in student.cells if c.get("id") == "double-answer")
    assert "return 2 * x" not in answer.source
    assert 'raise NotImplementedError("TODO double' in answer.source
    assert answer.source.startswith("# EXERCISE double:")


def test_validate_reports_a_missing_trivial_stub():
    nb = _notebook()
    cell = next(c for c in nb.cells if c.get("id") == "double-answer")
    cell.metadata["course"]["wrong"] = cell.metadata["course"]["wrong"][1:]
    assert any("trivial-stub" in p for p in validate(nb, "99_demo"))
