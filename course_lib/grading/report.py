"""Verdicts, scores and reports: from the cell records of a run to the JSON report of a
submission, its text form, and the output of a batch (``Gradebook``: injective report file
names, each report written as soon as its grading ends, ``gradebook.csv`` rewritten atomically)."""

from __future__ import annotations

import csv
import hashlib
import io
import json
import os
import string
import tempfile
import unicodedata
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from .notebooks import display_name

__all__ = [
    "ExerciseResult",
    "check_results",
    "exercise_result",
    "build_report",
    "format_report",
    "report_names",
    "write_atomic",
    "gradebook_text",
    "Gradebook",
    "display_name",
]


@dataclass
class ExerciseResult:
    name: str
    max_points: float
    status: str = "graded"  # graded | timed out | crashed | rejected
    messages: list[str] = field(default_factory=list)
    checks: list[dict] = field(default_factory=list)

    @property
    def points(self) -> float:
        if self.status != "graded" or not self.checks:
            return 0.0
        return round(self.max_points * sum(c["passed"] for c in self.checks) / len(self.checks), 2)

    def fail_all(self, ex, detail: str) -> None:
        self.checks = [
            {"name": c.name, "passed": False, "hint": c.hint, "detail": detail} for c in ex.checks
        ]


def check_results(ex, verdicts: list[dict], checker_errors: list[str] = ()) -> list[dict]:
    """One entry per check of exercise ``ex``: passed, and otherwise why, from the checker's
    verdicts (a check made several times, e.g. in a loop, passes only if every time passed)."""
    results = []
    for c in ex.checks:
        mine = [v for v in verdicts if v.get("cell") == c.cell_id and v.get("name") == c.name]
        passed = bool(mine) and all(v["passed"] for v in mine)
        detail = ""
        if not passed:
            failed = next((v for v in mine if not v["passed"]), None)
            if failed is not None:
                detail = failed["reason"]
            elif checker_errors:
                detail = "the check could not be judged: " + checker_errors[0]
            else:
                detail = "the check did not run"
        results.append({"name": c.name, "passed": passed, "hint": c.hint, "detail": detail})
    return results


def exercise_result(
    result: ExerciseResult, ex, run, time_limit: float, memory_mb: int
) -> ExerciseResult:
    """Fill ``result`` from what happened when the exercise ran (``runner.ExerciseRun``)."""
    if run.status == "timed out":
        result.status = "timed out"
        result.messages.append(
            f"timed out after {time_limit:g} s (one time limit per exercise, for its answer cells "
            "and its "
            "checks together); look for an infinite loop or a very slow computation"
        )
        result.fail_all(ex, "timed out")
    elif run.status == "crashed":
        result.status = "crashed"
        result.messages.append(
            "crashed: your code ended its process while this exercise ran (os._exit, a crash such "
            "as a segfault, "
            f"or more memory than the {memory_mb} MB limit); the other exercises were graded in "
            "their own processes" + (f" ({run.why})" if run.why else "")
        )
        result.fail_all(ex, "crashed")
    else:
        for err in run.errors:
            result.messages.append(f"your answer cell raised {err}")
        result.checks = check_results(ex, run.verdicts, run.checker_errors)
    return result


def build_report(
    path,
    sol_path: Path,
    spec,
    results: dict[str, ExerciseResult],
    notes: list[str],
    passes: int,
    seconds: float,
    sandbox: str,
) -> dict:
    """The JSON-able report of one submission (scores from the per-exercise results)."""
    exs = [results[ex.name] for ex in spec.exercises]
    return {
        "submission": str(path),
        "notebook": sol_path.stem,
        "solution": str(sol_path),
        "status": "graded",
        "score": round(sum(r.points for r in exs), 2),
        "max_score": spec.max_score,
        "all_passed": all(c["passed"] for r in exs for c in r.checks)
        and all(r.status == "graded" for r in exs),
        "exercises": [
            {
                "name": r.name,
                "points": r.points,
                "max_points": r.max_points,
                "status": r.status,
                "messages": r.messages,
                "checks": r.checks,
            }
            for r in exs
        ],
        "notes": [n for n in notes if n.split(":")[0] not in results],
        "passes": passes,
        "seconds": round(seconds, 1),
        "sandbox": sandbox,
    }


def format_report(rep: dict) -> str:
    lines = [f"Grading {rep['submission']} against {rep['solution']}", ""]
    for ex in rep["exercises"]:
        status = "" if ex["status"] == "graded" else f"  ({ex['status']})"
        lines.append(f"  {ex['name']:<24} {ex['points']:6.2f} / {ex['max_points']:g}{status}")
        for m in ex["messages"]:
            lines.append(f"      note: {m}")
        for c in ex["checks"]:
            if not c["passed"]:
                lines.append(f"      [FAIL] {c['name']}: {c['detail']}")
                lines.append(f"             hint: {c['hint']}")
    for n in rep.get("notes", []):
        lines.append(f"  note: {n}")
    pct = 100 * rep["score"] / rep["max_score"] if rep["max_score"] else 0
    lines += ["", f"Total: {rep['score']:g} / {rep['max_score']:g} ({pct:.0f} %)"]
    return "\n".join(lines)


# --------------------------------------------------------------------------- batch output
_SAFE = frozenset(string.ascii_letters + string.digits + "._-+=,@")
_REPORT_SUFFIX = ".grade.json"


def _escape(rel: str) -> str:
    """An injective, file-name-safe spelling of a relative path: ``/`` becomes ``~``; ASCII
    letters, digits, ``._-+=,@`` and printable non-ASCII characters stay; every other character
    (``~``, ``%``, spaces, controls, bytes that are not UTF-8) becomes ``%XX`` per byte. Since
    ``%`` and ``~`` are always escaped, the original path can be read back: no two paths share
    a spelling (``alice/x`` -> ``alice~x``, ``alice__x`` -> ``alice__x``)."""
    out = []
    for ch in rel:
        if ch == "/":
            out.append("~")
        elif ch in _SAFE or (ord(ch) > 127 and ch.isprintable()):  # surrogates are not printable
            out.append(ch)
        else:
            try:
                raw = ch.encode(
                    "utf-8", "surrogateescape"
                )  # a byte that was not UTF-8 -> that byte
            except UnicodeEncodeError:
                raw = ch.encode("utf-8", "surrogatepass")
            out.extend(f"%{b:02X}" for b in raw)
    return "".join(out)


def _fold(name: str) -> str:
    """What a case-insensitive or normalising file system (macOS, Windows) sees of a name."""
    return unicodedata.normalize("NFC", name).casefold()


def report_names(rels: list[str]) -> dict[str, str]:
    """{relative path: its JSON report's file name}, one flat folder, injective: the escaped path
    (``_escape``) without ``.ipynb``, plus ``.grade.json``; where two escaped names differ only in
    case or Unicode
    normalisation, or one is over-long, the name is shortened and ``%%`` plus a hash of the
    path's bytes appended (``%%`` never occurs in an escaped name)."""
    # every submission ends in .ipynb, which the name leaves out (alice/x.ipynb ->
    # alice~x.grade.json);
    # any other path keeps a lone "%", which no escaped name ends with
    esc = {
        r: _escape(r[: -len(".ipynb")]) if r.endswith(".ipynb") else _escape(r) + "%" for r in rels
    }
    folded = Counter(_fold(e) for e in esc.values())
    names = {}
    for r, e in esc.items():
        if folded[_fold(e)] > 1 or len(e.encode()) > 200:
            digest = hashlib.sha256(r.encode("utf-8", "surrogateescape")).hexdigest()[:12]
            while len(e.encode()) > 180:
                e = e[:-1]
            e = f"{e}%%{digest}"
        names[r] = e + _REPORT_SUFFIX
    return names


def write_atomic(path: Path, text: str) -> None:
    """Write ``text`` (UTF-8; unencodable characters backslash-escaped) to a temporary file beside
    ``path`` and rename it over ``path``: a crash leaves the old file or the new one, never half."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".part")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", errors="backslashreplace", newline="") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


GRADEBOOK_FIELDS = [
    "submission",
    "notebook",
    "status",
    "score",
    "max_score",
]  # + exercises, sandbox, report, error


def gradebook_text(rows: list[tuple[str, str, dict]]) -> str:
    """The CSV text of ``gradebook.csv``: one row per (shown name, report file name, report)."""
    ex_names = sorted({e["name"] for _, _, r in rows for e in r.get("exercises", [])})
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow([*GRADEBOOK_FIELDS, *ex_names, "sandbox", "report", "error"])
    for shown, report, r in rows:
        pts = {e["name"]: e["points"] for e in r.get("exercises", [])}
        w.writerow(
            [
                shown,
                r.get("notebook", ""),
                r["status"],
                r["score"],
                r.get("max_score") or "",
                *[pts.get(n, "") for n in ex_names],
                r.get("sandbox", ""),
                report,
                r.get("error", ""),
            ]
        )
    return buf.getvalue()


class Gradebook:
    """The output folder of a batch, written as results arrive: ``add`` writes a submission's JSON
    report at once and rewrites ``gradebook.csv`` (atomically, rows in the order of ``rels``) with
    every result so far, so a crash later in the batch loses nothing already graded."""

    def __init__(self, out: Path, rels: list[str]):
        self.out = Path(out)
        self.rels = list(rels)
        self.names = report_names(self.rels)
        self.reports: dict[str, dict] = {}
        self.out.mkdir(parents=True, exist_ok=True)
        write_atomic(self.out / "gradebook.csv", gradebook_text([]))

    def add(self, rel: str, report: dict) -> None:
        self.reports[rel] = report
        write_atomic(
            self.out / self.names[rel], json.dumps(report, indent=1)
        )  # ASCII: always writable
        rows = [
            (display_name(r), self.names[r], self.reports[r])
            for r in self.rels
            if r in self.reports
        ]
        write_atomic(self.out / "gradebook.csv", gradebook_text(rows))

    def in_order(self) -> list[dict]:
        return [self.reports[r] for r in self.rels if r in self.reports]
