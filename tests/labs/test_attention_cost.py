"""Tests for course_lib.labs.attention_cost: sizes against real tensors, the tiled (online-softmax)
attention against torch.nn.functional.scaled_dot_product_attention and autograd, and the
memory measurement against the sizes a score matrix must have."""

import pytest
import torch
import torch.nn.functional as F

from course_lib.labs.attention_cost import (
    best_time,
    format_bytes,
    measure_attention_cost,
    peak_memory,
    score_matrix_bytes,
    score_matrix_table,
    tiled_attention,
)


@pytest.mark.parametrize(
    "T,H,L,B,dtype",
    [(7, 1, 1, 1, torch.float32), (16, 3, 2, 2, torch.float16), (5, 4, 1, 3, torch.float64)],
)
def test_score_matrix_bytes_matches_a_real_tensor(T, H, L, B, dtype):
    scores = torch.empty(L, B, H, T, T, dtype=dtype)
    expected = scores.numel() * scores.element_size()
    assert score_matrix_bytes(T, H, L, B, bytes_per_entry=scores.element_size()) == expected


@pytest.mark.parametrize(
    "bad", [dict(T=0), dict(T=2.5), dict(T=4, n_heads=-1), dict(T=4, bytes_per_entry=0)]
)
def test_score_matrix_bytes_rejects_bad_input(bad):
    with pytest.raises(ValueError, match="positive integer"):
        score_matrix_bytes(**bad)


def test_format_bytes_uses_binary_units():
    assert format_bytes(512) == "512 B"
    assert format_bytes(1536) == "1.5 KiB"
    assert format_bytes(3 * 1024**3) == "3 GiB"
    assert format_bytes(2**45) == "32 TiB"
    with pytest.raises(ValueError, match="negative"):
        format_bytes(-1)


def test_score_matrix_table_rows():
    rows = score_matrix_table([512, 1024], n_heads=4, n_layers=3, bytes_per_entry=2)
    assert [r["T"] for r in rows] == [512, 1024]
    for r in rows:
        assert r["entries"] == r["T"] * r["T"]
        assert r["one_matrix_fp32"] == 4 * r["entries"]
        assert r["whole_model"] == 4 * 3 * 2 * r["entries"]
    # Doubling T quadruples every size: the quadratic cost.
    assert rows[1]["whole_model"] == 4 * rows[0]["whole_model"]


def _rand(*shape, seed=0, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g, dtype=dtype)


@pytest.mark.parametrize("block", [1, 3, 8, 64])
@pytest.mark.parametrize("causal", [False, True])
def test_tiled_attention_matches_torch(block, causal):
    q, k, v = _rand(2, 3, 19, 8, seed=1), _rand(2, 3, 19, 8, seed=2), _rand(2, 3, 19, 5, seed=3)
    ref = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    assert torch.allclose(tiled_attention(q, k, v, block=block, causal=causal), ref, atol=1e-12)


def test_tiled_attention_cross_attention_and_large_scores():
    # T_q != T_k, and scores of several hundred: the online rescaling must not overflow.
    q, k, v = 30 * _rand(1, 4, 8, seed=4), 30 * _rand(1, 11, 8, seed=5), _rand(1, 11, 6, seed=6)
    out = tiled_attention(q, k, v, block=4)
    assert torch.isfinite(out).all()
    assert torch.allclose(out, F.scaled_dot_product_attention(q, k, v), atol=1e-10)


def test_tiled_attention_gradients_match_autograd_of_torch():
    q, k, v = (_rand(1, 2, 9, 4, seed=s).requires_grad_(True) for s in (7, 8, 9))
    g = _rand(1, 2, 9, 4, seed=10)
    (tiled_attention(q, k, v, block=4, causal=True) * g).sum().backward()
    ours = [t.grad.clone() for t in (q, k, v)]
    for t in (q, k, v):
        t.grad = None
    (F.scaled_dot_product_attention(q, k, v, is_causal=True) * g).sum().backward()
    for a, t in zip(ours, (q, k, v)):
        assert torch.allclose(a, t.grad, atol=1e-10)


def test_tiled_attention_rejects_bad_input():
    q = _rand(1, 4, 8)
    with pytest.raises(ValueError, match="block"):
        tiled_attention(q, q, q, block=0)
    with pytest.raises(ValueError, match="T_q == T_k"):
        tiled_attention(q, _rand(1, 5, 8), _rand(1, 5, 8), causal=True)
    with pytest.raises(ValueError, match="same last dimension"):
        tiled_attention(q, _rand(1, 4, 3), q)


def test_peak_memory_sees_the_score_matrix():
    T, H = 256, 2
    q, k, v = (_rand(1, H, T, 16, seed=s, dtype=torch.float32) for s in (1, 2, 3))
    one_matrix = score_matrix_bytes(T, H)
    from course_lib import scaled_dot_product_attention

    assert peak_memory(lambda: torch.empty(1000, dtype=torch.float32)) >= 4000
    # The naive formula must hold at least one full (1, H, T, T) float32 matrix ...
    assert peak_memory(lambda: scaled_dot_product_attention(q, k, v)) >= one_matrix
    # ... the fused kernel holds much less than one.
    assert peak_memory(lambda: F.scaled_dot_product_attention(q, k, v)) < one_matrix / 4


def test_measure_attention_cost_quadratic_vs_linear_memory():
    res = measure_attention_cost([64, 128], n_heads=1, head_dim=8, repeats=1, block=16)
    assert res["T"] == [64, 128]
    assert max(res["max_abs_diff"]) < 1e-5
    assert all(t > 0 for key in ("time_naive", "time_fused", "time_tiled") for t in res[key])
    naive_growth = res["mem_naive"][1] / res["mem_naive"][0]
    fused_growth = res["mem_fused"][1] / res["mem_fused"][0]
    assert 3.5 < naive_growth < 4.5  # doubling T quadruples the score matrix
    assert fused_growth < 2.5
    with pytest.raises(ValueError, match="lengths"):
        measure_attention_cost([0])
    with pytest.raises(ValueError, match="threads"):
        measure_attention_cost([8], threads=0)


def test_best_time_is_positive_and_checks_repeats():
    assert best_time(lambda: sum(range(100)), repeats=2) > 0
    with pytest.raises(ValueError, match="repeats"):
        best_time(lambda: None, repeats=0)
