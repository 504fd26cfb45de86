"""The builds the tests of computed values read (``tests/conftest.py`` makes them).

"native": the clean build of the whole site on the test process's CPU path; "avx2": the pages
that train or sample in float32 and glue what the CPU changes (``tools.spread.cpu_pages``)
built again as an AVX2 laptop would. A test of computed values is parametrized over
``BUILD_NAMES`` (or over ``page_builds(pages)``, its pages paired with each build that executed
them) and gets its build from ``get_build(request, name)``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

BUILD_NAMES = ("native", "avx2")


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
    if name == "avx2":
        return request.getfixturevalue("built_book_avx2")
    raise ValueError(f"unknown build {name!r}; builds: {', '.join(BUILD_NAMES)}")


def page_builds(pages) -> list[tuple[str, str]]:
    """``(page, build name)`` for every page and each build that executes it: every page in
    the native build, the CPU-dependent ones in the AVX2 build too. ``pages``: docnames
    (``book/14_translation``) or paths of their sources."""
    from tools import ROOT
    from tools.spread import cpu_pages

    def name(p) -> str:
        p = Path(p)
        return (
            p.resolve().relative_to(ROOT).with_suffix("").as_posix() if p.is_absolute() else str(p)
        )

    again = set(cpu_pages())
    return [(p, "native") for p in pages] + [(p, "avx2") for p in pages if name(p) in again]
