"""``course-grade --batch DIR --scheduler tls://...`` (issue 24, item 6; issue 34, item 5): a class
graded on a real Dask cluster, secure by default.

- the cluster an instructor starts: ``course-grade --make-certs``, then ``dask scheduler`` and two
  ``dask worker`` processes (one thread each) on 127.0.0.1 over mutual TLS, in a folder without
  the course's ``solutions/`` (each task carries its own); it grades the same gradebook as the
  local run;
- a worker without the cluster's certificate, or with a certificate of another CA, never joins;
  a client without one cannot connect, nor can plain TCP reach the TLS port;
- plain ``tcp://`` to another machine is refused unless ``--insecure``; ``tls://`` without the
  certificate files says which flags are missing;
- a report that does not match its task (99 of 17 points, another submission's hash, other
  exercises, no sandbox) becomes that submission's grader error row; the others are written.

Processes are started with bounded waits and killed at the end whatever happens.
"""

from __future__ import annotations

import csv
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest

from course_lib.grading import cluster
from course_lib.grading.grade import grade_batch, main
from course_lib.grading.notebooks import GraderError
from course_lib.grading.sandbox import probe
from tools import ROOT
from tools.exercises import SOLUTIONS, load_spec, make_submission

STEM = "01_why_transformers"
# full marks of the notebook the batches grade (its solution, read once)
FULL = load_spec(nbformat.read(SOLUTIONS / f"{STEM}.ipynb", as_version=4), STEM).max_score


def _dask() -> list[str]:
    exe = Path(sys.executable).with_name("dask")
    return [str(exe)] if exe.exists() else [shutil.which("dask") or "dask"]


def _stop(proc: subprocess.Popen) -> None:
    """End a process this test started (its own session: the nanny and its worker process)."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(15)


def _tls(certs: Path) -> list[str]:
    return [
        "--tls-ca-file",
        str(certs / "ca.pem"),
        "--tls-cert",
        str(certs / "cluster.pem"),
        "--tls-key",
        str(certs / "cluster.key"),
    ]


class _Cluster:
    """A scheduler and workers on 127.0.0.1 over TLS, started as an instructor would."""

    def __init__(self, home: Path, certs: Path) -> None:
        self.home, self.certs, self.procs = home, certs, []
        self.env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")

    def start(self, args: list[str], log: str) -> subprocess.Popen:
        proc = subprocess.Popen(
            _dask() + args,
            cwd=self.home,
            env=self.env,
            stdin=subprocess.DEVNULL,
            stdout=open(self.home / log, "w"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self.procs.append(proc)
        return proc

    def scheduler(self) -> str:
        proc = self.start(
            [
                "scheduler",
                "--protocol",
                "tls",
                "--host",
                "127.0.0.1",
                "--port",
                "0",
                "--no-dashboard",
                "--scheduler-file",
                str(self.home / "scheduler.json"),
                *_tls(self.certs),
            ],
            "scheduler.log",
        )
        deadline = time.monotonic() + 60
        while not (self.home / "scheduler.json").exists():
            assert proc.poll() is None and time.monotonic() < deadline, (
                self.home / "scheduler.log"
            ).read_text()
            time.sleep(0.2)
        time.sleep(0.2)  # the file is written whole, but give it a moment
        return json.loads((self.home / "scheduler.json").read_text())["address"]

    def worker(self, address: str, name: str, tls: list[str], death: str = "60"):
        return self.start(
            [
                "worker",
                address,
                "--nthreads",
                "1",
                "--nworkers",
                "1",
                "--no-dashboard",
                "--host",
                "127.0.0.1",
                "--name",
                name,
                "--local-directory",
                str(self.home / name),
                "--death-timeout",
                death,
                *tls,
            ],
            f"{name}.log",
        )

    def stop(self) -> None:
        for p in reversed(self.procs):
            _stop(p)


@pytest.fixture
def tls_cluster(tmp_path):
    """(scheduler address, the two workers' addresses, the certificates, the cluster)."""
    from distributed import Client

    certs = tmp_path / "certs"
    assert main(["--make-certs", str(certs)]) == 0
    assert oct((certs / "cluster.key").stat().st_mode & 0o777) == "0o600"
    home = tmp_path / "cluster"  # no solutions/ here: each task carries its own
    home.mkdir()
    c = _Cluster(home, certs)
    try:
        address = c.scheduler()
        assert address.startswith("tls://127.0.0.1:"), address
        for i in range(2):
            c.worker(address, f"w{i}", _tls(certs))
        sec = cluster.security(
            address, *(str(certs / n) for n in ("ca.pem", "cluster.pem", "cluster.key"))
        )
        with Client(address, timeout=30, security=sec) as client:
            client.wait_for_workers(2, timeout=90)
            workers = set(client.scheduler_info()["workers"])
        yield address, workers, certs, c
    finally:
        c.stop()


@pytest.mark.slow
def test_a_batch_on_a_tls_dask_cluster_grades_the_same_gradebook_as_the_local_run(
    tmp_path, tls_cluster
):
    if probe()[0] is None:
        pytest.skip("no bubblewrap sandbox here (each worker needs it)")
    address, workers, certs, _ = tls_cluster
    sol = nbformat.read(SOLUTIONS / f"{STEM}.ipynb", as_version=4)
    names = [ex.name for ex in load_spec(sol, STEM).exercises]
    folder = tmp_path / "subs"
    subs = {
        f"alice/{STEM}.ipynb": make_submission(sol, {n: "solution" for n in names}),
        f"bob_{STEM}.ipynb": make_submission(sol),
        f"carol_{STEM}.ipynb": make_submission(
            sol, {n: (0 if i % 2 else "solution") for i, n in enumerate(names)}
        ),
    }
    for rel, nb in subs.items():
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(nb, folder / rel)
    (folder / "dave.ipynb").write_text('{"cells": [')
    base = ["--batch", str(folder), "--solutions", str(SOLUTIONS), "--time-limit", "20"]
    t0 = time.monotonic()
    assert main([*base, "--out", str(tmp_path / "local")]) == 0
    t_local = time.monotonic() - t0
    t0 = time.monotonic()
    assert main([*base, "--out", str(tmp_path / "dask"), "--scheduler", address, *_tls(certs)]) == 0
    t_dask = time.monotonic() - t0
    local, remote = _rows(tmp_path / "local"), _rows(tmp_path / "dask")
    print(
        f"\nlocal run {t_local:.1f} s, TLS Dask run ({len(workers)} workers) {t_dask:.1f} s; rows:"
    )
    for r in remote:
        print("  ", {k: v for k, v in r.items() if k not in ("error", "report")})
    assert remote == local
    assert [(r["submission"], r["status"], r["score"]) for r in remote] == [
        (f"alice/{STEM}.ipynb", "graded", str(FULL)),
        (f"bob_{STEM}.ipynb", "graded", "0.0"),
        (f"carol_{STEM}.ipynb", "graded", remote[2]["score"]),
        ("dave.ipynb", "unreadable", "0.0"),
    ]
    assert 0 < float(remote[2]["score"]) < FULL
    graded_on = set()
    for r in remote:
        rep = json.loads((tmp_path / "dask" / r["report"]).read_text())
        assert rep["submission"] == str(folder / r["submission"])
        if rep["status"] == "graded":
            assert rep["solution"] == str(SOLUTIONS / f"{STEM}.ipynb") and rep["sandbox"] == "bwrap"
            graded_on.add(rep["worker"])
            loc = json.loads((tmp_path / "local" / r["report"]).read_text())
            assert [[c["passed"] for c in e["checks"]] for e in rep["exercises"]] == [
                [c["passed"] for c in e["checks"]] for e in loc["exercises"]
            ]
    assert graded_on and graded_on <= workers  # graded by the cluster's workers, over TLS


@pytest.mark.slow
def test_only_holders_of_the_clusters_certificate_take_part(tmp_path, tls_cluster):
    """A worker without a certificate, or with one another CA signed, never joins (its
    handshake fails, it gives up); a client without the certificate cannot connect; plain TCP to
    the TLS port is no way in."""
    from distributed import Client

    address, workers, certs, c = tls_cluster
    other = tmp_path / "other-ca"
    cluster.make_certificates(other)
    rogues = [
        c.worker(address, "rogue_none", [], death="15"),  # no TLS set up at all
        c.worker(address, "rogue_other", _tls(other), death="15"),  # another CA's certificate
    ]
    # a peer that trusts the cluster's CA but holds no certificate of its own: the scheduler
    # asks for one (mutual TLS) and closes the connection
    host, port = address[len("tls://") :].rsplit(":", 1)
    ctx = ssl.create_default_context(cafile=str(certs / "ca.pem"))
    ctx.check_hostname = False
    with socket.create_connection((host, int(port)), timeout=10) as raw:
        with pytest.raises((ssl.SSLError, ConnectionError)):
            with ctx.wrap_socket(raw) as tls:
                tls.sendall(b"hello")
                if not tls.recv(1):
                    raise ConnectionError("closed without a word")
    deadline = time.monotonic() + 120
    while any(p.poll() is None for p in rogues) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert all(p.poll() is not None for p in rogues), "a rogue worker is still trying"
    sec = cluster.security(
        address, *(str(certs / n) for n in ("ca.pem", "cluster.pem", "cluster.key"))
    )
    with Client(address, timeout=30, security=sec) as client:
        assert set(client.scheduler_info()["workers"]) == workers  # no one else joined
        names = {str(w["name"]) for w in client.scheduler_info()["workers"].values()}
        assert names == {"w0", "w1"}
    with pytest.raises(TypeError, match="TLS"):  # no certificate at all: no handshake to try
        Client(address, timeout=10)
    foreign = cluster.security(
        address, *(str(other / n) for n in ("ca.pem", "cluster.pem", "cluster.key"))
    )
    with pytest.raises((OSError, TimeoutError)):  # another CA's certificate: refused
        Client(address, timeout=10, security=foreign)
    with pytest.raises((OSError, TimeoutError)):
        Client(address.replace("tls://", "tcp://"), timeout=10)
    refused = (c.home / "scheduler.log").read_text().count("TLS handshake failed")
    assert refused >= 2, (c.home / "scheduler.log").read_text()[-3000:]


# --------------------------------------------------------------------------- address policy
def test_plain_tcp_to_another_machine_is_refused_unless_insecure(tmp_path):
    for addr in ("tcp://10.1.2.3:8786", "192.0.2.7:8786", "tcp://example.org:8786"):
        with pytest.raises(GraderError, match="--insecure"):
            cluster.security(addr)
        assert cluster.security(addr, insecure=True) is None
    for addr in ("tcp://127.0.0.1:8786", "tcp://localhost:8786", "tcp://[::1]:8786"):
        assert cluster.security(addr) is None  # this machine: a test or a laptop cluster
    with pytest.raises(GraderError, match="use tls://"):
        cluster.security("ws://10.1.2.3:8786")
    with pytest.raises(GraderError, match="--tls-ca-file, --tls-cert, --tls-key"):
        cluster.security("tls://10.1.2.3:8786")
    files = cluster.make_certificates(tmp_path / "certs")
    sec = cluster.security(
        "tls://10.1.2.3:8786", *(str(files[n]) for n in ("ca.pem", "cluster.pem", "cluster.key"))
    )
    assert sec.require_encryption and sec.tls_ca_file == str(files["ca.pem"])
    with pytest.raises(GraderError, match="cannot read"):
        cluster.security(
            "tls://10.1.2.3:8786",
            str(files["ca.pem"]),
            "/nonexistent.pem",
            str(files["cluster.key"]),
        )
    # the CLI refuses before it reads a submission or starts anything
    err = tmp_path / "subs"
    err.mkdir()
    assert (
        main(
            [
                "--batch",
                str(err),
                "--solutions",
                str(SOLUTIONS),
                "--scheduler",
                "tcp://10.1.2.3:8786",
            ]
        )
        == 3
    )


# --------------------------------------------------------------------------- forged reports
def _task():
    sol = nbformat.read(SOLUTIONS / f"{STEM}.ipynb", as_version=4)
    spec = load_spec(sol, STEM)
    data = b"the bytes that were sent"
    return cluster.Task(data, "alice.ipynb", STEM, spec, True), spec, data


def _honest_report(spec, data):
    import hashlib

    return {
        "submission": "alice.ipynb",
        "notebook": STEM,
        "status": "graded",
        "score": 3.0,
        "max_score": spec.max_score,
        "sandbox": "bwrap",
        "submission_sha256": hashlib.sha256(data).hexdigest(),
        "exercises": [
            {"name": ex.name, "points": (ex.points if i == 0 else 0.0), "max_points": ex.points}
            for i, ex in enumerate(spec.exercises)
        ],
    }


def test_a_report_that_does_not_match_its_task_is_refused():
    task, spec, data = _task()
    good = _honest_report(spec, data)
    good["score"] = good["exercises"][0]["points"]
    assert cluster.verify_report(good, task) is None
    forged = []

    def change(f):
        rep = json.loads(json.dumps(good))
        f(rep)
        forged.append(rep)

    change(lambda r: r.update(score=99.0))  # 99 of 17
    change(lambda r: r["exercises"][1].update(points=99.0) or r.update(score=99.0 + r["score"]))
    change(lambda r: r["exercises"][1].update(points=-1.0) or r.update(score=r["score"] - 1))
    change(lambda r: r.update(max_score=99.0))
    change(lambda r: r.update(submission_sha256="0" * 64))  # another submission's grading
    change(lambda r: r.update(submission="mallory.ipynb"))
    change(lambda r: r.update(notebook="02_matrix_core"))
    change(lambda r: r["exercises"].pop())
    change(lambda r: r["exercises"][0].update(name="something_else"))
    change(lambda r: r.update(sandbox="none"))  # graded without the sandbox the batch required
    change(lambda r: r.update(status="excellent"))
    change(lambda r: r.update(status="grader error", score=5.0))
    change(lambda r: r["exercises"][0].update(points=True))
    for rep in forged:
        assert cluster.verify_report(rep, task) is not None, rep
    assert cluster.verify_report(["not", "a", "report"], task) is not None


def test_a_forged_report_becomes_its_submissions_error_row(tmp_path, monkeypatch):
    """Through the batch: a worker function that claims 99 of 17 for one submission. Its row is
    a grader error saying why; the honest worker's rows are written as they came."""
    sol = nbformat.read(SOLUTIONS / f"{STEM}.ipynb", as_version=4)
    for who in ("alice", "mallory"):
        nbformat.write(make_submission(sol), tmp_path / f"{who}_{STEM}.ipynb")
    honest = cluster.grade_submission

    def worker(data, name, stem, solution, options, grade_one):
        if "mallory" in Path(name).name:
            import hashlib

            spec = load_spec(nbformat.reads(solution.decode(), as_version=4), stem)
            return {
                "submission": name,
                "notebook": stem,
                "status": "graded",
                "score": 99.0,
                "max_score": spec.max_score,
                "sandbox": options.get("sandbox") and "bwrap" or "none",
                "submission_sha256": hashlib.sha256(data).hexdigest(),
                "exercises": [
                    {"name": ex.name, "points": 99.0 / len(spec.exercises), "max_points": ex.points}
                    for ex in spec.exercises
                ],
            }
        assert solution == (SOLUTIONS / f"{stem}.ipynb").read_bytes()  # only its own solution
        return {
            "submission": name,
            "status": "grader error",
            "score": 0.0,
            "error": "stub",
            "submission_sha256": __import__("hashlib").sha256(data).hexdigest(),
        }

    monkeypatch.setattr(cluster, "grade_submission", worker)
    reports = grade_batch(tmp_path, tmp_path / "out", sandbox=False, solutions_dir=SOLUTIONS)
    assert honest is not worker
    rows = {r["submission"]: r for r in _rows(tmp_path / "out")}
    assert rows[f"mallory_{STEM}.ipynb"]["status"] == "grader error"
    assert rows[f"mallory_{STEM}.ipynb"]["score"] == "0.0"
    assert "refused" in rows[f"mallory_{STEM}.ipynb"]["error"]
    assert rows[f"alice_{STEM}.ipynb"]["error"] == "stub"
    assert len(reports) == 2


def _rows(out: Path) -> list[dict]:
    return list(csv.DictReader(open(out / "gradebook.csv", encoding="utf-8")))
