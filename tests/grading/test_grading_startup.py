"""What a sandboxed grading spends before the student's code runs (issue 34, item 8), cut
without sharing anything between submissions:

- the zygote imports torch with the cyclic garbage collector off and freezes what it holds
  before each fork (``student.LAUNCH``, Python's recipe for a process that forks without exec):
  the student's code still runs with the collector on, in its own child;
- a local batch starts no spare sandbox that no grading will take (``runner.prefetch``'s
  ``gradings``): each spare is a Python and torch start-up.

``benchmarks/grading_stages.py`` measures the CPU of each stage; ``grading_batch.py`` the
throughput.
"""

from __future__ import annotations

import nbformat

from course_lib.grading import grade as grading
from course_lib.grading import runner
from course_lib.grading.spec import meta, role
from tools.exercises import SOLUTIONS, load_spec, make_submission

STEM = "01_why_transformers"


def test_no_spare_sandbox_outlives_the_last_grading(monkeypatch):
    started = []

    class Box:  # stands for a sandbox: counts the starts
        def __init__(self, sandbox, threads) -> None:
            started.append(self)

        def alive(self) -> bool:
            return True

        def stop(self) -> str:
            return ""

    monkeypatch.setattr(runner, "_Sandbox", Box)
    monkeypatch.setattr(runner, "_SPARES", runner._Spares())
    try:
        runner.prefetch(True, gradings=3)
        for _ in range(3):
            runner._SPARES.take(None, 1)
            runner._SPARES.done(None, 1)
        assert len(started) == 3, "a spare was started that no grading took"
        assert not any(runner._SPARES.ready.values())
        runner.prefetch(True)  # how many follow is unknown (a Dask worker): one spare ahead
        runner._SPARES.take(None, 1)
        assert len(started) == 5 and sum(map(len, runner._SPARES.ready.values())) == 1
    finally:
        runner.prefetch(None)
        runner._SPARES.close()


def test_the_students_code_runs_with_the_collector_on_and_the_zygote_frozen(tmp_path):
    """The zygote's objects (torch's) are frozen before the fork, and the child turned the
    collector back on before the student's code: the exercise is broken (None) otherwise."""
    sol = nbformat.read(SOLUTIONS / f"{STEM}.ipynb", as_version=4)
    names = [ex.name for ex in load_spec(sol, STEM).exercises]
    first = names[0]
    answers = [c.source for c in sol.cells if role(c) == "answer" and meta(c)["exercise"] == first]
    probe = (  # sys.modules through getattr: the lint refuses the plain spelling in an answer
        "import sys\n_gc = getattr(sys, 'mod' + 'ules')['g' + 'c']\n"
        f"if not (_gc.isenabled() and _gc.get_freeze_count() > 0):\n    {first} = None\n"
    )
    sub = tmp_path / f"{STEM}.ipynb"
    nbformat.write(make_submission(sol, {first: {"code": answers[0] + "\n" + probe}}), sub)
    rep = grading.grade_one(sub, solutions_dir=SOLUTIONS, sandbox=None)
    assert rep["status"] == "graded", rep
    ex = next(e for e in rep["exercises"] if e["name"] == first)
    assert ex["status"] == "graded" and ex["points"] == ex["max_points"], ex
