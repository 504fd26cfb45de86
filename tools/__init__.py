"""Repository tools (not installed with ``course_lib``): they know the repository's layout.

- ``colab``: the Colab set-up cell and URL, paired notebooks, the README's links table;
- ``toc``: the one reader of ``_toc.yml``;
- ``bench``: each chapter's execution time (``./course bench``);
- ``exercises``: writes ``exercises/`` from ``solutions/`` and checks them.

Run them from the repository root: ``python -m tools.colab``, ``python -m tools.exercises``.
"""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]  # the repository root: the one place that computes it
