"""Running: the graded notebook (the solution with the student's answers spliced in) under
``pytest --nbval`` in a fresh kernel, in the OS sandbox where there is one, pass after pass
until every exercise has run (a crashed or stuck kernel costs only the exercise it was running).

- ``assemble``: the notebook nbval runs: a trusted prelude (output caps), the solution's setup
  cells, a lock-down cell (no new processes), then per exercise the student's answer cells, a
  guard cell (the exercise's forbidden functions, for the check helpers) and the check cells;
- ``run_nbval``: one ``pytest --nbval`` run; returns the cell records;
- ``run_passes``: the passes, with crash recovery; returns what happened to each exercise.
"""
from __future__ import annotations

import copy
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from . import sandbox as sandboxing
from .notebooks import GraderError
from .spec import NotebookSpec, meta, role, slug

__all__ = ["PRELUDE", "LOCKDOWN", "assemble", "run_nbval", "run_passes", "NbvalRun", "ExerciseRun", "RunOutcome"]

OUTPUT_LIMIT = 100_000  # characters a cell may print before the rest is dropped
FILE_SIZE_MB = 256  # largest file the kernel may write

PRELUDE = f'''\
# Trusted grader prelude: caps what each cell may print, so an output flood cannot swamp the grader.
import sys as _course_sys
class _CourseCap:
    def __init__(self, stream, limit):
        self._stream, self._limit, self.left = stream, limit, limit
    def write(self, text):
        if self.left <= 0:
            return len(text)
        part = text[: self.left]
        self.left -= len(part)
        if self.left <= 0:
            part += "\\n[output truncated by the grader]\\n"
        return self._stream.write(part)
    def __getattr__(self, name):
        return getattr(self._stream, name)
_course_sys.stdout = _CourseCap(_course_sys.stdout, {OUTPUT_LIMIT})
_course_sys.stderr = _CourseCap(_course_sys.stderr, {OUTPUT_LIMIT})
def _course_reset(*_):
    for _s in (_course_sys.stdout, _course_sys.stderr):
        if isinstance(_s, _CourseCap):
            _s.left = _s._limit
get_ipython().events.register("pre_run_cell", _course_reset)
'''

LOCKDOWN = '''\
# Trusted grader cell: from here on this kernel cannot start processes (a fork bomb stops at its first fork).
from course_lib.grading.lockdown import no_new_processes as _course_lockdown
_course_lockdown()
del _course_lockdown
'''


def _guard_source(forbid: list[str]) -> str:
    return ("# Trusted grader cell: the functions this exercise forbids are refused while the checks run your code.\n"
            "from course_lib.grading.guard import forbid_calls as _course_forbid_calls\n"
            f"_course_forbid_calls({list(forbid)!r})\n"
            "del _course_forbid_calls\n")


def _new_code_cell(source, cid, course, tags=()):
    c = nbformat.v4.new_code_cell(source)
    c.id = cid
    c.metadata = {"course": course}
    if tags:
        c.metadata["tags"] = list(tags)
    return c


def assemble(sol, spec: NotebookSpec, answers: dict[str, list[str]], skip_checks: set[str]):
    """A copy of the solution notebook with the student's answer cells in place of the solution's
    (checks of the exercises in ``skip_checks`` are tagged ``nbval-skip``)."""
    nb = copy.deepcopy(sol)
    cells = [_new_code_cell(PRELUDE, "grader-prelude", {"role": "setup"})]
    forbid = {ex.name: ex.forbid for ex in spec.exercises}
    guarded: set[str] = set()
    locked = False
    for cell in sol.cells:
        r, m = role(cell), meta(cell)
        if cell.cell_type != "code":
            continue
        if r != "setup" and not locked:
            cells.append(_new_code_cell(LOCKDOWN, "grader-lockdown", {"role": "setup"}))
            locked = True
        if r == "answer":
            for i, code in enumerate(answers[m["exercise"]]):
                cid = cell.id if i == 0 else f"{cell.id}-{i + 1}"
                cells.append(_new_code_cell(code, cid, {"role": "answer", "exercise": m["exercise"]},
                                            ["nbval-ignore-output"]))
            continue
        if r == "check" and m["exercise"] not in guarded:
            guarded.add(m["exercise"])
            cells.append(_new_code_cell(_guard_source(forbid.get(m["exercise"], [])),
                                        f"grader-guard-{slug(m['exercise'])}",
                                        {"role": "guard", "exercise": m["exercise"]}))
        c = copy.deepcopy(cell)
        if r == "check" and m["exercise"] in skip_checks:
            c.metadata.setdefault("tags", []).append("nbval-skip")
        cells.append(c)
    nb.cells = cells
    return nb


# --------------------------------------------------------------------------- one run
@dataclass
class NbvalRun:
    records: list[dict]
    log: str  # the end of pytest's output
    killed: bool  # the grader stopped it at the hard time limit


def _pytest_args(nb_path: str, rootdir: str, record_fd: int, time_limit: float, memory_mb: int) -> list[str]:
    return [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
            "-c", f"{rootdir}/pytest.ini", "--rootdir", rootdir, "--nbval", "--nbval-current-env",
            "--nbval-kernel-startup-timeout=180", f"--course-record-fd={record_fd}",
            f"--course-time-limit={time_limit}", f"--course-memory-mb={memory_mb}",
            f"--course-fsize-mb={FILE_SIZE_MB}", "-W", "ignore", nb_path]


def _host_env(threads: int | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("COURSE_LIB_SOURCE", "PYTEST_ADDOPTS")}
    env.update(PYTHONHASHSEED="0", MPLBACKEND="Agg", JUPYTER_PLATFORM_DIRS="1", PYDEVD_DISABLE_FILE_VALIDATION="1")
    if threads:
        env["OMP_NUM_THREADS"] = env["MKL_NUM_THREADS"] = str(threads)
    return env


def run_nbval(nb, workdir: Path, time_limit: float, memory_mb: int, threads: int | None,
              hard_timeout: float, sandbox: sandboxing.Sandbox | None = None) -> NbvalRun:
    """Run ``pytest --nbval`` on ``nb``. The grader writes the graded notebook, the plugin (as
    ``conftest.py``, so pytest does not import course_lib and torch) and ``pytest.ini`` into
    ``workdir``, and opens the record file in a sibling folder; the run gets the record file
    as an open descriptor only.

    Sandboxed, the three files are copied into the sandbox's scratch tmpfs (the kernel's
    working folder) and nothing of ``workdir`` is visible inside; unsandboxed, the kernel runs
    in ``workdir`` itself (a fresh folder)."""
    records_dir = Path(tempfile.mkdtemp(prefix="records-", dir=workdir.parent))
    rec_path = records_dir / "record.jsonl"
    nbformat.write(nb, workdir / "graded.ipynb")
    nbformat.write(nb, records_dir / "graded.ipynb")  # a copy for --keep: the plugin deletes the original
    (workdir / "pytest.ini").write_text("[pytest]\naddopts =\n")
    shutil.copy(Path(__file__).with_name("nbval_plugin.py"), workdir / "conftest.py")
    log = records_dir / "pytest.log"
    rec_fd = os.open(rec_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    inputs: list[int] = []
    try:
        if sandbox is not None:
            files = {name: os.open(workdir / name, os.O_RDONLY) for name in ("graded.ipynb", "pytest.ini", "conftest.py")}
            inputs = list(files.values())
            root = sandboxing.SCRATCH
            cmd = sandboxing.command(sandbox, _pytest_args(f"{root}/graded.ipynb", root, rec_fd, time_limit, memory_mb),
                                     files, sandboxing.inner_env(threads))
            cwd, env = workdir, {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
        else:
            cmd = _pytest_args(str(workdir / "graded.ipynb"), str(workdir), rec_fd, time_limit, memory_mb)
            cwd, env = workdir, _host_env(threads)
        killed = False
        with open(log, "w") as out:
            proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, start_new_session=True,
                                    pass_fds=(rec_fd, *inputs))
            for fd in inputs:
                os.close(fd)
            inputs = []
            try:
                proc.wait(timeout=hard_timeout)
            except subprocess.TimeoutExpired:
                killed = True
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
    finally:
        os.close(rec_fd)
        for fd in inputs:
            os.close(fd)
    records = []
    for line in rec_path.read_text(errors="replace").splitlines():
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(rec, dict) and isinstance(rec.get("id"), str):
            records.append(rec)
    return NbvalRun(records, log.read_text(errors="replace")[-5000:], killed)


def _kernel_never_started(run: NbvalRun) -> bool:
    """The kernel died before answering its first request (seen under heavy load): no cell ran."""
    ran = [r for r in run.records if not r.get("failed")]
    return not ran and "kernel_info" in (run.log + "".join(r.get("message", "") for r in run.records))


# --------------------------------------------------------------------------- the passes
@dataclass
class ExerciseRun:
    """What happened to one exercise's cells: ``graded`` (its records are complete), ``timed
    out`` or ``crashed`` (its records are absent or cut short)."""
    status: str
    records: dict[str, dict] = field(default_factory=dict)  # cell id -> record
    stuck: bool = False  # timed out because the kernel could not be stopped (no records)


@dataclass
class RunOutcome:
    exercises: dict[str, ExerciseRun]
    passes: int


def run_passes(sol, spec: NotebookSpec, answers: dict[str, list[str]], stubs: dict[str, list[str]],
               skip: set[str], time_limit: float, memory_mb: int, threads: int | None,
               sandbox: sandboxing.Sandbox | None, tmp: Path) -> RunOutcome:
    """Run the graded notebook until every exercise not in ``skip`` has run to its end. Where
    the kernel dies or cannot be interrupted, the exercise it was running is marked (its answer
    replaced by the stub for the next pass) and a new pass, in a fresh kernel and folder, runs
    the exercises after it."""
    answers = dict(answers)
    done: set[str] = set(skip)
    runs: dict[str, ExerciseRun] = {}
    passes = 0
    while len(done) < len(spec.exercises) and passes <= len(spec.exercises):
        passes += 1
        nb = assemble(sol, spec, answers, skip_checks=done)
        hard = 240 + time_limit * 1.5 * len(spec.exercises)
        for attempt in (1, 2):  # a kernel that never started is retried once
            workdir = Path(tempfile.mkdtemp(prefix=f"pass{passes}-{attempt}-", dir=tmp))
            run = run_nbval(nb, workdir, time_limit, memory_mb, threads, hard, sandbox)
            if not _kernel_never_started(run):
                break
        setup_recs = [r for r in run.records if r.get("exercise") is None]
        if not run.records or any(r["failed"] for r in setup_recs):
            bad = next((r for r in setup_recs if r["failed"]), None)
            why = f"{bad['id']}: {bad['message']}" if bad else "pytest --nbval produced no results"
            raise GraderError(f"the trusted setup cells failed ({why}).\n{run.log}")
        by_id = {r["id"]: r for r in run.records}
        order = [c.id for c in nb.cells]
        exercise_of = {c.id: meta(c).get("exercise") for c in nb.cells}
        # where the kernel died or could not be interrupted, if anywhere
        broken = next((r for r in run.records if r["kernel_died"] or
                       (r["timed_out"] and "Failed to interrupt" in r["message"])), None)
        if broken is None and len(run.records) < len(order):
            missing = next(cid for cid in order if cid not in by_id)
            # the pytest run ended early: killed at the hard time limit, or by the student's code
            broken = {"id": missing, "exercise": exercise_of[missing], "timed_out": run.killed,
                      "kernel_died": not run.killed, "message": "hard time limit" if run.killed else "ended early"}
        cut = order.index(broken["id"]) if broken else len(order)
        for ex in spec.exercises:
            if ex.name in done:
                continue
            if broken and ex.name == broken["exercise"]:
                runs[ex.name] = ExerciseRun("timed out" if broken.get("timed_out") else "crashed", stuck=True)
                answers[ex.name] = stubs[ex.name]
                done.add(ex.name)
                continue
            ex_ids = [cid for cid in order if exercise_of[cid] == ex.name]
            if any(order.index(cid) >= cut for cid in ex_ids):
                continue  # after the crash: graded in the next pass
            recs = {cid: by_id[cid] for cid in ex_ids if cid in by_id}
            status = "timed out" if any(r["timed_out"] for r in recs.values()) else "graded"
            runs[ex.name] = ExerciseRun(status, recs)
            done.add(ex.name)
    return RunOutcome(runs, passes)
