"""Rotary position embeddings (RoPE, Su et al. 2021), written out pair by pair.

RoPE does not add a position vector to the token. It rotates the query and the key: the
dimension pair (2i, 2i+1) of a vector at position m is turned by the angle m·θ_i, with
θ_i = base^(-2i/d) (the same frequencies as the sinusoidal encodings). A rotation by m·θ
followed by the inverse of a rotation by n·θ is a rotation by (m - n)·θ, so the score
q_m · k_n depends on the positions only through the offset m - n.

``rope_angles`` and ``apply_rope`` are the core's (``course_lib.attention``, which
``course_lib.model`` uses for ``GPTConfig(pos="rope")``); this module adds the experiments.
The tests compare ``apply_rope`` with an independent complex-number implementation
(multiplying by e^{i m θ}) and check the relative-offset property numerically.
"""

from __future__ import annotations

from typing import Sequence

import torch

# The rotation itself lives in the core (the model uses it too): one home for the formula.
from ..attention import apply_rope, rope_angles

__all__ = ["rope_angles", "apply_rope", "rope_score", "rope_offset_table"]


def rope_score(q: torch.Tensor, k: torch.Tensor, m: int, n: int, base: float = 10000.0) -> float:
    """The dot product of q rotated to position m with k rotated to position n.

    Shapes: q (d,), k (d,). Returns a Python float.
    """
    if q.dim() != 1 or q.shape != k.shape:
        raise ValueError(
            f"rope_score: q and k must be vectors of the same length; got {tuple(q.shape)}, "
            f"{tuple(k.shape)}."
        )
    qm = apply_rope(q[None], [m], base)[0]  # (d,)
    kn = apply_rope(k[None], [n], base)[0]  # (d,)
    return float(qm @ kn)


def rope_offset_table(
    q: torch.Tensor,
    k: torch.Tensor,
    starts: Sequence[int],
    offsets: Sequence[int],
    base: float = 10000.0,
) -> torch.Tensor:
    """Scores of q at position n + offset against k at position n, for several n.

    Returns (len(starts), len(offsets)) float64: row r holds the scores for key position
    starts[r]. RoPE makes every row identical: only the offset matters.
    """
    table = torch.zeros(len(starts), len(offsets), dtype=torch.float64)
    for r, n in enumerate(starts):
        for c, off in enumerate(offsets):
            table[r, c] = rope_score(q, k, n + off, n, base)
    return table
