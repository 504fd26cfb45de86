"""The checker of a grading: the trusted process that judges (stdlib and torch).

It never runs or imports the student's code. It runs the solution notebook's trusted cells
(setup and check cells, in notebook order) with ``checks`` in ``checker`` mode: each check takes
the outcome the student's process recorded for it (plain data, ``wire``), rebuilds it as plain
Python values and tensors, and judges it against the reference or predicate the check cell
computed here, from its own seeded inputs. The names the student's answers define are bound to
placeholders that refuse to run (a check cell that called one outside a check would be a bug in
the course, and says so).

``Checker`` is the grader's handle: a process forked from a small server that has imported
torch once (``_Server``, started once per grader process), fed one message per exercise as the
student's process finishes it, so that judging overlaps with the student's run. Its verdicts
are returned to the grader over the same connection. The server (and so each checker) is
non-dumpable, and neither side of a connection waits for the other without a deadline (socket
timeouts: ``wait_s``).
"""

from __future__ import annotations

import builtins
import contextlib
import io
import os
import socket
import threading
from multiprocessing.connection import Connection
from typing import Any

import torch

from . import checks

__all__ = ["Checker", "serve"]

_server_lock = threading.Lock()


class _StudentOnly:
    """What a student-defined name is in the checker: it exists, and refuses to run."""

    def __init__(self, name: str) -> None:
        object.__setattr__(self, "_name", name)

    def _refuse(self, *_: Any, **__: Any) -> Any:
        raise RuntimeError(
            f"{self._name} is the student's and runs only in the student's process: "
            "call it inside a check's lambda"
        )

    __call__ = _refuse

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("__"):
            raise AttributeError(attr)
        self._refuse()


def _outcomes_by_cell(results: Any, cell_ids: set[str]) -> dict[str, list]:
    """The student's outcomes of one exercise, per check cell, by index (untrusted input:
    anything malformed is dropped, so the check it belongs to fails as 'did not run')."""
    by_cell: dict[str, dict[int, dict]] = {}
    for rec in results if isinstance(results, list) else []:
        if not isinstance(rec, dict):
            continue
        cell, index = rec.get("cell"), rec.get("index")
        if cell in cell_ids and type(index) is int and 0 <= index < 10_000:
            by_cell.setdefault(cell, {}).setdefault(index, rec)
    return {c: [recs.get(i) for i in range(max(recs) + 1)] for c, recs in by_cell.items()}


def serve(conn, plan: dict) -> None:
    """The checker process's main loop (see the module docstring). ``plan``: ``cells`` (setup
    and check cells in notebook order: id, role, exercise, source), ``student_names``."""
    torch.set_num_threads(
        1
    )  # the references are small; one thread gives the same floats everywhere
    checks.set_mode("checker")
    ns: dict = {"__name__": "__main__", "__builtins__": builtins}
    for name in plan.get("student_names", []):
        ns[name] = _StudentOnly(name)
    received: dict[str, dict] = {}
    verdicts: dict[str, list[dict]] = {}
    errors: dict[str, list[str]] = {}
    cells_of: dict[str, set[str]] = {}
    for c in plan["cells"]:
        if c["role"] == "check":
            cells_of.setdefault(c["exercise"], set()).add(c["id"])

    def outcome_of(exercise: str) -> dict:
        while exercise not in received:
            msg = conn.recv()
            if msg is None:
                raise EOFError("the grader stopped before every exercise was reported")
            received[msg["exercise"]] = msg
        return received[exercise]

    sink = io.StringIO()
    for cell in plan["cells"]:
        ex = cell.get("exercise")
        if cell["role"] == "check":
            msg = outcome_of(ex)
            judged = msg.get("status") == "graded"
            checks.set_mode("checker" if judged else "skip")
            by_cell = (
                _outcomes_by_cell(msg.get("results"), cells_of.get(ex, set())) if judged else {}
            )
            facts = msg.get("facts") if judged and isinstance(msg.get("facts"), dict) else {}
            checks.begin_cell(cell["id"], by_cell.get(cell["id"], []), facts.get(cell["id"]))
        try:
            with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
                exec(compile(cell["source"], f"<{cell['role']} {cell['id']}>", "exec"), ns)  # noqa: S102 - trusted cells
        except Exception as exc:  # noqa: BLE001 - reported with the exercise (a bug in the course's cell)
            if cell["role"] == "setup":
                why = f"{type(exc).__name__}: {exc}"
                conn.send({"fatal": f"setup cell {cell['id']} failed in the checker: {why}"})
                return
            errors.setdefault(ex, []).append(
                f"check cell {cell['id']} failed in the checker: "
                f"{type(exc).__name__}: {checks._clean(str(exc))}"
            )
        sink.seek(0)
        sink.truncate()
        if cell["role"] == "check":
            verdicts.setdefault(ex, []).extend(checks.take_verdicts())
    conn.send({"verdicts": verdicts, "errors": errors})


class _Server:
    """A long-lived process that has imported torch (and this module) once and forks one
    checker per grading: a small forkserver. (``multiprocessing``'s own forkserver would
    re-import the caller's ``__main__`` script in every checker.) The grader hands it one end
    of a fresh socket pair per grading (``socket.send_fds``); the forked checker speaks
    ``multiprocessing.connection`` over it."""

    def __init__(self) -> None:
        import subprocess
        import sys

        self.sock, theirs = socket.socketpair()
        self.sock.settimeout(60.0)  # handing over a socket never waits for good
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "course_lib.grading.checker", str(theirs.fileno())],
            pass_fds=(theirs.fileno(),),
            stdin=subprocess.DEVNULL,
        )
        theirs.close()

    def alive(self) -> bool:
        return self.proc.poll() is None

    def open(self):
        ours, theirs = socket.socketpair()
        try:
            socket.send_fds(self.sock, [b"x"], [theirs.fileno()])
        finally:
            theirs.close()
        return Connection(ours.detach())


_server: _Server | None = None
_PLAN_WAIT = 60.0  # seconds a forked checker waits for its plan


def _set_timeouts(fd: int, seconds: float | None) -> None:
    """No wait without a deadline: each read or write on the socket ``fd`` fails (OSError)
    after ``seconds`` instead of blocking for good."""
    import struct

    secs = float(seconds or 600.0)
    tv = struct.pack("ll", int(secs), int((secs % 1) * 1e6))
    sock = socket.socket(fileno=os.dup(fd))  # the options belong to the socket, not the fd
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, tv)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, tv)
    finally:
        sock.close()


def _serve_forks(control_fd: int) -> None:
    """The server's loop: one forked checker per socket received, until the grader goes."""
    import signal

    from .lockdown import not_dumpable
    from .student import _warm_up

    not_dumpable()  # trusted: its memory and descriptors closed to other processes (and its
    # checkers', which inherit the flag)
    torch.set_num_threads(1)  # no OpenMP threads before fork (a forked child would deadlock)
    _warm_up()  # an optimizer's first step imports ~800 modules: once here, not per checker
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # children are reaped by the kernel
    control = socket.socket(fileno=control_fd)
    while True:
        try:
            _, fds, _, _ = socket.recv_fds(control, 1, 1)
        except (OSError, ValueError):
            return
        if not fds:
            return  # the grader closed its end
        if os.fork() == 0:
            control.close()
            code = 0
            try:
                _set_timeouts(fds[0], _PLAN_WAIT)
                conn = Connection(fds[0])
                plan = conn.recv()
                _set_timeouts(fds[0], plan.get("wait_s"))
                serve(conn, plan)
            except BaseException:  # noqa: BLE001 - the grader sees the closed pipe
                code = 1
            finally:
                os._exit(code)
        os.close(fds[0])


class Checker:
    """The grader's handle on one checker process (forked by the server, started once per
    grader process)."""

    def __init__(self, plan: dict, wait_s: float = 600.0) -> None:
        """``wait_s``: the longest either side waits for one message of the other (the
        longest stretch of a grading without an exercise's outcome, with a margin)."""
        global _server
        with _server_lock:
            if _server is None or not _server.alive():
                _server = _Server()
            self.conn = _server.open()
        _set_timeouts(self.conn.fileno(), wait_s)
        self.conn.send({**plan, "wait_s": wait_s})

    def send(self, msg: dict | None) -> None:
        try:
            self.conn.send(msg)
        except (BrokenPipeError, EOFError, OSError):
            pass  # the checker ended early (a fatal setup error): finish() reports it

    def finish(self, timeout: float) -> dict:
        """The verdicts ({exercise: [verdict, ...]}) and errors; a ``fatal`` key if it failed."""
        try:
            if self.conn.poll(timeout):
                return self.conn.recv()
            return {"fatal": f"the checker did not answer within {timeout:.0f} s"}
        except (EOFError, OSError) as exc:
            return {"fatal": f"the checker process ended unexpectedly ({type(exc).__name__})"}
        finally:
            self.close()

    def close(self) -> None:
        try:
            self.conn.close()
        except OSError:
            pass


if __name__ == "__main__":
    import sys

    _serve_forks(int(sys.argv[1]))
