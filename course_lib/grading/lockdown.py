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

``ALLOWED`` was measured, not guessed: ``tools/syscall_survey.py`` grades every solution and
every untouched exercise notebook under strace and lists the calls the children make after the
point where ``confine`` runs (everything torch, numpy, matplotlib, Python and the checks
needed); each entry says who needs it. A call missing from the table shows as an EPERM in the
student's process (a failing check or a crash), never as a hole.

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
# name -> who needs it. Measured with tools/syscall_survey.py (see the module docstring).
ALLOWED: dict[str, str] = {
    # reading and writing what is open; the pipe to the zygote
    "read": "Python, every file and the pipe",
    "write": "Python, every file and the pipe to the zygote",
    "readv": "glibc stdio",
    "writev": "glibc stdio",
    "pread64": "numpy/torch loading files, zipfile",
    "pwrite64": "torch.save",
    "lseek": "Python file objects",
    "close": "Python",
    "close_range": "os.closerange",
    "dup": "Python, contextlib.redirect",
    "dup2": "Python (os.dup2)",
    "dup3": "Python (os.dup2 with inheritable=False)",
    "pipe2": "os.pipe (a pipe inside the process itself)",
    "poll": "select.poll, subprocess-free waits",
    "ppoll": "glibc poll",
    "select": "select.select",
    "pselect6": "glibc select",
    "flock": "matplotlib's font cache lock",
    "fadvise64": "glibc posix_fadvise",
    "ftruncate": "file.truncate, torch.save",
    "fsync": "os.fsync",
    "fdatasync": "os.fdatasync",
    # the file system (the sandbox's own: read-only system files, the scratch tmpfs)
    "open": "glibc open (x86-64)",
    "openat": "every open",
    "stat": "os.stat (x86-64)",
    "fstat": "Python, glibc",
    "lstat": "os.lstat (x86-64)",
    "newfstatat": "os.stat",
    "statx": "glibc stat",
    "statfs": "os.statvfs, glibc",
    "fstatfs": "glibc, torch's shared memory checks",
    "access": "os.access (x86-64)",
    "faccessat": "os.access",
    "faccessat2": "glibc access with flags",
    "readlink": "os.readlink (x86-64), glibc realpath",
    "readlinkat": "os.readlink",
    "getdents64": "os.listdir, os.scandir",
    "getcwd": "os.getcwd",
    "chdir": "os.chdir",
    "fchdir": "os.chdir on a descriptor",
    "mkdir": "os.mkdir (x86-64)",
    "mkdirat": "os.mkdir",
    "rmdir": "os.rmdir (x86-64)",
    "unlink": "os.remove (x86-64)",
    "unlinkat": "os.remove, tempfile",
    "rename": "os.rename (x86-64)",
    "renameat": "os.rename",
    "renameat2": "os.rename",
    "chmod": "os.chmod (x86-64)",
    "fchmod": "os.chmod on a descriptor",
    "fchmodat": "os.chmod",
    "utimensat": "os.utime",
    "umask": "os.umask, tempfile",
    "truncate": "os.truncate",
    "sendfile": "shutil.copyfile",
    "copy_file_range": "shutil.copyfile",
    # memory
    "brk": "malloc",
    "mmap": "malloc, torch's allocator, loading a library",
    "munmap": "malloc",
    "mremap": "realloc of large blocks",
    "mprotect": "the dynamic loader, oneDNN's JIT kernels",
    "madvise": "malloc, torch's allocator",
    "get_mempolicy": "libgomp, oneDNN (NUMA queries)",
    "membarrier": "the dynamic loader, some runtimes",
    # threads (torch's OpenMP pool); clone itself is argument-checked below
    "futex": "every lock and condition variable",
    "set_robust_list": "every new thread",
    "set_tid_address": "every new thread",
    "rseq": "every new thread (glibc 2.35+)",
    "sched_yield": "libgomp spinning",
    "sched_get_priority_max": "libgomp (its argument is a policy, not a pid)",
    "sched_get_priority_min": "libgomp (as above)",
    "gettid": "Python threading, torch",
    "arch_prctl": "a new thread's TLS (x86-64)",
    # time, identity, limits of itself
    "clock_gettime": "time.time, time.monotonic",
    "clock_getres": "time.get_clock_info",
    "clock_nanosleep": "time.sleep",
    "nanosleep": "time.sleep (older glibc)",
    "gettimeofday": "time.time (older glibc)",
    "time": "time()",
    "times": "os.times",
    "getrusage": "resource.getrusage",
    "getpid": "os.getpid",
    "getppid": "os.getppid",
    "getuid": "os.getuid, getpass, matplotlib",
    "geteuid": "os.geteuid",
    "getgid": "os.getgid",
    "getegid": "os.getegid",
    "getgroups": "os.getgroups",
    "getresuid": "glibc",
    "getresgid": "glibc",
    "getpgrp": "os.getpgrp",
    "getrlimit": "resource.getrlimit (older glibc)",
    "uname": "platform.uname, os.uname",
    "sysinfo": "glibc get_phys_pages, torch",
    "getrandom": "os.urandom, random, torch's generator seeds",
    "getcpu": "sched_getcpu: torch, libgomp",
    # signals of itself (the routes that name a target are in SELF_ONLY)
    "rt_sigaction": "signal.signal",
    "rt_sigprocmask": "every thread, signal.pthread_sigmask",
    "rt_sigreturn": "returning from a signal handler",
    "rt_sigsuspend": "signal.sigsuspend-like waits",
    "rt_sigtimedwait": "signal.sigtimedwait",
    "sigaltstack": "Python's faulthandler",
    "alarm": "signal.alarm (a signal to itself)",
    "setitimer": "signal.setitimer (a signal to itself)",
    "getitimer": "signal.getitimer",
    "pause": "signal.pause",
    # waiting primitives inside the process
    "eventfd2": "libraries that wake their own threads",
    "epoll_create1": "selectors (a student's asyncio)",
    "epoll_ctl": "selectors",
    "epoll_wait": "selectors (x86-64)",
    "epoll_pwait": "selectors",
    # ending
    "exit": "a thread ends",
    "exit_group": "the process ends",
}

# calls whose first argument is the target process: allowed only when it is this process
SELF_ONLY: dict[str, str] = {
    "kill": "os.kill(os.getpid(), ...), signal.raise_signal",
    "tgkill": "raise(), signal.pthread_kill (its thread group must be this process)",
    "rt_sigqueueinfo": "sigqueue to itself",
    "rt_tgsigqueueinfo": "sigqueue to one of its threads",
}

# calls whose first argument is a pid where 0 means "this process": allowed for 0 or itself
SELF_OR_ZERO: dict[str, str] = {
    "prlimit64": "resource.getrlimit/setrlimit (lowering its own limits)",
    "sched_getaffinity": "os.sched_getaffinity, torch and libgomp count the CPUs",
    "sched_setaffinity": "libgomp with OMP_PROC_BIND",
    "sched_getparam": "libgomp",
    "sched_getscheduler": "libgomp",
    "sched_setscheduler": "libgomp",
}

# prctl options (its first argument) that may be used
PRCTL_OPTIONS: dict[int, str] = {
    15: "PR_SET_NAME: torch and libgomp name their threads",
    16: "PR_GET_NAME",
    3: "PR_GET_DUMPABLE",
    21: "PR_GET_SECCOMP",
    0x53564D41: "PR_SET_VMA: glibc names its malloc arenas",
}

# fcntl commands (its second argument) that may be used: not F_SETOWN, F_SETOWN_EX, F_SETSIG
# (they make the kernel signal another process when a descriptor is ready), leases, F_NOTIFY
FCNTL_COMMANDS: dict[int, str] = {
    0: "F_DUPFD",
    1: "F_GETFD: os.get_inheritable",
    2: "F_SETFD: os.set_inheritable",
    3: "F_GETFL: os.get_blocking",
    4: "F_SETFL: os.set_blocking",
    5: "F_GETLK: fcntl.lockf",
    6: "F_SETLK: fcntl.lockf",
    7: "F_SETLKW: fcntl.lockf",
    9: "F_GETOWN",
    36: "F_OFD_GETLK",
    37: "F_OFD_SETLK",
    38: "F_OFD_SETLKW",
    1030: "F_DUPFD_CLOEXEC: os.dup",
    1031: "F_SETPIPE_SZ",
    1032: "F_GETPIPE_SZ",
}

# ioctl requests (its second argument) that may be used
IOCTL_REQUESTS: dict[int, str] = {
    0x5401: "TCGETS: isatty() on the standard streams",
    0x5413: "TIOCGWINSZ: the terminal's size (shutil.get_terminal_size)",
    0x541B: "FIONREAD: bytes ready on a pipe",
    0x5421: "FIONBIO: a non-blocking descriptor",
    0x5451: "FIOCLEX: close-on-exec",
    0x5450: "FIONCLEX",
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
