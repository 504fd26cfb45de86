"""The library code passes the lint gate: ``ruff check`` (pycodestyle, pyflakes, import order,
bugbear) and ``ruff format --check`` on every Python file of ``LIBRARY``, with the settings in
``pyproject.toml`` ([tool.ruff]: 100 columns; files other branches own are excluded there until
they merge). The chapters' code cells have their own width and check
(tests/tools/test_code_style.py).

Fix a failure with ``ruff format <paths>`` and ``ruff check --fix <paths>``, then by hand."""

import subprocess
import sys

import pytest

from tools import ROOT

LIBRARY = ["course_lib", "tools", "tests", "benchmarks", "book/_ext"]


def _ruff(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "ruff", *args, *LIBRARY],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )


@pytest.mark.parametrize(
    "args",
    [("check", "--no-fix", "--output-format", "concise"), ("format", "--check")],
    ids=["check", "format"],
)
def test_library_code_passes_ruff(args):
    proc = _ruff(*args)
    assert proc.returncode == 0, (
        f"`ruff {' '.join(args)}` found problems in the library code:\n{proc.stdout}{proc.stderr}"
    )


def test_the_gate_sees_every_library_file():
    """No Python file of the library paths is left out of the gate (only generated notebooks)."""
    listed = _ruff("check", "--show-files").stdout
    for folder in ("course_lib", "tools", "tests", "benchmarks", "book/_ext"):
        for path in (ROOT / folder).rglob("*.py"):
            rel = path.relative_to(ROOT).as_posix()
            assert rel in listed, f"{rel} is not linted: see extend-exclude in pyproject.toml"
