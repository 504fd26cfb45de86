"""The grader under attack: one crafted submission per robustness case of the issue, all graded
in one ``grade_batch`` run (which also tests the batch mode, its CSV gradebook and that one bad
submission never stops the batch). Chapter 1's notebook is the victim: it is the cheapest.
"""

from __future__ import annotations

import copy
import csv
import json
from pathlib import Path

import nbformat
import pytest

from course_lib.grading.grade import grade_batch, main
from tools.exercises import SOLUTIONS, load_spec, make_submission

STEM = "01_why_transformers"
SOL = SOLUTIONS / f"{STEM}.ipynb"
TIME_LIMIT = 8.0  # seconds per exercise: small, so the infinite loops end quickly


def _sol():
    return nbformat.read(SOL, as_version=4)


def _all_solution(**override):
    spec = load_spec(_sol(), STEM)
    choose = {ex.name: "solution" for ex in spec.exercises}
    choose.update(override)
    return make_submission(_sol(), choose)


def _answer_source(name):
    return next(c.source for c in _sol().cells if c.get("id") == f"{name.replace('_', '-')}-answer")


def _cell(nb, cid):
    return next(c for c in nb.cells if c.get("id") == cid)


def _code(src):
    return {"code": src}


SEQ, PATH, RNN, ATT = "dependence", "layers_to_connect", "rnn_forward", "self_attention"


def _submissions() -> dict[str, object]:
    subs = {}
    # an infinite loop at the top of an answer cell, and one inside a function the check calls
    subs["loop"] = _all_solution(
        **{
            SEQ: _code("while True:\n    pass"),
            PATH: _code(
                "def layers_to_connect(layer, x, max_layers=64):\n    while True:\n"
                "        max_layers += 1"
            ),
        }
    )
    # the kernel dies: os._exit inside the function a check calls; a segfault at the top of a cell
    subs["os_exit"] = _all_solution(
        **{RNN: _code("import os\ndef rnn_forward(x, W, U):\n    os._exit(3)")}
    )
    subs["segfault"] = _all_solution(**{PATH: _code("import os\nos.kill(os.getpid(), 11)")})
    # a loop in C that never looks at the interrupt: the kernel cannot be stopped, so it is killed
    # and a second pass grades the exercises after it
    subs["stubborn_loop"] = _all_solution(
        **{PATH: _code("total = sum(range(10**13))\n" + _answer_source(PATH))}
    )
    # sys.exit() inside the function (a FAIL) and at the top of a cell after a correct function
    subs["sys_exit"] = _all_solution(
        **{
            SEQ: _code("import sys\ndef dependence(f, x):\n    sys.exit(1)"),
            PATH: _code(_answer_source(PATH) + "\nimport sys\nsys.exit()"),
        }
    )
    # an exception in a TODO cell before the function is defined
    subs["exception"] = _all_solution(
        **{RNN: _code("raise RuntimeError('oops')\n" + _answer_source(RNN))}
    )
    # the answer cell turned into markdown
    nb = _all_solution()
    cell = _cell(nb, "dependence-answer")
    nb.cells[nb.cells.index(cell)] = nbformat.v4.new_markdown_cell(cell.source, id=cell.id)
    subs["markdown"] = nb
    # tampering: edited, deleted and re-tagged check cells, nbval markers in answers; stubs left
    # in place
    nb = make_submission(_sol())
    c = _cell(nb, "dependence-check-1")
    c.source = (
        "print('[PASS] an RNN: output t depends on the inputs up to t')\n"
        "print('[PASS] a layer whose lag-2 features cancel in a sum')"
    )
    nb.cells.remove(_cell(nb, "layers-to-connect-check-1"))
    _cell(nb, "self-attention-check-1").metadata["tags"] = [
        "nbval-skip",
        "raises-exception",
        "nbval-ignore-output",
    ]
    _cell(nb, "rnn-forward-answer").source = (
        "# NBVAL_SKIP\n# NBVAL_IGNORE_OUTPUT\n" + _cell(nb, "rnn-forward-answer").source
    )
    _cell(nb, "self-attention-answer").metadata["tags"] = ["raises-exception"]
    subs["tampered"] = nb
    # checks deleted but correct answers: the checks come from the solution, so full marks
    nb = _all_solution()
    nb.cells = [c for c in nb.cells if c.metadata.get("course", {}).get("role") != "check"]
    subs["checks_deleted"] = nb
    # an output flood at the top of a cell, and inside a function the check calls
    subs["flood"] = _all_solution(
        **{
            SEQ: _code("for i in range(300000):\n    print('spam', i)\n" + _answer_source(SEQ)),
            ATT: _code(
                _answer_source(ATT).replace(
                    "### BEGIN SOLUTION",
                    "### BEGIN SOLUTION\n    for i in range(100000):\n        print('spam', i)",
                )
            ),
        }
    )
    # a memory bomb (8 GiB, far above the 3 GiB limit) inside the function
    subs["memory"] = _all_solution(
        **{
            RNN: _code(
                "def rnn_forward(x, W, U):\n    big = torch.ones(2 * 1024**3)\n"
                "    return big[: x.shape[0]]"
            )
        }
    )
    # fake verdict lines printed by the answer, with the stub still in place
    fake = (
        "print('[PASS] matches torch.nn.RNN (tanh, no bias)')\n"
        "print('[PASS] state t depends on tokens 1..t only')\n"
    )
    subs["fake_verdicts"] = _all_solution(
        **{RNN: _code(fake + "def rnn_forward(x, W, U):\n    return None")}
    )
    # redefining a check helper; calling the library function the exercise asks for; touching
    # the kernel
    subs["lint"] = _all_solution(
        **{
            SEQ: _code(
                _answer_source(SEQ) + "\ndef check_equal(name, *a, **k):\n    print('[PASS]', name)"
            ),
            ATT: _code(
                "def self_attention(x):\n    return F.scaled_dot_product_attention(x, x, x)"
            ),
            PATH: _code(
                "get_ipython().events.register('post_run_cell', lambda *a: None)\n"
                + _answer_source(PATH)
            ),
            RNN: _code("import torch\ntorch.tanh = lambda t: t\n" + _answer_source(RNN)),
        }
    )
    # extra helper cells below an answer, and an answer split over two cells
    nb = _all_solution(**{RNN: _code("def rnn_forward(x, W, U):\n    return _rnn_loop(x, W, U)")})
    i = nb.cells.index(_cell(nb, "rnn-forward-answer"))
    helper = nbformat.v4.new_code_cell(
        "def _rnn_loop(x, W, U):\n    h = torch.zeros(W.shape[0])\n    out = []\n"
        "    for t in range(x.shape[0]):\n        h = torch.tanh(W @ h + U @ x[t])\n"
        "        out.append(h)\n"
        "    return torch.stack(out)"
    )
    nb.cells.insert(i + 1, helper)
    subs["helper_cells"] = nb
    return subs


@pytest.fixture(scope="module")
def batch(tmp_path_factory):
    folder = tmp_path_factory.mktemp("submissions")
    for name, nb in _submissions().items():
        nbformat.write(nb, folder / f"{name}.ipynb")
    good = nbformat.writes(_all_solution())
    (folder / "truncated.ipynb").write_text(good[: len(good) // 2])
    (folder / "not_json.ipynb").write_text("this is not JSON {")
    out = folder / "_grades"
    reports = grade_batch(folder, out, time_limit=TIME_LIMIT, solutions_dir=SOLUTIONS)
    return {Path(r["submission"]).stem: r for r in reports}, out


def _ex(rep, name):
    return next(e for e in rep["exercises"] if e["name"] == name)


def _full(rep, *names):
    for n in names:
        e = _ex(rep, n)
        assert e["status"] == "graded" and e["points"] == e["max_points"], e


@pytest.mark.slow
def test_infinite_loops_time_out_and_the_rest_is_graded(batch):
    rep = batch[0]["loop"]
    for n in (SEQ, PATH):
        e = _ex(rep, n)
        assert e["status"] == "timed out" and e["points"] == 0, e
        assert any("timed out" in m for m in e["messages"])
    _full(rep, RNN, ATT)


@pytest.mark.slow
def test_an_uninterruptible_loop_is_killed_and_the_rest_is_graded(batch):
    rep = batch[0]["stubborn_loop"]
    e = _ex(rep, PATH)
    assert e["status"] == "timed out" and e["points"] == 0, e
    assert rep["passes"] == 1  # only its child is killed: the zygote forks the next exercise
    _full(rep, SEQ, RNN, ATT)


@pytest.mark.slow
def test_a_crashing_kernel_costs_only_its_exercise(batch):
    for case, victim, others in (
        ("os_exit", RNN, (SEQ, PATH, ATT)),
        ("segfault", PATH, (SEQ, RNN, ATT)),
    ):
        rep = batch[0][case]
        e = _ex(rep, victim)
        assert e["status"] == "crashed" and e["points"] == 0, (case, e)
        assert any("crashed" in m for m in e["messages"])
        assert rep["passes"] == 1  # the child dies, the zygote goes on
        _full(rep, *others)


@pytest.mark.slow
def test_sys_exit_is_a_fail_not_a_crash(batch):
    rep = batch[0]["sys_exit"]
    e = _ex(rep, SEQ)
    assert e["status"] == "graded" and e["points"] == 0
    assert all("sys.exit" in c["detail"] for c in e["checks"]), e
    _full(rep, PATH, RNN, ATT)  # sys.exit() at the top of a cell after a correct function


@pytest.mark.slow
def test_exception_in_a_todo_cell_is_reported(batch):
    rep = batch[0]["exception"]
    e = _ex(rep, RNN)
    assert e["points"] == 0 and any("RuntimeError: oops" in m for m in e["messages"]), e
    assert all("NameError" in c["detail"] for c in e["checks"]), e
    _full(rep, SEQ, PATH, ATT)


@pytest.mark.slow
def test_answer_cell_turned_into_markdown(batch):
    rep = batch[0]["markdown"]
    e = _ex(rep, SEQ)
    assert e["points"] == 0 and any("markdown cell" in m for m in e["messages"]), e
    _full(rep, PATH, RNN, ATT)


@pytest.mark.slow
def test_tampered_check_cells_and_nbval_markers_change_nothing(batch):
    rep = batch[0]["tampered"]
    assert rep["score"] == 0
    for e in rep["exercises"]:
        assert all(not c["passed"] and "not implemented" in c["detail"] for c in e["checks"]), e
    _full(batch[0]["checks_deleted"], SEQ, PATH, RNN, ATT)


@pytest.mark.slow
def test_output_floods_are_capped(batch):
    rep = batch[0]["flood"]
    _full(rep, SEQ, PATH, RNN, ATT)
    assert len(json.dumps(rep)) < 20_000


@pytest.mark.slow
def test_memory_bomb_hits_the_limit(batch):
    rep = batch[0]["memory"]
    e = _ex(rep, RNN)
    assert e["points"] == 0 and e["status"] in ("graded", "crashed"), e
    _full(rep, SEQ, PATH, ATT)


@pytest.mark.slow
def test_printed_fake_verdicts_score_nothing(batch):
    rep = batch[0]["fake_verdicts"]
    e = _ex(rep, RNN)
    assert e["points"] == 0 and all(not c["passed"] for c in e["checks"]), e


@pytest.mark.slow
def test_lint_rejects_helper_redefinition_forbidden_calls_and_monkeypatching(batch):
    rep = batch[0]["lint"]
    expect = {
        SEQ: "check_equal is defined by the notebook's trusted cells",
        ATT: "calling F.scaled_dot_product_attention is not allowed",
        PATH: "get_ipython is not allowed",
        RNN: "changing torch.tanh would change a library",
    }
    for name, text in expect.items():
        e = _ex(rep, name)
        assert e["status"] == "rejected" and e["points"] == 0, e
        assert any(text in m for m in e["messages"]), (name, e["messages"])


@pytest.mark.slow
def test_helper_and_split_cells_count_as_the_answer(batch):
    _full(batch[0]["helper_cells"], SEQ, PATH, RNN, ATT)


@pytest.mark.slow
def test_unreadable_files_do_not_stop_the_batch(batch):
    reports, out = batch
    for name in ("truncated", "not_json"):
        assert reports[name]["status"] == "unreadable"
        assert "not valid notebook JSON" in reports[name]["error"]
    rows = list(csv.DictReader(open(out / "gradebook.csv")))
    assert len(rows) == len(reports)
    assert {r["status"] for r in rows} == {"graded", "unreadable"}
    assert (out / "loop.grade.json").exists()


@pytest.mark.slow
def test_exit_codes(tmp_path, capsys):
    bad = tmp_path / "01_why_transformers.ipynb"
    bad.write_text('{"cells": [')
    assert main([str(bad)]) == 2
    assert "not valid notebook JSON" in capsys.readouterr().err
    broken = copy.deepcopy(_sol())
    broken.cells[2].metadata = {}  # a code cell without a role: the solution itself is broken
    sol_path = tmp_path / "broken_solution.ipynb"
    nbformat.write(broken, sol_path)
    good = tmp_path / "sub.ipynb"
    nbformat.write(_all_solution(), good)
    assert main([str(good), "--solution", str(sol_path)]) == 3
    report = tmp_path / "r.json"
    assert main([str(good), "--report", str(report)]) == 0
    assert json.loads(report.read_text())["all_passed"]
    assert (
        main([str(SOLUTIONS.parent / "exercises" / f"{STEM}.ipynb"), "--report", str(report)]) == 1
    )


LINT_CASES = [
    (
        "def self_attention(x):\n    return F.scaled_dot_product_attention(x, x, x)",
        "calling F.scaled_dot_product_attention",
    ),
    ("def self_attention(x):\n    return x.softmax(-1)", None),
    ("F = None", "F is defined by the notebook's trusted cells"),
    ("import torch\nimport torch.nn.functional as F\nimport math", None),
    ("torch.tanh = lambda t: t", "changing torch.tanh"),
    ("def check_close(*a, **k):\n    print('[PASS] x')", "check_close is defined"),
    ("from course_lib.attention import softmax", "importing course_lib.attention"),
    ("%timeit 1", "IPython magics"),
    ("!ls", "IPython magics"),
    ("import builtins", "importing builtins"),
    ("def f():\n    return _layers(None)", "_layers belongs to a check cell"),
    ("get_ipython().events.register('post_run_cell', print)", "get_ipython is not allowed"),
    ("import sys\nsys.stdout = None", "changing sys.stdout"),
    # a module read inside an index is not a module changed (Y is what changes) ...
    ("Y = torch.zeros(3, 4)\nY[torch.arange(3), [0, 1, 2]] = 1.0", None),
    ("m = {}\nm[math.pi] = 1\na, m[torch.e] = 1, 2", None),
    # ... but a module's item or attribute is, also inside a tuple or starred target
    ("a, torch.tanh = 1, abs", "changing torch.tanh"),
    ("*torch.x, b = [1, 2]", "changing torch.x"),
    ("math.__dict__['pi'] = 3", "changing math.__dict__['pi']"),
    ("x = getattr(F, 'scaled_dot_product_attention')", "getattr with that name"),
    ("open('record.jsonl', 'a').write('{}')", "open is not allowed"),
    ("import os\nos.system('ls')", "accessing .system"),
    ("torch.save({}, 'x.pt')", "accessing .save"),
    ("for _ in range(3):\n    pass\n_ = 1", None),
    ("def f(a, b):\n    return a @ b", "the @ operator"),
    ("def f(:\n", None),  # a syntax error is not a lint problem: it shows up when the cell runs
]


@pytest.mark.parametrize("code, problem", LINT_CASES)
def test_lint(code, problem):
    from course_lib.grading.lint import lint_answer, trusted_bindings

    sol = _sol()
    trusted, check_only = trusted_bindings(sol, load_spec(sol, STEM))
    problems = lint_answer(code, trusted, ["scaled_dot_product_attention", "@"], "x", check_only)
    if problem is None:
        assert problems == []
    else:
        assert any(problem in p for p in problems), problems


def test_extraction_finds_answers_without_ids_and_ignores_trusted_copies():
    from course_lib.grading.notebooks import extract_answers

    sol = _sol()
    spec = load_spec(sol, STEM)
    sub = _all_solution()
    check = _cell(sub, "dependence-check-1")
    sub.cells.insert(
        sub.cells.index(check) + 1, copy.deepcopy(check)
    )  # a pasted copy of a check cell
    helper = nbformat.v4.new_code_cell("def _helper():\n    return 1")
    sub.cells.insert(sub.cells.index(_cell(sub, "rnn-forward-answer")) + 1, helper)
    for c in sub.cells:  # a tool that drops cell ids
        c.pop("id", None)
    answers, notes = extract_answers(sub, spec, sol)
    assert answers[SEQ] == [_answer_source(SEQ)]
    assert answers["rnn_forward"] == [_answer_source(RNN), helper.source]
    assert all(len(answers[n]) == 1 for n in (PATH, ATT))
    assert notes == []


def test_batch_cli_survives_unreadable_files(tmp_path, capsys):
    folder = tmp_path / "subs"
    folder.mkdir()
    (folder / "alice_01_why_transformers.ipynb").write_text("{ not json")
    (folder / "bob.ipynb").write_text(
        '{"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}'
    )
    from course_lib.grading.sandbox import probe

    unsafe = (
        [] if probe()[0] is not None else ["--unsafe-no-sandbox"]
    )  # a batch needs the sandbox or this flag
    assert main(["--batch", str(folder), "--out", str(tmp_path / "grades"), *unsafe]) == 0
    rows = list(csv.DictReader(open(tmp_path / "grades" / "gradebook.csv")))
    assert [r["status"] for r in rows] == ["unreadable", "unreadable"]
    assert "cannot tell which exercise notebook" in rows[1]["error"]


def test_missing_solutions_folder_is_a_grader_error(tmp_path, capsys):
    sub = tmp_path / "01_why_transformers.ipynb"
    nbformat.write(_all_solution(), sub)
    assert main([str(sub), "--solutions", str(tmp_path / "nowhere")]) == 3
    assert "solutions folder" in capsys.readouterr().err


def test_grading_extra_covers_every_third_party_import():
    """``pip install "course_lib[grading]"`` must give a working ``course-grade``: every
    third-party module a grading module imports (at the top or inside a function) comes from a
    distribution listed in the ``grading`` extra or in the base dependencies."""
    import ast
    import importlib.metadata as md
    import re
    import sys
    import tomllib

    from tools import ROOT

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    norm = lambda s: re.sub(r"[-_.]+", "-", re.split(r"[ <>=!~\[;@]", s.strip())[0]).lower()  # noqa: E731
    declared = {
        norm(r) for r in project["dependencies"] + project["optional-dependencies"]["grading"]
    }
    dists = md.packages_distributions()
    missing = []
    for path in sorted((ROOT / "course_lib" / "grading").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                mods = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level:
                mods = [node.module]
            else:
                continue
            for mod in mods:
                top = mod.split(".")[0]
                if top in sys.stdlib_module_names or top == "course_lib":
                    continue
                owners = {norm(d) for d in dists.get(top, [])}
                if not owners & declared:
                    missing.append(
                        f"{path.name}: import {mod} "
                        f"(from {sorted(owners) or 'no installed distribution'})"
                    )
    assert not missing, "add these to the grading extra in pyproject.toml:\n" + "\n".join(missing)


@pytest.mark.slow
def test_parse_is_safe_from_threads():
    """A batch grades in threads of one process, and CPython 3.11's AST constructor keeps its
    recursion depth in interpreter-wide state: a collection inside one thread's parse that runs
    a finalizer yielding the GIL lets another thread parse, and the first fails with "AST
    constructor recursion depth mismatch" (it did, in this file's batch). spec.parse holds a
    lock. The stress below (collections every few allocations, finalizers that yield) made a
    bare ast.parse fail in each of several runs of 3 x 60 parses."""
    import gc
    import threading
    import time

    from course_lib.grading.spec import parse

    src = "\n".join(
        f"def f{i}(x):\n    return [(a, {{b: c}}) for a in x for b, c in a if b > {i}]"
        for i in range(40)
    )

    class Yields:
        def __init__(self):
            self.me = self  # a cycle: only the collector frees it, inside someone's parse

        def __del__(self):
            time.sleep(0)  # lets another thread run

    errors = []

    def work():
        for _ in range(60):
            _ = [Yields() for _ in range(10)]
            try:
                parse(src)
            except SystemError as exc:
                errors.append(exc)

    old = gc.get_threshold()
    gc.set_threshold(20, 1, 1)
    try:
        threads = [threading.Thread(target=work) for _ in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        gc.set_threshold(*old)
    assert errors == []


def test_stages_load_and_splice_alone(tmp_path):
    """The first two stages need no kernel: the lint rejects an answer before anything runs."""
    from course_lib.grading.grade import load, splice

    sub = _all_solution(
        **{ATT: _code("def self_attention(x):\n    return F.scaled_dot_product_attention(x, x, x)")}
    )
    path = tmp_path / f"{STEM}.ipynb"
    nbformat.write(sub, path)
    job = load(path, solutions_dir=SOLUTIONS)
    names = [e.name for e in job.spec.exercises]
    assert job.sol_path == SOLUTIONS / f"{STEM}.ipynb"
    assert [n for n in names if n in (SEQ, PATH, RNN, ATT)] == [SEQ, PATH, RNN, ATT]
    plan = splice(job)
    assert plan.rejected == {ATT}
    assert plan.answers[ATT] == plan.stubs[ATT] and plan.answers[SEQ] == [_answer_source(SEQ)]


def test_stages_collect_and_report_from_verdicts():
    """Collecting results from the checker's verdicts, without running anything: a crashed
    exercise, a graded one with a FAIL verdict, one whose checks never ran."""
    from course_lib.grading.grade import Plan, collect
    from course_lib.grading.report import ExerciseResult, build_report
    from course_lib.grading.runner import ExerciseRun, RunOutcome

    sol = _sol()
    spec = load_spec(sol, STEM)
    seq = spec.exercise(SEQ)
    verdicts = [
        {
            "cell": c.cell_id,
            "name": c.name,
            "passed": i == 0,
            "reason": "" if i == 0 else "wrong value",
            "hint": c.hint,
        }
        for i, c in enumerate(seq.checks)
    ]
    runs = {
        SEQ: ExerciseRun("graded", verdicts),
        PATH: ExerciseRun("graded", []),
        RNN: ExerciseRun("crashed"),
    }
    job = type("J", (), {"spec": spec})()
    plan = Plan({}, {}, {ex.name: ExerciseResult(ex.name, ex.points) for ex in spec.exercises}, [])
    res = collect(job, plan, RunOutcome(runs, 2), 30.0, 3072)
    assert [c["passed"] for c in res[SEQ].checks] == [True] + [False] * (len(seq.checks) - 1)
    assert res[SEQ].checks[1]["detail"] == "wrong value"
    assert all(c["detail"] == "the check did not run" for c in res[PATH].checks)
    assert res[RNN].status == "crashed" and res[RNN].points == 0
    assert res[ATT].status == "crashed"  # no run at all: never silently full or empty marks
    rep = build_report("s.ipynb", SOL, spec, res, [], 2, 1.0, "bwrap")
    assert rep["score"] == res[SEQ].points and rep["sandbox"] == "bwrap" and not rep["all_passed"]


def test_the_plans_split_trusted_and_student_code():
    """The checker is sent only trusted cells (setup and checks) and the names to refuse; the
    student's process gets the answers, the stubs, the exercises to run and the limits."""
    from course_lib.grading.runner import checker_plan, student_plan

    sol = _sol()
    spec = load_spec(sol, STEM)
    answers = {ex.name: [f"# answer of {ex.name}"] for ex in spec.exercises}
    stubs = {ex.name: [f"# stub of {ex.name}"] for ex in spec.exercises}
    cp = checker_plan(sol)
    assert {c["role"] for c in cp["cells"]} == {"setup", "check"}
    assert "# answer of" not in str(cp) and "colab-setup" not in [c["id"] for c in cp["cells"]]
    assert set(cp["student_names"]) >= {SEQ, PATH, RNN, ATT}
    sp = student_plan(sol, spec, answers, stubs, [SEQ, RNN], {PATH}, 12.0, 2048, 2)
    assert [e["answers"] for e in sp["exercises"]] == [answers[ex.name] for ex in spec.exercises]
    assert sp["todo"] == [SEQ, RNN] and sp["stubbed"] == [PATH]
    assert (sp["time_limit"], sp["memory_mb"], sp["threads"]) == (12.0, 2048, 2)
    assert [c["source"] for c in sp["cells"] if c["role"] == "answer"] == [""] * len(spec.exercises)
