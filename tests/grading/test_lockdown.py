"""The seccomp allow-list of a grading child (``course_lib.grading.lockdown``), tried against
the real kernel: every system call off the list is refused, on every ABI; the calls on the list
with an argument condition are refused with the arguments that would reach another process.

The probes run inside the bubblewrap sandbox (a call the filter failed to refuse would run
there, in namespaces of its own, without capabilities); each probe process loads the filter
first. The refusals are told apart from the kernel's own errors by building the filter with a
default errno nothing else returns (``build(..., default_errno=ENOTRECOVERABLE)``); the
grading filter is the same table with EPERM.
"""

from __future__ import annotations

import json
import platform
import subprocess
import sys

import pytest

from course_lib.grading import lockdown
from course_lib.grading import sandbox as sandboxing

HAVE_BWRAP = sandboxing.probe()[0] is not None
needs_bwrap = pytest.mark.skipif(
    not HAVE_BWRAP,
    reason=f"no bubblewrap sandbox here: {sandboxing.probe()[1]} "
    "(CI installs it: apt-get install bubblewrap)",
)
X86_64 = platform.machine() == "x86_64"

# The prober: run in the sandbox, prints one JSON document. A probe is a forked child that
# loads the filter and makes one call (the foreign ABIs kill it: one child per call), or, on
# the native ABI, makes every call of the table in turn.
PROBER = r'''
import ctypes, errno, json, mmap, os, platform, signal, sys
import pyseccomp as sc
from course_lib.grading import lockdown

MARK = errno.ENOTRECOVERABLE
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
allowed = lockdown.allowed_names() | set(lockdown.ENOSYS_CALLS)


def table(arch, lo, hi):
    out = {}
    for nr in range(lo, hi):
        try:
            out[nr] = sc.resolve_syscall(arch, nr).decode()
        except ValueError:
            pass
    return out


def in_child(fn, prebuilt=None):
    """fn() in a forked child that first loads the filter (built for it, or ``prebuilt``);
    (its JSON result, wait status)."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        me = os.getpid()
        try:
            (prebuilt or lockdown.build(me, default_errno=MARK)).load()
            res = fn(me)
        except BaseException as exc:
            res = f"error {exc!r}"
        if os.getpid() == me:  # not a process the filter failed to stop
            os.write(w, json.dumps(res).encode())
        os._exit(0)
    os.close(w)
    data = b""
    while chunk := os.read(r, 1 << 16):
        data += chunk
    os.close(r)
    _, status = os.waitpid(pid, 0)
    return (json.loads(data) if data else None), status


def call(nr, *args):
    ctypes.set_errno(0)
    a = [ctypes.c_long(x) for x in (list(args) + [0] * 6)[:6]]
    r = libc.syscall(ctypes.c_long(nr), *a)
    return "ran" if r != -1 else errno.errorcode.get(ctypes.get_errno(), ctypes.get_errno())


def native_table(me):
    out = {}
    for nr, name in NATIVE.items():
        if name not in allowed:
            out[name] = call(nr)
    return out


def conditional(me):
    nr = lambda n: sc.resolve_syscall(sc.Arch.NATIVE, n)
    other, tid = os.getppid(), libc.syscall(nr("gettid"))
    info = ctypes.create_string_buffer(128)
    ctypes.memmove(info, (ctypes.c_int * 3)(0, 0, -1), 12)  # si_code SI_QUEUE
    info_p = ctypes.addressof(info)
    r, w = os.pipe()
    rl = ctypes.create_string_buffer(16)
    out = {
        "kill other": call(nr("kill"), other, 0),
        "kill group": call(nr("kill"), 0, 0),
        "kill all": call(nr("kill"), -1, 0),
        "kill init": call(nr("kill"), 1, 0),
        "tgkill other": call(nr("tgkill"), other, other, 0),
        "rt_sigqueueinfo other": call(nr("rt_sigqueueinfo"), other, 0, info_p),
        "rt_tgsigqueueinfo other": call(nr("rt_tgsigqueueinfo"), other, other, 0, info_p),
        "clone a process": call(nr("clone"), signal.SIGCHLD, 0, 0, 0, 0),
        # CLONE_THREAD | CLONE_VM | CLONE_SIGHAND | CLONE_NEWNET
        "clone a thread in a new namespace": call(nr("clone"), 0x40010900, 0, 0, 0, 0),
        "prctl PR_SET_DUMPABLE": call(nr("prctl"), 4, 1),
        "prctl PR_SET_PDEATHSIG": call(nr("prctl"), 1, 9),
        "fcntl F_SETOWN": call(nr("fcntl"), w, 8, other),
        "fcntl F_SETOWN_EX": call(nr("fcntl"), w, 15, 0),
        "fcntl F_SETSIG": call(nr("fcntl"), w, 10, 10),
        "ioctl TIOCSTI": call(nr("ioctl"), 0, 0x5412, 0),
        "ioctl FIOSETOWN": call(nr("ioctl"), w, 0x8901, 0),
        "ioctl FIOASYNC": call(nr("ioctl"), w, 0x5452, 0),
        "prlimit64 other": call(nr("prlimit64"), other, 7, 0, ctypes.addressof(rl)),
        "sched_setaffinity other": call(nr("sched_setaffinity"), other, 0, 0),
        # what a process needs of itself still works
        "kill self": call(nr("kill"), me, 0),
        "tgkill self": call(nr("tgkill"), me, tid, 0),
        "rt_sigqueueinfo self": call(nr("rt_sigqueueinfo"), me, 0, info_p),
        "prlimit64 self": call(nr("prlimit64"), 0, 7, 0, ctypes.addressof(rl)),
        "fcntl F_GETFL": call(nr("fcntl"), w, 3),
        "clone3": call(nr("clone3"), 0, 0),
    }
    import threading
    t = threading.Thread(target=lambda: None)
    t.start()
    t.join()
    out["a thread"] = "ran"
    return out


STUB = bytes.fromhex("53" "89f8" "89f3" "4989c8" "89d1" "4489c2" "cd80" "5b" "c3")


def int80(nr):
    """An i386 system call through int 0x80 from this 64-bit process (machine code)."""
    buf = mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
    buf.write(STUB)
    addr = ctypes.addressof(ctypes.c_char.from_buffer(buf))
    i = ctypes.c_int
    fn = ctypes.CFUNCTYPE(i, i, i, i, i)(addr)
    return fn(nr, 0, 0, 0)


NATIVE = table(sc.Arch.NATIVE, 0, 1024)
SAMPLE = ("fork", "vfork", "clone", "kill", "tkill", "ptrace", "execve", "getpid", "read", "write")
report = {"native": {}, "conditional": {}, "i386": {}, "x32": {}}
report["native"], _ = in_child(native_table)
report["conditional"], _ = in_child(conditional)
if platform.machine() == "x86_64":
    prebuilt = lockdown.build(os.getpid(), default_errno=MARK)  # the ABI is refused whole
    for abi, arch, lo, hi, fn in (
        ("i386", sc.Arch.X86, 0, 1024, lambda nr: int80(nr)),
        ("x32", sc.Arch.X32, 0x40000000, 0x40000000 + 1024, lambda nr: call(nr)),
    ):
        for nr, name in table(arch, lo, hi).items():
            if sys.argv[1] != "all" and name not in SAMPLE:
                continue
            res, status = in_child(lambda me, nr=nr, fn=fn: fn(nr), prebuilt)
            report[abi][name] = (
                "killed by SIGSYS"
                if os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGSYS
                else f"not killed: {res} {status}"
            )
print(json.dumps(report))
'''


def _probe(which: str) -> dict:
    sb, _ = sandboxing.probe()
    argv = [sys.executable, "-c", PROBER, which]
    cmd = sandboxing.command(sb, argv, {}, sandboxing.inner_env(1))
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout)


@pytest.fixture(scope="module")
def probed():
    """Every native call; the foreign ABIs: a sample of ten calls each."""
    return _probe("sample")


@needs_bwrap
def test_every_native_call_off_the_allow_list_is_refused(probed):
    got = probed["native"]
    assert len(got) > 200, "the resolver listed too few calls"  # x86-64: ~370 names in all
    ran = {name: r for name, r in got.items() if r != "ENOTRECOVERABLE"}
    assert ran == {}, f"calls off the allow-list that the filter did not refuse: {ran}"
    never = """fork vfork execve ptrace process_vm_readv process_vm_writev pidfd_open pidfd_getfd
    pidfd_send_signal tkill kcmp shmget semget msgget socket unshare setns mount bpf userfaultfd
    memfd_create io_uring_setup personality seccomp""".split()
    for name in never:
        assert got.get(name) == "ENOTRECOVERABLE", name


@needs_bwrap
def test_calls_with_arguments_reach_only_this_process(probed):
    got = probed["conditional"]
    refused = {k: v for k, v in got.items() if not k.endswith(("self", "F_GETFL", "thread"))}
    refused.pop("clone3")
    assert all(v == "ENOTRECOVERABLE" for v in refused.values()), refused
    assert got["clone3"] == "ENOSYS"  # so that the C library falls back to clone (threads)
    for k in ("kill self", "tgkill self", "rt_sigqueueinfo self", "prlimit64 self", "a thread"):
        assert got[k] == "ran", (k, got[k])
    assert got["fcntl F_GETFL"] == "ran"


@needs_bwrap
@pytest.mark.skipif(not X86_64, reason="the foreign ABIs probed here are x86-64's")
@pytest.mark.parametrize("abi", ["i386", "x32"])
def test_a_call_through_another_abi_kills_the_process(probed, abi):
    got = probed[abi]
    for name in ("fork", "vfork", "clone", "kill", "tkill", "ptrace", "execve", "getpid"):
        assert got[name] == "killed by SIGSYS", (name, got[name])


@needs_bwrap
@pytest.mark.slow
@pytest.mark.skipif(not X86_64, reason="the foreign ABIs probed here are x86-64's")
def test_every_call_through_another_abi_kills_the_process():
    """Every i386 (int 0x80) and x32 call libseccomp knows, one probe process each."""
    got = _probe("all")
    for abi in ("i386", "x32"):
        assert len(got[abi]) > 300, f"the resolver listed too few {abi} calls"
        alive = {name: r for name, r in got[abi].items() if r != "killed by SIGSYS"}
        assert alive == {}, f"{abi} calls that did not kill the process: {alive}"


def test_the_table_is_one_table_with_reasons():
    for table in (lockdown.ALLOWED, lockdown.SELF_ONLY, lockdown.SELF_OR_ZERO):
        assert all(isinstance(why, str) and why for why in table.values())
    conditional = set(lockdown.SELF_ONLY) | set(lockdown.SELF_OR_ZERO)
    assert not conditional & set(lockdown.ALLOWED)
    for never in ("fork", "vfork", "execve", "execveat", "ptrace", "tkill", "pidfd_open",
                  "pidfd_getfd", "pidfd_send_signal", "process_vm_readv", "process_vm_writev",
                  "kcmp", "shmget", "shmat", "semget", "msgget", "socket", "clone3"):  # fmt: skip
        assert never not in lockdown.allowed_names(), never
    for signal_route in ("kill", "tgkill", "rt_sigqueueinfo", "rt_tgsigqueueinfo"):
        assert signal_route in lockdown.SELF_ONLY
    assert not {8, 10, 15} & set(lockdown.FCNTL_COMMANDS)  # F_SETOWN, F_SETSIG, F_SETOWN_EX


def test_trusted_processes_are_not_dumpable():
    code = (
        "from course_lib.grading.lockdown import not_dumpable\n"
        "import ctypes\nassert not_dumpable()\n"
        "print(ctypes.CDLL(None).prctl(3, 0, 0, 0, 0))\n"  # PR_GET_DUMPABLE
    )
    if not sys.platform.startswith("linux"):
        pytest.skip("Linux only")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.strip() == "0", out.stderr
