"""Grades nobody can forge (issue 24): hostile submissions, each graded to the points it deserves.

The student's code runs in its own sandboxed process (one fresh child per exercise) and hands
back plain data; a trusted checker process, which never runs student code, judges it. So:
rebinding or patching the check helpers, patching torch or builtins, printing verdict lines,
writing fake messages on the process's descriptors, lying tensor subclasses, killing the
parent: none of it turns a stub or a wrong answer into points. A crash or a timeout costs only
its exercise.

Fast: the plain-data codec (``wire``) and the check helpers' modes. Slow: the hostile batch.
"""

from __future__ import annotations

import nbformat
import pytest
import torch

from course_lib.grading import checks, wire
from course_lib.grading import grade as grading
from course_lib.grading import sandbox as sandboxing
from course_lib.grading.spec import load_spec, meta, role
from tools.exercises import SOLUTIONS, make_exercise, make_submission

HAVE_BWRAP = sandboxing.probe()[0] is not None
S1, S2, S8 = "01_why_transformers", "02_matrix_core", "08_training"


# --------------------------------------------------------------------------- the codec
def test_wire_round_trips_plain_data():
    value = {
        "a": [1, 2.5, float("inf"), True, None, "x"],
        3: (torch.arange(6, dtype=torch.int64).reshape(2, 3),),
        ("p", 1): torch.Size([2, 3]),
        "d": torch.float16,
        "e": torch.empty(0, 4),
        "b": torch.tensor([1.5, -2.0], dtype=torch.bfloat16),
        "m": torch.tensor([True, False]),
    }
    back = wire.loads(wire.dumps(value))
    assert back.keys() == value.keys()
    assert (
        back["a"] == value["a"]
        and back["d"] == torch.float16
        and back[("p", 1)] == torch.Size([2, 3])
    )
    for k in (3,):
        assert torch.equal(back[k][0], value[k][0]) and isinstance(back[k], tuple)
    for k in ("e", "b", "m"):
        assert torch.equal(back[k], value[k]) and back[k].dtype == value[k].dtype


def test_wire_rebuilds_a_plain_tensor_from_a_lying_subclass():
    class Liar(torch.Tensor):
        def __eq__(self, other):
            return True

        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            if getattr(func, "__name__", "") in ("allclose", "equal"):
                return True
            return super().__torch_function__(func, types, args, kwargs or {})

    liar = torch.zeros(3).as_subclass(Liar)
    assert torch.allclose(liar, torch.ones(3))  # it lies in its own process...
    back = wire.loads(wire.dumps(liar))
    assert type(back) is torch.Tensor and not torch.allclose(
        back, torch.ones(3)
    )  # ...not after the trip


@pytest.mark.parametrize(
    "data, why",
    [
        (
            {"t": "tensor", "dtype": "float32", "shape": [2], "data": "AAAA"},
            "bytes",
        ),  # 3 bytes for 8
        ({"t": "tensor", "dtype": "object", "shape": [1], "data": ""}, "dtype"),
        ({"t": "tensor", "dtype": "float32", "shape": [-1], "data": ""}, "shape"),
        ({"t": "tensor", "dtype": "float32", "shape": [1], "data": "!!!!"}, "base64"),
        ({"t": "pickle", "v": "gASV"}, "tag"),
        ({"t": "int", "v": "1e9"}, "integer"),
        ({"t": "dict", "k": [{"t": "list", "v": []}], "v": [None]}, "key"),
        ("bare string", "element"),
    ],
)
def test_wire_refuses_anything_else(data, why):
    with pytest.raises(wire.WireError, match=why):
        wire.decode(data)


def test_wire_refuses_deep_nesting_and_objects():
    deep = None
    for _ in range(wire.MAX_DEPTH + 5):
        deep = {"t": "list", "v": [deep]}
    with pytest.raises(wire.WireError):
        wire.decode(deep)
    with pytest.raises(wire.Unsendable, match="Linear"):
        wire.encode(torch.nn.Linear(2, 2))
    with pytest.raises(wire.Unsendable):
        wire.encode(lambda: 0)
    with pytest.raises(wire.Unsendable, match="MB of tensor data"):
        wire.encode(
            [torch.zeros(wire.MAX_VALUE_BYTES // 8), torch.zeros(wire.MAX_VALUE_BYTES // 8 + 1)]
        )


# --------------------------------------------------------------------------- the modes
@pytest.fixture
def mode():
    yield checks.set_mode
    checks.set_mode("live")
    checks.take_results()
    checks.take_verdicts()
    checks.begin_cell(None, [])


def test_student_mode_records_plain_outcomes_and_prints_nothing(mode, capsys):
    mode("student")
    checks.begin_cell("c1")
    checks.student_check("check_close", "ok", lambda: torch.ones(2))
    checks.student_check(
        "check_close", "stub", lambda: (_ for _ in ()).throw(NotImplementedError())
    )
    checks.student_check("check_raises", "raises", lambda: int("x"))
    checks.student_check("check_true", "object", lambda: torch.nn.Linear(1, 1))
    res = checks.take_results()
    assert capsys.readouterr().out == ""
    assert [(r["cell"], r["index"], r["name"]) for r in res] == [
        ("c1", 0, "ok"),
        ("c1", 1, "stub"),
        ("c1", 2, "raises"),
        ("c1", 3, "object"),
    ]
    assert torch.equal(wire.decode(res[0]["value"]), torch.ones(2)) and res[0]["error"] is None
    assert "not implemented" in res[1]["error"] and "ValueError" in res[2]["raised"]
    assert "cannot compare" in res[3]["error"]


def test_checker_mode_judges_only_what_came_back_and_never_calls_the_student(mode):
    mode("student")
    checks.begin_cell("c1")
    checks.student_check("check_close", "right", lambda: torch.ones(2))
    checks.student_check("check_close", "wrong", lambda: torch.zeros(2))
    outcomes = checks.take_results()
    mode("checker")
    called = []
    checks.begin_cell("c1", outcomes)
    checks.check_close("right", lambda: called.append(1), torch.ones(2), hint="h")
    checks.check_close("wrong", lambda: called.append(1), torch.ones(2), hint="h")
    checks.check_close("missing", lambda: called.append(1), torch.ones(2), hint="h")
    v = checks.take_verdicts()
    assert called == []
    assert [(x["name"], x["passed"]) for x in v] == [
        ("right", True),
        ("wrong", False),
        ("missing", False),
    ]
    assert "did not run" in v[2]["reason"]
    # an outcome recorded under another name (a reordered or forged record) does not count
    checks.begin_cell("c1", [dict(outcomes[0], name="other")])
    checks.check_close("right", lambda: None, torch.ones(2), hint="h")
    assert checks.take_verdicts()[0]["passed"] is False


def test_a_full_check_call_is_refused_in_the_students_process(mode):
    """The student's process runs check cells only as their student programs (``split``): a
    check_* call there, which would evaluate its reference, is an error, never a recorded check."""
    mode("student")
    checks.begin_cell("c1")
    for call in (
        lambda: checks.check_close("x", lambda: torch.ones(2), torch.ones(2), hint="h"),
        lambda: checks.check_true("x", lambda: 1, bool, hint="h"),
        lambda: checks.check_prediction("x", lambda: 1.0, 1.0, hint="h"),
    ):
        with pytest.raises(RuntimeError, match="student program"):
            call()
    assert checks.take_results() == []
    mode("checker")
    with pytest.raises(RuntimeError, match="student's process only"):
        checks.student_check("check_close", "x", lambda: torch.ones(2))


# --------------------------------------------------------------------------- hostile submissions
def _sol(stem):
    return nbformat.read(SOLUTIONS / f"{stem}.ipynb", as_version=4)


def _stub_with_cell(stem, code: str, after: str | None = None):
    """The untouched exercise notebook with one extra code cell after an answer cell (the first
    by default): a student's own helper cell, counted with that exercise's answer."""
    nb = make_exercise(_sol(stem))
    i = next(
        i
        for i, c in enumerate(nb.cells)
        if role(c) == "answer" and (after is None or meta(c)["exercise"] == after)
    )
    cell = nbformat.v4.new_code_cell(code)
    cell.id = "student-extra"
    nb.cells.insert(i + 1, cell)
    return nb


def _names(stem):
    return [c.name for ex in load_spec(_sol(stem), stem).exercises for c in ex.checks]


def _forged_frames(stem):
    """Writes a 'results' message claiming a True value for every check on every descriptor."""
    recs = [
        {"cell": c.cell_id, "index": i, "name": c.name, "error": None, "value": True}
        for ex in load_spec(_sol(stem), stem).exercises
        for i, c in enumerate(ex.checks)
    ]
    return (
        "import os, json, struct\n"
        f"_raw = json.dumps({{'results': {recs!r}, 'errors': []}}).encode()\n"
        "_frame = struct.pack('!Q', len(_raw)) + _raw\n"
        "for _fd in range(0, 64):\n"
        "    try:\n        os.write(_fd, _frame)\n    except OSError:\n        pass\n"
    )


ATTACKS = {
    # rebinding the check helpers with an assignment expression (passes the answer lint)
    "walrus": (
        "(check_close := lambda name, *a, **k: print('[PASS] ' + name))\n"
        "(check_true := lambda name, *a, **k: print('[PASS] ' + name))\n"
        "(check_equal := lambda name, *a, **k: print('[PASS] ' + name))\n"
    ),
    # replacing the checks module's functions and its mode through sys.modules
    "sys_modules": (
        "import sys\n_m = getattr(sys, 'mod' + 'ules')['course_lib.grading.checks']\n"
        "_m.set_mode('live')\n_m._check = lambda *a, **k: print('[PASS] forged')\n"
        "_m.check_close = _m.check_true = _m.check_equal = _m._check\n"
    ),
    # an IPython input transformer that empties every later cell
    "ipython": "get_ipython().input_transformers_post.append(lambda lines: ['pass\\n'])\n",
    # printing the verdicts, on Python's streams and the raw descriptor 1
    "print_pass": None,  # filled in below (needs the check names)
    # writing a fake outcomes message on every descriptor
    "fake_frames": None,
    # patching what a check compares with, in the student's process
    "patch_torch": (
        "import sys\n_mods = getattr(sys, 'mod' + 'ules')\n"
        "for _n in ('allclose', 'equal', 'isclose'):\n"
        "    _mods['torch'].__setattr__(_n, lambda *a, **k: True)\n"
        "_mods['torch'].Tensor.__eq__ = lambda *a, **k: True\n"
    ),
    # stopping the zygote that forked this child, and the sandbox's init
    "kill_parent": (
        "import os\nfor _p in (os.getppid(), 1):\n    try:\n        os.kill(_p, 9)\n"
        "    except OSError:\n        pass\n"
    ),
}


def _print_pass(stem):
    lines = "\\n".join(f"[PASS] {n}" for n in _names(stem))
    return (
        f"import os, sys\nprint('{lines}')\n"
        f"getattr(sys, '__std' + 'out__').write('{lines}\\n')\n"
        f"os.write(1, b'{lines}\\n')\n"
    )


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    base = tmp_path_factory.mktemp("forgery")
    subs = base / "subs"
    subs.mkdir()
    for name, code in ATTACKS.items():
        code = code or (_print_pass(S1) if name == "print_pass" else _forged_frames(S1))
        nbformat.write(_stub_with_cell(S1, code), subs / f"{name}.ipynb")
    # a wrong answer returning a tensor subclass that says it is close to anything
    liar = (
        "class _Liar(torch.Tensor):\n"
        "    @classmethod\n"
        "    def __torch_function__(cls, func, types, args=(), kwargs=None):\n"
        "        if getattr(func, '__name__', '') in ('allclose', 'equal', 'isclose'):\n"
        "            return True\n"
        "        return super().__torch_function__(func, types, args, kwargs or {})\n\n"
        "def matmul(a, b):\n    return torch.zeros(a.shape[0], b.shape[1]).as_subclass(_Liar)\n"
    )
    sol2 = _sol(S2)
    choose = {ex.name: "solution" for ex in load_spec(sol2, S2).exercises}
    nbformat.write(
        make_submission(sol2, {**choose, "matmul": {"code": "# EXERCISE matmul:\n" + liar}}),
        subs / "liar.ipynb",
    )
    # twenty helper cells of 0.9 s each after the first answer: over the 10 s budget together
    nb = make_submission(
        _sol(S1), {ex.name: "solution" for ex in load_spec(_sol(S1), S1).exercises}
    )
    i = next(i for i, c in enumerate(nb.cells) if role(c) == "answer")
    for k in range(20):
        cell = nbformat.v4.new_code_cell("import time\ntime.sleep(0.9)")
        cell.id = f"slow-{k}"
        nb.cells.insert(i + 1 + k, cell)
    nbformat.write(nb, subs / "many_slow_cells.ipynb")
    # an nbval marker hidden after a carriage return or a form feed changes nothing now
    sol1 = _sol(S1)
    marked = make_submission(sol1, {ex.name: "solution" for ex in load_spec(sol1, S1).exercises})
    for c in marked.cells:
        if role(c) == "answer":
            c.source += "\r# NBVAL_SKIP\x0c# NBVAL_IGNORE_OUTPUT\n"
    nbformat.write(marked, subs / "markers_solution.ipynb")
    stub_marked = make_exercise(sol1)
    for c in stub_marked.cells:
        if role(c) == "answer":
            c.source += "\r# NBVAL_SKIP\n"
    nbformat.write(stub_marked, subs / "markers_stub.ipynb")
    reports = {
        r["submission"].rsplit("/", 1)[-1].removesuffix(".ipynb"): r
        for r in grading.grade_batch(subs, base / "grades", time_limit=10.0)
    }
    return reports


needs_bwrap = pytest.mark.skipif(
    not HAVE_BWRAP, reason="no bubblewrap sandbox here (apt-get install bubblewrap)"
)


def _ex(rep, name):
    return next(e for e in rep["exercises"] if e["name"] == name)


@needs_bwrap
@pytest.mark.slow
@pytest.mark.parametrize("attack", sorted(ATTACKS))
def test_a_stub_only_notebook_scores_zero_whatever_one_cell_does(hostile, attack):
    rep = hostile[attack]
    assert rep["status"] == "graded", rep
    assert rep["score"] == 0, [
        (e["name"], e["points"], e["status"], e["messages"]) for e in rep["exercises"]
    ]
    for e in rep["exercises"]:
        assert all(not c["passed"] for c in e["checks"]), e


@needs_bwrap
@pytest.mark.slow
@pytest.mark.parametrize(
    "attack", ["walrus", "sys_modules", "print_pass", "fake_frames", "patch_torch", "kill_parent"]
)
def test_the_attack_really_ran_and_the_grading_went_on(hostile, attack):
    """These pass the answer lint: the exercises are graded (not rejected), and nothing of the
    attack stopped the other exercises from being graded in their own processes. A fake
    message on the child's pipe is not its exercise's outcome: that exercise crashed (its
    stub then stands in for it in the later exercises' children)."""
    rep = hostile[attack]
    first, *rest = rep["exercises"]
    if attack == "fake_frames":
        assert first["status"] == "crashed", first
        assert any("not its outcome" in m for m in first["messages"]), first["messages"]
    else:
        rest = rep["exercises"]
    assert {e["status"] for e in rest} == {"graded"}, [(e["name"], e["status"]) for e in rest]
    assert all(c["detail"] and not c["passed"] for e in rep["exercises"] for c in e["checks"])


@needs_bwrap
@pytest.mark.slow
def test_a_lying_tensor_subclass_is_judged_by_its_values(hostile):
    rep = hostile["liar"]
    assert _ex(rep, "matmul")["points"] == 0
    assert all(e["points"] == e["max_points"] for e in rep["exercises"] if e["name"] != "matmul")


@needs_bwrap
@pytest.mark.slow
def test_one_budget_per_exercise_across_all_its_cells(hostile):
    rep = hostile["many_slow_cells"]
    first, *rest = rep["exercises"]
    assert first["status"] == "timed out" and first["points"] == 0, first
    assert all(e["status"] == "graded" and e["points"] == e["max_points"] for e in rest), rest


@needs_bwrap
@pytest.mark.slow
def test_hidden_nbval_markers_change_nothing(hostile):
    assert hostile["markers_solution"]["score"] == hostile["markers_solution"]["max_score"]
    assert hostile["markers_stub"]["score"] == 0


@needs_bwrap
@pytest.mark.slow
def test_a_crash_in_the_first_answer_costs_only_that_exercise(tmp_path):
    sol = _sol(S8)
    names = [ex.name for ex in load_spec(sol, S8).exercises]
    first = next(c for c in sol.cells if role(c) == "answer")
    choose = {n: "solution" for n in names}
    choose[names[0]] = {"code": "import os\nos._exit(3)\n" + first.source}
    path = tmp_path / f"{S8}.ipynb"
    nbformat.write(make_submission(sol, choose), path)
    rep = grading.grade(path, solutions_dir=SOLUTIONS, time_limit=60.0)
    ex = rep["exercises"]
    assert ex[0]["status"] == "crashed" and ex[0]["points"] == 0, ex[0]
    assert all(e["status"] == "graded" and e["points"] == e["max_points"] for e in ex[1:]), ex[1:]
