"""What the exercises ask of a student: every exercise carries a ``kind`` (``implement``,
``derive``, ``predict``, ``experiment`` or ``debug``; ``course_lib.grading.spec.KINDS``), a
missing or unknown kind is refused with one clear message, and enough points go to the kinds
that make the student think (every kind but ``implement``): at least 50 % of all points, and
at least 35 % in every exercise notebook. The shares are counted by points, from the solution
notebooks' metadata; a failure names each notebook below its bar and prints the whole table
(``python -m tools.exercises --kinds`` prints it too)."""

from __future__ import annotations

import copy

import nbformat
import pytest

from course_lib.grading.spec import KINDS, THINKING_KINDS, load_spec
from tools.exercises import SOLUTIONS, answer_cell, kinds_table, new_notebook, validate

OVERALL, PER_NOTEBOOK = 0.50, 0.35


def _shares() -> dict[str, tuple[float, float]]:
    """{stem: (points of the thinking kinds, all points)}, from load_spec (which validates)."""
    out = {}
    for path in sorted(SOLUTIONS.glob("*.ipynb")):
        spec = load_spec(nbformat.read(path, as_version=4), path.stem)
        think = sum(ex.points for ex in spec.exercises if ex.kind in THINKING_KINDS)
        out[path.stem] = (think, spec.max_score)
    return out


def test_the_thinking_kinds_are_every_kind_but_implement():
    assert set(KINDS) == {"implement", "derive", "predict", "experiment", "debug"}
    assert THINKING_KINDS == set(KINDS) - {"implement"}


def test_every_exercise_notebook_gives_at_least_35_percent_of_its_points_to_thinking():
    shares = _shares()
    low = {s: t / p for s, (t, p) in shares.items() if t / p < PER_NOTEBOOK}
    assert not low, (
        f"below {PER_NOTEBOOK:.0%} of points on derive/predict/experiment/debug: "
        + ", ".join(f"{s} ({v:.0%})" for s, v in low.items())
        + "\n"
        + kinds_table()
    )


def test_at_least_half_of_all_points_make_the_student_think():
    shares = _shares()
    think, total = sum(t for t, _ in shares.values()), sum(p for _, p in shares.values())
    assert think / total >= OVERALL, (
        f"{think:g} of {total:g} points ({think / total:.0%}) on derive/predict/experiment/debug, "
        f"below {OVERALL:.0%}; the notebooks below {OVERALL:.0%}: "
        + ", ".join(f"{s} ({t / p:.0%})" for s, (t, p) in shares.items() if t / p < OVERALL)
        + "\n"
        + kinds_table()
    )


def test_the_table_counts_what_load_spec_reads():
    shares = _shares()
    rows = {r.split("|")[1].strip(): r for r in kinds_table().splitlines()}
    for stem, (think, points) in shares.items():
        assert f"| {think:g} of {points:g} " in rows[stem], (stem, rows[stem])
    think, total = sum(t for t, _ in shares.values()), sum(p for _, p in shares.values())
    assert f"| {think:g} of {total:g} " in rows["all"], rows["all"]


# --------------------------------------------------------------------------- validation
def _demo(kind="implement", predict=None, drop_kind=False):
    nb = new_notebook("99_demo", "Demo")
    cell = answer_cell(
        "double",
        """
        def double(x):
            ### BEGIN SOLUTION
            return 2 * x
            ### END SOLUTION
        """,
        points=1,
        wrong=[{"why": "trivial stub: returns the input", "code": "return x", "fails": "all"}],
        kind="implement",
    )
    m = cell.metadata["course"]
    m["kind"] = kind
    if predict is not None:
        m["predict"] = predict
    if drop_kind:
        del m["kind"]
    nb.cells = [cell]
    return nb


@pytest.mark.parametrize("kind", KINDS)
def test_every_kind_is_read(kind):
    (ex,) = load_spec(_demo(kind, predict=True if kind == "predict" else None)).exercises
    assert ex.kind == kind and ex.predict == (kind == "predict")
    assert ex.thinking == (kind != "implement")


def test_a_missing_kind_is_refused_naming_the_cell_and_the_kinds():
    with pytest.raises(ValueError) as err:
        load_spec(_demo(drop_kind=True))
    msg = str(err.value)
    assert "double-answer" in msg and "'double'" in msg and "no kind" in msg
    assert all(k in msg for k in KINDS), msg


@pytest.mark.parametrize("bad", ["thinking", "Derive", "", None, 3])
def test_an_unknown_kind_is_refused(bad):
    with pytest.raises(ValueError) as err:
        load_spec(_demo(bad))
    msg = str(err.value)
    assert f"unknown kind {bad!r}" in msg and all(k in msg for k in KINDS), msg


def test_predict_goes_with_kind_predict_and_only_with_it():
    with pytest.raises(ValueError, match="kind 'predict' goes with predict: true"):
        load_spec(_demo("predict"))
    with pytest.raises(ValueError, match="kind 'derive' with predict True"):
        load_spec(_demo("derive", predict=True))


def test_validate_reports_a_missing_kind_as_an_authoring_problem():
    problems = validate(_demo(drop_kind=True), "99_demo")
    assert any("no kind" in p for p in problems), problems


def test_the_generated_exercise_notebooks_carry_the_kind():
    from tools.exercises import make_exercise

    nb = _demo("derive")
    student = make_exercise(copy.deepcopy(nb))
    (cell,) = student.cells
    assert cell.metadata["course"]["kind"] == "derive"
