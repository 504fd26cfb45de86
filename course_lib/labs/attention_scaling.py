"""Why attention divides by √d_k: the experiment of Chapter 4.

Vaswani et al. (2017, footnote 4): if the entries of q and k are independent with mean 0 and
variance 1, then q·k = Σ_i q_i k_i has mean 0 and variance d_k. Large scores push the softmax
into saturation (one weight near 1, the rest near 0), where its gradient vanishes. Dividing by
√d_k brings the variance back to 1 whatever the head width. ``scaling_experiment`` measures all
three effects (score variance, largest weight, gradient through the softmax) with autograd.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from ..attention import softmax

__all__ = ["scaling_experiment", "softmax_with_temperature"]


def softmax_with_temperature(scores: torch.Tensor, scale: float) -> torch.Tensor:
    """softmax(scale · scores) along the last axis.

    ``scale`` plays the role of 1/√d_k (or of an inverse temperature): a large scale sharpens
    the weights towards a one-hot vector, a scale near 0 flattens them towards uniform.
    Shapes: scores (..., T) -> weights (..., T), each row summing to 1.
    """
    if not math.isfinite(scale) or scale < 0:
        raise ValueError(
            f"softmax_with_temperature: scale must be a finite number >= 0; got {scale}."
        )
    return softmax(scores * scale, dim=-1)


def scaling_experiment(
    d_ks: Sequence[int],
    n_queries: int = 256,
    n_keys: int = 16,
    seed: int = 0,
) -> dict[str, list[float]]:
    """Score variance, largest attention weight and softmax gradient norm against d_k.

    For every d_k, draws ``n_queries`` queries and ``n_keys`` keys with independent N(0, 1)
    entries (what a well-initialised layer produces), and computes the attention weights
    with and without the 1/√d_k factor. The gradient is that of a random linear read-out
    L = Σ g ⊙ weights (g ~ N(0, 1)) with respect to the softmax's input, obtained by
    autograd: it is what the layers below receive, and it vanishes when the softmax saturates.

    Returns a dict of lists (one entry per d_k):
        ``d_k``; ``var_raw``, ``var_scaled``: variance of q·k and of q·k/√d_k;
        ``max_weight_raw``, ``max_weight_scaled``: mean over queries of the largest weight;
        ``grad_raw``, ``grad_scaled``: mean over queries of ‖∂L/∂scores‖.
    All values are float64 statistics, reproducible for a given ``seed``.
    """
    if len(d_ks) == 0 or any(int(d) != d or d < 1 for d in d_ks):
        raise ValueError(f"scaling_experiment: d_ks must be positive integers; got {list(d_ks)}.")
    if n_queries < 2 or n_keys < 2:
        raise ValueError(
            f"scaling_experiment: need at least 2 queries and 2 keys for a variance and a "
            f"softmax; got n_queries={n_queries}, n_keys={n_keys}."
        )
    gen = torch.Generator().manual_seed(seed)
    g = torch.randn(n_queries, n_keys, generator=gen, dtype=torch.float64)  # (N, T) read-out
    out: dict[str, list[float]] = {
        k: []
        for k in (
            "d_k",
            "var_raw",
            "var_scaled",
            "max_weight_raw",
            "max_weight_scaled",
            "grad_raw",
            "grad_scaled",
        )
    }
    for d_k in d_ks:
        q = torch.randn(n_queries, d_k, generator=gen, dtype=torch.float64)  # (N, d_k)
        k = torch.randn(n_keys, d_k, generator=gen, dtype=torch.float64)  # (T, d_k)
        raw = q @ k.T  # (N, T): unscaled dot products, variance ≈ d_k
        out["d_k"].append(int(d_k))
        for name, scale in (("raw", 1.0), ("scaled", 1.0 / math.sqrt(d_k))):
            s = (raw * scale).requires_grad_(True)  # (N, T): the softmax's input
            w = softmax(s, dim=-1)  # (N, T)
            (w * g).sum().backward()
            out[f"var_{name}"].append(s.detach().var().item())
            out[f"max_weight_{name}"].append(w.detach().amax(dim=-1).mean().item())
            out[f"grad_{name}"].append(s.grad.norm(dim=-1).mean().item())
    return out
