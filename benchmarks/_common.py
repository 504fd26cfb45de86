"""What the benchmark scripts share: the repository root and their results files. (Run the
scripts from the repository root as ``python benchmarks/NAME.py``: Python puts this folder on
the path, and importing this module puts the root there too, for ``tools``.)"""

from __future__ import annotations

import json
import os
import re
import sys
import time
from pathlib import Path

try:
    from tools import ROOT  # the repository root's one home
except ModuleNotFoundError:  # run as a script: benchmarks/ is on the path, the root is not
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from tools import ROOT

RESULTS = ROOT / "course_lib" / "results"  # the results files chapters read


def results_file(name: str) -> Path:
    """``course_lib/results/<name>``, the committed results file a benchmark rewrites."""
    return RESULTS / name


def write_json(data, path: str | Path) -> Path:
    """Write ``data`` as indented JSON (non-ASCII text kept readable) to ``path``, creating its
    folder, and say so. Returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n")
    print(f"wrote {path}")
    return path


class CpuGroup:
    """A cpuacct cgroup (v1) or a cgroup v2 folder for one command, where this machine lets us
    make one; ``usage()`` is its CPU seconds (every process that ran in it)."""

    def __init__(self) -> None:
        self.path: Path | None = None
        for base, stat in (
            ("/sys/fs/cgroup/cpuacct", "cpuacct.usage"),
            ("/sys/fs/cgroup", "cpu.stat"),
        ):
            p = Path(base) / f"grading-bench-{os.getpid()}-{time.monotonic_ns()}"
            try:
                p.mkdir()
                if (p / stat).exists():
                    self.path, self.stat = p, stat
                    return
                p.rmdir()
            except OSError:
                continue

    def preexec(self):
        if self.path is None:
            return None
        procs = self.path / "cgroup.procs"
        return lambda: procs.write_text(str(os.getpid()))

    def usage(self) -> float | None:
        if self.path is None:
            return None
        text = (self.path / self.stat).read_text()
        if self.stat == "cpuacct.usage":
            return int(text) / 1e9
        return int(re.search(r"usage_usec (\d+)", text).group(1)) / 1e6

    def close(self) -> None:
        if self.path is not None:
            for _ in range(100):  # the last processes of the batch may still be exiting
                try:
                    self.path.rmdir()
                    return
                except OSError:
                    time.sleep(0.1)
