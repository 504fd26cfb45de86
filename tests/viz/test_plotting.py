"""course_lib.viz.plotting: one style, opaque backgrounds, readable errors."""

import re

import matplotlib
import matplotlib.pyplot as plt
import numpy as np
import pytest
import torch

from course_lib.attention import sinusoidal_positions
from course_lib.viz.plotting import (
    MIN_NUMBER_GAP_EM,
    attention_heatmap,
    bar_probs,
    finish_figure,
    loss_curve,
    new_figure,
    positional_heatmap,
    slot_number,
)


def _assert_course_figure(fig):
    assert isinstance(fig, matplotlib.figure.Figure)
    # opaque white background: readable on the site's dark theme
    assert matplotlib.colors.to_rgba(fig.get_facecolor()) == (1.0, 1.0, 1.0, 1.0)
    assert fig.number not in plt.get_fignums(), (
        "returned figures are closed so notebooks show them once"
    )
    fig.canvas.draw()  # renders without error


def test_attention_heatmap_annotates_weights():
    w = torch.tensor([[1.0, 0.0], [0.25, 0.75]])
    fig = attention_heatmap(w, ["a", "b"])
    _assert_course_figure(fig)
    texts = {t.get_text() for t in fig.axes[0].texts}
    assert {"1.00", "0.00", "0.25", "0.75"} <= texts
    assert [t.get_text() for t in fig.axes[0].get_xticklabels()] == ["a", "b"]


def _number_gaps_em(fig) -> list[float]:
    """The gap between horizontally neighbouring numbers of ``fig`` in ems of their text, as
    drawn (tests/book/test_content_fit_browser.py measures the same on the site)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    renderer = canvas.get_renderer()
    gaps = []
    for ax in fig.axes:
        boxes = [
            (t.get_window_extent(renderer), t.get_fontsize() * fig.dpi / 72)
            for t in ax.texts
            if re.fullmatch(r"[-−]?\d*\.\d+", t.get_text())
        ]
        for a, em in boxes:
            right = [b.x0 - a.x1 for b, _ in boxes if b.x0 > a.x0 and abs(b.y0 - a.y0) < 1]
            if right:
                gaps.append(min(right) / em)
    return gaps


@pytest.mark.parametrize("shape", [(3, 3), (12, 9), (16, 7), (14, 12), (5, 12)])
def test_heatmap_numbers_stay_apart_after_the_phone_scaling(shape):
    """Fig. 14.2 (issue 35): scaled up to be legible on a phone, "0.12" and "0.34" of
    neighbouring cells ran together; the numbers drop the leading zero, then shrink, until
    ``MIN_NUMBER_GAP_EM`` fits between them."""
    rng = np.random.default_rng(0)
    w = rng.dirichlet(np.ones(shape[1]), size=shape[0])
    keys = [f"word{i}" for i in range(shape[1])]
    fig = attention_heatmap(w, keys, [f"q{i}" for i in range(shape[0])])
    gaps = _number_gaps_em(fig)
    assert gaps and min(gaps) >= MIN_NUMBER_GAP_EM - 0.01, min(gaps)
    texts = [t.get_text() for t in fig.axes[0].texts]
    assert all(t.startswith(("0.", "1.", ".")) for t in texts), texts[:5]


def test_numbers_keep_their_leading_zero_where_they_fit():
    fig = attention_heatmap(torch.tensor([[0.5, 0.5], [0.25, 0.75]]), ["a", "b"])
    assert {t.get_text() for t in fig.axes[0].texts} == {"0.50", "0.25", "0.75"}
    fig, ax = new_figure(figsize=(2.0, 2.0))
    for i, v in enumerate([0.25, -0.5, 0.125]):
        slot_number(ax, i, 0.5, v, slot=0.3, fontsize=9)  # slots too narrow for "0.25"
    ax.set_xlim(-0.5, 2.5)
    finish_figure(fig)
    shown = [t.get_text() for t in ax.texts]
    assert shown == [".25", "-.50", ".12"] or shown == [".25", "-.50", ".13"], shown
    assert min(_number_gaps_em(fig)) >= MIN_NUMBER_GAP_EM - 0.01


def test_attention_heatmap_rejects_wrong_shapes():
    with pytest.raises(ValueError, match="one \\(T_q, T_k\\) matrix"):
        attention_heatmap(torch.zeros(2, 3, 3), ["a", "b", "c"])
    with pytest.raises(ValueError, match="do not match"):
        attention_heatmap(torch.zeros(3, 3), ["a", "b"])


def test_loss_curve_plots_every_curve():
    fig = loss_curve({"step": [0, 10, 20], "train": [3.0, 2.0, 1.5], "val": [3.1, 2.2, 1.8]})
    _assert_course_figure(fig)
    lines = fig.axes[0].get_lines()
    assert [line.get_label() for line in lines] == ["train", "val"]
    np.testing.assert_allclose(lines[1].get_ydata(), [3.1, 2.2, 1.8])
    np.testing.assert_allclose(lines[0].get_xdata(), [0, 10, 20])
    _assert_course_figure(loss_curve([2.0, 1.0]))
    with pytest.raises(ValueError, match="no losses"):
        loss_curve([])


def test_positional_heatmap_and_bar_probs():
    _assert_course_figure(positional_heatmap(sinusoidal_positions(20, 8)))
    fig = bar_probs([0.1, 0.6, 0.3], ["A", "B", "C"], highlight=1)
    _assert_course_figure(fig)
    heights = [p.get_height() for p in fig.axes[0].patches]
    np.testing.assert_allclose(heights, [0.1, 0.6, 0.3])
    with pytest.raises(ValueError, match="one entry per label"):
        bar_probs([0.5, 0.5], ["A"])
    with pytest.raises(ValueError, match=r"\(T, d\)"):
        positional_heatmap(np.zeros(5))


def test_new_figure_is_opaque():
    fig, ax = new_figure()
    assert fig.patch.get_alpha() == 1.0
    plt.close(fig)


def test_line_plot_draws_each_curve_on_its_axes():
    from course_lib.viz.plotting import line_plot

    fig = line_plot(
        {"a": [1.0, 2.0, 4.0], "b": torch.tensor([1.0, 0.5, 0.25])},
        x=[1, 2, 4],
        xlog=2,
        ylog=2,
        markers=["o", "s"],
        hline=1.0,
        vlines=[2],
        xlabel="T",
        ylabel="y",
    )
    _assert_course_figure(fig)
    ax = fig.axes[0]
    lines = [line for line in ax.get_lines() if line.get_label() in ("a", "b")]
    assert [line.get_label() for line in lines] == ["a", "b"]
    assert [line.get_marker() for line in lines] == ["o", "s"]
    np.testing.assert_allclose(lines[1].get_ydata(), [1.0, 0.5, 0.25])
    np.testing.assert_allclose(lines[0].get_xdata(), [1, 2, 4])
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    assert ax.get_legend() is not None  # two labelled curves
    assert (ax.get_xlabel(), ax.get_ylabel()) == ("T", "y")


def test_line_plot_curve_with_its_own_x_and_errors():
    from course_lib.viz.plotting import line_plot

    fig, ax = new_figure()
    out = line_plot({"curve": [0.0, 1.0, 4.0], "point": ([1.5], [2.0])}, ax=ax, legend=False)
    assert out is ax and ax.get_legend() is None
    point = [line for line in ax.get_lines() if line.get_label() == "point"][0]
    np.testing.assert_allclose(point.get_xdata(), [1.5])
    plt.close(fig)
    with pytest.raises(ValueError, match="empty"):
        line_plot({})
    with pytest.raises(ValueError, match="markers for 2 curves"):
        line_plot({"a": [1, 2], "b": [1, 2]}, markers=["o"])
    with pytest.raises(ValueError, match="y values for"):
        line_plot({"a": [1, 2, 3]}, x=[0, 1])


def test_line_panels_fills_the_grid_with_shared_keywords():
    from course_lib.viz.plotting import line_panels

    fig = line_panels(
        [
            {"curves": {"a": [1, 2]}, "title": "one"},
            {"curves": {"a": [2, 1]}, "title": "two"},
            {"curves": {"a": [3, 3]}},
            {"curves": {"a": [0, 1]}, "xlabel": "own"},
        ],
        nrows=2,
        x=[1, 2],
        xlabel="shared",
    )
    _assert_course_figure(fig)
    assert [ax.get_title() for ax in fig.axes[:2]] == ["one", "two"]
    assert [ax.get_xlabel() for ax in fig.axes] == ["shared", "shared", "shared", "own"]
    with pytest.raises(ValueError, match="do not fill 2 rows"):
        line_panels([{"curves": {"a": [1]}}], nrows=2)


def test_vector_plot_arrows_points_and_labels():
    from course_lib.viz.plotting import vector_plot

    fig = vector_plot(
        [("cat", torch.tensor([1.0, 0.1]), "C0"), ("", [0.0, 1.0], "C1")],
        faded=[([1.0, 0.0], "C0")],
        unit_circle=True,
        lim=1.4,
        title="t",
    )
    _assert_course_figure(fig)
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.texts if t.get_text()] == ["cat"]
    assert len(ax.patches) == 1 and ax.get_xlim() == (-1.4, 1.4)
    fig = vector_plot([("a", [0.5, 0.5], "C0")], arrows=False, points=True, lim=(-0.05, 1.1))
    dots = [line for line in fig.axes[0].get_lines() if line.get_marker() == "o"]
    np.testing.assert_allclose(dots[0].get_xydata(), [[0.5, 0.5]])
    with pytest.raises(ValueError, match="two coordinates"):
        vector_plot([("3d", [1.0, 2.0, 3.0], "C0")])


def test_matrix_panels_one_heatmap_per_matrix():
    from course_lib.viz.plotting import matrix_panels

    mask = torch.ones(3, 3).tril().bool()
    fig = matrix_panels(
        [mask, torch.eye(3)],
        ["causal", "eye"],
        labels=["a", "b", "c"],
        cell_lines=True,
        colorbar=True,
    )
    _assert_course_figure(fig)
    images = [ax.get_images()[0].get_array() for ax in fig.axes[:2]]
    np.testing.assert_allclose(images[0], np.tril(np.ones((3, 3))))
    assert [t.get_text() for t in fig.axes[0].get_xticklabels()] == ["a", "b", "c"]
    assert len(fig.axes) == 3  # two panels and a colour bar
    with pytest.raises(ValueError, match="one title each"):
        matrix_panels([mask], ["a", "b"])


def test_bar_probs_into_a_panel():
    fig, axes = new_figure(1, 2)
    assert bar_probs([0.7, 0.3], ["t", "o"], highlight=0, ylabel="weight", ax=axes[0]) is axes[0]
    assert axes[0].get_ylabel() == "weight"
    heights = [p.get_height() for p in axes[0].patches]
    np.testing.assert_allclose(heights, [0.7, 0.3])
    plt.close(fig)


def test_agrees_uses_the_dtype_round_off_and_says_yes_or_no():
    from course_lib.viz.report import agrees, verdict

    a = torch.tensor([1.0, 2.0], dtype=torch.float64)
    assert agrees(a, a + 1e-13) == "yes"
    assert agrees(a, a + 1e-9) == "NO"  # float64: held to round-off
    assert agrees(a.float(), a.float() + 1e-6) == "yes"  # float32: torch.allclose defaults
    assert agrees(a, a + 1e-9, atol=1e-8) == "yes"
    assert agrees(0.1 + 0.2, 0.3) == "yes" and verdict(False) == "NO"
    with pytest.raises(ValueError, match="same shape"):
        agrees(a, a[:1])


@pytest.mark.parametrize(
    "x, digits",
    [
        (3.2e-65, 1),
        (3e32, 0),
        (1.4e-2, 1),
        (-2.5e-7, 1),
        (4.6e4, 1),
        (0.18, 1),
        (12.3, 1),
        (7e-5, 2),
    ],
)
def test_sci_writes_powers_of_ten_as_a_reader_does(x, digits):
    from course_lib.viz.glue import sci

    text = sci(x, digits)
    assert "e" not in text and "E" not in text  # no Python notation
    if "×" in text:  # mantissa × 10^exponent, read back from the superscripts
        mantissa, power = text.replace("\u2212", "-").split(" × 10")
        exponent = int(power.translate(str.maketrans("⁰¹²³⁴⁵⁶⁷⁸⁹⁻", "0123456789-")))
        assert float(mantissa) * 10.0**exponent == pytest.approx(x, rel=0.5 * 10.0**-digits)
        assert len(mantissa.lstrip("-").replace(".", "")) == digits + 1
    else:  # between 0.1 and 1000: positional, digits + 1 significant figures
        assert float(text.replace("\u2212", "-")) == pytest.approx(x, rel=0.05)


@pytest.mark.parametrize(
    "a, b, decimals, shown",
    [
        (74.53, 73.24, 1, "1.3"),  # the unrounded gap, 1.29, would also print 1.3
        (74.46, 73.24, 1, "1.3"),  # 74.5 − 73.2: the unrounded gap, 1.22, prints 1.2
        (33.9, 29.4, 0, "5"),  # 34 − 29, where 4.5 prints as 4
        (1.0, 1.04, 1, "0.0"),  # no "−0.0"
        (85.8, 86.6, 1, "-0.8"),
    ],
)
def test_shown_difference_is_the_difference_of_the_shown_numbers(a, b, decimals, shown):
    from course_lib.viz.numbers import shown_difference

    assert shown_difference(a, b, decimals) == shown
    assert float(shown) == pytest.approx(float(f"{a:.{decimals}f}") - float(f"{b:.{decimals}f}"))
    with pytest.raises(ValueError, match="decimals"):
        shown_difference(a, b, -1)


def test_listing_joins_names_as_a_sentence_does():
    from course_lib.viz.numbers import listing

    assert listing([]) == ""
    assert listing(["muon"]) == "muon"
    assert listing(["muon", "wsd"]) == "muon and wsd"
    assert listing(["a", "b", "c"], last="or") == "a, b or c"
