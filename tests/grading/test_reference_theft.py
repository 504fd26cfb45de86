"""Reference theft (issue 34, item 1), graded through ``course-grade --batch`` with the sandbox on.

Each submission answers two exercises of 04_attention (``attention``: three checks,
``multi_head_attention``: two) with code that computes nothing: it looks for the check's
reference in its own process and returns whatever tensor of the right shape it finds there that
is not one of its inputs. One route per submission: up the stack (``sys._getframe``), through a
traceback, through ``gc``, through ``inspect.stack()``; each is spelled so that the answer lint
accepts it (the lint is advice; the split is what holds). Before issue 34 the reference was an
argument of the running ``check_close`` (and some were globals of the check cell), so these
answers scored points; now a check cell runs in the student's process only as its student
program, and every stolen check fails.

``test_each_route_finds_a_reference_when_there_is_one`` shows the same answers do steal when a
reference is up the stack or alive in the process: the test can fail.
"""

from __future__ import annotations

import builtins
import gc
from pathlib import Path

import nbformat
import pytest
import torch

from course_lib.grading.grade import grade_batch
from course_lib.grading.lint import lint_answer, trusted_bindings
from course_lib.grading.sandbox import probe
from course_lib.grading.spec import load_spec
from tools.exercises import SOLUTIONS, make_submission

STEM = "04_attention"
STOLEN = ("attention", "multi_head_attention")

# Each route: a function _loot() -> the tensors it can see (a list), spelled past the lint.
ROUTES = {
    "frames": '''
def _loot():
    found, f = [], getattr(sys, "_get" + "frame")(1)
    while f is not None:
        found += list(getattr(f, "f_loc" + "als").values())
        f = getattr(f, "f_ba" + "ck")
    return found
''',
    "traceback": '''
def _loot():
    try:
        raise LookupError("where am I")
    except LookupError as e:
        f = e.__traceback__.tb_frame
    found = []
    while f is not None:
        found += list(getattr(f, "f_loc" + "als").values())
        f = getattr(f, "f_ba" + "ck")
    return found
''',
    "gc": '''
def _loot():
    collector = getattr(sys, "mod" + "ules")["g" + "c"]
    return [o for o in collector.get_objects() if isinstance(o, torch.Tensor)]
''',
    "inspect": '''
def _loot():
    stack = getattr(sys, "mod" + "ules")["insp" + "ect"].stack(0)
    found = []
    for info in stack:
        found += list(getattr(info.frame, "f_loc" + "als").values())
    return found
''',
}

THIEF = '''
def _tensors(things):
    out = []
    for t in things:
        if isinstance(t, torch.Tensor):
            out.append(t)
        elif isinstance(t, (tuple, list)) and len(t) < 10:
            out += _tensors(t)
    return out


def _steal(shape, inputs):
    """A tensor of this shape found in the process that is not one of the inputs, or zeros."""
    for t in _tensors(_loot()):
        if tuple(t.shape) == tuple(shape) and t.dtype == torch.float32:
            if not any(t is i for i in inputs):
                return t.detach().clone()
    return torch.zeros(shape)
'''

ATTENTION = '''
def attention(q, k, v, mask=None):
    out = (*q.shape[:-1], v.shape[-1])
    weights = (*q.shape[:-1], k.shape[-2])
    return _steal(out, (q, k, v)), _steal(weights, (q, k, v))
'''

MHA = '''
def multi_head_attention(x, W_q, W_k, W_v, W_o, n_heads, causal=False):
    return _steal(x.shape, (x, W_q, W_k, W_v, W_o))
'''


def _answers(route: str) -> dict[str, str]:
    helpers = "import sys\n" + ROUTES[route] + THIEF
    return {
        "attention": "# EXERCISE attention: your answer goes in this cell\n" + helpers + ATTENTION,
        "multi_head_attention": "# EXERCISE multi_head_attention: your answer\n" + helpers + MHA,
    }


def _sol():
    return nbformat.read(SOLUTIONS / f"{STEM}.ipynb", as_version=4)


def test_the_answer_lint_accepts_every_route():
    """The thefts are not stopped early: the lint (advice) lets them through to the run."""
    sol = _sol()
    spec = load_spec(sol, STEM)
    trusted, check_only = trusted_bindings(sol, spec)
    for route in ROUTES:
        for name, code in _answers(route).items():
            ex = spec.exercise(name)
            assert lint_answer(code, trusted, ex.forbid, name, check_only) == [], (route, name)


@pytest.mark.parametrize("route", sorted(ROUTES))
def test_each_route_finds_a_reference_when_there_is_one(route):
    """In a process where a check helper holds the reference while it calls the student's
    code (the grader before issue 34), each route returns that reference: 3 of 3."""
    ns: dict = {"__name__": "__main__", "__builtins__": builtins, "torch": torch}
    exec(compile(_answers(route)["attention"], "answer", "exec"), ns)  # noqa: S102
    q, k, v = torch.randn(2, 5, 8), torch.randn(2, 5, 8), torch.randn(2, 5, 6)

    def check_close(student, reference):  # what the old student mode did around the call
        return student()

    want = torch.nn.functional.scaled_dot_product_attention(q, k, v)
    got = check_close(lambda: ns["attention"](q, k, v)[0], want)
    assert torch.equal(got, want)
    del want, got
    gc.collect()
    got = check_close(lambda: ns["attention"](q, k, v)[0], torch.zeros(0))
    assert not got.any()  # nothing to steal: zeros


@pytest.fixture(scope="module")
def thefts(tmp_path_factory):
    if probe()[0] is None:
        pytest.skip("no bubblewrap sandbox here")
    sol = _sol()
    folder = tmp_path_factory.mktemp("thefts")
    for route in ROUTES:
        choose = {name: {"code": code} for name, code in _answers(route).items()}
        nbformat.write(make_submission(sol, choose), folder / f"{route}_{STEM}.ipynb")
    honest = make_submission(sol, {name: "solution" for name in STOLEN})
    nbformat.write(honest, folder / f"honest_{STEM}.ipynb")
    reports = grade_batch(
        folder, folder / "_grades", sandbox=True, solutions_dir=SOLUTIONS, time_limit=60.0
    )
    return {Path(r["submission"]).name.split("_")[0]: r for r in reports}


@pytest.mark.slow
@pytest.mark.parametrize("route", sorted(ROUTES))
def test_stolen_checks_score_nothing(thefts, route):
    rep = thefts[route]
    assert rep["status"] == "graded" and rep["sandbox"] == "bwrap", rep
    for name in STOLEN:
        ex = next(e for e in rep["exercises"] if e["name"] == name)
        assert ex["status"] == "graded", ex  # it ran: not rejected, not crashed
        assert ex["points"] == 0 and not any(c["passed"] for c in ex["checks"]), (route, ex)
        assert all("differ" in c["detail"] for c in ex["checks"]), (route, ex["checks"])


@pytest.mark.slow
def test_the_honest_control_scores_full_marks(thefts):
    rep = thefts["honest"]
    for name in STOLEN:
        ex = next(e for e in rep["exercises"] if e["name"] == name)
        assert ex["points"] == ex["max_points"] and ex["max_points"] > 0, ex
