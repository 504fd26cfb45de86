"""The seccomp allow-list of a grading child: the system calls the student's code may make
(Linux; built with libseccomp through ``pyseccomp``, never hand-assembled BPF).

Each exercise's child (``student``) calls ``confine()`` after closing its descriptors and
setting its limits, before any student code runs. From then on, in that process and every
thread it starts (the filter cannot be removed, and ``no_new_privs`` is set):

- only the calls in ``ALLOWED`` run; any other returns EPERM (``clone3`` returns ENOSYS, so
  that the C library falls back to ``clone``, which is argument-checked);
- the native ABI only: a call through another ABI (``int 0x80``, i386, on x86-64; an x32
  number; 32-bit ARM on arm64) kills the process (SIGSYS). libseccomp resolves every name for
  the machine it runs on, so the same table serves x86-64 and arm64 (a name that does not
  exist there, such as ``open`` on arm64, is skipped);
- no new processes: ``clone`` only with ``CLONE_THREAD`` (a thread of this process) and no
  namespace flag; ``fork``, ``vfork``, ``execve`` are not allowed;
- signals to itself only, by every route: ``kill``, ``tgkill``, ``rt_sigqueueinfo`` and
  ``rt_tgsigqueueinfo`` only with this process's own pid as the target (``SELF_ONLY``); not
  ``tkill`` (its target thread cannot be checked), ``pidfd_open``, ``pidfd_send_signal``;
- nothing that reaches another process: no ``ptrace``, ``process_vm_readv``/``writev``,
  ``pidfd_getfd``, ``kcmp``, ``process_madvise``; the calls that take a pid (``prlimit64``,
  the ``sched_*`` family, ``setpriority``) only for itself (pid 0 or its own);
- no System V IPC, no sockets, no mounts, namespaces, BPF, perf, keyrings, ``userfaultfd``,
  ``io_uring``, ``memfd_create``, ``personality``, or more seccomp filters;
- ``prctl``, ``fcntl`` and ``ioctl`` only with the options, commands and requests in
  ``PRCTL_OPTIONS``, ``FCNTL_COMMANDS`` and ``IOCTL_REQUESTS`` (not ``F_SETOWN`` and the
  like: a descriptor that signals another process when it is ready is a signal route too).

``ALLOWED`` was measured, not guessed: ``tools/syscall_survey.py`` grades every solution, every
untouched exercise notebook and a notebook of student habits under strace and lists the calls
the children make after ``confine`` (everything torch, numpy, matplotlib, Python and the checks
needed: 27 calls); the table holds those ("seen"), their other names (the ``*at`` forms glibc
or arm64 use) and what threads, an abort or a signal of its own need by construction; each
entry says who needs it. A call missing from the table shows as an EPERM in the student's
process (a failing check or a crash), never as a hole.

The trusted processes (the zygote, the checker and its server) are made non-dumpable
(``not_dumpable``): their ``/proc/<pid>/mem``, ``fd``, ``environ`` and the like cannot be
opened by another process of the same user without ``CAP_SYS_PTRACE``, which the sandbox
drops; a child inherits the flag and may not change it (``PR_SET_DUMPABLE`` is not in
``PRCTL_OPTIONS``).
"""

from __future__ import annotations

import ctypes
import errno
import functools
import os
import sys

__all__ = [
    "ALLOWED",
    "SELF_ONLY",
    "PRCTL_OPTIONS",
    "FCNTL_COMMANDS",
    "IOCTL_REQUESTS",
    "ENOSYS_CALLS",
    "supported",
    "confine",
    "build",
    "not_dumpable",
    "allowed_names",
]

# --------------------------------------------------------------------------- the allow-list
# name -> why. "seen": made by the grading children of every solution and exercise notebook
# and of a notebook of student habits (printing, sleeping, files in the scratch folder, numpy,
# a plot, a progress bar, threads, torch.save), measured with tools/syscall_survey.py. The
# others are the same call under another name (glibc and arm64 pick the *at forms), or what a
# thread, an abort or a signal of the process's own needs by construction.
ALLOWED: dict[str, str] = {
    # reading and writing what is open: files of the sandbox, the pipe to the zygote
    "read": "seen: Python, every file, the pipe",
    "write": "seen: Python, the pipe to the zygote, files in the scratch folder",
    "writev": "glibc's own messages before an abort",
    "pread64": "reading at an offset (zipfile, torch.load, numpy)",
    "pwrite64": "writing at an offset (torch.save)",
    "lseek": "seen: Python file objects",
    "close": "seen: Python",
    "pipe2": "seen: a pipe inside the process (matplotlib)",
    # the file system (the sandbox's own: read-only system files, the scratch tmpfs)
    "openat": "seen: every open",
    "open": "open on x86-64 (openat's older name)",
    "newfstatat": "seen: os.stat, imports",
    "fstat": "os.fstat (newfstatat's older name)",
    "stat": "os.stat (x86-64)",
    "lstat": "os.lstat (x86-64)",
    "statx": "stat in newer glibc",
    "access": "seen: os.access, os.path checks",
    "faccessat": "os.access on arm64",
    "faccessat2": "os.access with flags (newer glibc)",
    "readlink": "os.path.realpath (x86-64)",
    "readlinkat": "os.path.realpath",
    "getdents64": "seen: os.listdir, os.scandir",
    "getcwd": "seen: os.getcwd",
    "mkdir": "seen: os.mkdir (x86-64)",
    "mkdirat": "os.mkdir",
    "rename": "seen: os.rename (x86-64)",
    "renameat": "os.rename",
    "renameat2": "os.rename (newer glibc, arm64)",
    "unlink": "seen: os.remove (x86-64)",
    "unlinkat": "os.remove, os.rmdir",
    "rmdir": "os.rmdir (x86-64)",
    "ftruncate": "a file rewritten in place",
    # memory
    "brk": "seen: malloc",
    "mmap": "seen: malloc, torch's allocator",
    "munmap": "seen: free",
    "mremap": "realloc of a large block",
    "mprotect": "seen: the dynamic loader, oneDNN's JIT kernels",
    "madvise": "malloc and torch's allocator returning memory",
    # threads (torch's OpenMP pool, a student's ThreadPoolExecutor); clone is checked below
    "futex": "seen: every lock and condition variable",
    "set_robust_list": "a new thread",
    "rseq": "a new thread (glibc 2.35+)",
    "sched_yield": "libgomp's waiting threads",
    "gettid": "seen: Python threading, torch",
    "exit": "a thread ends",
    "exit_group": "seen: the process ends",
    # time and identity
    "clock_gettime": "seen: time.time, time.perf_counter",
    "clock_getres": "time.get_clock_info",
    "clock_nanosleep": "seen: time.sleep",
    "nanosleep": "time.sleep (older glibc)",
    "gettimeofday": "time.time without the vDSO",
    "getrandom": "seen: os.urandom, random, torch's generator seeds",
    "getpid": "seen: os.getpid",
    "getppid": "os.getppid",
    "getuid": "os.getuid (matplotlib, getpass)",
    "geteuid": "os.geteuid",
    "getgid": "os.getgid",
    "getegid": "os.getegid",
    "uname": "platform.uname, os.uname",
    "sysinfo": "the machine's memory (os.sysconf, torch)",
    "getrusage": "resource.getrusage",
    # signals of its own (the calls that name a target are in SELF_ONLY)
    "rt_sigprocmask": "seen: every new thread",
    "rt_sigaction": "signal handlers of its own (Python, torch)",
    "rt_sigreturn": "returning from a signal handler",
    "sigaltstack": "Python's faulthandler, a new thread",
}

# calls whose first argument is the target process: allowed only when it is this process
SELF_ONLY: dict[str, str] = {
    "kill": "os.kill(os.getpid(), ...), signal.raise_signal",
    "tgkill": "raise() and abort(), signal.pthread_kill: its thread group must be this process",
    "rt_sigqueueinfo": "sigqueue to itself",
    "rt_tgsigqueueinfo": "sigqueue to one of its threads",
}

# calls whose first argument is a pid where 0 means "this process": allowed for 0 or itself
SELF_OR_ZERO: dict[str, str] = {
    "prlimit64": "resource.getrlimit (and lowering its own limits)",
    "sched_getaffinity": "os.sched_getaffinity, libgomp counting the CPUs",
}

# prctl options (its first argument) that may be used: not PR_SET_DUMPABLE, PR_SET_PDEATHSIG,
# PR_SET_PTRACER, PR_SET_SECCOMP...
PRCTL_OPTIONS: dict[int, str] = {
    15: "PR_SET_NAME: torch and libgomp name their threads",
    16: "PR_GET_NAME",
    0x53564D41: "PR_SET_VMA: glibc names its malloc arenas",
}

# fcntl commands (its second argument) that may be used: not F_SETOWN, F_SETOWN_EX, F_SETSIG
# (they make the kernel signal another process when a descriptor is ready), leases, F_NOTIFY
FCNTL_COMMANDS: dict[int, str] = {
    1: "F_GETFD: os.get_inheritable",
    2: "F_SETFD: os.set_inheritable",
    3: "F_GETFL: os.get_blocking",
    4: "F_SETFL: os.set_blocking",
    1030: "F_DUPFD_CLOEXEC: os.dup",
}

# ioctl requests (its second argument) that may be used
IOCTL_REQUESTS: dict[int, str] = {
    0x5401: "seen: TCGETS, isatty() on the standard streams",
    0x5413: "seen: TIOCGWINSZ, the terminal's size (tqdm, shutil.get_terminal_size)",
}

CLONE_THREAD = 0x00010000
# flags a thread may not carry: the namespace flags and CLONE_PARENT / CLONE_VFORK-style tricks
_CLONE_FORBIDDEN = (
    0x00008000  # CLONE_PARENT
    | 0x00020000  # CLONE_NEWNS
    | 0x02000000  # CLONE_NEWCGROUP
    | 0x04000000  # CLONE_NEWUTS
    | 0x08000000  # CLONE_NEWIPC
    | 0x10000000  # CLONE_NEWUSER
    | 0x20000000  # CLONE_NEWPID
    | 0x40000000  # CLONE_NEWNET
    | 0x00001000  # CLONE_PIDFD
)
ENOSYS_CALLS = ("clone3",)  # the C library then falls back to clone (checked above)

_PR_SET_DUMPABLE = 4


# --------------------------------------------------------------------------- building it
@functools.lru_cache(maxsize=None)
def supported() -> tuple[bool, str]:
    """(True, "") where the filter can be built here (Linux with libseccomp), else (False, why
    not)."""
    if not sys.platform.startswith("linux"):
        return False, f"no seccomp on {sys.platform}"
    try:
        import pyseccomp  # noqa: F401 - a ctypes binding to the system's libseccomp.so.2
    except ImportError as exc:
        return False, f"pyseccomp is not installed ({exc}; pip install pyseccomp)"
    except (OSError, RuntimeError) as exc:
        return False, f"libseccomp is missing ({exc}; Debian/Ubuntu: apt-get install libseccomp2)"
    return True, ""


def _resolve(name: str) -> int | None:
    """The native number of ``name`` (None where this machine has no such call)."""
    import pyseccomp as sc

    nr = sc.resolve_syscall(sc.Arch.NATIVE, name)
    return nr if nr >= 0 else None


def allowed_names() -> set[str]:
    """Every call the filter lets through, with or without conditions (native names)."""
    return set(ALLOWED) | set(SELF_ONLY) | set(SELF_OR_ZERO) | {"clone", "prctl", "ioctl", "fcntl"}


def build(own_pid: int, default_errno: int = errno.EPERM):
    """The filter (a ``pyseccomp.SyscallFilter``, not loaded) for the process ``own_pid``."""
    import pyseccomp as sc

    f = sc.SyscallFilter(sc.ERRNO(default_errno))
    f.set_attr(sc.Attr.ACT_BADARCH, sc.KILL_PROCESS)  # another ABI: killed
    f.set_attr(sc.Attr.CTL_TSYNC, 1)  # every thread of the process
    f.set_attr(sc.Attr.CTL_NNP, 1)
    pid = own_pid & 0xFFFFFFFF

    def rule(action: int, name: str, *args) -> None:
        if _resolve(name) is not None:
            f.add_rule(action, name, *args)

    for name in ALLOWED:
        rule(sc.ALLOW, name)
    for name in SELF_ONLY:
        rule(sc.ALLOW, name, sc.Arg(0, sc.EQ, pid))
    for name in SELF_OR_ZERO:
        rule(sc.ALLOW, name, sc.Arg(0, sc.EQ, 0))
        rule(sc.ALLOW, name, sc.Arg(0, sc.EQ, pid))
    rule(sc.ALLOW, "clone", sc.Arg(0, sc.MASKED_EQ, CLONE_THREAD | _CLONE_FORBIDDEN, CLONE_THREAD))
    for option in PRCTL_OPTIONS:
        rule(sc.ALLOW, "prctl", sc.Arg(0, sc.EQ, option))
    for command in FCNTL_COMMANDS:
        rule(sc.ALLOW, "fcntl", sc.Arg(1, sc.MASKED_EQ, 0xFFFFFFFF, command))
    for request in IOCTL_REQUESTS:
        rule(sc.ALLOW, "ioctl", sc.Arg(1, sc.MASKED_EQ, 0xFFFFFFFF, request))
    for name in ENOSYS_CALLS:
        rule(sc.ERRNO(errno.ENOSYS), name)
    return f


def confine() -> bool:
    """Install the allow-list on this process (all its threads, for good); False where
    seccomp is not supported here (see ``supported``)."""
    if not supported()[0]:
        return False
    build(os.getpid()).load()
    return True


def not_dumpable() -> bool:
    """``prctl(PR_SET_DUMPABLE, 0)`` on this process (Linux): its ``/proc`` files and memory
    are then closed to other processes of the same user; False where not Linux."""
    if not sys.platform.startswith("linux"):
        return False
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_DUMPABLE, 0) failed")
    return True
