"""No new processes from the grading kernel (stdlib only; Linux x86-64 and arm64).

The grader's prelude cell calls ``no_new_processes()`` in the kernel, after the trusted setup
and before any student code: a seccomp filter (installed on every thread of the kernel, kept by
every thread it starts later, and impossible to remove) makes ``fork``, ``vfork`` and a
process-creating ``clone`` fail with EPERM; threads (``clone`` with ``CLONE_THREAD``) still
work, so torch and ipykernel run as usual. A fork bomb then fails at its first fork instead of
filling the machine: no privileges, cgroups or per-user process limits needed (``RLIMIT_NPROC``
does not apply to root, and for an ordinary user it counts all of that user's processes).
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
import struct

__all__ = ["no_new_processes", "confine", "supported"]

# syscall numbers and audit architectures: linux/audit.h, asm/unistd_64.h, asm-generic/unistd.h
_ARCH = {
    "x86_64": {
        "audit": 0xC000003E,
        "seccomp": 317,
        "deny": (57, 58),
        "clone": 56,
        "clone3": 435,
        "others": (
            101,
            200,
            310,
            311,
            29,
            64,
            68,
        ),  # ptrace, tkill, process_vm_*, shmget, semget, msgget
        "signal": (62, 234),
    },  # kill, tgkill
    "aarch64": {
        "audit": 0xC00000B7,
        "seccomp": 277,
        "deny": (),
        "clone": 220,
        "clone3": 435,
        "others": (117, 130, 270, 271, 194, 190, 186),
        "signal": (129, 131),
    },
}
_CLONE_THREAD = 0x00010000
_RET_ALLOW, _RET_ERRNO = 0x7FFF0000, 0x00050000
_LD_W_ABS, _JEQ_K, _JSET_K, _RET_K = 0x20, 0x15, 0x45, 0x06
_PR_SET_NO_NEW_PRIVS, _SECCOMP_SET_MODE_FILTER, _SECCOMP_FILTER_FLAG_TSYNC = 38, 1, 1


def supported() -> bool:
    return os.name == "posix" and platform.system() == "Linux" and platform.machine() in _ARCH


def _program(arch: dict, own_pid: int | None = None) -> bytes:
    """The BPF program: offsets into struct seccomp_data are nr 0, arch 4, args[0] 16. With
    ``own_pid``, also no tracing of other processes and no signals to them (``kill`` and
    ``tgkill`` only to itself, no ``tkill``)."""
    ins: list[tuple[int, int, int, int]] = []

    def op(code, k, jt=0, jf=0):
        ins.append((code, jt, jf, k))

    deny, allow = _RET_ERRNO | errno.EPERM, _RET_ALLOW
    op(_LD_W_ABS, 4)
    op(_JEQ_K, arch["audit"], 1, 0)
    op(_RET_K, allow)  # another ABI (x32, compat): left alone
    op(_LD_W_ABS, 0)
    for nr in arch["deny"]:  # fork, vfork
        op(_JEQ_K, nr, 0, 1)
        op(_RET_K, deny)
    op(_JEQ_K, arch["clone3"], 0, 1)  # clone3: ENOSYS, so libc falls back to clone (checked below)
    op(_RET_K, _RET_ERRNO | errno.ENOSYS)
    op(_JEQ_K, arch["clone"], 0, 4)
    op(_LD_W_ABS, 16)  # clone's flags (low 32 bits)
    op(_JSET_K, _CLONE_THREAD, 0, 1)
    op(_RET_K, allow)  # a thread
    op(_RET_K, deny)  # a process (fork through clone, posix_spawn)
    if own_pid is not None:
        for nr in arch["others"]:
            op(_JEQ_K, nr, 0, 1)
            op(_RET_K, deny)
        for nr in arch["signal"]:  # the target process is args[0]: allowed only when it is this one
            op(_JEQ_K, nr, 0, 4)
            op(_LD_W_ABS, 16)
            op(_JEQ_K, own_pid & 0xFFFFFFFF, 0, 1)
            op(_RET_K, allow)
            op(_RET_K, deny)
    op(_RET_K, allow)  # clone3 fell through above; everything else
    return b"".join(struct.pack("HBBI", *i) for i in ins)


def no_new_processes() -> bool:
    """Install the filter on every thread of this process; False where unsupported (macOS,
    Windows, another architecture), True once installed."""
    return _install(None)


def confine() -> bool:
    """``no_new_processes`` and, in the same filter, no ``ptrace``/``process_vm_*``, no signals
    to any other process (a grading child cannot stop or inspect the zygote that forked it),
    and no System V IPC objects (they would outlive the child, in a sandbox that serves the
    next submission)."""
    return _install(os.getpid())


def _install(own_pid: int | None) -> bool:
    if not supported():
        return False
    arch = _ARCH[platform.machine()]
    prog = _program(arch, own_pid)
    libc = ctypes.CDLL(None, use_errno=True)
    buf = ctypes.create_string_buffer(prog, len(prog))

    class _Fprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    fprog = _Fprog(len(prog) // 8, ctypes.addressof(buf))
    if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS) failed")
    if (
        libc.syscall(
            arch["seccomp"],
            _SECCOMP_SET_MODE_FILTER,
            _SECCOMP_FILTER_FLAG_TSYNC,
            ctypes.byref(fprog),
        )
        != 0
    ):
        raise OSError(ctypes.get_errno(), "seccomp(SECCOMP_SET_MODE_FILTER) failed")
    return True
