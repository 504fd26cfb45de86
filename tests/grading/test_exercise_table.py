"""exercises/README.md's table of notebooks says what the solution notebooks hold: the same
notebooks, exercise names, kinds, counts, points and points of the thinking kinds (the table is
what instructors read)."""

import json
import re

from course_lib.grading.spec import THINKING_KINDS
from tools import ROOT


def _solutions() -> dict[str, list[dict]]:
    out = {}
    for path in sorted((ROOT / "solutions").glob("*.ipynb")):
        cells = json.loads(path.read_text())["cells"]
        out[path.stem] = [
            c["metadata"]["course"]
            for c in cells
            if c["metadata"].get("course", {}).get("role") == "answer"
        ]
    return out


def _table() -> dict[str, tuple[str, int, float, float, int]]:
    text = (ROOT / "exercises" / "README.md").read_text()
    rows = re.findall(
        r"^\| `(\w+)` \| (.*) \| (\d+) \| ([\d.]+) \| ([\d.]+) \((\d+) %\) \|$", text, flags=re.M
    )
    return {
        stem: (names, int(count), float(points), float(think), int(share))
        for stem, names, count, points, think, share in rows
    }


def test_every_notebook_has_one_row_with_its_count_and_points():
    solutions, table = _solutions(), _table()
    assert sorted(table) == sorted(solutions), "exercises/README.md: rows and solutions/ differ"
    for stem, answers in solutions.items():
        names, count, points, _, _ = table[stem]
        assert count == len(answers), (
            f"{stem}: table says {count} exercises, notebook has {len(answers)}"
        )
        total = sum(a["points"] for a in answers)
        assert points == total, f"{stem}: table says {points:g} points, notebook has {total:g}"
        listed = re.findall(r"`(\w+)`", names)
        missing = [a["exercise"] for a in answers if a["exercise"] not in listed]
        assert not missing, f"{stem}: exercises missing from the table: {missing}"


def test_the_table_shows_each_exercise_kind_and_the_thinking_points():
    solutions, table = _solutions(), _table()
    for stem, answers in solutions.items():
        names, _, points, think, share = table[stem]
        kinds = dict(re.findall(r"`(\w+)` \[(\w+)\]", names))
        assert kinds == {a["exercise"]: a["kind"] for a in answers}, (stem, kinds)
        want = sum(a["points"] for a in answers if a["kind"] in THINKING_KINDS)
        assert think == want, f"{stem}: table says {think:g} thinking points, notebook has {want:g}"
        assert share == round(100 * want / points), (stem, share)
