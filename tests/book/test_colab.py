"""Colab, as a reader meets it.

Fast: every paired chapter notebook is in sync with its ``.md`` (regenerated into memory and
compared byte for byte: ``jupytext --sync`` trusts mtimes and ``--diff`` exits 0 on a
difference, so neither can be the test), every set-up cell is the generated one, the set-up
cell does nothing outside Colab and installs from ``_config.yml``'s repository inside it, and
Colab links name notebooks that exist (a chapter's link opens its reader notebook).

Slow ("fresh Colab", tests/colab_env.py): a new virtual environment with only Colab's packages
(torch 2.13.0, numpy, matplotlib, ipywidgets, ipykernel, ...; no ``course_lib``) gets
``course_lib`` from the set-up cell (installed from this checkout through ``COURSE_LIB_SOURCE``).
Every chapter runs there once, in the clean test build, whose kernel is that venv's (what "Open
in Colab" opens is the chapter's reader notebook, the same code cells: tests/book/test_reader.py);
every solution notebook runs there top to bottom under nbval, each in a clean kernel and an
empty working folder, and must print the outputs it stores. Timings go to
``test-output/colab-report.json``.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
import types
from pathlib import Path

import nbformat
import pytest
from colab_env import KERNEL_LOG, PREINSTALLED, TEST_OUTPUT

from tools import ROOT, colab, reader

CHAPTERS = colab.chapter_paths(ROOT)
SOLUTIONS = sorted((ROOT / "solutions").glob("*.ipynb"))


def _rel(p: Path) -> str:
    return p.relative_to(ROOT).as_posix()


# --------------------------------------------------------------------------- fast checks
def test_every_pair_and_setup_cell_is_up_to_date():
    changes = colab.sync(ROOT, check=True)
    assert not changes, (
        "out of date (run `python -m tools.colab` and commit the result):\n"
        + "\n".join(f"  {_rel(c.path)}: {c.reason}" for c in changes)
    )


def test_chapters_are_found_from_the_toc():
    assert CHAPTERS, "no MyST notebook chapters found in _toc.yml"
    assert ROOT / "book" / "01_why_transformers.md" in CHAPTERS


@pytest.mark.parametrize("md", CHAPTERS, ids=_rel)
def test_chapter_setup_cell_and_pair(md):
    import jupytext

    source = colab.setup_cell_source(ROOT)
    first = next(c for c in jupytext.read(md).cells if c.cell_type == "code")
    assert first.source == source, f"{_rel(md)}: first code cell is not the Colab set-up cell"
    assert "remove-cell" in first.metadata.get("tags", []), f"{_rel(md)}: set-up cell not hidden"

    ipynb = md.with_suffix(".ipynb")
    assert ipynb.is_file(), f"{_rel(ipynb)} is missing: run `python -m tools.colab`"
    nb = nbformat.read(ipynb, as_version=4)
    nbformat.validate(nb)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert code[0].id == colab.SETUP_CELL_ID and code[0].source == source
    assert all(not c.outputs for c in code), f"{_rel(ipynb)} carries outputs"
    assert len({c.id for c in nb.cells}) == len(nb.cells), f"{_rel(ipynb)}: repeated cell ids"
    assert nb.metadata["jupytext"]["formats"] == colab.PAIRING
    # Same cells, same order, as the .md (what Colab runs is what the site shows); Markdown
    # differs only where a tab set was written out as plain paragraphs.
    text_cells = jupytext.read(md).cells
    assert [c.source for c in nb.cells] == [
        colab.plain_tab_sets(c.source) if c.cell_type == "markdown" else c.source
        for c in text_cells
    ]
    assert not any("{tab-set}" in c.source or "{tab-item}" in c.source for c in nb.cells), (
        f"{_rel(ipynb)}: a tab set was left as raw fences, which Colab shows as text"
    )


@pytest.mark.parametrize("path", sorted(colab.exercise_notebook_paths(ROOT)), ids=_rel)
def test_exercise_and_solution_notebooks_start_with_the_setup_cell(path):
    nb = nbformat.read(path, as_version=4)
    first = next(c for c in nb.cells if c.cell_type == "code")
    assert first.id == colab.SETUP_CELL_ID, f"{_rel(path)}: first code cell is not colab-setup"
    assert first.source == colab.setup_cell_source(ROOT)
    assert "remove-cell" in first.metadata.get("tags", [])


def test_regeneration_is_deterministic_and_keeps_ids():
    md_text = (ROOT / "book" / "01_why_transformers.md").read_text(encoding="utf-8")
    fresh = colab.paired_ipynb_text(md_text)
    assert fresh == colab.paired_ipynb_text(md_text), "two regenerations differ"
    assert colab.paired_ipynb_text(md_text, fresh) == fresh, "--update is not idempotent"

    # Edit one prose cell: only that cell may change its id (jupytext --update semantics).
    old = nbformat.reads(fresh, as_version=4)
    target = next(c for c in old.cells if c.cell_type == "markdown" and "## Recap" in c.source)
    edited = md_text.replace("## Recap", "## Recap (edited)", 1)
    new = nbformat.reads(colab.paired_ipynb_text(edited, fresh), as_version=4)
    assert len(new.cells) == len(old.cells)
    for a, b in zip(old.cells, new.cells):
        if a.id != target.id:
            assert a.id == b.id, f"cell {a.id} lost its id after an unrelated edit"
    # A new cell gets a fresh, unique id; every unchanged cell keeps its own.
    added = md_text.replace("\n## Recap", "\n```{code-cell} ipython3\nx = 1\n```\n\n## Recap", 1)
    new = nbformat.reads(colab.paired_ipynb_text(added, fresh), as_version=4)
    assert len({c.id for c in new.cells}) == len(new.cells), "repeated cell ids"
    old_ids = {c.source: c.id for c in old.cells}
    kept = [c for c in new.cells if c.source in old_ids]
    assert len(kept) >= len(old.cells) - 1
    assert all(c.id == old_ids[c.source] for c in kept), "unchanged cells changed their ids"
    assert next(c for c in new.cells if c.source == "x = 1").id not in old_ids.values()


TAB_SET_MD = """Before.

::::{tab-set}
:class: five-levels

:::{tab-item} Child
:sync: child
A story, said simply.
Still the first paragraph.

A second paragraph.
:::

:::{tab-item} Undergraduate
$$
y = xW
$$
which is a matrix product.
:::

:::{tab-item} Researcher
- a list, {cite:p}`vaswani2017attention`
:::
::::

:::{admonition} Answer
:class: dropdown
An admonition stays as it is.
:::
"""


def test_tab_sets_become_plain_markdown_for_colab():
    out = colab.plain_tab_sets(TAB_SET_MD)
    assert "{tab-set}" not in out and "{tab-item}" not in out
    assert ":class: five-levels" not in out and ":sync:" not in out and "::::" not in out
    # Each tab is led by its bold label: on the first line of prose, or as its own paragraph
    # before an equation or a list; tabs keep their order and their content.
    assert (
        "**Child.** A story, said simply.\nStill the first paragraph.\n\nA second paragraph." in out
    )
    assert "**Undergraduate.**\n\n$$\ny = xW\n$$\nwhich is a matrix product." in out
    assert "**Researcher.**\n\n- a list, {cite:p}`vaswani2017attention`" in out
    assert out.index("**Child.**") < out.index("**Undergraduate.**") < out.index("**Researcher.**")
    # Everything outside the tab set is untouched, other directives included.
    assert out.startswith("Before.\n\n**Child.**")
    assert out.endswith(
        ":::{admonition} Answer\n:class: dropdown\nAn admonition stays as it is.\n:::\n"
    )
    assert colab.plain_tab_sets(out) == out, "the rewrite is not idempotent"
    plain = "Prose.\n\n:::{note}\nA note.\n:::\n"
    assert colab.plain_tab_sets(plain) == plain


def test_paired_notebook_writes_tab_sets_out_and_keeps_the_md_as_source():
    import jupytext

    md_text = (ROOT / "book" / "01_why_transformers.md").read_text(encoding="utf-8")
    edited = md_text.replace("\n## Recap", "\n" + TAB_SET_MD + "\n## Recap", 1)
    nb = nbformat.reads(colab.paired_ipynb_text(edited), as_version=4)
    cell = next(c for c in nb.cells if "A story, said simply." in c.source)
    assert cell.cell_type == "markdown" and "**Child.** A story, said simply." in cell.source
    assert not any("{tab-set}" in c.source for c in nb.cells)
    # The .md is the source of truth: jupytext reads it back with the tab set intact, and
    # regenerating from it (with the previous notebook's ids) is stable.
    assert "::::{tab-set}" in jupytext.writes(jupytext.reads(edited, fmt="md:myst"), fmt="md:myst")
    fresh = colab.paired_ipynb_text(edited)
    assert colab.paired_ipynb_text(edited, fresh) == fresh


def test_update_inserts_a_missing_setup_cell_under_the_title():
    text = (
        "---\njupytext:\n  text_representation:\n    extension: .md\n    format_name: myst\n"
        "kernelspec:\n  display_name: Python 3\n  language: python\n  name: python3\n---\n\n"
        "# 9. A chapter\n\nProse.\n\n```{code-cell} ipython3\nprint('hi')\n```\n"
    )
    out = colab.update_chapter_md(text, ROOT)
    assert "  formats: ipynb,md:myst\n" in out
    title, setup, body = out.index("# 9."), out.index(colab.MARKER), out.index("print('hi')")
    assert title < setup < body
    assert colab.update_chapter_md(out, ROOT) == out, "update is not idempotent"
    with pytest.raises(ValueError, match="jupytext front matter"):
        colab.update_chapter_md("# no header\n", ROOT)


def _run_setup_cell(monkeypatch, *, colab_loaded: bool, source_env: str | None) -> list:
    calls: list = []
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: calls.append((a, k)))
    if colab_loaded:
        monkeypatch.setitem(sys.modules, "google.colab", types.ModuleType("google.colab"))
    else:
        monkeypatch.delitem(sys.modules, "google.colab", raising=False)
    if source_env is None:
        monkeypatch.delenv(colab.ENV_VAR, raising=False)
    else:
        monkeypatch.setenv(colab.ENV_VAR, source_env)
    exec(colab.setup_cell_source(ROOT), {})
    return calls


def test_setup_cell_does_nothing_outside_colab(monkeypatch):
    assert _run_setup_cell(monkeypatch, colab_loaded=False, source_env=None) == []


def test_setup_cell_on_colab_installs_from_the_configured_repository(monkeypatch):
    url, branch = colab.repository(ROOT)
    calls = _run_setup_cell(monkeypatch, colab_loaded=True, source_env=None)
    assert len(calls) == 1
    (argv,), kwargs = calls[0]
    assert argv == [
        sys.executable,
        "-m",
        "pip",
        "install",
        "-q",
        f"course_lib @ git+{url}@{branch}",
    ]
    assert kwargs == {"check": True}
    # No --upgrade / --force-reinstall: Colab's torch, numpy and matplotlib stay as they are.
    assert not any(a.startswith(("--upgrade", "-U", "--force")) for a in argv)


def test_setup_cell_installs_from_course_lib_source(monkeypatch):
    calls = _run_setup_cell(monkeypatch, colab_loaded=False, source_env="/some/checkout")
    assert calls[0][0][0][-1] == "/some/checkout"


def test_repository_comes_from_config(tmp_path):
    (tmp_path / "_config.yml").write_text(
        "repository:\n  url: https://github.com/someone/fork/\n  branch: draft\n"
    )
    assert (
        colab.install_requirement(tmp_path)
        == "course_lib @ git+https://github.com/someone/fork@draft"
    )
    assert "git+https://github.com/someone/fork@draft" in colab.setup_cell_source(tmp_path)
    assert colab.colab_url("book/x.ipynb", tmp_path) == (
        "https://colab.research.google.com/github/someone/fork/blob/draft/book/x.ipynb"
    )
    with pytest.raises(ValueError, match="only .ipynb"):
        colab.colab_url("book/x.md", tmp_path)
    (tmp_path / "_config.yml").write_text("repository:\n  url: https://gitlab.com/a/b\n")
    with pytest.raises(ValueError, match="GitHub URL"):
        colab.repository(tmp_path)


def test_colab_links_name_existing_notebooks():
    table = reader.links_markdown(ROOT)
    urls = re.findall(r"\((https://colab[^)]+)\)", table)
    assert len(urls) >= len(CHAPTERS)
    url, branch = colab.repository(ROOT)
    prefix = f"https://colab.research.google.com/github/{url.removeprefix('https://github.com/')}/blob/{branch}/"
    for u in urls:
        assert u.startswith(prefix), u
        assert (ROOT / u.removeprefix(prefix)).is_file(), f"{u} names a missing notebook"
    chapter_links = [u.removeprefix(prefix) for u in urls if "/exercises/" not in u]
    assert chapter_links and all(u.startswith(f"{reader.READER_DIR}/") for u in chapter_links), (
        "a chapter's Colab link must open its reader notebook (notebooks/), not the MyST pair"
    )


def test_check_command_reports_and_exits_nonzero(tmp_path, capsys):
    """``--check`` on a copy with a stale pair lists it and exits 1; the update fixes it."""
    for name in ("_config.yml", "_toc.yml"):
        shutil.copy(ROOT / name, tmp_path / name)
    (tmp_path / "book").mkdir()
    md = ROOT / "book" / "01_why_transformers.md"
    shutil.copy(md, tmp_path / "book" / md.name)
    shutil.copy(md.with_suffix(".ipynb"), tmp_path / "book" / md.with_suffix(".ipynb").name)
    stale = tmp_path / "book" / md.name
    stale.write_text(stale.read_text(encoding="utf-8").replace("## Recap", "## Summary", 1))

    def run(*a):
        return colab.main(["--root", str(tmp_path), *a])

    assert run("--check") == 1
    assert "01_why_transformers.ipynb" in capsys.readouterr().out
    assert run() == 0
    assert run("--check") == 0


# --------------------------------------------------------------------------- fresh Colab
@pytest.mark.slow
def test_fresh_colab_setup_installs_only_course_lib(fresh_colab):
    """Colab's torch, numpy, matplotlib, ipywidgets are left alone; course_lib is added (and a
    missing plain dependency such as tqdm, which Colab itself already has)."""
    before, after = fresh_colab.before, fresh_colab.after
    assert "course-lib" in after, "the set-up cell did not install course_lib"
    for name in ("torch", "numpy", "matplotlib", "ipywidgets", "ipykernel"):
        assert after[name] == before[name], f"the set-up cell changed {name}"
    changed = {n for n in after if before.get(n) != after[n]}
    # a declared dependency Colab lacks may bring its own (num2words brings docopt); what the
    # preinstalled packages require must stay as it was
    declared = _declared_dependencies()
    allowed = {"course-lib"} | {d.lower() for d in declared}
    allowed |= _with_requirements([d for d in declared if d not in PREINSTALLED])
    assert changed <= allowed, (
        f"the set-up cell installed more than course_lib: {changed - allowed}"
    )
    assert not {n for n in before if n not in after}, "the set-up cell removed packages"


@pytest.mark.slow
def test_fresh_colab_install_ships_every_course_lib_file(fresh_colab):
    """What pip installs on Colab holds every file of the checkout's package, data included
    (the Shakespeare corpus lives in course_lib/corpus_data/): a Colab reader gets the same
    files, with nothing downloaded at run time."""
    out = subprocess.run(
        [str(fresh_colab.python), "-c", "import course_lib; print(course_lib.__file__)"],
        capture_output=True,
        text=True,
        check=True,
        env=fresh_colab.env,
        cwd=tempfile.gettempdir(),
    ).stdout.strip()
    installed = Path(out).parent
    assert str(installed).startswith(str(TEST_OUTPUT / "colab-venv")), installed

    def files(root: Path) -> set[str]:
        return {
            p.relative_to(root).as_posix()
            for p in root.rglob("*")
            if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"
        }

    missing = sorted(files(fresh_colab.source) - files(installed))
    assert not missing, (
        "pip install of course_lib leaves out "
        + ", ".join(missing[:10])
        + ": declare them as package data in pyproject.toml, e.g. "
        "[tool.setuptools.package-data] course_lib = [\"corpus_data/*\", \"configs/*.json\"]"
    )


def _declared_dependencies() -> list[str]:
    import tomllib

    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    return [re.split(r"[<>=!~\[; ]", d, maxsplit=1)[0] for d in deps]


def _with_requirements(names: list[str]) -> set[str]:
    """The names and, transitively, what they require (read from this venv's metadata)."""
    from importlib.metadata import PackageNotFoundError, requires

    seen: set[str] = set()
    todo = [n.lower() for n in names]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        try:
            reqs = requires(name) or []
        except PackageNotFoundError:
            continue
        for r in reqs:
            if "extra ==" in r:
                continue
            todo.append(re.split(r"[<>=!~\[; (]", r, maxsplit=1)[0].lower())
    return seen


@pytest.mark.slow
def test_every_chapter_ran_in_fresh_colab(built_book, fresh_colab):
    """What a Colab reader opens from a chapter is its reader notebook, whose code cells are the
    chapter's (tests/book/test_reader.py). The clean test build executed every chapter in the fresh
    Colab's kernel (``python3`` there, tests/colab_env.py), each once, in an empty folder: every
    kernel it started ran that venv's Python and its ``course_lib``, never the checkout's, and
    it started one per chapter."""
    import sqlite3

    starts = [json.loads(line) for line in KERNEL_LOG.read_text().splitlines() if line]
    venv = str(TEST_OUTPUT / "colab-venv")
    for start in starts:
        assert start["executable"].startswith(venv), start
        assert (start["course_lib"] or "").startswith(venv), start
        assert not Path(start["cwd"]).resolve().is_relative_to(ROOT), start
    db = sqlite3.connect(built_book / ".jupyter_cache" / "global.db")
    try:
        executed = {Path(uri).resolve() for (uri,) in db.execute("select uri from nbcache")}
    finally:
        db.close()
    assert {md.resolve() for md in CHAPTERS} <= executed, "chapters the build did not execute"
    assert len(starts) == len(executed), (len(starts), len(executed))


# What a Colab reader opens besides the chapters: each solution notebook (and its exercise).
@pytest.mark.slow
@pytest.mark.timeout(1800)  # a whole notebook (each cell has nbval's own time limit as well)
@pytest.mark.parametrize("notebook", SOLUTIONS, ids=_rel)
def test_solution_runs_in_fresh_colab_and_prints_its_stored_outputs(
    notebook, fresh_colab, tmp_path
):
    """Top to bottom in a clean kernel of the fresh Colab, in an empty folder (like Colab's
    /content), under nbval: every cell runs without an error and prints what the notebook
    stores (stored with 1 thread, run with 2: no verdict may depend on the thread count). One
    execution checks both; the kernel notes its start (which Python, which ``course_lib``,
    which folder) through the fresh Colab's launcher."""
    assert notebook.is_file(), f"{_rel(notebook)} is missing: run `./course sync`"
    content = tmp_path / "content"
    content.mkdir()
    shutil.copy(notebook, content / notebook.name)
    # the fresh Colab's kernel ("python3", found first through JUPYTER_PATH), noting its
    # start in this test's own log rather than the build's
    starts = tmp_path / "kernel-starts.jsonl"
    spec_dir = tmp_path / "jupyter" / "kernels" / "python3"
    spec_dir.mkdir(parents=True)
    spec = json.loads(
        (Path(fresh_colab.jupyter_path) / "kernels" / "python3" / "kernel.json").read_text()
    )
    spec["env"] = {**spec.get("env", {}), "COURSE_KERNEL_LOG": str(starts)}
    (spec_dir / "kernel.json").write_text(json.dumps(spec))
    env = {**fresh_colab.env, "JUPYTER_PATH": str(tmp_path / "jupyter"), "OMP_NUM_THREADS": "2"}
    env.pop("COURSE_LIB_SOURCE", None)
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--nbval"]
    cmd += ["--rootdir", str(content), notebook.name]
    start = time.perf_counter()
    try:
        proc = subprocess.run(cmd, cwd=content, capture_output=True, text=True, env=env)
    finally:
        fresh_colab.times[_rel(notebook)] = round(time.perf_counter() - start, 1)
    if proc.returncode != 0:
        pytest.fail(
            f"{_rel(notebook)} failed in a fresh Colab-like kernel, or printed other outputs "
            f"than it stores:\n{proc.stdout[-6000:]}",
            pytrace=False,
        )
    kernels = [json.loads(line) for line in starts.read_text().splitlines() if line]
    assert len(kernels) == 1, kernels
    venv = str(TEST_OUTPUT / "colab-venv")
    assert kernels[0]["executable"].startswith(venv), kernels[0]
    assert (kernels[0]["course_lib"] or "").startswith(venv), f"course_lib came from {kernels[0]}"
    assert Path(kernels[0]["cwd"]).resolve() == content.resolve(), kernels[0]


def test_readme_colab_table_is_current():
    """The README's table of Colab links is the one the generator prints now."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    m = re.search(r"<!-- colab-links:start -->\n(.*?)\n<!-- colab-links:end -->", text, flags=re.S)
    assert m, "README.md lost its colab-links block"
    assert m.group(1).strip() == reader.links_markdown(ROOT).strip(), (
        "README's Colab table is stale: run `./course sync`"
    )


@pytest.mark.parametrize("display", [False, True])
def test_glue_without_myst_nb_writes_what_myst_nb_writes(monkeypatch, display):
    """The clean test build's kernel (the fresh Colab) has no myst-nb; there ``glue`` writes
    myst-nb's glue output itself when the build says it runs (``viz.NARROW_ENV``), and only
    then (on Colab it stays quiet)."""
    import IPython.display
    from IPython.display import Markdown
    from myst_nb.ext import glue as myst_glue_module

    from course_lib import viz
    from course_lib.viz import glue as course_glue

    shown: list = []
    monkeypatch.setattr(IPython.display, "display", lambda *a, **k: shown.append((a, k)))
    monkeypatch.setattr(myst_glue_module, "ipy_display", lambda *a, **k: shown.append((a, k)))
    monkeypatch.setattr(course_glue, "_myst_glue", None)
    values = [("loss", "0.472"), ("ratio", 1.5), ("table", Markdown("| a |\n|---|\n| 1 |"))]
    for name, value in values:
        myst_glue_module.glue(name, value, display)
    theirs = list(shown)
    shown.clear()
    monkeypatch.setenv(viz.NARROW_ENV, "1")
    for name, value in values:
        course_glue.glue(name, value, display)
    assert shown == theirs and len(theirs) == len(values)
    shown.clear()
    monkeypatch.delenv(viz.NARROW_ENV)
    course_glue.glue("loss", "0.472", display=False)
    assert shown == []
