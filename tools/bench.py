"""Time the execution of every chapter: ``./course bench`` (or ``python -m tools.bench``).

Each chapter in ``_toc.yml`` is converted with jupytext and run top to bottom in a fresh
kernel (nbclient), as the book build does. The budget is 120 s per chapter on the course's
reference machine (2 CPU cores). This is a measurement, not a test: shared machines are
noisy, so run it when the machine is quiet and read the numbers, not a verdict.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from . import ROOT
from .toc import page_path, toc_files

BUDGET_S = 120.0


def toc_pages(root: Path = ROOT) -> list[Path]:
    """The .md files listed in _toc.yml, in reading order."""
    return [p for p in map(page_path, toc_files(root)) if p.exists()]


def time_page(md: Path, timeout: int = 600) -> float:
    """Seconds to execute one MyST notebook in a fresh kernel, in its own folder."""
    import jupytext
    from nbclient import NotebookClient

    nb = jupytext.read(md)
    client = NotebookClient(
        nb, timeout=timeout, kernel_name="python3", resources={"metadata": {"path": str(md.parent)}}
    )
    start = time.perf_counter()
    client.execute()
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "pages", nargs="*", help="chapter .md files (default: every page in _toc.yml with code)"
    )
    parser.add_argument(
        "--json",
        type=Path,
        default=ROOT / "test-output" / "bench.json",
        help="where to write the results (default: %(default)s)",
    )
    args = parser.parse_args(argv)
    pages = [Path(p).resolve() for p in args.pages] or [
        p for p in toc_pages() if "```{code-cell}" in p.read_text()
    ]
    results = {}
    print(f"{'chapter':<32} {'seconds':>8}  budget {BUDGET_S:.0f} s", flush=True)
    for md in pages:
        seconds = time_page(md)
        results[md.stem] = round(seconds, 1)
        flag = "" if seconds <= BUDGET_S else "  OVER BUDGET"
        print(f"{md.stem:<32} {seconds:>8.1f}{flag}", flush=True)
    print(f"{'total':<32} {sum(results.values()):>8.1f}")
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(results, indent=2) + "\n")
    print(f"written to {args.json}")
    return 0 if all(s <= BUDGET_S for s in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
