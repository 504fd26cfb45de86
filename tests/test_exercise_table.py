"""exercises/README.md's table of notebooks says what the solution notebooks hold: the same
notebooks, exercise names, counts and points (the table is what instructors read)."""

import json
import re

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


def _table() -> dict[str, tuple[str, int, float]]:
    text = (ROOT / "exercises" / "README.md").read_text()
    rows = re.findall(r"^\| `(\w+)` \| (.*) \| (\d+) \| ([\d.]+) \|$", text, flags=re.M)
    return {stem: (names, int(count), float(points)) for stem, names, count, points in rows}


def test_every_notebook_has_one_row_with_its_count_and_points():
    solutions, table = _solutions(), _table()
    assert sorted(table) == sorted(solutions), "exercises/README.md: rows and solutions/ differ"
    for stem, answers in solutions.items():
        names, count, points = table[stem]
        assert count == len(answers), (
            f"{stem}: table says {count} exercises, notebook has {len(answers)}"
        )
        total = sum(a["points"] for a in answers)
        assert points == total, f"{stem}: table says {points:g} points, notebook has {total:g}"
        listed = re.findall(r"`(\w+)`", names)
        missing = [a["exercise"] for a in answers if a["exercise"] not in listed]
        assert not missing, f"{stem}: exercises missing from the table: {missing}"
