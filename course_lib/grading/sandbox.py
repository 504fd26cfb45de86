"""The OS sandbox of one submission: bubblewrap (``bwrap``), on Linux.

Each submission's student process (``student``: the zygote and its per-exercise children) runs
in a bubblewrap sandbox of its own, started for that submission and stopped after it (the
grader may start it while the previous submission is graded, see ``runner``; it reads no plan
until it is handed one):

- the filesystem is a fresh, read-only root holding only what Python needs: the system folders
  (``/usr``, ``/lib``...), a few files of ``/etc``, the Python installation and its
  site-packages, and the ``course_lib`` package; nothing else of the machine is visible (not
  the other submissions of a batch, not the home folders); ``/proc`` of its own PID namespace
  and a minimal, read-only ``/dev``;
- the one writable place is the scratch folder ``/grading``: a size-limited tmpfs that holds
  ``HOME`` and ``TMPDIR`` and vanishes with the sandbox (``--size``: filling it only fills
  it); nothing writable is on ``sys.path`` (``PYTHONSAFEPATH=1``: not the working folder);
- its own mount, PID, IPC, UTS, network (loopback only) and user namespaces
  (``--unshare-all``), so no process, file, socket, System V object or memory of one
  submission can meet the next; ``--die-with-parent``, ``--new-session``, no capabilities,
  ``--clearenv`` plus the few variables grading needs;
- its two fresh pipes (the plan in, the messages out) are the only way in or out; the grader
  kills the sandbox's process group when the submission is done, which ends the PID namespace
  and everything in it.

Inside, the zygote is non-dumpable and each child runs under the seccomp allow-list
(``lockdown``). ``command`` builds the bwrap command line (a pure function, tested without
bwrap); ``probe`` says once per process whether bwrap works here (present, and allowed to
create namespaces) and whether the allow-list can be built (libseccomp).
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import site
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

__all__ = ["SCRATCH", "SCRATCH_MB", "Sandbox", "probe", "command", "readonly_paths"]

SCRATCH = "/grading"  # the scratch folder inside the sandbox (the zygote's working folder)
SCRATCH_MB = 256  # size of the scratch tmpfs
SYSTEM_DIRS = (
    "/usr",
    "/bin",
    "/sbin",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/sys/devices/system/cpu",
)
ETC_FILES = (
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/nsswitch.conf",
    "/etc/passwd",
    "/etc/group",
    "/etc/hosts",
    "/etc/localtime",
    "/etc/alternatives",
    "/etc/fonts",
)


@dataclass(frozen=True)
class Sandbox:
    """How to sandbox: the bwrap executable, the read-only paths and the scratch size."""

    bwrap: str
    readonly: tuple[str, ...]
    scratch_mb: int = SCRATCH_MB


def readonly_paths() -> tuple[str, ...]:
    """What the sandbox shows (read-only): system folders, Python, its packages, course_lib.
    Paths inside another listed path are dropped; missing ones are skipped."""
    import course_lib

    want = [
        *SYSTEM_DIRS,
        *ETC_FILES,
        sys.prefix,
        sys.base_prefix,
        sys.exec_prefix,
        os.path.dirname(os.path.realpath(sys.executable)),
        *site.getsitepackages(),
        str(Path(course_lib.__file__).resolve().parent),
    ]
    user = site.getusersitepackages() if site.ENABLE_USER_SITE else None
    if user:
        want.append(user)
    out: list[str] = []
    for p in want:
        p = os.path.normpath(p)
        if p and os.path.lexists(p) and p not in out:
            out.append(p)
    # keep the outermost: /a and /a/b -> /a (a symlink such as /bin -> usr/bin stays as it is)
    return tuple(
        p for p in out if not any(q != p and p.startswith(q.rstrip("/") + "/") for q in out)
    )


def _bind_args(path: str) -> list[str]:
    if os.path.islink(path) and path in SYSTEM_DIRS:  # merged /usr: /bin -> usr/bin
        return ["--symlink", os.readlink(path), path]
    return ["--ro-bind", path, path]


def command(sb: Sandbox, argv: list[str], files: dict[str, int], env: dict[str, str]) -> list[str]:
    """The bwrap command line running ``argv`` in the sandbox. ``files`` maps a file name in the
    scratch folder to an open descriptor its content is copied from; ``env`` is the complete
    environment inside. Descriptors the caller passes (``pass_fds``) stay open inside."""
    cmd = [sb.bwrap, "--unshare-all", "--as-pid-1", "--die-with-parent", "--new-session"]
    cmd += ["--cap-drop", "ALL"]
    size = ["--size", str(sb.scratch_mb * 1024 * 1024)]
    # /tmp is the scratch folder's tmp/, unless Python or course_lib live under /tmp (a clone
    # or a virtual environment there): then /tmp is a tmpfs of its own, mounted before the
    # read-only binds that go inside it.
    under_tmp = any(p == "/tmp" or p.startswith("/tmp/") for p in sb.readonly)
    if under_tmp:
        cmd += [*size, "--tmpfs", "/tmp"]
    for p in sb.readonly:
        cmd += _bind_args(p)
    cmd += [
        "--proc",
        "/proc",
        "--dev",
        "/dev",
        *size,
        "--tmpfs",
        SCRATCH,
        "--dir",
        f"{SCRATCH}/home",
        "--dir",
        f"{SCRATCH}/tmp",
    ]
    if not under_tmp:
        cmd += ["--symlink", f"{SCRATCH}/tmp", "/tmp"]
    for name, fd in files.items():
        if "/" in name:
            raise ValueError(f"sandbox files are plain names in the scratch folder, got {name!r}.")
        cmd += ["--file", str(fd), f"{SCRATCH}/{name}"]
    cmd += ["--remount-ro", "/dev", "--remount-ro", "/"]
    if under_tmp:  # its own tmpfs: read-only too (the folders made for the binds are on sys.path)
        cmd += ["--remount-ro", "/tmp"]
    cmd += ["--chdir", SCRATCH, "--clearenv"]
    for k, v in env.items():
        cmd += ["--setenv", k, v]
    return cmd + ["--", *argv]


#: The variables that choose which CPU kernels PyTorch and its libraries run: ATen's vectorised
#: paths, oneDNN's and MKL's instruction sets. Each path rounds float32 differently, even in
#: ``torch.randn``. The student's process and the checker each compute a check's inputs (a
#: seeded ``randn``) and the checker compares floats, so both must take the same path: what the
#: grader's environment says here passes into the sandbox (the checker runs with the grader's
#: environment), each value only in the form these variables take (a word such as ``avx2`` or
#: ``AVX2``). Without this, a grader run under ``ATEN_CPU_CAPABILITY=default`` failed correct
#: solutions ("the input logits were modified in place": the two processes drew other inputs).
CPU_PATH_VARIABLES = ("ATEN_CPU_CAPABILITY", "ONEDNN_MAX_CPU_ISA", "MKL_ENABLE_INSTRUCTIONS")


def inner_env(threads: int | None) -> dict[str, str]:
    """The environment inside the sandbox (everything else is cleared). PYTHONPATH names the
    folder of the course_lib the grader itself runs (bound read-only), so the kernel imports
    that one whatever way it was installed. From the grader's environment pass through: OpenMP's
    wait policy (where the grader shares the cores with other work it says PASSIVE, and a
    student's spinning threads would otherwise take the cores the rest needs), and the CPU path
    (``CPU_PATH_VARIABLES``: the checker's floats must be the student process's)."""
    import course_lib

    env = {
        "PYTHONPATH": str(Path(course_lib.__file__).resolve().parents[1]),
        "PATH": os.pathsep.join(
            [os.path.dirname(sys.executable), "/usr/local/bin", "/usr/bin", "/bin"]
        ),
        "HOME": f"{SCRATCH}/home",
        "TMPDIR": f"{SCRATCH}/tmp",
        "LANG": "C.UTF-8",
        "COURSE_SCRATCH": SCRATCH,
        "PYTHONHASHSEED": "0",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONNOUSERSITE": "1",
        "PYTHONSAFEPATH": "1",  # not the working folder (the writable scratch) on sys.path
        "MPLBACKEND": "Agg",
        "MPLCONFIGDIR": f"{SCRATCH}/home/.mpl",
        "JUPYTER_PLATFORM_DIRS": "1",
        "PYDEVD_DISABLE_FILE_VALIDATION": "1",
    }
    if threads:
        env["OMP_NUM_THREADS"] = env["MKL_NUM_THREADS"] = str(threads)
    if os.environ.get("OMP_WAIT_POLICY", "").upper() in ("ACTIVE", "PASSIVE"):
        env["OMP_WAIT_POLICY"] = os.environ["OMP_WAIT_POLICY"].upper()
    for name in CPU_PATH_VARIABLES:
        value = os.environ.get(name, "")
        if re.fullmatch(r"[A-Za-z0-9_]{1,32}", value):
            env[name] = value
    return env


@functools.lru_cache(maxsize=None)
def probe() -> tuple[Sandbox | None, str]:
    """(a Sandbox, "") where bwrap works here, else (None, why not): not Linux, no bwrap on
    PATH, or bwrap present but not allowed to create namespaces (e.g. a container, or user
    namespaces disabled)."""
    if sys.platform != "linux":
        return None, f"no OS sandbox on {sys.platform} (bubblewrap is Linux only)"
    exe = shutil.which("bwrap")
    if exe is None:
        return (
            None,
            "bubblewrap (bwrap) is not installed (Debian/Ubuntu: apt-get install bubblewrap)",
        )
    from . import lockdown

    ok, why = lockdown.supported()
    if not ok:
        return None, f"the seccomp allow-list cannot be built here: {why}"
    sb = Sandbox(exe, readonly_paths())
    argv = [sys.executable, "-c", "import sys; sys.exit(0)"]
    try:
        proc = subprocess.run(
            command(sb, argv, {}, inner_env(None)),
            capture_output=True,
            text=True,
            timeout=60,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, f"bwrap could not start ({exc})"
    if proc.returncode != 0:
        why = (proc.stderr.strip().splitlines() or ["no message"])[-1]
        return None, f"bwrap is installed but cannot create a sandbox here ({why})"
    return sb, ""
