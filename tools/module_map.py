"""CONTRIBUTING.md's module map, checked (``./course check``, kind ``module-map``): the table
under "Rooms" is the one map of the code, so every module and folder of the code's rooms is
named in it and everything it names exists.

- Each row's first cell names paths: ``course_lib/attention.py``, then bare names in the same
  folder (``loss.py``), or folders (``course_lib/labs/``, ``results/``);
- the core (the modules directly in ``course_lib/``) and its folders are named in first cells;
- a room's row (``course_lib/labs/``, ``tools/``, ``book/_ext/`` ... : ``ROOMS``) names each of
  its modules (``rnn``) and folders (``pdf_static/``) in backticks in its second cell; the row of
  ``tests/`` names its room folders (``core/``) and its support modules (``conftest``).

A stale map cannot be regenerated (its prose is written by hand): ``./course check`` and
``./course sync`` name what is missing or gone, and the fix is an edit of the table.
"""

from __future__ import annotations

import re
from pathlib import Path

from . import ROOT

__all__ = ["MAP_FILE", "ROOMS", "map_rows", "problems"]

MAP_FILE = "CONTRIBUTING.md"
HEADER = "| where | what it holds |"
CORE = "course_lib"
# the folders whose every module and sub-folder the row for them names
ROOMS = (
    "course_lib/labs",
    "course_lib/handcalc",
    "course_lib/viz",
    "course_lib/grading",
    "tools",
    "benchmarks",
    "book/_ext",
    "tests",  # one folder per room, and the support modules they share
)
_TICKED = re.compile(r"`([^`]+)`")


def map_rows(text: str) -> list[tuple[list[str], str]]:
    """The table's rows as (paths of the first cell, resolved against the cell's first folder;
    the second cell's text)."""
    lines = text.splitlines()
    try:
        start = lines.index(HEADER) + 2  # past the header and its |---| line
    except ValueError:
        raise ValueError(f"{MAP_FILE} has no module map (a table headed {HEADER!r})") from None
    rows = []
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in line.strip().strip("|").split("|", 1)]
        paths, base = [], ""
        for name in _TICKED.findall(cells[0]):
            if "/" in name.rstrip("/"):
                base = name.rstrip("/").rpartition("/")[0]
                paths.append(name)
            else:
                paths.append(f"{base}/{name}" if base else name)
        rows.append((paths, cells[1] if len(cells) > 1 else ""))
    return rows


def _entries(folder: Path) -> list[str]:
    """A folder's modules (stems) and sub-folders ("name/"), caches and dot-files left out."""
    out = []
    for p in sorted(folder.iterdir()):
        if p.name.startswith((".", "__")) or p.name == "__pycache__":
            continue
        if p.is_dir():
            out.append(p.name + "/")
        elif p.suffix == ".py":
            out.append(p.stem)
    return out


def problems(root: Path = ROOT) -> list[str]:
    """What the map misses or names in vain, one sentence each; [] when it is current."""
    root = Path(root)
    rows = map_rows((root / MAP_FILE).read_text(encoding="utf-8"))
    named = {p.rstrip("/") for paths, _ in rows for p in paths}
    found = [f"names {p}, which does not exist" for p in sorted(named) if not (root / p).exists()]
    for entry in _entries(root / CORE):
        path = f"{CORE}/{entry.rstrip('/')}" + ("" if entry.endswith("/") else ".py")
        if path not in named:
            found.append(f"does not name {path} (a row's first cell)")
    for room in ROOMS:
        row = next((what for paths, what in rows if f"{room}/" in paths), None)
        if row is None:
            found.append(f"has no row for {room}/")
            continue
        ticked = set(_TICKED.findall(row))
        for entry in _entries(root / room):
            folder_named = entry.endswith("/") and any(t.startswith(entry) for t in ticked)
            if entry not in ticked and not folder_named:
                found.append(f"does not name {room}/{entry} (in backticks, in its row)")
    return found
