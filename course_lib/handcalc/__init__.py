"""Hand calculation (Chapter 5): a transformer small enough to compute on paper.

The engine's forward and backward passes are re-exported here (``from course_lib import
handcalc as hc; hc.forward(...)``); the modules are in CONTRIBUTING.md's map ("Rooms").
Imports go one way: ``sheets`` -> ``engine``, ``worksheet``; neither of those imports ``sheets``.
"""

from .engine import *  # noqa: F401,F403
from .engine import __all__  # noqa: F401
