"""Benchmark: grading a class with ``course-grade --batch``, sandboxed and unsandboxed.

    python benchmarks/grading_batch.py                          # 200 submissions, both modes
    (about 30 min on 2 cores)
    python benchmarks/grading_batch.py --n 12 --modes sandbox   # a quick smoke run
    python benchmarks/grading_batch.py --n 40 --modes sandbox --baseline 218c10a  # before/after
    python benchmarks/grading_batch.py --n 40 --modes sandbox --baseline 3ed539b --repeat 3
    (interleaved: baseline, this tree, baseline, ...; medians at the end)

Generates ``--n`` submissions of the exercise notebooks 01-08 (by default), a fixed mix: correct
(the solution), known-wrong answers, untouched stubs, crashing answers (os._exit, an exception,
sys.exit, a memory bomb, an infinite loop), hostile answers (deleting a canary file outside the
grading folder, a fork bomb, reading another submission, filling the scratch disk, killing the
parent process, opening a network connection) and an unreadable file. Then grades the folder
with ``python -m course_lib.grading.grade --batch`` once per mode and prints one table: wall
time, submissions per minute, CPU seconds per submission (user + system of the grader and of
every process under it, this script reaping the orphans: the sandboxes and the checker server;
not the checkers, which the server leaves to the kernel to reap), per-notebook grading time
(from the reports' ``seconds``; all
submissions, and the correct ones only), statuses, and the two invariants: exactly one
gradebook row per submission, and the canary file outside untouched (the latter is expected to
fail unsandboxed: that is what the sandbox is for). ``--json PATH`` also writes the numbers.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tools.exercises import SOLUTIONS, load_spec, make_submission  # noqa: E402

CYCLE = (
    ["correct"] * 8 + ["wrong"] * 5 + ["untouched"] * 2 + ["crash"] * 2 + ["hostile"] * 3
)  # 20 per cycle
CRASHES = ("os_exit", "exception", "sys_exit", "memory", "loop")
HOSTILE = ("delete_outside", "fork_bomb", "read_neighbour", "fill_disk", "kill_parent", "network")


def _crash(kind: str) -> str:
    return {
        "os_exit": "import os\nos._exit(3)",
        "exception": "raise RuntimeError('oops')",
        "sys_exit": "import sys\nsys.exit(1)",
        "memory": "import torch\n_big = torch.ones(2 * 1024**3)",
        "loop": "while True:\n    pass",
    }[kind]


def _hostile(kind: str, canary: Path, neighbour: Path) -> str:
    opener = 'getattr(os, "op" + "en")'
    body = {
        "delete_outside": f'os.remove("{canary}")',
        "fork_bomb": 'for _i in range(10000):\n    if getattr(os, "fo" + "rk")() == 0:\n        '
        'os._exit(0)',
        "read_neighbour": f'os.read({opener}("{neighbour}", os.O_RDONLY), 100)',
        "fill_disk": f'_fd = {opener}("fill.bin", os.O_CREAT | os.O_WRONLY)\nwhile True:\n    '
        'os.write(_fd, bytes(1 << 20))',
        "kill_parent": "os.kill(os.getppid(), 9)",
        "network": 'getattr(sys, "mod" + "ules")["socket"].create_connection(("127.0.0.1", 9), '
        'timeout=2)',
    }[kind]
    return (
        "import os, sys\ntry:\n"
        + "".join(f"    {line}\n" for line in body.splitlines())
        + "except Exception as _e:\n    print('refused:', type(_e).__name__)\n"
    )


def make_class(folder: Path, n: int, stems: list[str], canary: Path) -> Counter:
    """Write ``n`` submissions into ``folder``; returns how many of each kind."""
    sols = {s: nbformat.read(SOLUTIONS / f"{s}.ipynb", as_version=4) for s in stems}
    specs = {s: load_spec(nb, s) for s, nb in sols.items()}
    kinds: Counter = Counter()
    for i in range(n):
        stem = stems[i % len(stems)]
        sol, spec = sols[stem], specs[stem]
        names = [ex.name for ex in spec.exercises]
        kind = CYCLE[i % len(CYCLE)]
        first = names[i % len(names)]  # the exercise that gets the wrong/crashing/hostile answer
        src = next(
            c.source for c in sol.cells if c.get("id") == f"{first.replace('_', '-')}-answer"
        )
        choose = {name: "solution" for name in names}
        if kind == "wrong":
            ex = spec.exercise(first)
            choose[first] = i % len(ex.wrong)
        elif kind == "untouched":
            choose = {}
        elif kind == "crash":
            sub = CRASHES[(i // len(CYCLE)) % len(CRASHES)]
            kind = f"crash:{sub}"
            choose[first] = {"code": _crash(sub) + "\n" + src}
        elif kind == "hostile":
            sub = HOSTILE[(i // len(CYCLE) + i) % len(HOSTILE)]
            kind = f"hostile:{sub}"
            choose[first] = {"code": _hostile(sub, canary, folder / "s0000.ipynb") + src}
        kinds[kind] += 1
        nbformat.write(make_submission(sol, choose), folder / f"s{i:04d}.ipynb")
    if n >= 50:  # one truncated upload per class
        text = (folder / "s0000.ipynb").read_text()
        (folder / "s0001.ipynb").write_text(text[: len(text) // 2])
        kinds["unreadable"] += 1
    return kinds


def _subreaper() -> None:
    """Make this process the reaper of its orphaned descendants (Linux), so that the CPU time
    of a sandbox's processes killed with it (not waited for by the grader) is counted here."""
    if sys.platform.startswith("linux"):
        import ctypes

        ctypes.CDLL(None).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER


def _reap_orphans(wait_s: float = 30.0) -> None:
    end = time.monotonic() + wait_s
    while time.monotonic() < end:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            time.sleep(0.1)


def run_mode(mode: str, folder: Path, out: Path, canary: Path, args, tree: Path = ROOT) -> dict:
    """One ``--batch`` run of the grader in ``tree`` (this checkout, or a baseline's worktree)."""
    canary.write_text("canary\n")
    cmd = [
        sys.executable,
        "-m",
        "course_lib.grading.grade",
        "--batch",
        str(folder),
        "--out",
        str(out),
        "--time-limit",
        str(args.time_limit),
    ]
    env = {**os.environ, "PYTHONPATH": str(tree)}
    if args.workers:
        cmd += ["--workers", str(args.workers)]
    if mode == "unsandboxed":
        cmd.append("--unsafe-no-sandbox")
    load0 = os.getloadavg()[0]
    ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    proc = subprocess.run(cmd, cwd=tree, capture_output=True, text=True, env=env)
    wall = time.monotonic() - t0
    _reap_orphans()  # the sandboxes' processes the grader killed rather than waited for
    ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime)
    rows = (
        list(csv.DictReader(open(out / "gradebook.csv")))
        if (out / "gradebook.csv").exists()
        else []
    )
    subs = sorted(p.name for p in folder.glob("*.ipynb"))
    reports = [json.loads(p.read_text()) for p in out.glob("*.grade.json")]
    secs = [r["seconds"] for r in reports if "seconds" in r]
    correct = [r["seconds"] for r in reports if "seconds" in r and r.get("all_passed")]
    return {
        "mode": mode,
        "exit_code": proc.returncode,
        "wall_s": round(wall, 1),
        "per_minute": round(60 * len(subs) / wall, 2),
        "cpu_s": round(cpu, 1),
        "cpu_s_per_submission": round(cpu / max(1, len(subs)), 2),
        "per_notebook_mean_s": round(statistics.mean(secs), 1) if secs else None,
        "per_notebook_median_s": round(statistics.median(secs), 1) if secs else None,
        "correct_notebook_median_s": round(statistics.median(correct), 1) if correct else None,
        "statuses": dict(Counter(r["status"] for r in rows)),
        "one_row_each": sorted(Path(r["submission"]).name for r in rows) == subs,
        "canary_intact": canary.exists() and canary.read_text() == "canary\n",
        "sandbox_column": dict(Counter(r.get("sandbox", "") for r in rows)),
        "load_before": round(load0, 2),
        "load_after": round(os.getloadavg()[0], 2),
        "tail": proc.stdout.strip().splitlines()[-1:] + proc.stderr.strip().splitlines()[-2:],
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=200, help="submissions in the class")
    ap.add_argument(
        "--modes", default="sandbox,unsandboxed", help="comma-separated: sandbox, unsandboxed"
    )
    ap.add_argument(
        "--stems", default="01,02,03,04,05,06,07,08", help="notebook number prefixes to use"
    )
    ap.add_argument("--time-limit", type=float, default=20.0, help="seconds per exercise")
    ap.add_argument("--workers", type=int, default=None, help="parallel gradings (default: cores)")
    ap.add_argument("--json", metavar="PATH", help="also write the results here")
    ap.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="run the baseline and each mode this many times, alternating (on a shared, "
        "loaded machine: compare medians of interleaved runs)",
    )
    ap.add_argument(
        "--baseline",
        metavar="REV",
        help="also grade the same class with the grader of git "
        "revision REV (a temporary worktree), sandboxed, first: before/after side by side",
    )
    args = ap.parse_args(argv)
    _subreaper()
    prefixes = args.stems.split(",")
    stems = sorted(p.stem for p in SOLUTIONS.glob("*.ipynb") if p.stem.split("_")[0] in prefixes)
    base = Path(tempfile.mkdtemp(prefix="grading-batch-"))
    folder, canary = base / "class", base / "outside" / "canary.txt"
    folder.mkdir()
    canary.parent.mkdir()
    kinds = make_class(folder, args.n, stems, canary)
    print(
        f"{args.n} submissions of {len(stems)} notebooks in {folder}: "
        + ", ".join(f"{k} {v}" for k, v in sorted(kinds.items()))
    )
    results = []
    runs = [(m, ROOT) for m in args.modes.split(",")]
    if args.baseline:
        tree = base / "baseline"
        subprocess.run(
            ["git", "worktree", "add", "--detach", "-q", str(tree), args.baseline],
            cwd=ROOT,
            check=True,
        )
        runs.insert(0, (f"sandbox@{args.baseline}", tree))
    for k, (mode, tree) in enumerate(runs * args.repeat):
        out = base / f"grades-{k}"
        res = run_mode(mode.split("@")[0], folder, out, canary, args, tree)
        res["mode"] = mode
        results.append(res)
        print(
            f"  {mode}: {res['wall_s']} s, {res['per_minute']} submissions/min, exit "
            f"{res['exit_code']}",
            flush=True,
        )
    print(
        f"\nmachine: {os.cpu_count()} cores, {platform.machine()}; load average before/after each "
        "run below"
    )
    head = (
        "mode",
        "wall s",
        "subs/min",
        "CPU s/sub",
        "s/notebook mean",
        "median",
        "correct median",
        "one row each",
        "canary intact",
        "statuses",
        "load",
    )
    print(" | ".join(head))
    for r in results:
        print(
            " | ".join(
                str(x)
                for x in (
                    r["mode"],
                    r["wall_s"],
                    r["per_minute"],
                    r["cpu_s_per_submission"],
                    r["per_notebook_mean_s"],
                    r["per_notebook_median_s"],
                    r["correct_notebook_median_s"],
                    r["one_row_each"],
                    r["canary_intact"],
                    r["statuses"],
                    f"{r['load_before']}->{r['load_after']}",
                )
            )
        )
    if args.repeat > 1:
        print("\nmedians over the interleaved runs:")
        for mode, _ in runs:
            mine = [r for r in results if r["mode"] == mode]
            print(
                f"  {mode}: {statistics.median(r['per_minute'] for r in mine):.2f} "
                f"submissions/min, {statistics.median(r['cpu_s_per_submission'] for r in mine)} "
                "CPU s per submission"
            )
    if args.baseline:
        subprocess.run(["git", "worktree", "remove", "--force", str(base / "baseline")], cwd=ROOT)
    if args.json:
        Path(args.json).write_text(
            json.dumps({"n": args.n, "kinds": kinds, "results": results}, indent=1) + "\n"
        )
    return 0 if all(r["one_row_each"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
