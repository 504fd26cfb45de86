"""Hand calculation (Chapter 5): a transformer small enough to compute on paper.

- ``engine``: the float64 NumPy forward and backward passes, every intermediate returned
  (re-exported here, so ``from course_lib import handcalc as hc; hc.forward(...)``);
- ``worksheet``: formatting numbers and written-out arithmetic, HTML tables and worksheets;
- ``sheets``: the six worksheets and their answer keys, built from ``engine``.

Imports go one way: ``sheets`` -> ``engine``, ``worksheet``; neither of those imports ``sheets``.
"""

from .engine import *  # noqa: F401,F403
from .engine import __all__  # noqa: F401
