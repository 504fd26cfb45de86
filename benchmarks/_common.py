"""What the benchmark scripts share: writing their results file. (Run the scripts from the
repository root as ``python benchmarks/NAME.py``: Python puts this folder on the path.)"""

from __future__ import annotations

import json
from pathlib import Path


def write_json(data, path: str | Path) -> Path:
    """Write ``data`` as indented JSON (non-ASCII text kept readable) to ``path``, creating its
    folder, and say so. Returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n")
    print(f"wrote {path}")
    return path
