"""Benchmark: where a command's CPU goes, by kind of work (the test run's builds, their Jupyter
kernels, the tests, Chromium, the graders' sandboxes), sampled from ``/proc`` every second.

    python benchmarks/cpu_by_kind.py -- bash .ci/run           # CI's run (CI=true for CI's own)
    python benchmarks/cpu_by_kind.py --out cpu.json -- ./course test -n 2 --dist loadgroup

Why sampling: the test run is many processes in many sessions (each build, each Jupyter kernel,
each sandbox is a session of its own), started and ended by tools that do not report their CPU;
what a test's own process reaps (``getrusage``) misses a long-lived server's children and the
builds. Every second, every process's CPU time (``/proc/<pid>/stat``: user + system) is read and
its growth since the last look is credited to its kind (``kind``: from the process's session
leader, the build that started a kernel, its own command line). A process that lives less than a
second between two looks is missed, and a process's last second before it exits too: the
machine's whole CPU (``/proc/stat``) over the same time is printed beside the table, and the
difference as "not attributed (short-lived processes)".

Prints the CPU seconds of each kind, the machine's busy cores per minute, and writes both to
``--out``. Linux only. Compare runs by kind, not by their totals alone: this machine's speed
varies by about a fifth between idle moments (CONTRIBUTING).
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from _common import write_json

TICK = os.sysconf("SC_CLK_TCK")
PERIOD = 1.0  # seconds between two looks at /proc
# The names tests/book_builds.py runs a build under: "native" and a simulated CPU's, whose home
# is tools.spread.CPUS (copied, not imported: that imports torch, and this benchmark runs before
# a fresh clone has an environment; tests/benchmarks/test_cpu_by_kind.py checks the copy)
BUILDS = ("native", "avx2", "avx2+onednn", "no-vector")


def cmdline(pid: int) -> str:
    try:
        return (
            Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        )
    except OSError:
        return ""


def stat(pid: int) -> tuple[int, int, int, int]:
    """``(parent pid, session id, CPU ticks used, start time in ticks since boot)``."""
    text = Path(f"/proc/{pid}/stat").read_text()
    fields = text[text.rindex(")") + 2 :].split()  # the name may hold spaces and parentheses
    return int(fields[1]), int(fields[3]), int(fields[11]) + int(fields[12]), int(fields[19])


def machine_busy_ticks() -> int:
    """All CPUs' busy time since boot (``/proc/stat``: everything but idle and iowait)."""
    values = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return sum(values) - values[3] - values[4]


def kind(pid: int, parent: int, session: int) -> str:
    """What a process is part of, from its session's leader (a build, a kernel, a sandbox,
    the test run), the build whose process started it (a kernel), and its own command line."""
    own, leader = cmdline(pid), cmdline(session)
    for build in BUILDS:
        if f"book_builds.py {build} " in leader:
            return f"build {build}: " + ("Chromium (the PDF)" if "chrom" in own else "Sphinx, pip")
    if "ipykernel" in leader or "kernels/python3/launch.py" in leader:
        try:
            starter = cmdline(stat(parent)[1])
        except (OSError, ValueError):
            starter = ""
        for build in BUILDS:
            if f"book_builds.py {build} " in starter:
                return f"build {build}: the chapters (Jupyter kernels)"
        return "tests: Jupyter kernels (solutions in the fresh Colab)"
    if "chrom" in own:
        return "Chromium (the browser tests)"
    if "bwrap" in leader or "bwrap" in own or "course_lib.grading" in own:
        return "graders' sandboxes"
    if leader:
        return "tests and the rest of the run (pytest, the checker, pip)"
    return "processes whose session leader is gone"


def sample(proc: subprocess.Popen) -> dict:
    """Sample until ``proc`` ends: CPU seconds by kind, and the busy cores per minute."""
    boot_seconds = time.monotonic()  # CLOCK_MONOTONIC: the start times' clock
    seen: dict[int, tuple[int, int]] = {}  # pid -> (start time, ticks at the last look)
    kinds: dict[tuple[int, int], str] = {}
    totals: dict[str, float] = {}
    busy0 = last_busy = machine_busy_ticks()
    t0 = last_minute = time.monotonic()
    minutes: list[float] = []
    while proc.poll() is None:
        now: dict[int, tuple[int, int]] = {}
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            pid = int(entry)
            try:
                parent, session, ticks, start = stat(pid)
            except (OSError, ValueError, IndexError):
                continue  # it ended between the listing and the look
            key = (pid, start)
            if key not in kinds:
                kinds[key] = kind(pid, parent, session)
            before = seen.get(pid)
            if before and before[0] == start:
                base = before[1]
            else:  # new since the last look: all its CPU, if it started after we did
                base = 0 if start / TICK >= boot_seconds else ticks
            if ticks > base:
                totals[kinds[key]] = totals.get(kinds[key], 0.0) + (ticks - base) / TICK
            now[pid] = (start, ticks)
        seen = now
        if time.monotonic() - last_minute >= 60:
            busy = machine_busy_ticks()
            minutes.append(round((busy - last_busy) / TICK / (time.monotonic() - last_minute), 2))
            last_busy, last_minute = busy, time.monotonic()
        time.sleep(PERIOD)
    machine = (machine_busy_ticks() - busy0) / TICK
    attributed = sum(totals.values())
    totals["not attributed (short-lived processes)"] = max(0.0, machine - attributed)
    return {
        "seconds": round(time.monotonic() - t0, 1),
        "exit_code": proc.returncode,
        "machine_cpu_seconds": round(machine, 1),
        "cpu_seconds_by_kind": {
            k: round(v, 1) for k, v in sorted(totals.items(), key=lambda kv: -kv[1])
        },
        "busy_cores_per_minute": minutes,
    }


def table(result: dict) -> str:
    rows = [
        f"{result['seconds']:,.0f} s, exit {result['exit_code']}; the machine's CPU "
        f"{result['machine_cpu_seconds']:,.0f} s",
        "| kind of work | CPU seconds | share |",
        "| --- | --- | --- |",
    ]
    whole = result["machine_cpu_seconds"] or 1.0
    for name, seconds in result["cpu_seconds_by_kind"].items():
        rows.append(f"| {name} | {seconds:,.0f} | {100 * seconds / whole:.0f} % |")
    rows.append(
        "busy cores, minute by minute: " + " ".join(map(str, result["busy_cores_per_minute"]))
    )
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, help="write the result as JSON here too")
    ap.add_argument("command", nargs=argparse.REMAINDER, help="-- then the command to run")
    args = ap.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        ap.error("name the command to run after --")
    if not Path("/proc/stat").exists():
        ap.error("this benchmark reads /proc: Linux only")
    # The command leads a session of its own: its processes' kind then does not depend on who
    # started the benchmark (a CI harness's session leader may have exited: "leader is gone")
    proc = subprocess.Popen(command, start_new_session=True)
    try:
        result = sample(proc)
    except KeyboardInterrupt:  # its own session does not get the terminal's Ctrl-C: pass it on
        os.killpg(proc.pid, signal.SIGINT)
        proc.wait()
        raise
    print(table(result))
    if args.out:
        write_json(result, args.out)
    return result["exit_code"]


if __name__ == "__main__":
    sys.exit(main())
