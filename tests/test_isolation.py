"""One submission cannot reach another (issue 34): a class graded by the real ``course-grade
--batch`` in the bubblewrap sandbox, one grading at a time, hostile students first and honest
classmates after.

Each hostile answer runs its attack through ``exec`` reached by ``getattr`` (so the answer lint
does not refuse it: the sandbox, not the lint, must hold), recording each step that worked in
``ok``, and then defines the solution, broken if any did; an attack through another ABI
(``int 0x80``) kills its process.
The classes of attack, each tried on every process the child can see:

- ``int 0x80`` (the i386 ABI from a 64-bit process): fork (a daemon that kills every later
  process and keeps leaving files), kill, ptrace;
- every signal route to another process: kill, tkill, tgkill, rt_sigqueueinfo,
  rt_tgsigqueueinfo, pidfd_send_signal, kill(0) and kill(-1), and F_SETOWN (SIGIO);
- ``/proc/<pid>/mem``, ``/proc/<pid>/fd/<n>`` (the zygote's pipes: writing a forged plan or
  outcome into them) and ``pidfd_getfd``;
- files, shared memory and sockets left behind; an outcome followed by a sleep;
- a classmate graded later who looks for any of that, and for earlier answers in its memory.

The honest classmates graded after the attackers keep full marks, and no report holds anything
of another submission.
"""

from __future__ import annotations

import json
import shutil
import uuid

import nbformat
import pytest

from course_lib.grading import grade as grading
from course_lib.grading import sandbox as sandboxing
from tools.exercises import SOLUTIONS, load_spec, make_submission

HAVE_BWRAP = sandboxing.probe()[0] is not None
needs_bwrap = pytest.mark.skipif(
    not HAVE_BWRAP,
    reason=f"no bubblewrap sandbox here: {sandboxing.probe()[1]} "
    "(CI installs it: apt-get install bubblewrap)",
)
STEM = "01_why_transformers"
TIME_LIMIT = 20.0
D, L, P, R = "dependence", "layers_to_connect", "predict_path_lengths", "rnn_forward"
MARK = "zq" + "_canary_"  # + 32 hex digits: one per submission

# ---------------------------------------------------------------- the attacks (plain Python)
INT80 = '''
import ctypes, mmap
_buf = mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
# eax, ebx, ecx, edx, esi = nr, a, b, c, d (from rdi, rsi, rdx, rcx, r8); int 0x80; ret
_buf.write(bytes.fromhex("53" "89f8" "89f3" "4989c9" "89d1" "4489ca" "4489c6" "cd80" "5b" "c3"))
_i = ctypes.c_int
_f = ctypes.CFUNCTYPE(_i, _i, _i, _i, _i, _i)(ctypes.addressof(ctypes.c_char.from_buffer(_buf)))
int80 = lambda nr, a=0, b=0, c=0, d=0: _f(nr, a, b, c, d)
'''

FORK_DAEMON = (
    INT80
    + '''
import os, time
pid = int80(2, 0, 0, 0)  # i386 fork
if pid == 0:  # the daemon: for a minute and a half, kill every later process, leave files
    me = os.getpid()
    end = time.monotonic() + 90
    while time.monotonic() < end:
        for p in os.listdir("/proc"):
            if p.isdigit() and int(p) > me:
                int80(37, int(p), 9, 0)  # i386 kill
        for d in ("/grading", "/grading/tmp", "/grading/home", "/dev/shm", "/tmp"):
            try:
                with open(f"{d}/left-by-a-daemon-MARKER", "w") as fh:
                    fh.write("MARKER")
            except OSError:
                pass
        time.sleep(0.2)
    os._exit(0)
got_through = pid > 0
'''
)
KILL = INT80 + "got_through = int80(37, __import__('os').getppid(), 0, 0) == 0  # i386 kill\n"
PTRACE = INT80 + (
    "got_through = int80(26, 0x4206, __import__('os').getppid()) == 0  # i386 ptrace SEIZE\n"
)

SIGNALS = '''
import ctypes, os, signal
libc = ctypes.CDLL(None, use_errno=True)
me = os.getpid()
others = {int(p) for p in os.listdir("/proc") if p.isdigit()} | {1, os.getppid()}
others.discard(me)
others.discard(0)
info = ctypes.create_string_buffer(128)
ctypes.memmove(info, (ctypes.c_int * 3)(signal.SIGCONT, 0, -1), 12)  # si_code SI_QUEUE
def tried(what, r):
    if r == 0:
        ok.append(what)
for pid in others:
    try:
        tids = [int(t) for t in os.listdir(f"/proc/{pid}/task")]
    except OSError:
        tids = [pid]
    tried(("kill", pid), libc.kill(pid, signal.SIGCONT))
    for tid in tids:
        tried(("tkill", tid), libc.syscall(200, tid, signal.SIGCONT))
        tried(("tgkill", tid), libc.syscall(234, pid, tid, signal.SIGCONT))
        tried(("rt_tgsigqueueinfo", tid), libc.syscall(297, pid, tid, signal.SIGCONT, info))
    tried(("rt_sigqueueinfo", pid), libc.syscall(129, pid, signal.SIGCONT, info))
    pidfd = libc.syscall(434, pid, 0)  # pidfd_open
    if pidfd >= 0:
        ok.append(("pidfd_open", pid))
        tried(("pidfd_send_signal", pid), libc.syscall(424, pidfd, signal.SIGCONT, 0, 0))
    r, w = os.pipe()  # F_SETOWN: the kernel sends SIGIO to the owner when the pipe is ready
    tried(("F_SETOWN", pid), libc.fcntl(r, 8, pid))
    os.close(r)
    os.close(w)
tried(("kill 0", 0), libc.kill(0, signal.SIGCONT))
tried(("kill -1", -1), libc.kill(-1, signal.SIGCONT))
'''

PROC = '''
import ctypes, json, os, struct
libc = ctypes.CDLL(None, use_errno=True)
me = os.getpid()
forged = json.dumps({"idle": True, "done": True}).encode()
frame = struct.pack("!Q", len(forged)) + forged
for p in os.listdir("/proc"):
    if not p.isdigit() or int(p) == me:
        continue
    pid = int(p)
    for what in ("mem", "environ", "maps"):
        try:
            os.close(os.open(f"/proc/{pid}/{what}", os.O_RDWR if what == "mem" else os.O_RDONLY))
            ok.append((what, pid))
        except OSError:
            pass
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        fds = []
    for n in fds:  # the zygote's plan and output pipes among them: write a forged message
        try:
            fd = os.open(f"/proc/{pid}/fd/{n}", os.O_WRONLY | os.O_NONBLOCK)
        except OSError:
            continue
        ok.append(("fd", pid, n))
        try:
            os.write(fd, frame)
        except OSError:
            pass
        os.close(fd)
    pidfd = libc.syscall(434, pid, 0)  # pidfd_open
    for n in range(64):
        fd = libc.syscall(438, pidfd, n, 0) if pidfd >= 0 else -1  # pidfd_getfd
        if fd >= 0:
            ok.append(("pidfd_getfd", pid, n))
            try:
                os.write(fd, frame)
            except OSError:
                pass
'''

LEAVE = '''
import ctypes, os, socket
for d in ("/grading", "/grading/tmp", "/grading/home", "/dev/shm", "/tmp"):
    try:
        with open(f"{d}/left-MARKER", "w") as fh:
            fh.write("MARKER")
    except OSError:
        pass
libc = ctypes.CDLL(None, use_errno=True)
libc.shmget(0x5EC, 4096, 0o1666)  # IPC_CREAT | 0666: a segment that would outlive the child
try:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind("\\0course-grade-MARKER")
    s.listen(1)
except OSError:
    pass
got_through = False  # what it left is judged by the classmates graded after it
'''

OUTCOME_THEN_SLEEP = '''
import json, os, stat, struct, time
raw = json.dumps({"exercise": "dependence", "results": [], "errors": []}).encode()
for n in os.listdir("/proc/self/fd"):
    try:
        if int(n) > 2 and stat.S_ISFIFO(os.fstat(int(n)).st_mode):
            os.write(int(n), struct.pack("!Q", len(raw)) + raw)
    except OSError:
        pass
time.sleep(10**6)
'''

LOOK_AROUND = '''
import ctypes, os
me = os.getpid()
found = []
for d in ("/grading", "/grading/tmp", "/grading/home", "/dev/shm", "/tmp"):
    try:
        found += [f"{d}/{f}" for f in os.listdir(d) if f not in ("home", "tmp", ".mpl")]
    except OSError:
        pass
libc = ctypes.CDLL(None, use_errno=True)
if libc.shmget(0x5EC, 0, 0) >= 0:
    found.append("a shared memory segment")
# processes: only this one and the zygote that forked it belong to this submission
found += [p for p in os.listdir("/proc") if p.isdigit() and int(p) not in (me, os.getppid())]
got_through = bool(found)
'''

MEMORY = '''
import re
own = "MARKER"
pattern = re.compile(rb"zq_canary_[0-9a-f]{32}")
seen = set()
with open("/proc/self/maps") as maps, open("/proc/self/mem", "rb", buffering=0) as mem:
    for line in maps:
        fields = line.split()
        lo, hi = (int(x, 16) for x in fields[0].split("-"))
        named = len(fields) > 5 and not fields[5].startswith("[heap")
        if "r" not in fields[1] or "w" not in fields[1] or named or hi - lo > 1 << 28:
            continue
        try:
            mem.seek(lo)
            seen |= {m.decode() for m in pattern.findall(mem.read(hi - lo))}
        except (OSError, ValueError, OverflowError):
            pass
got_through = bool(seen - {own})
'''


def _solution(name: str) -> str:
    sol = nbformat.read(SOLUTIONS / f"{STEM}.ipynb", as_version=4)
    return next(c.source for c in sol.cells if c.get("id") == f"{name.replace('_', '-')}-answer")


def _marked(name: str, marker: str) -> str:
    """The solution, carrying the submission's marker (as a comment and as a string)."""
    return f"{_solution(name)}\n# {marker}\n_marker = {marker!r}\n"


def _attack(name: str, attack: str, marker: str) -> dict:
    """An answer that runs ``attack`` unseen by the lint, then defines the solution, broken
    (None) if the attack set ``got_through``."""
    runner = (
        "import sys\n_ns = {'ok': []}\ntry:\n"
        "    getattr(getattr(sys, 'mod' + 'ules')['built' + 'ins'], 'ex' + 'ec')("
        f"{attack.replace('MARKER', marker)!r}, _ns)\n"
        "except Exception as _e:\n    print('attack stopped:', repr(_e))\n"
        "_got_through = bool(_ns['ok']) or _ns.get('got_through', False)\n"
    )
    return {"code": runner + _marked(name, marker) + f"\nif _got_through:\n    {name} = None\n"}


def _submission(marker: str, **attacks) -> nbformat.NotebookNode:
    sol = nbformat.read(SOLUTIONS / f"{STEM}.ipynb", as_version=4)
    names = [ex.name for ex in load_spec(sol, STEM).exercises]
    choose = {n: {"code": _marked(n, marker)} for n in names}
    choose.update({n: _attack(n, a, marker) for n, a in attacks.items()})
    return make_submission(sol, choose)


# graded in this order (one at a time): the attackers, the honest classmates, the accomplice
CLASS = {
    "a1_int80": {D: FORK_DAEMON, L: KILL, R: PTRACE},
    "a2_signals": {D: SIGNALS},
    "a3_proc": {D: PROC},
    "a4_leave": {D: LEAVE},
    "a5_outcome_then_sleep": {D: OUTCOME_THEN_SLEEP},
    "b_honest_1": {},
    "b_honest_2": {},
    "b_honest_3": {},
    "z_accomplice": {D: LOOK_AROUND, L: MEMORY},
}


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    base = tmp_path_factory.mktemp("isolation")
    sols = base / "solutions"
    shutil.copytree(SOLUTIONS, sols)
    folder = base / "class"
    folder.mkdir()
    markers = {}
    for name, attacks in CLASS.items():
        markers[name] = MARK + uuid.uuid4().hex
        nbformat.write(_submission(markers[name], **attacks), folder / f"{name}.ipynb")
    out = base / "grades"
    code = grading.main(
        ["--batch", str(folder), "--out", str(out), "--solutions", str(sols), "--workers", "1",
         "--time-limit", str(TIME_LIMIT)]
    )  # fmt: skip
    texts = {p.name.removesuffix(".grade.json"): p.read_text() for p in out.glob("*.grade.json")}
    return {
        "code": code,
        "texts": texts,
        "reports": {k: json.loads(v) for k, v in texts.items()},
        "markers": markers,
    }


def _ex(rep, name):
    return next(e for e in rep["exercises"] if e["name"] == name)


def _full(rep, *names):
    for e in rep["exercises"]:
        if not names or e["name"] in names:
            assert e["status"] == "graded" and e["points"] == e["max_points"], e


def _killed_by_the_filter(rep, name):
    e = _ex(rep, name)
    assert e["status"] == "crashed" and e["points"] == 0, e
    assert any("SIGSYS" in m for m in e["messages"]), e["messages"]


@needs_bwrap
@pytest.mark.slow
def test_int80_fork_kill_and_ptrace_kill_the_process(graded):
    rep = graded["reports"]["a1_int80"]
    for name in (D, L, R):
        _killed_by_the_filter(rep, name)
    others = [e["name"] for e in rep["exercises"] if e["name"] not in (D, L, R)]
    _full(rep, *others)


@needs_bwrap
@pytest.mark.slow
def test_no_signal_route_reaches_another_process(graded):
    _full(graded["reports"]["a2_signals"])


@needs_bwrap
@pytest.mark.slow
def test_no_other_process_memory_descriptors_or_pipes(graded):
    _full(graded["reports"]["a3_proc"])


@needs_bwrap
@pytest.mark.slow
def test_an_outcome_then_a_sleep_does_not_hold_the_grading(graded):
    rep = graded["reports"]["a5_outcome_then_sleep"]
    assert rep["status"] == "graded", rep
    assert rep["seconds"] < TIME_LIMIT * len(rep["exercises"]), rep["seconds"]
    e = _ex(rep, D)
    assert e["status"] == "graded" and e["points"] == 0, e  # its forged outcome: no checks ran
    # each later exercise's child reruns that answer first: its outcome is then a message
    # about another exercise, which ends that child as a crash (the attacker's loss alone)
    for e in rep["exercises"][1:]:
        assert e["status"] == "crashed", e
        assert any("not its outcome" in m for m in e["messages"]), e["messages"]


@needs_bwrap
@pytest.mark.slow
def test_nothing_left_behind_reaches_a_later_submission(graded):
    """No file, process, shared memory segment, nor an earlier submission's answer in its own
    memory: the accomplice graded last finds nothing."""
    _full(graded["reports"]["a4_leave"])
    _full(graded["reports"]["z_accomplice"])


@needs_bwrap
@pytest.mark.slow
def test_honest_classmates_graded_after_the_attackers_keep_their_marks(graded):
    assert graded["code"] == 0
    reps = graded["reports"]
    assert sorted(reps) == sorted(CLASS)
    for name in ("b_honest_1", "b_honest_2", "b_honest_3"):
        assert reps[name]["status"] == "graded", reps[name]
        assert reps[name]["score"] == reps[name]["max_score"], [
            (e["name"], e["points"], e["status"], e["messages"]) for e in reps[name]["exercises"]
        ]


@needs_bwrap
@pytest.mark.slow
def test_no_report_holds_anything_of_another_submission(graded):
    for name, text in graded["texts"].items():
        for other, marker in graded["markers"].items():
            if other != name:
                assert marker not in text, (name, other)
