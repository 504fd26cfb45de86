"""The CPU-by-kind benchmark (benchmarks/cpu_by_kind.py): each kind of process is told apart by
its session, and a command's CPU is found where it ran."""

from __future__ import annotations

import json
import sys

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


def test_a_commands_cpu_is_found_in_its_kind(tmp_path):
    """A command that burns a second and a half of CPU: the table credits it to the run's kind
    (the command leads its own session, wherever the benchmark was started: the CI harness's
    session leader may be gone), and no more than the machine used. It then sleeps past the next
    look, which sees all its CPU."""
    burn = (
        "import time\nt = time.process_time()\nwhile time.process_time() - t < 1.5: pass\n"
        "time.sleep(2.5 * cpu_by_kind_period)\n"
    ).replace("cpu_by_kind_period", str(cpu_by_kind.PERIOD))
    result = cpu_by_kind.main(
        ["--out", str(tmp_path / "cpu.json"), "--", sys.executable, "-c", burn]
    )
    assert result == 0
    out = json.loads((tmp_path / "cpu.json").read_text())
    kinds = out["cpu_seconds_by_kind"]
    assert kinds["tests and the rest of the run (pytest, the checker, pip)"] >= 1.0
    attributed = sum(v for k, v in kinds.items() if not k.startswith("not attributed"))
    assert attributed <= out["machine_cpu_seconds"] + 0.5  # the machine's clock, rounded
