"""Every JavaScript file of the repository passes Biome's linter (``biome.jsonc``: the
recommended rules less four matters of taste, warnings failing too): the site's scripts
(``book/_ext/*_static/``), the PDF printer's (``tools/pdf_static/``), the browser tests'
(``tests/browser_js/``) and course_lib's explorer loader, linted as it is rendered (a Python
%-template, not JavaScript until filled in).

Biome is pinned in ``package.json`` (a devDependency: ``./course setup`` runs ``npm ci``). Where
it is not installed the tests skip, saying so, except under CI (``CI`` set), where they fail:
CI must lint.
"""

from __future__ import annotations

import json
import os
import re
import subprocess

import pytest

from tools import ROOT

BIOME = ROOT / "node_modules" / ".bin" / "biome"


@pytest.fixture(scope="module")
def biome() -> str:
    if not BIOME.exists():
        why = "Biome is not installed: run ./course setup (npm ci; needs Node.js and npm)"
        if os.environ.get("CI"):
            pytest.fail(why)
        pytest.skip(why)
    return str(BIOME)


def _lint(biome: str, *args: str, cwd=ROOT) -> subprocess.CompletedProcess:
    return subprocess.run(
        [biome, "lint", "--error-on-warnings", "--colors=off", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )


def _lint_text(biome: str, folder, text: str) -> subprocess.CompletedProcess:
    """``text`` as a file in ``folder``, linted with the repository's rules."""
    config = {"extends": [str(ROOT / "biome.jsonc")], "vcs": {"enabled": False}}
    (folder / "biome.json").write_text(json.dumps({**config, "files": {"includes": ["**/*.js"]}}))
    (folder / "script.js").write_text(text, encoding="utf-8")
    return _lint(biome, ".", cwd=folder)


def test_every_javascript_file_passes_biome(biome):
    proc = _lint(biome, ".")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    checked = int(re.search(r"Checked (\d+) files?", proc.stdout + proc.stderr).group(1))
    tracked = subprocess.run(
        ["git", "ls-files", "*.js"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    # every tracked .js but the loader (next test), and biome.jsonc itself
    assert checked >= len(tracked) - 1, (checked, tracked)


def test_the_explorer_loader_as_rendered_passes_biome(biome, tmp_path):
    from course_lib.viz.explorers import to_html

    page = to_html({"mark": "point", "hconcat": []}, "a test chart")
    scripts = re.findall(r"<script[^>]*>(.*?)</script>", page, flags=re.S)
    assert scripts, page
    for script in scripts:
        proc = _lint_text(biome, tmp_path, script)
        assert proc.returncode == 0, proc.stdout + proc.stderr


def test_biome_fails_on_a_defect(biome, tmp_path):
    """A callback that returns from forEach and an assignment inside a condition: both fail."""
    bad = "const a = [];\n[1].forEach((x) => a.push(x));\nlet n;\nif ((n = a.pop())) a.push(n);\n"
    proc = _lint_text(biome, tmp_path, bad)
    assert proc.returncode != 0
    out = proc.stdout + proc.stderr
    assert "useIterableCallbackReturn" in out and "noAssignInExpressions" in out, out
