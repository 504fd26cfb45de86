"""Repository tools (not installed with ``course_lib``): they know the repository's layout.

What each module holds is in CONTRIBUTING.md's map of rooms (one map, not repeated here); the
generated files they write are listed once, in ``tools.sync``. Run them from the repository
root: ``./course sync``, ``./course check``, ``python -m tools.exercises --execute NN_name``.
"""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]  # the repository root: the one place that computes it
