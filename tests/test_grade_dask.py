"""``course-grade --batch DIR --scheduler ADDRESS`` (issue 24, item 6): a class graded on a real
Dask cluster gives the same gradebook as the local run.

The test starts what an instructor starts: ``dask scheduler`` and two ``dask worker`` processes
(one thread each) on 127.0.0.1, in a folder without the course's ``solutions/`` (the client sends
them), with bounded waits, and kills them at the end whatever happens.
"""

from __future__ import annotations

import csv
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest

from course_lib.grading.grade import main
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


@pytest.fixture
def dask_cluster(tmp_path):
    """The address of a scheduler with two one-thread workers, all on 127.0.0.1."""
    from distributed import Client

    home = tmp_path / "cluster"  # no solutions/ here: the workers get them from the client
    home.mkdir()
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
    procs = []

    def start(args, log):
        procs.append(
            subprocess.Popen(
                _dask() + args,
                cwd=home,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=open(home / log, "w"),
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        )

    try:
        start(
            [
                "scheduler",
                "--host",
                "127.0.0.1",
                "--port",
                "0",
                "--no-dashboard",
                "--scheduler-file",
                str(home / "scheduler.json"),
            ],
            "scheduler.log",
        )
        deadline = time.monotonic() + 60
        while not (home / "scheduler.json").exists():
            assert procs[0].poll() is None and time.monotonic() < deadline, (
                home / "scheduler.log"
            ).read_text()
            time.sleep(0.2)
        time.sleep(0.2)  # the file is written whole, but give it a moment
        address = json.loads((home / "scheduler.json").read_text())["address"]
        for i in range(2):
            start(
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
                    f"w{i}",
                    "--local-directory",
                    str(home / f"w{i}"),
                    "--death-timeout",
                    "60",
                ],
                f"worker{i}.log",
            )
        with Client(address, timeout=30) as client:
            client.wait_for_workers(2, timeout=90)
            workers = set(client.scheduler_info()["workers"])
        yield address, workers
    finally:
        for p in reversed(procs):
            _stop(p)


def _rows(out: Path) -> list[dict]:
    return list(csv.DictReader(open(out / "gradebook.csv", encoding="utf-8")))


@pytest.mark.slow
def test_a_batch_on_a_dask_cluster_grades_the_same_gradebook_as_the_local_run(
    tmp_path, dask_cluster
):
    if probe()[0] is None:
        pytest.skip("no bubblewrap sandbox here (each worker needs it)")
    address, workers = dask_cluster
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
    assert main([*base, "--out", str(tmp_path / "dask"), "--scheduler", address]) == 0
    t_dask = time.monotonic() - t0
    local, remote = _rows(tmp_path / "local"), _rows(tmp_path / "dask")
    print(f"\nlocal run {t_local:.1f} s, Dask run ({len(workers)} workers) {t_dask:.1f} s; rows:")
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
    assert (
        graded_on and graded_on <= workers
    )  # graded by the cluster's workers, not in this process
