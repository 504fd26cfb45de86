"""Grade a saved exercise notebook against its solution notebook.

    course-grade exercises/04_attention.ipynb                 # one submission
    course-grade --batch submissions/ --out grades/           # a class, in parallel, sandboxed
    course-grade --batch submissions/ --out grades/ --scheduler tls://HOST:8786 \\
        --tls-ca-file ca.pem --tls-cert cluster.pem --tls-key cluster.key  # on a Dask cluster
    course-grade --make-certs certs/      # the CA and certificate for such a cluster
    course-grade --batch submissions/ --out grades/ --similarity   # and a copied-code report
    (or python -m course_lib.grading.grade ...; needs the ``grading`` extra)

Only the student's answer code is taken from the submission (every code cell between the
trusted cells around each answer); the solution notebook's own setup and check cells are used
as they are. The student's code runs in a bubblewrap sandbox where there is one (``sandbox``),
one fresh process per exercise (``student``), with one time budget per exercise and memory and
file-size limits, and hands back plain data; a trusted checker process (``checker``), which
never runs student code, judges it. Answers are linted first (``lint``: friendly, early
rejection); the check helpers refuse the functions an exercise forbids while the student's code
runs (``guard``).

One grading is a pipeline of stages, each a function a test can call alone::

    load (submission, solution, spec) -> splice (answers: extract, lint, stubs)
      -> run (student's process + checker) -> collect (verdicts) -> report (score, JSON)

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
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from . import sandbox as sandboxing
from .cluster import TLS_ENV
from .lint import lint_answer, trusted_bindings
from .notebooks import (
    GraderError,
    Unreadable,
    display_name,
    extract_answers,
    find_solution,
    find_solutions_dir,
    parse_notebook,
    prediction_facts,
    read_notebook,
    read_submission,
    solution_stems,
)
from .report import ExerciseResult, Gradebook, build_report, exercise_result, format_report
from .runner import _DEBUG, ExerciseRun, RunOutcome, run_exercises
from .spec import NotebookSpec, load_spec, meta, role, stub_answer
from .status import SUBMISSION_STATUSES, Status

__all__ = [
    "grade",
    "grade_one",
    "grade_batch",
    "find_submissions",
    "lint_answer",
    "extract_answers",
    "Unreadable",
    "GraderError",
    "main",
    "load",
    "splice",
    "run",
    "collect",
    "Job",
    "Plan",
    "resolve_sandbox",
]

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
    facts: dict[str, dict[str, dict]] = field(default_factory=dict)  # predict, then run

    @property
    def rejected(self) -> set[str]:
        return {n for n, r in self.results.items() if r.status == Status.REJECTED}


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
        problems = [
            p
            for code in answers[ex.name]
            for p in lint_answer(code, job.trusted, ex.forbid, ex.name, job.check_only)
        ]
        if problems:
            results[ex.name].status = Status.REJECTED
            results[ex.name].messages += [f"rejected by the answer lint: {p}" for p in problems]
            answers[ex.name] = stubs[ex.name]
    for n in notes:
        name = n.split(":")[0]
        if name in results:
            results[name].messages.append(n.split(": ", 1)[1])
    return Plan(answers, stubs, results, notes, prediction_facts(job.sub, job.spec, job.sol))


def run(
    job: Job,
    plan: Plan,
    time_limit: float,
    memory_mb: int,
    threads: int | None,
    sandbox: sandboxing.Sandbox | None,
    keep: Path | None = None,
) -> RunOutcome:
    """Stage 3: the student's process and the checker (``runner``), in a fresh temporary
    folder (copied to ``keep``)."""
    tmp = Path(tempfile.mkdtemp(prefix="course-grade-"))
    try:
        return run_exercises(
            job.sol,
            job.spec,
            plan.answers,
            plan.stubs,
            plan.rejected,
            time_limit,
            memory_mb,
            threads,
            sandbox,
            tmp,
            facts=plan.facts,
        )
    finally:
        if keep:
            shutil.copytree(tmp, keep, dirs_exist_ok=True)
        shutil.rmtree(tmp, ignore_errors=True)


def collect(
    job: Job, plan: Plan, outcome: RunOutcome, time_limit: float, memory_mb: int
) -> dict[str, ExerciseResult]:
    """Stage 4: per-check verdicts and statuses of every exercise."""
    for ex in job.spec.exercises:
        r = plan.results[ex.name]
        if r.status == Status.REJECTED:
            r.fail_all(ex, Status.REJECTED)
        else:
            exercise_result(
                r,
                ex,
                outcome.exercises.get(ex.name, ExerciseRun(Status.CRASHED, why="not run")),
                time_limit,
                memory_mb,
            )
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
                print(
                    f"note: grading without an OS sandbox ({why}); fine for your own notebook, "
                    "not for other people's.",
                    file=sys.stderr,
                )
    return sb


def grade(
    path: str | Path,
    solutions_dir: Path | None = None,
    solution: Path | None = None,
    time_limit: float = DEFAULT_TIME_LIMIT,
    memory_mb: int = DEFAULT_MEMORY_MB,
    threads: int | None = None,
    keep: Path | None = None,
    sandbox: bool | None = None,
) -> dict:
    """Grade one submission; returns the report (a JSON-able dict). Raises Unreadable.
    ``sandbox``: None = bubblewrap where available; True = required; False = never."""
    t0 = time.monotonic()
    cpu = [("", time.thread_time())]

    def mark(stage: str) -> None:  # this thread's CPU per stage (COURSE_GRADE_DEBUG)
        cpu.append((stage, time.thread_time()))

    job = load(path, solutions_dir, solution)
    mark("load")
    plan = splice(job)
    mark("splice")
    sb = resolve_sandbox(sandbox)
    outcome = run(job, plan, time_limit, memory_mb, threads, sb, keep)
    mark("run (plans, pipes, messages)")
    results = collect(job, plan, outcome, time_limit, memory_mb)
    mark("collect")
    if _DEBUG:
        for (_, a), (stage, b) in zip(cpu, cpu[1:]):
            print(f"grade debug cpu grader: {b - a:6.3f} s {stage}", file=sys.stderr)
        print(f"grade debug cpu end: {job.spec.stem}", file=sys.stderr)
    return build_report(
        job.path,
        job.sol_path,
        job.spec,
        results,
        plan.notes,
        outcome.passes,
        time.monotonic() - t0,
        "bwrap" if sb else "none",
    )


# --------------------------------------------------------------------------- batch
def _failed(name: str, status: str, error: str, mode: str) -> dict:
    return {
        "submission": name,
        "status": status,
        "error": error,
        "score": 0.0,
        "max_score": None,
        "sandbox": mode,
    }


def grade_one(path: Path, name: str | None = None, **kwargs) -> dict:
    """``grade(path, **kwargs)`` as a report whatever happens (status ``unreadable`` or ``grader
    error`` with the reason), naming the submission ``name``."""
    name = name or display_name(path)
    mode = "bwrap" if kwargs.get("sandbox") is not False else "none"
    try:
        rep = grade(path, **kwargs)
    except Unreadable as exc:
        return _failed(name, Status.UNREADABLE, str(exc).replace(str(path), name), mode)
    except Exception as exc:  # one bad submission never stops the batch
        return _failed(
            name, Status.GRADER_ERROR, f"{type(exc).__name__}: {exc}".replace(str(path), name), mode
        )
    rep["submission"] = name
    return rep


def _grade_one(
    args,
) -> dict:  # the former entry point of a batch's gradings: (path, kwargs) -> report
    path, kwargs = args
    return grade_one(path, **kwargs)


def find_submissions(folder: Path, out: Path | None = None) -> list[str]:
    """Relative paths (``/``-separated, as the file system spells them: bytes that are not
    UTF-8 stay surrogate-escaped) of every ``*.ipynb`` entry under ``folder`` that is not a
    real folder (a symbolic link or special file is listed, and reported as not a regular
    file), sorted; links to folders are not followed; ``.ipynb_checkpoints`` and ``out`` skipped."""
    folder = Path(folder)
    skip = os.path.realpath(out) if out is not None else None
    found = []
    for dirpath, dirnames, filenames in os.walk(folder, followlinks=False):
        rel_dir = os.path.relpath(dirpath, folder)
        keep = []
        for d in dirnames:
            full = os.path.join(dirpath, d)
            if os.path.islink(full):
                if d.endswith(".ipynb"):
                    filenames.append(d)  # a link to a folder, named like a notebook
                continue
            if d == ".ipynb_checkpoints" or os.path.realpath(full) == skip:
                continue
            keep.append(d)
        dirnames[:] = sorted(keep)
        for f in filenames:
            if f.endswith(".ipynb"):
                found.append(f if rel_dir == "." else f"{rel_dir}/{f}".replace(os.sep, "/"))
    return sorted(found)


def grade_batch(
    folder: Path,
    out: Path,
    workers: int | None = None,
    sandbox: bool | None = None,
    scheduler: str | None = None,
    tls: tuple[str | None, str | None, str | None] = (None, None, None),
    insecure: bool = False,
    similarity: bool = False,
    **kwargs,
) -> list[dict]:
    """Grade every .ipynb under ``folder`` on a Dask cluster: the scheduler at ``scheduler``
    (``tls://HOST:PORT`` with ``tls`` = (CA certificate, client certificate, key), see
    ``cluster.security``; plain ``tcp://`` only on loopback unless ``insecure``), or an
    in-process local one with ``workers`` gradings at a time (default: cores). Each JSON report
    is written to ``out`` as soon as its grading ends (after ``cluster.verify_report``), and
    ``out/gradebook.csv`` is rewritten with every result so far (``report.Gradebook``).
    ``sandbox`` as in ``grade`` (the CLI requires it; with a scheduler each worker checks).
    Submissions are read here, defensively (``notebooks``), and only what grading reads of them
    (sources, execution counts, verdict lines: no outputs) is sent, with the one solution each
    needs. ``similarity``: also write ``out/similarity/`` (``similarity.write_report``)."""
    from tqdm import tqdm

    from . import cluster

    folder, out = Path(folder), Path(out)
    sec = cluster.security(scheduler, *tls, insecure=insecure) if scheduler else None
    out.mkdir(parents=True, exist_ok=True)
    rels = find_submissions(folder, out)
    solutions_dir = Path(kwargs.pop("solutions_dir", None) or find_solutions_dir(folder))
    kwargs.pop("solution", None)
    stems = solution_stems(solutions_dir)  # GraderError without a solutions folder
    specs: dict[str, NotebookSpec] = {}

    def spec_of(stem: str) -> NotebookSpec:
        if stem not in specs:
            specs[stem] = load_spec(nbformat.read(stems[stem], as_version=4), stem)
        return specs[stem]

    if scheduler:
        kwargs["sandbox"] = sandbox  # each worker probes its own sandbox (True: required)
    else:
        kwargs["sandbox"] = False if resolve_sandbox(sandbox) is None else True
        if kwargs.get("threads") is None:  # the cores shared by the gradings at a time: no
            # more OpenMP threads than cores (oversubscribed threads spin and wait)
            cores = os.cpu_count() or 1
            kwargs["threads"] = max(1, cores // max(1, workers or cores))
    mode = "none" if kwargs["sandbox"] is False else "bwrap"
    book = Gradebook(out, rels)
    bar = tqdm(total=len(rels), desc="grading", unit="notebook", file=sys.stderr)

    def record(rel: str, result) -> None:
        shown = display_name(folder / rel)
        if isinstance(result, BaseException):
            result = _failed(shown, Status.GRADER_ERROR, f"{type(result).__name__}: {result}", mode)
        else:
            result["submission"] = shown
            if result.get("status") == Status.GRADED:
                result["solution"] = str(solutions_dir / f"{result['notebook']}.ipynb")
        book.add(rel, result)
        bar.update()

    def jobs():
        for rel in rels:
            shown = display_name(folder / rel)
            try:
                nb = parse_notebook(read_submission(folder / rel, shown), shown)
                stem = find_solution(nb, shown, solutions_dir).stem
                data = nbformat.writes(nb).encode()  # what grading reads: no outputs
            except Unreadable as exc:
                record(rel, _failed(shown, Status.UNREADABLE, str(exc), mode))
                continue
            except Exception as exc:  # noqa: BLE001 - still one row, never the whole batch
                record(
                    rel, _failed(shown, Status.GRADER_ERROR, f"{type(exc).__name__}: {exc}", mode)
                )
                continue
            yield rel, data, shown, stem

    from . import runner

    if scheduler:
        runner.prefetch(None)
    else:  # the next sandbox starts during this one, and none past the last submission
        runner.prefetch(True, gradings=len(rels))

    kept: dict[str, tuple[str, bytes]] = {}  # rel -> (stem, what was graded), for --similarity

    def sent():
        for rel, data, shown, stem in jobs():
            if similarity:
                kept[rel] = (stem, data)
            yield rel, data, shown, stem

    solutions = {stem: path.read_bytes() for stem, path in stems.items()}
    try:
        with cluster.connect(scheduler, workers or os.cpu_count() or 1, sec) as client:
            cluster.run_gradings(client, sent(), solutions, kwargs, record, spec_of, grade_one)
    finally:
        runner.prefetch(None)
        runner.close_spares()
        bar.close()
    if similarity:
        from . import similarity as similar

        similar.write_report(
            {display_name(rel): v for rel, v in kept.items()},
            {stem: spec_of(stem) for stem, _ in kept.values()},
            solutions_dir,
            out / "similarity",
        )
    return book.in_order()


# --------------------------------------------------------------------------- CLI
def _say(text: str, file=None) -> None:
    """print, with what the stream cannot encode (a lone surrogate from a file name or from a
    student's output) backslash-escaped instead of raising."""
    file = file or sys.stdout
    enc = getattr(file, "encoding", None) or "utf-8"
    print(str(text).encode(enc, "backslashreplace").decode(enc, "replace"), file=file)


def parser() -> argparse.ArgumentParser:
    """``course-grade``'s options (``--help``); the batch's cluster ones in ``_cluster_options``."""
    ap = argparse.ArgumentParser(
        prog="course-grade", description="Grade exercise notebooks against their solutions."
    )
    ap.add_argument("notebook", nargs="?", help="the saved exercise notebook to grade")
    ap.add_argument(
        "--batch", metavar="DIR", help="grade every .ipynb under DIR in parallel (sandboxed)"
    )
    ap.add_argument(
        "--out",
        metavar="DIR",
        help="batch: where reports and gradebook.csv go (default DIR/_grades)",
    )
    ap.add_argument(
        "--report", metavar="PATH", help="single: JSON report path (default NOTEBOOK.grade.json)"
    )
    ap.add_argument(
        "--solutions",
        metavar="DIR",
        default=None,
        help="folder of solution notebooks (default: the solutions/ of the course clone the "
        "notebook or the current folder is in)",
    )
    ap.add_argument(
        "--solution", metavar="PATH", help="single: the solution notebook to grade against"
    )
    ap.add_argument(
        "--time-limit", type=float, default=DEFAULT_TIME_LIMIT, help="seconds per exercise"
    )
    ap.add_argument(
        "--memory-mb", type=int, default=DEFAULT_MEMORY_MB, help="address-space limit (0: none)"
    )
    ap.add_argument(
        "--threads",
        type=int,
        default=None,
        help="torch threads of the student's process (default: the cores; in a local batch, "
        "the cores divided by the gradings at a time)",
    )
    ap.add_argument(
        "--workers",
        type=int,
        default=None,
        help="batch without --scheduler: parallel gradings (default: cores)",
    )
    _cluster_options(ap)
    ap.add_argument(
        "--similarity",
        action="store_true",
        help="batch: also write OUT/similarity/: each answer compared with the course's own "
        "code and with the classmates' (copydetect)",
    )
    ap.add_argument(
        "--keep",
        metavar="DIR",
        help="keep the messages between the grader, the student's process and the checker "
        "here (debugging)",
    )
    ap.add_argument(
        "--unsafe-no-sandbox",
        action="store_true",
        help="grade without the bubblewrap sandbox (a batch refuses to otherwise)",
    )
    return ap


def _cluster_options(ap: argparse.ArgumentParser) -> None:
    """A batch on a Dask cluster: its scheduler, mutual TLS, and making its certificates."""
    ap.add_argument(
        "--scheduler",
        metavar="ADDRESS",
        default=None,
        help="batch: grade on the Dask cluster of this scheduler (tls://HOST:8786, mutual TLS "
        "with the --tls-* files); every worker needs course_lib[grading], bubblewrap and the "
        "cluster's certificate (default: a local in-process cluster)",
    )
    for flag, env, what in zip(
        ("--tls-ca-file", "--tls-cert", "--tls-key"),
        TLS_ENV,
        ("the cluster's CA certificate", "this client's certificate", "its private key"),
    ):
        ap.add_argument(
            flag, metavar="PATH", default=None, help=f"tls:// scheduler: {what} (default: ${env})"
        )
    ap.add_argument(
        "--insecure",
        action="store_true",
        help="allow a plain tcp:// scheduler on another machine (unencrypted; anyone who "
        "reaches it can join as a worker): only on a network you trust",
    )
    ap.add_argument(
        "--make-certs",
        metavar="DIR",
        help="write a CA and a certificate for a Dask grading cluster into DIR, and exit",
    )


def _main_batch(args: argparse.Namespace, kwargs: dict) -> int:
    """``course-grade --batch DIR``: refused without a sandbox unless asked; a summary line."""
    folder = Path(args.batch)
    if not folder.is_dir():
        print(f"error: --batch {folder}: not a folder", file=sys.stderr)
        return 2
    if not args.unsafe_no_sandbox and not args.scheduler and sandboxing.probe()[0] is None:
        print(
            f"error: --batch grades other people's code, and there is no OS sandbox here "
            f"({sandboxing.probe()[1]}). Install bubblewrap, or pass --unsafe-no-sandbox "
            "to "
            "grade without one.",
            file=sys.stderr,
        )
        return 3
    out = Path(args.out) if args.out else folder / "_grades"
    reports = grade_batch(
        folder,
        out,
        workers=args.workers,
        sandbox=False if args.unsafe_no_sandbox else True,
        scheduler=args.scheduler,
        tls=(args.tls_ca_file, args.tls_cert, args.tls_key),
        insecure=args.insecure,
        similarity=args.similarity,
        **kwargs,
    )
    counts = {s: sum(r["status"] == s for r in reports) for s in SUBMISSION_STATUSES}
    mode = (
        "unsandboxed (--unsafe-no-sandbox)"
        if args.unsafe_no_sandbox
        else "in the bubblewrap sandbox"
    )
    where = f" on {args.scheduler}" if args.scheduler else ""
    _say(
        f"{len(reports)} submissions graded {mode}{where}: {counts[Status.GRADED]} graded, "
        f"{counts[Status.UNREADABLE]} unreadable, "
        f"{counts[Status.GRADER_ERROR]} grader errors; "
        f"gradebook: {display_name(out / 'gradebook.csv')}"
    )
    return 3 if counts[Status.GRADER_ERROR] else 0


def main(argv: list[str] | None = None) -> int:
    """``course-grade``: one notebook (exit 0 all passed, 1 not, 2 unreadable, 3 grader error),
    a batch (``--batch DIR``: 0, or 3 when a grading failed) or ``--make-certs DIR``."""
    ap = parser()
    args = ap.parse_args(argv)
    if args.make_certs:
        from .cluster import make_certificates

        files = make_certificates(Path(args.make_certs))
        _say(
            f"wrote {', '.join(display_name(p) for p in files.values())}. Scheduler: dask "
            "scheduler --protocol tls --tls-ca-file ca.pem --tls-cert cluster.pem --tls-key "
            "cluster.key; workers: dask worker tls://HOST:8786 with the same three flags; this "
            "client: course-grade --batch ... --scheduler tls://HOST:8786 --tls-ca-file ca.pem "
            "--tls-cert cluster.pem --tls-key cluster.key. Keep ca.key off the cluster."
        )
        return 0
    kwargs = dict(
        solutions_dir=Path(args.solutions) if args.solutions else None,
        time_limit=args.time_limit,
        memory_mb=args.memory_mb,
        threads=args.threads,
    )
    try:
        if args.batch:
            return _main_batch(args, kwargs)
        if not args.notebook:
            ap.error("give a notebook to grade, or --batch DIR")
        rep = grade(
            args.notebook,
            solution=Path(args.solution) if args.solution else None,
            keep=Path(args.keep) if args.keep else None,
            sandbox=False if args.unsafe_no_sandbox else None,
            **kwargs,
        )
    except Unreadable as exc:
        _say(f"error: {exc}", sys.stderr)
        return 2
    except Exception as exc:
        _say(f"grader error: {type(exc).__name__}: {exc}", sys.stderr)
        return 3
    rep["submission"] = display_name(args.notebook)
    _say(format_report(rep))
    report = Path(args.report) if args.report else Path(args.notebook).with_suffix(".grade.json")
    try:
        report.write_text(json.dumps(rep, indent=1))
    except OSError as exc:
        _say(f"warning: could not write the report {report}: {exc}", sys.stderr)
    else:
        _say(f"Report: {display_name(report)}")
    return 0 if rep["all_passed"] else 1


if __name__ == "__main__":
    # Run the importable module's main, not this __main__ copy's: a batch sends grade_one to
    # the Dask workers, and cloudpickle sends a function of __main__ by value, with its
    # module's globals (locks among them: "cannot pickle '_thread.lock'"), but a function of
    # an importable module by reference.
    from course_lib.grading.grade import main as _importable_main

    sys.exit(_importable_main())
