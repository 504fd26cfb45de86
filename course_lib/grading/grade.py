"""Grade a saved exercise notebook against its solution notebook, with nbval.

    python -m course_lib.grading.grade exercises/04_attention.ipynb        # one submission
    python -m course_lib.grading.grade --batch submissions/ --out grades/  # a folder, in parallel

Only the student's answer code is taken from the submission (every code cell between the
trusted cells around each answer); it replaces the solution code in a copy of the solution
notebook, whose trusted setup and check cells (and their stored outputs, the reference) are
used as they are. ``pytest --nbval`` runs that copy in a fresh kernel in a temporary folder,
with a time limit per exercise and memory/file-size limits; a crashed kernel is restarted and
the remaining exercises are graded in a new pass. Answers are linted first (AST): redefining
trusted names, monkeypatching libraries, reaching into the kernel, or calling the library
function an exercise asks you to implement gets that exercise rejected with a clear message.

Exit codes: 0 every check passed; 1 some check failed; 2 the notebook could not be read;
3 grader error. The format of the notebooks is documented in ``exercises/README.md``.
"""
from __future__ import annotations

import argparse
import ast
import copy
import csv
import json
import os
import re
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from .spec import MARKER, NotebookSpec, load_spec, meta, role, stub_answer

__all__ = ["grade", "grade_batch", "lint_answer", "extract_answers", "Unreadable", "main"]

DEFAULT_TIME_LIMIT = 30.0  # seconds per exercise (answer cells + check cells)
DEFAULT_MEMORY_MB = 3072  # address-space limit of the grading processes (torch alone maps ~650 MB)
FILE_SIZE_LIMIT = 256 * 1024 * 1024
OUTPUT_LIMIT = 100_000  # characters a cell may print before the rest is dropped

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


class Unreadable(Exception):
    """The submission is not a readable notebook (exit code 2)."""


class GraderError(Exception):
    """Something went wrong on the grader's side (exit code 3)."""


# --------------------------------------------------------------------------- reading
def read_notebook(path: Path):
    path = Path(path)
    if not path.is_file():
        raise Unreadable(f"{path}: no such file.")
    raw = path.read_bytes()
    if not raw.strip():
        raise Unreadable(f"{path}: the file is empty. Save the notebook again in Jupyter (File > Save) and re-submit.")
    try:
        text = raw.decode("utf-8")
        data = json.loads(text)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise Unreadable(
            f"{path}: not valid notebook JSON ({exc}). The file is probably truncated or was edited "
            "outside Jupyter; save it again from Jupyter, or start again from a fresh copy of the exercise notebook."
        ) from None
    if not isinstance(data, dict) or "cells" not in data:
        raise Unreadable(f"{path}: valid JSON but not a Jupyter notebook (no 'cells'); submit the .ipynb file itself.")
    try:
        nb = nbformat.reads(text, as_version=4)
    except Exception as exc:  # nbformat raises several types for malformed notebooks
        raise Unreadable(f"{path}: not a valid Jupyter notebook ({type(exc).__name__}: {exc}).") from None
    for cell in nb.cells:
        if not isinstance(cell.get("source", ""), str) or cell.get("cell_type") not in ("code", "markdown", "raw"):
            raise Unreadable(f"{path}: a cell is malformed (bad source or cell_type); save it again from Jupyter.")
    return nb


def find_solutions_dir(near: Path) -> Path:
    """The course's ``solutions/`` folder: in the current folder, or in a folder above the
    notebook (a clone of the course repository). ``find_solution`` explains when there is none."""
    for base in (Path.cwd(), *Path(near).resolve().parents):
        if (base / "solutions").is_dir():
            return base / "solutions"
    return Path.cwd() / "solutions"


def find_solution(sub, path: Path, solutions_dir: Path) -> Path:
    if not Path(solutions_dir).is_dir():
        raise GraderError(
            f"the solutions folder {solutions_dir} does not exist: grade from a clone of the course "
            "repository (pip-installed course_lib has no solutions), or pass --solutions DIR."
        )
    stem = sub.metadata.get("course", {}).get("notebook")
    if stem and (solutions_dir / f"{stem}.ipynb").is_file():
        return solutions_dir / f"{stem}.ipynb"
    for sol in sorted(solutions_dir.glob("*.ipynb")):
        if sol.stem in Path(path).name:
            return sol
    raise Unreadable(
        f"{path}: cannot tell which exercise notebook this is (no course.notebook metadata and no "
        f"solution stem such as 04_attention in the file name); pass --solution PATH."
    )


# --------------------------------------------------------------------------- answers
_NBVAL_MARKER = re.compile(r"^(\s*)#+\s*(NBVAL_[A-Z_]+|PYTEST_VALIDATE_IGNORE_OUTPUT)\s*$", re.M)


def _neutralise_markers(code: str) -> str:
    """Comment markers such as ``# NBVAL_SKIP`` would change how nbval treats the cell."""
    return _NBVAL_MARKER.sub(r"\1# (nbval marker \2 ignored by the grader)", code)


def extract_answers(sub, spec: NotebookSpec, sol) -> tuple[dict[str, list[str]], list[str]]:
    """{exercise: [code of each student cell]}: every code cell between the trusted cells around
    an answer (so added helper cells and split cells count), plus notes for the report."""
    trusted = set(spec.trusted_ids)
    pos = {cid: i for i, cid in enumerate(spec.trusted_ids)}
    after: dict[str, str | None] = {}  # trusted id -> the exercise whose answer comes next
    for cid in spec.trusted_ids:
        after[cid] = next((ex.name for ex in spec.exercises
                           if ex.prev_anchor is not None and pos[ex.prev_anchor] >= pos[cid]), None)
    answer_ids = {ex.answer_id: ex.name for ex in spec.exercises}
    markers = {MARKER.format(name=ex.name): ex.name for ex in spec.exercises}
    answers: dict[str, list[str]] = {ex.name: [] for ex in spec.exercises}
    notes: list[str] = []
    by_source = {c.source.strip(): c.id for c in sol.cells if c.cell_type == "code" and c.id in trusted}
    current = None
    for cell in sub.cells:
        cid, src = cell.get("id"), cell.get("source", "")
        named = answer_ids.get(cid) or next((n for m, n in markers.items() if src.lstrip().startswith(m)), None)
        if cell.cell_type == "code" and not named:
            # a trusted cell is known by its id, or by its source (a tool that drops cell ids, a copy)
            tid = cid if cid in trusted else by_source.get(src.strip())
            if tid is not None:
                current = after[tid]
                continue
        if cell.cell_type != "code":
            if named:
                notes.append(f"{named}: the answer cell is a {cell.cell_type} cell, so its code was not run; "
                             "change it back to a code cell (Cell > Cell Type > Code).")
            continue
        if named:
            current = named
        if current is None:
            if src.strip():
                notes.append("code outside the exercises (before the first answer or after the last check) was ignored.")
            continue
        if src.strip():
            answers[current].append(_neutralise_markers(src))
    for ex in spec.exercises:
        if not answers[ex.name]:
            notes.append(f"{ex.name}: no answer code found (was the answer cell deleted or turned into markdown?).")
    return answers, notes


# --------------------------------------------------------------------------- lint
_BANNED_MODULES = {"builtins", "ctypes", "gc", "inspect", "IPython", "ipykernel", "importlib", "atexit",
                   "signal", "threading", "multiprocessing", "_thread", "faulthandler", "course_lib",
                   "subprocess", "pty", "asyncio", "concurrent", "io", "pathlib", "shutil", "tempfile",
                   "glob", "fileinput", "mmap", "socket", "pickle", "marshal"}
_BANNED_NAMES = {"get_ipython", "__builtins__", "__import__", "exec", "eval", "compile", "globals",
                 "locals", "vars", "breakpoint", "setattr", "delattr", "open"}
_BANNED_ATTRS = {"__globals__", "__code__", "__closure__", "__builtins__", "__subclasses__", "__dict__",
                 "f_globals", "f_locals", "f_back", "f_builtins", "_getframe", "modules", "stdout", "stderr",
                 "__stdout__", "__stderr__", "settrace", "setprofile", "displayhook", "excepthook",
                 "system", "fork", "forkpty", "popen", "posix_spawn", "posix_spawnp", "execv", "execve",
                 "execl", "execle", "execlp", "execlpe", "execvp", "execvpe", "spawnl", "spawnle", "spawnv",
                 "spawnve", "spawnlp", "spawnlpe", "spawnvp", "spawnvpe",
                 # files: the grading folder holds the graded notebook and the cell records
                 "open", "fdopen", "listdir", "scandir", "walk", "unlink", "rename", "renames",
                 "makedirs", "mkdir", "rmdir", "chdir", "dup", "dup2", "symlink",
                 "save", "load"}


def _trusted_bindings(sol, spec: NotebookSpec) -> tuple[dict[str, str], set[str]]:
    """(name -> what the trusted setup cells bind it to, names bound only by check cells)."""
    from . import checks

    names: dict[str, str] = {n: "check helper" for n in checks.__all__}
    in_checks: dict[str, str] = {}
    for cell in sol.cells:
        if cell.cell_type == "code" and role(cell) in ("setup", "check"):
            target = names if role(cell) == "setup" else in_checks
            for node in _toplevel(ast.parse(cell.source).body):
                target.update(_bindings(node))
    names.pop("_", None)
    check_only = set(in_checks) - set(names) - {"_"}
    return {**{n: "a check cell" for n in check_only}, **names}, check_only


def _bindings(node) -> dict[str, str]:
    out = {}
    if isinstance(node, ast.Import):
        for a in node.names:
            out[a.asname or a.name.split(".")[0]] = f"import {a.name}" + (f" as {a.asname}" if a.asname else "")
    elif isinstance(node, ast.ImportFrom):
        for a in node.names:
            out[a.asname or a.name] = f"from {node.module} import {a.name}" + (f" as {a.asname}" if a.asname else "")
    elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        out[node.name] = "def"
    elif isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        for t in targets:
            for n in _target_names(t):
                out[n] = "assignment"
    elif isinstance(node, (ast.For, ast.AsyncFor, ast.With, ast.AsyncWith)):
        targets = [node.target] if isinstance(node, (ast.For, ast.AsyncFor)) else \
            [i.optional_vars for i in node.items if i.optional_vars is not None]
        for t in targets:
            for n in _target_names(t):
                out[n] = "assignment"
    return out


def _target_names(t) -> list[str]:
    """Names an assignment target binds (x, (a, b), *rest), not attributes or subscripts."""
    if isinstance(t, ast.Name):
        return [t.id]
    if isinstance(t, (ast.Tuple, ast.List)):
        return [n for e in t.elts for n in _target_names(e)]
    if isinstance(t, ast.Starred):
        return _target_names(t.value)
    return []


def _toplevel(stmts):
    """Statements at module level, looking inside if/for/while/with/try but not def/class."""
    for node in stmts:
        yield node
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        for name in ("body", "orelse", "finalbody"):
            yield from _toplevel(getattr(node, name, []) or [])
        for h in getattr(node, "handlers", []) or []:
            yield from _toplevel(h.body)


def _root(node) -> str | None:
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def lint_answer(code: str, trusted: dict[str, str], forbid: list[str], exercise: str,
                check_only: set[str] = frozenset()) -> list[str]:
    """Problems that get an answer rejected (empty list: accepted). Syntax errors are not lint
    problems: the code runs and the error shows up in the feedback."""
    try:
        from IPython.core.inputtransformer2 import TransformerManager

        py = TransformerManager().transform_cell(code)
    except Exception:
        py = code
    try:
        tree = ast.parse(py)
    except SyntaxError:
        return []
    problems: list[str] = []

    def bad(node, msg):
        problems.append(f"line {getattr(node, 'lineno', '?')}: {msg}")

    if py.strip() != code.strip() and "get_ipython()" in py and "get_ipython" not in code:
        problems.append("IPython magics and shell commands (%..., !...) are not allowed in answers.")
        return problems
    modules = {n for n, how in trusted.items() if how.startswith(("import", "from"))}
    forbid_set = set(forbid)
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            mods = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            for m in mods:
                if m.split(".")[0] in _BANNED_MODULES:
                    bad(node, f"importing {m} is not allowed in an answer.")
            if isinstance(node, ast.ImportFrom):
                for a in node.names:
                    if a.name in forbid_set:
                        bad(node, f"this exercise asks you to write {a.name} yourself; do not import it.")
            for name in _bindings(node):
                modules.add(name)
        elif isinstance(node, ast.Name) and node.id in _BANNED_NAMES:
            bad(node, f"{node.id} is not allowed in an answer.")
        elif isinstance(node, ast.Name) and node.id in check_only:
            bad(node, f"{node.id} belongs to a check cell; an answer may not use or change it.")
        elif isinstance(node, ast.Name) and node.id.startswith("_course"):
            bad(node, "names starting with _course belong to the grader.")
        elif isinstance(node, ast.Attribute):
            if node.attr in _BANNED_ATTRS:
                bad(node, f"accessing .{node.attr} is not allowed in an answer.")
            if node.attr in forbid_set:
                bad(node, f"this exercise asks you to implement {node.attr} yourself, so calling "
                          f"{ast.unparse(node)} is not allowed (use more basic tensor operations).")
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult) and "@" in forbid_set:
            bad(node, "this exercise asks you to multiply matrices yourself, so the @ operator is not allowed.")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getattr":
            if any(isinstance(a, ast.Constant) and a.value in forbid_set | _BANNED_ATTRS for a in node.args[1:2]):
                bad(node, "getattr with that name is not allowed in an answer.")
        elif isinstance(node, ast.Global):
            for n in node.names:
                if n in trusted:
                    bad(node, f"{n} is defined by the notebook's trusted cells; do not rebind it.")
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Delete)):
            targets = node.targets if isinstance(node, (ast.Assign, ast.Delete)) else [node.target]
            for t in targets:
                for n in ast.walk(t):
                    if isinstance(n, (ast.Attribute, ast.Subscript)) and _root(n) in modules:
                        bad(node, f"changing {ast.unparse(n)} would change a library for the checks too; "
                                  "compute your answer without modifying modules.")
                        break
    for node in _toplevel(tree.body):
        for name, how in _bindings(node).items():
            if name in trusted and how != trusted[name]:
                bad(node, f"{name} is defined by the notebook's trusted cells ({trusted[name]}); "
                          "do not redefine it (the checks rely on it). Pick another name.")
    return list(dict.fromkeys(problems))


# --------------------------------------------------------------------------- running
@dataclass
class ExerciseResult:
    name: str
    max_points: float
    status: str = "graded"  # graded | timed out | crashed | rejected
    messages: list[str] = field(default_factory=list)
    checks: list[dict] = field(default_factory=list)

    @property
    def points(self) -> float:
        if self.status != "graded" or not self.checks:
            return 0.0
        return round(self.max_points * sum(c["passed"] for c in self.checks) / len(self.checks), 2)


def _new_code_cell(source, cid, course, tags=()):
    c = nbformat.v4.new_code_cell(source)
    c.id = cid
    c.metadata = {"course": course}
    if tags:
        c.metadata["tags"] = list(tags)
    return c


def assemble(sol, spec: NotebookSpec, answers: dict[str, list[str]], skip_checks: set[str]):
    """A copy of the solution notebook with the student's answer cells in place of the solution's."""
    nb = copy.deepcopy(sol)
    cells = [_new_code_cell(PRELUDE, "grader-prelude", {"role": "setup"})]
    for cell in sol.cells:
        r, m = role(cell), meta(cell)
        if cell.cell_type != "code":
            continue
        if r == "answer":
            for i, code in enumerate(answers[m["exercise"]]):
                cid = cell.id if i == 0 else f"{cell.id}-{i + 1}"
                cells.append(_new_code_cell(code, cid, {"role": "answer", "exercise": m["exercise"]},
                                            ["nbval-ignore-output"]))
        else:
            c = copy.deepcopy(cell)
            if r == "check" and m["exercise"] in skip_checks:
                c.metadata.setdefault("tags", []).append("nbval-skip")
            cells.append(c)
    nb.cells = cells
    return nb


def _apply_limits(pid: int, memory_mb: int) -> None:
    """Resource limits of the pytest process, inherited by the kernel it starts later.
    (prlimit after the spawn instead of preexec_fn, which is unsafe with threads.)"""
    if memory_mb:
        resource.prlimit(pid, resource.RLIMIT_AS, (memory_mb * 1024 * 1024,) * 2)
    resource.prlimit(pid, resource.RLIMIT_FSIZE, (FILE_SIZE_LIMIT,) * 2)
    resource.prlimit(pid, resource.RLIMIT_CORE, (0, 0))


def run_nbval(nb, workdir: Path, time_limit: float, memory_mb: int, threads: int | None,
              hard_timeout: float) -> tuple[list[dict], str]:
    """Run ``pytest --nbval`` on ``nb`` in ``workdir``; returns (cell records, pytest output)."""
    # the records go outside the kernel's folder (the kernel runs in ``workdir``)
    nb_path = workdir / "graded.ipynb"
    rec = Path(tempfile.mkdtemp(prefix="records-", dir=workdir.parent)) / "record.jsonl"
    nbformat.write(nb, nb_path)
    nbformat.write(nb, rec.parent / "graded.ipynb")  # a copy for --keep: the plugin deletes the original
    (workdir / "pytest.ini").write_text("[pytest]\naddopts =\n")
    # the plugin goes in as the folder's conftest.py, so pytest does not import course_lib (and torch)
    shutil.copy(Path(__file__).with_name("nbval_plugin.py"), workdir / "conftest.py")
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
           "-c", str(workdir / "pytest.ini"), "--rootdir", str(workdir), "--nbval", "--nbval-current-env",
           "--nbval-kernel-startup-timeout=180", f"--course-record={rec}", f"--course-time-limit={time_limit}",
           "-W", "ignore", str(nb_path)]
    env = {k: v for k, v in os.environ.items() if k not in ("COURSE_LIB_SOURCE", "PYTEST_ADDOPTS")}
    env.update(PYTHONHASHSEED="0", MPLBACKEND="Agg", JUPYTER_PLATFORM_DIRS="1", PYDEVD_DISABLE_FILE_VALIDATION="1")
    if threads:
        env["OMP_NUM_THREADS"] = env["MKL_NUM_THREADS"] = str(threads)
    log = rec.parent / "pytest.log"
    with open(log, "w") as out:
        proc = subprocess.Popen(cmd, cwd=workdir, env=env, stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
        try:
            _apply_limits(proc.pid, memory_mb)
        except OSError:  # the process already ended
            pass
        try:
            proc.wait(timeout=hard_timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    records = []
    if rec.exists():
        for line in rec.read_text().splitlines():
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError:
                pass
    return records, log.read_text(errors="replace")[-5000:]


def _check_results(ex, recs_by_id: dict[str, dict]) -> list[dict]:
    results = []
    for c in ex.checks:
        rec = recs_by_id.get(c.cell_id)
        stdout = rec["stdout"].splitlines() if rec else []
        passed = stdout.count(f"[PASS] {c.name}") == 1
        detail = ""
        if not passed:
            fail = next((l for l in stdout if l.startswith(f"[FAIL] {c.name}: ")), None)
            if fail:
                detail = fail[len(f"[FAIL] {c.name}: "):].split(". Hint: ")[0]
            elif rec is None:
                detail = "the check did not run"
            elif rec["failed"]:
                detail = "the check cell did not finish: " + (rec["errors"][0] if rec["errors"] else rec["message"])
            else:
                detail = "no verdict was printed"
        results.append({"name": c.name, "passed": passed, "hint": c.hint, "detail": detail})
    return results


def grade(path: str | Path, solutions_dir: Path | None = None, solution: Path | None = None,
          time_limit: float = DEFAULT_TIME_LIMIT, memory_mb: int = DEFAULT_MEMORY_MB,
          threads: int | None = None, keep: Path | None = None) -> dict:
    """Grade one submission; returns the report (a JSON-able dict). Raises Unreadable."""
    t0 = time.monotonic()
    path = Path(path)
    sub = read_notebook(path)
    solutions_dir = Path(solutions_dir) if solutions_dir else find_solutions_dir(path)
    sol_path = Path(solution) if solution else find_solution(sub, path, solutions_dir)
    try:
        sol = nbformat.read(sol_path, as_version=4)
        spec = load_spec(sol, sol_path.stem)
        trusted, check_only = _trusted_bindings(sol, spec)
    except Exception as exc:
        raise GraderError(f"cannot load the solution notebook {sol_path}: {exc}") from exc
    answers, notes = extract_answers(sub, spec, sol)
    results = {ex.name: ExerciseResult(ex.name, ex.points) for ex in spec.exercises}
    sol_answer = {meta(c)["exercise"]: c.source for c in sol.cells if role(c) == "answer"}
    stub = {name: [stub_answer(src, name)] for name, src in sol_answer.items()}
    for ex in spec.exercises:
        problems = [p for code in answers[ex.name] for p in lint_answer(code, trusted, ex.forbid, ex.name, check_only)]
        if problems:
            results[ex.name].status = "rejected"
            results[ex.name].messages += [f"rejected by the answer lint: {p}" for p in problems]
            answers[ex.name] = stub[ex.name]
    for n in notes:
        name = n.split(":")[0]
        if name in results:
            results[name].messages.append(n.split(": ", 1)[1])
    done: set[str] = {n for n, r in results.items() if r.status == "rejected"}
    passes = 0
    tmp = Path(tempfile.mkdtemp(prefix="course-grade-"))
    try:
        while len(done) < len(spec.exercises) and passes <= len(spec.exercises):
            passes += 1
            nb = assemble(sol, spec, answers, skip_checks=done)
            hard = 240 + time_limit * 1.5 * len(spec.exercises)
            workdir = Path(tempfile.mkdtemp(prefix=f"pass{passes}-", dir=tmp))  # fresh: nothing a previous pass wrote
            records, log = run_nbval(nb, workdir, time_limit, memory_mb, threads, hard)
            by_id = {r["id"]: r for r in records}
            setup_recs = [r for r in records if r["exercise"] is None]
            if not records or (setup_recs and any(r["failed"] for r in setup_recs)):
                bad = next((r for r in setup_recs if r["failed"]), None)
                why = f"{bad['id']}: {bad['message']}" if bad else "pytest --nbval produced no results"
                raise GraderError(f"the trusted setup cells failed ({why}).\n{log}")
            # where the kernel died or could not be interrupted, if anywhere
            broken = next((r for r in records if r["kernel_died"] or
                           (r["timed_out"] and "Failed to interrupt" in r["message"])), None)
            order = [c.id for c in nb.cells]
            if broken is None and len(records) < len([c for c in nb.cells]):
                missing = next(cid for cid in order if cid not in by_id)  # the pytest run itself was killed
                broken = {"id": missing, "exercise": meta(nb.cells[order.index(missing)]).get("exercise"),
                          "timed_out": True, "kernel_died": False, "message": "hard time limit"}
            cut = order.index(broken["id"]) if broken else len(order)
            for ex in spec.exercises:
                if ex.name in done:
                    continue
                ex_ids = [cid for cid in order if meta(nb.cells[order.index(cid)]).get("exercise") == ex.name]
                if broken and ex.name == broken["exercise"]:
                    r = results[ex.name]
                    r.status = "timed out" if broken.get("timed_out") else "crashed"
                    r.messages.append(
                        f"timed out after {time_limit:g} s (time limit per exercise); look for an infinite loop"
                        if r.status == "timed out" else
                        "the kernel crashed while running this exercise (os._exit, a segfault, or more memory "
                        f"than the {memory_mb} MB limit); the other exercises were graded in a fresh kernel")
                    r.checks = [{"name": c.name, "passed": False, "hint": c.hint, "detail": r.status}
                                for c in ex.checks]
                    answers[ex.name] = stub[ex.name]
                    done.add(ex.name)
                    continue
                if any(order.index(cid) >= cut for cid in ex_ids):
                    continue  # after the crash: graded in the next pass
                r = results[ex.name]
                recs = [by_id[cid] for cid in ex_ids if cid in by_id]
                if any(x["timed_out"] for x in recs):
                    r.status = "timed out"
                    r.messages.append(f"timed out after {time_limit:g} s (time limit per exercise); "
                                      "look for an infinite loop or a very slow computation")
                    r.checks = [{"name": c.name, "passed": False, "hint": c.hint, "detail": "timed out"}
                                for c in ex.checks]
                else:
                    for x in recs:
                        if meta(nb.cells[order.index(x["id"])]).get("role") == "answer" and x["errors"]:
                            r.messages.append(f"your answer cell raised {x['errors'][0]}")
                    r.checks = _check_results(ex, by_id)
                done.add(ex.name)
    finally:
        if keep:
            shutil.copytree(tmp, keep, dirs_exist_ok=True)
        shutil.rmtree(tmp, ignore_errors=True)
    for r in results.values():
        if r.status == "rejected":
            r.checks = [{"name": c.name, "passed": False, "hint": c.hint, "detail": "rejected"}
                        for c in spec.exercise(r.name).checks]
    exs = [results[ex.name] for ex in spec.exercises]
    score = round(sum(r.points for r in exs), 2)
    return {
        "submission": str(path), "notebook": sol_path.stem, "solution": str(sol_path), "status": "graded",
        "score": score, "max_score": spec.max_score,
        "all_passed": all(c["passed"] for r in exs for c in r.checks) and all(r.status == "graded" for r in exs),
        "exercises": [{"name": r.name, "points": r.points, "max_points": r.max_points, "status": r.status,
                       "messages": r.messages, "checks": r.checks} for r in exs],
        "notes": [n for n in notes if n.split(":")[0] not in results],
        "passes": passes, "seconds": round(time.monotonic() - t0, 1),
    }


def format_report(rep: dict) -> str:
    lines = [f"Grading {rep['submission']} against {rep['solution']}", ""]
    for ex in rep["exercises"]:
        status = "" if ex["status"] == "graded" else f"  ({ex['status']})"
        lines.append(f"  {ex['name']:<24} {ex['points']:6.2f} / {ex['max_points']:g}{status}")
        for m in ex["messages"]:
            lines.append(f"      note: {m}")
        for c in ex["checks"]:
            if not c["passed"]:
                lines.append(f"      [FAIL] {c['name']}: {c['detail']}")
                lines.append(f"             hint: {c['hint']}")
    for n in rep.get("notes", []):
        lines.append(f"  note: {n}")
    pct = 100 * rep["score"] / rep["max_score"] if rep["max_score"] else 0
    lines += ["", f"Total: {rep['score']:g} / {rep['max_score']:g} ({pct:.0f} %)"]
    return "\n".join(lines)


# --------------------------------------------------------------------------- batch
def _grade_one(args) -> dict:
    path, kwargs = args
    try:
        return grade(path, **kwargs)
    except Unreadable as exc:
        return {"submission": str(path), "status": "unreadable", "error": str(exc), "score": 0.0, "max_score": None}
    except Exception as exc:  # one bad submission never stops the batch
        return {"submission": str(path), "status": "grader error", "error": f"{type(exc).__name__}: {exc}",
                "score": 0.0, "max_score": None}


def grade_batch(folder: Path, out: Path, workers: int | None = None, **kwargs) -> list[dict]:
    """Grade every .ipynb under ``folder`` (one grading per core at a time); writes per-submission JSON
    reports and ``gradebook.csv`` into ``out``."""
    from concurrent.futures import ThreadPoolExecutor, as_completed

    from tqdm import tqdm

    files = sorted(p for p in Path(folder).rglob("*.ipynb") if ".ipynb_checkpoints" not in p.parts
                   and Path(out).resolve() not in p.resolve().parents)
    out.mkdir(parents=True, exist_ok=True)
    workers = workers or os.cpu_count() or 1
    # Threads are enough: each grading spends its time waiting for its own pytest/kernel
    # processes, and an exception stays with its submission instead of breaking a process pool.
    by_file = {}
    with ThreadPoolExecutor(max_workers=workers) as pool:
        futures = {pool.submit(_grade_one, (f, kwargs)): f for f in files}
        for fut in tqdm(as_completed(futures), total=len(files), desc="grading", unit="notebook", file=sys.stderr):
            by_file[futures[fut]] = fut.result()
    reports = [by_file[f] for f in files]
    ex_names = sorted({e["name"] for r in reports for e in r.get("exercises", [])})
    with open(out / "gradebook.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["submission", "notebook", "status", "score", "max_score", *ex_names, "error"])
        for r in reports:
            pts = {e["name"]: e["points"] for e in r.get("exercises", [])}
            w.writerow([Path(r["submission"]).relative_to(folder), r.get("notebook", ""), r["status"], r["score"],
                        r.get("max_score") or "", *[pts.get(n, "") for n in ex_names], r.get("error", "")])
    for r in reports:
        rel = Path(r["submission"]).relative_to(folder)
        target = out / (str(rel.with_suffix("")).replace(os.sep, "__") + ".grade.json")
        target.write_text(json.dumps(r, indent=1))
    return reports


# --------------------------------------------------------------------------- CLI
def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="course-grade", description="Grade exercise notebooks with nbval.")
    ap.add_argument("notebook", nargs="?", help="the saved exercise notebook to grade")
    ap.add_argument("--batch", metavar="DIR", help="grade every .ipynb under DIR in parallel")
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
    args = ap.parse_args(argv)
    kwargs = dict(solutions_dir=Path(args.solutions) if args.solutions else None, time_limit=args.time_limit, memory_mb=args.memory_mb,
                  threads=args.threads)
    try:
        if args.batch:
            folder = Path(args.batch)
            if not folder.is_dir():
                print(f"error: --batch {folder}: not a folder", file=sys.stderr)
                return 2
            out = Path(args.out) if args.out else folder / "_grades"
            reports = grade_batch(folder, out, workers=args.workers, **kwargs)
            counts = {s: sum(r["status"] == s for r in reports) for s in ("graded", "unreadable", "grader error")}
            print(f"{len(reports)} submissions: {counts['graded']} graded, {counts['unreadable']} unreadable, "
                  f"{counts['grader error']} grader errors; gradebook: {out / 'gradebook.csv'}")
            return 3 if counts["grader error"] else 0
        if not args.notebook:
            ap.error("give a notebook to grade, or --batch DIR")
        rep = grade(args.notebook, solution=Path(args.solution) if args.solution else None,
                    keep=Path(args.keep) if args.keep else None, **kwargs)
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
