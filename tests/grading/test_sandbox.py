"""Grading a class safely: the OS sandbox (bubblewrap), the no-new-processes lock-down and the
run-time guard of forbidden functions.

Fast: the bwrap command line, the TorchFunctionMode guard, the seccomp lock-down (in a
subprocess), the verdict format, the cells the grader adds, the sandbox policy of the CLI.
Slow: hostile submissions graded with ``course-grade --batch`` in the sandbox; each exercise
gets the right points and canary files outside the grading folder are unchanged afterwards.
"""

from __future__ import annotations

import csv
import json
import operator
import os
import shutil
import socket
import subprocess
import sys
import threading
import uuid
from pathlib import Path

import nbformat
import pytest
import torch
import torch.nn.functional as F
from hostile_support import NETWORK, NEW_PROCESSES, SIGNALS, TRACE, unseen

from course_lib.grading import grade as grading
from course_lib.grading import guard
from course_lib.grading import sandbox as sandboxing
from course_lib.grading.checks import check_close, check_raises, randn
from course_lib.grading.verdict import format_verdict, parse_line, read_verdict
from tools.exercises import SOLUTIONS, load_spec, make_submission

HAVE_BWRAP = sandboxing.probe()[0] is not None
needs_bwrap = pytest.mark.skipif(
    not HAVE_BWRAP,
    reason=f"no bubblewrap sandbox here: {sandboxing.probe()[1]} "
    "(CI installs it: apt-get install bubblewrap)",
)


# --------------------------------------------------------------------------- the command line
def _sb():
    return sandboxing.Sandbox("/usr/bin/bwrap", ("/usr", "/bin", "/opt/py"), scratch_mb=64)


def test_bwrap_command_isolates_and_binds_only_read_only():
    cmd = sandboxing.command(
        _sb(), ["python", "-m", "pytest"], {"graded.ipynb": 7}, {"HOME": "/grading/home"}
    )
    assert cmd[0] == "/usr/bin/bwrap" and cmd[-3:] == ["python", "-m", "pytest"] and cmd[-4] == "--"
    for flag in ("--unshare-all", "--die-with-parent", "--new-session", "--clearenv"):
        assert flag in cmd
    # the sandbox's first process is the command itself (no bwrap init inside: it would be
    # a dumpable process every child could open through /proc)
    assert "--as-pid-1" in cmd
    assert cmd[cmd.index("--cap-drop") + 1] == "ALL"
    # every host path is bound read-only; nothing of the host is writable
    assert "--bind" not in cmd and "--dev-bind" not in cmd
    binds = [cmd[i + 1] for i, a in enumerate(cmd) if a == "--ro-bind"]
    assert set(binds) <= {"/usr", "/bin", "/opt/py"}
    # the scratch folder: a tmpfs of the given size, the one writable place, files copied in from
    # descriptors
    i = cmd.index("--tmpfs")
    assert cmd[i + 1] == sandboxing.SCRATCH and cmd[i - 2 : i] == ["--size", str(64 * 1024 * 1024)]
    assert cmd[cmd.index("--file") + 1 : cmd.index("--file") + 3] == [
        "7",
        f"{sandboxing.SCRATCH}/graded.ipynb",
    ]
    assert cmd[cmd.index("--chdir") + 1] == sandboxing.SCRATCH
    ro = [cmd[i + 1] for i, a in enumerate(cmd) if a == "--remount-ro"]
    assert ro == ["/dev", "/"]
    assert cmd[cmd.index("--setenv") + 1 : cmd.index("--setenv") + 3] == ["HOME", "/grading/home"]
    with pytest.raises(ValueError, match="plain names"):
        sandboxing.command(_sb(), ["true"], {"../x": 3}, {})


def test_a_clone_under_tmp_gets_a_tmpfs_at_tmp_before_its_binds():
    """A repository or virtual environment under /tmp (a CI clone, a worktree) is bound inside
    a tmpfs mounted at /tmp first; /tmp cannot then also be the scratch folder's symlink
    (bwrap: "Can't make symlink at /tmp: File exists")."""
    plain = sandboxing.command(_sb(), ["true"], {}, {})
    assert plain[plain.index("--symlink", plain.index(sandboxing.SCRATCH)) + 2] == "/tmp"
    sb = sandboxing.Sandbox(
        "/usr/bin/bwrap", ("/usr", "/tmp/clone/.venv", "/tmp/clone/course_lib"), scratch_mb=64
    )
    cmd = sandboxing.command(sb, ["true"], {}, {})
    tmpfs = [cmd[i + 1] for i, a in enumerate(cmd) if a == "--tmpfs"]
    assert tmpfs == ["/tmp", sandboxing.SCRATCH]
    assert cmd.index("--tmpfs") < cmd.index("/tmp/clone/.venv")  # mounted first, then bound into
    ro = [cmd[i + 1] for i, a in enumerate(cmd) if a == "--remount-ro"]
    assert ro == ["/dev", "/", "/tmp"]  # the folders bwrap made there (on sys.path): read-only
    assert not any(a == "--symlink" and cmd[i + 2] == "/tmp" for i, a in enumerate(cmd))


def test_readonly_paths_keep_the_outermost_and_hide_the_repository():
    paths = sandboxing.readonly_paths()
    assert sys.base_prefix in paths or any(sys.base_prefix.startswith(p + "/") for p in paths)
    for p in paths:
        assert not any(q != p and p.startswith(q + "/") for q in paths), (p, paths)
    repo = str(SOLUTIONS.parent)
    assert (
        repo not in paths and str(SOLUTIONS) not in paths
    )  # solutions, tests, submissions stay outside


def test_inner_environment_is_small_and_points_into_the_scratch_folder():
    env = sandboxing.inner_env(2)
    assert env["HOME"].startswith(sandboxing.SCRATCH) and env["TMPDIR"].startswith(
        sandboxing.SCRATCH
    )
    assert env["OMP_NUM_THREADS"] == "2"
    assert env["PYTHONSAFEPATH"] == "1"  # the working folder (writable scratch) is not on sys.path
    import course_lib  # the kernel imports the very course_lib the grader runs (bound read-only)

    assert Path(env["PYTHONPATH"]) / "course_lib" == Path(course_lib.__file__).resolve().parent
    assert not any(
        k in env
        for k in ("COURSE_LIB_SOURCE", "PYTEST_ADDOPTS", "SSH_AUTH_SOCK", "AWS_ACCESS_KEY_ID")
    )


@pytest.mark.parametrize("policy", ["passive", "ACTIVE", "", "spin; rm -rf /"])
def test_openmps_wait_policy_passes_through_and_nothing_else(monkeypatch, policy):
    """A grader that shares the cores says PASSIVE (.ci/run), and the student's threads must not
    spin on the cores the rest needs; any other value stays outside."""
    monkeypatch.setenv("OMP_WAIT_POLICY", policy)
    env = sandboxing.inner_env(2)
    if policy.upper() in ("ACTIVE", "PASSIVE"):
        assert env["OMP_WAIT_POLICY"] == policy.upper()
    else:
        assert "OMP_WAIT_POLICY" not in env


@pytest.mark.parametrize("name", sandboxing.CPU_PATH_VARIABLES)
@pytest.mark.parametrize("value", ["default", "AVX2", "", "avx2; rm -rf /", "x" * 40])
def test_the_cpu_path_passes_through_and_nothing_else(monkeypatch, name, value):
    """The checker runs with the grader's environment: the sandbox must take the CPU path it
    takes (a seeded randn draws other numbers on another path); any other value stays outside."""
    for other in sandboxing.CPU_PATH_VARIABLES:
        monkeypatch.delenv(other, raising=False)
    monkeypatch.setenv(name, value)
    env = sandboxing.inner_env(2)
    if value in ("default", "AVX2"):
        assert env[name] == value
    else:
        assert name not in env
    assert not set(sandboxing.CPU_PATH_VARIABLES) - {name} & set(env)


@needs_bwrap
@pytest.mark.slow  # two sandboxes and two fresh Pythons (~10 s)
def test_a_seeded_draw_in_the_sandbox_is_the_graders_on_every_cpu_path(tmp_path):
    """What the check's inputs are made of: ``randn`` of the same seed, drawn in the sandbox and
    here, is the same tensor whichever CPU path the grader's environment chooses."""
    code = (
        "import torch, sys; from course_lib.grading.checks import randn; "
        "sys.stdout.write(repr(randn(3, 12, seed=1011).tolist()))"
    )
    sb, _ = sandboxing.probe()
    for cpu in ("default", "avx2"):
        env = {**os.environ, "ATEN_CPU_CAPABILITY": cpu}
        outside = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True
        ).stdout
        env["PATH"] = os.environ.get("PATH", "/usr/bin:/bin")
        inner = subprocess.run(
            sandboxing.command(sb, [sys.executable, "-c", code], {}, _inner_env_under(env)),
            capture_output=True,
            text=True,
            env={"PATH": env["PATH"]},
            check=True,
        ).stdout
        assert inner == outside, cpu


def _inner_env_under(environ: dict[str, str]) -> dict[str, str]:
    """``inner_env`` as a grader whose environment is ``environ`` computes it."""
    saved = dict(os.environ)
    try:
        os.environ.clear()
        os.environ.update(environ)
        return sandboxing.inner_env(1)
    finally:
        os.environ.clear()
        os.environ.update(saved)


@needs_bwrap
def test_nothing_writable_is_on_sys_path_inside_the_sandbox():
    """A file the student's code writes can never be imported in place of a module: every
    sys.path entry in the sandbox is read-only, and the working folder (the writable scratch)
    is not on it (PYTHONSAFEPATH)."""
    code = (
        "import json, os, sys, uuid\nout = {'cwd': os.getcwd(), 'path': sys.path, 'writable': []}\n"
        "for p in sys.path:\n"
        "    d = p or os.getcwd()\n"
        "    if os.path.isdir(d):\n"
        "        try:\n"
        "            f = os.path.join(d, uuid.uuid4().hex + '.py')\n"
        "            open(f, 'w').close(); os.remove(f); out['writable'].append(d)\n"
        "        except OSError:\n"
        "            pass\n"
        "print(json.dumps(out))\n"
    )
    sb, _ = sandboxing.probe()
    cmd = sandboxing.command(sb, [sys.executable, "-c", code], {}, sandboxing.inner_env(1))
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)
    assert got["cwd"] == sandboxing.SCRATCH
    assert got["writable"] == [], got
    assert "" not in got["path"] and sandboxing.SCRATCH not in got["path"], got["path"]


# --------------------------------------------------------------------------- the guard
@pytest.fixture
def forbid():
    yield guard.forbid_calls
    guard.forbid_calls([])


ROUTES = {
    "operator @": lambda a, b: a @ b,
    "getattr": lambda a, b: getattr(torch, "mat" + "mul")(a, b),
    "alias": (lambda mm: lambda a, b: mm(a, b))(torch.matmul),
    "operator.matmul": lambda a, b: operator.matmul(a, b),
    "lambda in a list": lambda a, b: [lambda x, y: x.matmul(y)][0](a, b),
    "method": lambda a, b: a.__matmul__(b),
}


@pytest.mark.parametrize("route", ROUTES)
def test_guard_refuses_a_forbidden_function_by_any_route(route, forbid, capsys):
    a, b = randn(3, 4, seed=1), randn(4, 2, seed=2)
    forbid(["@", "matmul"])
    check_close("product", lambda: ROUTES[route](a, b), torch.matmul(a, b), hint="multiply and sum")
    v = read_verdict(capsys.readouterr().out, "product")
    assert v is not None and not v.passed and "your code called matmul" in v.reason, v


def test_guard_cannot_be_swallowed_and_allows_the_rest(forbid, capsys):
    a, b = randn(3, 4, seed=1), randn(4, 2, seed=2)
    forbid(["@"])

    def sneaky():
        try:
            return a @ b
        except Exception:
            return (a[:, :, None] * b[None]).sum(1)

    check_close("caught", sneaky, a @ b, hint="h")
    check_close("by hand", lambda: (a[:, :, None] * b[None]).sum(1), a @ b, hint="h")
    out = capsys.readouterr().out
    assert not read_verdict(out, "caught").passed and read_verdict(out, "by hand").passed


def test_guard_sees_functionals_modules_optimizers_and_raising_checks(forbid, capsys):
    q = randn(1, 3, 4, seed=3)
    forbid(["scaled_dot_product_attention", "MultiheadAttention", "AdamW", "backward"])
    check_close(
        "sdpa", lambda: getattr(F, "scaled_dot_" + "product_attention")(q, q, q), q, hint="h"
    )
    mha = torch.nn.MultiheadAttention(4, 1, batch_first=True)
    check_close("module", lambda: mha(q, q, q)[0], q, hint="h")
    p = torch.nn.Parameter(torch.zeros(2))

    def step():
        p.grad = torch.ones(2)
        torch.optim.AdamW([p]).step()
        return p

    check_close("optimizer", step, p, hint="h")
    check_raises("raises", lambda: (q.sum() * 1).backward(), ValueError, hint="h")
    out = capsys.readouterr().out
    for name, called in (
        ("sdpa", "scaled_dot_product_attention"),
        ("module", "MultiheadAttention"),
        ("optimizer", "AdamW"),
        ("raises", "backward"),
    ):
        v = read_verdict(out, name)
        assert not v.passed and f"called {called}" in v.reason, (name, v)


def test_guard_off_by_default_and_only_while_the_student_runs(forbid, capsys):
    a = randn(2, 2, seed=4)
    check_close("free", lambda: a @ a, a @ a, hint="h")
    forbid(["@"])
    check_close(
        "reference outside", lambda: (a[:, :, None] * a[None]).sum(1), a @ a, hint="h"
    )  # a @ a: the check's
    out = capsys.readouterr().out
    assert read_verdict(out, "free").passed and read_verdict(out, "reference outside").passed
    with pytest.raises(ValueError):
        guard.forbid_calls([""])


# --------------------------------------------------------------------------- the lock-down
def test_lockdown_blocks_new_processes_but_not_threads():
    code = (
        "import os, subprocess, threading\n"
        "from course_lib.grading.lockdown import confine\n"
        "assert confine()\n"
        "t = threading.Thread(target=lambda: None); t.start(); t.join()\n"
        "for f in (os.fork, lambda: subprocess.run(['true']), lambda: os.posix_spawn('/bin/true', "
        "['true'], {})):\n"
        "    try:\n"
        "        f(); print('started a process')\n"
        "    except PermissionError:\n"
        "        print('refused')\n"
    )
    from course_lib.grading.lockdown import supported

    if not supported()[0]:
        pytest.skip(f"no seccomp allow-list here: {supported()[1]}")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["refused"] * 3


# --------------------------------------------------------------------------- verdicts and cells
def test_verdict_format_round_trips():
    line = format_verdict("a: name", False, "shape (2,), expected (3,)", "use keepdim")
    assert line == "[FAIL] a: name: shape (2,), expected (3,). Hint: use keepdim"
    v = parse_line(line, "a: name")
    assert (v.passed, v.reason, v.hint) == (False, "shape (2,), expected (3,)", "use keepdim")
    assert parse_line(format_verdict("x", True), "x").passed
    assert read_verdict("[PASS] x\n[PASS] x\n", "x").passed is False  # printed twice: not a pass
    assert read_verdict("noise\n", "x") is None
    with pytest.raises(ValueError):
        format_verdict("two\nlines", True)


def test_confine_stops_signals_and_tracing_of_other_processes():
    """A grading child cannot kill or trace the zygote that forked it (nor anything else), but
    can still signal itself (Python and glibc do)."""
    from course_lib.grading.lockdown import supported

    if not supported()[0]:
        pytest.skip(f"no seccomp allow-list here: {supported()[1]}")
    code = (
        "import os, signal, threading\n"
        "from course_lib.grading.lockdown import confine\n"
        "parent = os.getppid()\n"
        "assert confine()\n"
        "for f in (lambda: os.kill(parent, 0), lambda: os.kill(1, 0), lambda: os.kill(0, 0), "
        "os.fork):\n"
        "    try:\n"
        "        f(); print('allowed')\n"
        "    except PermissionError:\n"
        "        print('refused')\n"
        "os.kill(os.getpid(), 0); signal.pthread_kill(threading.get_ident(), 0); print('self ok')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split("\n")[:5] == ["refused"] * 4 + ["self ok"]


# --------------------------------------------------------------------------- policy
def test_without_a_sandbox_a_batch_refuses_unless_told(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(sandboxing, "probe", lambda: (None, "no bwrap in this test"))
    folder = tmp_path / "subs"
    folder.mkdir()
    (folder / "a.ipynb").write_text("{ not json")
    assert grading.main(["--batch", str(folder), "--out", str(tmp_path / "g")]) == 3
    assert "--unsafe-no-sandbox" in capsys.readouterr().err
    assert not (tmp_path / "g").exists()
    assert (
        grading.main(["--batch", str(folder), "--out", str(tmp_path / "g"), "--unsafe-no-sandbox"])
        == 0
    )
    rows = list(csv.DictReader(open(tmp_path / "g" / "gradebook.csv")))
    assert [(r["status"], r["sandbox"]) for r in rows] == [("unreadable", "none")]
    assert "unsandboxed" in capsys.readouterr().out


def test_a_single_notebook_grades_unsandboxed_and_says_so_once(monkeypatch, capsys):
    monkeypatch.setattr(sandboxing, "probe", lambda: (None, "no bwrap in this test"))
    monkeypatch.setattr(grading, "_said_unsandboxed", False)
    assert grading.resolve_sandbox(None) is None and grading.resolve_sandbox(None) is None
    assert capsys.readouterr().err.count("without an OS sandbox (no bwrap in this test)") == 1
    with pytest.raises(grading.GraderError, match="no OS sandbox"):
        grading.resolve_sandbox(True)
    assert grading.resolve_sandbox(False) is None


# --------------------------------------------------------------------------- hostile submissions
SEQ, PATH, RNN, ATT = "dependence", "layers_to_connect", "rnn_forward", "self_attention"


def _answer(stem, name):
    sol = nbformat.read(SOLUTIONS / f"{stem}.ipynb", as_version=4)
    return next(c.source for c in sol.cells if c.get("id") == f"{name.replace('_', '-')}-answer")


def _attack(stem, name, attack: str) -> dict:
    """An answer cell that first tries ``attack`` (its last line sets ``_got_through = True``
    when it worked) and then defines the solution, broken if the attack got through: full
    points iff the sandbox held."""
    return {
        "code": (
            "import os, sys\n_got_through = False\ntry:\n"
            + "".join(f"    {line}\n" for line in attack.strip().splitlines())
            + "except Exception as _e:\n    print('attack refused:', type(_e).__name__)\n"
            + _answer(stem, name)
            + f"\nif _got_through:\n    {name} = None\n"
        )
    }


def _unseen_attack(stem, name, attack: str) -> dict:
    """Like ``_attack``, with the attack run unseen by the answer lint (``hostile_support``)."""
    code = unseen(attack) + _answer(stem, name)
    return {"code": code + f"\nif _got_through:\n    {name} = None\n"}


def _sub(stem, **answers):
    sol = nbformat.read(SOLUTIONS / f"{stem}.ipynb", as_version=4)
    choose = {ex.name: "solution" for ex in load_spec(sol, stem).exercises}
    choose.update(answers)
    return make_submission(sol, choose)


OPEN = 'getattr(os, "op" + "en")'


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    base = tmp_path_factory.mktemp("hostile")
    canary = base / "canary"
    canary.mkdir()
    for name in ("keep", "delete", "rename"):
        (canary / f"{name}.txt").write_text(f"canary {name}\n")
    sols = base / "solutions"
    shutil.copytree(SOLUTIONS, sols)
    pkg_file = Path(grading.__file__).with_name(f"_sandbox_canary_{uuid.uuid4().hex}.txt")
    folder = base / "subs"
    folder.mkdir()
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    port = server.getsockname()[1]
    connections = []
    threading.Thread(target=lambda: connections.append(server.accept()), daemon=True).start()
    s1, s2 = "01_why_transformers", "02_matrix_core"
    subs = {
        "files": _sub(
            s1,
            **{
                SEQ: _attack(s1, SEQ, f'os.remove("{canary}/delete.txt")\n_got_through = True'),
                PATH: _attack(
                    s1,
                    PATH,
                    f'getattr(os, "ren" + "ame")("{canary}/rename.txt", "{canary}/renamed.txt")\n'
                    '_got_through = True',
                ),
                RNN: _attack(
                    s1,
                    RNN,
                    f'os.close({OPEN}("{canary}/created.txt", os.O_CREAT | os.O_WRONLY))\n'
                    '_got_through = True',
                ),
                ATT: _attack(
                    s1,
                    ATT,
                    f'os.close({OPEN}("{sols}/{s1}.ipynb", os.O_WRONLY | os.O_APPEND))\n'
                    f'os.close({OPEN}("{pkg_file}", os.O_CREAT | os.O_WRONLY))\n_got_through = '
                    'True',
                ),
            },
        ),
        "neighbours": _sub(
            s1,
            **{
                SEQ: _attack(
                    s1,
                    SEQ,
                    f'_fd = {OPEN}("{folder}/files.ipynb", os.O_RDONLY)\n'
                    '_got_through = len(os.read(_fd, 100)) > 0',
                ),
                # every socket family, and a connection to a server on the grading machine
                PATH: _unseen_attack(s1, PATH, NETWORK.replace("PORT", str(port))),
                # every native route to a new process: fork, posix_spawn, subprocess, system,
                # clone, exec (int 0x80 and x32: tests/grading/test_lockdown.py, test_isolation.py)
                RNN: _unseen_attack(s1, RNN, NEW_PROCESSES),
                # every signal route to every other visible process, ptrace, process_vm_readv
                ATT: _unseen_attack(s1, ATT, SIGNALS + TRACE),
            },
        ),
        "disk_and_routes": _sub(
            s1,
            **{
                SEQ: _attack(
                    s1,
                    SEQ,
                    '_fd = ' + OPEN + '("fill.bin", os.O_CREAT | os.O_WRONLY)\n'
                    '_chunk = bytes(1 << 20)\nwhile True:\n    os.write(_fd, _chunk)',
                ),
                ATT: {
                    "code": "_attn = getattr(F, 'scaled_dot_' + 'product_attention')\n"
                    "def self_attention(x):\n    return _attn(x, x, x)"
                },
            },
        ),
        "matmul_operator": _sub(
            s2,
            matmul={
                "code": (
                    "import operator\n_ops = [lambda a, b: operator.imatmul(a, b)]  # a @= b\n"
                    "def matmul(a, b):\n    return _ops[0](a, b)"
                )
            },
        ),
        "matmul_alias": _sub(
            s2,
            matmul={
                "code": (
                    "_mm = getattr(torch, 'mat' + 'mul')\ndef matmul(a, b):\n    return _mm(a, b)"
                )
            },
        ),
        "correct": _sub(s2),
    }
    for name, nb in subs.items():
        nbformat.write(nb, folder / f"{name}.ipynb")
    out = base / "grades"
    try:
        code = grading.main(
            [
                "--batch",
                str(folder),
                "--out",
                str(out),
                "--solutions",
                str(sols),
                "--time-limit",
                "20",
            ]
        )
        reports = {
            p.name.removesuffix(".grade.json"): json.loads(p.read_text())
            for p in out.glob("*.grade.json")
        }
        rows = list(csv.DictReader(open(out / "gradebook.csv")))
        leaked = pkg_file.exists()
    finally:
        pkg_file.unlink(missing_ok=True)
        server.close()
    return {
        "code": code,
        "reports": reports,
        "rows": rows,
        "canary": canary,
        "solutions": sols,
        "leaked_into_package": leaked,
        "connections": connections,
        "n": len(subs),
    }


def _ex(rep, name):
    return next(e for e in rep["exercises"] if e["name"] == name)


def _full(rep, *names):
    for n in names:
        e = _ex(rep, n)
        assert e["status"] == "graded" and e["points"] == e["max_points"], (n, e)


@needs_bwrap
@pytest.mark.slow
def test_hostile_batch_one_row_per_submission_all_sandboxed(hostile):
    assert hostile["code"] == 0
    rows = hostile["rows"]
    assert len(rows) == hostile["n"] == len({r["submission"] for r in rows})
    assert {r["status"] for r in rows} == {"graded"} and {r["sandbox"] for r in rows} == {"bwrap"}


@needs_bwrap
@pytest.mark.slow
def test_nothing_outside_the_scratch_folder_changes(hostile):
    canary = hostile["canary"]
    assert sorted(p.name for p in canary.iterdir()) == ["delete.txt", "keep.txt", "rename.txt"]
    for name in ("keep", "delete", "rename"):
        assert (canary / f"{name}.txt").read_text() == f"canary {name}\n"
    assert not hostile["leaked_into_package"]
    assert (
        nbformat.read(hostile["solutions"] / "01_why_transformers.ipynb", as_version=4).cells
        == nbformat.read(SOLUTIONS / "01_why_transformers.ipynb", as_version=4).cells
    )
    # deleting, renaming, creating, writing into solutions/ and course_lib/: refused, full points
    _full(hostile["reports"]["files"], SEQ, PATH, RNN, ATT)


@needs_bwrap
@pytest.mark.slow
def test_no_other_submissions_no_network_no_processes(hostile):
    """Each class by every route: another submission's file; every socket family and a
    connection; every native route to a new process; every signal route to every process the
    child can see, ptrace and process_vm_readv. All refused: full points everywhere."""
    rep = hostile["reports"]["neighbours"]
    assert hostile["connections"] == []
    _full(rep, SEQ, PATH, RNN, ATT)


@needs_bwrap
@pytest.mark.slow
def test_filling_the_scratch_disk_only_fills_it(hostile):
    rep = hostile["reports"]["disk_and_routes"]
    _full(rep, SEQ, PATH, RNN)


@needs_bwrap
@pytest.mark.slow
def test_forbidden_functions_fail_their_checks_whatever_the_route(hostile):
    reps = hostile["reports"]
    for rep, name, called in (
        (reps["disk_and_routes"], ATT, "scaled_dot_product_attention"),
        (reps["matmul_operator"], "matmul", "matmul"),
        (reps["matmul_alias"], "matmul", "matmul"),
    ):
        e = _ex(rep, name)
        assert e["status"] == "graded" and e["points"] == 0, e
        assert all(f"your code called {called}" in c["detail"] for c in e["checks"]), e
    for rep in (reps["matmul_operator"], reps["matmul_alias"], reps["correct"]):
        _full(rep, "linear_backward", "bias_tanh_backward", "quadratic_form_grad")
    _full(reps["correct"], "matmul")
