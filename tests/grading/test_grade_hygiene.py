"""The grader's input hygiene (issue 24, item 4): what a hostile submission folder can hold.

Symbolic links (to a solution, to a neighbour), metadata naming a path, names that collide
once flattened, names that are not UTF-8, JSON that is deep, truncated or huge, too many cells,
line separators hiding nbval markers: each is refused or graded as it deserves, one row each,
and the batch goes on. The fast tests read and route submissions without a kernel; the slow
ones grade a hostile folder for real, and kill a batch half-way to show nothing finished is lost.
"""

from __future__ import annotations

import copy
import csv
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest

from course_lib.grading import notebooks, report
from course_lib.grading.grade import find_submissions, load, main
from course_lib.grading.notebooks import (
    MAX_CODE_CELLS,
    MAX_DEPTH,
    Unreadable,
    extract_answers,
    parse_notebook,
    read_notebook,
    read_submission,
)
from course_lib.grading.report import Gradebook, report_names
from course_lib.grading.sandbox import probe
from tools import ROOT
from tools.exercises import SOLUTIONS, load_spec, make_submission

STEM = "01_why_transformers"
# full marks of the notebook the batches grade (its solution, read once)
FULL = load_spec(nbformat.read(SOLUTIONS / f"{STEM}.ipynb", as_version=4), STEM).max_score
SOL = SOLUTIONS / f"{STEM}.ipynb"
SEQ = "dependence"


def _sol():
    return nbformat.read(SOL, as_version=4)


def _full():
    sol = _sol()
    return make_submission(sol, {ex.name: "solution" for ex in load_spec(sol, STEM).exercises})


def _write(nb, path) -> Path:
    path = Path(os.fsdecode(path)) if isinstance(path, bytes) else Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(nbformat.writes(nb))
    return path


def _unreadable(path_or_raw, *needles):
    with pytest.raises(Unreadable) as info:
        if isinstance(path_or_raw, bytes):
            parse_notebook(path_or_raw, "sub.ipynb")
        else:
            read_notebook(path_or_raw)
    for n in needles:
        assert n in str(info.value), str(info.value)
    return str(info.value)


# --------------------------------------------------------------------------- regular files only
def test_symlinks_and_special_files_are_not_followed(tmp_path):
    bob = _write(_full(), tmp_path / "bob" / f"{STEM}.ipynb")
    (tmp_path / "to_solution.ipynb").symlink_to(SOL)
    (tmp_path / "to_bob.ipynb").symlink_to(bob)
    (tmp_path / "dangling.ipynb").symlink_to(tmp_path / "nowhere.ipynb")
    os.mkfifo(tmp_path / "pipe.ipynb")  # opening it for reading would block: it is never opened
    for name in ("to_solution", "to_bob", "dangling"):
        _unreadable(tmp_path / f"{name}.ipynb", "a symbolic link, not a regular file")
    _unreadable(tmp_path / "pipe.ipynb", "a named pipe, not a regular file")
    with pytest.raises(Unreadable, match="not a regular file"):
        load(tmp_path / "to_solution.ipynb", solutions_dir=SOLUTIONS)
    assert read_submission(bob) == bob.read_bytes()  # the neighbour's own file is fine


def test_a_file_swapped_after_the_lstat_is_refused_too(tmp_path, monkeypatch):
    """The race between ``lstat`` and ``open``: O_NOFOLLOW refuses a link, ``fstat`` a different
    file."""
    link = tmp_path / "link.ipynb"
    link.symlink_to(SOL)
    other = _write(_full(), tmp_path / "other.ipynb")
    monkeypatch.setattr(
        notebooks.os, "lstat", os.stat
    )  # as if it was a regular file when looked at
    _unreadable(link, "a symbolic link, not a regular file")
    monkeypatch.setattr(notebooks.os, "lstat", lambda p: os.stat(SOL))  # ... or another file
    _unreadable(other, "changed while it was being read")


def test_submissions_are_listed_without_following_folder_links(tmp_path):
    folder = tmp_path / "subs"
    _write(_full(), folder / "a" / "x.ipynb")
    _write(_full(), folder / ".ipynb_checkpoints" / "x-checkpoint.ipynb")
    _write(_full(), folder / "_grades" / "old.ipynb")
    (folder / "linked_dir").symlink_to(folder / "a")  # not followed: a's file is listed once
    (folder / "dir_link.ipynb").symlink_to(
        folder / "a"
    )  # a link named like a notebook: listed, refused
    (folder / "file_link.ipynb").symlink_to(SOL)
    (folder / "real_dir.ipynb").mkdir()
    _write(_full(), folder / "real_dir.ipynb" / "y.ipynb")
    assert find_submissions(folder, folder / "_grades") == [
        "a/x.ipynb",
        "dir_link.ipynb",
        "file_link.ipynb",
        "real_dir.ipynb/y.ipynb",
    ]


# --------------------------------------------------------------------------- the solution
@pytest.mark.parametrize(
    "claimed",
    [
        "../../sub/x",
        "ABSOLUTE",
        f"{STEM}/../{STEM}",
        f"../solutions/{STEM}",
        f"{STEM}.ipynb",
        "",
        None,
        7,
        ["x"],
    ],
)
def test_the_solution_is_only_a_stem_of_the_solutions_folder(tmp_path, claimed):
    """metadata naming a path (to the submission itself, or through the solutions folder) is not a
    stem: the file name decides, and a file name without a stem is unreadable."""
    sub = _full()
    fake = tmp_path / "sub" / "x.ipynb"
    claimed = str(fake.with_suffix("")) if claimed == "ABSOLUTE" else claimed
    sub.metadata["course"] = {"notebook": claimed}
    _write(sub, fake)  # the submission as its own "solution"
    with pytest.raises(Unreadable, match="cannot tell which exercise notebook"):
        load(fake, solutions_dir=SOLUTIONS)
    named = _write(sub, tmp_path / "sub" / f"alice_{STEM}.ipynb")
    assert load(named, solutions_dir=SOLUTIONS).sol_path == SOL


def test_metadata_naming_a_real_stem_wins_and_odd_metadata_is_harmless(tmp_path):
    sub = _full()
    sub.metadata["course"] = {"notebook": "02_matrix_core"}
    assert (
        load(_write(sub, tmp_path / f"{STEM}.ipynb"), solutions_dir=SOLUTIONS).sol_path.stem
        == "02_matrix_core"
    )
    sub.metadata["course"] = "01_why_transformers"  # not a dict: ignored, the file name decides
    assert load(_write(sub, tmp_path / f"b_{STEM}.ipynb"), solutions_dir=SOLUTIONS).sol_path == SOL


# --------------------------------------------------------------------------- unreadable,
# over-size, over-deep
def test_deep_truncated_huge_and_malformed_json_is_unreadable(tmp_path):
    good = nbformat.writes(_full()).encode()
    _unreadable(b"[" * 10_000 + b"]" * 10_000, "nested too deeply")
    _unreadable(b"[" * 500 + b"]" * 500, "nested too deeply")  # within Python's recursion limit
    deep_meta = json.loads(good)
    node = deep_meta["metadata"].setdefault("course", {})  # what the grader reads: capped
    for _ in range(MAX_DEPTH):
        node["x"] = {}
        node = node["x"]
    _unreadable(json.dumps(deep_meta).encode(), "nested too deeply")
    deep_meta["metadata"]["widgets"] = deep_meta["metadata"].pop("course")  # never read: dropped
    assert "widgets" not in parse_notebook(json.dumps(deep_meta).encode()).metadata
    _unreadable(good[: len(good) // 2], "not valid notebook JSON")
    _unreadable(good.replace(b"dependence", b"d\xe9pendence", 1), "not UTF-8")
    _unreadable(b"", "empty")
    _unreadable(b"1" * 5000, "not valid notebook JSON")  # an integer too long to convert
    _unreadable(b'{"cells": 3}', "not a list of cells")
    _unreadable(b'{"cells": [1, 2]}', "not a list of cells")
    big = tmp_path / f"big_{STEM}.ipynb"
    with open(big, "wb") as f:  # sparse, over the file cap: refused by its size before reading
        f.truncate(notebooks.MAX_BYTES + 2**20)
    _unreadable(big, "too large", f"{notebooks.MAX_BYTES / 2**20 + 1:.1f} MB")
    _unreadable(b" " * (notebooks.MAX_BYTES + 1), "too large")
    assert parse_notebook(b"\xef\xbb\xbf" + good, "bom.ipynb").cells  # a byte-order mark is fine


def test_caps_on_code_cells_and_source(tmp_path):
    nb = _full()
    nb.cells += [nbformat.v4.new_code_cell("x = 1") for _ in range(MAX_CODE_CELLS)]
    _unreadable(nbformat.writes(nb).encode(), f"at most {MAX_CODE_CELLS}")
    nb = _full()
    nb.cells.append(nbformat.v4.new_code_cell("# " + "x" * notebooks.MAX_SOURCE_BYTES))
    _unreadable(nbformat.writes(nb).encode(), "MB of code")
    nb = _full()
    nb.cells.append(
        nbformat.v4.new_markdown_cell("x" * 2 * notebooks.MAX_SOURCE_BYTES)
    )  # prose is not capped
    assert parse_notebook(nbformat.writes(nb).encode())
    many = b'{"cells": [' + b",".join([b'{"cell_type":"raw","source":""}'] * 200_000) + b"]}"
    t0 = time.monotonic()
    _unreadable(many, f"at most {notebooks.MAX_CELLS}")
    assert time.monotonic() - t0 < 5


def test_malformed_cells_are_unreadable_or_repaired():
    data = json.loads(nbformat.writes(_full()))
    data["cells"][3]["metadata"] = "oops"
    _unreadable(json.dumps(data).encode(), "a cell is malformed")
    data = json.loads(nbformat.writes(_full()))
    for c in data["cells"]:
        c["id"] = 12  # not a string: dropped; answers are found by their markers
    nb = parse_notebook(json.dumps(data).encode())
    sol = _sol()
    answers, _ = extract_answers(nb, load_spec(sol, STEM), sol)
    assert all(answers.values())


# --------------------------------------------------------------------------- line separators
SEPARATORS = ["\r", "\r\n", "\f", "\v", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029"]


@pytest.mark.parametrize("sep", SEPARATORS, ids=[f"U+{ord(s[0]):04X}" for s in SEPARATORS])
def test_line_separators_cannot_hide_nbval_markers(sep):
    """``x = 1<sep># NBVAL_SKIP``: nbval (``splitlines``) sees a marker line; so does the grader,
    which neutralises it. The answer marker ``# EXERCISE name:`` after such a separator is found."""
    from nbval.plugin import find_comment_markers

    sol = _sol()
    spec = load_spec(sol, STEM)
    sub = _full()
    cell = next(c for c in sub.cells if c.get("id") == "dependence-answer")
    cell.source = (
        cell.source.replace("\n", sep)
        + sep
        + "# NBVAL_SKIP"
        + sep
        + "  ## NBVAL_RAISES_EXCEPTION  "
    )
    assert dict(find_comment_markers(cell.source))  # what nbval would have done with it
    for c in sub.cells:
        c.pop("id", None)  # found by the marker alone
    for nb in (sub, parse_notebook(nbformat.writes(sub).encode())):
        answers, _ = extract_answers(nb, spec, sol)
        [code] = answers[SEQ]
        assert not dict(find_comment_markers(code)), code
        assert "nbval marker NBVAL_SKIP ignored" in code and sep not in code
    assert notebooks.normalise_source("a\r\nb\rc\fd\u2028e") == "a\nb\nc\nd\ne"


# --------------------------------------------------------------------------- report names
def test_report_names_are_injective_and_safe():
    odd = [os.fsdecode(b"caf\xe9.ipynb"), os.fsdecode(b"caf\xe8.ipynb"), "caf\ufffd.ipynb"]
    rels = [
        "alice/x.ipynb",
        "alice__x.ipynb",
        "alice~x.ipynb",
        "alice%7Ex.ipynb",
        "Alice/x.ipynb",
        "caf\u00e9.ipynb",
        "cafe\u0301.ipynb",
        "a b.ipynb",
        "a%20b.ipynb",
        "new\nline.ipynb",
        "x" * 250 + ".ipynb",
        "x" * 251 + ".ipynb",
        "d/" + "y" * 240 + "/z.ipynb",
        *odd,
    ]
    names = report_names(rels)
    values = list(names.values())
    assert len({report._fold(v) for v in values}) == len(rels), (
        names
    )  # distinct, also on macOS/Windows
    for v in values:
        assert "/" not in v and "\n" not in v and v.endswith(".grade.json"), v
        assert len(v.encode("utf-8")) <= 255, v
        v.encode("utf-8")  # no surrogates: writable anywhere
    plain = report_names(["alice/x.ipynb", "alice__x.ipynb"])
    assert list(plain.values()) == ["alice~x.grade.json", "alice__x.grade.json"]
    assert len(set(report_names(["x.ipynb", "x", "x%", "x.ipynb.ipynb"]).values())) == 4
    assert (
        "%%" in names["Alice/x.ipynb"] and "%%" in names["alice/x.ipynb"]
    )  # differ only in case: hashed


def test_each_report_is_written_as_its_result_arrives(tmp_path):
    """A crash after two results (here: the third report cannot be written) keeps both reports and
    both gradebook rows on disk."""
    rels = ["a.ipynb", "b/c.ipynb", "d.ipynb"]
    book = Gradebook(tmp_path, rels)
    rep = {
        "status": "unreadable",
        "score": 0.0,
        "max_score": None,
        "error": "x",
        "sandbox": "bwrap",
    }
    book.add("b/c.ipynb", dict(rep, submission="b/c.ipynb"))
    book.add("a.ipynb", dict(rep, submission="a.ipynb"))
    (tmp_path / "d.grade.json").mkdir()  # a later write fails: the batch would stop here
    with pytest.raises(OSError):
        book.add("d.ipynb", dict(rep, submission="d.ipynb"))
    rows = list(csv.DictReader(open(tmp_path / "gradebook.csv", encoding="utf-8")))
    assert [r["submission"] for r in rows] == ["a.ipynb", "b/c.ipynb"]
    assert json.loads((tmp_path / "b~c.grade.json").read_text())["submission"] == "b/c.ipynb"
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".tmp-")]


def test_batch_of_unreadable_files_never_needs_a_kernel(tmp_path):
    """Routing happens on the client: links, odd names and broken JSON become rows without a
    task."""
    folder = tmp_path / "subs"
    folder.mkdir()
    (folder / "link.ipynb").symlink_to(SOL)
    (folder / "deep.ipynb").write_bytes(b"[" * 10_000 + b"]" * 10_000)
    Path(os.fsdecode(os.fsencode(folder) + b"/\xff\xfe.ipynb")).write_text("{ not json")
    unsafe = [] if probe()[0] is not None else ["--unsafe-no-sandbox"]
    assert (
        main(
            [
                "--batch",
                str(folder),
                "--out",
                str(tmp_path / "grades"),
                "--solutions",
                str(SOLUTIONS),
                *unsafe,
            ]
        )
        == 0
    )
    rows = list(csv.DictReader(open(tmp_path / "grades" / "gradebook.csv", encoding="utf-8")))
    assert [r["submission"] for r in rows] == ["deep.ipynb", "link.ipynb", "\ufffd\ufffd.ipynb"]
    assert all(r["status"] == "unreadable" and r["score"] == "0.0" for r in rows)
    assert len(list((tmp_path / "grades").glob("*.grade.json"))) == 3


# --------------------------------------------------------------------------- graded for real
def _self_solution():
    """A notebook that is its own solution: stubs for answers, check helpers redefined to pass."""
    nb = copy.deepcopy(_sol())
    fake = "".join(
        f"def {f}(name, *a, **k):\n    print('[PASS] ' + name)\n"
        for f in ("check_close", "check_equal", "check_true", "check_raises")
    )
    for c in nb.cells:
        role = c.metadata.get("course", {}).get("role")
        if role == "check":
            c.source = fake + c.source
        elif role == "answer":
            c.source = next(
                x.source for x in make_submission(_sol()).cells if x.get("id") == c.get("id")
            )
    return nb


@pytest.mark.slow
def test_a_hostile_folder_is_graded_file_by_file(tmp_path):
    folder = tmp_path / "subs"
    full, stub = _full(), make_submission(_sol())
    _write(full, folder / "bob" / f"{STEM}.ipynb")
    _write(full, folder / "alice" / f"{STEM}.ipynb")
    _write(stub, folder / f"alice__{STEM}.ipynb")
    _write(full, os.fsencode(folder) + f"/\xe9l\xe8ve_{STEM}.ipynb".encode("latin-1"))
    selfref = _self_solution()
    path = folder / f"mallory_{STEM}.ipynb"
    selfref.metadata["course"] = {"notebook": str(path.with_suffix(""))}
    _write(selfref, path)
    (folder / f"link_solution_{STEM}.ipynb").symlink_to(SOL)
    (folder / f"link_bob_{STEM}.ipynb").symlink_to(folder / "bob" / f"{STEM}.ipynb")
    (folder / "deep.ipynb").write_bytes(b"[" * 10_000 + b"]" * 10_000)
    good = nbformat.writes(full).encode()
    (folder / f"truncated_{STEM}.ipynb").write_bytes(good[: len(good) // 2])
    with open(folder / f"huge_{STEM}.ipynb", "wb") as f:
        f.truncate(notebooks.MAX_BYTES + 2**20)
    out = tmp_path / "grades"
    if probe()[0] is None:
        pytest.skip("no bubblewrap sandbox here")
    assert (
        main(
            [
                "--batch",
                str(folder),
                "--out",
                str(out),
                "--solutions",
                str(SOLUTIONS),
                "--time-limit",
                "20",
            ]
        )
        == 0
    )  # never 3: every bad file is its own row
    rows = {
        r["submission"]: r for r in csv.DictReader(open(out / "gradebook.csv", encoding="utf-8"))
    }
    score = {k: (r["status"], float(r["score"])) for k, r in rows.items()}
    assert score == {
        f"alice/{STEM}.ipynb": ("graded", FULL),
        f"alice__{STEM}.ipynb": ("graded", 0.0),
        f"bob/{STEM}.ipynb": ("graded", FULL),
        "deep.ipynb": ("unreadable", 0.0),
        f"huge_{STEM}.ipynb": ("unreadable", 0.0),
        f"link_bob_{STEM}.ipynb": ("unreadable", 0.0),
        f"link_solution_{STEM}.ipynb": ("unreadable", 0.0),
        f"mallory_{STEM}.ipynb": ("graded", 0.0),  # against the real solution, not itself
        f"truncated_{STEM}.ipynb": ("unreadable", 0.0),
        f"\ufffdl\ufffdve_{STEM}.ipynb": ("graded", FULL),
    }, score
    for k in ("link_bob", "link_solution"):
        assert "not a regular file" in rows[f"{k}_{STEM}.ipynb"]["error"]
    assert "nested too deeply" in rows["deep.ipynb"]["error"]
    assert "too large" in rows[f"huge_{STEM}.ipynb"]["error"]
    assert "not valid notebook JSON" in rows[f"truncated_{STEM}.ipynb"]["error"]
    assert json.loads((out / rows[f"mallory_{STEM}.ipynb"]["report"]).read_text())[
        "solution"
    ] == str(SOL)
    files = sorted(p.name for p in out.glob("*.grade.json"))
    assert files == sorted(r["report"] for r in rows.values()) and len(files) == len(rows) == 10
    for r in rows.values():
        rep = json.loads((out / r["report"]).read_text())
        assert rep["submission"].endswith(r["submission"]) and rep["status"] == r["status"]


@pytest.mark.slow
def test_a_killed_batch_keeps_every_finished_report(tmp_path):
    """SIGKILL the batch while it grades an endless submission: the rows and reports of what had
    ended before are on disk, whole."""
    if probe()[0] is None:
        pytest.skip(
            "no bubblewrap sandbox here"
        )  # the sandbox ends the orphaned kernel with its parent
    folder, out = tmp_path / "subs", tmp_path / "grades"
    (folder / "a").mkdir(parents=True)
    (folder / "a" / "broken.ipynb").write_text("{")
    _write(_full(), folder / f"b_{STEM}.ipynb")
    sol = _sol()
    choose = {ex.name: "solution" for ex in load_spec(sol, STEM).exercises}
    choose[SEQ] = {"code": "while True:\n    pass"}
    _write(make_submission(sol, choose), folder / f"c_{STEM}.ipynb")
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "course_lib.grading.grade",
            "--batch",
            str(folder),
            "--out",
            str(out),
            "--solutions",
            str(SOLUTIONS),
            "--workers",
            "1",
            "--time-limit",
            "60",
        ],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 180
        while not (out / f"b_{STEM}.grade.json").exists():
            assert proc.poll() is None and time.monotonic() < deadline, "b was never graded"
            time.sleep(0.5)
        time.sleep(1)
        assert proc.poll() is None  # still grading c
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(30)
    rows = list(csv.DictReader(open(out / "gradebook.csv", encoding="utf-8")))
    assert [(r["submission"], r["status"], r["score"]) for r in rows] == [
        ("a/broken.ipynb", "unreadable", "0.0"),
        (f"b_{STEM}.ipynb", "graded", str(FULL)),
    ]
    assert json.loads((out / f"b_{STEM}.grade.json").read_text())["score"] == FULL
    assert json.loads((out / "a~broken.grade.json").read_text())["status"] == "unreadable"


def test_the_graders_threads_parse_one_at_a_time(monkeypatch):
    """CPython 3.11 keeps the AST constructor's recursion counter in state every thread shares
    (python/cpython#106905): a batch's first two gradings, loading one solution side by side,
    failed with "AST constructor recursion depth mismatch". Every parse in the grader's process
    goes through ``spec.parse``, which holds a lock; only the student's one-thread process
    (``student.py``) parses by itself."""
    from course_lib.grading import lint, spec

    bare = [
        p.name
        for p in (ROOT / "course_lib" / "grading").glob("*.py")
        if "ast.parse(" in p.read_text() and p.name not in ("spec.py", "student.py")
    ]
    assert not bare, f"parse with course_lib.grading.spec.parse, not ast.parse: {bare}"

    class CountingLock:
        entered = 0

        def __enter__(self):
            CountingLock.entered += 1

        def __exit__(self, *exc):
            return False

    monkeypatch.setattr(spec, "_PARSE_LOCK", CountingLock())
    sol = nbformat.read(SOLUTIONS / "05_worked_examples.ipynb", as_version=4)
    parsed = load_spec(sol, "05_worked_examples")  # every check cell's names and hints
    lint.trusted_bindings(sol, parsed)  # every set-up and check cell
    lint.lint_answer("x = 1", {}, [], "attention_weights")
    trusted = [c for c in sol.cells if c.cell_type == "code" and spec.role(c) in ("setup", "check")]
    assert CountingLock.entered >= len(trusted) + 1
