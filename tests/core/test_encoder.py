"""Encoders (course_lib.encoder) against PyTorch: the bidirectional block is
nn.TransformerEncoderLayer(norm_first=True) without a mask; patches are F.unfold's; the MLM loss
is F.cross_entropy over the chosen positions; the 80/10/10 rule holds in distribution."""

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from course_lib.encoder import (
    IGNORE_INDEX,
    Encoder,
    MaskedLM,
    PatchEmbedding,
    ViT,
    mask_tokens,
    patchify,
)
from course_lib.model import GPTConfig

CFG = GPTConfig(vocab_size=13, block_size=10, n_layer=2, n_head=2, d_model=16)


def torch_layer_from(block) -> nn.TransformerEncoderLayer:
    """nn.TransformerEncoderLayer(norm_first=True, gelu) holding the weights of one course block."""
    layer = nn.TransformerEncoderLayer(
        16, 2, dim_feedforward=64, dropout=0.0, activation="gelu", batch_first=True, norm_first=True
    )
    with torch.no_grad():
        layer.self_attn.in_proj_weight.copy_(block.attn.qkv.weight)
        layer.self_attn.in_proj_bias.copy_(block.attn.qkv.bias)
        layer.self_attn.out_proj.weight.copy_(block.attn.proj.weight)
        layer.self_attn.out_proj.bias.copy_(block.attn.proj.bias)
        layer.linear1.weight.copy_(block.mlp.fc.weight)
        layer.linear1.bias.copy_(block.mlp.fc.bias)
        layer.linear2.weight.copy_(block.mlp.proj.weight)
        layer.linear2.bias.copy_(block.mlp.proj.bias)
        for ours, theirs in ((block.ln1, layer.norm1), (block.ln2, layer.norm2)):
            theirs.weight.copy_(ours.weight)
            theirs.bias.copy_(ours.bias)
    return layer.eval()


def randomise(module, seed=0):
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.randn(p.shape, generator=g) * 0.3)


def test_encoder_block_matches_torch_encoder_layer_without_mask():
    enc = Encoder(CFG)
    randomise(enc)
    x = torch.randn(3, 7, 16)
    want = x
    for block in enc.blocks:
        want = torch_layer_from(block)(want)
    want = F.layer_norm(want, (16,), enc.ln_f.weight, enc.ln_f.bias)
    torch.testing.assert_close(enc(x), want, rtol=1e-4, atol=1e-5)


def test_causal_encoder_matches_torch_with_causal_mask():
    enc = Encoder(CFG, causal=True)
    randomise(enc)
    x = torch.randn(2, 6, 16)
    mask = nn.Transformer.generate_square_subsequent_mask(6)
    want = x
    for block in enc.blocks:
        want = torch_layer_from(block)(want, src_mask=mask, is_causal=True)
    want = F.layer_norm(want, (16,), enc.ln_f.weight, enc.ln_f.bias)
    torch.testing.assert_close(enc(x), want, rtol=1e-4, atol=1e-5)


def test_only_the_encoder_lets_early_positions_see_later_tokens():
    torch.manual_seed(0)
    enc, dec = Encoder(CFG), Encoder(CFG, causal=True)
    randomise(enc)
    dec.load_state_dict(enc.state_dict())  # the same weights; only the mask differs
    x = torch.randn(1, 6, 16)
    x2 = x.clone()
    x2[0, -1] = torch.randn(16)  # change the last token only
    assert (enc(x)[0, 0] - enc(x2)[0, 0]).abs().max() > 1e-3
    torch.testing.assert_close(dec(x)[0, :-1], dec(x2)[0, :-1])
    w_enc, w_dec = enc.attention_maps(x)[0], dec.attention_maps(x)[0]  # (1, n_head, 6, 6)
    torch.testing.assert_close(w_enc.sum(-1), torch.ones(1, 2, 6))
    upper = torch.ones(6, 6, dtype=torch.bool).triu(1)  # key after query
    assert float(w_dec[..., upper].abs().max()) == 0.0 and float(w_enc[..., upper].min()) > 0.0


def test_patchify_matches_unfold():
    images = torch.randn(4, 3, 8, 8)
    for p in (1, 2, 4):
        want = F.unfold(images, kernel_size=p, stride=p).transpose(1, 2)  # (B, N, C p p)
        torch.testing.assert_close(patchify(images, p), want)
    torch.testing.assert_close(
        patchify(images[:, 0], 2), F.unfold(images[:, :1], 2, stride=2).transpose(1, 2)
    )
    with pytest.raises(ValueError, match="divide"):
        patchify(images, 3)


def test_patch_embedding_is_a_strided_convolution():
    emb = PatchEmbedding(2, 4, 16)
    images = torch.randn(3, 8, 8)
    # (B, d, 4, 4)
    conv = F.conv2d(images[:, None], emb.proj.weight.view(16, 1, 2, 2), emb.proj.bias, stride=2)
    torch.testing.assert_close(emb(images), conv.flatten(2).transpose(1, 2), rtol=1e-5, atol=1e-6)


def test_vit_shapes_and_cls_attention():
    vit = ViT(image_size=8, patch=2, n_layer=2, n_head=4, d_model=32, n_classes=10)
    images = torch.rand(5, 8, 8)
    assert vit(images).shape == (5, 10)
    maps = vit.attention_maps(images)
    assert len(maps) == 2 and maps[0].shape == (5, 4, 17, 17)
    torch.testing.assert_close(maps[-1].sum(-1), torch.ones(5, 4, 17))
    # the logits are read from the CLS position only: changing the head's input elsewhere does
    # nothing
    h = vit.encoder(vit.tokens(images))
    torch.testing.assert_close(vit(images), vit.head(h[:, 0]))


def test_mask_tokens_follows_the_80_10_10_rule():
    V, mask_id = 50, 50
    ids = torch.randint(V, (400, 500))
    inputs, targets = mask_tokens(ids, mask_id, V, generator=torch.Generator().manual_seed(0))
    chosen = targets != IGNORE_INDEX
    assert torch.equal(targets[chosen], ids[chosen])
    assert torch.equal(inputs[~chosen], ids[~chosen])  # unchosen positions are untouched
    n = chosen.sum().item()
    assert abs(n / ids.numel() - 0.15) < 0.005
    masked = (inputs[chosen] == mask_id).float().mean().item()
    # 10 % kept + 10 % x (1/V) random hits
    kept = (inputs[chosen] == ids[chosen]).float().mean().item()
    assert abs(masked - 0.8) < 0.01
    assert abs(kept - (0.1 + 0.1 / V)) < 0.01
    assert inputs.max().item() <= mask_id


def test_mask_tokens_rejects_bad_input():
    with pytest.raises(ValueError, match="int64"):
        mask_tokens(torch.zeros(3, 4), 5, 5)
    with pytest.raises(ValueError, match="mask_prob"):
        mask_tokens(torch.zeros(3, 4, dtype=torch.long), 5, 5, mask_prob=0.0)


def test_mlm_loss_reads_only_the_chosen_positions():
    torch.manual_seed(0)
    model = MaskedLM(CFG)
    ids = torch.randint(12, (4, 10))
    inputs, targets = mask_tokens(
        ids, model.mask_id, 12, mask_prob=0.3, generator=torch.Generator().manual_seed(1)
    )
    logits, loss = model(inputs, targets)
    chosen = targets != IGNORE_INDEX
    torch.testing.assert_close(loss, F.cross_entropy(logits[chosen], ids[chosen]))
    assert model.lm_head.weight is model.tok_emb.weight


def test_fill_replaces_only_masks():
    torch.manual_seed(0)
    model = MaskedLM(CFG).eval()
    ids = torch.randint(12, (2, 10))
    ids[:, [2, 5]] = model.mask_id
    out = model.fill(ids)
    keep = ids != model.mask_id
    assert torch.equal(out[keep], ids[keep])
    assert (out[~keep] != model.mask_id).all()
