"""Running one grading: the student's process and the checker, side by side.

- the **student's process** (``student``): a zygote in the bubblewrap sandbox (``sandbox``)
  where there is one, forking one fresh child per exercise that runs the student's answers and
  records what the student's code returns, as plain data;
- the **checker** (``checker``): a trusted process that never runs student code; it runs the
  trusted cells and judges each outcome as the student's process reports it.

``run_exercises`` starts both, passes each exercise's outcomes from the one to the other as
they arrive (validated: the sandbox's output is untrusted), and restarts the student's process
for the exercises still to run if it dies as a whole (a child cannot stop the zygote, see
``lockdown.confine``, but the design does not depend on it). It returns what happened to each
exercise and the checker's verdicts.
"""

from __future__ import annotations

import ast
import atexit
import json
import os
import select
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from . import sandbox as sandboxing
from .checker import Checker
from .notebooks import GraderError
from .spec import NotebookSpec, meta, parse, role
from .split import student_cells
from .student import FrameBuffer
from .wire import one_line, write_frame

__all__ = [
    "student_plan",
    "checker_plan",
    "student_names",
    "run_exercises",
    "ExerciseRun",
    "RunOutcome",
    "FILE_SIZE_MB",
]

FILE_SIZE_MB = 256  # largest file the student's code may write
_STATUSES = ("graded", "timed out", "crashed")
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
    env.update(PYTHONHASHSEED="0", MPLBACKEND="Agg", PYTHONDONTWRITEBYTECODE="1")
    if threads:
        env["OMP_NUM_THREADS"] = env["MKL_NUM_THREADS"] = str(threads)
    return env


class _StudentProcess:
    """One sandbox (or, unsandboxed, one process) serving submission after submission (see
    ``student.serve``): started once, reused by one grading at a time."""

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
            import tempfile

            self.workdir = tempfile.mkdtemp(prefix="course-grade-student-")
            cmd, env, cwd = (
                argv,
                {**_host_env(threads), "COURSE_SCRATCH": self.workdir},
                self.workdir,
            )
        try:
            self.proc = subprocess.Popen(
                cmd,
                cwd=cwd,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                start_new_session=True,
                pass_fds=(plan_r, out_w),
            )
        finally:
            os.close(plan_r)
            os.close(out_w)
        self.plan_w, self.out_r = plan_w, out_r
        self.reader = FrameBuffer(out_r)

    def submit(self, plan: dict) -> bool:
        try:
            write_frame(self.plan_w, plan)
            return True
        except OSError:
            return False

    def frames(self, deadline: float):
        """Yield this submission's messages until the sandbox says it is idle again (then
        ``self.idle`` is True), it ends, or the deadline passes."""
        self.idle = False
        while True:
            for f in self.reader.frames():
                if isinstance(f, dict) and f.get("idle"):
                    self.idle = True
                    return
                yield f
            if self.reader.eof:
                return
            left = deadline - time.monotonic()
            if left <= 0:
                return
            ready, _, _ = select.select([self.out_r], [], [], min(left, 1.0))
            if ready:
                self.reader.pump()

    def stop(self) -> str:
        """Kill the whole sandbox (its process group) and return the end of its stderr."""
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        err = b""
        try:
            _, err = self.proc.communicate(timeout=10)
        except (subprocess.TimeoutExpired, ValueError):
            pass
        for fd in (self.plan_w, self.out_r):
            try:
                os.close(fd)
            except OSError:
                pass
        if self.workdir:
            import shutil

            shutil.rmtree(self.workdir, ignore_errors=True)
        return (err or b"").decode(errors="replace")[-3000:]


class _Pool:
    """Idle sandboxes by (sandbox, threads): a grading takes one (or starts one) and gives it
    back when the sandbox said it is idle again; a sandbox that misbehaved is stopped."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.idle: dict[tuple, list[_StudentProcess]] = {}
        atexit.register(self.close)

    def take(self, sandbox: sandboxing.Sandbox | None, threads: int | None) -> _StudentProcess:
        with self.lock:
            free = self.idle.get((sandbox, threads), [])
            while free:
                proc = free.pop()
                if proc.proc.poll() is None:
                    return proc
                proc.stop()
        return _StudentProcess(sandbox, threads)

    def give_back(self, proc: _StudentProcess, sandbox, threads, healthy: bool) -> str:
        if healthy and proc.proc.poll() is None:
            with self.lock:
                self.idle.setdefault((sandbox, threads), []).append(proc)
            return ""
        return proc.stop()

    def close(self) -> None:
        with self.lock:
            procs = [p for ps in self.idle.values() for p in ps]
            self.idle.clear()
        for p in procs:
            p.stop()


_POOL = _Pool()


def _clean_errors(errors) -> list[str]:
    if not isinstance(errors, list):
        return []
    return [one_line(e) for e in errors[:20]]


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
    checker = Checker(checker_plan(sol))
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
    try:
        while any(n not in runs for n in todo) and passes <= len(todo):
            passes += 1
            left = [n for n in todo if n not in runs]
            plan = student_plan(
                sol, spec, answers, stubs, left, stubbed | skip, time_limit, memory_mb, threads
            )
            log.write(json.dumps({"student_plan": plan}) + "\n")
            proc = _POOL.take(sandbox, threads)
            hard = time.monotonic() + 240 + 2.5 * time_limit * len(left)
            ready, current, err = False, None, ""
            healthy = False
            try:
                if not proc.submit(plan):
                    raise GraderError("the student's sandbox could not be started:\n" + proc.stop())
                for f in proc.frames(hard):
                    log.write(json.dumps({"from_student": f}) + "\n")
                    if not isinstance(f, dict):
                        break
                    if _DEBUG:
                        print(
                            f"grade debug {time.monotonic() - _t0:7.2f} s: {str(f)[:100]}",
                            file=sys.stderr,
                        )
                    if f.get("ready"):
                        ready = True
                    elif "start" in f:
                        current = (
                            f["start"] if f["start"] in left and f["start"] not in runs else None
                        )
                    elif "exercise" in f and f.get("exercise") == current:
                        status = f.get("status") if f.get("status") in _STATUSES else "crashed"
                        run = ExerciseRun(
                            status,
                            errors=_clean_errors(f.get("errors")),
                            why=str(f.get("why", ""))[:200],
                            seconds=float(f["seconds"])
                            if isinstance(f.get("seconds"), (int, float))
                            else 0.0,
                        )
                        run._results = f.get("results") if status == "graded" else None  # type: ignore[attr-defined]
                        runs[current] = run
                        if status != "graded":
                            stubbed.add(current)
                        current = None
                        flush()
            except ValueError:  # a malformed frame: the sandbox is treated as crashed
                pass
            finally:
                healthy = proc.idle
                err = _POOL.give_back(proc, sandbox, threads, healthy)
            if not ready:
                raise GraderError(
                    f"the student's process did not finish the trusted setup cells:\n{err}"
                )
            if current is not None:  # the whole process died during this exercise
                runs[current] = ExerciseRun(
                    "crashed", why="the student's process ended during this exercise"
                )
                stubbed.add(current)
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
