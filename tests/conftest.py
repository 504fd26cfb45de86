"""Shared fixtures, and the order of a test run.

``built_book``, ``built_book_avx2``, ``any_build``, ``built_pdf``: the test run's builds of
the site (``tests/book_builds.py``), started in the background as soon as the run is collected;
the tests that need no build run first (``pytest_collection_modifyitems``), so the builds, the
longest steps of the slow tier, overlap with them. Set ``COURSE_REUSE_BUILD=1`` to reuse the
previous test builds while iterating on tests (never in CI).

Under pytest-xdist (``.ci/run``: ``-n 2 --dist loadgroup --no-loadscope-reorder``) each test
file's tests go to one worker, those that need a build as a second group of the file, after
every group that needs none: a module's fixtures are made once, and a worker waits for a build
only when nothing else is left.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import book_builds
import colab_env
import pytest
import torch
from build_support import BUILD_NAMES, SIMULATED_BUILD, Build, get_build, simulated_pages
from xdist.scheduler import LoadScopeScheduling

TEST_OUTPUT = book_builds.TEST_OUTPUT


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

    state, _ = colab_env.ensure(tmp_path_factory.mktemp("setup"))
    times: dict[str, float] = {}
    yield types.SimpleNamespace(
        **{
            **state,
            "python": Path(state["python"]),
            "source": Path(state["source"]),
        },
        times=times,
    )
    report = TEST_OUTPUT / "colab-report.json"
    # the venv's times under one part, whichever process built it (counted once)
    merge_report(report, "venv", {k: state[k] for k in ("venv_seconds", "setup_cell_seconds")})
    part = {k: state[k] for k in ("preinstalled", "installed_by_setup_cell")}
    part.update(
        notebooks=times, notebooks_run=len(times), notebook_seconds=round(sum(times.values()), 1)
    )
    merge_report(report, os.environ.get("PYTEST_XDIST_WORKER", "main"), part)


def builds_needed(item) -> set[str]:
    """The builds (``BUILD_NAMES``) a collected test reads, through its fixtures or its
    ``build``/``any_build`` parameter."""
    from browser_support import custom_build

    names = set(getattr(item, "fixturenames", ()))
    params = getattr(getattr(item, "callspec", None), "params", {})
    needed = {params[p] for p in ("build", "any_build") if params.get(p) in BUILD_NAMES}
    if names & {"built_book", "built_pdf"}:
        needed.add("native")
    if names & {"site_dir", "base_url"} and custom_build() is None:
        needed.add("native")
    if "built_book_avx2" in names:
        needed.add(SIMULATED_BUILD)
    return needed


# Under pytest-xdist, each test's group (below), written by the workers as they collect, read by
# the controller's scheduler (``pytest_xdist_make_scheduler``).
XDIST_GROUPS = TEST_OUTPUT / "xdist-groups.json"


@pytest.hookimpl(trylast=True)  # after every other plugin's reordering
def pytest_collection_modifyitems(config, items):
    """The tests that need no build first, in their order, while the builds run; then the rest.
    Under pytest-xdist each file's tests form one group, those that need a build a second one
    (``XDIST_GROUPS``)."""
    needs = {id(item): bool(builds_needed(item)) for item in items}
    items.sort(key=lambda item: needs[id(item)])  # stable: the order within each part is kept
    if os.environ.get("PYTEST_XDIST_WORKER"):
        groups = {
            item.nodeid: item.nodeid.split("::")[0] + ("#build" if needs[id(item)] else "")
            for item in items
        }
        XDIST_GROUPS.parent.mkdir(exist_ok=True)
        part = XDIST_GROUPS.with_suffix(f".{os.environ['PYTEST_XDIST_WORKER']}.tmp")
        part.write_text(json.dumps(groups))
        os.replace(part, XDIST_GROUPS)  # every worker writes the same groups: one wins whole


class GroupScheduling(LoadScopeScheduling):
    """``--dist loadgroup``: each group of ``XDIST_GROUPS`` goes to one worker, whole, in the
    run's order (with ``--no-loadscope-reorder``). pytest-xdist's own loadgroup cannot do it
    under pytest 9: it renames ``item._nodeid`` to carry the group, and pytest 9 names an item
    by its structured id instead, so every test would be a group of its own (a module's
    fixtures made once per worker: the exercise gradings twice, measured)."""

    groups: dict[str, str] | None = None

    def _split_scope(self, nodeid: str) -> str:
        if self.groups is None:  # the workers wrote it before they reported their tests
            self.groups = json.loads(XDIST_GROUPS.read_text())
        return self.groups.get(nodeid) or nodeid.split("::")[0]


def pytest_xdist_make_scheduler(config, log):
    if config.getvalue("dist") == "loadgroup":
        return GroupScheduling(config, log)
    return None


def pytest_collection_finish(session):
    """Start every build the collected tests need, now (``tests/book_builds.py``); each
    pytest-xdist worker asks, the first starts it."""
    if session.config.option.collectonly:
        return
    for name in sorted(set().union(*(builds_needed(item) for item in session.items))):
        book_builds.start(name)


def pytest_sessionfinish(session):
    if not os.environ.get("PYTEST_XDIST_WORKER"):  # the session that owns the builds
        book_builds.stop_owned()


def _wait_for(name: str) -> Path:
    try:
        return book_builds.wait(name)
    except book_builds.BuildFailed as exc:
        pytest.fail(str(exc), pytrace=False)


@pytest.fixture(scope="session")
def built_book() -> Path:
    """Path of the build folder (``.../_build``) of the clean, warning-free build of the whole
    site, whose chapters executed in the fresh Colab (``tests/book_builds.py``)."""
    return _wait_for("native")


@pytest.fixture(scope="session")
def built_book_avx2() -> Build:
    """The pages whose glued values the CPU changes (``build_support.simulated_pages()``:
    ``tools.spread.cpu_pages()``, the chapters that train or sample in float32 and glue what
    they measure) built again under the simulated CPU (``tests/book_builds.py``)."""
    return Build(SIMULATED_BUILD, _wait_for(SIMULATED_BUILD), tuple(simulated_pages()))


@pytest.fixture(scope="session", params=BUILD_NAMES)
def any_build(request) -> Build:
    """Each build whose computed values the tests check (``build_support``): this machine's
    (the whole site) and the simulated AVX2 laptop's (the pages that depend on the CPU)."""
    return get_build(request, request.param)


@pytest.fixture(scope="session")
def built_pdf(built_book, chromium) -> Path:
    """The whole-book PDF of the clean test build (``built_book`` prints it first)."""
    from tools.pdf import PDF_NAME

    pdf = built_book / "pdf" / PDF_NAME
    if not pdf.is_file():
        log = book_builds.PDF_LOG
        text = log.read_text() if log.exists() else "(no log: the build was reused?)"
        pytest.fail(f"no PDF at {pdf}; {log}:\n{text[-3000:]}", pytrace=False)
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
