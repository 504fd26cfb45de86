"""A batch's gradings on a Dask distributed cluster (``course-grade --batch DIR --scheduler
ADDRESS``),
or on an in-process local one without ``--scheduler``: the same code either way.

The client (the machine running ``course-grade``) walks the folder, reads each submission
defensively, parses it and chooses its solution (``notebooks``); an unreadable file becomes its
row at once, without a task. Each other submission is sent as a task: its bytes, its shown name
and its solution's stem (workers need not share the client's file system). The worker function,
``grade_submission`` (importable on the workers as ``course_lib.grading.cluster``), writes the
bytes to a private temporary folder and grades them there with ``grade.grade``, in the worker's
bubblewrap sandbox. The client writes each JSON report and the gradebook as results arrive
(``distributed.as_completed``), keeping at most two tasks per worker thread in flight so that
neither its memory nor the scheduler's holds a whole class of notebooks.

Solutions: the client sends the contents of its solutions folder once (``scatter`` with
``broadcast``); each worker writes them to a temporary folder named by their hash, once. Workers
therefore need the same ``course_lib`` (with the ``grading`` extra) and bubblewrap, but no clone
of the course, and every submission is graded against exactly the solutions the client sees.

Without ``--scheduler``: ``LocalCluster(processes=False)``, one in-process worker with one thread
per grading slot. A grading's work happens in its own pytest and kernel processes, so threads
suffice (as before), and a process-based LocalCluster measured ~6 s more per batch on 2 cores
(starting the worker processes, each importing the grader and torch, and closing them) and
~300 MB of memory per worker, for nothing a grading needs.
"""

from __future__ import annotations

import atexit
import hashlib
import shutil
import tempfile
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator

__all__ = ["solutions_payload", "grade_submission", "connect", "run_gradings", "WORKER_WAIT"]

WORKER_WAIT = 120.0  # seconds to wait for the first worker of a remote scheduler


# --------------------------------------------------------------------------- worker side
def solutions_payload(solutions_dir: Path, stems: dict[str, Path]) -> dict:
    """What the workers need of the solutions folder: {file name: bytes}, and a hash of it all."""
    files = {p.name: p.read_bytes() for p in stems.values()}
    h = hashlib.sha256()
    for name in sorted(files):
        h.update(name.encode() + b"\0" + hashlib.sha256(files[name]).digest())
    return {"digest": h.hexdigest(), "files": files}


_here: dict[str, Path] = {}
_here_lock = threading.Lock()


def _solutions_here(payload: dict) -> Path:
    """The payload's solutions as a folder on this worker (written once per worker process)."""
    with _here_lock:
        folder = _here.get(payload["digest"])
        if folder is None or not folder.is_dir():
            folder = Path(
                tempfile.mkdtemp(prefix=f"course-grade-solutions-{payload['digest'][:12]}-")
            )
            for name, data in payload["files"].items():
                (folder / Path(name).name).write_bytes(data)
            _here[payload["digest"]] = folder
            atexit.register(shutil.rmtree, folder, True)
        return folder


def grade_submission(data: bytes, name: str, stem: str, solutions: dict, options: dict) -> dict:
    """Worker side: grade a submission's bytes against solution ``stem`` in a private temporary
    folder; the report names the submission ``name``. Never raises (a failure is a report)."""
    from .grade import grade_one

    tmp = Path(tempfile.mkdtemp(prefix="course-grade-sub-"))
    try:
        folder = _solutions_here(solutions)
        path = tmp / "submission.ipynb"
        path.write_bytes(data)
        rep = grade_one(
            path, name, solution=folder / f"{stem}.ipynb", solutions_dir=folder, **options
        )
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    try:
        from distributed import get_worker

        rep["worker"] = get_worker().address  # which machine graded it (JSON report only)
    except ValueError:  # not on a Dask worker (a direct call)
        pass
    return rep


# --------------------------------------------------------------------------- client side
@contextmanager
def connect(scheduler: str | None, workers: int) -> Iterator[object]:
    """A ``distributed.Client``: of the scheduler at ``scheduler`` (waiting up to ``WORKER_WAIT``
    seconds for a worker), or of an in-process LocalCluster with ``workers`` threads."""
    import logging

    from distributed import Client, LocalCluster

    if scheduler:
        client = Client(scheduler, timeout=30)
        try:
            try:
                client.wait_for_workers(1, timeout=WORKER_WAIT)
            except TimeoutError:
                from .notebooks import GraderError

                raise GraderError(
                    f"no worker joined the scheduler {scheduler} within {WORKER_WAIT:g} s; start "
                    "workers with: dask worker ADDRESS --nthreads 1"
                ) from None
            yield client
        finally:
            client.close()
        return
    with (
        LocalCluster(
            n_workers=1,
            threads_per_worker=max(1, workers),
            processes=False,
            dashboard_address=None,
            silence_logs=logging.ERROR,
        ) as cluster,
        Client(cluster) as client,
    ):
        yield client


def run_gradings(
    client,
    jobs: Iterator[tuple[str, bytes, str, str]],
    solutions: dict,
    options: dict,
    on_result: Callable[[str, object], None],
) -> None:
    """Grade every (key, bytes, shown name, stem) of ``jobs`` (pulled lazily, at most two tasks
    per worker thread in flight); ``on_result(key, report or exception)`` as each ends."""
    from distributed import as_completed

    [sol] = client.scatter([solutions], broadcast=True, hash=False)
    keys: dict[str, str] = {}
    done = as_completed()
    jobs = iter(jobs)

    def fill() -> None:
        limit = 2 * max(1, sum(client.nthreads().values()))
        while len(keys) < limit:
            job = next(jobs, None)
            if job is None:
                return
            key, data, name, stem = job
            fut = client.submit(grade_submission, data, name, stem, sol, options, pure=False)
            keys[fut.key] = key
            done.add(fut)

    fill()
    for fut in done:
        key = keys.pop(fut.key)
        try:
            result = fut.result()
        except Exception as exc:  # a worker died (KilledWorker), the task was lost, ...
            result = exc
        fut.release()
        on_result(key, result)
        fill()
