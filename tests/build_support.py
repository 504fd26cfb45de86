"""The builds the tests of computed values read (``tests/conftest.py`` makes them).

"native": the clean build of the whole site on the test process's CPU path; "avx2": the pages
that train or sample in float32 and glue what the CPU changes (``tools.spread.cpu_pages``)
built again as an AVX2 laptop would. A test of computed values is parametrized over
``BUILD_NAMES`` (or over ``page_builds(pages)``, its pages paired with each build that executed
them) and gets its build from ``get_build(request, name)``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

# The second build: an AVX2 laptop by default. COURSE_SIMULATED_CPU names another of
# tools.spread.CPUS (e.g. "no-vector": ATen's scalar kernels) and COURSE_SIMULATED_PAGES
# (docnames, comma-separated) a subset of its pages, to simulate another machine cheaply.
SIMULATED_CPU = os.environ.get("COURSE_SIMULATED_CPU", "").strip() or "avx2+onednn"
SIMULATED_BUILD = "avx2" if SIMULATED_CPU == "avx2+onednn" else SIMULATED_CPU
BUILD_NAMES = ("native", SIMULATED_BUILD)


@dataclass(frozen=True)
class Build:
    """``name`` ("native", "avx2"), ``path`` (its ``_build`` folder), ``pages`` (the pages it
    executed; None: every page)."""

    name: str
    path: Path
    pages: tuple[str, ...] | None = None

    def executed(self, page: str) -> bool:
        return self.pages is None or page in self.pages


def get_build(request, name: str) -> Build:
    """The build named ``name``, made once per session by its fixture."""
    if name == "native":
        return Build("native", request.getfixturevalue("built_book"))
    if name == SIMULATED_BUILD:
        return request.getfixturevalue("built_book_avx2")
    raise ValueError(f"unknown build {name!r}; builds: {', '.join(BUILD_NAMES)}")


def page_builds(pages) -> list[tuple[str, str]]:
    """``(page, build name)`` for every page and each build that executes it: every page in
    the native build, the CPU-dependent ones in the AVX2 build too. ``pages``: docnames
    (``book/14_translation``) or paths of their sources."""
    from tools import ROOT

    def name(p) -> str:
        p = Path(p)
        return (
            p.resolve().relative_to(ROOT).with_suffix("").as_posix() if p.is_absolute() else str(p)
        )

    again = set(simulated_pages())
    return [(p, "native") for p in pages] + [
        (p, SIMULATED_BUILD) for p in pages if name(p) in again
    ]


def simulated_pages() -> list[str]:
    """The pages the second build executes: ``tools.spread.cpu_pages()`` (those with a glued
    value the simulated CPUs changed), or the subset ``COURSE_SIMULATED_PAGES`` names."""
    from tools.spread import CPUS, cpu_pages

    if SIMULATED_CPU not in CPUS:
        raise ValueError(
            f"COURSE_SIMULATED_CPU={SIMULATED_CPU!r} is not a simulated CPU: {', '.join(CPUS)}"
        )
    pages = cpu_pages()
    only = [p.strip() for p in os.environ.get("COURSE_SIMULATED_PAGES", "").split(",") if p.strip()]
    unknown = sorted(set(only) - set(pages))
    if unknown:
        raise ValueError(
            f"COURSE_SIMULATED_PAGES names {', '.join(unknown)}, not among the pages whose "
            f"values the CPU changes: {', '.join(pages)}"
        )
    return [p for p in pages if p in only] if only else pages
