"""course_lib.attention against PyTorch's own implementations, on random inputs."""

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from course_lib.attention import (
    LearnedPositionalEmbedding,
    MultiHeadAttention,
    causal_mask,
    merge_heads,
    padding_mask,
    scaled_dot_product_attention,
    sinusoidal_positions,
    softmax,
    split_heads,
)


@pytest.fixture
def gen():
    return torch.Generator().manual_seed(1234)


def test_softmax_matches_torch_and_sums_to_one(gen):
    x = torch.randn(4, 7, 9, generator=gen, dtype=torch.float64)
    for dim in (0, 1, -1):
        s = softmax(x, dim=dim)
        torch.testing.assert_close(s, F.softmax(x, dim=dim))
        torch.testing.assert_close(s.sum(dim), torch.ones_like(s.sum(dim)))


def test_softmax_is_stable_for_huge_logits():
    x = torch.tensor([[1000.0, 999.0, -1000.0], [-1000.0, -1000.0, -1000.0]])
    s = softmax(x)
    assert torch.isfinite(s).all()
    torch.testing.assert_close(s, F.softmax(x, dim=-1))


def test_softmax_all_masked_row_is_a_clear_error():
    x = torch.tensor([[0.0, 1.0], [float("-inf"), float("-inf")]])
    with pytest.raises(ValueError, match="masked"):
        softmax(x)


@pytest.mark.parametrize("shape", [(5, 8), (2, 5, 8), (2, 3, 5, 8)])
def test_sdpa_matches_torch_without_mask(gen, shape):
    q, k, v = (torch.randn(*shape, generator=gen, dtype=torch.float64) for _ in range(3))
    out, w = scaled_dot_product_attention(q, k, v)
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v))
    expected_w = F.softmax(q @ k.transpose(-2, -1) / math.sqrt(shape[-1]), dim=-1)
    torch.testing.assert_close(w, expected_w)


def test_sdpa_different_lengths_and_value_width(gen):
    q = torch.randn(2, 4, 6, generator=gen, dtype=torch.float64)
    k = torch.randn(2, 7, 6, generator=gen, dtype=torch.float64)
    v = torch.randn(2, 7, 3, generator=gen, dtype=torch.float64)
    out, w = scaled_dot_product_attention(q, k, v)
    assert out.shape == (2, 4, 3) and w.shape == (2, 4, 7)
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v))


def test_sdpa_causal_matches_torch(gen):
    q, k, v = (torch.randn(2, 3, 6, 4, generator=gen, dtype=torch.float64) for _ in range(3))
    out, w = scaled_dot_product_attention(q, k, v, causal_mask(6))
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v, is_causal=True))
    assert torch.all(w.triu(1) == 0), "no weight may fall on future positions"
    torch.testing.assert_close(w.sum(-1), torch.ones(2, 3, 6, dtype=torch.float64))


def test_sdpa_padding_mask_matches_torch(gen):
    B, H, T, d = 3, 2, 5, 4
    q, k, v = (torch.randn(B, H, T, d, generator=gen, dtype=torch.float64) for _ in range(3))
    lengths = torch.tensor([5, 3, 1])
    mask = padding_mask(lengths, max_len=T)[:, None]  # (B, 1, 1, T)
    out, w = scaled_dot_product_attention(q, k, v, mask)
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v, attn_mask=mask))
    assert torch.all(w[1, :, :, 3:] == 0) and torch.all(w[2, :, :, 1:] == 0)


def test_sdpa_fully_masked_row_is_a_clear_error(gen):
    q, k, v = (torch.randn(3, 4, generator=gen) for _ in range(3))
    mask = torch.ones(3, 3, dtype=torch.bool)
    mask[1] = False
    with pytest.raises(ValueError, match="every key masked"):
        scaled_dot_product_attention(q, k, v, mask)


@pytest.mark.parametrize(
    "q_shape,k_shape,v_shape,match",
    [
        ((3, 4), (3, 5), (3, 4), "same last dimension"),
        ((3, 4), (3, 4), (2, 4), "one value"),
        ((4,), (4,), (4,), "at least 2 dimensions"),
    ],
)
def test_sdpa_wrong_shapes_are_readable_errors(q_shape, k_shape, v_shape, match):
    with pytest.raises(ValueError, match=match):
        scaled_dot_product_attention(
            torch.zeros(q_shape), torch.zeros(k_shape), torch.zeros(v_shape)
        )


def test_sdpa_mask_errors():
    x = torch.zeros(2, 3, 4)
    with pytest.raises(ValueError, match="boolean"):
        scaled_dot_product_attention(x, x, x, torch.ones(3, 3))
    with pytest.raises(ValueError, match="does not broadcast"):
        scaled_dot_product_attention(x, x, x, torch.ones(4, 4, dtype=torch.bool))


def test_causal_mask():
    m = causal_mask(5)
    assert m.dtype == torch.bool
    assert torch.equal(m, torch.tril(torch.ones(5, 5)).bool())
    with pytest.raises(ValueError):
        causal_mask(0)


def test_padding_mask_from_ids_and_from_lengths_agree():
    ids = torch.tensor([[5, 6, 7, 0, 0], [1, 2, 0, 0, 0]])
    from_ids = padding_mask(ids, pad_id=0)
    from_lengths = padding_mask([3, 2], max_len=5)
    assert from_ids.shape == (2, 1, 5)
    assert torch.equal(from_ids, from_lengths)
    assert from_ids[0, 0].tolist() == [True, True, True, False, False]
    with pytest.raises(ValueError):
        padding_mask(ids)  # ids without pad_id
    with pytest.raises(ValueError):
        padding_mask([3, 9], max_len=5)


def test_split_and_merge_heads_are_inverse(gen):
    x = torch.randn(2, 5, 12, generator=gen)
    h = split_heads(x, 3)
    assert h.shape == (2, 3, 5, 4)
    # head 1 holds features 4..7 of every position
    torch.testing.assert_close(h[:, 1], x[..., 4:8])
    torch.testing.assert_close(merge_heads(h), x)
    with pytest.raises(ValueError, match="divisible"):
        split_heads(x, 5)


def _copy_into_torch_mha(ours: MultiHeadAttention) -> nn.MultiheadAttention:
    ref = nn.MultiheadAttention(ours.d_model, ours.n_heads, batch_first=True, dtype=torch.float64)
    with torch.no_grad():
        ref.in_proj_weight.copy_(torch.cat([ours.W_Q.weight, ours.W_K.weight, ours.W_V.weight]))
        ref.in_proj_bias.copy_(torch.cat([ours.W_Q.bias, ours.W_K.bias, ours.W_V.bias]))
        ref.out_proj.weight.copy_(ours.W_O.weight)
        ref.out_proj.bias.copy_(ours.W_O.bias)
    return ref


@pytest.mark.parametrize("causal", [False, True])
def test_multihead_attention_matches_torch(gen, causal):
    torch.manual_seed(0)
    ours = MultiHeadAttention(d_model=16, n_heads=4, causal=causal).double()
    ref = _copy_into_torch_mha(ours)
    x = torch.randn(3, 6, 16, generator=gen, dtype=torch.float64)
    attn_mask = ~causal_mask(6) if causal else None  # torch: True = blocked
    expected, expected_w = ref(x, x, x, attn_mask=attn_mask, average_attn_weights=False)
    out = ours(x)
    torch.testing.assert_close(out, expected)
    torch.testing.assert_close(ours.attn_weights, expected_w)
    assert ours.attn_weights.shape == (3, 4, 6, 6)


def test_multihead_attention_padding_and_cross_attention(gen):
    torch.manual_seed(1)
    ours = MultiHeadAttention(d_model=8, n_heads=2).double()
    ref = _copy_into_torch_mha(ours)
    x = torch.randn(2, 3, 8, generator=gen, dtype=torch.float64)
    ctx = torch.randn(2, 5, 8, generator=gen, dtype=torch.float64)
    keep = padding_mask([5, 2], max_len=5)[:, 0]  # (B, T_k), True = real token
    expected, _ = ref(x, ctx, ctx, key_padding_mask=~keep)
    torch.testing.assert_close(ours(x, context=ctx, key_padding_mask=keep), expected)
    assert torch.all(ours.attn_weights[1, :, :, 2:] == 0)


def test_multihead_attention_rejects_bad_input():
    with pytest.raises(ValueError, match="divisible"):
        MultiHeadAttention(10, 3)
    with pytest.raises(ValueError, match=r"\(B, T, 8\)"):
        MultiHeadAttention(8, 2)(torch.zeros(2, 3, 7))


def test_multihead_attention_gradients_flow():
    mha = MultiHeadAttention(8, 2, causal=True)
    x = torch.randn(2, 4, 8, requires_grad=True)
    mha(x).sum().backward()
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in mha.parameters())
    # causal: the first output must not depend on later inputs
    x2 = torch.randn(1, 4, 8, requires_grad=True)
    mha(x2)[0, 0].sum().backward()
    assert torch.all(x2.grad[0, 1:] == 0) and x2.grad[0, 0].abs().sum() > 0


def test_sinusoidal_positions_formula():
    T, d = 50, 8
    pe = sinusoidal_positions(T, d)
    assert pe.shape == (T, d) and pe.dtype == torch.float32
    for p in (0, 1, 17, 49):
        for i in range(d // 2):
            angle = p / 10000 ** (2 * i / d)
            assert math.isclose(pe[p, 2 * i].item(), math.sin(angle), abs_tol=1e-6)
            assert math.isclose(pe[p, 2 * i + 1].item(), math.cos(angle), abs_tol=1e-6)
    assert torch.equal(pe[0, 0::2], torch.zeros(d // 2)) and torch.equal(
        pe[0, 1::2], torch.ones(d // 2)
    )
    with pytest.raises(ValueError, match="even"):
        sinusoidal_positions(4, 7)


def test_learned_positional_embedding():
    emb = LearnedPositionalEmbedding(max_len=6, d=4)
    x = torch.zeros(2, 5, 4)
    y = emb(x)
    torch.testing.assert_close(y[0], emb.table.weight[:5])
    torch.testing.assert_close(y[0], y[1])
    y.sum().backward()
    assert emb.table.weight.grad[:5].abs().sum() > 0 and torch.all(emb.table.weight.grad[5] == 0)
    with pytest.raises(ValueError, match="max_len"):
        emb(torch.zeros(1, 7, 4))
