"""The student's process of a grading: a zygote, and one fresh child per exercise (stdlib and
torch; it runs inside the bubblewrap sandbox, see ``sandbox``).

    python -m course_lib.grading.student IN_FD OUT_FD

A sandbox is started once per grader thread and serves one submission after another
(``serve``): its base process imports torch and pays the first-call costs once, then reads a
plan (``runner.student_plan``) from ``IN_FD`` and forks a zygote for that submission, waits for
it, wipes the scratch folder and says it is idle. The zygote runs the notebook's trusted setup
cells once, on one thread (so that OpenMP is not started: a process
that forks after OpenMP has started its threads deadlocks in the child). Then, for each
exercise, it forks a child that

1. closes every descriptor but the pipe to the zygote (its answers go nowhere else), sets its
   resource limits and installs the seccomp filter (``lockdown``: no new processes, no signals
   or tracing of other processes);
2. runs the notebook up to that exercise: the earlier exercises' answers (their stubs where
   they crashed or ran out of time in their own child), with the bindings of the trusted cells
   between them restored (the zygote ran each setup and check cell once, the check cells as
   their student programs in ``skip`` mode, for the names they define, and only up to this
   exercise's last check cell before forking this child);
3. says it has started the exercise (its time budget starts then), runs the exercise's answer
   cells, then its check cells' student programs (``split``) in ``student`` mode with the
   exercise's forbidden functions refused: each check calls the student's code and records the
   outcome as plain data; no reference, predicate or hint is evaluated in this process;
4. sends the outcomes as one message and exits.

The zygote watches each child: past the prelude's allowance or the exercise's budget (one
wall-clock budget for the answer and check cells together) it kills it ("timed out"); a child
that dies without sending its outcomes "crashed". Nothing the child does reaches the next
exercise: the next child is forked from the zygote, which never runs student code. The zygote
sends one message per exercise to ``OUT_FD``; the grader (``runner``) reads them as untrusted
data and hands them to the checker (``checker``), which alone judges them.
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

__all__ = ["main", "FrameBuffer"]

_PRELUDE_SLACK = (
    30.0  # seconds for a child to rerun the earlier exercises, on top of what they took
)
_RESULT_BYTES = 64 * 1024 * 1024


class FrameBuffer:
    """Reads length-prefixed JSON frames from a non-blocking descriptor without ever blocking
    (a child may write half a frame and stall)."""

    def __init__(self, fd: int, limit: int = _RESULT_BYTES) -> None:
        import json
        import struct

        self.fd, self.limit, self.buf, self.eof = fd, limit, bytearray(), False
        self._json, self._head = json, struct.Struct("!Q")
        os.set_blocking(fd, False)

    def pump(self) -> None:
        """Read what is there (sets ``eof`` at end of file)."""
        while True:
            try:
                chunk = os.read(self.fd, 1 << 20)
            except BlockingIOError:
                return
            if not chunk:
                self.eof = True
                return
            self.buf += chunk
            if len(self.buf) > self.limit + self._head.size:
                raise ValueError("a message over the size limit")

    def frames(self) -> list:
        """The complete frames received so far (parsed JSON); ValueError for a bad one."""
        out = []
        while len(self.buf) >= self._head.size:
            (n,) = self._head.unpack(self.buf[: self._head.size])
            if n > self.limit:
                raise ValueError("a message over the size limit")
            if len(self.buf) < self._head.size + n:
                break
            raw = bytes(self.buf[self._head.size : self._head.size + n])
            del self.buf[: self._head.size + n]
            out.append(self._json.loads(raw))
        return out


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
    """Pay once, before forking, the first-call costs the children would each pay: an
    optimizer's first step imports about 800 modules (torch._dynamo and its dependencies)."""
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


class Zygote:
    def __init__(self, plan: dict, out_fd: int) -> None:
        self.plan, self.out_fd = plan, out_fd
        self.cells: list[dict] = plan["cells"]
        self.exercises: dict[str, dict] = {e["name"]: e for e in plan["exercises"]}
        self.order = [e["name"] for e in plan["exercises"]]
        self.stubbed: set[str] = set(plan.get("stubbed", []))
        self.spent: dict[str, float] = {}
        self.saved: dict[str, dict] = {}
        self.ran = 0  # the trusted cells before this index have run (``advance``)
        self.ns: dict = {"__name__": "__main__", "__builtins__": builtins}

    def send(self, obj) -> None:
        from .wire import write_frame

        write_frame(self.out_fd, obj)

    # ---------------------------------------------------------------- setup (trusted, once)
    def setup(self) -> None:
        """Run the trusted cells before the first answer (the setup cells) once."""
        import torch

        from . import checks

        torch.set_num_threads(1)  # no OpenMP threads before fork (see the module docstring)
        checks.set_mode("skip")
        t0 = time.monotonic()
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
            for fd in (devnull, *saved_out):
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
        """Wait for the child's outcomes within its time allowances; kill it past them."""
        limit = float(self.plan["time_limit"])
        earlier = sum(self.spent.get(n, 0.0) for n in self.order[: self.order.index(name)])
        deadline = t0 + _PRELUDE_SLACK + 2 * earlier
        started = None
        reader = FrameBuffer(r)
        result, status, why = None, None, ""
        try:
            while result is None and not reader.eof:
                left = deadline - time.monotonic()
                if left <= 0:
                    status = "timed out"
                    break
                ready, _, _ = select.select([r], [], [], min(left, 1.0))
                if not ready:
                    continue
                try:
                    reader.pump()
                    frames = reader.frames()
                except ValueError as exc:
                    status, why = "crashed", str(exc)
                    break
                for f in frames:
                    if isinstance(f, dict) and f.get("started") and started is None:
                        started = time.monotonic()
                        deadline = started + limit
                    elif isinstance(f, dict) and "results" in f:
                        result = f
        finally:
            if result is None:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            _, wstatus = os.waitpid(pid, 0)
            os.close(r)
        elapsed = time.monotonic() - (started or t0)
        if result is not None:
            self.spent[name] = elapsed
            return {
                "exercise": name,
                "status": "graded",
                "results": result.get("results"),
                "errors": result.get("errors"),
                "seconds": round(elapsed, 3),
            }
        if status is None:  # the pipe closed without the outcomes
            status = "crashed"
            if os.WIFSIGNALED(wstatus):
                why = f"killed by signal {os.WTERMSIG(wstatus)}"
            elif os.WIFEXITED(wstatus):
                why = f"exited with code {os.WEXITSTATUS(wstatus)}"
        self.spent[name] = elapsed
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
                    write_frame(self.w, {"started": True})
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
        write_frame(self.w, {"results": results, "errors": errors[:20]})
        return 0


def _wipe(scratch: str | None) -> None:
    """Empty the scratch folder between two submissions (the next one never sees a file the
    last one left), keeping its ``home`` and ``tmp`` folders."""
    import shutil

    if not scratch or not os.path.isdir(scratch):
        return
    for top in (scratch, os.path.join(scratch, "home"), os.path.join(scratch, "tmp"), "/dev/shm"):
        if not os.path.isdir(top) or not os.access(top, os.W_OK):
            continue
        for entry in os.scandir(top):
            if top == scratch and entry.name in ("home", "tmp"):
                continue
            try:
                if entry.is_dir(follow_symlinks=False):
                    shutil.rmtree(entry.path, ignore_errors=True)
                else:
                    os.unlink(entry.path)
            except OSError:
                pass


def serve(in_fd: int, out_fd: int) -> int:
    """The sandbox's long-lived base: torch imported and warmed up once, then one forked
    zygote per submission (plan), each ending with an ``idle`` message once it and its children
    are gone and the scratch folder is wiped. The base never runs a notebook's code itself."""
    import torch

    from . import checks, guard, lockdown, wire  # noqa: F401 - imported once, before forking
    from .wire import read_frame, write_frame

    torch.set_num_threads(1)
    _warm_up()  # once per sandbox, before any submission's zygote is forked
    scratch = os.environ.get("COURSE_SCRATCH")
    while True:
        try:
            plan = read_frame(in_fd)
        except ValueError:
            return 1
        if plan is None:
            return 0
        pid = os.fork()
        if pid == 0:  # this submission's zygote: never returns
            code = 1
            try:
                os.close(in_fd)
                z = Zygote(plan, out_fd)
                z.setup()
                z.run_all()
                code = 0
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        if status != 0:
            write_frame(out_fd, {"ended": status})
        _wipe(scratch)
        write_frame(out_fd, {"idle": True})


def main(argv: list[str] | None = None) -> int:
    """``IN_FD OUT_FD``: serve plans until the grader closes ``IN_FD``."""
    argv = sys.argv[1:] if argv is None else argv
    return serve(int(argv[0]), int(argv[1]))


if __name__ == "__main__":
    sys.exit(main())
