"""Where a token is: properties of the sinusoidal positional encodings.

The table itself is ``course_lib.attention.sinusoidal_positions`` (Vaswani et al., 2017,
section 3.5); this module measures it. Chapter 3 uses ``position_similarity`` for the
"similarity decays with distance" figure and ``sinusoidal_shift_matrix`` to show that moving
k positions is one fixed rotation, whatever the starting position.
"""

from __future__ import annotations

import math
from typing import Sequence

import torch

from ..attention import position_frequencies, sinusoidal_positions

__all__ = ["position_similarity", "sinusoidal_shift_matrix", "sinusoidal_frequencies"]


def sinusoidal_frequencies(d: int, base: float = 10000.0) -> torch.Tensor:
    """The d/2 angular frequencies ω_i = base^(-2i/d) of the sin/cos pairs, fastest first.

    Returns (d/2,) float64. Dimension pair i turns by ω_i radians per position. The formula
    is ``course_lib.attention.position_frequencies`` (shared with RoPE).
    """
    return position_frequencies(d, base)  # (d/2,)


def position_similarity(d: int, offsets: Sequence[int], p: int = 0) -> torch.Tensor:
    """Cosine similarity of the sinusoidal encoding at position p with those at p + k.

    Shapes: returns (len(offsets),) float64, one value per offset k >= 0. Every encoding has
    the same length √(d/2), so this is the dot product divided by d/2.
    """
    offsets = [int(k) for k in offsets]
    if p < 0 or any(k < 0 for k in offsets):
        raise ValueError(
            f"position_similarity: positions must be >= 0; got p={p}, offsets from {min(offsets)}."
        )
    pe = sinusoidal_positions(p + max(offsets) + 1, d).double()  # (T, d)
    ref = pe[p]  # (d,)
    others = pe[[p + k for k in offsets]]  # (K, d)
    return others @ ref / (others.norm(dim=1) * ref.norm())  # (K,)


def sinusoidal_shift_matrix(d: int, k: float) -> torch.Tensor:
    """The (d, d) matrix M_k with PE(p + k) = M_k @ PE(p) for every position p.

    Block-diagonal: for each (sin, cos) pair with frequency ω, the 2x2 block
    [[cos kω, sin kω], [-sin kω, cos kω]], a rotation by -kω (the pair is stored sin first).
    It depends on k only, not on p: the reason a model can learn to attend by relative offset.
    """
    M = torch.zeros(d, d, dtype=torch.float64)  # (d, d)
    for i, w in enumerate(sinusoidal_frequencies(d).tolist()):
        c, s = math.cos(k * w), math.sin(k * w)
        M[2 * i : 2 * i + 2, 2 * i : 2 * i + 2] = torch.tensor(
            [[c, s], [-s, c]], dtype=torch.float64
        )
    return M
