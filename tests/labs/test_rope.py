"""course_lib.labs.rope and course_lib.labs.positions: rotary and sinusoidal positions, checked
against independent implementations (complex numbers, 2x2 rotation matrices)."""

import pytest
import torch

from course_lib.attention import sinusoidal_positions
from course_lib.labs.positions import (
    position_similarity,
    sinusoidal_frequencies,
    sinusoidal_shift_matrix,
)
from course_lib.labs.rope import apply_rope, rope_angles, rope_offset_table, rope_score
from course_lib.matrices import rotation_matrix


def rope_complex(x, positions, base=10000.0):
    """RoPE as in the RoFormer paper's complex form: pair (a, b) -> (a + ib) e^{i m θ}."""
    d = x.shape[-1]
    theta = base ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    ang = torch.as_tensor(positions, dtype=torch.float64)[:, None] * theta
    z = torch.view_as_complex(x.double().reshape(*x.shape[:-1], d // 2, 2).contiguous())
    out = torch.view_as_real(z * torch.polar(torch.ones_like(ang), ang))
    return out.reshape(x.shape)


def test_apply_rope_matches_complex_multiplication():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(2, 3, 5, 8, generator=g, dtype=torch.float64)  # (B, heads, T, d)
    torch.testing.assert_close(apply_rope(x), rope_complex(x, torch.arange(5)))
    pos = [3, 17, 0, 250, 9]
    torch.testing.assert_close(apply_rope(x, pos), rope_complex(x, pos))


def test_d2_rope_is_the_rotation_matrix():
    v = torch.tensor([[0.3, -1.2]], dtype=torch.float64)
    for m in [0, 1, 7]:
        torch.testing.assert_close(apply_rope(v, [m])[0], rotation_matrix(m * 1.0) @ v[0])


def test_rope_keeps_lengths_and_position_zero():
    g = torch.Generator().manual_seed(1)
    x = torch.randn(6, 16, generator=g, dtype=torch.float64)
    torch.testing.assert_close(apply_rope(x).norm(dim=-1), x.norm(dim=-1))
    torch.testing.assert_close(apply_rope(x, [0] * 6), x)


def test_rope_score_depends_only_on_offset():
    g = torch.Generator().manual_seed(2)
    q, k = (
        torch.randn(16, generator=g, dtype=torch.float64),
        torch.randn(16, generator=g, dtype=torch.float64),
    )
    table = rope_offset_table(q, k, starts=[0, 3, 50, 1000], offsets=[-4, 0, 1, 7, 30])
    torch.testing.assert_close(table, table[:1].expand_as(table))
    assert rope_score(q, k, 0, 0) == pytest.approx(float(q @ k))
    # and absolute additive positions do NOT have this property
    pe = sinusoidal_positions(60, 16).double()
    s1 = float((q + pe[10]) @ (k + pe[5]))
    s2 = float((q + pe[50]) @ (k + pe[45]))
    assert abs(s1 - s2) > 1e-3


def test_rope_bad_input():
    with pytest.raises(ValueError, match="even"):
        apply_rope(torch.zeros(3, 5))
    with pytest.raises(ValueError, match="one position per row"):
        apply_rope(torch.zeros(3, 4), [0, 1])
    with pytest.raises(ValueError, match=r"\(\.\.\., T, d\)"):
        apply_rope(torch.zeros(4))
    with pytest.raises(ValueError):
        rope_angles([0], 4, base=1.0)


def test_position_similarity_is_the_cosine():
    pe = sinusoidal_positions(40, 8).double()
    sims = position_similarity(8, [0, 1, 5, 20], p=13)
    expected = torch.nn.functional.cosine_similarity(pe[13][None], pe[[13, 14, 18, 33]], dim=-1)
    torch.testing.assert_close(sims, expected, atol=1e-6, rtol=0)
    # the sinusoidal dot product depends on the offset only: sum_i cos(k ω_i) / (d/2)
    w = sinusoidal_frequencies(8)
    torch.testing.assert_close(
        sims,
        torch.cos(torch.tensor([0, 1, 5, 20.0], dtype=torch.float64)[:, None] * w).mean(1),
        atol=1e-6,
        rtol=0,
    )


def test_shift_matrix_moves_every_position_by_k():
    pe = sinusoidal_positions(80, 8).double()
    for k in [1, 7]:
        M = sinusoidal_shift_matrix(8, k)
        torch.testing.assert_close(pe[:50] @ M.T, pe[k : 50 + k], atol=1e-6, rtol=0)
        torch.testing.assert_close(M.T @ M, torch.eye(8, dtype=torch.float64))
    with pytest.raises(ValueError, match="even"):
        sinusoidal_frequencies(7)
