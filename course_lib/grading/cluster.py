"""A batch's gradings on a Dask distributed cluster (``course-grade --batch DIR --scheduler
tls://HOST:8786``), or on an in-process local one without ``--scheduler``: the same code either
way, secure by default.

The client (the machine running ``course-grade``) walks the folder, reads each submission
defensively and keeps only what grading reads (``notebooks``), chooses its solution; an
unreadable file becomes its row at once, without a task. Each other submission is one task:
its kept bytes, its shown name, its solution's stem and **that one solution's bytes** (a worker
sees only the solutions of the submissions it grades; nothing is broadcast). The worker function,
``grade_submission`` (importable on the workers as ``course_lib.grading.cluster``), writes them
to a private temporary folder and grades there with ``grade.grade_one``, in the worker's
bubblewrap sandbox (one sandbox per grading, a trusted checker process: ``runner``). The client
keeps at most two tasks per worker thread in flight (``distributed.as_completed``) and checks
each report against its task before writing it (``verify_report``: the hash of the bytes it
sent, the name, the stem, the solution's exercises in order, each exercise's points within its
maximum and the score their sum, the sandbox): a report that does not match becomes that
submission's ``grader error`` row, and no other row changes.

Who may take part (``security``, ``connect``):

- a remote scheduler is reached over ``tls://`` with mutual TLS (``distributed.security
  .Security``, built here from the instructor's CA certificate and a client certificate and key:
  ``--tls-ca-file``/``--tls-cert``/``--tls-key`` or ``COURSE_GRADE_TLS_CA_FILE``/``_CERT``/
  ``_KEY``; ``make_certificates`` writes a CA and a certificate for the cluster's members): the
  scheduler and every worker present a certificate signed by that CA, so a machine without one
  cannot join, receive a task or send a report;
- plain ``tcp://`` is refused for any address that is not this machine's loopback, unless
  ``--insecure`` says the network is trusted; other protocols are refused;
- without ``--scheduler``: ``LocalCluster(processes=False)``, one in-process worker with one
  thread per grading slot, over Dask's in-process transport: no socket carries a task or a
  report, so there is nothing to join (mutual TLS, ``Security.temporary()``, would only add a
  listening port); its HTTP servers (dashboard, metrics) are bound to 127.0.0.1 and serve no
  route. Threads suffice: a grading's work happens in its own sandboxed and checker processes.

What this does not protect: a worker holding a valid certificate is trusted (it is the
instructor's machine); the scheduler sees the submissions it routes. The threat model is in
``exercises/README.md``, "For instructors".
"""

from __future__ import annotations

import atexit
import hashlib
import ipaddress
import json
import os
import shutil
import socket
import tempfile
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator

__all__ = [
    "TLS_ENV",
    "Task",
    "security",
    "make_certificates",
    "grade_submission",
    "connect",
    "run_gradings",
    "verify_report",
    "WORKER_WAIT",
]

WORKER_WAIT = 120.0  # seconds to wait for the first worker of a remote scheduler
TLS_ENV = ("COURSE_GRADE_TLS_CA_FILE", "COURSE_GRADE_TLS_CERT", "COURSE_GRADE_TLS_KEY")
_MAX_REPORT_BYTES = 16 * 1024 * 1024  # a report is a few KB; a larger one is not a report


def _error(msg: str) -> Exception:
    from .notebooks import GraderError

    return GraderError(msg)


# --------------------------------------------------------------------------- who may join
def _loopback(host: str) -> bool:
    """Whether every address ``host`` names is this machine's loopback."""
    host = host.strip("[]")
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(host, None)
    except OSError:
        return False
    return bool(infos) and all(ipaddress.ip_address(i[4][0]).is_loopback for i in infos)


def security(
    scheduler: str,
    tls_ca_file: str | None = None,
    tls_cert: str | None = None,
    tls_key: str | None = None,
    insecure: bool = False,
):
    """The ``distributed.security.Security`` for reaching ``scheduler`` (None for plain TCP), or
    GraderError: ``tls://`` needs the CA certificate, a client certificate and its key (flags or
    ``TLS_ENV``); ``tcp://`` only to this machine's loopback unless ``insecure``; nothing else."""
    from distributed.comm.addressing import parse_address, parse_host_port

    try:
        proto, loc = parse_address(scheduler)
        host, _ = parse_host_port(loc, 8786)
    except (ValueError, TypeError) as exc:
        raise _error(f"--scheduler {scheduler!r} is not an address ({exc})") from None
    if proto == "tcp":
        if insecure or _loopback(host):
            return None
        raise _error(
            f"--scheduler {scheduler}: plain tcp:// sends submissions and reports unencrypted and "
            "lets any machine that reaches the port join as a worker. Use tls:// with the "
            "cluster's certificates (--tls-ca-file, --tls-cert, --tls-key; course-grade "
            "--make-certs DIR makes them), or pass --insecure on a network you trust."
        )
    if proto != "tls":
        raise _error(f"--scheduler {scheduler}: use tls:// (or tcp:// on this machine).")
    files = [f or os.environ.get(env) for f, env in zip((tls_ca_file, tls_cert, tls_key), TLS_ENV)]
    missing = [
        flag for flag, f in zip(("--tls-ca-file", "--tls-cert", "--tls-key"), files) if not f
    ]
    if missing:
        raise _error(
            f"--scheduler {scheduler}: tls:// needs {', '.join(missing)} (or "
            f"{', '.join(TLS_ENV)}): the cluster's CA certificate and this client's certificate "
            "and key. course-grade --make-certs DIR makes a CA and a certificate for the cluster."
        )
    for f in files:
        if not os.path.isfile(f) or not os.access(f, os.R_OK):
            raise _error(f"--scheduler {scheduler}: cannot read the TLS file {f}.")
    from distributed.security import Security

    return Security(
        tls_ca_file=files[0],
        tls_client_cert=files[1],
        tls_client_key=files[2],
        require_encryption=True,
    )


def make_certificates(folder: Path, days: int = 365) -> dict[str, Path]:
    """A certificate authority and one certificate it signs for the cluster's members (the
    scheduler, every worker and the client): ``ca.pem``, ``ca.key``, ``cluster.pem``,
    ``cluster.key`` in ``folder`` (keys readable by their owner only). Hand ``ca.pem``,
    ``cluster.pem`` and ``cluster.key`` to the machines of the cluster; keep ``ca.key`` away from
    them (it signs certificates)."""
    import datetime

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.timezone.utc)
    until = now + datetime.timedelta(days=days)

    def name(cn: str) -> x509.Name:
        return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = (
        x509.CertificateBuilder()
        .subject_name(name("course-grade CA"))
        .issuer_name(name("course-grade CA"))
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(until)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(name("course-grade cluster"))
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(until)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.ExtendedKeyUsage(
                [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]
            ),
            critical=False,
        )
        .sign(ca_key, hashes.SHA256())
    )
    out = {n: folder / n for n in ("ca.pem", "ca.key", "cluster.pem", "cluster.key")}

    def write(path: Path, data: bytes, private: bool) -> None:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600 if private else 0o644)
        with os.fdopen(fd, "wb") as f:
            f.write(data)

    pem = serialization.Encoding.PEM
    raw_key = serialization.PrivateFormat.PKCS8
    plain = serialization.NoEncryption()
    write(out["ca.pem"], ca.public_bytes(pem), False)
    write(out["ca.key"], ca_key.private_bytes(pem, raw_key, plain), True)
    write(out["cluster.pem"], cert.public_bytes(pem), False)
    write(out["cluster.key"], key.private_bytes(pem, raw_key, plain), True)
    return out


# --------------------------------------------------------------------------- worker side
_here: dict[str, Path] = {}
_here_lock = threading.Lock()


def _solution_here(name: str, data: bytes) -> Path:
    """This solution as a file on this worker (written once per content, in a private folder)."""
    digest = hashlib.sha256(data).hexdigest()
    with _here_lock:
        folder = _here.get(digest)
        if folder is None or not (folder / name).is_file():
            folder = Path(tempfile.mkdtemp(prefix=f"course-grade-solution-{digest[:12]}-"))
            (folder / Path(name).name).write_bytes(data)
            _here[digest] = folder
            atexit.register(shutil.rmtree, folder, True)
        return folder


def grade_submission(data: bytes, name: str, stem: str, solution: bytes, options: dict) -> dict:
    """Worker side: grade a submission's bytes against ``solution`` (the bytes of solution
    notebook ``stem``) in a private temporary folder; the report names the submission ``name``
    and carries the hash of the bytes graded. Never raises (a failure is a report)."""
    from .grade import grade_one

    tmp = Path(tempfile.mkdtemp(prefix="course-grade-sub-"))
    try:
        folder = _solution_here(f"{stem}.ipynb", solution)
        path = tmp / "submission.ipynb"
        path.write_bytes(data)
        rep = grade_one(
            path, name, solution=folder / f"{stem}.ipynb", solutions_dir=folder, **options
        )
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    rep["submission_sha256"] = hashlib.sha256(data).hexdigest()
    try:
        from distributed import get_worker

        rep["worker"] = get_worker().address  # which machine graded it (JSON report only)
    except ValueError:  # not on a Dask worker (a direct call)
        pass
    return rep


# --------------------------------------------------------------------------- client side
class Task:
    """What the client sent for one submission, and what a report of it must then say."""

    def __init__(self, data: bytes, name: str, stem: str, spec, sandbox: bool | None) -> None:
        self.sha256 = hashlib.sha256(data).hexdigest()
        self.name, self.stem, self.sandbox = name, stem, sandbox
        self.exercises = [(ex.name, float(ex.points)) for ex in spec.exercises]


def verify_report(rep, task: Task) -> str | None:
    """None if ``rep`` is a report of ``task`` a grader could have written, else why not: the
    same bytes (hash), name and stem; the solution's exercises in order, each with its maximum
    and points between 0 and it; the score their sum and the maximum the solution's; the
    sandbox the batch required. A worker's failure report (``unreadable``, ``grader error``)
    scores 0."""
    if not isinstance(rep, dict):
        return f"the worker returned a {type(rep).__name__}, not a report"
    try:
        size = len(json.dumps(rep))
    except (TypeError, ValueError):
        return "the report is not plain JSON"
    if size > _MAX_REPORT_BYTES:
        return "the report is too large"
    if rep.get("submission_sha256") != task.sha256:
        return "the report is of other bytes than the submission sent"
    if rep.get("submission") != task.name:
        return "the report names another submission"
    status = rep.get("status")
    if status in ("unreadable", "grader error"):
        return None if rep.get("score") in (0, 0.0) else "a failed grading with points"
    if status != "graded":
        return f"unknown status {status!r}"
    if rep.get("notebook") != task.stem:
        return f"the report is of notebook {rep.get('notebook')!r}, not {task.stem!r}"
    if task.sandbox and rep.get("sandbox") != "bwrap":
        return "the worker did not grade in the bubblewrap sandbox"
    exercises = rep.get("exercises")
    if (
        not isinstance(exercises, list)
        or [
            (e.get("name"), e.get("max_points")) if isinstance(e, dict) else None for e in exercises
        ]
        != task.exercises
    ):
        return "the report's exercises are not the solution's"
    total = 0.0
    for e in exercises:
        pts = e.get("points")
        if isinstance(pts, bool) or not isinstance(pts, (int, float)):
            return f"exercise {e['name']}: points are not a number"
        if not 0 <= pts <= e["max_points"]:
            return f"exercise {e['name']}: {pts} points of {e['max_points']}"
        total += pts
    maximum = sum(p for _, p in task.exercises)
    if rep.get("max_score") != maximum:
        return f"a maximum of {rep.get('max_score')}, not {maximum:g}"
    score = rep.get("score")
    if isinstance(score, bool) or not isinstance(score, (int, float)) or abs(score - total) > 0.006:
        return f"a score of {score} for exercises worth {total:g}"
    return None


@contextmanager
def connect(scheduler: str | None, workers: int, sec=None) -> Iterator[object]:
    """A ``distributed.Client``: of the scheduler at ``scheduler`` with ``sec`` (see
    ``security``; waiting up to ``WORKER_WAIT`` seconds for a worker), or of an in-process
    LocalCluster with ``workers`` threads (see the module docstring)."""
    import logging

    import dask
    from distributed import Client, LocalCluster

    if scheduler:
        client = Client(scheduler, timeout=30, security=sec)
        try:
            try:
                client.wait_for_workers(1, timeout=WORKER_WAIT)
            except TimeoutError:
                raise _error(
                    f"no worker joined the scheduler {scheduler} within {WORKER_WAIT:g} s; start "
                    "workers with: dask worker ADDRESS --nthreads 1 (and the cluster's TLS "
                    "certificate)"
                ) from None
            yield client
        finally:
            client.close()
        return
    with (
        dask.config.set(
            {"distributed.scheduler.http.routes": [], "distributed.worker.http.routes": []}
        ),
        LocalCluster(
            n_workers=1,
            threads_per_worker=max(1, workers),
            processes=False,
            protocol="inproc://",
            dashboard_address="127.0.0.1:0",
            worker_dashboard_address="127.0.0.1:0",
            silence_logs=logging.ERROR,
        ) as cluster,
        Client(cluster) as client,
    ):
        yield client


def run_gradings(
    client,
    jobs: Iterator[tuple[str, bytes, str, str]],
    solutions: dict[str, bytes],
    options: dict,
    on_result: Callable[[str, object], None],
    specs: Callable[[str], object],
) -> None:
    """Grade every (key, bytes, shown name, stem) of ``jobs`` (pulled lazily, at most two tasks
    per worker thread in flight), each task carrying ``solutions[stem]`` only; ``on_result(key,
    report or exception)`` as each ends, a report that fails ``verify_report`` (``specs(stem)``:
    the solution's spec) as a GraderError."""
    from distributed import as_completed

    from .notebooks import GraderError

    tasks: dict[str, tuple[str, Task]] = {}
    done = as_completed()
    jobs = iter(jobs)

    def fill() -> None:
        limit = 2 * max(1, sum(client.nthreads().values()))
        while len(tasks) < limit:
            job = next(jobs, None)
            if job is None:
                return
            key, data, name, stem = job
            task = Task(data, name, stem, specs(stem), options.get("sandbox"))
            fut = client.submit(
                grade_submission, data, name, stem, solutions[stem], options, pure=False
            )
            tasks[fut.key] = (key, task)
            done.add(fut)

    fill()
    for fut in done:
        key, task = tasks.pop(fut.key)
        try:
            result = fut.result()
        except Exception as exc:  # a worker died (KilledWorker), the task was lost, ...
            result = exc
        fut.release()
        if not isinstance(result, BaseException):
            why = verify_report(result, task)
            if why is not None:
                result = GraderError(f"the worker's report was refused: {why}")
        on_result(key, result)
        fill()
