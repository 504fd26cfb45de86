"""Narrow (phone) layouts of multi-panel figures: course_lib.viz.plotting.narrow_layout, the
output type the site reads (narrow_bundle, course_lib.viz's display hook) and the site
extension that joins the two layouts into one <picture> (book/_ext/course_figures.py).

The re-laid-out figure is checked against matplotlib's own geometry: every panel keeps its
artists and moves to a row of its own (its drawn box lies below the previous panel's), fonts
keep their sizes, the figure is NARROW_WIDTH inches wide, and the SVG parses as XML.
"""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET

import matplotlib.pyplot as plt
import numpy as np
import pytest

from course_lib.viz import plotting as P
from tools import ROOT

sys.path.insert(0, str(ROOT / "book" / "_ext"))


def _bars(sharey=True):
    fig, axes = P.new_figure(1, 4, figsize=(13, 3.2), sharey=sharey)
    for i, ax in enumerate(axes):
        P.bar_probs(np.full(10, 0.1), list("abcdefghij"), title=f"panel {i}", ax=ax)
    return P.finish_figure(fig)


def _boxes(fig):
    fig.canvas.draw()
    return [ax.get_window_extent() for ax in fig.axes if not hasattr(ax, "_colorbar")]


def _tick_sizes(fig):
    return sorted(
        {t.get_fontsize() for ax in fig.axes for t in ax.get_xticklabels() + ax.get_yticklabels()}
    )


def test_stacked_layout_one_panel_per_row_same_fonts():
    fig = _bars()
    before = fig.get_size_inches().copy()
    narrow = P.narrow_layout(fig)
    assert narrow is not None and narrow is not fig
    np.testing.assert_allclose(fig.get_size_inches(), before)  # the wide figure is untouched
    assert narrow.get_size_inches()[0] == pytest.approx(P.NARROW_WIDTH)
    assert len(narrow.axes) == len(fig.axes) == 4
    boxes = _boxes(narrow)
    # each panel in its own row: below the previous one, none side by side
    for upper, lower in zip(boxes, boxes[1:]):
        assert lower.y1 < upper.y0
    assert [ax.get_title() for ax in narrow.axes] == [ax.get_title() for ax in fig.axes]
    assert _tick_sizes(narrow) == _tick_sizes(fig)
    # the same bars in every panel
    for a, b in zip(fig.axes, narrow.axes):
        np.testing.assert_allclose(
            [p.get_height() for p in a.patches], [p.get_height() for p in b.patches]
        )
    assert narrow.number not in plt.get_fignums()


def test_shared_axis_labels_come_back_when_stacked():
    fig = _bars(sharey=True)
    # side by side, sharey hides the inner panels' y tick labels
    assert not fig.axes[1].yaxis.get_tick_params()["labelleft"]
    narrow = P.narrow_layout(fig)
    narrow.canvas.draw()
    for ax in narrow.axes:
        assert ax.yaxis.get_tick_params()["labelleft"]
        assert any(t.get_visible() and t.get_text() for t in ax.get_yticklabels())


def test_small_pictures_go_two_to_a_row_and_a_grid_of_them_is_transposed():
    fig, axes = P.new_figure(1, 4, figsize=(8, 2.3))
    for ax in axes:
        ax.imshow(np.random.default_rng(0).random((8, 8)))
        ax.set_xticks([])
        ax.set_yticks([])
    boxes = _boxes(P.narrow_layout(P.finish_figure(fig)))
    rows = sorted({round(b.y0) for b in boxes})
    assert len(rows) == 2 and len({round(b.x0) for b in boxes}) == 2

    fig, axes = P.new_figure(2, 5, figsize=(8.5, 3.8))
    for ax in axes.ravel():
        ax.imshow(np.zeros((4, 4)))
        ax.set_xticks([])
        ax.set_yticks([])
    for j in range(5):
        axes[0, j].set_title(f"column {j}")
    narrow = P.narrow_layout(P.finish_figure(fig))
    specs = {ax.get_title(): ax.get_subplotspec() for ax in narrow.axes if ax.get_title()}
    # column j of the wide figure is row j of the narrow one, its top panel on the left
    assert narrow.axes[0].get_subplotspec().get_gridspec().get_geometry() == (5, 2)
    assert [(s.rowspan.start, s.colspan.start) for s in specs.values()] == [
        (j, 0) for j in range(5)
    ]


def test_colour_bar_moves_with_its_panel():
    fig = P.matrix_panels(
        [np.eye(5), np.eye(5)], ["a", "b"], labels=list("vwxyz"), colorbar=True, figsize=(10, 4.6)
    )
    assert len(fig.axes) == 3
    narrow = P.narrow_layout(fig)
    narrow.canvas.draw()
    panel, cbar = narrow.axes[1], narrow.axes[2]
    assert hasattr(cbar, "_colorbar")
    p, c = panel.get_window_extent(), cbar.get_window_extent()
    assert c.x0 > p.x1 - 1  # beside its panel, to the right
    assert c.y0 < p.y1 and c.y1 > p.y0  # at the same height
    assert narrow.axes[0].get_window_extent().y0 > p.y1  # the first panel is above


def test_no_narrow_layout_for_one_column_or_an_opt_out():
    assert P.narrow_layout(P.bar_probs([0.5, 0.5], ["a", "b"])) is None
    fig, axes = P.new_figure(2, 1)
    assert P.narrow_layout(P.finish_figure(fig)) is None
    fig, axes = P.new_figure(1, 2)
    assert P.narrow_layout(P.finish_figure(fig, narrow=False)) is None
    fig, axes = P.new_figure(1, 2)
    twin = axes[0].twinx()  # two axes in one cell cannot be told apart by the grid
    twin.plot([0, 1])
    assert P.narrow_layout(P.finish_figure(fig)) is None


def test_explicit_grid_and_bad_requests():
    fig, axes = P.new_figure(1, 4)
    for ax in axes:
        ax.plot([0, 1])
    narrow = P.narrow_layout(P.finish_figure(fig, narrow=(2, 2)))
    assert narrow.axes[0].get_subplotspec().get_gridspec().get_geometry() == (2, 2)
    with pytest.raises(ValueError, match="fewer cells"):
        P.narrow_layout(fig, narrow=(1, 2))
    with pytest.raises(ValueError, match="narrow="):
        P.narrow_layout(fig, narrow="stacked")


def test_bundle_is_a_valid_svg_with_what_the_site_reads():
    fig = _bars()
    bundle = P.narrow_bundle(fig)
    data = bundle[P.NARROW_MIME]
    root = ET.fromstring(data["svg"])
    assert root.tag.endswith("svg")
    width_pt = float(root.get("width").removesuffix("pt"))
    # tight bounding box: about NARROW_WIDTH inches (72 pt each), far narrower than 13 inches
    assert 0.8 * P.NARROW_WIDTH * 72 < width_pt < 1.1 * P.NARROW_WIDTH * 72
    assert data["panels"] == 4 and data["grid"] == [4, 1]
    assert data["tick_pt"] == min(_tick_sizes(fig))
    assert P.narrow_bundle(P.bar_probs([0.5, 0.5], ["a", "b"])) is None


def test_display_hook_adds_the_narrow_output_only_when_the_site_asks(monkeypatch):
    pytest.importorskip("IPython")
    from IPython.core.formatters import DisplayFormatter

    import course_lib.viz as viz

    class Shell:  # what _narrow_figures needs of IPython's shell
        display_formatter = DisplayFormatter()

    shell = Shell()
    monkeypatch.setattr("IPython.get_ipython", lambda: shell)
    monkeypatch.delenv(viz.NARROW_ENV, raising=False)
    viz._narrow_figures()
    fig = _bars()
    data, _ = shell.display_formatter.format(fig)
    assert P.NARROW_MIME not in data
    monkeypatch.setenv(viz.NARROW_ENV, "1")
    viz._narrow_figures()
    data, _ = shell.display_formatter.format(fig)
    assert data[P.NARROW_MIME]["panels"] == 4
    data, _ = shell.display_formatter.format(P.bar_probs([0.5, 0.5], ["a", "b"]))
    assert P.NARROW_MIME not in data


def test_site_extension_names_the_same_output_type():
    import course_figures
    import course_lib.viz as viz

    assert course_figures.NARROW_MIME == P.NARROW_MIME
    assert course_figures.NARROW_ENV == viz.NARROW_ENV


def test_wide_single_panels_are_legible_on_a_phone():
    """Issue 29: an 11-inch attention heat map's labels were 4.5 px tall on a phone. A figure
    without a phone layout of its own has its texts scaled (one factor) to >= 8 px there, as
    measured from the drawn SVG; figures with a phone layout and diagrams keep their sizes."""
    import re

    toks = list("to be, or not to be")
    fig = P.attention_heatmap(np.eye(len(toks)), toks)
    assert P.phone_text_px(fig) >= P.MIN_PHONE_PX
    # the drawn SVG: every tick label's font (its glyphs' scale) at the phone's column width
    import io

    buf = io.StringIO()
    fig.savefig(buf, format="svg")
    svg = buf.getvalue()
    width_pt = float(re.search(r'viewBox="0 0 ([\d.]+)', svg).group(1))
    sizes = [100 * float(s) for s in re.findall(r"scale\(([\d.]+) -[\d.]+\)", svg)]
    assert sizes and min(sizes) * P.PHONE_COLUMN_PX / width_pt >= P.MIN_PHONE_PX
    # the title stays the largest text (one factor for all)
    ax = fig.axes[0]
    assert ax.title.get_fontsize() > ax.get_xticklabels()[0].get_fontsize()
    # a small figure is left as it is
    small, sax = P.new_figure(figsize=(4, 3))
    sax.plot([0, 1])
    assert P.finish_figure(small).axes[0].get_xticklabels()[0].get_fontsize() == 11
    # a side-by-side figure has a phone layout: its wide version keeps its fonts
    assert _tick_sizes(_bars()) == [9.0, 11.0]
    # a diagram (no axis shown) is left alone
    dfig, dax = P.new_figure(figsize=(12, 3))
    dax.text(0.5, 0.5, "box", fontsize=8)
    dax.set_axis_off()
    assert P.finish_figure(dfig).axes[0].texts[0].get_fontsize() == 8


def _diagram(figsize, size, word):
    fig, ax = P.new_figure(figsize=figsize)
    ax.text(0.5, 0.5, word, fontsize=size, ha="center")
    ax.text(0.5, 0.2, "a label", fontsize=size + 2, ha="center")
    ax.axis("off")
    return fig


def test_a_drawn_phone_figure_is_the_narrow_layout():
    """A diagram (one axes, no panels to stack) can bring a phone drawing of its own:
    finish_figure(fig, narrow=phone_figure). The site then serves that figure on phones."""
    tall = P.finish_figure(_diagram((5, 7), 10, "tall"))
    fig = P.finish_figure(_diagram((11, 4), 8, "wide"), narrow=tall)
    assert P.narrow_layout(fig) is tall
    assert P.narrow_layout(fig, narrow=False) is None  # asked for none: the wide one
    assert tall.number not in plt.get_fignums() and fig.number not in plt.get_fignums()
    # the wide diagram's text is too small on a phone, the drawing's is not
    assert P.phone_text_px(fig) < P.MIN_PHONE_PX <= P.phone_text_px(tall)
    data = P.narrow_bundle(fig)[P.NARROW_MIME]
    root = ET.fromstring(data["svg"])
    assert "tall" in data["svg"] and "wide" not in data["svg"]
    assert float(root.get("width").removesuffix("pt")) < 5 * 72 + 1
    # a diagram has no tick labels: its smallest text is what the site's check reads
    assert data["tick_pt"] == 10 and data["panels"] == 1 and data["grid"] == [1, 1]
    # a figure without a drawing of its own still has no narrow layout
    assert P.narrow_bundle(P.finish_figure(_diagram((11, 4), 8, "wide"))) is None


def test_numbers_shrunk_side_by_side_are_written_again_when_stacked():
    """Fig. 10.1: four panels of ten bars side by side left the values over the bars no room,
    so the wide figure shortens and shrinks them (``fit_slot_numbers``); stacked, each panel
    is wider, and the phone's layout writes them as the chapter did (7.9 px on a phone, when
    it kept the shrunk size)."""
    fig = _bars()
    wide = [t for ax in fig.axes for t in ax.texts]
    assert min(t.get_fontsize() for t in wide) < 9 and all(t.get_text() == ".10" for t in wide)
    narrow = P.narrow_layout(fig)
    stacked = [t for ax in narrow.axes for t in ax.texts]
    assert len(stacked) == len(wide)
    assert {t.get_fontsize() for t in stacked} == {9} and {t.get_text() for t in stacked} == {
        "0.10"
    }
