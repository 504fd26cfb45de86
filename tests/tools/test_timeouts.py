"""Every test has a time limit, so a hung test fails naming itself instead of eating CI's
budget: pytest-timeout with the default in pyproject.toml, set-up included, and the shared
fixtures' extra time (``FIXTURE_SECONDS`` in tests/conftest.py) given to the test that builds
them."""

from __future__ import annotations

import signal
import subprocess
import sys

import pytest


def test_the_suite_runs_with_a_time_limit(request):
    assert request.config.pluginmanager.hasplugin("timeout")
    assert float(request.config.getini("timeout")) > 0
    assert request.config.getini("timeout_func_only") is False  # set-up counts too


def test_a_hung_test_fails_naming_itself(tmp_path):
    (tmp_path / "pytest.ini").write_text("[pytest]\ntimeout = 1\n")
    (tmp_path / "test_hang.py").write_text(
        "import time\n\ndef test_fine():\n    pass\n\ndef test_hangs():\n    time.sleep(30)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", str(tmp_path)]
        + [f"-pno:{p}" for p in ("cacheprovider", "nbval", "xdist", "anyio")],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 1, proc.stdout
    assert "Timeout (>1.0s) from pytest-timeout" in proc.stdout
    assert "FAILED test_hang.py::test_hangs" in proc.stdout and "1 passed" in proc.stdout


@pytest.mark.skipif(not hasattr(signal, "setitimer"), reason="pytest-timeout's signal method")
def test_a_shared_fixture_gives_its_test_more_time():
    conftest = sys.modules["conftest"]
    left, _ = signal.getitimer(signal.ITIMER_REAL)
    assert left > 0, "pytest-timeout's timer is not running during the test"
    try:
        for name, extra in [("built_book", conftest.FIXTURE_SECONDS["built_book"]), ("x", 0)]:
            before, _ = signal.getitimer(signal.ITIMER_REAL)
            conftest.extend_time_limit(name)
            after, _ = signal.getitimer(signal.ITIMER_REAL)
            assert after - before == pytest.approx(extra, abs=5), name
    finally:
        signal.setitimer(signal.ITIMER_REAL, left)


@pytest.fixture(scope="session")
def _time_left():
    return signal.getitimer(signal.ITIMER_REAL)[0] if hasattr(signal, "getitimer") else 0.0


def test_the_session_applies_it_to_session_fixtures(request, monkeypatch):
    """Through the plugin, a session-scoped fixture's set-up gets the extra time too (a hook of
    this folder's conftest would not be called for it)."""
    conftest = sys.modules["conftest"]
    assert request.config.pluginmanager.has_plugin("course-time-limits")
    monkeypatch.setitem(conftest.FIXTURE_SECONDS, "_time_left", 1000)
    left = signal.getitimer(signal.ITIMER_REAL)[0] if hasattr(signal, "getitimer") else 0.0
    try:
        assert request.getfixturevalue("_time_left") > left + 900
    finally:
        if hasattr(signal, "setitimer"):
            signal.setitimer(signal.ITIMER_REAL, left)


def test_the_extra_times_name_real_fixtures():
    """A renamed fixture must take its extra time along (read from the test files' source)."""
    import re
    from pathlib import Path

    fixture = re.compile(r"^@pytest\.fixture\b.*\n(?:@.*\n)*def (\w+)\(", re.M)
    known = {
        name
        for path in Path(__file__).parents[1].rglob("*.py")
        for name in fixture.findall(path.read_text(encoding="utf-8"))
    }
    conftest = sys.modules["conftest"]
    assert set(conftest.FIXTURE_SECONDS) <= known, set(conftest.FIXTURE_SECONDS) - known
