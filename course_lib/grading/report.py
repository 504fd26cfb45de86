"""Verdicts, scores and reports: from the cell records of a run to the JSON report of a
submission, its text form, and the gradebook of a batch."""
from __future__ import annotations

import csv
import json
import os
from dataclasses import dataclass, field
from pathlib import Path


__all__ = ["ExerciseResult", "check_results", "exercise_result", "build_report", "format_report",
           "write_gradebook"]


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
        self.checks = [{"name": c.name, "passed": False, "hint": c.hint, "detail": detail} for c in ex.checks]


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


def exercise_result(result: ExerciseResult, ex, run, time_limit: float, memory_mb: int) -> ExerciseResult:
    """Fill ``result`` from what happened when the exercise ran (``runner.ExerciseRun``)."""
    if run.status == "timed out":
        result.status = "timed out"
        result.messages.append(
            f"timed out after {time_limit:g} s (one time limit per exercise, for its answer cells and its "
            "checks together); look for an infinite loop or a very slow computation")
        result.fail_all(ex, "timed out")
    elif run.status == "crashed":
        result.status = "crashed"
        result.messages.append(
            "your code ended the process while this exercise ran (os._exit, a crash such as a segfault, or "
            f"more memory than the {memory_mb} MB limit); the other exercises were graded in fresh processes")
        result.fail_all(ex, "crashed")
    else:
        for err in run.errors:
            result.messages.append(f"your answer cell raised {err}")
        result.checks = check_results(ex, run.verdicts, run.checker_errors)
    return result


def build_report(path, sol_path: Path, spec, results: dict[str, ExerciseResult], notes: list[str],
                 passes: int, seconds: float, sandbox: str) -> dict:
    """The JSON-able report of one submission (scores from the per-exercise results)."""
    exs = [results[ex.name] for ex in spec.exercises]
    return {
        "submission": str(path), "notebook": sol_path.stem, "solution": str(sol_path), "status": "graded",
        "score": round(sum(r.points for r in exs), 2), "max_score": spec.max_score,
        "all_passed": all(c["passed"] for r in exs for c in r.checks) and all(r.status == "graded" for r in exs),
        "exercises": [{"name": r.name, "points": r.points, "max_points": r.max_points, "status": r.status,
                       "messages": r.messages, "checks": r.checks} for r in exs],
        "notes": [n for n in notes if n.split(":")[0] not in results],
        "passes": passes, "seconds": round(seconds, 1), "sandbox": sandbox,
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


def write_gradebook(reports: list[dict], folder: Path, out: Path) -> None:
    """``out/gradebook.csv`` (one row per submission, with the mode that graded it) and one JSON
    report per submission."""
    ex_names = sorted({e["name"] for r in reports for e in r.get("exercises", [])})
    with open(out / "gradebook.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["submission", "notebook", "status", "score", "max_score", *ex_names, "sandbox", "error"])
        for r in reports:
            pts = {e["name"]: e["points"] for e in r.get("exercises", [])}
            w.writerow([Path(r["submission"]).relative_to(folder), r.get("notebook", ""), r["status"], r["score"],
                        r.get("max_score") or "", *[pts.get(n, "") for n in ex_names], r.get("sandbox", ""),
                        r.get("error", "")])
    for r in reports:
        rel = Path(r["submission"]).relative_to(folder)
        target = out / (str(rel.with_suffix("")).replace(os.sep, "__") + ".grade.json")
        target.write_text(json.dumps(r, indent=1))
