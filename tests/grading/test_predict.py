"""Predict, then run (issue 26): ``check_prediction`` judges a prediction written before the
measurement, and the grader reads the order from the saved notebook.

Fast: the helper in its live and checker modes, and what the grader reads from a submission
(``notebooks.prediction_facts``). Slow: gradings of a submission whose prediction was made
after the measurement, changed after it, or never run before it.
"""

from __future__ import annotations

import contextlib
import io

import nbformat
import pytest

from course_lib.grading import checks
from course_lib.grading import grade as grading
from course_lib.grading.notebooks import prediction_facts
from course_lib.grading.spec import load_spec
from course_lib.grading.verdict import CHANGED, MEASURED, format_verdict
from tools.exercises import SOLUTIONS, make_submission

STEM, EX = "06_cross_entropy", "predict_initial_loss"
ANSWER, MEASURE = "predict-initial-loss-answer", "predict-initial-loss-check-1"


@pytest.fixture
def mode():
    """Switch the check helpers' mode for one test, and restore live mode and a clean state."""
    yield checks.set_mode
    checks.set_mode("live")
    checks.begin_cell(None)
    checks._state.seen.clear()
    checks.take_verdicts()
    checks.take_results()


def _live(fn):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        fn()
    return out.getvalue().splitlines()


def test_live_prediction_passes_and_shows_the_measured_value(mode):
    lines = _live(lambda: checks.check_prediction("loss", lambda: 4.2, 4.17, hint="h"))
    assert lines == [format_verdict("loss", True), f"{MEASURED}4.17"]
    lines = _live(lambda: checks.check_prediction("n", lambda: 9, 1000, hint="h"))
    assert lines[0].startswith("[FAIL] n: your prediction is more than 5 % from the measured value")
    assert lines[1] == f"{MEASURED}1,000"  # a count shows as an integer


def test_live_prediction_changed_after_the_measurement_fails(mode):
    _live(lambda: checks.check_prediction("loss", lambda: 3.0, 4.17, hint="h"))  # wrong, then...
    lines = _live(lambda: checks.check_prediction("loss", lambda: 4.17, 4.17, hint="h"))
    assert lines[0].startswith(f"[FAIL] loss: {CHANGED}"), lines  # ...right, but seen after the run


def test_live_prediction_must_be_a_number(mode):
    for bad in ("4.17", True, [4.17]):
        lines = _live(lambda bad=bad: checks.check_prediction("x", lambda: bad, 4.17, hint="h"))
        assert lines[0].startswith("[FAIL] x: returned"), (bad, lines)


@pytest.mark.parametrize(
    "facts, reason",
    [
        ({"answer": 3, "measure": 4, "changed": False}, None),
        ({"answer": 5, "measure": 4, "changed": False}, "was run after this measuring cell"),
        ({"answer": 4, "measure": 4, "changed": False}, "was run after this measuring cell"),
        ({"answer": None, "measure": 4, "changed": False}, "no execution counts"),
        ({"answer": 3, "measure": None, "changed": False}, "no execution counts"),
        (None, "no execution counts"),
        ({"answer": 3, "measure": 4, "changed": True}, CHANGED),
        ({"answer": True, "measure": 4, "changed": False}, "no execution counts"),
    ],
)
def test_checker_judges_the_order_from_the_saved_notebook(mode, facts, reason):
    mode("student")
    checks.begin_cell("c1")
    checks.student_check("check_prediction", "loss", lambda: 4.2)
    outcomes = checks.take_results()
    mode("checker")
    checks.begin_cell("c1", outcomes, facts)
    checks.check_prediction("loss", lambda: 1 / 0, 4.17, hint="h")  # never called in the checker
    (v,) = checks.take_verdicts()
    assert v["passed"] is (reason is None), v
    if reason:
        assert reason in v["reason"], v


def test_checker_judges_the_value_before_the_order(mode):
    mode("student")
    checks.begin_cell("c1")
    checks.student_check("check_prediction", "loss", lambda: 9.0)
    outcomes = checks.take_results()
    mode("checker")
    checks.begin_cell("c1", outcomes, {"answer": 3, "measure": 4, "changed": False})
    checks.check_prediction("loss", lambda: 9.0, 4.17, hint="h")
    (v,) = checks.take_verdicts()
    assert not v["passed"] and "more than 5 %" in v["reason"]


def _sol():
    return nbformat.read(SOLUTIONS / f"{STEM}.ipynb", as_version=4)


def _cell(nb, cid):
    return next(c for c in nb.cells if c.get("id") == cid)


def test_grader_reads_the_order_and_the_saved_verdicts():
    sol = _sol()
    spec = load_spec(sol, STEM)
    assert spec.exercise(EX).predict and not spec.exercise("lm_loss").predict
    sub = make_submission(sol, {EX: "solution"})  # Run All: counts in notebook order
    facts = prediction_facts(sub, spec)
    assert set(facts) == {ex.name for ex in spec.exercises if ex.predict}
    f = facts[EX][MEASURE]
    assert f["answer"] < f["measure"] and f["changed"] is False
    _cell(sub, ANSWER).execution_count = f["measure"] + 1  # re-run after the measurement
    assert prediction_facts(sub, spec)[EX][MEASURE]["answer"] > f["measure"]
    line = format_verdict("the loss at initialisation", False, CHANGED + " (restart ...)", "h")
    _cell(sub, MEASURE).outputs = [
        nbformat.v4.new_output("stream", name="stdout", text=line + "\n")
    ]
    assert prediction_facts(sub, spec)[EX][MEASURE]["changed"] is True
    unrun = make_submission(sol, {EX: "solution"}, ran_in_order=False)
    assert prediction_facts(unrun, spec)[EX][MEASURE]["answer"] is None


@pytest.mark.slow
def test_grading_a_prediction_made_after_the_measurement(tmp_path):
    sol = _sol()
    names = [ex.name for ex in load_spec(sol, STEM).exercises]
    good = make_submission(sol, {n: "solution" for n in names})
    late = make_submission(sol, {n: "solution" for n in names})
    _cell(late, ANSWER).execution_count = _cell(late, MEASURE).execution_count + 1
    changed = make_submission(sol, {n: "solution" for n in names})
    line = format_verdict("the loss at initialisation", False, CHANGED, "h")
    _cell(changed, MEASURE).outputs = [
        nbformat.v4.new_output("stream", name="stdout", text=line + "\n")
    ]
    unrun = make_submission(sol, {n: "solution" for n in names}, ran_in_order=False)
    reports = {}
    for key, nb in (("good", good), ("late", late), ("changed", changed), ("unrun", unrun)):
        path = tmp_path / f"{STEM}__{key}.ipynb"
        nbformat.write(nb, path)
        reports[key] = grading.grade(path, solutions_dir=SOLUTIONS, time_limit=60, sandbox=False)
    assert reports["good"]["score"] == reports["good"]["max_score"], reports["good"]
    for key, why in (
        ("late", "run after this measuring cell"),
        ("changed", CHANGED),
        ("unrun", "no execution counts"),
    ):
        rep = reports[key]
        ex = next(e for e in rep["exercises"] if e["name"] == EX)
        assert ex["checks"] and all(not c["passed"] for c in ex["checks"]), (key, ex)
        assert all(why in c["detail"] for c in ex["checks"]), (key, ex)
        others = [e for e in rep["exercises"] if e["name"] != EX]
        assert all(c["passed"] for e in others for c in e["checks"]), key
