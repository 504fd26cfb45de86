"""Shared fixtures.

``built_book``: one clean build of the whole site per test session, into
``test-output/book`` (``jupyter-book build -W --keep-going`` with ``raise_on_error``, in a
fresh folder so no execution cache can hide a failing cell). Its chapters execute in the fresh
Colab (``fresh_colab``, ``tests/colab_env.py``): one execution of each chapter serves the PDF,
the HTML pages, the tests that read the build and the check that a chapter runs on Colab. Set
``COURSE_REUSE_BUILD=1`` to reuse the previous test build while iterating on tests (never in
CI). Where Chromium is installed it first builds the single page and prints the whole-book PDF
(``tools/pdf.py``), as ``./course build`` does; ``built_pdf`` is that PDF. The build runs on the
CPU path of the test process's environment: ``ATEN_CPU_CAPABILITY=default ./course test`` runs
the whole suite, and builds the site, with PyTorch's scalar kernels (the build then goes to
``test-output/book-default``, so it never mixes with the native one).

``any_build``: each build the tests of computed values read, as a ``Build``: the one above
("native"), and "avx2": the chapters that train or sample in float32 and glue what the CPU
changes (``tools.spread.cpu_pages``) built again with ATen's and oneDNN's AVX2 kernels
(``tools.spread.CPUS["avx2+onednn"]``, an AVX2 laptop) into ``test-output/book-avx2``, with its
own execution cache (outputs are never shared across instruction sets), every other page left
unexecuted.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import colab_env
import pytest
import torch
import yaml
from build_support import (
    BUILD_NAMES,
    SIMULATED_BUILD,
    SIMULATED_CPU,
    Build,
    get_build,
    simulated_pages,
)

from tools import ROOT

TEST_OUTPUT = ROOT / "test-output"
# the CPU path this process (and the build's kernels) run on, when the environment chose one
_CPU_CHOICE = os.environ.get("ATEN_CPU_CAPABILITY", "").strip().lower()
BOOK_OUT = TEST_OUTPUT / (f"book-{_CPU_CHOICE}" if _CPU_CHOICE else "book")
BUILD_LOG = TEST_OUTPUT / f"{BOOK_OUT.name}-build.log"


# --------------------------------------------------------------------------- time limits
# Every test has a time limit (pytest-timeout; the default is ``timeout`` in pyproject.toml,
# longer ones are marked on the tests), counted from its set-up, so a hung test fails naming
# itself. A fixture shared by many tests runs once, in the set-up of whichever test asks for it
# first: these give that test this many seconds more for the fixture's work (measured on the
# 2-core machine under load; CONTRIBUTING.md, "Tests").
FIXTURE_SECONDS = {
    "built_book": 3600,  # the clean build: the PDF's single page (every chapter runs), the HTML
    "built_book_avx2": 1800,  # the simulated AVX2 laptop's build: five chapters execute again
    "fresh_colab": 900,  # a new venv with Colab's packages, course_lib from the set-up cell
    "graded": 2400,  # tests/grading/test_exercises.py: every exercise notebook graded, all variants
    "batch": 900,  # tests/grading/test_grade.py: a class graded with --batch
    # tests/grading/test_sandbox.py, tests/grading/test_forgery.py: hostile submissions graded
    "hostile": 900,
    "worked": 600,  # tests/grading/test_experiment_exercises.py: the worked example's runs
    "race": 600,  # tests/grading/test_experiment_exercises.py: the tuned-rates race
    "notebook": 600,  # tests/grading/test_assemble_exercise.py, test_translation_exercise.py
}


def extend_time_limit(fixture: str) -> None:
    """Add ``FIXTURE_SECONDS[fixture]`` to the running test's time limit (pytest-timeout's
    SIGALRM timer, which runs through set-up)."""
    import signal
    import threading

    extra = FIXTURE_SECONDS.get(fixture, 0)
    if (
        extra
        and hasattr(signal, "setitimer")
        and threading.current_thread() is threading.main_thread()
    ):
        left, _ = signal.getitimer(signal.ITIMER_REAL)
        if left > 0:
            signal.setitimer(signal.ITIMER_REAL, left + extra)


class TimeLimits:
    """A plugin of the whole session (registered in ``pytest_configure``): a hook in this
    conftest would not see the set-up of session-scoped fixtures, which pytest runs through the
    session's hooks, not this folder's."""

    @pytest.hookimpl(hookwrapper=True)
    def pytest_fixture_setup(self, fixturedef, request):
        extend_time_limit(fixturedef.argname)
        yield


def pytest_configure(config):
    config.pluginmanager.register(TimeLimits(), "course-time-limits")


@pytest.fixture(scope="session")
def fresh_colab(tmp_path_factory):
    """A new venv with only Colab's preinstalled packages and ``course_lib`` from the set-up
    cell (``tests/colab_env.py``): built once per test session (and shared by pytest-xdist
    workers, like the book build)."""
    import types

    from browser_support import merge_report

    state, built_here = colab_env.ensure(tmp_path_factory.mktemp("setup"))
    times: dict[str, float] = {}
    yield types.SimpleNamespace(
        **{
            **state,
            "python": Path(state["python"]),
            "kernels": Path(state["kernels"]),
            "source": Path(state["source"]),
        },
        times=times,
    )
    keys = ("venv_seconds", "setup_cell_seconds") if built_here else ()  # counted once
    part = {k: state[k] for k in (*keys, "preinstalled", "installed_by_setup_cell")}
    part.update(
        notebooks=times, notebooks_run=len(times), notebook_seconds=round(sum(times.values()), 1)
    )
    merge_report(
        TEST_OUTPUT / "colab-report.json", os.environ.get("PYTEST_XDIST_WORKER", "main"), part
    )


@pytest.fixture(scope="session")
def built_book(request) -> Path:
    """Path of the build folder (``.../_build``) of a clean, warning-free site build, whose
    chapters executed in the fresh Colab (``fresh_colab``'s ``python3`` kernel).

    Under pytest-xdist the workers share one build: the first builds under a file lock, the
    others find the marker of this test run and reuse it.
    """
    from filelock import FileLock

    build = BOOK_OUT / "_build"
    log = BUILD_LOG
    marker = TEST_OUTPUT / f"{BOOK_OUT.name}-build.ok"
    run_id = os.environ.get("PYTEST_XDIST_TESTRUNUID", f"pid-{os.getpid()}")
    TEST_OUTPUT.mkdir(exist_ok=True)
    with FileLock(str(TEST_OUTPUT / f"{BOOK_OUT.name}-build.lock")):
        reuse = os.environ.get("COURSE_REUSE_BUILD") == "1" and not os.environ.get("CI")
        done = marker.exists() and marker.read_text() == run_id
        if (reuse or done) and (build / "html" / "index.html").exists():
            return build
        marker.unlink(missing_ok=True)
        shutil.rmtree(BOOK_OUT, ignore_errors=True)
        env = colab_env.build_env(vars(request.getfixturevalue("fresh_colab")))
        if _AVX2_EARLY.get("proc") is not None:  # the AVX2 build shares the cores
            env.update(SHARED_CORES)
        colab_env.KERNEL_LOG.unlink(missing_ok=True)
        _build_pdf_first(env)
        jb = Path(sys.executable).with_name("jupyter-book")
        cmd = [
            str(jb),
            "build",
            str(ROOT),
            "--path-output",
            str(BOOK_OUT),
            "--builder",
            "html",
            "-W",
            "--keep-going",
        ]
        proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, env=env)
        log.write_text(proc.stdout + "\n--- stderr ---\n" + proc.stderr)
        if proc.returncode != 0:
            lines = [
                line
                for line in (proc.stdout + proc.stderr).splitlines()
                if "WARNING" in line or "ERROR" in line or "Error" in line
            ]
            pytest.fail(
                f"the clean book build failed (exit {proc.returncode}); full log in {log}.\n"
                + "\n".join(lines[-40:]),
                pytrace=False,
            )
        marker.write_text(run_id)
    return build


PDF_LOG = TEST_OUTPUT / "pdf-build.log"


# --------------------------------------------------------------------------- builds by CPU
# The second build's CPU and pages (tests/build_support.py): by default "avx2+onednn"
# (tools.spread.CPUS: ATen's and oneDNN's AVX2 kernels, an AVX2 laptop), built as "avx2".
AVX2_CPU = SIMULATED_CPU
AVX2_OUT = TEST_OUTPUT / f"book-{SIMULATED_BUILD}"


def _avx2_build_command() -> tuple[list[str], dict[str, str]]:
    """Prepare ``AVX2_OUT`` (emptied, with its ``_config.yml``: every page but
    ``simulated_pages()`` excluded from execution) and return the build's command and
    environment (``AVX2_CPU``'s kernels)."""
    from tools.spread import cpu_environment
    from tools.toc import toc_files

    pages = tuple(simulated_pages())
    shutil.rmtree(AVX2_OUT, ignore_errors=True)
    AVX2_OUT.mkdir(parents=True)
    config = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))
    local = config.get("sphinx", {}).get("local_extensions", {})
    for name, path in local.items():  # relative to the config file, which moved
        local[name] = str(ROOT / path)
    config.setdefault("execute", {})["exclude_patterns"] = [
        f"{page}.md" for page in toc_files() if page not in pages
    ]
    config_file = AVX2_OUT / "_config.yml"
    config_file.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    jb = Path(sys.executable).with_name("jupyter-book")
    cmd = [
        str(jb),
        "build",
        str(ROOT),
        "--path-output",
        str(AVX2_OUT),
        "--config",
        str(config_file),
        "--builder",
        "html",
        "--keep-going",  # no -W: the unexecuted pages warn of their missing glue
    ]
    return cmd, cpu_environment(AVX2_CPU, dict(os.environ))


# The AVX2 build started at the beginning of the session, beside the fresh Colab's venv and the
# native build (``pytest_collection_finish``): one chapter's kernel keeps about one core busy
# (much of a page is Python between small tensor operations), so on 2 cores the two builds
# overlap instead of queueing. Both then wait for a core passively (OMP_WAIT_POLICY), since
# OpenMP's spinning threads would take the core the other build needs.
_AVX2_EARLY: dict[str, object] = {}
SHARED_CORES = {"OMP_WAIT_POLICY": "PASSIVE"}


def _needs_avx2_build(item) -> bool:
    params = getattr(getattr(item, "callspec", None), "params", {})
    names = set(getattr(item, "fixturenames", ()))
    return "built_book_avx2" in names or SIMULATED_BUILD in params.values()


def pytest_collection_finish(session):
    """Start the AVX2 build now when the session will need it, unless pytest-xdist shares the
    work (its workers each run this hook; ``tools.pytest_groups`` keeps the builds on one) or a
    reused build is asked for."""
    if (
        os.environ.get("PYTEST_XDIST_WORKER")
        or getattr(session.config.option, "numprocesses", None)
        or session.config.option.collectonly
        or (os.environ.get("COURSE_REUSE_BUILD") == "1" and not os.environ.get("CI"))
        or not any(_needs_avx2_build(item) for item in session.items)
    ):
        return
    TEST_OUTPUT.mkdir(exist_ok=True)
    (TEST_OUTPUT / f"{AVX2_OUT.name}-build.ok").unlink(missing_ok=True)
    cmd, env = _avx2_build_command()
    log = (TEST_OUTPUT / f"{AVX2_OUT.name}-build.log").open("w")
    _AVX2_EARLY["proc"] = subprocess.Popen(
        cmd, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, env={**env, **SHARED_CORES}
    )
    _AVX2_EARLY["log"] = log


def pytest_sessionfinish(session):
    proc = _AVX2_EARLY.get("proc")
    if proc is not None and proc.poll() is None:  # a session stopped early: stop the build
        proc.kill()
        proc.wait()


@pytest.fixture(scope="session")
def built_book_avx2() -> Build:
    """The pages whose glued values the CPU changes (``build_support.simulated_pages()``:
    ``tools.spread.cpu_pages()``, the chapters that train or sample in float32 and glue what
    they measure; a measured page whose values were the same under every simulated CPU, such
    as one that reads a benchmark file, is not executed again) built again under
    ``AVX2_CPU``: the whole table of contents, so numbering and cross-references are the
    site's, with every other page excluded from execution. Its own folder and execution cache:
    a cached output is never reused across instruction sets. Started at the beginning of the
    session when it can be (``pytest_collection_finish``); this waits for it."""
    from filelock import FileLock

    pages = tuple(simulated_pages())
    build = AVX2_OUT / "_build"
    log = TEST_OUTPUT / f"{AVX2_OUT.name}-build.log"
    marker = TEST_OUTPUT / f"{AVX2_OUT.name}-build.ok"
    run_id = os.environ.get("PYTEST_XDIST_TESTRUNUID", f"pid-{os.getpid()}")
    TEST_OUTPUT.mkdir(exist_ok=True)
    with FileLock(str(TEST_OUTPUT / f"{AVX2_OUT.name}-build.lock")):
        reuse = os.environ.get("COURSE_REUSE_BUILD") == "1" and not os.environ.get("CI")
        done = marker.exists() and marker.read_text() == run_id
        if (reuse or done) and (build / "html" / "index.html").exists():
            return Build(SIMULATED_BUILD, build, pages)
        early = _AVX2_EARLY.pop("proc", None)
        if early is not None:
            returncode = early.wait()
            _AVX2_EARLY.pop("log").close()
        else:
            marker.unlink(missing_ok=True)
            cmd, env = _avx2_build_command()
            proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, env=env)
            log.write_text(proc.stdout + "\n--- stderr ---\n" + proc.stderr)
            returncode = proc.returncode
        if returncode != 0 or not (build / "html" / "index.html").exists():
            pytest.fail(
                f"the {AVX2_CPU} build of {', '.join(pages)} failed (exit {returncode});"
                f" full log in {log}",
                pytrace=False,
            )
        marker.write_text(run_id)
    return Build(SIMULATED_BUILD, build, pages)


@pytest.fixture(scope="session", params=BUILD_NAMES)
def any_build(request) -> Build:
    """Each build whose computed values the tests check (``build_support``): this machine's
    (the whole site) and the simulated AVX2 laptop's (the pages that depend on the CPU)."""
    return get_build(request, request.param)


def _build_pdf_first(env: dict[str, str]) -> None:
    """As ``./course build`` does, where Chromium is installed: the single-page build and the
    whole-book PDF (``tools/pdf.py``) before the HTML build, which then links the PDF. The
    single-page build executes the chapters (the HTML build reuses them): its failure is the
    book's, and fails here. A failed print is only logged (``PDF_LOG``): tests/book/test_pdf.py
    reports it."""
    from tools.pdf import build_singlehtml, chromium_path

    PDF_LOG.unlink(missing_ok=True)
    if chromium_path() is None:
        return
    proc = build_singlehtml(BOOK_OUT, capture=True, env=env)
    log = TEST_OUTPUT / f"{BOOK_OUT.name}-build-singlehtml.log"
    log.write_text(proc.stdout + "\n--- stderr ---\n" + proc.stderr)
    if proc.returncode != 0:
        lines = [
            line
            for line in (proc.stdout + proc.stderr).splitlines()
            if "WARNING" in line or "ERROR" in line or "Error" in line
        ]
        pytest.fail(
            f"the clean single-page build (for the PDF) failed (exit {proc.returncode});"
            f" full log in {log}.\n" + "\n".join(lines[-40:]),
            pytrace=False,
        )
    pdf = subprocess.run(
        [sys.executable, "-m", "tools.pdf", "--no-build", "--path-output", str(BOOK_OUT)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    PDF_LOG.write_text(f"exit {pdf.returncode}\n" + pdf.stdout + "\n--- stderr ---\n" + pdf.stderr)


@pytest.fixture(scope="session")
def built_pdf(built_book, chromium) -> Path:
    """The whole-book PDF of the clean test build (``built_book`` prints it first)."""
    from tools.pdf import PDF_NAME

    pdf = built_book / "pdf" / PDF_NAME
    if not pdf.is_file():
        log = PDF_LOG.read_text() if PDF_LOG.exists() else "(no log: the build was reused?)"
        pytest.fail(f"no PDF at {pdf}; {PDF_LOG}:\n{log[-3000:]}", pytrace=False)
    return pdf


@pytest.fixture(scope="module")
def float64_default():
    """float64 as torch's default dtype for one test module, restored afterwards. (pytest
    imports every test module into one process: a module-level set_default_dtype leaks into
    all the others and silently turns their float32 tensors into float64.)"""
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    yield
    torch.set_default_dtype(old)


# --------------------------------------------------------------------------- browser tests
@pytest.fixture(scope="session")
def chromium() -> str:
    """Debian's Chromium for Playwright (it cannot download a browser here)."""
    from browser_support import chromium_path

    path = chromium_path()
    if path is None:
        pytest.skip(
            "browser tests need Debian's Chromium: `apt-get install -y chromium` "
            "(Playwright cannot download a browser here)"
        )
    return path


@pytest.fixture(scope="session")
def site_dir(chromium, request) -> Path:
    """The built site's HTML folder: COURSE_BROWSER_BUILD's, or the shared clean build's."""
    from browser_support import custom_build

    build = custom_build() or request.getfixturevalue("built_book")
    html = Path(build) / "html"
    assert (html / "index.html").exists(), f"no built site in {html}"
    return html


@pytest.fixture(scope="session")
def base_url(site_dir):
    """The built site served on 127.0.0.1 for the session."""
    from browser_support import serve

    with serve(site_dir) as url:
        yield url


@pytest.fixture(scope="session")
def browser(chromium):
    """One Chromium for every browser test of the session (Playwright's sync API allows only
    one running instance per thread, so the site and explorer tests must share it)."""
    from browser_support import CHROMIUM_ARGS
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        # Playwright hides scrollbars by default; a reader's browser does not.
        b = p.chromium.launch(
            executable_path=chromium,
            args=CHROMIUM_ARGS,
            headless=True,
            ignore_default_args=["--hide-scrollbars"],
        )
        yield b
        b.close()
