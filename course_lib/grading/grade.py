"""Grade a saved exercise notebook against its solution notebook, with nbval.

    course-grade exercises/04_attention.ipynb                 # one submission
    course-grade --batch submissions/ --out grades/           # a class, in parallel, sandboxed
    (or python -m course_lib.grading.grade ...; needs the ``grading`` extra)

Only the student's answer code is taken from the submission (every code cell between the
trusted cells around each answer); it replaces the solution code in a copy of the solution
notebook, whose trusted setup and check cells (and their stored outputs, the reference) are
used as they are. ``pytest --nbval`` runs that copy in a fresh kernel, in a bubblewrap sandbox
where there is one (``sandbox``), with a time limit per exercise and memory/file-size limits; a
crashed kernel is restarted and the remaining exercises are graded in a new pass. Answers are
linted first (``lint``: friendly, early rejection); the check helpers refuse the functions an
exercise forbids while the student's code runs (``guard``).

One grading is a pipeline of stages, each a function a test can call alone::

    load (submission, solution, spec) -> splice (answers: extract, lint, stubs)
      -> run (nbval passes, crash recovery) -> collect (verdicts) -> report (score, JSON)

Exit codes: 0 every check passed; 1 some check failed; 2 the notebook could not be read;
3 grader error (or ``--batch`` without a sandbox and without ``--unsafe-no-sandbox``). The
format of the notebooks is documented in ``exercises/README.md``.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import nbformat

from . import sandbox as sandboxing
from .lint import lint_answer, trusted_bindings
from .notebooks import GraderError, Unreadable, extract_answers, find_solution, find_solutions_dir, read_notebook
from .report import ExerciseResult, build_report, exercise_result, format_report, write_gradebook
from .runner import ExerciseRun, RunOutcome, run_exercises
from .spec import NotebookSpec, load_spec, meta, role, stub_answer

__all__ = ["grade", "grade_batch", "lint_answer", "extract_answers", "Unreadable", "GraderError", "main",
           "load", "splice", "run", "collect", "Job", "Plan", "resolve_sandbox"]

DEFAULT_TIME_LIMIT = 30.0  # seconds per exercise (answer cells + check cells)
DEFAULT_MEMORY_MB = 3072  # address-space limit of the grading processes (torch alone maps ~650 MB)
_trusted_bindings = trusted_bindings  # the name the tests used before the lint had its own module


# --------------------------------------------------------------------------- stages
@dataclass
class Job:
    """What a grading reads: the submission, the solution notebook and its spec."""
    path: Path
    sub: object
    sol: object
    sol_path: Path
    spec: NotebookSpec
    trusted: dict[str, str]
    check_only: set[str]


@dataclass
class Plan:
    """What a grading runs: each exercise's answer code (the stub where rejected or missing),
    the stubs, the per-exercise results so far, and notes for the report."""
    answers: dict[str, list[str]]
    stubs: dict[str, list[str]]
    results: dict[str, ExerciseResult]
    notes: list[str]

    @property
    def rejected(self) -> set[str]:
        return {n for n, r in self.results.items() if r.status == "rejected"}


def load(path: str | Path, solutions_dir: Path | None = None, solution: Path | None = None) -> Job:
    """Stage 1: read the submission (Unreadable if it is not a notebook) and its solution."""
    path = Path(path)
    sub = read_notebook(path)
    solutions_dir = Path(solutions_dir) if solutions_dir else find_solutions_dir(path)
    sol_path = Path(solution) if solution else find_solution(sub, path, solutions_dir)
    try:
        sol = nbformat.read(sol_path, as_version=4)
        spec = load_spec(sol, sol_path.stem)
        trusted, check_only = trusted_bindings(sol, spec)
    except Exception as exc:
        raise GraderError(f"cannot load the solution notebook {sol_path}: {exc}") from exc
    return Job(path, sub, sol, sol_path, spec, trusted, check_only)


def splice(job: Job) -> Plan:
    """Stage 2: the student's answer code per exercise; a linted-out answer is replaced by the
    stub and its exercise marked rejected."""
    answers, notes = extract_answers(job.sub, job.spec, job.sol)
    results = {ex.name: ExerciseResult(ex.name, ex.points) for ex in job.spec.exercises}
    sol_answer = {meta(c)["exercise"]: c.source for c in job.sol.cells if role(c) == "answer"}
    stubs = {name: [stub_answer(src, name)] for name, src in sol_answer.items()}
    for ex in job.spec.exercises:
        problems = [p for code in answers[ex.name]
                    for p in lint_answer(code, job.trusted, ex.forbid, ex.name, job.check_only)]
        if problems:
            results[ex.name].status = "rejected"
            results[ex.name].messages += [f"rejected by the answer lint: {p}" for p in problems]
            answers[ex.name] = stubs[ex.name]
    for n in notes:
        name = n.split(":")[0]
        if name in results:
            results[name].messages.append(n.split(": ", 1)[1])
    return Plan(answers, stubs, results, notes)


def run(job: Job, plan: Plan, time_limit: float, memory_mb: int, threads: int | None,
        sandbox: sandboxing.Sandbox | None, keep: Path | None = None) -> RunOutcome:
    """Stage 3: the student's process and the checker (``runner``), in a fresh temporary
    folder (copied to ``keep``)."""
    tmp = Path(tempfile.mkdtemp(prefix="course-grade-"))
    try:
        return run_exercises(job.sol, job.spec, plan.answers, plan.stubs, plan.rejected, time_limit, memory_mb,
                             threads, sandbox, tmp)
    finally:
        if keep:
            shutil.copytree(tmp, keep, dirs_exist_ok=True)
        shutil.rmtree(tmp, ignore_errors=True)


def collect(job: Job, plan: Plan, outcome: RunOutcome, time_limit: float, memory_mb: int) -> dict[str, ExerciseResult]:
    """Stage 4: per-check verdicts and statuses of every exercise."""
    for ex in job.spec.exercises:
        r = plan.results[ex.name]
        if r.status == "rejected":
            r.fail_all(ex, "rejected")
        else:
            exercise_result(r, ex, outcome.exercises.get(ex.name, ExerciseRun("crashed", why="not run")),
                            time_limit, memory_mb)
    return plan.results


_warned = threading.Lock()
_said_unsandboxed = False


def resolve_sandbox(sandbox: bool | None) -> sandboxing.Sandbox | None:
    """True: the sandbox or GraderError; False: none; None: the sandbox where there is one,
    else none, saying so once per process."""
    global _said_unsandboxed
    if sandbox is False:
        return None
    sb, why = sandboxing.probe()
    if sb is None and sandbox:
        raise GraderError(f"no OS sandbox: {why}.")
    if sb is None:
        with _warned:
            if not _said_unsandboxed:
                _said_unsandboxed = True
                print(f"note: grading without an OS sandbox ({why}); fine for your own notebook, "
                      "not for other people's.", file=sys.stderr)
    return sb


def grade(path: str | Path, solutions_dir: Path | None = None, solution: Path | None = None,
          time_limit: float = DEFAULT_TIME_LIMIT, memory_mb: int = DEFAULT_MEMORY_MB,
          threads: int | None = None, keep: Path | None = None, sandbox: bool | None = None) -> dict:
    """Grade one submission; returns the report (a JSON-able dict). Raises Unreadable.
    ``sandbox``: None = bubblewrap where available; True = required; False = never."""
    t0 = time.monotonic()
    job = load(path, solutions_dir, solution)
    plan = splice(job)
    sb = resolve_sandbox(sandbox)
    outcome = run(job, plan, time_limit, memory_mb, threads, sb, keep)
    results = collect(job, plan, outcome, time_limit, memory_mb)
    return build_report(job.path, job.sol_path, job.spec, results, plan.notes, outcome.passes,
                        time.monotonic() - t0, "bwrap" if sb else "none")


# --------------------------------------------------------------------------- batch
def _grade_one(args) -> dict:
    path, kwargs = args
    mode = "bwrap" if kwargs.get("sandbox") is not False else "none"
    try:
        return grade(path, **kwargs)
    except Unreadable as exc:
        return {"submission": str(path), "status": "unreadable", "error": str(exc), "score": 0.0, "max_score": None,
                "sandbox": mode}
    except Exception as exc:  # one bad submission never stops the batch
        return {"submission": str(path), "status": "grader error", "error": f"{type(exc).__name__}: {exc}",
                "score": 0.0, "max_score": None, "sandbox": mode}


def grade_batch(folder: Path, out: Path, workers: int | None = None, sandbox: bool | None = None,
                **kwargs) -> list[dict]:
    """Grade every .ipynb under ``folder`` (one grading per core at a time); writes per-submission JSON
    reports and ``gradebook.csv`` into ``out``. ``sandbox`` as in ``grade`` (the CLI requires it)."""
    from concurrent.futures import ThreadPoolExecutor, as_completed

    from tqdm import tqdm

    folder, out = Path(folder), Path(out)
    files = sorted(p for p in folder.rglob("*.ipynb") if ".ipynb_checkpoints" not in p.parts
                   and out.resolve() not in p.resolve().parents)
    out.mkdir(parents=True, exist_ok=True)
    workers = workers or os.cpu_count() or 1
    kwargs["sandbox"] = False if resolve_sandbox(sandbox) is None else True
    # Threads are enough: each grading spends its time waiting for its own pytest/kernel
    # processes, and an exception stays with its submission instead of breaking a process pool.
    by_file = {}
    with ThreadPoolExecutor(max_workers=workers) as pool:
        futures = {pool.submit(_grade_one, (f, kwargs)): f for f in files}
        for fut in tqdm(as_completed(futures), total=len(files), desc="grading", unit="notebook", file=sys.stderr):
            by_file[futures[fut]] = fut.result()
    reports = [by_file[f] for f in files]
    write_gradebook(reports, folder, out)
    return reports


# --------------------------------------------------------------------------- CLI
def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="course-grade", description="Grade exercise notebooks with nbval.")
    ap.add_argument("notebook", nargs="?", help="the saved exercise notebook to grade")
    ap.add_argument("--batch", metavar="DIR", help="grade every .ipynb under DIR in parallel (sandboxed)")
    ap.add_argument("--out", metavar="DIR", help="batch: where reports and gradebook.csv go (default DIR/_grades)")
    ap.add_argument("--report", metavar="PATH", help="single: JSON report path (default NOTEBOOK.grade.json)")
    ap.add_argument("--solutions", metavar="DIR", default=None,
                    help="folder of solution notebooks (default: the solutions/ of the course clone the notebook or the current folder is in)")
    ap.add_argument("--solution", metavar="PATH", help="single: the solution notebook to grade against")
    ap.add_argument("--time-limit", type=float, default=DEFAULT_TIME_LIMIT, help="seconds per exercise")
    ap.add_argument("--memory-mb", type=int, default=DEFAULT_MEMORY_MB, help="address-space limit (0: none)")
    ap.add_argument("--threads", type=int, default=None, help="OMP_NUM_THREADS for the kernel")
    ap.add_argument("--workers", type=int, default=None, help="batch: parallel gradings (default: cores)")
    ap.add_argument("--keep", metavar="DIR", help="keep the graded notebook and pytest log here (debugging)")
    ap.add_argument("--unsafe-no-sandbox", action="store_true",
                    help="grade without the bubblewrap sandbox (a batch refuses to otherwise)")
    args = ap.parse_args(argv)
    kwargs = dict(solutions_dir=Path(args.solutions) if args.solutions else None, time_limit=args.time_limit,
                  memory_mb=args.memory_mb, threads=args.threads)
    try:
        if args.batch:
            folder = Path(args.batch)
            if not folder.is_dir():
                print(f"error: --batch {folder}: not a folder", file=sys.stderr)
                return 2
            if not args.unsafe_no_sandbox and sandboxing.probe()[0] is None:
                print(f"error: --batch grades other people's code, and there is no OS sandbox here "
                      f"({sandboxing.probe()[1]}). Install bubblewrap, or pass --unsafe-no-sandbox to "
                      "grade without one.", file=sys.stderr)
                return 3
            out = Path(args.out) if args.out else folder / "_grades"
            reports = grade_batch(folder, out, workers=args.workers, sandbox=False if args.unsafe_no_sandbox else True,
                                  **kwargs)
            counts = {s: sum(r["status"] == s for r in reports) for s in ("graded", "unreadable", "grader error")}
            mode = "unsandboxed (--unsafe-no-sandbox)" if args.unsafe_no_sandbox else "in the bubblewrap sandbox"
            print(f"{len(reports)} submissions graded {mode}: {counts['graded']} graded, {counts['unreadable']} "
                  f"unreadable, {counts['grader error']} grader errors; gradebook: {out / 'gradebook.csv'}")
            return 3 if counts["grader error"] else 0
        if not args.notebook:
            ap.error("give a notebook to grade, or --batch DIR")
        rep = grade(args.notebook, solution=Path(args.solution) if args.solution else None,
                    keep=Path(args.keep) if args.keep else None,
                    sandbox=False if args.unsafe_no_sandbox else None, **kwargs)
    except Unreadable as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:
        print(f"grader error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 3
    print(format_report(rep))
    report = Path(args.report) if args.report else Path(args.notebook).with_suffix(".grade.json")
    try:
        report.write_text(json.dumps(rep, indent=1))
    except OSError as exc:
        print(f"warning: could not write the report {report}: {exc}", file=sys.stderr)
    else:
        print(f"Report: {report}")
    return 0 if rep["all_passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
