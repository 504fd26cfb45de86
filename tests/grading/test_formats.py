"""Nothing lost for an honest student (issue 34, item 7): a correct notebook grades full marks
whatever format saved it and however many outputs it carries.

- nbformat 4.5 (cell ids), 4.4 (no ids: Jupyter before 2021, VS Code, ...) and 4.0 as Colab
  saves it (its own random ids in the cell metadata, Colab's metadata, and here even without
  the course's cell metadata). What the grader grades is a function of the bytes it reads
  through ``parse_notebook``: the solution it finds (``find_solution``) and the notebook it
  hands the sandbox (``nbformat.writes`` of the parsed notebook), from which the sandbox reads
  the answers, the notes and the predict-then-run facts. For every solution, that reading is
  the same in every format (``test_every_solution_reads_the_same_in_every_format``), so every
  format grades as 4.5 does, and the solution variant of ``tests/grading/test_exercises.py``
  grades every 4.5 solution full marks. Graded for real in 4.4 and Colab's 4.0 as well: the
  notebooks with two predictions each (``GRADED``), end to end through the sandbox;
- 45 MB of plot outputs: read as its sources (the outputs are dropped at once; only the verdict
  lines of code cells are kept), and graded full marks; the caps stay on what is read.
"""

from __future__ import annotations

import base64
import copy
import json
import random
from pathlib import Path

import nbformat
import pytest

from course_lib.grading import notebooks
from course_lib.grading.grade import grade_batch
from course_lib.grading.notebooks import (
    Unreadable,
    extract_answers,
    find_solution,
    parse_notebook,
    prediction_facts,
)
from course_lib.grading.sandbox import probe
from course_lib.grading.spec import load_spec, role
from tools.exercises import SOLUTIONS, make_submission

STEMS = sorted(p.stem for p in SOLUTIONS.glob("*.ipynb"))
FORMATS = ("4.5", "4.4", "colab", "colab-bare")
#: graded for real in the formats without cell ids: the notebooks with two predictions each
#: (the facts are what ids would otherwise match); the others are covered by their reading
GRADED = ("03_embeddings", "13_assistant")


def _sol(stem):
    return nbformat.read(SOLUTIONS / f"{stem}.ipynb", as_version=4)


def _submission(stem) -> dict:
    """Every solution answer, run top to bottom (execution counts 1, 2, ...), the check cells
    with the verdicts they printed (the solution's stored outputs), as JSON."""
    sol = _sol(stem)
    names = [ex.name for ex in load_spec(sol, stem).exercises]
    nb = make_submission(sol, {n: "solution" for n in names})
    outputs = {c.id: c.outputs for c in sol.cells if c.cell_type == "code" and role(c) == "check"}
    for c in nb.cells:
        if c.get("id") in outputs:
            c.outputs = copy.deepcopy(outputs[c.id])
    return json.loads(nbformat.writes(nb))


def _saved_as(data: dict, fmt: str, seed: int = 0) -> bytes:
    """The notebook as one tool or another saves it."""
    data = copy.deepcopy(data)
    rng = random.Random(seed)
    if fmt != "4.5":
        for c in data["cells"]:
            c.pop("id", None)
        data["nbformat_minor"] = 4
    if fmt.startswith("colab"):
        data["nbformat_minor"] = 0
        data["metadata"] = {
            "colab": {"provenance": [], "toc_visible": True},
            "kernelspec": {"display_name": "Python 3", "name": "python3"},
            "language_info": {"name": "python"},
            **({} if fmt == "colab-bare" else {"course": data["metadata"].get("course", {})}),
        }
        for c in data["cells"]:
            meta = {} if fmt == "colab-bare" else dict(c["metadata"])
            meta.pop("course", None) if fmt == "colab-bare" else None
            meta["id"] = "".join(
                rng.choice("abcdefghijklmnopqrstuvwxyzABCDEFGH0123456789-_") for _ in range(12)
            )
            if c["cell_type"] == "code":
                meta["colab"] = {"base_uri": "https://localhost:8080/"}
                meta["outputId"] = "%08x-%04x" % (rng.getrandbits(32), rng.getrandbits(16))
            c["metadata"] = meta
    return json.dumps(data, indent=1).encode()


@pytest.mark.parametrize("stem", STEMS)
def test_every_solution_reads_the_same_in_every_format(stem):
    """What the grader takes from the file, the way ``grade_batch`` takes it: the solution it
    grades against, and the answers, notes and facts of the notebook the sandbox receives."""
    sol = _sol(stem)
    spec = load_spec(sol, stem)
    data = _submission(stem)
    read = {}
    for fmt in FORMATS:
        name = f"{fmt}__{stem}.ipynb"
        parsed = parse_notebook(_saved_as(data, fmt), name)
        found = find_solution(parsed, name, SOLUTIONS).stem
        nb = parse_notebook(nbformat.writes(parsed).encode(), name)  # what the sandbox reads
        answers, notes = extract_answers(nb, spec, sol)
        read[fmt] = (found, answers, notes, prediction_facts(nb, spec, sol))
    assert all(read[f] == read["4.5"] for f in FORMATS), stem
    assert read["4.5"][0] == stem
    facts = read["4.5"][3]
    assert set(facts) == {ex.name for ex in spec.exercises if ex.predict}
    for ex, by_cell in facts.items():
        assert set(by_cell) == set(spec.exercise(ex).check_ids), ex
        for cid, f in by_cell.items():
            assert type(f["answer"]) is int and type(f["measure"]) is int, (ex, cid, f)
            assert f["answer"] < f["measure"] and f["changed"] is False, (ex, cid, f)


def test_the_notebooks_graded_for_real_have_the_most_predictions():
    counts = {
        stem: sum(bool(ex.predict) for ex in load_spec(_sol(stem), stem).exercises)
        for stem in STEMS
    }
    assert {counts[s] for s in GRADED} == {max(counts.values())}, counts


def test_a_prediction_made_after_its_measurement_still_fails_without_ids():
    """Matching by source and order is no loophole: a prediction cell run after its measuring
    cell, or a measuring cell copied and re-run after it, is still seen (the earliest
    measurement counts, the latest prediction)."""
    stem = "04_attention"
    sol, spec = _sol(stem), load_spec(_sol(stem), stem)
    ex = next(e for e in spec.exercises if e.predict)
    data = json.loads(_saved_as(_submission(stem), "colab-bare"))
    marker = f"# EXERCISE {ex.name}:"
    answer = next(c for c in data["cells"] if "".join(c["source"]).startswith(marker))
    measure_src = next(c.source for c in sol.cells if c.get("id") == ex.check_ids[0])
    i, measure = next(
        (i, c) for i, c in enumerate(data["cells"]) if "".join(c["source"]) == measure_src
    )
    answer["execution_count"] = measure["execution_count"] + 1
    nb = parse_notebook(json.dumps(data).encode())
    assert (
        prediction_facts(nb, spec, sol)[ex.name][ex.check_ids[0]]["answer"]
        > measure["execution_count"]
    )
    copied = copy.deepcopy(measure)
    copied["execution_count"] = answer["execution_count"] + 1
    data["cells"].insert(i + 1, copied)
    f = prediction_facts(parse_notebook(json.dumps(data).encode()), spec, sol)[ex.name]
    assert (
        f[ex.check_ids[0]]["measure"] == measure["execution_count"] < f[ex.check_ids[0]]["answer"]
    )


def _with_plots(data: dict, megabytes: int) -> dict:
    """The notebook with ``megabytes`` MB of PNG display outputs spread over its code cells."""
    data = copy.deepcopy(data)
    code = [c for c in data["cells"] if c["cell_type"] == "code"]
    per = megabytes * 2**20 // len(code)
    blob = base64.b64encode(random.Random(1).randbytes(per * 3 // 4)).decode()
    for c in code:
        c.setdefault("outputs", []).append(
            {
                "output_type": "display_data",
                "data": {"image/png": blob, "text/plain": ["<Figure size 640x480 with 1 Axes>"]},
                "metadata": {"needs_background": "light"},
            }
        )
    return data


def test_outputs_are_dropped_not_capped():
    """45 MB of plots: read as the sources and the verdict lines alone; what grading sends on is
    small. The caps hold on what is read: 2 MB of code is still refused."""
    data = _with_plots(_submission("01_why_transformers"), 45)
    raw = json.dumps(data).encode()
    assert len(raw) > 45 * 2**20
    nb = parse_notebook(raw, "plots.ipynb")
    kept = nbformat.writes(nb).encode()
    assert len(kept) < 200_000, len(kept)
    outs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    assert outs and all(
        o.output_type == "stream"
        and all(ln.startswith(("[PASS]", "[FAIL]")) for ln in o.text.splitlines())
        for o in outs
    )
    data["cells"].append(nbformat.v4.new_code_cell("# " + "x" * 2 * notebooks.MAX_SOURCE_BYTES))
    with pytest.raises(Unreadable, match="MB of code"):
        parse_notebook(json.dumps(data).encode(), "plots.ipynb")


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    if probe()[0] is None:
        pytest.skip("no bubblewrap sandbox here")
    folder = tmp_path_factory.mktemp("formats")
    for stem in GRADED:
        data = _submission(stem)
        for fmt in ("4.4", "colab-bare"):
            (folder / f"{fmt}__{stem}.ipynb").write_bytes(_saved_as(data, fmt))
    plots = _with_plots(_submission("01_why_transformers"), 45)
    (folder / "plots__01_why_transformers.ipynb").write_bytes(json.dumps(plots).encode())
    reports = grade_batch(
        folder, folder / "_grades", sandbox=True, solutions_dir=SOLUTIONS, time_limit=60.0
    )
    return {tuple(Path(r["submission"]).stem.split("__")): r for r in reports}


@pytest.mark.slow
@pytest.mark.parametrize("fmt", ("4.4", "colab-bare"))
@pytest.mark.parametrize("stem", GRADED)
def test_solutions_score_full_marks_in_every_format(graded, fmt, stem):
    rep = graded[(fmt, stem)]
    assert rep["status"] == "graded" and rep["score"] == rep["max_score"], [
        (e["name"], e["status"], [c["detail"] for c in e["checks"] if not c["passed"]])
        for e in rep["exercises"]
    ]


@pytest.mark.slow
def test_a_notebook_with_45_mb_of_plots_scores_full_marks(graded):
    rep = graded[("plots", "01_why_transformers")]
    assert rep["status"] == "graded" and rep["score"] == rep["max_score"], rep
