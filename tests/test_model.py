"""MiniGPT: shapes, causality, the two attention paths, parameter count, initial loss, generation."""
from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from course_lib.attention import MultiHeadAttention
from course_lib.loss import cross_entropy
from course_lib.model import CausalSelfAttention, GPTConfig, MiniGPT, TorchEncoderGPT, flops_per_token

CFG = dict(vocab_size=23, block_size=16, n_layer=2, n_head=4, d_model=32)


def _model(**kw) -> MiniGPT:
    torch.manual_seed(0)
    return MiniGPT(GPTConfig(**{**CFG, **kw}))


def test_fused_and_course_lib_attention_agree_with_gradients():
    fused, scratch = _model(attention="fused"), _model(attention="course_lib")
    scratch.load_state_dict(fused.state_dict())
    idx = torch.randint(23, (3, 16), generator=torch.Generator().manual_seed(1))
    y = torch.randint(23, (3, 16), generator=torch.Generator().manual_seed(2))
    lf, loss_f = fused(idx, y)
    ls, loss_s = scratch(idx, y)
    torch.testing.assert_close(lf, ls, rtol=1e-5, atol=1e-5)
    loss_f.backward()
    loss_s.backward()
    for (n, pf), (_, ps) in zip(fused.named_parameters(), scratch.named_parameters()):
        torch.testing.assert_close(pf.grad, ps.grad, rtol=1e-4, atol=1e-6, msg=n)


def test_attention_matches_course_lib_multihead_attention():
    """The fused-projection layer computes what MultiHeadAttention (chapter 4) computes."""
    cfg = GPTConfig(**CFG)
    torch.manual_seed(0)
    ours, ref = CausalSelfAttention(cfg), MultiHeadAttention(32, 4, causal=True)
    with torch.no_grad():
        wq, wk, wv = ours.qkv.weight.split(32)
        bq, bk, bv = ours.qkv.bias.split(32)
        for lin, w, b in ((ref.W_Q, wq, bq), (ref.W_K, wk, bk), (ref.W_V, wv, bv), (ref.W_O, ours.proj.weight, ours.proj.bias)):
            lin.weight.copy_(w)
            lin.bias.copy_(b)
    x = torch.randn(2, 9, 32)
    out, w = ours(x, need_weights=True)
    torch.testing.assert_close(out, ref(x), rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(w, ref.attn_weights, rtol=1e-5, atol=1e-6)


def test_causality_future_tokens_do_not_change_past_logits():
    model = _model().eval()
    idx = torch.randint(23, (1, 12))
    changed = idx.clone()
    changed[0, 8:] = (changed[0, 8:] + 5) % 23
    torch.testing.assert_close(model(idx)[0][:, :8], model(changed)[0][:, :8])
    assert not torch.allclose(model(idx)[0][:, 8:], model(changed)[0][:, 8:])


def test_loss_equals_course_lib_cross_entropy_and_initial_loss_is_ln_vocab():
    model = _model()
    idx, y = torch.randint(23, (4, 16)), torch.randint(23, (4, 16))
    logits, loss = model(idx, y)
    torch.testing.assert_close(loss, cross_entropy(logits, y))
    # small initial weights -> nearly uniform predictions -> loss close to ln V
    assert abs(loss.item() - math.log(23)) < 0.1


def test_parameter_count_tied_head_and_formula():
    cfg = GPTConfig(**CFG)
    model = MiniGPT(cfg)
    assert model.lm_head.weight is model.tok_emb.weight
    d, V, T, L = cfg.d_model, cfg.vocab_size, cfg.block_size, cfg.n_layer
    per_block = (d * 3 * d + 3 * d) + (d * d + d) + (d * 4 * d + 4 * d) + (4 * d * d + d) + 4 * d
    assert model.num_params() == V * d + T * d + L * per_block + 2 * d
    assert model.num_params() == TorchEncoderGPT(cfg).num_params()
    assert model.num_params(non_embedding=True) == model.num_params() - T * d
    n_matmul = L * 12 * d * d + V * d
    assert flops_per_token(cfg) == 6 * n_matmul + 12 * L * d * T
    # without biases (nanoGPT's default): only the weights and layer-norm gains remain
    no_bias = MiniGPT(GPTConfig(**CFG, bias=False))
    assert not any(n.endswith("bias") for n, _ in no_bias.named_parameters())
    assert no_bias.num_params() == V * d + T * d + L * (12 * d * d + 2 * d) + d


@pytest.mark.parametrize("bias", [True, False])
def test_torch_encoder_reference_computes_the_same_function(bias):
    """Copying MiniGPT's weights into the nn.TransformerEncoderLayer model gives the same logits,
    so the throughput comparison compares two implementations of one architecture."""
    cfg = GPTConfig(**CFG, bias=bias)
    torch.manual_seed(0)
    ours = MiniGPT(cfg).eval()
    ref = TorchEncoderGPT(cfg).eval()
    assert ours.num_params() == ref.num_params()
    with torch.no_grad():
        ref.tok_emb.weight.copy_(ours.tok_emb.weight)
        ref.pos_emb.table.weight.copy_(ours.pos_emb.table.weight)
        ref.ln_f.load_state_dict(ours.ln_f.state_dict())
        for b, layer in zip(ours.blocks, ref.encoder.layers):
            layer.self_attn.in_proj_weight.copy_(b.attn.qkv.weight)
            if bias:
                layer.self_attn.in_proj_bias.copy_(b.attn.qkv.bias)
            layer.self_attn.out_proj.load_state_dict(b.attn.proj.state_dict())
            layer.linear1.load_state_dict(b.mlp.fc.state_dict())
            layer.linear2.load_state_dict(b.mlp.proj.state_dict())
            layer.norm1.load_state_dict(b.ln1.state_dict())
            layer.norm2.load_state_dict(b.ln2.state_dict())
    idx = torch.randint(23, (2, 16))
    torch.testing.assert_close(ours(idx)[0], ref(idx)[0], rtol=1e-4, atol=1e-5)


def test_init_scales_residual_projections():
    model = _model(n_layer=8, d_model=64)
    std = model.blocks[0].mlp.proj.weight.std().item()
    assert std == pytest.approx(0.02 / math.sqrt(16), rel=0.1)
    assert model.blocks[0].mlp.fc.weight.std().item() == pytest.approx(0.02, rel=0.1)


def test_attention_weights_out_are_causal_distributions():
    model = _model()
    _, _, atts = model(torch.randint(23, (2, 10)), return_attention=True)
    assert len(atts) == 2 and atts[0].shape == (2, 4, 10, 10)
    torch.testing.assert_close(atts[1].sum(-1), torch.ones(2, 4, 10))
    assert (atts[0].triu(diagonal=1) == 0).all()


def test_generate_shapes_topk_greedy_and_errors():
    model = _model()
    start = torch.zeros(2, 1, dtype=torch.long)
    out = model.generate(start, 30, generator=torch.Generator().manual_seed(0))
    assert out.shape == (2, 31) and torch.equal(out[:, :1], start)  # longer than block_size: cropped context
    g1 = model.generate(start, 5, temperature=0)
    logits = model(start)[0][:, -1]
    assert torch.equal(g1[:, 1], logits.argmax(-1))
    # top_k=1 is greedy whatever the temperature
    assert torch.equal(model.generate(start, 5, temperature=2.0, top_k=1, generator=torch.Generator().manual_seed(5)), g1)
    a = model.generate(start, 8, top_k=3, generator=torch.Generator().manual_seed(7))
    b = model.generate(start, 8, top_k=3, generator=torch.Generator().manual_seed(7))
    assert torch.equal(a, b)
    top3 = torch.topk(logits, 3).indices
    assert all(int(a[i, 1]) in top3[i].tolist() for i in range(2))
    with pytest.raises(ValueError, match="temperature"):
        model.generate(start, 1, temperature=-1)
    with pytest.raises(ValueError, match="top_k"):
        model.generate(start, 1, top_k=0)


def test_bad_configs_and_inputs_raise_clear_errors():
    with pytest.raises(ValueError, match="divisible"):
        GPTConfig(vocab_size=10, d_model=30, n_head=4)
    with pytest.raises(ValueError, match="attention"):
        GPTConfig(vocab_size=10, attention="flash")
    with pytest.raises(ValueError, match="block_size"):
        _model()(torch.zeros(1, 17, dtype=torch.long))
