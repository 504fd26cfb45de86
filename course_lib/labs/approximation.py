"""Universal approximation in one dimension, by construction (Chapter 5, Example 5).

A network with one hidden layer of n ReLU units, x -> W2 relu(W1 x + b1) + b2, can draw any
broken line with n bends: unit k switches on at knot t_k (w1 = 1, b1 = -t_k) and adds its
change of slope there. ``relu_interpolant`` chooses those weights so that the network equals the
piecewise-linear interpolant of f through n + 1 equally spaced points; for a smooth f its
largest error falls like 1 / n² (the interpolation error h² max|f''| / 8 with h = width of a
piece). That is the one-dimensional core of the universal approximation theorem (Cybenko 1989;
Hornik, Stinchcombe & White 1989; for ReLU, Leshno et al. 1993): one hidden layer, wide
enough, approximates any continuous function on an interval as closely as you like; it says
nothing about how wide, or whether training finds those weights.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import nn

__all__ = ["relu_interpolant", "approximation_errors", "error_slope"]


def relu_interpolant(
    f: Callable[[torch.Tensor], torch.Tensor], width: int, lo: float = -1.0, hi: float = 1.0
) -> nn.Sequential:
    """``nn.Sequential(Linear(1, width), ReLU(), Linear(width, 1))`` in float64 whose output is
    the broken line through (x_j, f(x_j)), x_j = lo + j (hi - lo) / width, j = 0 .. width.

    Unit k (k = 0 .. width - 1) is relu(x - x_k); its output weight is the slope of piece k
    minus the slope of piece k - 1 (piece -1 has slope 0), and the output bias is f(lo).
    ``f`` maps a (N,) float64 tensor to (N,). Input (N, 1) -> output (N, 1).
    """
    if width < 1 or not hi > lo:
        raise ValueError(
            f"relu_interpolant: need width >= 1 and hi > lo; got width={width}, lo={lo}, hi={hi}."
        )
    knots = torch.linspace(lo, hi, width + 1, dtype=torch.float64)  # (width + 1,)
    values = f(knots)  # (width + 1,)
    slopes = (values[1:] - values[:-1]) / (knots[1:] - knots[:-1])  # (width,): one per piece
    net = nn.Sequential(nn.Linear(1, width), nn.ReLU(), nn.Linear(width, 1)).double()
    with torch.no_grad():
        net[0].weight.fill_(1.0)  # (width, 1)
        net[0].bias.copy_(-knots[:-1])  # unit k bends at x_k
        net[2].weight.copy_(torch.diff(slopes, prepend=slopes.new_zeros(1))[None])  # (1, width)
        net[2].bias.fill_(float(values[0]))
    return net


def approximation_errors(
    f: Callable[[torch.Tensor], torch.Tensor],
    widths,
    lo: float = -1.0,
    hi: float = 1.0,
    n_grid: int = 4001,
) -> list[float]:
    """The largest |network(x) - f(x)| over ``n_grid`` equally spaced x in [lo, hi] of
    ``relu_interpolant(f, n)`` for each n in ``widths``."""
    x = torch.linspace(lo, hi, n_grid, dtype=torch.float64)  # (n_grid,)
    out = []
    with torch.no_grad():
        for n in widths:
            net = relu_interpolant(f, int(n), lo, hi)
            out.append(float((net(x[:, None])[:, 0] - f(x)).abs().max()))
    return out


def error_slope(widths, errors) -> float:
    """Least-squares slope of log(error) against log(width): the exponent p in error ~ width^p
    (about -2 for a smooth function)."""
    if len(widths) != len(errors) or len(widths) < 2 or min(errors) <= 0:
        raise ValueError("error_slope: need two or more widths and as many positive errors.")
    lx = torch.tensor([math.log(w) for w in widths], dtype=torch.float64)
    ly = torch.tensor([math.log(e) for e in errors], dtype=torch.float64)
    lx, ly = lx - lx.mean(), ly - ly.mean()
    return float((lx * ly).sum() / (lx * lx).sum())
