"""What a training run measures, and what may differ between machines (``tools/spread.py``,
``course_lib/results/isa_spread.json`` written by ``benchmarks/isa_spread.py``).

Fast: the measurement covers every value its pages glue, in every run; the tolerance table is
derived from it as documented; a build is judged exactly on exact values, within tolerance on
measured numbers, freely on measured phrases, and a value that is new, missing or further off
than any simulated CPU moved it fails.
"""

from __future__ import annotations

import json
import re

import pytest

from tools import ROOT, reader, spread
from tools.spread import MARGIN, Tolerance, glue_differences, parse_number, tolerances

DATA = spread.load_spread()
PAGES = sorted(DATA["pages"])


def _glue_keys(page: str) -> set[str]:
    """The names a page's code cells glue (literal names and the f-string families' prefixes
    resolved against the measurement: ``glue(f"dbg_{bug}_first", ...)``)."""
    text = (ROOT / f"{page}.md").read_text(encoding="utf-8")
    return set(re.findall(r"""\bglue\(\s*["']([^"'{}]+)["']""", text))


@pytest.mark.parametrize("page", PAGES)
def test_the_measurement_covers_every_value_its_pages_glue(page):
    """A value a measured page glues must have been measured in every run: a new glued value
    without a measurement (so without a tolerance) fails here, before any build."""
    runs = DATA["pages"][page]
    assert set(runs) == set(DATA["runs"]), f"{page}: runs {sorted(runs)} of {sorted(DATA['runs'])}"
    glued = _glue_keys(page)
    pending = set(spread.NOT_YET_MEASURED.get(page, ()))
    assert pending <= glued, f"{page}: NOT_YET_MEASURED lists {sorted(pending - glued)}, unglued"
    for name, run in runs.items():
        assert not pending & set(run["glue"]), f"{page}: measured now, drop from NOT_YET_MEASURED"
        missing = sorted(glued - set(run["glue"]) - pending)
        assert not missing, (
            f"{page} glues {missing}, which the {name} run of {spread.SPREAD_FILE} did not "
            f"measure: python benchmarks/isa_spread.py --pages {page}"
        )
    keys = {name: set(run["glue"]) for name, run in runs.items()}
    assert len({frozenset(k) for k in keys.values()}) == 1, f"{page}: runs glued other names"


def test_the_runs_simulate_the_cpus_they_name():
    """Each run reports the instruction set its environment asked for (a run whose variable
    torch ignored would measure nothing)."""
    expected = {"avx2": "AVX2", "avx2+onednn": "AVX2", "no-vector": "DEFAULT"}
    for page, runs in DATA["pages"].items():
        for name, want in expected.items():
            assert runs[name]["capability"] == want, (page, name, runs[name]["capability"])
        assert len({runs[n]["capability"] for n in ("native", "avx2", "no-vector")}) == 3, (
            f"{page}: the measurement ran on a machine without AVX-512 (the native run then"
            " duplicates the avx2 one); measure on one with it"
        )


def test_every_measured_page_is_a_measurement_page_of_the_script(monkeypatch):
    import importlib.util

    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))  # the script imports _common

    spec = importlib.util.spec_from_file_location(
        "isa_spread", ROOT / "benchmarks" / "isa_spread.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert set(PAGES) <= set(module.PAGES)
    assert {name: (spread.CPUS[cpu], k) for name, (cpu, k) in module.RUNS.items()} == {
        name: (r["env"], r["seed_offset"]) for name, r in DATA["runs"].items()
    }


@pytest.mark.parametrize(
    "text, number",
    [
        ("'85.8'", 85.8),
        ("142", 142.0),
        ("'1,234'", 1234.0),
        ("'−0.5'", -0.5),
        ("'-0.75'", -0.75),
        ("'3.2 × 10⁻⁵'", 3.2e-5),
        ("'4.7 × 10¹²'", 4.7e12),
        ("'reads *two* most'", None),
        ("'0.8 points more than greedy'", None),
        ("True", None),
        ("'1.2.3'", None),
    ],
)
def test_parse_number(text, number):
    assert parse_number(text) == (pytest.approx(number) if number is not None else None)


def _synthetic(tmp_path, runs: dict[str, dict[str, str]], seeds: dict[str, int] | None = None):
    """A measurement of one page, ``book/x``, with these texts per run (``seeds``: the runs
    on other seeds, by their offset; the rest are simulated CPUs)."""
    seeds = seeds or {}
    data = {
        "runs": {name: {"env": {}, "seed_offset": seeds.get(name, 0)} for name in runs},
        "pages": {
            "book/x": {
                name: {
                    "capability": "X",
                    "seconds": 1,
                    "glue": {k: {"text/plain": t} for k, t in g.items()},
                }
                for name, g in runs.items()
            }
        },
    }
    (tmp_path / "course_lib" / "results").mkdir(parents=True)
    (tmp_path / spread.SPREAD_FILE).write_text(json.dumps(data))
    return tmp_path


def test_tolerances_are_margin_times_the_measured_range(tmp_path):
    root = _synthetic(
        tmp_path,
        {
            "a": {"n": "3", "loss": "'1.20'", "word": "'two'", "both": "'1.0'", "init": "'4.4'"},
            "b": {"n": "3", "loss": "'1.22'", "word": "'and'", "both": "'1.0'", "init": "'4.4'"},
            "seed": {"n": "3", "loss": "'1.25'", "word": "'two'", "both": "'1.0'", "init": "'4.3'"},
        },
        seeds={"seed": 1},
    )
    table = tolerances(root)
    assert set(table) == {("book/x", "loss"), ("book/x", "word")}, (
        "n and both are the same everywhere; init differs only between seeds: exact"
    )
    loss = table["book/x", "loss"]
    assert loss.kind == "number" and loss.tolerance == pytest.approx(MARGIN * 0.05), (
        "the tolerance spans the seed's run too"
    )
    assert table["book/x", "word"].kind == "phrase"

    def judge(published: dict, built: dict):
        wrap = lambda g: {"book/x": {k: {"text/plain": t} for k, t in g.items()}}  # noqa: E731
        return glue_differences(wrap(published), wrap(built), root=root)

    base = {"n": "3", "loss": "'1.20'", "word": "'two'", "both": "'1.0'", "init": "'4.4'"}
    assert judge(base, base) == ([], [])
    problems, within = judge(base, {**base, "loss": "'1.30'", "word": "'hundred'"})
    assert problems == [] and len(within) == 2, "within 3 × 0.05, and a phrase"
    problems, _ = judge(base, {**base, "loss": "'1.40'"})
    assert len(problems) == 1 and "loss" in problems[0] and "tolerance" in problems[0]
    problems, _ = judge(base, {**base, "n": "4"})
    assert len(problems) == 1 and "exact value changed" in problems[0]
    problems, _ = judge(base, {**base, "new": "'1'"})
    assert len(problems) == 1 and "new" in problems[0] and "missing" in problems[0]


def test_a_page_the_measurement_never_ran_is_judged_exactly():
    problems, within = glue_differences(
        {"book/not_measured": {"v": {"text/plain": "'1.0'"}}},
        {"book/not_measured": {"v": {"text/plain": "'1.1'"}}},
    )
    assert len(problems) == 1 and "exact" in problems[0] and within == []


def test_the_published_numbers_are_one_of_the_machines_the_tolerances_allow():
    """notebooks/site.json, the published numbers, are themselves one machine's build: each
    measured number lies within its tolerance of the native run's."""
    site = reader.load_site_data(ROOT)
    off = []
    for (page, key), tol in tolerances().items():
        published = site["pages"].get(page, {}).get("glue", {}).get(key)
        if published is None or tol.kind != "number" or key in reader.MEASURED.get(page, ()):
            continue
        if not tol.allows(spread.glue_text(published), tol.values["native"]):
            off.append(f"{page}: {key} {spread.glue_text(published)} vs {tol.describe()}")
    assert not off, "\n".join(off)


def test_tolerance_allows_reads_numbers_not_text():
    tol = Tolerance("book/x", "v", "number", {"a": "'1.0'", "b": "'2.0'"}, 1.0, 2.0)
    assert tol.allows("'1.0'", f"'{1.0 + MARGIN}'") and not tol.allows("'1.0'", "'one'")


def test_the_tolerances_cover_the_real_machines_on_record():
    """The measurement simulates CPUs; ``observed`` holds builds of real other machines (their
    published site.json). Every measured number such a machine glued lies within the
    tolerance of the measured range, and every exact value it glued is the measured one,
    where its page still computes that value the same way (same key, and the page measured)."""
    off = []
    for label, pages in DATA.get("observed", {}).items():
        for page, glue in pages.items():
            for key, entry in glue.items():
                runs = DATA["pages"].get(page, {})
                if not runs or any(key not in r["glue"] for r in runs.values()):
                    continue
                if key in reader.MEASURED.get(page, ()):
                    continue
                text = spread.glue_text(entry)
                tol = tolerances().get((page, key))
                if tol is None:
                    measured = spread.glue_text(next(iter(runs.values()))["glue"][key])
                    if text != measured:
                        off.append(f"[{label}] {page}: exact {key} {text}, measured {measured}")
                elif tol.kind == "number":
                    low, high = spread.measured_range(page, key)
                    value = parse_number(text)
                    if value is None or not low <= value <= high:
                        off.append(
                            f"[{label}] {page}: {key} {text} outside [{low:.6g}, {high:.6g}]"
                        )
    assert not off, "\n".join(off)
