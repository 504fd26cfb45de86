"""The registry of generated files (``tools/sync.py``; ``./course sync`` and ``./course check``).

Fast: every generated file of the checkout is current; on a copy of the repository, staling
one file of each kind makes the check exit 1 naming that kind and file, and the sync makes the
check pass again.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tools import ROOT, sync


def test_every_generated_file_is_current():
    stale = sync.plan(ROOT)
    assert not stale, (
        "generated files are stale (run `./course sync` and commit the result):\n"
        + "\n".join(f"  [{k.name}] {c.path.relative_to(ROOT)}: {c.reason}" for k, c in stale)
    )


def test_registry_names_each_kind_once():
    names = [k.name for k in sync.KINDS]
    assert len(names) == len(set(names))
    assert set(names) == {
        "format",
        "colab",
        "exercises",
        "worksheets",
        "reader",
        "readme",
        "exercise-table",
        "module-map",
    }


@pytest.fixture
def repo_copy(tmp_path) -> Path:
    """What the generators read and write, copied (course_lib is imported from the checkout)."""
    dest = tmp_path / "repo"
    dest.mkdir()
    for name in ("_config.yml", "_toc.yml", "pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, dest / name)
    ignore = shutil.ignore_patterns("_ext", "__pycache__", ".ipynb_checkpoints", "*.grade.json")
    for folder in ("book", "solutions", "exercises", "notebooks"):
        shutil.copytree(ROOT / folder, dest / folder, ignore=ignore)
    # what the module map names, read only: linked, not copied
    shutil.copy(ROOT / "CONTRIBUTING.md", dest / "CONTRIBUTING.md")
    for folder in ("course_lib", "tools", "benchmarks", "tests", ".github", "book/_ext"):
        (dest / folder).symlink_to(ROOT / folder)
    return dest


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text(encoding="utf-8")
    assert old in text, f"{old!r} not in {path}"
    path.write_text(text.replace(old, new, 1), encoding="utf-8")


def _stale_format(root):
    path = root / "book" / "04_attention.md"
    _edit(
        path,
        "print(\"ages['cat']      =\", ages[\"cat\"])",
        "print(\"ages['cat']      =\",ages[ \"cat\" ])",
    )
    return path


def _stale_colab(root):
    path = root / "book" / "04_attention.ipynb"
    _edit(path, "Attention is a soft lookup", "Attention is a hard lookup")
    return path


def _stale_exercises(root):
    path = root / "exercises" / "04_attention.ipynb"
    nb = json.loads(path.read_text(encoding="utf-8"))
    nb["cells"][-1]["source"] = ["edited by hand\n"]
    path.write_text(json.dumps(nb, indent=1) + "\n", encoding="utf-8")
    return path


def _stale_worksheets(root):
    path = root / "book" / "worked" / "worksheets" / "ex1_forward_answers.html"
    path.write_text(path.read_text(encoding="utf-8") + "<!-- edited -->\n", encoding="utf-8")
    return path


def _stale_reader(root):
    path = root / "notebooks" / "04_attention.ipynb"
    _edit(path, "they share most of the weight", "they share much of the weight")
    return path


def _stale_reader_from_site_data(root):
    """A new glued value in notebooks/site.json (a rebuild changed a number): the page's reader
    notebook is stale."""
    site = root / "notebooks" / "site.json"
    data = json.loads(site.read_text(encoding="utf-8"))
    data["pages"]["book/04_attention"]["glue"]["lookup_w_lion"]["text/plain"] = "'0.07'"
    site.write_text(
        json.dumps(data, indent=1, ensure_ascii=False, sort_keys=True) + "\n", encoding="utf-8"
    )
    return root / "notebooks" / "04_attention.ipynb"


def _stale_readme(root):
    path = root / "README.md"
    _edit(path, "| 4. Attention", "| 4. Attentions")
    return path


def _stale_exercise_table(root):
    path = root / "exercises" / "README.md"
    text = path.read_text(encoding="utf-8")
    stale = re.sub(  # one exercise fewer in 04_attention's count, whatever the count is
        r"(\| `04_attention` \| .*\| )(\d+)( \| [\d.]+ \|)",
        lambda m: f"{m[1]}{int(m[2]) - 1}{m[3]}",
        text,
    )
    assert stale != text
    path.write_text(stale, encoding="utf-8")
    return path


STALERS = {
    "format": _stale_format,
    "colab": _stale_colab,
    "exercises": _stale_exercises,
    "worksheets": _stale_worksheets,
    "reader": _stale_reader,
    "reader (site data)": _stale_reader_from_site_data,
    "readme": _stale_readme,
    "exercise-table": _stale_exercise_table,
}


def _stale_module_map(root):
    """A module the map forgets, and one it names that is gone: the map cannot be written."""
    path = root / "CONTRIBUTING.md"
    _edit(path, "`rnn`, `scaling` (Ch. 1)", "`scaling` (Ch. 1)")
    _edit(
        path,
        "`course_lib/labs/modern.py`, `muon.py`",
        "`course_lib/labs/modern.py`, `muon.py`, `gone.py`",
    )
    return path


CHECKED_ONLY = {"module-map": _stale_module_map}  # no generator: sync reports, the author edits


def test_each_kind_can_be_staled():
    kinds = {k.split(" ")[0] for k in STALERS} | set(CHECKED_ONLY)
    assert kinds == {k.name for k in sync.KINDS}


def test_a_stale_module_map_fails_check_and_sync_naming_what(repo_copy, capsys):
    _stale_module_map(repo_copy)
    capsys.readouterr()
    assert sync.main(["--check", "--root", str(repo_copy), "--kind", "module-map"]) == 1
    out = capsys.readouterr().out
    assert "does not name course_lib/labs/rnn" in out, out
    assert "names course_lib/labs/gone.py, which does not exist" in out, out
    assert sync.main(["--root", str(repo_copy), "--kind", "module-map"]) == 1
    out = capsys.readouterr().out
    assert "FAILED [module-map]: CONTRIBUTING.md" in out and "--from-build" not in out, out


def test_check_names_each_stale_file_and_sync_fixes_them(repo_copy, capsys):
    """One file of each kind staled at once (one check and one sync for all: the check costs
    seconds): the check exits 1 naming each with its kind; after the sync it passes; a reader
    notebook of no page is reported and removed."""
    root = repo_copy
    staled = {
        kind.split(" ")[0] + " " + STALERS[kind](root).relative_to(root).as_posix()
        for kind in STALERS
    }
    extra = root / "notebooks" / "99_gone.ipynb"
    shutil.copy(root / "notebooks" / "intro.ipynb", extra)
    capsys.readouterr()
    assert sync.main(["--check", "--root", str(root)]) == 1
    out = capsys.readouterr().out
    reported = set(re.findall(r"^stale \[([\w-]+)\]: (\S+)", out, re.M))
    missing = sorted(s for s in staled if tuple(s.split(" ")) not in reported)
    assert not missing, f"the check did not report {missing}:\n{out}"
    assert ("reader", "notebooks/99_gone.ipynb") in reported
    assert sync.main(["--root", str(root)]) == 0
    capsys.readouterr()
    assert sync.main(["--check", "--root", str(root)]) == 0, capsys.readouterr().out
    assert not extra.exists()
    assert "0.07" in (root / "notebooks" / "04_attention.ipynb").read_text(encoding="utf-8")


def test_a_glued_name_the_build_lacks_is_reported_not_a_crash(repo_copy, capsys):
    md = repo_copy / "book" / "where_next.md"
    md.write_text(
        md.read_text(encoding="utf-8") + "\nNew: {glue:text}`not_built_yet`.\n", encoding="utf-8"
    )
    assert sync.main(["--check", "--root", str(repo_copy), "--kind", "reader"]) == 1
    out = capsys.readouterr().out
    assert "notebooks/where_next.ipynb (cannot be generated:" in out and "not_built_yet" in out
    assert sync.main(["--root", str(repo_copy), "--kind", "reader"]) == 1
    assert "--from-build" in capsys.readouterr().out


def test_course_script_has_sync_and_check():
    text = (ROOT / "course").read_text(encoding="utf-8")
    assert "python -m tools.sync \"$@\"" in text and "python -m tools.sync --check" in text
    out = subprocess.run([str(ROOT / "course"), "help"], capture_output=True, text=True).stdout
    assert "./course sync" in out and "./course check" in out


def test_ci_runs_the_whole_suite_in_one_run_the_builds_beside_the_rest():
    """.ci/run runs the README's test command on the whole suite, once (no tier left out), on
    pytest-xdist workers that keep the run's order (the tests that need no build first, while
    the builds run: tests/conftest.py) and each file's groups on one worker."""
    text = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert "set -euo pipefail" in text  # a failed command stops the script
    # the commands (not the comments), each with its continuation lines
    calls = [m.group(0) for m in re.finditer(r"^\./course test(?:[^\n]*\\\n)*[^\n]*", text, re.M)]
    assert len(calls) == 1, calls
    call = calls[0]
    assert " -m " not in call and "--fast" not in call and " -k " not in call, call
    for flag in ("-n ", "--dist loadgroup", "--no-loadscope-reorder", "--durations="):
        assert flag in call, f".ci/run's test command lacks {flag!r}: {call}"
    # ./course test --fast stays the fast tier: "not slow and not browser"
    course = (ROOT / "course").read_text(encoding="utf-8")
    assert 'pytest -m "not slow and not browser"' in course


def test_a_readers_build_is_told_how_its_numbers_compare_and_never_asked_to_commit(
    tmp_path, monkeypatch, capsys
):
    """`./course build` ends with `tools.sync --compare-build`: a reader's build whose measured
    numbers differ within the spread hears that nothing is to be done; one that differs beyond
    it (a changed chapter) hears so, with the maintainers' command; neither is asked to commit
    anything."""
    import copy
    import json

    from tools import reader, spread

    build = tmp_path / "_build"
    build.mkdir()
    (build / reader.SITE_BUILD_FILE).write_text("{}")  # what a finished HTML build writes
    published = reader.load_site_data(ROOT)
    (page, key), tol = next(
        (k, t)
        for k, t in sorted(spread.tolerances().items())
        if t.kind == "number" and t.tolerance > 0 and k[1] not in reader.MEASURED.get(k[0], ())
    )
    text = spread.glue_text(published["pages"][page]["glue"][key])
    value = spread.parse_number(text) + tol.tolerance / 2
    moved = json.dumps(f"{value:.6g}") if text[:1] in "'\"" else f"{value:.6g}"

    def run(built: dict) -> tuple[int, str]:
        monkeypatch.setattr(reader, "site_data_from_build", lambda _: built)
        rc = sync.main(["--compare-build", str(build)])
        return rc, capsys.readouterr().out

    said = []
    rc, out = run(copy.deepcopy(published))
    assert rc == 0 and "exactly the published numbers" in out
    said.append(out)
    within = copy.deepcopy(published)
    within["pages"][page]["glue"][key] = {"text/plain": moved.replace('"', "'")}
    rc, out = run(within)
    assert rc == 0 and "within the spread" in out and "nothing to do" in out, out
    said.append(out)
    beyond = copy.deepcopy(published)
    first = next(iter(beyond["labels"]))
    beyond["labels"][first] = {**beyond["labels"][first], "title": "changed"}
    rc, out = run(beyond)
    assert rc == 1 and "./course sync --from-build" in out, out
    said.append(out)
    assert not [s for s in said if "commit" in s.lower()], said
    course = (ROOT / "course").read_text(encoding="utf-8")
    build_step = course[course.index("  build)") : course.index("  pdf)")]
    assert "--compare-build" in build_step and "commit" not in build_step.lower()
