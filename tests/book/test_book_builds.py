"""The test run's builds in the background (tests/book_builds.py) and the run's order
(tests/conftest.py): the tests that need no build first, each file's tests on one xdist worker;
a build started once per run, waited for, its failure or its death reported with why."""

from __future__ import annotations

import os
import sys
import types

import book_builds
import conftest
import pytest
from build_support import SIMULATED_BUILD


def _item(nodeid, fixtures=(), **params):
    return types.SimpleNamespace(
        nodeid=nodeid,
        fixturenames=list(fixtures),
        callspec=types.SimpleNamespace(params=params) if params else None,
    )


ITEMS = [
    _item("tests/book/test_book.py::test_toc_lists_existing_files"),
    _item("tests/book/test_book.py::test_build_log_is_clean", ["built_book"]),
    _item("tests/book/test_book.py::test_page[a-avx2]", ["request"], build=SIMULATED_BUILD),
    _item("tests/book/test_colab.py::test_runs[08]", ["fresh_colab"]),
    _item("tests/book/test_colab.py::test_every_chapter_ran", ["built_book", "fresh_colab"]),
    _item("tests/book/test_pdf.py::test_opens", ["built_pdf", "chromium"]),
    _item("tests/book/test_site_data.py::test_values[native]", ["any_build"], any_build="native"),
    _item("tests/book/test_browser.py::test_page[intro]", ["base_url", "browser"]),
    _item("tests/grading/test_grade.py::test_batch", ["tmp_path"]),
]


def test_each_test_needs_the_builds_its_fixtures_and_parameters_name(monkeypatch):
    monkeypatch.delenv("COURSE_BROWSER_BUILD", raising=False)
    needed = [conftest.builds_needed(item) for item in ITEMS]
    assert needed == [
        set(),
        {"native"},
        {SIMULATED_BUILD},
        set(),
        {"native"},
        {"native"},
        {"native"},
        {"native"},
        set(),
    ]
    monkeypatch.setenv("COURSE_BROWSER_BUILD", "/some/site")  # the browser tests read that one
    assert conftest.builds_needed(ITEMS[7]) == set()


@pytest.mark.parametrize("worker", [None, "gw0"])
def test_the_tests_that_need_no_build_run_first_and_a_files_tests_share_a_worker(
    monkeypatch, tmp_path, worker
):
    monkeypatch.delenv("COURSE_BROWSER_BUILD", raising=False)
    monkeypatch.setattr(conftest, "XDIST_GROUPS", tmp_path / "groups.json")
    if worker:
        monkeypatch.setenv("PYTEST_XDIST_WORKER", worker)
    else:
        monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    items = list(ITEMS)
    conftest.pytest_collection_modifyitems(None, items)
    order = [item.nodeid for item in items]
    free = [i.nodeid for i in ITEMS if not conftest.builds_needed(i)]
    assert order[: len(free)] == free  # first, in their order
    assert order[len(free) :] == [i.nodeid for i in ITEMS if conftest.builds_needed(i)]
    if not worker:
        assert not (tmp_path / "groups.json").exists()  # no xdist: no groups
        return
    # the controller's scheduler splits the run by the groups the workers wrote
    scheduler = conftest.GroupScheduling.__new__(conftest.GroupScheduling)
    groups = {nodeid: scheduler._split_scope(nodeid) for nodeid in order}
    colab = "tests/book/test_colab.py"
    assert groups[f"{colab}::test_runs[08]"] == colab
    assert groups[f"{colab}::test_every_chapter_ran"] == f"{colab}#build"
    assert len(set(groups.values())) == 8  # one per file and kind
    assert scheduler._split_scope("tests/x.py::test_new") == "tests/x.py"  # unknown: its file


@pytest.fixture
def jobs(tmp_path, monkeypatch):
    """book_builds' files under ``tmp_path``, and a stand-in build: ``script`` (Python run as
    the build's process, with the job's ``ok``/``failed`` paths and the run id as arguments)."""
    monkeypatch.setattr(book_builds, "TEST_OUTPUT", tmp_path)
    monkeypatch.setattr(book_builds, "AVX2_OUT", tmp_path / "book-sim")
    monkeypatch.setattr(book_builds, "BOOK_OUT", tmp_path / "book")
    monkeypatch.setenv("COURSE_TEST_RUN", "run-1")
    monkeypatch.delenv("COURSE_REUSE_BUILD", raising=False)
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)  # this process owns its builds
    monkeypatch.setattr(book_builds, "_POLL_SECONDS", 0.05)
    # its own children: the test run's real builds (started by this process) stay untouched
    monkeypatch.setattr(book_builds, "_CHILDREN", {})
    state = types.SimpleNamespace(script="")

    def command(name, rid):
        j = book_builds.job(name)
        return [sys.executable, "-c", state.script, str(j.ok), str(j.failed), rid]

    monkeypatch.setattr(book_builds, "_command", command)
    yield state
    for proc in book_builds._CHILDREN.values():
        proc.kill()
        proc.wait()


SUCCEEDS = "import sys, pathlib\npathlib.Path(sys.argv[1]).write_text(sys.argv[3])"


def test_a_build_starts_once_per_run_and_is_waited_for(jobs):
    jobs.script = SUCCEEDS
    book_builds.start("native")
    first = book_builds._started(book_builds.job("native"))
    book_builds.start("native")  # a second worker of the run asks: nothing new starts
    assert book_builds._started(book_builds.job("native")) == first
    assert first["run_id"] == "run-1" and first["owner"] == os.getpid()
    assert book_builds.wait("native") == book_builds.BOOK_OUT / "_build"


def test_a_build_of_an_earlier_run_is_not_taken_for_this_runs(jobs, monkeypatch):
    jobs.script = SUCCEEDS
    assert book_builds.wait("native")  # run-1's build (started by wait)
    monkeypatch.setenv("COURSE_TEST_RUN", "run-2")
    jobs.script = "import time; time.sleep(600)"
    book_builds.start("native")
    assert book_builds._result(book_builds.job("native")) is None  # under way, not run-1's
    book_builds.stop_owned()  # the session ends first: its build is stopped
    assert not book_builds._alive(book_builds._started(book_builds.job("native"))["pid"], "x")


def test_a_workers_build_belongs_to_the_session_and_outlives_the_worker(jobs, monkeypatch):
    """A pytest-xdist worker starts a build for the whole run: its owner is the controller (the
    worker's parent), so a worker that ends neither kills nor waits for it."""
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw1")
    jobs.script = "import time; time.sleep(600)"
    book_builds.start("native")
    info = book_builds._started(book_builds.job("native"))
    assert info["owner"] == os.getppid()
    book_builds.stop_owned()  # as a worker would at its end: not its build
    assert book_builds._alive(info["pid"], "native")


def test_a_failed_build_says_why(jobs):
    jobs.script = (
        "import sys, pathlib\n"
        "pathlib.Path(sys.argv[2]).write_text(sys.argv[3] + '\\nthe book build failed: ch. 8')"
    )
    with pytest.raises(book_builds.BuildFailed, match="the book build failed: ch. 8"):
        book_builds.wait(SIMULATED_BUILD)


def test_a_build_process_that_dies_is_reported_with_its_output(jobs):
    jobs.script = "import os, sys; print('out of memory', flush=True); os._exit(9)"
    with pytest.raises(book_builds.BuildFailed, match="ended without a result(?s:.*)out of memory"):
        book_builds.wait("native")


def test_a_build_the_run_never_started_is_an_error_not_a_hang(jobs, monkeypatch):
    monkeypatch.setattr(book_builds, "start", lambda name: None)
    with pytest.raises(book_builds.BuildFailed, match="never started"):
        book_builds.wait("native")


def test_the_build_script_records_a_crash_as_a_failure(jobs, monkeypatch):
    def crash():
        raise KeyError("no such chapter")

    monkeypatch.setattr(book_builds, "build_native", crash)
    assert book_builds.main(["native", "run-1"]) == 1
    first, _, why = book_builds.job("native").failed.read_text().partition("\n")
    assert first == "run-1" and "crashed" in why and "no such chapter" in why


@pytest.mark.parametrize("choice", ["", "default", "avx2", "AVX512", "native", "no-vector"])
def test_the_native_build_never_shares_a_folder_with_the_simulated_one(choice):
    """Both builds run at once: whatever CPU path the environment chose for the native one, its
    folder is not the simulated CPU's build's (any of tools.spread.CPUS), nor the default one's
    unless no path was chosen."""
    from tools.spread import CPUS

    native = book_builds.native_out({"ATEN_CPU_CAPABILITY": choice} if choice else {})
    simulated = {book_builds.TEST_OUTPUT / f"book-{name}" for name in (*CPUS, SIMULATED_BUILD)}
    assert native not in simulated, native
    assert (native == book_builds.TEST_OUTPUT / "book") == (choice == "")
    assert book_builds.job(SIMULATED_BUILD).out in simulated


def test_a_build_that_lost_the_kernel_port_race_runs_once_more_and_no_other_does():
    def runs(*outcomes):
        calls = []

        def run():
            code, out = outcomes[len(calls)]
            calls.append(code)
            return types.SimpleNamespace(returncode=code, stdout=out, stderr="")

        return run, calls

    race = f"zmq.error.ZMQError: {book_builds.PORT_RACE} (addr='tcp://127.0.0.1:35691')"
    run, calls = runs((1, race), (0, "build succeeded"))
    assert book_builds.once_more_if_a_port_was_taken(run).returncode == 0 and calls == [1, 0]
    run, calls = runs((1, race), (1, race))  # a second race stands
    assert book_builds.once_more_if_a_port_was_taken(run).returncode == 1 and calls == [1, 1]
    run, calls = runs((1, "NameError: name 'x' is not defined"))  # a real failure: no retry
    assert book_builds.once_more_if_a_port_was_taken(run).returncode == 1 and calls == [1]
    run, calls = runs((0, "build succeeded"))
    assert book_builds.once_more_if_a_port_was_taken(run).returncode == 0 and calls == [0]


AUTOGROUP = "/proc/self/autogroup"


def _in_a_new_session(code: str, env: dict | None = None) -> str:
    """Run ``code`` in a Python of its own session (its own scheduling group, so this test's is
    never changed) and return what it printed."""
    import subprocess

    proc = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), **(env or {})},
        start_new_session=True,
        check=True,
    )
    return proc.stdout.strip()


def _can_raise_priority() -> bool:
    """Whether this process may lower a nice value: CAP_SYS_NICE (bit 23) among its effective
    capabilities (root has it)."""
    with open("/proc/self/status") as status:
        caps = next(line for line in status if line.startswith("CapEff:"))
    return bool(int(caps.split()[1], 16) >> 23 & 1)


@pytest.mark.skipif(not os.path.exists(AUTOGROUP), reason="no autogroups (not Linux's CFS)")
def test_the_native_build_and_its_kernels_take_the_cores_first():
    """``take_priority`` sets its session's group to ``NATIVE_NICE`` and hands the kernels the
    same value, which the kernel launcher's first lines take for their own session; without the
    privilege it changes nothing and hands nothing on."""
    import colab_env

    took = _in_a_new_session(
        f"import book_builds; print(book_builds.take_priority()); print(open({AUTOGROUP!r}).read())"
    )
    env_line, group = took.splitlines()
    nice = book_builds.NATIVE_NICE
    if _can_raise_priority():
        assert env_line == repr({colab_env.AUTOGROUP_NICE: str(nice)})
        assert group.endswith(f"nice {nice}")
    else:
        assert env_line == "{}" and group.endswith("nice 0")
    # a kernel: its own session, the value from its environment
    kernel = _in_a_new_session(
        colab_env.TAKE_PRIORITY + f"print(open({AUTOGROUP!r}).read())",
        {colab_env.AUTOGROUP_NICE: str(nice)},
    )
    assert kernel.endswith(f"nice {nice if _can_raise_priority() else 0}")
    # a kernel of any other build or test: the default
    other = _in_a_new_session(colab_env.TAKE_PRIORITY + f"print(open({AUTOGROUP!r}).read())")
    assert other.endswith("nice 0")
    assert colab_env.LAUNCHER.startswith(colab_env.TAKE_PRIORITY)
