"""The verdict line: the one format a check prints in a live notebook (stdlib only: it is
imported wherever ``checks`` is). The grader does not read printed lines: its checker records
structured verdicts (``checks``, checker mode); the stored outputs of the solution notebooks
are these lines (``pass_lines``), which nbval compares.

::

    [PASS] name
    [FAIL] name: reason. Hint: hint

``format_verdict`` writes a line; ``read_verdict`` finds the verdict of one named check in a
check cell's printed output (the tests of live mode use it).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "PASS",
    "FAIL",
    "HINT_SEP",
    "Verdict",
    "format_verdict",
    "parse_line",
    "read_verdict",
    "pass_lines",
    "CHANGED",
    "MEASURED",
]

PASS, FAIL, HINT_SEP = "[PASS] ", "[FAIL] ", ". Hint: "
# predict, then run (``checks.check_prediction``): the reason a live verdict gives when the
# prediction changed after its measurement had run (the grader looks for it in the saved output),
# and the note line under a measuring check's verdict (not a verdict line)
CHANGED = "your prediction changed after this measurement had run"
MEASURED = "    measured: "


@dataclass(frozen=True)
class Verdict:
    name: str
    passed: bool
    reason: str = ""  # why it failed ("" for a pass)
    hint: str = ""


def format_verdict(name: str, passed: bool, reason: str = "", hint: str = "") -> str:
    """The line a check prints. ``name`` must be one non-empty line; a failing verdict needs a
    reason and a hint."""
    if not isinstance(name, str) or not name or "\n" in name:
        raise ValueError("a check needs a one-line, non-empty name (it is the verdict text).")
    if passed:
        return f"{PASS}{name}"
    return f"{FAIL}{name}: {reason}{HINT_SEP}{hint}"


def parse_line(line: str, name: str) -> Verdict | None:
    """The verdict of check ``name`` if ``line`` is one (names may contain ': ', so the name is
    given rather than guessed), else None."""
    if line == f"{PASS}{name}":
        return Verdict(name, True)
    head = f"{FAIL}{name}: "
    if line.startswith(head):
        reason, _, hint = line[len(head) :].partition(HINT_SEP)
        return Verdict(name, False, reason, hint)
    return None


def read_verdict(stdout: str, name: str) -> Verdict | None:
    """The verdict of check ``name`` in a check cell's output: a pass only if exactly one
    ``[PASS] name`` line is there (and no FAIL line for it); the first FAIL line otherwise;
    None when the check printed no verdict."""
    found = [v for v in (parse_line(line, name) for line in stdout.splitlines()) if v is not None]
    fails = [v for v in found if not v.passed]
    if fails:
        return fails[0]
    if len(found) == 1:
        return found[0]
    if found:  # several PASS lines for one check: printed by something else too
        return Verdict(name, False, "the check printed more than one verdict")
    return None


def pass_lines(names: list[str]) -> list[str]:
    """The output of a check cell whose checks all pass (what a solution stores)."""
    return [format_verdict(n, True) for n in names]
