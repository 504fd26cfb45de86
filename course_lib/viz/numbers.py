"""What a chapter computes from its own numbers for the prose: computations a reader's
notebook keeps (the ``glue`` calls that hand their results to the page are plumbing, taken out
of it: ``tools/glue_code.py``).

``shown_difference``: the difference of two numbers as the prose shows them, so a sentence
adds up. ``measured_spread``: what another machine would compute: the values a page glued under
each simulated CPU and seed of ``course_lib/results/isa_spread.json``
(``benchmarks/isa_spread.py``), so a chapter can show the spread of a training run's numbers
rather than one draw. ``listing``: names in a sentence ("a, b and c"), for lists a run
computes.
"""

from __future__ import annotations

from typing import Any

__all__ = ["shown_difference", "measured_spread", "listing"]


def shown_difference(a: float, b: float, decimals: int) -> str:
    """``a - b`` as a reader computes it from the two numbers the prose shows with ``decimals``
    decimals: 74.53 and 73.24, shown as "74.5" and "73.2", are "1.3" apart (not the 1.29
    that would print as "1.3" here, or as "1.2" from 74.46 and 73.24). Glue a difference
    beside the numbers it compares with this, so the sentence adds up."""
    if decimals < 0:
        raise ValueError(f"shown_difference: decimals={decimals}; give 0 or more.")
    shown = float(f"{a:.{decimals}f}") - float(f"{b:.{decimals}f}")
    return f"{round(shown, decimals) + 0.0:.{decimals}f}"  # + 0.0: no "-0.0"


def listing(items: list[str], last: str = "and") -> str:
    """Names as a sentence lists them: "a", "a and b", "a, b and c" (``last``: the word before
    the last name); "" for none. For lists a run computes, whose length the prose cannot know."""
    items = [str(i) for i in items]
    if len(items) <= 1:
        return "".join(items)
    return f"{', '.join(items[:-1])} {last} {items[-1]}"


def measured_spread(page: str, *keys: str) -> list[dict[str, Any]]:
    """What ``page`` (``"book/14_translation"``) glued as ``keys`` under each simulated CPU and
    seed of the measurement ``course_lib/results/isa_spread.json``: one dict per run, with
    ``run`` (its name), ``cpu`` (the instruction set torch used: "AVX512", "AVX2",
    "DEFAULT"), ``seed_offset`` (0: the page's own seeds) and each key's value as glued (a
    string or a number)."""
    import ast
    import json
    from importlib.resources import files

    data = json.loads(files("course_lib").joinpath("results", "isa_spread.json").read_text())
    if page not in data["pages"]:
        raise ValueError(
            f"measured_spread: {page!r} was not measured; pages: {', '.join(data['pages'])}"
            " (python benchmarks/isa_spread.py --pages PAGE measures one)"
        )
    rows = []
    for name, run in data["pages"][page].items():
        missing = [k for k in keys if k not in run["glue"]]
        if missing:
            raise ValueError(
                f"measured_spread: {page} run {name} glued no {missing}; measure the page again"
                " (python benchmarks/isa_spread.py --pages PAGE)"
            )
        row = {
            "run": name,
            "cpu": run["capability"],
            "seed_offset": data["runs"][name]["seed_offset"],
        }
        for k in keys:
            row[k] = ast.literal_eval(run["glue"][k]["text/plain"])
        rows.append(row)
    return rows
