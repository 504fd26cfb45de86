"""Which system calls the grading children really make: the measurement behind
``course_lib.grading.lockdown.ALLOWED``.

    python tools/syscall_survey.py                      # every solution and exercise notebook
    python tools/syscall_survey.py --stems 04,08 --json survey.json

Grades each solution notebook (full marks expected) and each untouched exercise notebook (0
expected) with ``course-grade`` in the bubblewrap sandbox, under ``strace -f`` (Linux, strace
installed). A grading child's confinement starts when its ``seccomp(SECCOMP_SET_MODE_FILTER)``
call succeeds; from there on every call of that process and of the threads it starts is counted. The
table printed lists each call seen, how many notebooks made it, whether the allow-list lets it
through, and how often the filter refused it (EPERM); for ``prctl`` and ``ioctl`` the options
and requests seen. A call that honest notebooks make and the filter refuses is a bug in the
table (the graded score also says so: the survey checks it).
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from course_lib.grading import lockdown  # noqa: E402

_LINE = re.compile(r"^(\d+)\s+(?:<\.\.\. (\w+) resumed>|(\w+)\((.*))")
# a call's result at the end of its line: "= 0", "= -1 EPERM (Operation not permitted)", "= ?"
_RESULT = re.compile(r"=\s+(-?\w+|\?)(?:\s+(E[A-Z0-9]+))?(?:\s+\([^()]*\))?\s*$")


def survey_trace(text: str) -> dict[str, dict]:
    """{call: {"count", "refused", "args"}} of the confined processes in one strace -f log."""
    rows = []  # (index, pid, name, rest, resumed)
    for line in text.splitlines():
        m = _LINE.match(line)
        if not m:
            continue
        pid, resumed, name, rest = m.group(1), m.group(2), m.group(3), m.group(4) or ""
        if resumed:
            name, rest = resumed, line.split("resumed>", 1)[1]
        rows.append((len(rows), pid, name, rest, bool(resumed), "<unfinished" in line))
    # pass 1: where each process's filter went in (the call that succeeded; libseccomp's probes
    # before it fail), and the threads each started (clone's result, wherever strace logs it)
    since: dict[str, int] = {}
    parent: dict[str, tuple[str, int]] = {}
    for i, pid, name, rest, _, _ in rows:
        res = _RESULT.search(rest)
        if name == "seccomp" and "SECCOMP_SET_MODE_FILTER" in rest and rest.endswith("= 0"):
            since.setdefault(pid, i)
        if name in ("clone", "clone3") and res and res.group(1).isdigit():
            parent[res.group(1)] = (pid, i)
    for tid, (pid, i) in parent.items():  # a thread started after its process was confined
        if pid in since and i > since[pid]:
            since.setdefault(tid, -1)
    # pass 2: every call of a confined process after its filter went in
    calls: dict[str, dict] = defaultdict(lambda: {"count": 0, "refused": 0, "args": set()})
    for i, pid, name, rest, resumed, unfinished in rows:
        if pid not in since or i <= since[pid]:
            continue
        if not resumed:
            c = calls[name]
            c["count"] += 1
            if name in ("prctl", "ioctl", "fcntl"):
                args = [a.strip() for a in rest.split(",")]
                c["args"].add(args[0] if name == "prctl" else (args[1] if len(args) > 1 else ""))
        res = _RESULT.search(rest)
        if res and res.group(2) == "EPERM" and not unfinished:
            calls[name]["refused"] += 1
    return calls


# What students' own code does beyond the solutions: a notebook of the first solution with each
# answer preceded by one of these habits (printing, sleeping, files in the working folder,
# randomness, numpy, a plot, a progress bar, threads, the time, errors of its own).
HABITS = {
    "print": "print('hello', flush=True)\nimport sys\nprint('err', file=sys.stderr)",
    "sleep": "import time\ntime.sleep(0.01)\n_t = time.perf_counter(), time.time()",
    "files": (
        "import os, json\nos.makedirs('out', exist_ok=True)\n"
        "_p = os.path.join('out', 'x.json')\njson.dump({'a': 1}, open(_p, 'w'))\n"
        "_x = json.load(open(_p))\nos.rename(_p, _p + '.bak')\n_l = os.listdir('out')\n"
        "os.remove(_p + '.bak')\n_c = os.getcwd()"
    ),
    "random": "import random\nrandom.seed(0)\n_r = random.random()\nimport os\n_u = os.urandom(8)",
    "numpy": "import numpy as np\n_a = np.random.default_rng(0).normal(size=(64, 64)) @ np.ones(64)",  # noqa: E501
    "plot": (
        "import matplotlib\nmatplotlib.use('Agg')\nimport matplotlib.pyplot as plt\n"
        "_f, _ax = plt.subplots()\n_ax.plot([1, 2, 3])\n_f.savefig('p.png')\nplt.close(_f)"
    ),
    "tqdm": "from tqdm.auto import tqdm\nfor _i in tqdm(range(3)):\n    pass",
    "threads": (
        "from concurrent.futures import ThreadPoolExecutor\n"
        "with ThreadPoolExecutor(2) as _ex:\n    _s = list(_ex.map(abs, [-1, 2]))"
    ),
    "datetime": "import datetime\n_n = datetime.datetime.now().isoformat()",
    "error": "try:\n    1 / 0\nexcept ZeroDivisionError:\n    pass\nimport os\n_pid = os.getpid()",
    "torch": (
        "import torch\n_m = torch.nn.Linear(8, 8)\n_o = torch.optim.SGD(_m.parameters(), 0.1)\n"
        "_l = _m(torch.randn(4, 8)).sum()\n_l.backward()\n_o.step()\n"
        "torch.save(_m.state_dict(), 'm.pt')\n_sd = torch.load('m.pt')"
    ),
}


def habits_notebook(path: Path) -> None:
    """The first solution notebook with a student habit before each answer (see HABITS)."""
    import nbformat

    from course_lib.grading.spec import meta, role
    from tools.exercises import load_spec, make_submission

    sol = nbformat.read(path.parent / "solutions" / f"{path.stem}.ipynb", as_version=4)
    names = [ex.name for ex in load_spec(sol, path.stem).exercises]
    answers = {meta(c)["exercise"]: c.source for c in sol.cells if role(c) == "answer"}
    habits = list(HABITS.values())
    choose = {}
    for k, name in enumerate(names):
        code = "\n\n".join(habits[k :: len(names)])  # run unseen by the answer lint
        unseen = "getattr(getattr(sys, 'mod' + 'ules')['built' + 'ins'], 'ex' + 'ec')"
        run = f"import sys\n{unseen}({code!r}, {{}})\n"
        choose[name] = {"code": run + answers[name]}
    nbformat.write(make_submission(sol, choose), path)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--stems", default="", help="comma-separated notebook number prefixes")
    ap.add_argument("--json", metavar="PATH", help="also write the survey here")
    ap.add_argument("--time-limit", type=float, default=600.0, help="seconds per exercise")
    ap.add_argument(
        "--habits",
        action="store_true",
        help="also grade the first notebook with student habits before each answer (HABITS)",
    )
    args = ap.parse_args(argv)
    if shutil.which("strace") is None:
        print("error: strace is not installed (apt-get install strace)", file=sys.stderr)
        return 2
    prefixes = [p for p in args.stems.split(",") if p]
    sols = sorted((ROOT / "solutions").glob("*.ipynb"))
    sols = [p for p in sols if not prefixes or p.stem.split("_")[0] in prefixes]
    table: dict[str, dict] = defaultdict(
        lambda: {"notebooks": 0, "count": 0, "refused": 0, "args": set()}
    )
    graded = []
    with tempfile.TemporaryDirectory(prefix="syscall-survey-") as tmp:
        shutil.copytree(ROOT / "solutions", Path(tmp) / "solutions")
        todo = [(s, k) for s in sols for k in ("solution", "exercise")]
        if args.habits:
            todo.insert(0, (sols[0], "habits"))
        for sol, kind in todo:
            copy = Path(tmp) / "subs" / f"{sol.stem}.ipynb"
            copy.parent.mkdir(exist_ok=True)
            if kind == "habits":
                habits_notebook(Path(tmp) / f"{sol.stem}.ipynb")
                shutil.move(Path(tmp) / f"{sol.stem}.ipynb", copy)
            else:
                shutil.copyfile(sol if kind == "solution" else ROOT / "exercises" / sol.name, copy)
            trace, report = Path(tmp) / "trace.txt", Path(tmp) / "report.json"
            cmd = [
                "strace", "-f", "-qq", "-s", "0", "-e", "raw=ioctl,prctl,fcntl",
                "-o", str(trace),
                sys.executable, "-m", "course_lib.grading.grade", str(copy),
                "--solutions", str(ROOT / "solutions"), "--report", str(report),
                "--time-limit", str(args.time_limit),
            ]  # fmt: skip
            subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
            rep = json.loads(report.read_text()) if report.exists() else {}
            graded.append((sol.stem, kind, rep.get("score"), rep.get("max_score")))
            print(f"{sol.stem} {kind}: {rep.get('score')} / {rep.get('max_score')}", flush=True)
            for name, c in survey_trace(trace.read_text(errors="replace")).items():
                t = table[name]
                t["notebooks"] += 1
                t["count"] += c["count"]
                t["refused"] += c["refused"]
                t["args"] |= c["args"]
            report.unlink(missing_ok=True)
    allowed = lockdown.allowed_names()
    print(f"\n{'call':24} {'notebooks':>9} {'calls':>8} {'refused':>8}  on the allow-list")
    for name in sorted(table, key=lambda n: (-table[n]["notebooks"], n)):
        t = table[name]
        extra = f"  {sorted(t['args'])}" if t["args"] else ""
        print(
            f"{name:24} {t['notebooks']:9} {t['count']:8} {t['refused']:8}  "
            f"{'yes' if name in allowed else 'NO'}{extra}"
        )
    unused = sorted(allowed - set(table))
    print(f"\non the allow-list, not seen: {', '.join(unused) or 'none'}")
    bad = [g for g in graded if g[2] is None or (g[2] != 0 if g[1] == "exercise" else g[2] != g[3])]
    print("scores as expected" if not bad else f"UNEXPECTED SCORES: {bad}")
    if args.json:
        out = {n: {**t, "args": sorted(t["args"])} for n, t in table.items()}
        Path(args.json).write_text(json.dumps({"calls": out, "graded": graded}, indent=1))
    return 0 if not bad else 1


if __name__ == "__main__":
    sys.exit(main())
