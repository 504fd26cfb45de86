"""The CPU-by-kind benchmark (benchmarks/cpu_by_kind.py): each kind of process is told apart by
its session, and a command's CPU is found where it ran."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from tools import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))
import cpu_by_kind  # noqa: E402

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="reads /proc: Linux only")

NATIVE = "/usr/bin/python tests/book_builds.py native 1234-abcd"
AVX2 = "/usr/bin/python tests/book_builds.py avx2 1234-abcd"
KERNEL = "/venv/bin/python -m ipykernel_launcher -f /tmp/kernel-1.json"
COLAB_KERNEL = (
    "/colab-venv/bin/python test-output/colab-jupyter/kernels/python3/launch.py -f k.json"
)


@pytest.mark.parametrize(
    "own, leader, starter, want",
    [
        ("sphinx-build ...", NATIVE, "", "build native: Sphinx, pip"),
        ("/usr/lib/chromium/chromium --type=renderer", NATIVE, "", "build native: Chromium"),
        ("sphinx-build ...", AVX2, "", "build avx2: Sphinx, pip"),
        (COLAB_KERNEL, COLAB_KERNEL, NATIVE, "build native: the chapters (Jupyter kernels)"),
        (KERNEL, KERNEL, AVX2, "build avx2: the chapters (Jupyter kernels)"),
        (KERNEL, KERNEL, "python -m pytest -n 2", "tests: Jupyter kernels"),
        ("/usr/lib/chromium/chromium --headless", "bash .ci/run", "", "Chromium (the browser"),
        ("python -I -m course_lib.grading.student", "bwrap --unshare-all ...", "", "graders'"),
        ("python -m pytest -n 2", "bash .ci/run", "", "tests and the rest"),
        ("python -c pass", "", "", "processes whose session leader is gone"),
    ],
)
def test_each_kind_is_told_apart(monkeypatch, own, leader, starter, want):
    """Process 10 (``own``) in the session led by 20 (``leader``); its parent 30 is in the
    session led by 40 (``starter``: what started a kernel)."""
    lines = {10: own, 20: leader, 40: starter}
    monkeypatch.setattr(cpu_by_kind, "cmdline", lambda pid: lines.get(pid, ""))
    monkeypatch.setattr(cpu_by_kind, "stat", lambda pid: (1, 40, 0, 0))
    assert cpu_by_kind.kind(10, 30, 20).startswith(want)


def test_the_build_names_are_the_simulated_cpus():
    """The benchmark's copy of the build names is ``tools.spread.CPUS``'s keys, their one home."""
    from tools.spread import CPUS

    assert cpu_by_kind.BUILDS == tuple(CPUS)


def _result(path, seconds=120):
    """The benchmark's JSON once it is written whole (it is written once, at the end)."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            return json.loads(path.read_text())
        except (FileNotFoundError, json.JSONDecodeError):
            assert time.monotonic() < deadline, f"the benchmark wrote no result in {seconds} s"
            time.sleep(0.2)


@pytest.mark.parametrize("started", ["here", "where the session leader is gone"])
def test_a_commands_cpu_is_found_in_its_kind(tmp_path, started):
    """A command that burns a second and a half of CPU: the table credits it to the run's kind,
    and no more than the machine used. It then sleeps past the next look, which sees all its CPU.

    Both ways a benchmark is started: from this session, and from a session whose leader has
    exited (as on the project's CI machine, where the command's CPU once went to "leader is
    gone"): the command leads a session of its own either way."""
    burn = (
        "import time\nt = time.process_time()\nwhile time.process_time() - t < 1.5: pass\n"
        f"time.sleep({2.5 * cpu_by_kind.PERIOD})\n"
    )
    cpu_json = tmp_path / "cpu.json"
    argv = ["--out", str(cpu_json), "--", sys.executable, "-c", burn]
    if started == "here":
        assert cpu_by_kind.main(argv) == 0
    else:  # setsid: sh leads a new session, starts the benchmark in the background and exits
        script = ROOT / "benchmarks" / "cpu_by_kind.py"
        subprocess.run(
            ["setsid", "sh", "-c", '"$@" >/dev/null 2>&1 &', "sh", sys.executable, script, *argv],
            check=True,
            timeout=30,
        )
    out = _result(cpu_json)
    assert out["exit_code"] == 0
    kinds = out["cpu_seconds_by_kind"]
    assert kinds["tests and the rest of the run (pytest, the checker, pip)"] >= 1.0
    attributed = sum(v for k, v in kinds.items() if not k.startswith("not attributed"))
    assert attributed <= out["machine_cpu_seconds"] + 0.5  # the machine's clock, rounded
