"""The test run's builds of the site (``build_support.BUILD_NAMES``), each made once per test run
in a process of its own, in the background, while the tests that need no build run.

- "native": the clean build of the whole site on this process's CPU path, into ``BOOK_OUT``
  (``jupyter-book build -W --keep-going`` with ``raise_on_error``, in an emptied folder, so no
  execution cache can hide a failing cell). Its chapters execute in the fresh Colab
  (``tests/colab_env.py``): one execution of each chapter serves the PDF, the HTML pages, the
  tests that read the build and the check that a chapter runs on Colab. Where Chromium is
  installed it first builds the single page and prints the whole-book PDF (``tools/pdf.py``), as
  ``./course build`` does. ``ATEN_CPU_CAPABILITY=default ./course test`` builds with PyTorch's
  scalar kernels, into ``test-output/book-aten-default`` (``native_out``), so it never mixes
  with another build.
- the simulated CPU's (``build_support.SIMULATED_BUILD``, "avx2" by default): the pages whose
  glued values the CPU changes (``build_support.simulated_pages()``) built again under
  ``SIMULATED_CPU`` (``tools.spread.CPUS``): the whole table of contents, so numbering and
  cross-references are the site's, every other page excluded from execution, in its own folder
  with its own execution cache (an output is never reused across instruction sets).

Why in the background: the two builds are the longest steps of the slow tier (about ten and six
minutes on the 2-core machine) and a chapter's kernel keeps about one core busy, so they overlap
with each other and with the tests that need no build (``tests/conftest.py`` runs those first).

How: ``start(name)`` launches ``python tests/book_builds.py NAME RUN_ID`` in a session of its own,
once per test run whichever pytest process asks first (pytest-xdist's workers share it through a
file lock and the run's id), and notes it in ``<out>-build.started``. The build writes its log,
then ``<out>-build.ok`` (the run's id) or ``<out>-build.failed`` (the run's id, then why).
``wait(name)`` returns when the build succeeded and raises ``BuildFailed`` with why when it
failed or its process died. ``stop_owned()`` kills the builds of a session that ends first.
Every build waits for a core passively (``OMP_WAIT_POLICY``): OpenMP's spinning threads would
take the core the other processes need.

The native build is the run's critical path: the tests that read it (about six minutes of them on
two workers) can start only when it ends, and sharing the cores with both workers, the simulated
build and the graders' sandboxes it took about 1,100 s against 650 s alone, while both workers,
out of other work, waited for it. So it asks for the cores first (``take_priority``). Plain
niceness cannot do that here: Linux schedules by session first (``sched_autogroup``), and the
build, each Jupyter kernel and each grading sandbox are sessions of their own. The build raises
its own session's priority (``/proc/self/autogroup``) and its kernels raise theirs at their start
(``colab_env.LAUNCHER``). That needs the privilege to raise a priority (root, as in CI here);
without it, or without autogroups (macOS, GitHub's runners), the build runs at the default
priority and only the run's time differs.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import traceback
from dataclasses import dataclass
from pathlib import Path

if __name__ == "__main__":  # run as a script: the repository's tools, as pytest's pythonpath has
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import colab_env  # noqa: E402
from browser_support import run_id  # noqa: E402
from build_support import SIMULATED_BUILD, SIMULATED_CPU, simulated_pages  # noqa: E402

from tools import ROOT  # noqa: E402

TEST_OUTPUT = ROOT / "test-output"


def native_out(environ=os.environ) -> Path:
    """The native build's folder: ``book``, or where the environment chose ATen's CPU path
    (``ATEN_CPU_CAPABILITY``), ``book-aten-<path>``, so it never mixes with a build of the
    native path, nor with the simulated CPU's build (``book-<SIMULATED_BUILD>``: with
    ``ATEN_CPU_CAPABILITY=avx2`` both were ``book-avx2``, one folder for two builds at once)."""
    choice = environ.get("ATEN_CPU_CAPABILITY", "").strip().lower()
    return TEST_OUTPUT / (f"book-aten-{choice}" if choice else "book")


BOOK_OUT = native_out()
AVX2_OUT = TEST_OUTPUT / f"book-{SIMULATED_BUILD}"
PDF_LOG = TEST_OUTPUT / "pdf-build.log"
SHARED_CORES = {"OMP_WAIT_POLICY": "PASSIVE"}
#: The native build's scheduling priority, as a nice value of its sessions' groups (the module's
#: docstring): at -10 a group weighs about nine times one at the default 0.
NATIVE_NICE = -10
_POLL_SECONDS = 1.0


class BuildFailed(Exception):
    """A build failed: the message says why and where its log is."""


@dataclass(frozen=True)
class Job:
    """One build: its name and output folder, and the files that say how it went."""

    name: str
    out: Path

    def _file(self, suffix: str) -> Path:
        return TEST_OUTPUT / f"{self.out.name}-build.{suffix}"

    @property
    def log(self) -> Path:
        return self._file("log")

    @property
    def ok(self) -> Path:
        return self._file("ok")

    @property
    def failed(self) -> Path:
        return self._file("failed")

    @property
    def started(self) -> Path:
        return self._file("started")

    @property
    def lock(self) -> Path:  # held while a process starts the build
        return self._file("lock")

    @property
    def output(self) -> Path:  # the build process's own stdout and stderr
        return self._file("process.log")

    @property
    def build(self) -> Path:
        return self.out / "_build"


def job(name: str) -> Job:
    if name == "native":
        return Job(name, BOOK_OUT)
    if name == SIMULATED_BUILD:
        return Job(name, AVX2_OUT)
    raise ValueError(f"unknown build {name!r}; builds: native, {SIMULATED_BUILD}")


def reusing() -> bool:
    """``COURSE_REUSE_BUILD=1``: reuse the previous test builds while iterating on tests (never
    in CI)."""
    return os.environ.get("COURSE_REUSE_BUILD") == "1" and not os.environ.get("CI")


def _started(j: Job) -> dict:
    try:
        return json.loads(j.started.read_text())
    except (OSError, ValueError):
        return {}


def _command(name: str, rid: str) -> list[str]:
    """The command that makes build ``name`` for run ``rid`` (``main``)."""
    return [sys.executable, str(Path(__file__).resolve()), name, rid]


def start(name: str) -> None:
    """Start build ``name`` for this test run unless it has started already (by this process
    or another worker of the run) or a reused build is asked for."""
    from filelock import FileLock

    if reusing():
        return
    j = job(name)
    TEST_OUTPUT.mkdir(exist_ok=True)
    with FileLock(str(j.lock)):
        if _started(j).get("run_id") == run_id():
            return
        for f in (j.ok, j.failed, j.started):
            f.unlink(missing_ok=True)
        with j.output.open("w") as out:
            proc = subprocess.Popen(
                _command(name, run_id()),
                cwd=ROOT,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its own process group: stop_owned kills it whole
                env={**os.environ, **SHARED_CORES},
            )
        _CHILDREN[name] = proc
        # the session that owns it: this process, or the pytest-xdist controller of a worker
        owner = os.getppid() if os.environ.get("PYTEST_XDIST_WORKER") else os.getpid()
        j.started.write_text(json.dumps({"run_id": run_id(), "pid": proc.pid, "owner": owner}))


_CHILDREN: dict[str, subprocess.Popen] = {}


def _alive(pid: int, name: str) -> bool:
    import psutil

    if name in _CHILDREN and _CHILDREN[name].pid == pid:
        return _CHILDREN[name].poll() is None
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _result(j: Job) -> str | None:
    """None while build ``j`` of this run is under way; "" when it succeeded; why it failed."""
    rid = run_id()
    if j.ok.exists() and j.ok.read_text() == rid:
        return ""
    if j.failed.exists():
        first, _, why = j.failed.read_text().partition("\n")
        if first == rid:
            return why
    return None


def wait(name: str) -> Path:
    """The ``_build`` folder of build ``name`` once it has succeeded in this run (started here if
    no process of the run has started it). Raises ``BuildFailed`` with why it failed."""
    j = job(name)
    if reusing() and (j.build / "html" / "index.html").exists():
        return j.build
    start(name)
    while (why := _result(j)) is None:
        info = _started(j)
        if info.get("run_id") != run_id():
            raise BuildFailed(f"the {name} build of this test run was never started")
        if not _alive(info["pid"], name):
            if (why := _result(j)) is not None:  # it finished between the two looks
                break
            tail = j.output.read_text()[-3000:] if j.output.exists() else ""
            raise BuildFailed(
                f"the {name} build's process (pid {info['pid']}) ended without a result;"
                f" its output ({j.output}):\n{tail}"
            )
        time.sleep(_POLL_SECONDS)  # a build takes minutes: a look a second costs nothing
    if why:
        raise BuildFailed(why)
    return j.build


def stop_owned() -> None:
    """Kill the builds this session started that are still running (a session stopped early:
    nothing will read them), and reap this process's. Called by the pytest process that owns
    them (not a pytest-xdist worker: the other workers may still wait for them)."""
    for name in ("native", SIMULATED_BUILD):
        j = job(name)
        info = _started(j)
        killed = False
        if info.get("owner") == os.getpid() and _result(j) is None and _alive(info["pid"], name):
            try:
                os.killpg(info["pid"], signal.SIGKILL)
                killed = True
            except ProcessLookupError:
                pass
        proc = _CHILDREN.get(name)
        if proc is not None and (killed or proc.poll() is not None):  # ended: reap it
            _CHILDREN.pop(name).wait()


# --------------------------------------------------------------------------- the builds
def _warnings(text: str) -> str:
    lines = [
        line
        for line in text.splitlines()
        if "WARNING" in line or "ERROR" in line or "Error" in line
    ]
    return "\n".join(lines[-40:])


#: What a kernel prints when it lost jupyter_client's port race: the ports of a new kernel are
#: picked free, released, then bound by the kernel, and a kernel started meanwhile (the other
#: build's, a test's) can take one first (jupyter/jupyter_client#154). The kernel dies before it
#: answers and the whole build fails; it struck the simulated build once in four whole runs.
PORT_RACE = "Address already in use"


def once_more_if_a_port_was_taken(run):
    """``run()`` (a build: a CompletedProcess with its output captured), and once more if it
    failed by the port race (``PORT_RACE`` in its output): the execution cache keeps what the
    first try executed. Any other failure, and a second race, stand."""
    proc = run()
    if proc.returncode != 0 and PORT_RACE in f"{proc.stdout}{proc.stderr}":
        proc = run()
    return proc


def _jupyter_book() -> str:
    return str(Path(sys.executable).with_name("jupyter-book"))


def _build_pdf_first(env: dict[str, str]) -> None:
    """As ``./course build`` does, where Chromium is installed: the single-page build and the
    whole-book PDF (``tools/pdf.py``) before the HTML build, which then links the PDF. The
    single-page build executes the chapters (the HTML build reuses them): its failure is the
    book's, and fails the build. A failed print is only logged (``PDF_LOG``):
    tests/book/test_pdf.py reports it."""
    from tools.pdf import build_singlehtml, chromium_path

    PDF_LOG.unlink(missing_ok=True)
    if chromium_path() is None:
        return
    proc = once_more_if_a_port_was_taken(lambda: build_singlehtml(BOOK_OUT, capture=True, env=env))
    log = TEST_OUTPUT / f"{BOOK_OUT.name}-build-singlehtml.log"
    log.write_text(proc.stdout + "\n--- stderr ---\n" + proc.stderr)
    if proc.returncode != 0:
        raise BuildFailed(
            f"the clean single-page build (for the PDF) failed (exit {proc.returncode});"
            f" full log in {log}.\n" + _warnings(proc.stdout + proc.stderr)
        )
    pdf = subprocess.run(
        [sys.executable, "-m", "tools.pdf", "--no-build", "--path-output", str(BOOK_OUT)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    PDF_LOG.write_text(f"exit {pdf.returncode}\n" + pdf.stdout + "\n--- stderr ---\n" + pdf.stderr)


def take_priority(nice: int = NATIVE_NICE) -> dict[str, str]:
    """Give this process's session (its scheduling group) the priority ``nice``, and return what
    the environment of its Jupyter kernels needs to take it too (``colab_env.LAUNCHER``). Without
    autogroups or the privilege, nothing changes (the module's docstring)."""
    group = Path("/proc/self/autogroup")  # "/autogroup-17172 nice 0"
    try:
        group.write_text(str(nice))
        # read back: without the privilege this kernel ignores the write without an error
        taken = group.read_text().split()[-1] == str(nice)
    except OSError:
        taken = False
    return {colab_env.AUTOGROUP_NICE: str(nice)} if taken else {}


def build_native() -> None:
    """The clean build of the whole site (the module's docstring), its chapters executed in the
    fresh Colab, which this builds first unless the test run has it already."""
    j = job("native")
    priority = take_priority()
    workdir = TEST_OUTPUT / "colab-setup"
    shutil.rmtree(workdir, ignore_errors=True)
    workdir.mkdir(parents=True)
    state, _ = colab_env.ensure(workdir)
    shutil.rmtree(j.out, ignore_errors=True)
    env = {**colab_env.build_env(state), **SHARED_CORES, **priority}
    colab_env.KERNEL_LOG.unlink(missing_ok=True)
    _build_pdf_first(env)
    cmd = [_jupyter_book(), "build", str(ROOT), "--path-output", str(j.out)]
    cmd += ["--builder", "html", "-W", "--keep-going"]
    proc = once_more_if_a_port_was_taken(
        lambda: subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, env=env)
    )
    j.log.write_text(proc.stdout + "\n--- stderr ---\n" + proc.stderr)
    if proc.returncode != 0:
        raise BuildFailed(
            f"the clean book build failed (exit {proc.returncode}); full log in {j.log}.\n"
            + _warnings(proc.stdout + proc.stderr)
        )


def build_simulated() -> None:
    """``simulated_pages()`` executed again under ``SIMULATED_CPU``'s kernels, the rest of the
    site built unexecuted (the module's docstring)."""
    import yaml

    from tools.spread import cpu_environment
    from tools.toc import toc_files

    j = job(SIMULATED_BUILD)
    pages = tuple(simulated_pages())
    shutil.rmtree(j.out, ignore_errors=True)
    j.out.mkdir(parents=True)
    config = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))
    local = config.get("sphinx", {}).get("local_extensions", {})
    for name, path in local.items():  # relative to the config file, which moved
        local[name] = str(ROOT / path)
    config.setdefault("execute", {})["exclude_patterns"] = [
        f"{page}.md" for page in toc_files() if page not in pages
    ]
    config_file = j.out / "_config.yml"
    config_file.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    cmd = [_jupyter_book(), "build", str(ROOT), "--path-output", str(j.out)]
    cmd += ["--config", str(config_file), "--builder", "html"]
    cmd += ["--keep-going"]  # no -W: the unexecuted pages warn of their missing glue
    env = {**cpu_environment(SIMULATED_CPU, dict(os.environ)), **SHARED_CORES}
    proc = once_more_if_a_port_was_taken(
        lambda: subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, env=env)
    )
    j.log.write_text(proc.stdout + "\n--- stderr ---\n" + proc.stderr)
    if proc.returncode != 0 or not (j.build / "html" / "index.html").exists():
        raise BuildFailed(
            f"the {SIMULATED_CPU} build of {', '.join(pages)} failed (exit {proc.returncode});"
            f" full log in {j.log}"
        )


def main(argv: list[str]) -> int:
    """``book_builds.py NAME RUN_ID``: make build NAME for test run RUN_ID and say how it went
    in its ``ok`` or ``failed`` file."""
    name, rid = argv
    os.environ["COURSE_TEST_RUN"] = rid  # browser_support.run_id(): the run's, not this pid's
    j = job(name)
    try:
        build_native() if name == "native" else build_simulated()
    except BuildFailed as exc:
        j.failed.write_text(f"{rid}\n{exc}")
        return 1
    except BaseException:
        j.failed.write_text(f"{rid}\nthe {name} build crashed:\n{traceback.format_exc()}")
        return 1
    j.ok.write_text(rid)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
