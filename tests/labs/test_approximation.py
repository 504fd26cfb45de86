"""course_lib.labs.approximation: the constructed one-hidden-layer ReLU network is the broken
line through the knots (checked against numpy's interpolation), its error on a smooth function
falls like 1 / width², and it cannot approximate a jump."""

import math

import numpy as np
import pytest
import torch

from course_lib.labs.approximation import approximation_errors, error_slope, relu_interpolant


def f(x):
    return torch.sin(3 * x) + 0.5 * x**2


def test_network_is_the_piecewise_linear_interpolant():
    net = relu_interpolant(f, 7, lo=-2.0, hi=1.0)
    assert [type(m).__name__ for m in net] == ["Linear", "ReLU", "Linear"]
    assert net[0].out_features == 7  # one hidden unit per bend
    x = torch.linspace(-2.0, 1.0, 1001, dtype=torch.float64)
    knots = np.linspace(-2.0, 1.0, 8)
    want = np.interp(x.numpy(), knots, f(torch.from_numpy(knots)).numpy())
    with torch.no_grad():
        got = net(x[:, None])[:, 0].numpy()
    np.testing.assert_allclose(got, want, atol=1e-12)


def test_error_falls_like_one_over_width_squared():
    widths = [4, 8, 16, 32, 64]
    errors = approximation_errors(f, widths)
    assert all(a > b for a, b in zip(errors, errors[1:]))
    assert error_slope(widths, errors) == pytest.approx(-2.0, abs=0.15)
    # the interpolation bound h^2 max|f''| / 8 with h = 2 / width and |f''| <= 9 + 1
    assert all(e <= (2 / w) ** 2 * 10 / 8 for w, e in zip(widths, errors))


def test_a_jump_is_never_approximated_uniformly():
    def step(x):
        return (x > 0.0001).double()  # a jump between two knots of every width

    errors = approximation_errors(step, [4, 16, 64])
    assert min(errors) > 0.4  # a continuous function cannot close a gap of 1 everywhere


def test_bad_input():
    with pytest.raises(ValueError, match="width"):
        relu_interpolant(f, 0)
    with pytest.raises(ValueError, match="two or more"):
        error_slope([1], [math.e])
