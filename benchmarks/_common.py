"""What the benchmark scripts share: the repository root and their results files. (Run the
scripts from the repository root as ``python benchmarks/NAME.py``: Python puts this folder on
the path, and importing this module puts the root there too, for ``tools``.)"""

from __future__ import annotations

import json
import sys
from pathlib import Path

try:
    from tools import ROOT  # the repository root's one home
except ModuleNotFoundError:  # run as a script: benchmarks/ is on the path, the root is not
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from tools import ROOT

RESULTS = ROOT / "course_lib" / "results"  # the results files chapters read


def results_file(name: str) -> Path:
    """``course_lib/results/<name>``, the committed results file a benchmark rewrites."""
    return RESULTS / name


def write_json(data, path: str | Path) -> Path:
    """Write ``data`` as indented JSON (non-ASCII text kept readable) to ``path``, creating its
    folder, and say so. Returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n")
    print(f"wrote {path}")
    return path
