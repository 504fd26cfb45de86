"""course_lib.viz.plotting: one style, opaque backgrounds, readable errors."""
import matplotlib
import matplotlib.pyplot as plt
import numpy as np
import pytest
import torch

from course_lib.viz.plotting import attention_heatmap, bar_probs, loss_curve, new_figure, positional_heatmap
from course_lib.attention import sinusoidal_positions


def _assert_course_figure(fig):
    assert isinstance(fig, matplotlib.figure.Figure)
    # opaque white background: readable on the site's dark theme
    assert matplotlib.colors.to_rgba(fig.get_facecolor()) == (1.0, 1.0, 1.0, 1.0)
    assert fig.number not in plt.get_fignums(), "returned figures are closed so notebooks show them once"
    fig.canvas.draw()  # renders without error


def test_attention_heatmap_annotates_weights():
    w = torch.tensor([[1.0, 0.0], [0.25, 0.75]])
    fig = attention_heatmap(w, ["a", "b"])
    _assert_course_figure(fig)
    texts = {t.get_text() for t in fig.axes[0].texts}
    assert {"1.00", "0.00", "0.25", "0.75"} <= texts
    assert [t.get_text() for t in fig.axes[0].get_xticklabels()] == ["a", "b"]


def test_attention_heatmap_rejects_wrong_shapes():
    with pytest.raises(ValueError, match="one \\(T_q, T_k\\) matrix"):
        attention_heatmap(torch.zeros(2, 3, 3), ["a", "b", "c"])
    with pytest.raises(ValueError, match="do not match"):
        attention_heatmap(torch.zeros(3, 3), ["a", "b"])


def test_loss_curve_plots_every_curve():
    fig = loss_curve({"step": [0, 10, 20], "train": [3.0, 2.0, 1.5], "val": [3.1, 2.2, 1.8]})
    _assert_course_figure(fig)
    lines = fig.axes[0].get_lines()
    assert [l.get_label() for l in lines] == ["train", "val"]
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
