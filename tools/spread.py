"""Which glued values a training run measures, and by how much two machines may differ.

A build glues two kinds of value into the prose:

- **exact**: counts, data splits, closed forms, float64 results, benchmark files read back,
  anything a page computes without training in float32. Every machine computes the same
  text; tests compare it exactly.
- **measured**: what a float32 training run (or sampling from a trained model) measures.
  PyTorch's CPU kernels take a different path per instruction set, so the last bit of a float
  differs between CPUs and training amplifies it. ``benchmarks/isa_spread.py`` runs every
  page of its ``PAGES`` under simulated CPUs (ATen's AVX-512, AVX2 and scalar kernels, oneDNN
  limited to AVX2) and other seeds, and writes every glued value of every run to
  ``course_lib/results/isa_spread.json``. A value whose text differs between the simulated
  CPUs is measured (one that differs only between seeds, such as an untrained model's loss,
  is the same on every CPU: exact):

  - a **number** may differ from another machine's by ``MARGIN`` times the range it spanned
    over all the runs, seeds included (its tolerance, :func:`tolerances`);
  - a **phrase** (which variant won, which kind of error is commonest, "none" or "2 of 40")
    may read differently: the chapter computes it from its own numbers, and
    ``tools/claims.py`` checks that every such sentence agrees with the numbers beside it.

Timings (``tools.reader.MEASURED``) depend on the machine's load, not its instruction set:
any value is accepted.

``notebooks/site.json`` holds the published numbers (one build's); a test compares a build
with it through :func:`glue_differences`, so the suite passes on any machine whose numbers
lie within the measured spread, and fails on an exact value that changed or a measured one
that moved further than any simulated CPU did.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from course_lib.grading.sandbox import CPU_PATH_VARIABLES

from . import ROOT

__all__ = [
    "CPUS",
    "SPREAD_FILE",
    "MARGIN",
    "Tolerance",
    "load_spread",
    "tolerances",
    "measured_pages",
    "cpu_pages",
    "measured_range",
    "cpu_environment",
    "CPU_VARIABLES",
    "parse_number",
    "glue_text",
    "glue_differences",
    "tolerance_table",
    "NOT_YET_MEASURED",
    "MEASURED",
]

SPREAD_FILE = "course_lib/results/isa_spread.json"
# Glued timings, measured on the machine that builds the site (they follow its load): the site
# shows its own build's value, notebooks/site.json the published build's, and no test compares
# them. What a training run measures (its numbers differ by CPU) is judged by tools/spread.py.
MEASURED: dict[str, tuple[str, ...]] = {
    "book/11_encoders": ("mlm_seconds", "vit_s"),
    "book/14_translation": ("train_s",),
    "book/15_speedrun": ("live_ratio",),
}
# Glued names that chapters gained after the last measurement of their page (none: Chapters 12,
# 13, 14 and 15 were measured again on 2026-11-28, after their last new glued names). Until
# `python benchmarks/isa_spread.py --pages PAGE` measures them they are compared EXACTLY (the
# strict default: a machine that computes another value fails test_site_data_...), and most
# are read from committed results files, so they are the same everywhere. tests/tools/test_spread.py
# fails on a name listed here that the measurement has (a stale row) or the page no longer glues.
NOT_YET_MEASURED: dict[str, tuple[str, ...]] = {}
# The CPUs this machine can simulate: the environment that makes PyTorch take each one's path
# (read when torch loads, so set before a process imports it).
CPUS: dict[str, dict[str, str]] = {
    "native": {},  # this machine's own (torch.backends.cpu.get_cpu_capability())
    "avx2": {"ATEN_CPU_CAPABILITY": "avx2"},  # ATen's AVX2 kernels
    "avx2+onednn": {"ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2"},  # a laptop
    "no-vector": {"ATEN_CPU_CAPABILITY": "default"},  # ATen's scalar kernels
}
# what a simulated CPU's environment must not inherit (it would change the path it names): the
# variables that choose the CPU path, whose one home is the grader's sandbox (it passes them in)
CPU_VARIABLES = CPU_PATH_VARIABLES


def cpu_environment(cpu: str, base: dict[str, str]) -> dict[str, str]:
    """``base`` (an environment) with ``cpu``'s variables, and no other CPU variable."""
    if cpu not in CPUS:
        raise ValueError(f"unknown CPU {cpu!r}; simulated CPUs: {', '.join(CPUS)}")
    env = {k: v for k, v in base.items() if k not in CPU_VARIABLES}
    env.update(CPUS[cpu])
    return env


# A measured number may move MARGIN times the range it spanned over the simulated CPUs and
# seeds. The runs are few (six), and a sample of six spans about 2.5 standard deviations of
# the population; two machines differ by about 1.4 of them, so three ranges are about five
# standard deviations of that difference.
MARGIN = 3.0


@dataclass(frozen=True)
class Tolerance:
    """What may differ in one glued value between two machines' builds.

    ``kind``: "number" (within ``tolerance`` of the published value), "phrase" (any text:
    the sentence around it is checked by tools/claims.py) or "timing" (any value: it follows
    the machine's load, ``tools.reader.MEASURED``). ``values``: the texts the runs
    glued, by run name; ``low``/``high``: the numbers' extremes (numbers only)."""

    page: str
    key: str
    kind: str
    values: dict[str, str]
    low: float | None = None
    high: float | None = None

    @property
    def tolerance(self) -> float | None:
        if self.kind != "number":
            return None
        return MARGIN * (self.high - self.low)

    def allows(self, published: str, built: str) -> bool:
        if self.kind != "number":
            return True
        a, b = parse_number(published), parse_number(built)
        return a is not None and b is not None and abs(a - b) <= self.tolerance * (1 + 1e-9)

    def describe(self) -> str:
        if self.kind == "timing":
            return "timing (any value)"
        if self.kind == "phrase":
            return f"phrase ({len(set(self.values.values()))} readings over the runs)"
        return (
            f"± {_fmt(self.tolerance)} ({MARGIN:g} × range {_fmt(self.low)} to {_fmt(self.high)})"
        )


def _fmt(x: float) -> str:
    return f"{x:.6g}"


@lru_cache(maxsize=4)
def _load(path: str) -> dict:
    return json.loads(Path(path).read_text(encoding="utf-8"))


def load_spread(root: Path = ROOT) -> dict:
    """The measurement (``course_lib/results/isa_spread.json``)."""
    path = Path(root) / SPREAD_FILE
    if not path.is_file():
        raise FileNotFoundError(f"{SPREAD_FILE} is missing: run python benchmarks/isa_spread.py")
    return _load(str(path))


def glue_text(entry: dict) -> str:
    """What a glued value shows: its Markdown or LaTeX where it has one, else its plain text."""
    for mime in ("text/markdown", "text/latex", "text/plain"):
        if mime in entry:
            return entry[mime]
    return ""


_SUPERSCRIPT = str.maketrans("⁰¹²³⁴⁵⁶⁷⁸⁹⁻", "0123456789-")
_NUMBER = re.compile(r"[-+]?\d[\d,]*(?:\.\d+)?(?:\s*×\s*10[⁻⁰¹²³⁴⁵⁶⁷⁸⁹]+)?")


def parse_number(text: str) -> float | None:
    """The number a glued text shows (``'1,234'``, ``'−0.5'``, ``'3.2 × 10⁻⁵'``, ``12``), or
    None if the text is not one number."""
    t = text.strip()
    if len(t) >= 2 and t[0] == t[-1] and t[0] in "'\"":
        t = t[1:-1].strip()
    t = t.replace("−", "-").replace("\u2009", "").replace("\xa0", "")
    if not _NUMBER.fullmatch(t):
        return None
    mantissa, _, power = t.partition("×")
    value = float(mantissa.replace(",", "").strip())
    if power:
        value *= 10.0 ** int(power.strip()[2:].translate(_SUPERSCRIPT))
    return value if math.isfinite(value) else None


def tolerances(root: Path = ROOT) -> dict[tuple[str, str], Tolerance]:
    """Every measured value of the measurement: (page, key) -> its Tolerance.

    Measured means the CPU changes it: its text differs between the runs on the page's own
    seeds (the simulated instruction sets). Its tolerance spans every run, the other seeds'
    too: a seed moves a run further than an instruction set does, and stands for the CPUs this
    machine cannot simulate. A value that differs only between seeds (an untrained model's
    loss, a random draw) is the same on every CPU, so exact, and not listed."""
    timings = MEASURED
    data = load_spread(root)
    cpu_runs = {name for name, run in data["runs"].items() if run["seed_offset"] == 0}
    out: dict[tuple[str, str], Tolerance] = {}
    for page, runs in data["pages"].items():
        keys = sorted({k for run in runs.values() for k in run["glue"]})
        for key in keys:
            values = {
                name: glue_text(run["glue"][key])
                for name, run in runs.items()
                if key in run["glue"]
            }
            on_cpus = {v for name, v in values.items() if name in cpu_runs}
            if len(on_cpus) == 1 and len(values) == len(runs):
                continue
            numbers = [parse_number(v) for v in values.values()]
            if key in timings.get(page, ()):
                out[page, key] = Tolerance(page, key, "timing", values)
            elif all(n is not None for n in numbers):
                out[page, key] = Tolerance(page, key, "number", values, min(numbers), max(numbers))
            else:
                out[page, key] = Tolerance(page, key, "phrase", values)
    return out


def glue_differences(
    published: dict[str, dict],
    built: dict[str, dict],
    timings: dict[str, tuple[str, ...]] | None = None,
    root: Path = ROOT,
) -> tuple[list[str], list[str]]:
    """Compare two builds' glue (page -> {key: {mime: text}}, as in ``site.json["pages"]``):
    ``(problems, within)``. ``problems``: exact values that differ, measured numbers further
    apart than their tolerance, keys one side lacks. ``within``: measured values that differ
    within their tolerance (a phrase, a number within the spread). ``timings``: page -> keys
    accepted whatever they say (``tools.reader.MEASURED``)."""
    table = tolerances(root)
    timings = timings or {}
    problems, within = [], []
    for page in sorted(set(published) | set(built)):
        ga, gb = published.get(page, {}), built.get(page, {})
        for key in sorted(set(ga) | set(gb)):
            if key in timings.get(page, ()):
                continue
            if key not in ga or key not in gb:
                side = "the build" if key not in gb else "the published data"
                problems.append(f"{page}: glued {key} is missing from {side}")
                continue
            a, b = glue_text(ga[key]), glue_text(gb[key])
            if a == b:
                continue
            tol = table.get((page, key))
            if tol is None:
                problems.append(
                    f"{page}: glued {key} is {a} published, {b} in the build; it was the same "
                    f"under every simulated CPU and seed ({SPREAD_FILE}): an exact value changed"
                    if page in load_spread(root)["pages"]
                    else f"{page}: glued {key} is {a} published, {b} in the build (an exact "
                    "value: the page is not measured by benchmarks/isa_spread.py)"
                )
            elif tol.allows(a, b):
                within.append(f"{page}: {key} {a} → {b} ({tol.describe()})")
            else:
                problems.append(
                    f"{page}: glued {key} is {a} published, {b} in the build: further apart "
                    f"than its tolerance {tol.describe()}"
                )
    return problems, within


def measured_range(page: str, key: str, root: Path = ROOT) -> tuple[float, float]:
    """The interval a machine's value of a measured number may fall in: the measured range
    widened by its tolerance on both sides; an exact number's interval is the number itself.
    For tests that recompute a page's value outside the page."""
    runs = load_spread(root)["pages"][page]
    texts = [glue_text(run["glue"][key]) for run in runs.values()]
    numbers = [parse_number(t) for t in texts]
    if any(n is None for n in numbers):
        raise ValueError(f"{page}: glued {key} is not a number in every run: {texts}")
    tol = tolerances(root).get((page, key))
    slack = tol.tolerance if tol is not None and tol.tolerance is not None else 0.0
    return min(numbers) - slack, max(numbers) + slack


def measured_pages(root: Path = ROOT) -> list[str]:
    """The pages the measurement ran (they train, or sample from a trained model): the pages
    a build on another CPU executes again (tests/conftest.py's AVX2 build)."""
    return sorted(load_spread(root)["pages"])


def cpu_pages(root: Path = ROOT) -> list[str]:
    """The pages with at least one value the CPU changes (a measured value)."""
    return sorted({page for (page, _), t in tolerances(root).items() if t.kind != "timing"})


def tolerance_table(root: Path = ROOT) -> str:
    """The tolerances as a Markdown table: each measured value, the texts or the range its
    runs glued (which run gave each extreme), what another machine's build may differ by, and
    the measurement it comes from (``python -m tools.spread`` prints it, for the notes)."""
    data = load_spread(root)
    source = f"{SPREAD_FILE} ({data['date']}, {data['cpu']}, torch {data['torch']})"
    rows = [
        f"Source: {source}; runs: {', '.join(data['runs'])}; tolerance = {MARGIN:g} × range.",
        "",
        "| page | value | kind | measured | tolerance |",
        "|---|---|---|---|---|",
    ]
    for (page, key), tol in sorted(tolerances(root).items()):
        if tol.kind == "number":
            by = {name: parse_number(text) for name, text in tol.values.items()}
            lo = ", ".join(n for n, v in by.items() if v == tol.low)
            hi = ", ".join(n for n, v in by.items() if v == tol.high)
            measured = f"{_fmt(tol.low)} ({lo}) to {_fmt(tol.high)} ({hi})"
            allowed = f"± {_fmt(tol.tolerance)}"
        else:
            texts = sorted(set(tol.values.values()))
            measured = f"{len(texts)} readings: " + " / ".join(t.strip("'\"")[:40] for t in texts)
            allowed = "any (load)" if tol.kind == "timing" else "any (claims checked)"
        name = page.removeprefix("book/")
        rows.append(f"| {name} | `{key}` | {tol.kind} | {measured} | {allowed} |")
    return "\n".join(rows)


if __name__ == "__main__":
    print(tolerance_table())
