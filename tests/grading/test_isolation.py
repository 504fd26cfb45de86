"""One submission cannot reach another (issue 34): a class graded by the real ``course-grade
--batch`` in the bubblewrap sandbox, one grading at a time, hostile students first and honest
classmates after.

Each hostile answer runs its attack through ``exec`` reached by ``getattr`` (so the answer lint
does not refuse it: the sandbox, not the lint, must hold), recording each step that worked in
``ok``, and then defines the solution, broken if any did; an attack through another ABI
(``int 0x80``) kills its process.
The classes of attack, each tried on every process the child can see:

- ``int 0x80`` (the i386 ABI from a 64-bit process): fork (a daemon that kills every later
  process and keeps leaving files), kill, ptrace;
- every signal route to another process: kill, tkill, tgkill, rt_sigqueueinfo,
  rt_tgsigqueueinfo, pidfd_send_signal, kill(0) and kill(-1), and F_SETOWN (SIGIO);
- ``/proc/<pid>/mem``, ``/proc/<pid>/fd/<n>`` (the zygote's pipes: writing a forged plan or
  outcome into them) and ``pidfd_getfd``;
- files, shared memory and sockets left behind; an outcome followed by a sleep;
- a classmate graded later who looks for any of that, and for earlier answers in its memory.

The honest classmates graded after the attackers keep full marks, and no report holds anything
of another submission.
"""

from __future__ import annotations

import json
import shutil
import uuid

import nbformat
import pytest
from hostile_support import (
    FORK_DAEMON,
    KILL,
    LEAVE,
    LOOK_AROUND,
    MEMORY,
    OUTCOME_THEN_SLEEP,
    PROC,
    PTRACE,
    SIGNALS,
    unseen,
)

from course_lib.grading import grade as grading
from course_lib.grading import sandbox as sandboxing
from tools.exercises import SOLUTIONS, load_spec, make_submission

HAVE_BWRAP = sandboxing.probe()[0] is not None
needs_bwrap = pytest.mark.skipif(
    not HAVE_BWRAP,
    reason=f"no bubblewrap sandbox here: {sandboxing.probe()[1]} "
    "(CI installs it: apt-get install bubblewrap)",
)
STEM = "01_why_transformers"
TIME_LIMIT = 20.0
D, L, P, R = "dependence", "layers_to_connect", "predict_path_lengths", "rnn_forward"
MARK = "zq" + "_canary_"  # + 32 hex digits: one per submission


def _solution(name: str) -> str:
    sol = nbformat.read(SOLUTIONS / f"{STEM}.ipynb", as_version=4)
    return next(c.source for c in sol.cells if c.get("id") == f"{name.replace('_', '-')}-answer")


def _marked(name: str, marker: str) -> str:
    """The solution, carrying the submission's marker (as a comment and as a string)."""
    return f"{_solution(name)}\n# {marker}\n_marker = {marker!r}\n"


def _attack(name: str, attack: str, marker: str) -> dict:
    """An answer that runs ``attack`` unseen by the lint, then defines the solution, broken
    (None) if the attack got through."""
    code = unseen(attack, marker) + _marked(name, marker)
    return {"code": code + f"\nif _got_through:\n    {name} = None\n"}


def _submission(marker: str, **attacks) -> nbformat.NotebookNode:
    sol = nbformat.read(SOLUTIONS / f"{STEM}.ipynb", as_version=4)
    names = [ex.name for ex in load_spec(sol, STEM).exercises]
    choose = {n: {"code": _marked(n, marker)} for n in names}
    choose.update({n: _attack(n, a, marker) for n, a in attacks.items()})
    return make_submission(sol, choose)


# graded in this order (one at a time): the attackers, the honest classmates, the accomplice
CLASS = {
    "a1_int80": {D: FORK_DAEMON, L: KILL, R: PTRACE},
    "a2_signals": {D: SIGNALS},
    "a3_proc": {D: PROC},
    "a4_leave": {D: LEAVE},
    "a5_outcome_then_sleep": {D: OUTCOME_THEN_SLEEP},
    "b_honest_1": {},
    "b_honest_2": {},
    "b_honest_3": {},
    "z_accomplice": {D: LOOK_AROUND, L: MEMORY},
}


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    base = tmp_path_factory.mktemp("isolation")
    sols = base / "solutions"
    shutil.copytree(SOLUTIONS, sols)
    folder = base / "class"
    folder.mkdir()
    markers = {}
    for name, attacks in CLASS.items():
        markers[name] = MARK + uuid.uuid4().hex
        nbformat.write(_submission(markers[name], **attacks), folder / f"{name}.ipynb")
    out = base / "grades"
    code = grading.main(
        ["--batch", str(folder), "--out", str(out), "--solutions", str(sols), "--workers", "1",
         "--time-limit", str(TIME_LIMIT)]
    )  # fmt: skip
    texts = {p.name.removesuffix(".grade.json"): p.read_text() for p in out.glob("*.grade.json")}
    return {
        "code": code,
        "texts": texts,
        "reports": {k: json.loads(v) for k, v in texts.items()},
        "markers": markers,
    }


def _ex(rep, name):
    return next(e for e in rep["exercises"] if e["name"] == name)


def _full(rep, *names):
    for e in rep["exercises"]:
        if not names or e["name"] in names:
            assert e["status"] == "graded" and e["points"] == e["max_points"], e


def _killed_by_the_filter(rep, name):
    e = _ex(rep, name)
    assert e["status"] == "crashed" and e["points"] == 0, e
    assert any("SIGSYS" in m for m in e["messages"]), e["messages"]


@needs_bwrap
@pytest.mark.slow
def test_int80_fork_kill_and_ptrace_kill_the_process(graded):
    rep = graded["reports"]["a1_int80"]
    for name in (D, L, R):
        _killed_by_the_filter(rep, name)
    others = [e["name"] for e in rep["exercises"] if e["name"] not in (D, L, R)]
    _full(rep, *others)


@needs_bwrap
@pytest.mark.slow
def test_no_signal_route_reaches_another_process(graded):
    _full(graded["reports"]["a2_signals"])


@needs_bwrap
@pytest.mark.slow
def test_no_other_process_memory_descriptors_or_pipes(graded):
    _full(graded["reports"]["a3_proc"])


@needs_bwrap
@pytest.mark.slow
def test_an_outcome_then_a_sleep_does_not_hold_the_grading(graded):
    rep = graded["reports"]["a5_outcome_then_sleep"]
    assert rep["status"] == "graded", rep
    assert rep["seconds"] < TIME_LIMIT * len(rep["exercises"]), rep["seconds"]
    e = _ex(rep, D)
    assert e["status"] == "graded" and e["points"] == 0, e  # its forged outcome: no checks ran
    # each later exercise's child reruns that answer first: its outcome is then a message
    # about another exercise, which ends that child as a crash (the attacker's loss alone)
    for e in rep["exercises"][1:]:
        assert e["status"] == "crashed", e
        assert any("not its outcome" in m for m in e["messages"]), e["messages"]


@needs_bwrap
@pytest.mark.slow
def test_nothing_left_behind_reaches_a_later_submission(graded):
    """No file, process, shared memory segment, nor an earlier submission's answer in its own
    memory: the accomplice graded last finds nothing."""
    _full(graded["reports"]["a4_leave"])
    _full(graded["reports"]["z_accomplice"])


@needs_bwrap
@pytest.mark.slow
def test_honest_classmates_graded_after_the_attackers_keep_their_marks(graded):
    """Graded after every attack above, in the same batch and grader thread: full marks, and
    no report (theirs or anyone's) holds anything of another submission."""
    assert graded["code"] == 0
    reps = graded["reports"]
    assert sorted(reps) == sorted(CLASS)
    for name in ("b_honest_1", "b_honest_2", "b_honest_3"):
        assert reps[name]["status"] == "graded", reps[name]
        assert reps[name]["score"] == reps[name]["max_score"], [
            (e["name"], e["points"], e["status"], e["messages"]) for e in reps[name]["exercises"]
        ]
    for name, text in graded["texts"].items():
        for other, marker in graded["markers"].items():
            if other != name:
                assert marker not in text, (name, other)


# ---------------------------------------------------------------- the protocol (fast)
def test_the_sandbox_may_send_only_its_own_messages_in_order():
    """The grader's side of the protocol (``runner._Expect``): every message tagged with this
    submission's token; ready, then each exercise's start and outcome in the plan's order,
    then done. Anything else is flagged."""
    from course_lib.grading.runner import _Expect

    tok = "t0k"

    def run(frames):
        e = _Expect(tok, ["a", "b"])
        for f in frames:
            e.take(f)
            if e.unexpected:
                break
        return e

    good = [
        {"sub": tok, "ready": True, "seconds": 0.1},
        {"sub": tok, "start": "a"},
        {"sub": tok, "exercise": "a", "status": "graded", "results": []},
        {"sub": tok, "start": "b"},
        {"sub": tok, "exercise": "b", "status": "crashed", "why": "x"},
        {"sub": tok, "done": True},
    ]
    e = run(good)
    assert e.done and not e.unexpected and e.next == 2
    bad = {
        "another submission's token": [{**good[0], "sub": "other"}],
        "not a dict": [["ready"]],
        "a start before ready": [good[1]],
        "an exercise out of order": [good[0], {"sub": tok, "start": "b"}],
        "an exercise it was not given": [good[0], {"sub": tok, "start": "zz"}],
        "the outcome of another exercise": [good[0], good[1], {**good[2], "exercise": "b"}],
        "an outcome without a start": [good[0], good[2]],
        "done too early": [good[0], good[1], good[2], good[5]],
        "ready twice": [good[0], good[0]],
        "an unknown kind": [good[0], {"sub": tok, "idle": True}],
    }
    for why, frames in bad.items():
        assert run(frames).unexpected, why


def test_an_unexpected_message_fails_that_submission_alone(monkeypatch, tmp_path):
    """A sandbox whose messages break the protocol is stopped and its submission reported as a
    grader error (one row of its own in a batch); the next grading gets a fresh sandbox."""
    from course_lib.grading import runner

    class Forger:
        stopped = False

        def send(self, plan, deadline):
            self.token = plan["token"]

        def frames(self, deadline):
            yield {"sub": self.token, "ready": True, "seconds": 0.0}
            yield {"sub": "someone-else", "start": "dependence"}

        def stop(self):
            Forger.stopped = True
            return ""

    monkeypatch.setattr(runner._SPARES, "take", lambda sandbox, threads: Forger())
    sub = tmp_path / f"{STEM}.ipynb"
    sol = nbformat.read(SOLUTIONS / f"{STEM}.ipynb", as_version=4)
    nbformat.write(make_submission(sol, {}), sub)
    rep = grading.grade_one(sub, solutions_dir=SOLUTIONS, sandbox=False)
    assert rep["status"] == "grader error", rep
    assert "not tagged with this submission" in rep["error"] and Forger.stopped
