"""pytest plugin used by ``course_lib.grading.grade`` next to nbval (``-p course_lib.grading.nbval_plugin``).

It adds three things nbval lacks:

- a per-exercise time budget: before each cell, nbval's cell timeout is set to what is left of
  the budget of that cell's exercise (``--course-time-limit`` seconds per exercise);
- fast detection of a dead kernel (``os._exit``, segfault, out of memory): nbval would wait
  for the whole timeout; here the wait polls the kernel and stops within half a second;
- a record of every cell (id, outcome, error, stdout) as JSON lines in ``--course-record``,
  which the grader turns into per-check verdicts.
"""
from __future__ import annotations

import json
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
    group.addoption("--course-time-limit", type=float, default=30.0, help="seconds per exercise")


def pytest_configure(config):
    _patch_nbval()
    config._course_spent = {}


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
    path = item.config.getoption("course_record")
    cell = getattr(item, "cell", None)
    if path is None or cell is None or call.when != "call":
        return
    exc = call.excinfo.value if call.excinfo is not None else None
    message = str(exc) if exc is not None else ""
    outputs = item.test_outputs or []
    stdout = "".join(o.get("text", "") for o in outputs if o.get("output_type") == "stream" and o.get("name") == "stdout")
    errors = [f"{o.get('ename')}: {o.get('evalue')}" for o in outputs if o.get("output_type") == "error"]
    rec = {
        "id": cell.get("id"),
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
    with open(path, "a") as f:
        f.write(json.dumps(rec) + "\n")


def pytest_collection_finish(session):
    """nbval has read the notebook: remove it, so code running in the kernel (whose working
    folder this is) cannot read the solution cells or the reference outputs."""
    import os

    for item in session.items:
        try:
            os.unlink(str(item.fspath))
        except OSError:
            pass
