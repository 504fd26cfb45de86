"""Running one grading: the student's process and the checker, side by side.

- the **student's process** (``student``): a zygote in a bubblewrap sandbox of its own
  (``sandbox``), one sandbox per submission, forking one fresh child per exercise that runs the
  student's answers under the seccomp allow-list (``lockdown``) and records what the student's
  code returns, as plain data;
- the **checker** (``checker``): a trusted process that never runs student code; it runs the
  trusted cells and judges each outcome as the student's process reports it.

``run_exercises`` starts both, hands the sandbox its plan (the only thing that goes in: the
plan of one submission, read only inside that submission's sandbox) and passes each exercise's
outcome from the one to the other as it arrives. The sandbox's messages are untrusted: each
must carry this submission's token, in the order ``ready``, then ``start`` and the outcome of
each exercise of the plan in turn, then ``done``; a message that is anything else stops the
sandbox and fails this submission alone (``GraderError``: a row of its own in a batch). Every
wait has a deadline (handing over the plan, each message, stopping the sandbox, the checker's
socket). If the sandbox dies as a whole, the exercise it was running crashed and a fresh
sandbox runs the exercises left.

Sandboxes are started ahead of need (``_Spares``): in a batch, each grading, once its own
sandbox is ready, also starts the sandbox of the next one, so that its start (Python and
torch, about 1.5 s of CPU) overlaps with this grading. A spare has read no plan and is no
one's until taken; every sandbox serves exactly one submission and is then stopped with all it
held. ``run_exercises`` returns what happened to each exercise and the checker's verdicts.
"""

from __future__ import annotations

import ast
import atexit
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from . import sandbox as sandboxing
from .checker import Checker
from .notebooks import GraderError
from .spec import NotebookSpec, meta, parse, role
from .split import student_cells
from .student import PLAN_WAIT
from .wire import FrameBuffer, WireError, one_line, write_frame_by

__all__ = [
    "student_plan",
    "checker_plan",
    "student_names",
    "run_exercises",
    "prefetch",
    "close_spares",
    "ExerciseRun",
    "RunOutcome",
    "FILE_SIZE_MB",
]

FILE_SIZE_MB = 256  # largest file the student's code may write
_STATUSES = ("graded", "timed out", "crashed")
_SEND_WAIT = 180.0  # seconds for a sandbox to take its plan (it may still be importing torch)
_STOP_WAIT = 10.0  # seconds for a killed sandbox to be gone
_DEBUG = bool(os.environ.get("COURSE_GRADE_DEBUG"))  # timings of a grading's stages on stderr


@dataclass
class ExerciseRun:
    """What happened to one exercise: ``graded`` (its outcomes were judged), ``timed out``,
    ``crashed`` or ``rejected``; the checker's verdicts, and the errors its answer cells raised."""

    status: str
    verdicts: list[dict] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    checker_errors: list[str] = field(default_factory=list)
    why: str = ""
    seconds: float = 0.0


@dataclass
class RunOutcome:
    exercises: dict[str, ExerciseRun]
    passes: int


# --------------------------------------------------------------------------- the plans
def _cells(sol, roles: tuple[str, ...]) -> list[dict]:
    out = []
    for cell in sol.cells:
        r = role(cell)
        if cell.cell_type != "code" or r not in roles or cell.get("id") == "colab-setup":
            continue  # the Colab cell installs course_lib on Colab only: nothing to run here
        out.append(
            {
                "id": cell.id,
                "role": r,
                "exercise": meta(cell).get("exercise"),
                "source": cell.source if r != "answer" else "",
            }
        )
    return out


def student_names(sol) -> list[str]:
    """The names the solution's answer cells define at top level (what check cells call)."""
    names: set[str] = set()
    for cell in sol.cells:
        if cell.cell_type == "code" and role(cell) == "answer":
            for node in parse(cell.source).body:
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    names.add(node.name)
                elif isinstance(node, (ast.Assign, ast.AnnAssign)):
                    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                    names.update(
                        n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)
                    )
    return sorted(names)


def student_plan(
    sol,
    spec: NotebookSpec,
    answers: dict[str, list[str]],
    stubs: dict[str, list[str]],
    todo: list[str],
    stubbed: set[str],
    time_limit: float,
    memory_mb: int,
    threads: int | None,
) -> dict:
    """What the student's process is sent: the cells in order (answers by exercise; check
    cells as their student programs, ``split``: no reference, predicate or hint in them), each
    exercise's answer code and stub, which exercises to run, and the limits."""
    return {
        "cells": student_cells(sol),
        "exercises": [
            {
                "name": ex.name,
                "forbid": list(ex.forbid),
                "answers": list(answers[ex.name]),
                "stub": list(stubs[ex.name]),
            }
            for ex in spec.exercises
        ],
        "todo": list(todo),
        "stubbed": sorted(stubbed),
        "time_limit": float(time_limit),
        "memory_mb": int(memory_mb or 0),
        "fsize_mb": FILE_SIZE_MB,
        "threads": int(threads or 0),
    }


def checker_plan(sol) -> dict:
    return {"cells": _cells(sol, ("setup", "check")), "student_names": student_names(sol)}


# --------------------------------------------------------------------------- the student's process
def _host_env(threads: int | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("COURSE_LIB_SOURCE", "PYTEST_ADDOPTS")}
    env.update(
        PYTHONHASHSEED="0", MPLBACKEND="Agg", PYTHONDONTWRITEBYTECODE="1", PYTHONSAFEPATH="1"
    )
    if threads:
        env["OMP_NUM_THREADS"] = env["MKL_NUM_THREADS"] = str(threads)
    return env


class _Sandbox:
    """One submission's student process: a fresh bubblewrap sandbox (unsandboxed: a fresh
    process in a fresh temporary folder) with two fresh pipes, used for exactly one plan and
    then stopped with everything in it."""

    def __init__(self, sandbox: sandboxing.Sandbox | None, threads: int | None) -> None:
        plan_r, plan_w = os.pipe()
        out_r, out_w = os.pipe()
        argv = [sys.executable, "-m", "course_lib.grading.student", str(plan_r), str(out_w)]
        self.workdir = None
        if sandbox is not None:
            cmd = sandboxing.command(sandbox, argv, {}, sandboxing.inner_env(threads))
            env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
            cwd = None
        else:
            self.workdir = tempfile.mkdtemp(prefix="course-grade-student-")
            cmd, env, cwd = (
                argv,
                {**_host_env(threads), "COURSE_SCRATCH": self.workdir},
                self.workdir,
            )
        # the zygote's stderr (a Python traceback if the trusted setup fails): a file, which
        # never blocks it; the children's go to /dev/null
        self.errors = tempfile.TemporaryFile()
        try:
            self.proc = subprocess.Popen(
                cmd,
                cwd=cwd,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=self.errors,
                start_new_session=True,
                pass_fds=(plan_r, out_w),
            )
        except BaseException:
            for fd in (plan_w, out_r):
                os.close(fd)
            raise
        finally:
            os.close(plan_r)
            os.close(out_w)
        self.plan_w, self.out_r = plan_w, out_r
        self.reader = FrameBuffer(out_r)
        self.born = time.monotonic()

    def alive(self) -> bool:
        return self.proc.poll() is None and time.monotonic() - self.born < PLAN_WAIT - 60

    def send(self, plan: dict, deadline: float) -> None:
        """Hand the sandbox its one plan (OSError or TimeoutError if it does not take it)."""
        try:
            write_frame_by(self.plan_w, plan, deadline)
        finally:
            os.close(self.plan_w)
            self.plan_w = -1

    def frames(self, deadline: float):
        """Yield the sandbox's messages until it ends or the deadline passes (WireError for a
        malformed one)."""
        while True:
            got = self.reader.wait(deadline)
            yield from got
            if self.reader.eof or (not got and time.monotonic() >= deadline):
                return

    def stop(self) -> str:
        """Kill the sandbox (its process group: bwrap, and with its PID namespace everything
        in it) and return the end of the zygote's stderr."""
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            self.proc.wait(timeout=_STOP_WAIT)
        except subprocess.TimeoutExpired:
            pass
        for fd in (self.plan_w, self.out_r):
            if fd >= 0:
                try:
                    os.close(fd)
                except OSError:
                    pass
        self.plan_w = self.out_r = -1
        err = b""
        try:
            size = self.errors.seek(0, os.SEEK_END)
            self.errors.seek(max(0, size - 3000))
            err = self.errors.read()
        except (OSError, ValueError):
            pass
        finally:
            self.errors.close()
        if self.workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)
        return err.decode(errors="replace")


class _Spares:
    """Sandboxes started ahead of need. Once a process has graded a submission (a batch, a
    Dask worker), a grading that takes a sandbox also starts one for the grading after it, so
    that the next sandbox's start (Python and torch: ~1.5 s of CPU) overlaps with this
    grading; at most one spare per grading in progress (``prefetch`` forces it on or off). A
    spare has read no plan: it is no one's until taken, and each sandbox serves one
    submission."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.ready: dict[tuple, list[_Sandbox]] = {}
        self.active: dict[tuple, int] = {}
        self.enabled: bool | None = None  # None: after the first grading of this process
        self.taken = 0
        atexit.register(self.close)

    def take(self, sandbox: sandboxing.Sandbox | None, threads: int | None) -> _Sandbox:
        key = (sandbox, threads)
        stale: list[_Sandbox] = []
        box = None
        with self.lock:
            spares = self.ready.setdefault(key, [])
            while spares and box is None:
                cand = spares.pop(0)
                if cand.alive():
                    box = cand
                else:
                    stale.append(cand)
            self.active[key] = self.active.get(key, 0) + 1
            enabled = self.taken > 0 if self.enabled is None else self.enabled
            want = enabled and len(spares) < self.active[key]
            self.taken += 1
        for s in stale:
            s.stop()
        if box is None:
            box = _Sandbox(sandbox, threads)
        if want:
            spare = _Sandbox(sandbox, threads)
            with self.lock:
                self.ready.setdefault(key, []).append(spare)
        return box

    def done(self, sandbox: sandboxing.Sandbox | None, threads: int | None) -> None:
        with self.lock:
            key = (sandbox, threads)
            self.active[key] = max(0, self.active.get(key, 0) - 1)

    def close(self) -> None:
        with self.lock:
            boxes = [b for bs in self.ready.values() for b in bs]
            self.ready.clear()
        for b in boxes:
            b.stop()


_SPARES = _Spares()


def prefetch(enabled: bool | None) -> None:
    """Start each next sandbox ahead of need: True always, False never (and stop the spares),
    None after this process's first grading (the default)."""
    _SPARES.enabled = enabled
    if enabled is False:
        _SPARES.close()


def close_spares() -> None:
    """Stop the sandboxes started ahead (the end of a batch)."""
    _SPARES.close()


def _clean_errors(errors) -> list[str]:
    if not isinstance(errors, list):
        return []
    return [one_line(e) for e in errors[:20]]


class _Expect:
    """What the sandbox may send, in order: ``ready``; then for each exercise of the plan, in
    the plan's order, ``start`` and its outcome (``exercise``); then ``done``; every message a
    dict tagged with this submission's token (``sub``). Anything else sets ``unexpected``."""

    def __init__(self, token: str, todo: list[str]) -> None:
        self.token, self.todo = token, list(todo)
        self.ready, self.done = False, False
        self.current: str | None = None
        self.finished: str | None = None  # the exercise whose outcome the last message was
        self.next = 0
        self.unexpected = ""

    def take(self, f) -> None:
        self.finished = None
        if not isinstance(f, dict) or f.get("sub") != self.token:
            self.unexpected = "a message not tagged with this submission"
        elif f.keys() == {"sub", "ready", "seconds"} and not self.ready:
            self.ready = True
        elif f.keys() == {"sub", "start"} and self.ready and self.current is None:
            if self.next < len(self.todo) and f["start"] == self.todo[self.next]:
                self.current = f["start"]
            else:
                self.unexpected = "the start of an exercise it was not given, or out of order"
        elif "exercise" in f and "start" not in f and self.current is not None:
            if f["exercise"] != self.current:
                self.unexpected = "the outcome of an exercise other than the one it started"
            else:
                self.finished, self.current = self.current, None
                self.next += 1
        elif f.keys() == {"sub", "done"} and self.current is None and self.next == len(self.todo):
            self.done = True
        else:
            self.unexpected = "a message out of order or of an unknown kind"
        if self.unexpected:
            self.unexpected += f" ({one_line(json.dumps(f)[:120], 120)})"


def _uses_optimizers(sol, answers: dict[str, list[str]]) -> bool:
    """Whether the notebook's code names torch's optimizers (then the zygote pays their
    first-call cost once, before forking; a child that needs them anyway says so, and the
    zygote warms up before the next child)."""
    sources = [c.source for c in sol.cells if c.cell_type == "code"]
    sources += [a for codes in answers.values() for a in codes]
    return any("optim" in src for src in sources)


# --------------------------------------------------------------------------- one grading
def run_exercises(
    sol,
    spec: NotebookSpec,
    answers: dict[str, list[str]],
    stubs: dict[str, list[str]],
    skip: set[str],
    time_limit: float,
    memory_mb: int,
    threads: int | None,
    sandbox: sandboxing.Sandbox | None,
    tmp: Path,
    facts: dict[str, dict[str, dict]] | None = None,
) -> RunOutcome:
    """Grade every exercise not in ``skip`` (rejected: judged as not run). See the module
    docstring; a student process that dies as a whole is restarted for the exercises left.
    ``tmp`` receives what was sent and received (``--keep`` copies it: debugging). ``facts``:
    what the grader read in the saved submission for the predict-then-run checks, by exercise
    and check cell (``notebooks.prediction_facts``); they go to the checker only."""
    _t0 = time.monotonic()
    names = [ex.name for ex in spec.exercises]
    todo = [n for n in names if n not in skip]
    runs: dict[str, ExerciseRun] = {n: ExerciseRun("rejected") for n in skip}
    log = open(Path(tmp) / "messages.jsonl", "w")  # noqa: SIM115 - closed in the finally below
    checker = Checker(checker_plan(sol), wait_s=300 + 2.5 * time_limit * max(1, len(names)))
    sent: list[str] = []

    def flush() -> None:  # the checker takes the exercises in notebook order
        for n in names[len(sent) :]:
            if n not in runs:
                return
            r = runs[n]
            checker.send(
                {
                    "exercise": n,
                    "status": r.status,
                    "results": getattr(r, "_results", None),
                    "facts": (facts or {}).get(n, {}),
                }
            )
            sent.append(n)

    stubbed: set[str] = set()
    passes = 0
    warm = _uses_optimizers(sol, answers)
    try:
        while any(n not in runs for n in todo) and passes <= len(todo):
            passes += 1
            left = [n for n in todo if n not in runs]
            token = secrets.token_hex(8)
            plan = student_plan(
                sol, spec, answers, stubs, left, stubbed | skip, time_limit, memory_mb, threads
            )
            plan.update(token=token, warm=warm, require_filter=sandbox is not None)
            log.write(json.dumps({"student_plan": plan}) + "\n")
            hard = time.monotonic() + 240 + 2.5 * time_limit * len(left)
            box = _SPARES.take(sandbox, threads)
            state = _Expect(token, left)
            try:
                try:
                    box.send(plan, min(hard, time.monotonic() + _SEND_WAIT))
                except (OSError, TimeoutError) as exc:
                    raise GraderError(
                        f"the student's sandbox did not take its plan ({exc}):\n{box.stop()}"
                    ) from None
                try:
                    for f in box.frames(hard):
                        log.write(json.dumps({"from_student": f}) + "\n")
                        if _DEBUG:
                            print(
                                f"grade debug {time.monotonic() - _t0:7.2f} s: {str(f)[:100]}",
                                file=sys.stderr,
                            )
                        state.take(f)
                        if state.unexpected or state.done:
                            break
                        if state.finished is not None:
                            name, f = state.finished, f
                            status = f.get("status") if f.get("status") in _STATUSES else "crashed"
                            run = ExerciseRun(
                                status,
                                errors=_clean_errors(f.get("errors")),
                                why=one_line(f.get("why", ""), 200),
                                seconds=float(f["seconds"])
                                if type(f.get("seconds")) in (int, float)
                                else 0.0,
                            )
                            run._results = f.get("results") if status == "graded" else None  # type: ignore[attr-defined]
                            runs[name] = run
                            if status != "graded":
                                stubbed.add(name)
                            flush()
                except WireError as exc:
                    state.unexpected = f"a malformed message ({exc})"
            finally:
                err = box.stop()
                _SPARES.done(sandbox, threads)
            if state.unexpected:
                raise GraderError(
                    f"the student's sandbox sent {state.unexpected}, and was stopped; this "
                    "submission was not graded"
                )
            if not state.ready:
                raise GraderError(
                    f"the student's process did not finish the trusted setup cells:\n{err}"
                )
            if state.current is not None:  # the whole process died during this exercise
                runs[state.current] = ExerciseRun(
                    "crashed", why="the student's process ended during this exercise"
                )
                stubbed.add(state.current)
                flush()
            elif time.monotonic() >= hard and any(n not in runs for n in left):
                nxt = next(n for n in left if n not in runs)
                runs[nxt] = ExerciseRun("timed out", why="the grading's hard time limit")
                stubbed.add(nxt)
                flush()
        for n in todo:
            runs.setdefault(n, ExerciseRun("crashed", why="not run"))
        flush()
        result = checker.finish(timeout=120 + 2 * time_limit * len(names))
        if _DEBUG:
            print(f"grade debug {time.monotonic() - _t0:7.2f} s: checker done", file=sys.stderr)
        log.write(json.dumps({"from_checker": result}) + "\n")
    finally:
        checker.close()
        log.close()
    if "fatal" in result:
        raise GraderError(result["fatal"])
    verdicts = result.get("verdicts", {})
    for n, run in runs.items():
        run.verdicts = verdicts.get(n, []) if run.status == "graded" else []
        run.checker_errors = result.get("errors", {}).get(n, [])
        run.__dict__.pop("_results", None)
    return RunOutcome(runs, passes)
