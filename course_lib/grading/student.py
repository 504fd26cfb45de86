"""The student's process of one submission: a zygote, and one fresh child per exercise
(stdlib and torch; it runs inside that submission's own bubblewrap sandbox, see ``sandbox``).

    python -m course_lib.grading.student IN_FD OUT_FD

The grader (``runner``) starts one sandbox per submission, sometimes ahead of time (while the
previous submission is graded), with two fresh pipes. Its first process, the **zygote**,
imports torch, makes itself non-dumpable (``lockdown.not_dumpable``: no other process of the
sandbox can open its ``/proc`` files or memory), waits for one plan (``runner.student_plan``)
on ``IN_FD`` and closes it: the plan of a submission is only ever read here, in a process
that no other submission's code shares. It runs the notebook's trusted setup cells once, on
one thread (OpenMP is not started: a process that forks after OpenMP has started its threads
deadlocks in the child), and, if the notebook uses torch's optimizers, pays their first-call
cost (importing torch._dynamo) once before forking. Then, for each exercise, it forks a child
that

1. closes every descriptor but its own pipe to the zygote, sets its resource limits and
   installs the seccomp allow-list (``lockdown.confine``: no new processes, no other ABI, no
   signals to, tracing of or reading of another process);
2. runs the notebook up to that exercise: the earlier exercises' answers (their stubs where
   they crashed or ran out of time in their own child), with the bindings of the trusted cells
   between them restored (the zygote ran each setup and check cell once, the check cells as
   their student programs in ``skip`` mode, for the names they define, and only up to this
   exercise's last check cell before forking this child);
3. says it has started the exercise (its time budget starts then), runs the exercise's answer
   cells, then its check cells' student programs (``split``) in ``student`` mode with the
   exercise's forbidden functions refused: each check calls the student's code and records the
   outcome as plain data; no reference, predicate or hint is evaluated in this process;
4. sends the outcomes as one message, tagged with its exercise.

The zygote watches each child with a deadline for everything: past the prelude's allowance or
the exercise's budget (one wall-clock budget for the answer and check cells together) it kills
it ("timed out"); it kills it as soon as its outcome arrives (a child that sends its outcome
and lingers costs nothing); a child that dies without sending it "crashed" (SIGSYS: a refused
call through another ABI); a message that is not this exercise's outcome is a crash too. The
next child is forked from the zygote, which never runs student code, so nothing a child does
reaches the next exercise, and when the last exercise is done the sandbox goes with all it
held. The zygote sends one message per exercise to ``OUT_FD``, each tagged with the
submission's token and its exercise; the grader checks them as untrusted data and hands them to
the checker (``checker``), which alone judges.
"""

from __future__ import annotations

import ast
import builtins
import os
import resource
import select
import signal
import sys
import time

__all__ = ["main", "Zygote", "PLAN_WAIT"]

_PRELUDE_SLACK = (
    30.0  # seconds for a child to rerun the earlier exercises, on top of what they took
)
PLAN_WAIT = 900.0  # seconds a sandbox started ahead waits for its plan before it gives up
_REAP_WAIT = 10.0  # seconds to wait for a killed child to be gone


def _bound_names(source: str) -> set[str]:
    """Names a trusted cell binds at top level (to restore its bindings in each child)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return set()
    names: set[str] = set()
    for node in tree.body:
        for sub in (
            ast.walk(node)
            if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign))
            else [node]
        ):
            if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Store):
                names.add(sub.id)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name.split(".")[0]) for a in node.names)
        elif isinstance(node, (ast.For, ast.With, ast.If, ast.Try)):
            names.update(
                n.id
                for n in ast.walk(node)
                if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
            )
    return names


def _warm_up() -> None:
    """Pay once, before forking, the first-call cost the children would each pay: building an
    optimizer imports about 800 modules (torch._dynamo and its dependencies, ~1.3 s of CPU)."""
    import torch

    p = torch.zeros(2, requires_grad=True)
    opt = torch.optim.AdamW([p], lr=0.1)
    p.grad = torch.ones(2)
    opt.step()


def _error_line(exc: BaseException) -> str:
    from .checks import _clean

    msg = _clean(str(exc))
    return f"{type(exc).__name__}" + (f": {msg}" if msg else "")


def _run(source: str, name: str, ns: dict) -> None:
    exec(compile(source, name, "exec"), ns)  # noqa: S102 - this process exists to run notebook code


def _reap(pid: int, timeout: float = _REAP_WAIT) -> int | None:
    """waitpid(pid) within ``timeout`` seconds: its status, or None if it is still there."""
    deadline = time.monotonic() + timeout
    try:
        pidfd = os.pidfd_open(pid)
    except (AttributeError, OSError):
        pidfd = None
    try:
        while True:
            got, status = os.waitpid(pid, os.WNOHANG)
            if got:
                return status
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            if pidfd is not None:
                select.select([pidfd], [], [], left)
            else:
                time.sleep(min(left, 0.01))
    except ChildProcessError:
        return None
    finally:
        if pidfd is not None:
            os.close(pidfd)


def _death(wstatus: int | None) -> str:
    if wstatus is None:
        return "did not end when killed"
    if os.WIFSIGNALED(wstatus):
        sig = os.WTERMSIG(wstatus)
        if sig == signal.SIGSYS:
            return f"killed by signal {sig} (SIGSYS: a system call the grading sandbox refuses)"
        return f"killed by signal {sig}"
    if os.WIFEXITED(wstatus):
        return f"exited with code {os.WEXITSTATUS(wstatus)}"
    return "ended"


class Zygote:
    """One submission's trusted process: runs the trusted cells once, then one child per
    exercise (see the module docstring)."""

    def __init__(self, plan: dict, out_fd: int) -> None:
        self.plan, self.out_fd = plan, out_fd
        self.token = str(plan.get("token", ""))
        self.cells: list[dict] = plan["cells"]
        self.exercises: dict[str, dict] = {e["name"]: e for e in plan["exercises"]}
        self.order = [e["name"] for e in plan["exercises"]]
        self.stubbed: set[str] = set(plan.get("stubbed", []))
        self.spent: dict[str, float] = {}
        self.saved: dict[str, dict] = {}
        self.ran = 0  # the trusted cells before this index have run (``advance``)
        self.ns: dict = {"__name__": "__main__", "__builtins__": builtins}
        self.warm = False

    def send(self, obj: dict) -> None:
        from .wire import write_frame

        write_frame(self.out_fd, {"sub": self.token, **obj})

    def warm_up(self) -> None:
        if not self.warm:
            _warm_up()
            self.warm = True

    # ---------------------------------------------------------------- setup (trusted, once)
    def setup(self) -> None:
        """Run the trusted cells before the first answer (the setup cells) once, after paying
        the optimizer's first-call cost if the plan says the notebook needs it."""
        import torch

        torch.set_num_threads(1)  # no OpenMP threads before fork (see the module docstring)
        t0 = time.monotonic()
        if self.plan.get("warm"):
            self.warm_up()
        answers = [i for i, c in enumerate(self.cells) if c["role"] == "answer"]
        self.advance(answers[0] if answers else len(self.cells))
        self.send({"ready": True, "seconds": round(time.monotonic() - t0, 3)})

    def advance(self, upto: int) -> None:
        """Run the trusted cells before cell ``upto`` not run yet, once, in ``skip`` mode: setup
        cells, and check cells as their student programs (``split``: inputs and the student's
        callables, never a reference); each child restores their bindings instead of rerunning
        them. A child is forked only after the cells up to its exercise's last check cell: the
        names of later exercises' check cells do not exist in it."""
        from . import checks

        checks.set_mode("skip")
        devnull = os.open(os.devnull, os.O_WRONLY)
        saved_out = os.dup(1), os.dup(2)
        os.dup2(devnull, 1)
        os.dup2(devnull, 2)
        try:
            for cell in self.cells[self.ran : upto]:
                if cell["role"] not in ("setup", "check"):
                    continue
                checks.begin_cell(cell["id"])
                try:
                    _run(cell["source"], f"<{cell['role']} {cell['id']}>", self.ns)
                except Exception:  # noqa: BLE001 - a check cell's error shows in its own exercise's child
                    if cell["role"] == "setup":
                        raise
                self.saved[cell["id"]] = {
                    n: self.ns[n] for n in _bound_names(cell["source"]) if n in self.ns
                }
        finally:
            self.ran = max(self.ran, upto)
            sys.stdout.flush()
            os.dup2(saved_out[0], 1)
            os.dup2(saved_out[1], 2)
            for fd in (*saved_out, devnull):
                os.close(fd)

    # ---------------------------------------------------------------- one exercise
    def run_all(self) -> None:
        for name in self.plan["todo"]:
            self.send({"start": name})
            msg = self.run_one(name)
            if msg["status"] != "graded":
                self.stubbed.add(name)
            self.send(msg)
        self.send({"done": True})

    def run_one(self, name: str) -> dict:
        self.advance(1 + max(i for i, c in enumerate(self.cells) if c.get("exercise") == name))
        r, w = os.pipe()
        t0 = time.monotonic()
        pid = os.fork()
        if pid == 0:  # the child: never returns
            os.close(r)
            code = 1
            try:
                code = _Child(self, name, w).run()
            finally:
                os._exit(code)
        os.close(w)
        return self.watch(name, pid, r, t0)

    def watch(self, name: str, pid: int, r: int, t0: float) -> dict:
        """Wait for the child's outcome within its time allowances; kill it once the outcome
        is in, or past them."""
        from .wire import FrameBuffer, WireError

        limit = float(self.plan["time_limit"])
        earlier = sum(self.spent.get(n, 0.0) for n in self.order[: self.order.index(name)])
        deadline = t0 + _PRELUDE_SLACK + 2 * earlier
        started = None
        reader = FrameBuffer(r)
        result, status, why = None, None, ""
        try:
            while result is None and status is None and not reader.eof:
                if time.monotonic() >= deadline:
                    status = "timed out"
                    break
                try:
                    frames = reader.wait(deadline)
                except WireError as exc:
                    status, why = "crashed", f"sent a malformed message ({exc})"
                    break
                for f in frames:
                    if not isinstance(f, dict) or f.get("exercise") != name:
                        status, why = "crashed", "sent a message that is not its outcome"
                        break
                    if f.get("started") is True and started is None and "results" not in f:
                        started = time.monotonic()
                        deadline = started + limit
                    elif "results" in f:
                        result = f
                        break
                    else:
                        status, why = "crashed", "sent a message that is not its outcome"
                        break
        finally:
            try:  # at once: whatever it does after its outcome does not hold the grading
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            wstatus = _reap(pid)
            os.close(r)
        elapsed = time.monotonic() - (started or t0)
        self.spent[name] = elapsed
        if result is not None:
            if result.get("dynamo") is True:
                self.warm_up()  # the next children inherit torch's optimizer machinery
            return {
                "exercise": name,
                "status": "graded",
                "results": result.get("results"),
                "errors": result.get("errors"),
                "seconds": round(elapsed, 3),
            }
        if status is None:  # the pipe closed without the outcome
            status, why = "crashed", _death(wstatus)
        return {
            "exercise": name,
            "status": status,
            "why": why,
            "started": started is not None,
            "seconds": round(elapsed, 3),
        }


class _Child:
    """One exercise in a fresh child of the zygote (runs the student's code)."""

    def __init__(self, zygote: Zygote, name: str, w: int) -> None:
        self.z, self.name, self.w = zygote, name, w

    def confine(self) -> None:
        from . import lockdown

        os.closerange(3, self.w)
        os.closerange(self.w + 1, 1 << 16)
        devnull = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(devnull, fd)
        os.close(devnull)
        mb = int(self.z.plan.get("memory_mb") or 0)
        limit = float(self.z.plan["time_limit"])
        for which, value in (
            ("RLIMIT_AS", mb * 1024 * 1024 if mb else None),
            ("RLIMIT_CORE", 0),
            ("RLIMIT_FSIZE", int(self.z.plan.get("fsize_mb", 256)) * 1024 * 1024),
            ("RLIMIT_CPU", int(4 * limit + 4 * _PRELUDE_SLACK)),
        ):
            if value is not None and hasattr(resource, which):
                try:
                    resource.setrlimit(getattr(resource, which), (value, value))
                except (ValueError, OSError):
                    pass
        lockdown.confine()

    def run(self) -> int:
        import torch

        from . import checks, guard
        from .wire import write_frame

        self.confine()
        threads = int(self.z.plan.get("threads") or 0)
        torch.set_num_threads(threads or (os.cpu_count() or 1))
        ns, ex = self.z.ns, self.z.exercises[self.name]
        errors: list[str] = []
        last_check = max(i for i, c in enumerate(self.z.cells) if c.get("exercise") == self.name)
        begun: set[str] = set()
        for cell in self.z.cells[: last_check + 1]:
            role, owner = cell["role"], cell.get("exercise")
            if role == "setup":
                ns.update(self.z.saved.get(cell["id"], {}))
            elif role == "answer":
                if owner in begun:
                    continue
                begun.add(owner)
                mine = owner == self.name
                if mine:
                    write_frame(self.w, {"exercise": self.name, "started": True})
                stubbed = owner in self.z.stubbed and not mine
                sources = (
                    self.z.exercises[owner]["stub"]
                    if stubbed
                    else self.z.exercises[owner]["answers"]
                )
                for k, src in enumerate(sources):
                    try:
                        _run(src, f"<answer {owner} {k + 1}>", ns)
                    except KeyboardInterrupt:
                        raise
                    except BaseException as exc:  # noqa: BLE001 - the student's error is reported, not fatal
                        if mine:
                            errors.append(_error_line(exc))
            elif role == "check" and owner != self.name:
                ns.update(self.z.saved.get(cell["id"], {}))  # run once in the zygote (skip mode)
            elif role == "check":  # this exercise's own checks: they call the student's code
                checks.set_mode("student")
                guard.forbid_calls(ex.get("forbid", []))
                checks.begin_cell(cell["id"])
                try:
                    _run(cell["source"], f"<check {cell['id']}>", ns)
                except KeyboardInterrupt:
                    raise
                except BaseException:  # noqa: BLE001 - the checks that did not run fail in the checker
                    pass
        guard.forbid_calls([])
        results = checks.take_results()
        write_frame(
            self.w,
            {
                "exercise": self.name,
                "results": results,
                "errors": errors[:20],
                "dynamo": "torch._dynamo" in sys.modules,
            },
        )
        return 0


def _read_plan(fd: int, wait: float) -> dict | None:
    """The one plan the grader sends (None if it closes the pipe or sends none in time)."""
    from .wire import FrameBuffer

    reader = FrameBuffer(fd)
    frames = reader.wait(time.monotonic() + wait)
    return frames[0] if frames and isinstance(frames[0], dict) else None


def main(argv: list[str] | None = None) -> int:
    """``IN_FD OUT_FD``: get ready, read one plan, grade it, end."""
    argv = sys.argv[1:] if argv is None else argv
    in_fd, out_fd = int(argv[0]), int(argv[1])
    import torch

    from . import checks, guard, lockdown, wire  # noqa: F401 - imported once, before forking

    torch.set_num_threads(1)
    lockdown.not_dumpable()
    ok, why = lockdown.supported()  # loads libseccomp now, while the sandbox waits
    plan = _read_plan(in_fd, PLAN_WAIT)
    os.close(in_fd)
    if plan is None:
        return 0
    if not ok and plan.get("require_filter", True):
        print(f"course-grade: the seccomp allow-list cannot be built here: {why}", file=sys.stderr)
        return 2
    zygote = Zygote(plan, out_fd)
    zygote.setup()
    zygote.run_all()
    return 0


if __name__ == "__main__":
    sys.exit(main())
