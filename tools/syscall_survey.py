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
_RESULT = re.compile(r"=\s+(-?\w+)(?:\s+(E[A-Z0-9]+))?")


def survey_trace(text: str) -> dict[str, dict]:
    """{call: {"count", "refused", "args"}} of the confined processes in one strace -f log."""
    confined: set[str] = set()
    pending: dict[str, str] = {}  # pid -> call whose result is still to come
    calls: dict[str, dict] = defaultdict(lambda: {"count": 0, "refused": 0, "args": set()})
    for line in text.splitlines():
        m = _LINE.match(line)
        if not m:
            continue
        pid, resumed, name, rest = m.group(1), m.group(2), m.group(3), m.group(4) or ""
        if resumed:
            name, rest = resumed, line.split("resumed>", 1)[1]
        elif "<unfinished ...>" in line:
            pending[pid] = name
        if name == "seccomp" and "SECCOMP_SET_MODE_FILTER" in rest and rest.endswith("= 0"):
            confined.add(pid)  # the filter is in place (libseccomp's probes before fail)
            continue
        if pid not in confined:
            continue
        res = _RESULT.search(rest.rsplit(")", 1)[-1]) if ")" in rest else None
        if not resumed:
            c = calls[name]
            c["count"] += 1
            if name in ("prctl", "ioctl"):
                args = [a.strip() for a in rest.split(",")]
                c["args"].add(args[0] if name == "prctl" else (args[1] if len(args) > 1 else ""))
        if res and res.group(2) == "EPERM" and (resumed or "<unfinished" not in line):
            calls[name]["refused"] += 1
        if res and name in ("clone", "clone3") and res.group(1).isdigit():
            confined.add(res.group(1))  # a thread of a confined process
    return calls


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--stems", default="", help="comma-separated notebook number prefixes")
    ap.add_argument("--json", metavar="PATH", help="also write the survey here")
    ap.add_argument("--time-limit", type=float, default=600.0, help="seconds per exercise")
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
        for sol in sols:
            for kind, nb in (("solution", sol), ("exercise", ROOT / "exercises" / sol.name)):
                copy = Path(tmp) / f"{sol.stem}.ipynb"
                shutil.copyfile(nb, copy)
                trace, report = Path(tmp) / "trace.txt", Path(tmp) / "report.json"
                cmd = [
                    "strace", "-f", "-qq", "-s", "0", "-e", "raw=ioctl,prctl",
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
    bad = [g for g in graded if g[2] is None or (g[2] != g[3] if g[1] == "solution" else g[2] != 0)]
    print("scores as expected" if not bad else f"UNEXPECTED SCORES: {bad}")
    if args.json:
        out = {n: {**t, "args": sorted(t["args"])} for n, t in table.items()}
        Path(args.json).write_text(json.dumps({"calls": out, "graded": graded}, indent=1))
    return 0 if not bad else 1


if __name__ == "__main__":
    sys.exit(main())
