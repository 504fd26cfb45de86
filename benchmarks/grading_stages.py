"""Benchmark: where the CPU of a grading goes, per stage and per process.

    python benchmarks/grading_stages.py                 # 2 correct submissions of each of 01-08
    python benchmarks/grading_stages.py --copies 4 --stems 05,08
    python benchmarks/grading_stages.py --baseline REV  # REV's table first (REV must print them)

Writes ``--copies`` correct submissions of each notebook, grades them with ``course-grade
--batch`` and ``COURSE_GRADE_DEBUG=1`` (each grading then prints the CPU seconds of its stages:
the zygote's own, stage by stage, and each exercise's child, measured in the sandbox; the
checker's; the grading thread's in the grader) and prints the mean per notebook and stage.
The first grading of a batch also pays the grader's and the checker server's start; the
table's "all processes" row is the batch's whole CPU (a cpuacct cgroup where this machine
has one, which counts every process, reaped or not; else the grader and what it reaped)
divided by the submissions. One grading at a time by default (``--workers``): with more, the
lines of gradings running together interleave and a stage may be counted in the wrong
notebook's column (the totals stay right). CPU seconds depend far less on the machine's load
than wall time, but not at all: a loaded machine's caches are shared.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from _common import CpuGroup  # noqa: E402 - run from benchmarks/

from tools.exercises import SOLUTIONS, load_spec, make_submission  # noqa: E402

_LINE = re.compile(r"grade debug cpu (\w+): +([0-9.]+) s (.*)")
_END = re.compile(r"grade debug cpu end: (\S+)")


def make_class(folder: Path, stems: list[str], copies: int) -> int:
    n = 0
    for stem in stems:
        sol = nbformat.read(SOLUTIONS / f"{stem}.ipynb", as_version=4)
        names = [ex.name for ex in load_spec(sol, stem).exercises]
        for k in range(copies):
            sub = make_submission(sol, {name: "solution" for name in names})
            nbformat.write(sub, folder / f"{stem}-{k}.ipynb")
            n += 1
    return n


def stage_of(proc: str, what: str) -> str:
    """A stage's row name: the zygote's per-exercise lines summed into a few rows."""
    if proc == "zygote":
        if what.startswith("child "):
            return "zygote: children (answers, checks; per exercise)"
        if what.startswith("check cells up to"):
            return "zygote: check cells (skip mode)"
        if what.startswith("watching"):
            return "zygote: forking, watching"
        return f"zygote: {what}"
    return f"{proc}: {what}"


def run(folder: Path, out: Path, args, tree: Path = ROOT) -> tuple[str, float | None, float]:
    cmd = [sys.executable, "-m", "course_lib.grading.grade", "--batch", str(folder), "--out",
           str(out), "--time-limit", str(args.time_limit)]  # fmt: skip
    if args.workers:
        cmd += ["--workers", str(args.workers)]
    env = {**os.environ, "PYTHONPATH": str(tree), "COURSE_GRADE_DEBUG": "1"}
    group = CpuGroup()
    t0 = time.monotonic()
    try:
        proc = subprocess.run(cmd, cwd=tree, capture_output=True, text=True, env=env,
                              preexec_fn=group.preexec())  # fmt: skip
        wall = time.monotonic() - t0
        time.sleep(1.0)  # sandboxes killed at the end: let them go before reading the group
        cpu = group.usage()
    finally:
        group.close()
    return proc.stderr, cpu, wall


def table(label: str, tree: Path, folder: Path, out: Path, n: int, stems, args) -> int:
    """Grade ``folder`` with the grader of ``tree`` and print its stage table (1: no lines)."""
    load0 = os.getloadavg()[0]
    err, cpu, wall = run(folder, out, args, tree)
    load1 = os.getloadavg()[0]
    per: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    block: dict[str, float] = defaultdict(float)
    for line in err.splitlines():
        if m := _END.search(line):
            for stage, s in block.items():
                per[m.group(1)][stage].append(s)
            block = defaultdict(float)
        elif m := _LINE.search(line):
            block[stage_of(m.group(1), m.group(3))] += float(m.group(2))
    if not per:
        print(err[-3000:])
        return 1
    rows = sorted({s for d in per.values() for s in d}, key=lambda s: (s.split(":")[0], s))
    short = [s.split("_")[0] for s in stems]
    print(f"\n{label}: {n} correct submissions ({args.copies} of each of {len(stems)} notebooks), "
          f"{wall:.0f} s wall, load {load0:.1f} -> {load1:.1f}; CPU seconds per grading, mean "
          "(the first of a notebook's gradings included)")  # fmt: skip
    print(" | ".join(["stage", *short, "mean"]))
    total: dict[str, float] = defaultdict(float)
    for row in rows:
        vals = []
        for stem in stems:
            got = per.get(stem, {}).get(row, [])
            v = statistics.mean(got) if got else 0.0
            total[stem] += v
            vals.append(v)
        print(" | ".join([row, *(f"{v:.2f}" for v in vals), f"{statistics.mean(vals):.2f}"]))
    print(" | ".join(["sum of the stages", *(f"{total[s]:.2f}" for s in stems),
                      f"{statistics.mean(total.values()):.2f}"]))  # fmt: skip
    if cpu is not None:
        print(f"all processes (cgroup): {cpu / n:.2f} CPU s per submission ({cpu:.1f} s in all)")
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--stems", default="01,02,03,04,05,06,07,08")
    ap.add_argument("--copies", type=int, default=2)
    ap.add_argument(  # one at a time: a grading's lines are not interleaved with another's
        "--workers", type=int, default=1, help="parallel gradings (default 1: see the docstring)"
    )
    ap.add_argument("--time-limit", type=float, default=20.0)
    ap.add_argument("--baseline", metavar="REV", help="also the grader of git revision REV, first")
    args = ap.parse_args(argv)
    prefixes = args.stems.split(",")
    stems = sorted(p.stem for p in SOLUTIONS.glob("*.ipynb") if p.stem.split("_")[0] in prefixes)
    base = Path(tempfile.mkdtemp(prefix="grading-stages-"))
    (base / "class").mkdir()
    n = make_class(base / "class", stems, args.copies)
    trees = [("this tree", ROOT)]
    if args.baseline:  # a worktree of REV, graded first (it needs this instrumentation)
        tree = base / "baseline"
        subprocess.run(["git", "worktree", "add", "--detach", "-q", str(tree), args.baseline],
                       cwd=ROOT, check=True)  # fmt: skip
        trees.insert(0, (f"baseline {args.baseline}", tree))
    try:
        for k, (label, tree) in enumerate(trees):
            if table(label, tree, base / "class", base / f"grades-{k}", n, stems, args):
                return 1
    finally:
        if args.baseline:
            subprocess.run(["git", "worktree", "remove", "--force", str(base / "baseline")],
                           cwd=ROOT)  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
