"""The spread of the training chapters' glued values over CPU instruction sets and seeds.

    python benchmarks/isa_spread.py                           # every page of PAGES, every run
    python benchmarks/isa_spread.py --pages book/14_translation --runs avx2,seed+1
    python benchmarks/isa_spread.py --jobs 2                  # two runs at a time
    python benchmarks/isa_spread.py --observed other/notebooks/site.json --label "..."

PyTorch's CPU kernels take a different path per instruction set (ATen's vectorised kernels,
oneDNN's), so float32 arithmetic differs in the last bit from one CPU to the next, and a
training run amplifies that bit: a reader's laptop computes other numbers than the machine
that built the site. This script measures by how much. Each run executes every code cell of
a page in a fresh process, in page order, with ``glue`` recording (myst-nb's text/plain, as
the build stores it), under one simulated CPU (environment variables set before torch loads):

- ``native``: this machine's own path (``torch.backends.cpu.get_cpu_capability()`` says which);
- ``avx2``: ``ATEN_CPU_CAPABILITY=avx2``, ATen's AVX2 kernels;
- ``avx2+onednn``: and ``ONEDNN_MAX_CPU_ISA=AVX2``, oneDNN's too: an AVX2 laptop;
- ``no-vector``: ``ATEN_CPU_CAPABILITY=default``, ATen's scalar kernels;
- ``seed+1``, ``seed+2``: the native path with every ``torch.manual_seed(s)`` made
  ``torch.manual_seed(s + k)``: other initial weights, the same data (the data splits and
  batch samplers own their generators). A seed moves a run further than an instruction set;
  it stands for the CPUs this machine cannot simulate (ARM, other vendors' libraries).

The results go to ``course_lib/results/isa_spread.json`` (a page measured again replaces its
runs; while the runs go on, to ``isa_spread.partial.json``, since the chapters read the results
file): per page and run, the capability torch reported, the seconds, and every glued value.
``tools/spread.py`` derives from it what may differ between two machines' builds and by how
much (the tolerances the tests use); the chapters may quote it. ``--observed`` adds a real
machine's published numbers (a ``site.json`` built elsewhere) under ``observed``: not used for
the tolerances, but checked against them (``tests/tools/test_spread.py``).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import date
from pathlib import Path

from _common import RESULTS, ROOT, write_json  # run from benchmarks/

from tools.spread import CPUS, cpu_environment

OUT = RESULTS / "isa_spread.json"

# The pages whose glued values come from float32 training (or sampling from a trained model).
PAGES = (
    "book/08_training",
    "book/10_generation",
    "book/11_encoders",
    "book/12_finetuning",
    "book/13_assistant",
    "book/14_translation",
    "book/15_speedrun",
)

# name -> (simulated CPU, seed offset)
RUNS: dict[str, tuple[str, int]] = {
    "native": ("native", 0),
    "avx2": ("avx2", 0),
    "avx2+onednn": ("avx2+onednn", 0),
    "no-vector": ("no-vector", 0),
    "seed+1": ("native", 1),
    "seed+2": ("native", 2),
}


# --------------------------------------------------------------------------- one run (worker)
def run_page(page: str, seed_offset: int) -> dict:
    """Execute every code cell of ``book/<page>.md`` in this process, in page order, and
    return ``{"capability", "seconds", "glue": {name: {mime: text}}}``. ``glue`` records what
    myst-nb would store (IPython's text/plain, text/latex, text/markdown of the value)."""
    import jupytext
    import matplotlib

    matplotlib.use("Agg")
    import torch
    from IPython.core.interactiveshell import InteractiveShell

    import course_lib
    import course_lib.viz.glue as glue_module

    formatter = InteractiveShell.instance().display_formatter
    keep = ("text/plain", "text/latex", "text/markdown")
    recorded: dict[str, dict[str, str]] = {}

    def record(name, value, display=False):
        data, _ = formatter.format(value)
        recorded[name] = {m: v for m, v in data.items() if m in keep}

    course_lib.glue = glue_module.glue = record
    if seed_offset:
        original = torch.manual_seed

        def shifted(seed):
            return original(int(seed) + seed_offset)

        torch.manual_seed = shifted
    nb = jupytext.read(ROOT / f"{page}.md")
    ns: dict = {"__name__": "__main__"}
    cwd = os.getcwd()
    os.chdir(ROOT / "book")  # where the build executes a page
    t0 = time.perf_counter()
    try:
        for i, cell in enumerate(c for c in nb.cells if c.cell_type == "code"):
            try:
                exec(compile(cell.source, f"{page}:cell{i}", "exec"), ns)
            except Exception as e:  # name the cell: the traceback's line numbers are its own
                raise RuntimeError(f"{page}, code cell {i} failed: {e!r}") from e
            if "matplotlib.pyplot" in sys.modules:  # a figure per cell, not all at once
                sys.modules["matplotlib.pyplot"].close("all")
    finally:
        os.chdir(cwd)
    return {
        "capability": torch.backends.cpu.get_cpu_capability(),
        "seconds": round(time.perf_counter() - t0, 1),
        "glue": dict(sorted(recorded.items())),
    }


# --------------------------------------------------------------------------- the driver
def run_in_subprocess(page: str, run: str) -> dict:
    """One run of one page in a fresh interpreter with the run's environment."""
    cpu, offset = RUNS[run]
    env = cpu_environment(cpu, dict(os.environ))
    env.update(MPLBACKEND="Agg", PYTHONHASHSEED="0")
    cmd = [sys.executable, __file__, "--worker", page, "--seed-offset", str(offset)]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=ROOT)
    if proc.returncode != 0:
        raise RuntimeError(f"{page} under {run} failed:\n{proc.stderr[-4000:]}")
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    print(f"  {page} {run:12} {out['capability']:8} {out['seconds']:7.1f} s", flush=True)
    return out


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pages", default=",".join(PAGES), help="comma-separated page names")
    ap.add_argument("--runs", default=",".join(RUNS), help="comma-separated run names")
    ap.add_argument("--jobs", type=int, default=1, help="runs at a time")
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument(
        "--observed",
        type=Path,
        metavar="SITE_JSON",
        help="record another real machine's build (its site.json) beside the runs, to check"
        " the tolerances against; nothing is run",
    )
    ap.add_argument("--label", default="", help="what machine --observed's build came from")
    ap.add_argument(
        "--skip",
        default="",
        help="with --observed: glued names the pages have computed differently since that"
        " build (comma-separated), left out of the record",
    )
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--seed-offset", type=int, default=0, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        out = run_page(args.worker, args.seed_offset)
        sys.stdout.flush()
        print(json.dumps(out, ensure_ascii=False))
        return out
    if args.observed:
        data = json.loads(args.out.read_text())
        site = json.loads(args.observed.read_text())
        skip = {k.strip() for k in args.skip.split(",") if k.strip()}
        data.setdefault("observed", {})[args.label or str(args.observed)] = {
            page: {k: v for k, v in site["pages"][page]["glue"].items() if k not in skip}
            for page in data["pages"]
            if page in site["pages"]
        }
        write_json(data, args.out)
        return data
    pages = [p.strip() for p in args.pages.split(",") if p.strip()]
    runs = [r.strip() for r in args.runs.split(",") if r.strip()]
    unknown = [r for r in runs if r not in RUNS] + [
        p for p in pages if not (ROOT / f"{p}.md").is_file()
    ]
    if unknown:
        ap.error(f"unknown run or page {unknown}; runs: {', '.join(RUNS)}")
    data = json.loads(args.out.read_text()) if args.out.is_file() else {"pages": {}}
    import torch

    data.update(
        {
            "date": date.today().isoformat(),
            "cpu": _cpu_name(),
            "torch": torch.__version__,
            "threads": torch.get_num_threads(),
            "runs": {name: {"env": CPUS[cpu], "seed_offset": k} for name, (cpu, k) in RUNS.items()},
            "load_average_before": round(os.getloadavg()[0], 1),
        }
    )
    lock = threading.Lock()
    # Progress goes to a side file: the chapters read args.out (measured_spread), and every run
    # of this measurement must read the same one.
    partial = args.out.with_name(args.out.stem + ".partial.json")

    def one(job):
        out = run_in_subprocess(*job)
        with lock:
            page, run = job
            data["pages"].setdefault(page, {})[run] = out
            data["pages"] = dict(sorted(data["pages"].items()))
            data["load_average_after"] = round(os.getloadavg()[0], 1)
            write_json(data, partial)

    with ThreadPoolExecutor(max(1, args.jobs)) as pool:
        list(pool.map(one, [(p, r) for p in pages for r in runs]))
    partial.replace(args.out)
    print(f"wrote {args.out}")
    return data


def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


if __name__ == "__main__":
    main()
