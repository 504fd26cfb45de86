"""A pytest plugin for running the slow tier on several pytest-xdist workers (``.ci/run``).

Every test that needs a built site (the fixtures ``built_book``, ``built_book_avx2``,
``any_build``, ``built_pdf``, ``site_dir``, ``base_url``, or ``get_build`` through ``request``:
a test parametrized by ``build``) joins one xdist group, ``site``: with ``--dist loadgroup`` one
worker builds the site and runs those tests in order, while the other workers run everything
that does not need it (grading the exercises, the fresh-Colab notebooks, training, the
sandbox). Without this, each worker that reaches a site test waits on the build's file lock,
and the build, the longest single step, overlaps with nothing.

Use: ``python -m pytest -p tools.pytest_groups -n 2 --dist loadgroup ...``. Without xdist the
plugin changes nothing but the marks.
"""

from __future__ import annotations

import pytest

SITE_FIXTURES = {"built_book", "built_book_avx2", "any_build", "built_pdf", "site_dir", "base_url"}


def pytest_collection_modifyitems(config, items):
    for item in items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        if SITE_FIXTURES & set(getattr(item, "fixturenames", ())) or "build" in params:
            item.add_marker(pytest.mark.xdist_group("site"))
