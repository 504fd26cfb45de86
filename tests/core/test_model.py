"""MiniGPT: shapes, causality, both attention paths, parameter count, initial loss, generation."""

from __future__ import annotations

import math
import sys

import pytest
import torch
import torch.nn.functional as F

from course_lib.attention import MultiHeadAttention
from course_lib.labs.loss import cross_entropy
from course_lib.model import CausalSelfAttention, GPTConfig, MiniGPT, flops_per_token
from tools import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))
from torch_reference import TorchEncoderGPT  # noqa: E402  (the benchmarks' yardstick)

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
        for lin, w, b in (
            (ref.W_Q, wq, bq),
            (ref.W_K, wk, bk),
            (ref.W_V, wv, bv),
            (ref.W_O, ours.proj.weight, ours.proj.bias),
        ):
            lin.weight.copy_(w)
            lin.bias.copy_(b)
    x = torch.randn(2, 9, 32)
    ours.keep_weights = True
    out = ours(x)
    torch.testing.assert_close(out, ref(x), rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(ours.attn_weights, ref.attn_weights, rtol=1e-5, atol=1e-6)


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
    atts = model.attention_maps(torch.randint(23, (2, 10)))
    assert all(b.attn.keep_weights is False for b in model.blocks)  # the flags are restored
    assert len(atts) == 2 and atts[0].shape == (2, 4, 10, 10)
    torch.testing.assert_close(atts[1].sum(-1), torch.ones(2, 4, 10))
    assert (atts[0].triu(diagonal=1) == 0).all()


def test_generate_shapes_topk_greedy_and_errors():
    model = _model()
    start = torch.zeros(2, 1, dtype=torch.long)
    out = model.generate(start, 30, generator=torch.Generator().manual_seed(0))
    # longer than block_size: cropped context
    assert out.shape == (2, 31) and torch.equal(out[:, :1], start)
    g1 = model.generate(start, 5, temperature=0)
    logits = model(start)[0][:, -1]
    assert torch.equal(g1[:, 1], logits.argmax(-1))
    # top_k=1 is greedy whatever the temperature
    assert torch.equal(
        model.generate(
            start, 5, temperature=2.0, top_k=1, generator=torch.Generator().manual_seed(5)
        ),
        g1,
    )
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


# -- encoder option, grouped-query attention, RoPE, KV cache ------------------------------------


def test_bidirectional_block_sees_later_tokens_causal_does_not():
    """causal=False (an encoder): the output at position 0 depends on later tokens."""
    x = torch.randn(2, 7, 32, generator=torch.Generator().manual_seed(3))
    changed = x.clone()
    changed[:, 4:] = torch.randn(2, 3, 32, generator=torch.Generator().manual_seed(4))
    from course_lib.model import Block

    for causal in (True, False):
        torch.manual_seed(0)
        block = Block(GPTConfig(**CFG, causal=causal)).eval()
        same = torch.allclose(block(x)[:, 0], block(changed)[:, 0], atol=1e-6)
        assert same == causal


@pytest.mark.parametrize("kind", ["fused", "course_lib"])
def test_bidirectional_attention_matches_torch_multihead_attention(kind):
    cfg = GPTConfig(**CFG, causal=False, attention=kind)
    torch.manual_seed(0)
    ours = CausalSelfAttention(cfg)
    ref = torch.nn.MultiheadAttention(32, 4, batch_first=True)
    with torch.no_grad():
        ref.in_proj_weight.copy_(ours.qkv.weight)
        ref.in_proj_bias.copy_(ours.qkv.bias)
        ref.out_proj.load_state_dict(ours.proj.state_dict())
    x = torch.randn(2, 9, 32)
    # (B, T_k): padding in the second row
    keep = torch.tensor([[True] * 9, [True] * 5 + [False] * 4])
    torch.testing.assert_close(
        ours(x, mask=keep[:, None, None, :])[:, :5],
        ref(x, x, x, key_padding_mask=~keep)[0][:, :5],
        rtol=1e-5,
        atol=1e-6,
    )
    torch.testing.assert_close(ours(x), ref(x, x, x, need_weights=False)[0], rtol=1e-5, atol=1e-6)


def _gqa_as_mha(gqa: MiniGPT) -> MiniGPT:
    """The multi-head model that computes what the grouped-query model computes: every query
    head gets its own copy of its group's key/value projection."""
    cfg = gqa.cfg
    mha = MiniGPT(GPTConfig(**{**cfg.to_dict(), "n_kv_heads": None}))
    state = gqa.state_dict()
    d, hd, H, Hkv = cfg.d_model, cfg.head_dim, cfg.n_head, cfg.kv_heads

    def rep(t):  # (Hkv hd, ...) -> (H hd, ...): each key/value head copied for its query heads
        shape = t.shape[1:]
        return t.reshape(Hkv, hd, *shape).repeat_interleave(H // Hkv, dim=0).reshape(H * hd, *shape)

    for i in range(cfg.n_layer):
        for kind in ("weight", "bias"):
            key = f"blocks.{i}.attn.qkv.{kind}"
            if key not in state:
                continue
            w = state[key]
            q, k, v = w[:d], w[d : d + Hkv * hd], w[d + Hkv * hd :]
            state[key] = torch.cat([q, rep(k), rep(v)])
    mha.load_state_dict(state)
    return mha


@pytest.mark.parametrize("n_kv", [1, 2])
@pytest.mark.parametrize("kind", ["fused", "course_lib"])
def test_grouped_query_attention_equals_mha_with_shared_key_value_heads(n_kv, kind):
    gqa = _model(n_kv_heads=n_kv, attention=kind).eval()
    assert gqa.blocks[0].attn.qkv.weight.shape == (32 + 2 * n_kv * 8, 32)
    idx = torch.randint(23, (2, 12))
    torch.testing.assert_close(gqa(idx)[0], _gqa_as_mha(gqa).eval()(idx)[0], rtol=1e-5, atol=1e-5)


def test_n_kv_heads_equal_to_n_head_is_multi_head_attention():
    mha, same = _model(), _model(n_kv_heads=4)
    same.load_state_dict(mha.state_dict())  # same parameter shapes and names
    idx = torch.randint(23, (2, 12))
    torch.testing.assert_close(mha(idx)[0], same(idx)[0])
    assert flops_per_token(mha.cfg) == flops_per_token(same.cfg)
    small = GPTConfig(**CFG, n_kv_heads=1)
    d, L = 32, 2
    assert flops_per_token(small) == flops_per_token(mha.cfg) - 6 * L * d * 2 * (d - 8)


def test_rope_model_scores_depend_only_on_offsets():
    """With pos='rope' shifting every position by the same amount changes no logit."""
    model = _model(pos="rope").eval()
    assert model.pos_emb is None
    idx = torch.randint(23, (2, 10))
    cache = model.new_cache()
    cache.pos = 37  # pretend 37 tokens came (and left) before: positions 37..46
    torch.testing.assert_close(model(idx)[0], model(idx, cache=cache)[0], rtol=1e-5, atol=1e-5)
    learned = _model().eval()
    cache = learned.new_cache()
    cache.pos = 3
    assert not torch.allclose(learned(idx)[0], learned(idx, cache=cache)[0], atol=1e-4)


def test_rope_attention_matches_rotated_reference():
    """The model's RoPE path = rotate q and k with course_lib.labs.rope.apply_rope, then attend."""
    from course_lib.labs.rope import apply_rope

    cfg = GPTConfig(**CFG, pos="rope")
    torch.manual_seed(0)
    attn = CausalSelfAttention(cfg)
    x = torch.randn(2, 9, 32)
    q, k, v = attn.qkv(x).split(32, dim=2)

    def heads(t):
        return t.view(2, 9, 4, 8).transpose(1, 2)  # (B, H, T, hd)

    q, k = apply_rope(heads(q)), apply_rope(heads(k))
    out = (
        F.scaled_dot_product_attention(q, k, heads(v), is_causal=True)
        .transpose(1, 2)
        .reshape(2, 9, 32)
    )
    torch.testing.assert_close(attn(x), attn.proj(out), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(
    "kw",
    [
        {},
        {"pos": "rope"},
        {"n_kv_heads": 2},
        {"attention": "course_lib"},
        {"pos": "rope", "n_kv_heads": 1},
    ],
)
def test_kv_cache_forward_equals_full_forward_token_by_token(kw):
    model = _model(**kw).eval()
    idx = torch.randint(23, (2, 16))
    full = model(idx)[0]  # (2, 16, V)
    cache = model.new_cache()
    pieces = [model(idx[:, :5], cache=cache)[0]]  # a 5-token prompt, then one token at a time
    for t in range(5, 16):
        pieces.append(model(idx[:, t : t + 1], cache=cache)[0])
    torch.testing.assert_close(torch.cat(pieces, dim=1), full, rtol=1e-5, atol=1e-5)
    assert len(cache) == 16 and cache.pos == 16
    hd, n_kv = 8, model.cfg.kv_heads
    # layers x (k, v) x B x n_kv x hd x bytes x T
    assert cache.nbytes() == 2 * 2 * n_kv * hd * 4 * 16 * 2
    with pytest.raises(ValueError, match="block_size"):
        model(idx[:, :1], cache=cache)


def test_kv_cache_bytes_formula():
    from course_lib.kv_cache import kv_cache_bytes

    model = _model(n_kv_heads=2).eval()
    cache = model.new_cache()
    model(torch.randint(23, (3, 11)), cache=cache)
    assert cache.nbytes() == kv_cache_bytes(2, 2, 8, tokens=11, batch=3)
    with pytest.raises(ValueError, match="n_kv_heads"):
        kv_cache_bytes(2, 0, 8)


@pytest.mark.parametrize(
    "bad, words",
    [
        ({"d_model": 30, "n_head": 4}, "divisible"),
        ({"n_head": 0}, "n_head"),
        ({"n_layer": 0}, "n_layer"),
        ({"block_size": -1}, "block_size"),
        ({"vocab_size": 0}, "vocab_size"),
        ({"n_kv_heads": 3}, "n_kv_heads"),
        ({"dropout": 1.0}, "dropout"),
        ({"attention": "flash"}, "attention"),
        ({"attention": "course_lib", "dropout": 0.1}, "no attention dropout"),
        ({"pos": "alibi"}, "pos"),
        ({"pos": "rope", "d_model": 12, "n_head": 4}, "even"),
        ({"pos": "rope", "rope_base": 1.0}, "rope_base"),
    ],
)
def test_bad_attention_configs_fail_at_construction_not_in_forward(bad, words):
    with pytest.raises(ValueError, match=words) as err:
        GPTConfig(**{**CFG, **bad})
    assert str(err.value).startswith("GPTConfig: ")


def test_attention_weights_of_a_training_model_with_dropout_ask_for_eval():
    model = _model(dropout=0.1)  # fused attention: dropout is fine while training
    model(torch.zeros(1, 4, dtype=torch.long))
    with pytest.raises(ValueError, match="eval"):
        model.attention_maps(torch.zeros(1, 4, dtype=torch.long))
    assert len(model.eval().attention_maps(torch.zeros(1, 4, dtype=torch.long))) == 2


def test_new_config_options_reject_bad_values():
    with pytest.raises(ValueError, match="n_kv_heads"):
        GPTConfig(**CFG, n_kv_heads=3)
    with pytest.raises(ValueError, match="pos"):
        GPTConfig(**CFG, pos="alibi")
    with pytest.raises(ValueError, match="even"):
        GPTConfig(vocab_size=10, d_model=12, n_head=4, pos="rope")


def test_to_grouped_query_mean_pools_key_value_heads():
    from course_lib.kv_cache import to_grouped_query

    mha = _model().eval()
    idx = torch.randint(23, (2, 12))
    torch.testing.assert_close(to_grouped_query(mha, 4)(idx)[0], mha(idx)[0])
    gqa = to_grouped_query(mha, 2)
    # (96, 32), (64, 32)
    w_old, w_new = mha.blocks[1].attn.qkv.weight, gqa.blocks[1].attn.qkv.weight
    assert w_new.shape == (32 + 2 * 2 * 8, 32)
    torch.testing.assert_close(w_new[:32], w_old[:32])  # queries untouched
    k_old = w_old[32:64].reshape(4, 8, 32)  # (head, hd, d)
    torch.testing.assert_close(
        w_new[32:48], torch.cat([(k_old[0] + k_old[1]) / 2, (k_old[2] + k_old[3]) / 2])
    )
    with pytest.raises(ValueError, match="divide"):
        to_grouped_query(mha, 3)


def test_pretrained_checkpoint_checksum_and_validation_loss():
    """The shipped checkpoint: its sha256 matches the recorded one, and its loss on held-out
    windows is near the validation loss recorded when it was trained."""
    import hashlib

    from course_lib.checkpoint import PRETRAINED, load_pretrained, load_pretrained_info
    from course_lib.data import shakespeare_splits

    path = PRETRAINED["chapter"]
    recorded = path.with_suffix(".sha256").read_text().split()[0]
    assert hashlib.sha256(path.read_bytes()).hexdigest() == recorded
    readme = (path.parent / "README.md").read_text()
    assert recorded in readme  # the README states the same checksum
    model, tok = load_pretrained()
    info = load_pretrained_info()
    assert not model.training and tok.vocab_size == model.cfg.vocab_size
    val = shakespeare_splits(info["config"]["val_fraction"]).val
    T = model.cfg.block_size
    starts = torch.randint(
        len(val) - T - 1, (16,), generator=torch.Generator().manual_seed(0)
    ).tolist()
    x = torch.stack([val[s : s + T] for s in starts])  # (16, T)
    y = torch.stack([val[s + 1 : s + 1 + T] for s in starts])
    with torch.no_grad():
        loss = model(x, y)[1].item()
    assert abs(loss - info["val_loss"]) < 0.15, (loss, info["val_loss"])
    # far better than uniform: trained weights loaded
    assert loss < math.log(model.cfg.vocab_size) - 2


def test_load_pretrained_rejects_a_damaged_file(tmp_path, monkeypatch):
    from course_lib import checkpoint as model_module  # their home (model re-exports them)

    bad = tmp_path / "chapter.pt"
    bad.write_bytes(b"version https://git-lfs.github.com/spec/v1\n")
    (tmp_path / "chapter.sha256").write_text(
        model_module._sha256(model_module.PRETRAINED["chapter"]) + "\n"
    )
    monkeypatch.setitem(model_module.PRETRAINED, "chapter", bad)
    with pytest.raises(ValueError, match="sha256"):
        model_module.load_pretrained()
    with pytest.raises(ValueError, match="unknown model"):
        model_module.load_pretrained("huge")
