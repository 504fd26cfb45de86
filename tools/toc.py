"""The book's table of contents (``_toc.yml``), read in one place.

Everything that needs "every page of the book" (the Colab generator, the chapter benchmark,
the build and browser tests) asks here, so they can never disagree about which pages exist.
"""

from __future__ import annotations

import re
from pathlib import Path

__all__ = ["ROOT", "toc_files", "toc_parts", "page_path"]

from . import ROOT


def _walk(node) -> list[str]:
    found: list[str] = []
    if isinstance(node, dict):
        for key in ("root", "file"):
            if isinstance(node.get(key), str):
                found.append(node[key])
        for value in node.values():
            if isinstance(value, (list, dict)):
                found += _walk(value)
    elif isinstance(node, list):
        for item in node:
            found += _walk(item)
    return found


def toc_files(root: Path = ROOT) -> list[str]:
    """Every file named in ``_toc.yml``, in reading order, without suffix (e.g. ``book/intro``)."""
    import yaml

    toc_path = Path(root) / "_toc.yml"
    if not toc_path.is_file():
        raise FileNotFoundError(f"no _toc.yml in {root}: run this from the course repository.")
    toc = yaml.safe_load(toc_path.read_text(encoding="utf-8"))
    return [re.sub(r"\.(md|ipynb|rst)$", "", f) for f in dict.fromkeys(_walk(toc))]


def toc_parts(root: Path = ROOT) -> list[tuple[str, list[str]]]:
    """Each part of ``_toc.yml`` as (caption, its chapters' files without suffix), in reading
    order; a chapter's sections are not listed (they are reached from their chapter)."""
    import yaml

    toc = yaml.safe_load((Path(root) / "_toc.yml").read_text(encoding="utf-8"))
    return [
        (
            str(part.get("caption", "")),
            [re.sub(r"\.(md|ipynb|rst)$", "", c["file"]) for c in part.get("chapters", [])],
        )
        for part in toc.get("parts", [])
    ]


def page_path(name: str, root: Path = ROOT) -> Path:
    """The source ``.md`` of a table-of-contents entry."""
    return Path(root) / f"{name}.md"
