"""What chapters show: figures in one style, explorers the browser recomputes, numbers glued
into the prose (the modules: CONTRIBUTING.md, "Rooms"). Imported by chapters, never by the
math: nothing outside ``viz`` imports it.
"""


def _sharp_figures() -> None:
    """Figures in a notebook are vector graphics (SVG), sharp on high-resolution screens and
    when a reader zooms in, and smaller than a 2x ("retina") PNG: a line plot is about 6 KB
    compressed instead of 72 KB, a heat map 10 KB instead of 124 KB (images inside a figure,
    such as ``imshow``, stay pixels). Set here, once, because every chapter imports something
    from ``course_lib.viz``."""
    import sys

    if "IPython" not in sys.modules:  # a plain Python process: nothing to configure
        return
    from IPython import get_ipython

    if get_ipython() is None:
        return
    try:
        from matplotlib_inline.backend_inline import InlineBackend
    except ImportError:  # no inline backend (another front end): leave it alone
        return
    InlineBackend.instance().figure_formats = {"svg"}


#: Set (to "1") by the site build (book/_ext/course_figures.py) for the kernels it starts.
NARROW_ENV = "COURSE_NARROW_FIGURES"


def _narrow_bundle(fig):
    from .plotting import narrow_bundle

    return narrow_bundle(fig)


def _narrow_figures() -> None:
    """When the site is built, a figure with panels side by side is displayed with a second
    output type besides its SVG: the same figure re-laid out for a phone (panels stacked,
    ``plotting.narrow_layout``), which the site serves to narrow screens. Jupyter and Colab
    never set the variable, so they show the usual figure only and pay nothing for it."""
    import os
    import sys

    if os.environ.get(NARROW_ENV) != "1" or "IPython" not in sys.modules:
        return
    from IPython import get_ipython

    ip = get_ipython()
    if ip is None:
        return
    ip.display_formatter.mimebundle_formatter.for_type_by_name(
        "matplotlib.figure", "Figure", _narrow_bundle
    )


_sharp_figures()
_narrow_figures()
