"""The exercise notebooks: every solution scores 100 %, every untouched exercise 0, every
known-wrong answer (kept in the solution's metadata) loses exactly the checks it names, the
verdicts do not depend on the thread count, the solutions pass ``pytest --nbval`` (their stored
outputs are not stale), and ``exercises/`` equals regenerating it.

All gradings run in two ``grade_batch`` calls (one grading per core at a time): variant k of a
notebook puts the k-th known-wrong answer of every exercise into one submission, which is
possible because each exercise's checks call only that exercise's functions. An exercise with
fewer than k + 1 known-wrong answers is left untouched in variant k (its stub fails at once):
its solution is graded in the solution's own grading, and running it again in every variant
was a third of the suite's grading time (a notebook with one exercise of 7 wrong answers ran
its training exercises 7 times). That the stubs next to a wrong answer fail as stubs, and only
they, is itself checked: one exercise's verdict does not depend on the others' answers.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import nbformat
import pytest

from course_lib.grading.grade import grade_batch
from tools import ROOT
from tools.exercises import (
    EXERCISES,
    SOLUTIONS,
    load_spec,
    make_exercise,
    make_submission,
    validate,
)
from tools.exercises import main as exercises_main

STEMS = sorted(p.stem for p in SOLUTIONS.glob("*.ipynb"))
TIME_LIMIT = 60.0


def _solution(stem):
    return nbformat.read(SOLUTIONS / f"{stem}.ipynb", as_version=4)


def _n_variants(spec):
    return max(len(ex.wrong) for ex in spec.exercises)


def _mixed(spec):
    """The variant compared across thread counts: wrong answers, so both PASS and FAIL lines."""
    return "wrong1" if _n_variants(spec) > 1 else "wrong0"


def _write(nb, path: Path):
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, path)


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """{(threads, stem, variant): report} for the solution, the untouched exercise and every
    known-wrong variant (2 threads), and wrong variant 1 (PASS and FAIL lines) again with 1
    thread. (The solution's 1-thread verdicts are its stored outputs, which nbval compares.)"""
    base = tmp_path_factory.mktemp("exercise-gradings")
    plan = {2: {}, 1: {}}
    for stem in STEMS:
        sol = _solution(stem)
        spec = load_spec(sol, stem)
        names = [ex.name for ex in spec.exercises]
        plan[2][(stem, "solution")] = make_submission(sol, {n: "solution" for n in names})
        plan[2][(stem, "untouched")] = make_exercise(sol)
        for k in range(_n_variants(spec)):
            choose = {ex.name: (k if k < len(ex.wrong) else None) for ex in spec.exercises}
            plan[2][(stem, f"wrong{k}")] = make_submission(sol, choose)
        plan[1][(stem, "mixed")] = plan[2][(stem, _mixed(spec))]
    reports, timing = {}, {}
    for threads, subs in plan.items():
        folder = base / f"threads{threads}"
        for (stem, variant), nb in subs.items():
            _write(nb, folder / f"{stem}__{variant}.ipynb")
        t0 = time.monotonic()
        for rep in grade_batch(
            folder, base / f"out{threads}", time_limit=TIME_LIMIT, threads=threads
        ):
            stem, variant = Path(rep["submission"]).stem.split("__")
            reports[(threads, stem, variant)] = rep
        timing[threads] = time.monotonic() - t0
    per_notebook: dict[str, list[float]] = {}
    for (_threads, stem, _variant), rep in reports.items():
        per_notebook.setdefault(stem, []).append(rep.get("seconds", 0))
    summary = {
        "batch_wall_seconds": {t: round(v, 1) for t, v in timing.items()},
        "gradings": len(reports),
        "mean_seconds_per_grading": {s: round(sum(v) / len(v), 1) for s, v in per_notebook.items()},
        "solution_seconds": {s: reports[(2, s, "solution")].get("seconds") for s in STEMS},
    }
    out = ROOT / "test-output"
    out.mkdir(exist_ok=True)
    (out / "exercise-grading-times.json").write_text(json.dumps(summary, indent=1) + "\n")
    print("\ngrading times:", summary)
    return reports


def _failed(rep, exercise):
    ex = next(e for e in rep["exercises"] if e["name"] == exercise)
    return {c["name"] for c in ex["checks"] if not c["passed"]}, ex


@pytest.mark.slow
@pytest.mark.parametrize("stem", STEMS)
def test_solution_scores_full_marks(graded, stem):
    rep = graded[(2, stem, "solution")]
    assert rep["status"] == "graded", rep
    assert rep["all_passed"] and rep["score"] == rep["max_score"], [
        (e["name"], e["status"], e["messages"], [c for c in e["checks"] if not c["passed"]])
        for e in rep["exercises"]
    ]


@pytest.mark.slow
@pytest.mark.parametrize("stem", STEMS)
def test_untouched_exercise_fails_every_check(graded, stem):
    rep = graded[(2, stem, "untouched")]
    assert rep["score"] == 0
    for ex in rep["exercises"]:
        assert ex["checks"] and all(not c["passed"] for c in ex["checks"]), ex
        assert all("not implemented" in c["detail"] for c in ex["checks"]), ex


@pytest.mark.slow
@pytest.mark.parametrize("stem", STEMS)
def test_known_wrong_answers_lose_exactly_their_checks(graded, stem):
    spec = load_spec(_solution(stem), stem)
    for k in range(_n_variants(spec)):
        rep = graded[(2, stem, f"wrong{k}")]
        for ex in spec.exercises:
            failed, got = _failed(rep, ex.name)
            assert got["status"] == "graded", (ex.name, got)
            names = {c.name for c in ex.checks}
            if k < len(ex.wrong):
                w = ex.wrong[k]
                want = names if w["fails"] == "all" else set(w["fails"])
                assert failed == want, (
                    f"{stem}/{ex.name}: wrong answer {w['why']!r} failed {failed}, expected {want}"
                )
                for c in got["checks"]:
                    if not c["passed"]:
                        assert c["detail"] and c["hint"], c
            else:  # left untouched in this variant: fails as a stub, beside the wrong answers
                assert failed == names and all(
                    "not implemented" in c["detail"] for c in got["checks"]
                ), f"{stem}/{ex.name}: the untouched stub in variant {k}: {got['checks']}"


@pytest.mark.slow
def test_every_exercise_has_a_trivial_stub_failing_every_check():
    for stem in STEMS:
        spec = load_spec(_solution(stem), stem)
        for ex in spec.exercises:
            assert any(
                w["fails"] == "all" and w["why"].startswith("trivial stub") for w in ex.wrong
            ), (stem, ex.name)


@pytest.mark.slow
@pytest.mark.parametrize("stem", STEMS)
def test_verdicts_do_not_depend_on_thread_count(graded, stem):
    spec = load_spec(_solution(stem), stem)
    for variant in ("mixed",):
        one, two = graded[(1, stem, variant)], graded[(2, stem, _mixed(spec))]
        assert [e["checks"] for e in one["exercises"]] == [e["checks"] for e in two["exercises"]], (
            variant
        )


def test_exercises_equal_regeneration_and_metadata_is_valid(capsys):
    assert exercises_main(["--check"]) == 0, capsys.readouterr().err
    for stem in STEMS:
        assert validate(_solution(stem), stem) == []
        assert (EXERCISES / f"{stem}.ipynb").exists()


def test_at_least_four_exercises_each_with_two_hinted_checks():
    """A chapter's notebook (NN_name) has at least four exercises; the notebook of a page
    without a number (the complete picture, where to go next) at least one."""
    for stem in STEMS:
        spec = load_spec(_solution(stem), stem)
        assert len(spec.exercises) >= (4 if stem[:2].isdigit() else 1), stem
        for ex in spec.exercises:
            assert len(ex.checks) >= 2 and all(c.hint.strip() for c in ex.checks), (stem, ex.name)


def test_exercise_notebooks_have_no_solutions_and_locked_trusted_cells():
    for stem in STEMS:
        ex = nbformat.read(EXERCISES / f"{stem}.ipynb", as_version=4)
        sol = _solution(stem)
        text = nbformat.writes(ex)
        assert "BEGIN SOLUTION" not in text and '"wrong"' not in text
        first = next(c for c in ex.cells if c.cell_type == "code")
        assert first.id == "colab-setup" and "remove-cell" in first.metadata["tags"]
        for c in ex.cells:
            if c.cell_type == "code":
                assert c.outputs == [] and c.execution_count is None
                r = c.metadata["course"]["role"]
                if r in ("setup", "check"):
                    assert c.metadata["editable"] is False and c.metadata["deletable"] is False
                    assert c.source == next(s.source for s in sol.cells if s.id == c.id)
                if r == "answer":
                    assert "NotImplementedError(\"TODO" in c.source and c.source.startswith(
                        "# EXERCISE "
                    )


def test_colab_cell_matches_chapter_one():
    import jupytext

    want = next(
        c
        for c in jupytext.read(ROOT / "book" / "01_why_transformers.md").cells
        if c.cell_type == "code"
    )
    for folder in (SOLUTIONS, EXERCISES):
        for stem in STEMS:
            nb = nbformat.read(folder / f"{stem}.ipynb", as_version=4)
            first = next(c for c in nb.cells if c.cell_type == "code")
            assert first.source == want.source and first.id == "colab-setup", (folder.name, stem)
