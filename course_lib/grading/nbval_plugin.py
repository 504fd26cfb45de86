"""pytest plugin used by ``course_lib.grading.grade`` next to nbval (``-p course_lib.grading.nbval_plugin``).

It adds three things nbval lacks:

- a per-exercise time budget: before each cell, nbval's cell timeout is set to what is left of
  the budget of that cell's exercise (``--course-time-limit`` seconds per exercise);
- fast detection of a dead kernel (``os._exit``, segfault, out of memory): nbval would wait
  for the whole timeout; here the wait polls the kernel and stops within half a second;
- a record of every cell (id, role, outcome, error, stdout) as JSON lines, written to the
  descriptor ``--course-record-fd`` that the grader opened (or the file ``--course-record``),
  which the grader turns into per-check verdicts;
- the resource limits of the grading (``--course-memory-mb``, ``--course-fsize-mb``, no core
  files), set in this process before it starts the kernel, which inherits them; and this
  process is made non-dumpable, so the kernel (same user) cannot open its record descriptor
  through ``/proc``.

It imports only pytest, nbval and the stdlib (it runs as the grading folder's conftest.py).
"""
from __future__ import annotations

import json
import os
import sys
import time
from queue import Empty

import pytest

_SETUP_LIMIT = 180.0  # seconds for a trusted setup cell (imports torch on a cold disk)


class KernelDied(RuntimeError):
    pass


def _patch_nbval() -> None:
    from nbval.kernel import RunningKernel

    if getattr(RunningKernel, "_course_patched", False):
        return

    def await_reply(self, msg_id, timeout=None):
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            wait = 0.5 if deadline is None else min(0.5, deadline - time.monotonic())
            if wait <= 0:
                raise Empty
            try:
                msg = self.get_message(stream="shell", timeout=wait)
            except Empty:
                if not self.is_alive():
                    raise KernelDied("the kernel died while running this cell (os._exit, a crash such as "
                                     "a segfault, or the memory limit)") from None
                continue
            if msg["parent_header"].get("msg_id") == msg_id:
                if msg["content"]["status"] == "aborted":
                    raise RuntimeError("Kernel aborted execution request")
                return

    RunningKernel.await_reply = await_reply
    RunningKernel._course_patched = True


def pytest_addoption(parser):
    group = parser.getgroup("course", "course_lib grading")
    group.addoption("--course-record", default=None, help="JSON-lines file receiving one record per cell")
    group.addoption("--course-record-fd", type=int, default=None, help="open descriptor receiving the records")
    group.addoption("--course-time-limit", type=float, default=30.0, help="seconds per exercise")
    group.addoption("--course-memory-mb", type=int, default=0, help="address-space limit (0: none)")
    group.addoption("--course-fsize-mb", type=int, default=0, help="largest file the kernel may write (0: no limit)")


def _limit(which: str, value: int) -> None:
    import resource

    try:
        resource.setrlimit(getattr(resource, which), (value, value))
    except (ValueError, OSError, AttributeError):  # not supported here (e.g. RLIMIT_AS on macOS)
        pass


def _not_dumpable() -> None:
    if sys.platform.startswith("linux"):
        import ctypes

        try:
            ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE, 0
        except (OSError, AttributeError):
            pass


def pytest_configure(config):
    _patch_nbval()
    config._course_spent = {}
    if config.getoption("course_memory_mb"):
        _limit("RLIMIT_AS", config.getoption("course_memory_mb") * 1024 * 1024)
    if config.getoption("course_fsize_mb"):
        _limit("RLIMIT_FSIZE", config.getoption("course_fsize_mb") * 1024 * 1024)
    _limit("RLIMIT_CORE", 0)
    fd = config.getoption("course_record_fd")
    if fd is not None:
        os.set_inheritable(fd, False)  # the kernel must not get it
        _not_dumpable()


def _write_record(config, rec: dict) -> None:
    data = (json.dumps(rec) + "\n").encode()
    fd = config.getoption("course_record_fd")
    if fd is not None:
        while data:
            data = data[os.write(fd, data):]
        return
    with open(config.getoption("course_record"), "ab") as f:
        f.write(data)


def _exercise(item) -> str | None:
    cell = getattr(item, "cell", None)
    if cell is None:
        return None
    return cell.get("metadata", {}).get("course", {}).get("exercise")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    ex = _exercise(item)
    limit = item.config.getoption("course_time_limit")
    spent = item.config._course_spent
    if ex is None:
        item.config.option.nbval_cell_timeout = _SETUP_LIMIT
    else:
        item.config.option.nbval_cell_timeout = max(1.0, limit - spent.get(ex, 0.0))
    t0 = time.monotonic()
    yield
    if ex is not None:
        spent[ex] = spent.get(ex, 0.0) + time.monotonic() - t0


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    cell = getattr(item, "cell", None)
    wanted = item.config.getoption("course_record") or item.config.getoption("course_record_fd") is not None
    if not wanted or cell is None or call.when != "call":
        return
    exc = call.excinfo.value if call.excinfo is not None else None
    message = str(exc) if exc is not None else ""
    outputs = item.test_outputs or []
    stdout = "".join(o.get("text", "") for o in outputs if o.get("output_type") == "stream" and o.get("name") == "stdout")
    errors = [f"{o.get('ename')}: {o.get('evalue')}" for o in outputs if o.get("output_type") == "error"]
    rec = {
        "id": cell.get("id"),
        "role": cell.get("metadata", {}).get("course", {}).get("role"),
        "exercise": _exercise(item),
        "skipped": call.excinfo is not None and call.excinfo.typename == "Skipped",
        "failed": exc is not None,
        "timed_out": exc is not None and "Timeout of" in message,
        "kernel_died": isinstance(exc, KernelDied) or "Kernel dead" in message,
        "message": message.splitlines()[0][:300] if message else "",
        "errors": [e[:300] for e in errors],
        "stdout": stdout[:50_000],
        "seconds": round(call.duration, 3),
    }
    _write_record(item.config, rec)


def pytest_collection_finish(session):
    """nbval has read the notebook: remove it, so code running in the kernel (whose working
    folder this is) cannot read the solution cells or the reference outputs."""
    for item in session.items:
        try:
            os.unlink(str(item.fspath))
        except OSError:
            pass
