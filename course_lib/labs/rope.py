"""Rotary position embeddings (RoPE, Su et al. 2021), written out pair by pair.

RoPE does not add a position vector to the token. It rotates the query and the key: the
dimension pair (2i, 2i+1) of a vector at position m is turned by the angle m·θ_i, with
θ_i = base^(-2i/d) (the same frequencies as the sinusoidal encodings). A rotation by m·θ
followed by the inverse of a rotation by n·θ is a rotation by (m - n)·θ, so the score
q_m · k_n depends on the positions only through the offset m - n.

The tests compare ``apply_rope`` with an independent complex-number implementation
(multiplying by e^{i m θ}) and check the relative-offset property numerically.
"""
from __future__ import annotations

from typing import Sequence

import torch

__all__ = ["rope_angles", "apply_rope", "rope_score", "rope_offset_table"]


def rope_angles(positions, d: int, base: float = 10000.0) -> torch.Tensor:
    """Rotation angle of every (position, pair): angles[t, i] = positions[t] * base^(-2i/d).

    Shapes: positions (T,) -> (T, d/2) float64 (float64 so large positions stay accurate).
    """
    if d < 2 or d % 2:
        raise ValueError(f"rope_angles: d must be a positive even number (RoPE rotates pairs); got d={d}.")
    if base <= 1:
        raise ValueError(f"rope_angles: base must be > 1 so the frequencies decrease; got {base}.")
    pos = torch.as_tensor(positions, dtype=torch.float64).reshape(-1)  # (T,)
    theta = base ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)  # (d/2,)
    return pos[:, None] * theta[None, :]  # (T, d/2)


def apply_rope(x: torch.Tensor, positions=None, base: float = 10000.0) -> torch.Tensor:
    """Rotate each dimension pair (2i, 2i+1) of x by the angle position * θ_i.

    Shapes: x (..., T, d) with d even; positions (T,) (default 0, 1, ..., T-1).
    Returns a tensor of the same shape and dtype. Lengths are unchanged (it is a rotation).
    """
    if x.dim() < 2:
        raise ValueError(
            f"apply_rope: x must be (..., T, d), one vector per position; got shape {tuple(x.shape)}. "
            "For a single vector use x[None] and positions=[m]."
        )
    T, d = x.shape[-2], x.shape[-1]
    positions = torch.arange(T) if positions is None else torch.as_tensor(positions)
    if positions.reshape(-1).shape[0] != T:
        raise ValueError(f"apply_rope: need one position per row of x ({T}); got {positions.numel()}.")
    ang = rope_angles(positions, d, base)  # (T, d/2)
    cos, sin = ang.cos().to(x.dtype), ang.sin().to(x.dtype)  # (T, d/2) each
    x_even, x_odd = x[..., 0::2], x[..., 1::2]  # (..., T, d/2): first and second of each pair
    out = torch.empty_like(x)
    out[..., 0::2] = x_even * cos - x_odd * sin  # the 2x2 rotation [[c, -s], [s, c]]
    out[..., 1::2] = x_even * sin + x_odd * cos
    return out  # (..., T, d)


def rope_score(q: torch.Tensor, k: torch.Tensor, m: int, n: int, base: float = 10000.0) -> float:
    """The dot product of q rotated to position m with k rotated to position n.

    Shapes: q (d,), k (d,). Returns a Python float.
    """
    if q.dim() != 1 or q.shape != k.shape:
        raise ValueError(f"rope_score: q and k must be vectors of the same length; got {tuple(q.shape)}, {tuple(k.shape)}.")
    qm = apply_rope(q[None], [m], base)[0]  # (d,)
    kn = apply_rope(k[None], [n], base)[0]  # (d,)
    return float(qm @ kn)


def rope_offset_table(q: torch.Tensor, k: torch.Tensor, starts: Sequence[int],
                      offsets: Sequence[int], base: float = 10000.0) -> torch.Tensor:
    """Scores of q at position n + offset against k at position n, for several n.

    Returns (len(starts), len(offsets)) float64: row r holds the scores for key position
    starts[r]. RoPE makes every row identical: only the offset matters.
    """
    table = torch.zeros(len(starts), len(offsets), dtype=torch.float64)
    for r, n in enumerate(starts):
        for c, off in enumerate(offsets):
            table[r, c] = rope_score(q, k, n + off, n, base)
    return table
