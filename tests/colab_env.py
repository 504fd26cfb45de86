"""A fresh Colab, as a reader meets it: a new virtual environment with only the packages Colab
has (``PREINSTALLED``, pinned as in requirements.txt) and ``course_lib`` installed by a notebook's
set-up cell from this checkout (``COURSE_LIB_SOURCE``), built once per test run
(``tests/conftest.py``'s ``fresh_colab``).

Its kernel, ``python3`` (``jupyter_path``, found first through ``JUPYTER_PATH``), notes each of
its starts (which Python, which ``course_lib``, which folder) in ``KERNEL_LOG``. The clean test
build (``built_book``) executes every chapter there, so each chapter runs once, in Colab's
environment and an empty working folder, and the site shows what that run computed; the
solution notebooks run there under nbval, each noting its start in a log of its own
(``tests/book/test_colab.py`` reads both).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

from browser_support import run_id

from tools import ROOT, colab

TEST_OUTPUT = ROOT / "test-output"
VENV = TEST_OUTPUT / "colab-venv"
STATE = TEST_OUTPUT / "colab-venv.json"
KERNEL_LOG = TEST_OUTPUT / "colab-kernel-starts.jsonl"
# What Colab already has; the fresh environment gets exactly these (pinned as in the course).
# Colab preinstalls scikit-learn, and tokenizers with transformers (Part IV uses both), and
# altair (the chapters' explorers, course_lib.viz.explorers).
PREINSTALLED = [
    "torch",
    "numpy",
    "matplotlib",
    "ipywidgets",
    "ipykernel",
    "scikit-learn",
    "tokenizers",
    "altair",
    # Colab ships Hugging Face transformers; Chapter 12 compares MiniGPT with its GPT-2
    "transformers",
]
# The build kernel's launcher: note the start, take the scheduling priority its build asked for
# (``AUTOGROUP_NICE``: jupyter_client starts each kernel in a session of its own, and this
# kernel's scheduling group is that session's, so the build's own priority does not reach it),
# then run ipykernel as ``-m ipykernel_launcher``.
AUTOGROUP_NICE = "COURSE_AUTOGROUP_NICE"
TAKE_PRIORITY = """import os
if os.environ.get("COURSE_AUTOGROUP_NICE"):
    try:
        with open("/proc/self/autogroup", "w") as group:
            group.write(os.environ["COURSE_AUTOGROUP_NICE"])
    except OSError:  # no autogroups (another OS), or no privilege: the default priority
        pass
"""
LAUNCHER = (
    TAKE_PRIORITY
    + """import importlib.util, json, os, runpy, sys
spec = importlib.util.find_spec("course_lib")
with open(os.environ["COURSE_KERNEL_LOG"], "a", encoding="utf-8") as log:
    log.write(json.dumps({"executable": sys.executable, "cwd": os.getcwd(),
                          "course_lib": spec.origin if spec else None}) + "\\n")
sys.path[0] = os.getcwd()
runpy.run_module("ipykernel_launcher", run_name="__main__", alter_sys=True)
"""
)


def ensure(workdir: Path) -> tuple[dict, bool]:
    """The fresh Colab of this test run (built here, under a file lock, if no worker has built
    it yet): its state (``build``'s dict) and whether this call built it."""
    from filelock import FileLock

    TEST_OUTPUT.mkdir(exist_ok=True)
    with FileLock(str(TEST_OUTPUT / "colab-venv.lock")):
        state = json.loads(STATE.read_text()) if STATE.exists() else {}
        if state.get("run_id") == run_id() and (VENV / "bin" / "python").exists():
            return state, False
        STATE.unlink(missing_ok=True)
        state = build(VENV, workdir)
        STATE.write_text(json.dumps(state, indent=1))
        return state, True


def build_env(state: dict) -> dict[str, str]:
    """The environment of a build whose chapters execute in the fresh Colab's ``python3``."""
    # (as the fresh Colab's own environment: nothing that would lead its Python to the checkout)
    drop = ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME", "JPY_PARENT_PID")
    return {
        **{k: v for k, v in os.environ.items() if k not in drop},
        "JUPYTER_PATH": state["jupyter_path"],
        "PATH": f"{Path(state['python']).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "PYTHONNOUSERSITE": "1",
        "PYTHONHASHSEED": "0",
    }


def _pins() -> dict[str, str]:
    pins = {}
    for line in (ROOT / "requirements.txt").read_text().splitlines():
        m = re.match(r"^([A-Za-z0-9_.-]+)==([^\s#]+)", line.strip())
        if m:
            pins[m.group(1).lower()] = m.group(2)
    return pins


def _freeze(python: Path) -> dict[str, str]:
    out = subprocess.run(
        [str(python), "-m", "pip", "list", "--format=json"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return {p["name"].lower().replace("_", "-"): p["version"] for p in json.loads(out)}


def _snapshot_checkout(dest: Path) -> Path:
    """What a clone of the repository holds for pip: the package and its metadata. (pip
    builds a local directory in place, leaving build/ behind; a copy keeps the checkout clean.)"""
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(parents=True)
    for name in ("pyproject.toml", "README.md", "MANIFEST.in", "setup.cfg", "setup.py", "LICENSE"):
        if (ROOT / name).exists():
            shutil.copy(ROOT / name, dest / name)
    shutil.copytree(
        ROOT / "course_lib",
        dest / "course_lib",
        ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info"),
    )
    return dest


def build(venv: Path, workdir: Path) -> dict:
    """Create the venv, run the set-up cell once on its own, write the kernel spec."""
    shutil.rmtree(venv, ignore_errors=True)
    state: dict = {"run_id": run_id()}
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = venv / "bin" / "python"
    pins = _pins()
    reqs = [f"{name}=={pins[name]}" if name in pins else name for name in PREINSTALLED]
    assert "torch==2.13.0" in reqs, "requirements.txt must pin torch==2.13.0"
    # --no-compile: pip's byte-compiling of every module installed (transformers' thousands)
    # was 37 of the 60 s this took on the idle machine, and it sits on the critical path of the
    # run (the native build waits for this venv). The kernels compile what they import, once,
    # into the venv; nothing runs this venv read-only (the grader's sandbox uses .venv).
    proc = subprocess.run(
        [str(python), "-m", "pip", "install", "-q", "--no-compile", *reqs],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, f"could not build the fresh-Colab venv:\n{proc.stderr[-3000:]}"
    state["venv_seconds"] = round(time.perf_counter() - start, 1)
    state["preinstalled"] = reqs
    state["before"] = before = _freeze(python)
    assert "course-lib" not in before

    source = _snapshot_checkout(TEST_OUTPUT / "colab-source")
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME", "JPY_PARENT_PID")
    }
    env.update(
        {
            colab.ENV_VAR: str(source),
            "PYTHONNOUSERSITE": "1",
            "PYTHONHASHSEED": "0",
            "PATH": f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}",
        }
    )
    state["env"] = env
    # The set-up cell once, on its own, to see exactly what it installs.
    t0 = time.perf_counter()
    proc = subprocess.run(
        [str(python), "-c", colab.setup_cell_source(ROOT)],
        env=env,
        cwd=workdir,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, f"the set-up cell failed in the fresh venv:\n{proc.stderr[-3000:]}"
    state["setup_cell_seconds"] = round(time.perf_counter() - t0, 1)
    state["after"] = after = _freeze(python)
    state["installed_by_setup_cell"] = sorted(
        f"{n}=={v}" for n, v in after.items() if before.get(n) != v
    )
    # The notebooks' own set-up cells then install the same code as a prebuilt wheel: pip
    # building the package from source with build isolation costs ~15 s per notebook.
    wheels = TEST_OUTPUT / "colab-wheel"
    shutil.rmtree(wheels, ignore_errors=True)
    proc = subprocess.run(
        [str(python), "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(wheels), str(source)],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, f"could not build the course_lib wheel:\n{proc.stderr[-3000:]}"
    env[colab.ENV_VAR] = str(next(wheels.glob("course_lib-*.whl")))

    # The fresh Colab's kernel: named python3, as the notebooks ask, found first through
    # JUPYTER_PATH; it notes each start in KERNEL_LOG (a test may point that elsewhere).
    build_kernel = TEST_OUTPUT / "colab-jupyter" / "kernels" / "python3"
    shutil.rmtree(build_kernel.parents[1], ignore_errors=True)
    build_kernel.mkdir(parents=True)
    (build_kernel / "launch.py").write_text(LAUNCHER)
    (build_kernel / "kernel.json").write_text(
        json.dumps(
            {
                "argv": [str(python), str(build_kernel / "launch.py"), "-f", "{connection_file}"],
                "display_name": "Python 3 (fresh Colab)",
                "language": "python",
                "env": {"COURSE_KERNEL_LOG": str(KERNEL_LOG)},
            }
        )
    )
    state["python"] = str(python)
    state["jupyter_path"] = str(build_kernel.parents[1])
    state["source"] = str(source / "course_lib")
    return state
