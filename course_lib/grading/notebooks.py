"""Reading: the submission (any file a student may hand in), the solution it is graded against,
and the student's answer code in it (``extract_answers``).

A submission is untrusted input, read defensively (``read_submission``, ``parse_notebook``):
regular files only (``lstat`` then ``open(O_NOFOLLOW)`` and ``fstat``: a symbolic link to a
solution or to a neighbour's file is refused, not followed), at most ``MAX_BYTES`` on disk. The
caps are on what the grader reads, not on what it drops: the moment the JSON is parsed, each
cell is cut down to what grading uses (``kept_notebook``: its type, source, ``course``
metadata and id; for a code cell its execution count and the verdict lines of its saved output,
which "predict, then run" reads), so a notebook carrying 45 MB of plots grades like its
sources. What is kept must be nested at most ``MAX_DEPTH`` deep and hold at most ``MAX_CELLS``
cells, ``MAX_CODE_CELLS`` of them code, ``MAX_SOURCE_BYTES`` of code and ``MAX_TEXT_BYTES`` of
sources in all; every failure is ``Unreadable`` with a message for the student, never a grader
error. Cell sources are normalised on reading (``normalise_source``: every line separator that
``str.splitlines``, nbval and IPython honour becomes ``\\n``) before any marker logic.
The solution is chosen only among the stems of the solutions folder (``find_solution``).

Cells are matched to the solution's without relying on cell ids (``_classify``): nbformat 4.4
and older have none, and Colab keeps its own in the cell metadata. A trusted cell is known by
its id, by its source (trusted cells are locked) or by its ``course`` metadata; an answer by its
id or its marker line; the code cells between them belong to the answer before.
"""

from __future__ import annotations

import errno
import json
import os
import re
import stat
import warnings
from pathlib import Path

import nbformat
from nbformat.validator import MissingIDFieldWarning

from .spec import MARKER, NotebookSpec
from .verdict import CHANGED, FAIL, PASS, parse_line

__all__ = [
    "Unreadable",
    "GraderError",
    "read_notebook",
    "read_submission",
    "parse_notebook",
    "normalise_source",
    "display_name",
    "solution_stems",
    "find_solutions_dir",
    "find_solution",
    "extract_answers",
    "MAX_BYTES",
    "MAX_DEPTH",
    "MAX_CELLS",
    "MAX_CODE_CELLS",
    "MAX_SOURCE_BYTES",
    "MAX_TEXT_BYTES",
    "kept_notebook",
]

MAX_BYTES = 256 * 1024 * 1024  # the file on disk: outputs (plots) included, dropped on reading
MAX_DEPTH = 64  # JSON nesting of what is kept; a notebook's own structure is ~8 deep
MAX_CODE_CELLS = 200  # the largest exercise notebook has ~45 code cells
MAX_CELLS = 1000  # all cells: bounds nbformat's validation time on the client
MAX_SOURCE_BYTES = 1024 * 1024  # all code cells together
MAX_TEXT_BYTES = 16 * 1024 * 1024  # every cell's source together (prose, code, raw)
_MAX_VERDICT_LINES = 200  # verdict lines kept of one code cell's saved output


class Unreadable(Exception):
    """The submission is not a readable notebook (exit code 2)."""


class GraderError(Exception):
    """Something went wrong on the grader's side (exit code 3)."""


def display_name(name) -> str:
    """A file name as text that can always be printed and written: bytes that are not UTF-8
    (a name from another system's encoding) become U+FFFD replacement characters."""
    return os.fsencode(name).decode("utf-8", "replace")


# --------------------------------------------------------------------------- reading
_LINE_SEPARATORS = re.compile("\r\n|[\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")


def normalise_source(source: str) -> str:
    """Every line boundary that ``str.splitlines`` knows (``\\r\\n``, ``\\r``, ``\\v``, ``\\f``,
    ``\\x1c``-``\\x1e``, ``\\x85``, ``\\u2028``, ``\\u2029``) as ``\\n``. nbval finds its comment
    markers with ``splitlines``, so ``x = 1\\f# NBVAL_SKIP`` is a marker line to nbval; the
    grader's marker logic (``^``/``$`` at ``\\n``) sees the same lines only after this."""
    return _LINE_SEPARATORS.sub("\n", source)


def _kind(mode: int) -> str:
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISFIFO(mode):
        return "a named pipe"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "not a plain file"


def _too_large(name: str, size: int) -> Unreadable:
    return Unreadable(
        f"{name}: the file is too large ({size / 2**20:.1f} MB; at most {MAX_BYTES // 2**20} MB). "
        "Clear the outputs (Kernel > Restart Kernel and Clear Outputs), save and re-submit."
    )


def read_submission(path, name: str | None = None) -> bytes:
    """The bytes of a submission that is a regular file, read without following a symbolic link
    (``lstat``, then ``open`` with ``O_NOFOLLOW | O_NONBLOCK`` and an ``fstat`` of what was opened:
    a file swapped for a link or a pipe in between is refused too). At most ``MAX_BYTES``."""
    name = name or display_name(path)
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        raise Unreadable(f"{name}: no such file.") from None
    except OSError as exc:
        raise Unreadable(f"{name}: cannot be read ({exc.strerror}).") from None
    if not stat.S_ISREG(st.st_mode):
        raise Unreadable(
            f"{name}: {_kind(st.st_mode)}, not a regular file; links and special files are not "
            "followed or read. Submit the notebook file itself."
        )
    if st.st_size > MAX_BYTES:
        raise _too_large(name, st.st_size)
    flags = (
        os.O_RDONLY
        | getattr(os, "O_NOFOLLOW", 0)
        | getattr(os, "O_NONBLOCK", 0)
        | getattr(os, "O_CLOEXEC", 0)
    )
    try:
        fd = os.open(path, flags)
    except OSError as exc:  # ELOOP: it became a symbolic link after the lstat
        what = (
            "a symbolic link, not a regular file"
            if exc.errno == errno.ELOOP
            else f"cannot be opened ({exc.strerror})"
        )
        raise Unreadable(f"{name}: {what}; submit the notebook file itself.") from None
    try:
        now = os.fstat(fd)
        if not stat.S_ISREG(now.st_mode) or (now.st_dev, now.st_ino) != (st.st_dev, st.st_ino):
            raise Unreadable(
                f"{name}: the file changed while it was being read (not a regular file)."
            )
        chunks, size = [], 0
        while size <= MAX_BYTES:
            chunk = os.read(fd, min(1 << 20, MAX_BYTES + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    finally:
        os.close(fd)
    if size > MAX_BYTES:
        raise _too_large(name, size)
    return b"".join(chunks)


def _depth_exceeds(data, limit: int) -> bool:
    """Whether parsed JSON nests deeper than ``limit`` (iterative: no recursion to exhaust)."""
    stack = [(data, 1)]
    while stack:
        obj, depth = stack.pop()
        if isinstance(obj, dict):
            children = obj.values()
        elif isinstance(obj, list):
            children = obj
        else:
            continue
        if depth > limit:
            return True
        stack.extend((c, depth + 1) for c in children if isinstance(c, (dict, list)))
    return False


def _bad_json(name: str, why: str) -> Unreadable:
    return Unreadable(
        f"{name}: not valid notebook JSON ({why}). The file is probably truncated or was edited "
        "outside Jupyter; save it again from Jupyter, or start again from a fresh copy of the "
        "exercise notebook."
    )


def _source_text(src) -> str:
    return src if isinstance(src, str) else "".join(src)


def _verdict_lines(outputs) -> list[str]:
    """The verdict lines (``[PASS] ...``, ``[FAIL] ...``) of a code cell's saved stream outputs:
    the one part of an output the grader reads."""
    lines: list[str] = []
    for out in outputs if isinstance(outputs, list) else []:
        if not isinstance(out, dict) or out.get("output_type") != "stream":
            continue
        text = out.get("text", "")
        text = "".join(t for t in text if isinstance(t, str)) if isinstance(text, list) else text
        if isinstance(text, str):
            lines += [ln for ln in text.splitlines() if ln.startswith((PASS, FAIL))]
    return lines[:_MAX_VERDICT_LINES]


def kept_notebook(data: dict, name: str = "the notebook") -> dict:
    """The part of a parsed notebook (JSON) the grader reads, everything else dropped: the
    notebook's ``course`` metadata, and per cell its type, source, id, ``course`` metadata, and
    for a code cell its execution count and the verdict lines of its stream outputs. Unreadable
    for cells that are not cells."""
    meta = data.get("metadata") if isinstance(data.get("metadata"), dict) else {}
    kept_cells = []
    for c in data["cells"]:
        src = c.get("source", "")
        if (
            c.get("cell_type") not in ("code", "markdown", "raw")
            or not isinstance(c.get("metadata", {}), dict)
            or not (
                isinstance(src, str)
                or isinstance(src, list)
                and all(isinstance(x, str) for x in src)
            )
        ):
            raise Unreadable(
                f"{name}: a cell is malformed (bad source, cell_type or metadata); save it again "
                "from Jupyter."
            )
        cell_meta = {k: v for k, v in c.get("metadata", {}).items() if k == "course"}
        cell = {"cell_type": c["cell_type"], "metadata": cell_meta, "source": _source_text(src)}
        if isinstance(c.get("id"), str):
            cell["id"] = c["id"]
        if c["cell_type"] == "code":
            n = c.get("execution_count")
            cell["execution_count"] = n if type(n) is int else None
            lines = _verdict_lines(c.get("outputs"))
            cell["outputs"] = (
                [{"output_type": "stream", "name": "stdout", "text": "\n".join(lines) + "\n"}]
                if lines
                else []
            )
        kept_cells.append(cell)
    minor = data.get("nbformat_minor")
    return {
        "nbformat": 4,
        "nbformat_minor": minor if type(minor) is int and 0 <= minor <= 5 else 4,
        "metadata": {k: v for k, v in meta.items() if k == "course"},
        "cells": kept_cells,
    }


def parse_notebook(raw: bytes, name: str = "the notebook"):
    """The notebook in ``raw`` (nbformat 4) as the grader reads it (``kept_notebook``: outputs,
    attachments and other metadata dropped), or Unreadable saying why not: empty, over-size,
    not UTF-8, not JSON, what is kept nested deeper than ``MAX_DEPTH``, not a notebook,
    malformed cells, more than ``MAX_CELLS`` cells or ``MAX_CODE_CELLS`` code cells, more than
    ``MAX_SOURCE_BYTES`` of code or ``MAX_TEXT_BYTES`` of sources. Cell sources come back
    normalised (``normalise_source``)."""
    if len(raw) > MAX_BYTES:
        raise _too_large(name, len(raw))
    if not raw.strip():
        raise Unreadable(
            f"{name}: the file is empty. Save the notebook again in Jupyter (File > Save) and "
            "re-submit."
        )
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise _bad_json(name, f"not UTF-8 text: {exc}") from None
    deep = Unreadable(
        f"{name}: not a notebook: its JSON is nested too deeply (more than {MAX_DEPTH} levels)."
    )
    try:
        data = json.loads(text)
    except RecursionError:
        raise deep from None
    except (
        ValueError,
        MemoryError,
    ) as exc:  # JSONDecodeError is a ValueError; so is an over-long integer
        raise _bad_json(name, str(exc)[:300]) from None
    del text
    if not isinstance(data, dict) or "cells" not in data:
        if _depth_exceeds(data, MAX_DEPTH):
            raise deep
        raise Unreadable(
            f"{name}: valid JSON but not a Jupyter notebook (no 'cells'); submit the .ipynb file "
            "itself."
        )
    cells = data["cells"]
    if not isinstance(cells, list) or not all(isinstance(c, dict) for c in cells):
        raise Unreadable(
            f"{name}: 'cells' is malformed (not a list of cells); save it again from Jupyter."
        )
    if len(cells) > MAX_CELLS:
        raise Unreadable(
            f"{name}: {len(cells)} cells; a submission may have at most {MAX_CELLS}. "
            "Delete the cells you added for experiments and re-submit."
        )
    n_code = sum(c.get("cell_type") == "code" for c in cells)
    if n_code > MAX_CODE_CELLS:
        raise Unreadable(
            f"{name}: {n_code} code cells; a submission may have at most {MAX_CODE_CELLS}. "
            "Delete the cells you added for experiments and re-submit."
        )
    kept = kept_notebook(data, name)
    del data, cells  # the outputs go now: nothing below reads them
    if _depth_exceeds(kept, MAX_DEPTH):
        raise deep
    code_bytes = text_bytes = 0
    for cell in kept["cells"]:
        cell["source"] = normalise_source(cell["source"])
        size = len(cell["source"].encode("utf-8", "surrogatepass"))
        text_bytes += size
        if cell["cell_type"] == "code":
            code_bytes += size
    if code_bytes > MAX_SOURCE_BYTES:
        raise Unreadable(
            f"{name}: {code_bytes / 2**20:.1f} MB of code; a submission may have at most "
            f"{MAX_SOURCE_BYTES // 2**20} MB. Delete the code you added for experiments and "
            "re-submit."
        )
    if text_bytes > MAX_TEXT_BYTES:
        raise Unreadable(
            f"{name}: {text_bytes / 2**20:.1f} MB of cell sources; a submission may have at most "
            f"{MAX_TEXT_BYTES // 2**20} MB. Delete the text you pasted into cells and re-submit."
        )
    try:
        with warnings.catch_warnings():  # a 4.5 cell without an id gets one: matched by content
            warnings.simplefilter("ignore", MissingIDFieldWarning)
            nb = nbformat.reads(json.dumps(kept), as_version=4)
    except Exception as exc:  # nbformat raises several types for malformed notebooks
        raise Unreadable(
            f"{name}: not a valid Jupyter notebook ({type(exc).__name__}: {str(exc)[:300]})."
        ) from None
    return nb


def read_notebook(path, name: str | None = None):
    """The submission at ``path``, read defensively (``read_submission`` then
    ``parse_notebook``)."""
    name = name or display_name(path)
    return parse_notebook(read_submission(path, name), name)


# --------------------------------------------------------------------------- the solution
def find_solutions_dir(near: Path) -> Path:
    """The course's ``solutions/`` folder: in the current folder, or in a folder above the
    notebook (a clone of the course repository). ``find_solution`` explains when there is none."""
    for base in (Path.cwd(), *Path(near).resolve().parents):
        if (base / "solutions").is_dir():
            return base / "solutions"
    return Path.cwd() / "solutions"


def solution_stems(solutions_dir: Path) -> dict[str, Path]:
    """{stem: path} of the solution notebooks directly in ``solutions_dir``: the only names a
    submission can be graded against."""
    solutions_dir = Path(solutions_dir)
    if not solutions_dir.is_dir():
        raise GraderError(
            f"the solutions folder {solutions_dir} does not exist: grade from a clone of the "
            "course "
            "repository (pip-installed course_lib has no solutions), or pass --solutions DIR."
        )
    return {
        p.stem: p for p in sorted(solutions_dir.iterdir()) if p.suffix == ".ipynb" and p.is_file()
    }


def find_solution(sub, path, solutions_dir: Path) -> Path:
    """The solution a submission is graded against: its ``course.notebook`` metadata if that is
    exactly the stem of a notebook in ``solutions_dir`` (a path such as ``../../sub/x``, an
    absolute path or ``04_attention/../x`` is not), else the longest such stem in its file name,
    else Unreadable."""
    stems = solution_stems(solutions_dir)
    course = sub.metadata.get("course") if isinstance(sub.metadata, dict) else None
    stem = course.get("notebook") if isinstance(course, dict) else None
    if isinstance(stem, str) and stem in stems:
        return stems[stem]
    name = display_name(Path(path).name)
    matches = [s for s in stems if s and s in name]
    if matches:
        return stems[max(matches, key=len)]
    raise Unreadable(
        f"{name}: cannot tell which exercise notebook this is (no course.notebook metadata naming "
        "one of "
        f"the solutions and no solution stem such as 04_attention in the file name); pass "
        "--solution PATH."
    )


# --------------------------------------------------------------------------- answers
_NBVAL_MARKER = re.compile(r"^(\s*)#+\s*(NBVAL_[A-Z_]+|PYTEST_VALIDATE_IGNORE_OUTPUT)\s*$", re.M)


def _neutralise_markers(code: str) -> str:
    """Comment markers such as ``# NBVAL_SKIP`` neutralised: the grader runs no nbval, but the
    graded code then reads the same to any tool that does."""
    return _NBVAL_MARKER.sub(r"\1# (nbval marker \2 ignored by the grader)", code)


def _classify(sub, spec: NotebookSpec, sol=None) -> list[tuple[object, str | None, str | None]]:
    """Every cell of the submission as (cell, kind, what): ``("answer", exercise)`` for an
    answer cell (its id, else its marker line), ``("trusted", solution cell id)`` for a setup or
    check cell (its id, else its source, else its ``course`` metadata: the k-th check cell of an
    exercise is that exercise's k-th), else ``(None, None)``. No cell id is needed: nbformat
    before 4.5 has none, and Colab keeps its own in the cell metadata."""
    trusted = set(spec.trusted_ids)
    answer_ids = {ex.answer_id: ex.name for ex in spec.exercises}
    markers = {MARKER.format(name=ex.name): ex.name for ex in spec.exercises}
    by_source: dict[str, str] = {}
    for c in sol.cells if sol is not None else []:
        if c.cell_type == "code" and c.get("id") in trusted:
            by_source.setdefault(normalise_source(c.source).strip(), c.id)
    by_meta: dict[tuple[str, str | None], list[str]] = {("setup", None): list(spec.setup_ids)}
    for ex in spec.exercises:
        by_meta[("check", ex.name)] = list(ex.check_ids)
    seen: dict[tuple[str, str | None], int] = {}
    out: list[tuple[object, str | None, str | None]] = []
    for cell in sub.cells:
        cid = cell.get("id") if isinstance(cell.get("id"), str) else None
        src = normalise_source(cell.get("source", ""))
        named = answer_ids.get(cid) or next(
            (n for m, n in markers.items() if src.lstrip().startswith(m)), None
        )
        if named:
            out.append((cell, "answer", named))
            continue
        if cell.get("cell_type") != "code":
            out.append((cell, None, None))
            continue
        tid = cid if cid in trusted else by_source.get(src.strip())
        if tid is None:
            course = cell.get("metadata", {}).get("course")
            if isinstance(course, dict) and course.get("role") in ("setup", "check"):
                key = (
                    course["role"],
                    course.get("exercise") if course["role"] == "check" else None,
                )
                ids = by_meta.get(key, [])
                k = seen.get(key, 0)
                seen[key] = k + 1
                tid = ids[k] if k < len(ids) else None
        out.append((cell, "trusted", tid) if tid is not None else (cell, None, None))
    return out


def extract_answers(sub, spec: NotebookSpec, sol) -> tuple[dict[str, list[str]], list[str]]:
    """{exercise: [code of each student cell]}: every code cell between the trusted cells around
    an answer (so added helper cells and split cells count), plus notes for the report. Sources
    are normalised (``normalise_source``) before markers are looked for or neutralised."""
    pos = {cid: i for i, cid in enumerate(spec.trusted_ids)}
    after: dict[str, str | None] = {}  # trusted id -> the exercise whose answer comes next
    for cid in spec.trusted_ids:
        after[cid] = next(
            (
                ex.name
                for ex in spec.exercises
                if ex.prev_anchor is not None and pos[ex.prev_anchor] >= pos[cid]
            ),
            None,
        )
    answers: dict[str, list[str]] = {ex.name: [] for ex in spec.exercises}
    notes: list[str] = []
    current = None
    for cell, kind, what in _classify(sub, spec, sol):
        src = normalise_source(cell.get("source", ""))  # before any marker logic
        if kind == "trusted":
            current = after[what]
            continue
        if cell.cell_type != "code":
            if kind == "answer":
                notes.append(
                    f"{what}: the answer cell is a {cell.cell_type} cell, so its code was not "
                    "run; "
                    "change it back to a code cell (Cell > Cell Type > Code)."
                )
            continue
        if kind == "answer":
            current = what
        if current is None:
            if src.strip():
                notes.append(
                    "code outside the exercises (before the first answer or after the last check) "
                    "was ignored."
                )
            continue
        if src.strip():
            answers[current].append(_neutralise_markers(src))
    for ex in spec.exercises:
        if not answers[ex.name]:
            notes.append(
                f"{ex.name}: no answer code found (was the answer cell deleted or turned into "
                "markdown?)."
            )
    return answers, notes


def _count(cell) -> int | None:
    n = cell.get("execution_count") if isinstance(cell, dict) else None
    return n if type(n) is int and 0 < n < 10**9 else None


def _changed(cell, names: list[str]) -> bool:
    """Whether a measuring cell's saved output holds a verdict saying the prediction changed."""
    outputs = cell.get("outputs") if isinstance(cell, dict) else None
    for out in outputs if isinstance(outputs, list) else []:
        text = out.get("text", "") if isinstance(out, dict) else ""
        text = "".join(text) if isinstance(text, list) else text
        for line in text.splitlines() if isinstance(text, str) else []:
            for name in names:
                v = parse_line(line, name)
                if v is not None and not v.passed and v.reason.startswith(CHANGED):
                    return True
    return False


def prediction_facts(sub, spec: NotebookSpec, sol=None) -> dict[str, dict[str, dict]]:
    """Predict, then run: for each exercise whose answer is a prediction (``predict``), what the
    saved submission shows about each of its measuring (check) cells: ``answer``, the execution
    count of the prediction's answer cell (the latest, if it was copied; None when it was not
    run), ``measure``, that check cell's execution count (the earliest, if it was copied), and
    ``changed``, whether its saved output says the prediction changed after a measurement. Cells
    are matched as ``extract_answers`` matches them (``_classify``: by id, source, marker or
    ``course`` metadata), so a notebook without cell ids (nbformat 4.4 or older; Colab, which
    keeps its ids in the cell metadata) loses nothing. Read here, in the grader, from the file;
    the checker judges them (``checks.check_prediction``); the student's process never sees
    them."""
    classified = [(c, k, w) for c, k, w in _classify(sub, spec, sol) if c.cell_type == "code"]
    facts: dict[str, dict[str, dict]] = {}
    for ex in spec.exercises:
        if not ex.predict:
            continue
        answers = [_count(c) for c, k, w in classified if k == "answer" and w == ex.name]
        ran = [n for n in answers if n is not None]
        names = [c.name for c in ex.checks]
        for cid in ex.check_ids:
            measures = [c for c, k, w in classified if k == "trusted" and w == cid]
            counts = [n for n in map(_count, measures) if n is not None]
            facts.setdefault(ex.name, {})[cid] = {
                "answer": max(ran) if ran else None,
                "measure": min(counts) if counts else None,
                "changed": any(_changed(m, names) for m in measures),
            }
    return facts
