"""What chapters show: ``plotting`` (the course's figures, one style), ``explorers``
(interactive Vega-Lite figures computed in the browser), ``glue`` (numbers glued into the
prose), ``report`` (one-word agreement verdicts) and ``architecture`` (the GPT's diagram).
Imported by chapters, never by the math: nothing outside ``viz`` imports it.
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


_sharp_figures()
