"""The original transformer's recipe (course_lib.labs.original, course_lib.schedule.noam_rate, the
label smoothing and schedules of course_lib.labs.translate.train) against PyTorch: each post-norm
block against nn.TransformerEncoderLayer / nn.TransformerDecoderLayer(norm_first=False,
activation="relu"), the whole body against nn.Transformer, PositionalEncoding against the
paper's formula (a buffer: in the state_dict, not a parameter), the Noam schedule against
LambdaLR running the paper's eq. 3, the smoothed training loss against
F.cross_entropy(label_smoothing=0.1), and the model through Chapter 14's decoders."""

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from course_lib.labs.lm_loss import label_smoothed_cross_entropy
from course_lib.labs.original import (
    OriginalSeq2Seq,
    PositionalEncoding,
    PostNormDecoderBlock,
    PostNormEncoderBlock,
    ReLUMLP,
    ScaledEmbedding,
    torch_reference,
)
from course_lib.labs.seq2seq import BOS, PAD, Seq2Seq, Seq2SeqConfig, number_pairs
from course_lib.labs.translate import TrainSettings, beam_search, greedy_decode, train
from course_lib.schedule import noam_factor, noam_rate

TINY = Seq2SeqConfig(
    src_vocab=9,
    tgt_vocab=11,
    max_src_len=7,
    max_tgt_len=8,
    n_enc_layer=2,
    n_dec_layer=2,
    n_head=2,
    d_model=16,
)


def randomise_(model: nn.Module, seed: int = 0, std: float = 0.3) -> nn.Module:
    """Large random values in every parameter, LayerNorm gains and biases included (so a
    swapped or skipped norm shows), in eval mode."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn(p.shape, generator=g) * std + (1.0 if p.dim() == 1 else 0.0))
    return model.eval()


def padded_src(lengths=(7, 4, 2), seed=1) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(3, TINY.src_vocab, (len(lengths), max(lengths)), generator=g)
    for i, n in enumerate(lengths):
        src[i, n:] = PAD
    return src  # (B, S)


# --------------------------------------------------------------------------- PositionalEncoding
def test_positional_encoding_is_the_papers_formula_in_a_buffer():
    d, n = 8, 12
    pe = PositionalEncoding(d, max_len=n, dropout=0.1)
    want = torch.tensor(
        [
            [
                math.sin(p / 10000 ** (i / d))
                if i % 2 == 0
                else math.cos(p / 10000 ** ((i - 1) / d))
                for i in range(d)
            ]
            for p in range(n)
        ]
    )  # PE[p, 2i] = sin(p / 10000^(2i/d)), PE[p, 2i+1] = cos(...)
    torch.testing.assert_close(pe.pe, want, atol=1e-6, rtol=0)
    assert "pe" in pe.state_dict() and list(pe.parameters()) == []  # saved, never trained
    x = torch.randn(3, 5, d)
    torch.testing.assert_close(pe.eval()(x), x + want[:5])  # eval: no dropout
    with pytest.raises(ValueError, match="max_len"):
        pe(torch.randn(1, n + 1, d))
    assert pe.to(torch.float64).pe.dtype == torch.float64  # a buffer moves with the module


def test_positional_encoding_dropout_in_training_only():
    pe = PositionalEncoding(16, max_len=10, dropout=0.5).train()
    x = torch.randn(64, 10, 16)
    torch.manual_seed(0)
    out = pe(x)  # (64, 10, 16)
    kept = out != 0
    assert 0.4 < kept.float().mean().item() < 0.6  # about half dropped
    # the survivors are scaled by 1 / (1 - p) so the expectation is unchanged
    torch.testing.assert_close(out[kept], ((x + pe.pe) / 0.5)[kept])
    with pytest.raises(ValueError, match="dropout"):
        PositionalEncoding(16, dropout=1.0)


def test_scaled_embedding_multiplies_by_sqrt_d():
    emb = ScaledEmbedding(10, 16)
    ids = torch.tensor([[1, 2, 9]])
    torch.testing.assert_close(emb(ids), F.embedding(ids, emb.weight) * 4.0)
    # drawn with std d^-1/2: the scaled vectors have entries of size about 1
    assert 0.5 < (emb.weight * 4.0).std().item() < 1.5


# --------------------------------------------------------------------------- layers vs PyTorch
def _copy(dst, src):
    dst.weight.copy_(src.weight)
    dst.bias.copy_(src.bias)


@torch.no_grad()
def test_post_norm_encoder_block_equals_torch_layer():
    cfg = TINY.block_config(False, TINY.max_src_len)
    ours = randomise_(PostNormEncoderBlock(cfg))
    theirs = nn.TransformerEncoderLayer(
        16, 2, 64, dropout=0.0, activation="relu", batch_first=True, norm_first=False
    ).eval()
    theirs.self_attn.in_proj_weight.copy_(ours.attn.qkv.weight)
    theirs.self_attn.in_proj_bias.copy_(ours.attn.qkv.bias)
    _copy(theirs.self_attn.out_proj, ours.attn.proj)
    _copy(theirs.linear1, ours.mlp.fc)
    _copy(theirs.linear2, ours.mlp.proj)
    _copy(theirs.norm1, ours.ln1)
    _copy(theirs.norm2, ours.ln2)
    src = padded_src()
    x = torch.randn(*src.shape, 16)
    keep = src != PAD
    got = ours(x, keep[:, None, None, :])  # (3, 7, 16)
    want = theirs(x, src_key_padding_mask=~keep)
    torch.testing.assert_close(got[keep], want[keep], atol=1e-5, rtol=1e-5)
    # the same weights in pre-norm order compute something else: the test sees the order
    pre = PostNormEncoderBlock(cfg, norm="pre")
    pre.load_state_dict(ours.state_dict())
    assert (pre.eval()(x, keep[:, None, None, :]) - got).abs().max() > 0.1  # the order matters


@torch.no_grad()
def test_post_norm_decoder_block_equals_torch_layer():
    cfg = TINY.block_config(True, TINY.max_tgt_len)
    ours = randomise_(PostNormDecoderBlock(cfg), seed=1)
    theirs = nn.TransformerDecoderLayer(
        16, 2, 64, dropout=0.0, activation="relu", batch_first=True, norm_first=False
    ).eval()
    theirs.self_attn.in_proj_weight.copy_(ours.attn.qkv.weight)
    theirs.self_attn.in_proj_bias.copy_(ours.attn.qkv.bias)
    _copy(theirs.self_attn.out_proj, ours.attn.proj)
    theirs.multihead_attn.in_proj_weight.copy_(
        torch.cat([ours.cross.q.weight, ours.cross.kv.weight])
    )
    theirs.multihead_attn.in_proj_bias.copy_(torch.cat([ours.cross.q.bias, ours.cross.kv.bias]))
    _copy(theirs.multihead_attn.out_proj, ours.cross.proj)
    _copy(theirs.linear1, ours.mlp.fc)
    _copy(theirs.linear2, ours.mlp.proj)
    for a, b in ((theirs.norm1, ours.ln1), (theirs.norm2, ours.ln2), (theirs.norm3, ours.ln3)):
        _copy(a, b)
    src = padded_src()
    memory, x = torch.randn(*src.shape, 16), torch.randn(3, 6, 16)
    keep = src != PAD
    got = ours(x, memory, keep)  # (3, 6, 16)
    want = theirs(
        x,
        memory,
        tgt_mask=nn.Transformer.generate_square_subsequent_mask(6),
        tgt_is_causal=True,
        memory_key_padding_mask=~keep,
    )
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)


def test_relu_mlp_is_max_0_then_linear():
    mlp = randomise_(ReLUMLP(8))
    x = torch.randn(4, 8)
    want = torch.clamp(x @ mlp.fc.weight.T + mlp.fc.bias, min=0) @ mlp.proj.weight.T + mlp.proj.bias
    torch.testing.assert_close(mlp(x), want)


@pytest.mark.parametrize("norm", ["post", "pre"])
@torch.no_grad()
def test_whole_body_equals_torch_transformer(norm):
    model = randomise_(OriginalSeq2Seq(TINY, norm=norm), seed=2)
    src = padded_src()
    tgt_in = torch.cat([torch.full((3, 1), BOS), torch.randint(3, TINY.tgt_vocab, (3, 6))], dim=1)
    ref = torch_reference(model)
    assert (ref.encoder.norm is None) == (norm == "post")  # the paper's stack has no final norm
    ours = model.decode(tgt_in, *model.encode(src))  # (3, 7, 16)
    theirs = ref(
        model.src_pos(model.src_emb(src)),
        model.tgt_pos(model.tgt_emb(tgt_in)),
        tgt_mask=nn.Transformer.generate_square_subsequent_mask(7),
        tgt_is_causal=True,
        src_key_padding_mask=src == PAD,
        memory_key_padding_mask=src == PAD,
    )
    torch.testing.assert_close(ours, theirs, atol=1e-4, rtol=1e-4)
    # the inputs: embeddings times sqrt(d) plus the sinusoids
    want_in = F.embedding(src, model.src_emb.weight) * 4.0 + model.src_pos.pe[: src.shape[1]]
    torch.testing.assert_close(model.src_pos(model.src_emb(src)), want_in)


def test_original_model_head_is_tied_and_norm_is_checked():
    model = OriginalSeq2Seq(TINY)
    assert model.head.weight is model.tgt_emb.weight
    assert not any("pe" in n for n, _ in model.named_parameters())
    assert {"src_pos.pe", "tgt_pos.pe"} <= set(model.state_dict())
    with pytest.raises(ValueError, match="norm"):
        OriginalSeq2Seq(TINY, norm="sandwich")


# --------------------------------------------------------------------------- the Noam schedule
def test_noam_rate_equals_lambda_lr_running_the_papers_formula():
    d, warmup = 512, 4000
    opt = torch.optim.Adam([nn.Parameter(torch.zeros(1))], lr=1.0)
    # eq. 3 of the paper, written out here (LambdaLR counts from 0, the paper from 1)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: d**-0.5 * min((s + 1) ** -0.5, (s + 1) * warmup**-1.5)
    )
    for step in range(1, 12_001):
        if step in (1, 2, 1000, 3999, 4000, 4001, 8000, 12_000):
            assert noam_rate(step, d, warmup) == pytest.approx(sched.get_last_lr()[0], rel=1e-12)
        opt.step()
        sched.step()
    # the peak, at the end of warm-up, and the decay by 1 / sqrt(step) after it
    assert noam_rate(4000, d, warmup) == pytest.approx((d * warmup) ** -0.5)
    assert noam_rate(16_000, d, warmup) == pytest.approx(noam_rate(4000, d, warmup) / 2)
    rates = [noam_rate(s, d, warmup) for s in range(1, 10_000)]
    assert max(range(len(rates)), key=rates.__getitem__) + 1 == warmup


def test_noam_factor_and_the_schedule_without_warmup():
    f = noam_factor(3e-3, 64, 50)
    assert noam_rate(50, 64, 50, f) == pytest.approx(3e-3)
    # without warm-up: the peak from step 1, the same decay after warmup_steps
    assert noam_rate(1, 64, 50, f, warm_up=False) == pytest.approx(3e-3)
    assert noam_rate(200, 64, 50, f, warm_up=False) == pytest.approx(noam_rate(200, 64, 50, f))
    assert noam_rate(1, 64, 50, f) == pytest.approx(3e-3 / 50)
    with pytest.raises(ValueError, match="from 1"):
        noam_rate(0, 64, 50)


# --------------------------------------------------------------------------- training with it
@pytest.fixture(scope="module")
def small_data():
    return number_pairs(n_train=200, n_val=20, n_test=20, max_number=1000)


def _cfg(data):
    return Seq2SeqConfig(
        len(data.src_vocab),
        len(data.tgt_vocab),
        data.max_src_len,
        data.max_tgt_len,
        n_enc_layer=1,
        n_dec_layer=1,
        n_head=2,
        d_model=16,
    )


def test_train_uses_label_smoothing_and_the_noam_schedule(small_data):
    settings = TrainSettings(
        steps=6, batch_size=8, warmup=3, schedule="noam", label_smoothing=0.1, eval_every=0
    )
    cfg = _cfg(small_data)
    torch.manual_seed(settings.seed)
    first = OriginalSeq2Seq(cfg)  # the weights train starts from (the same seed)
    model, hist = train(small_data, cfg, settings, build=OriginalSeq2Seq)
    assert isinstance(model, OriginalSeq2Seq)
    f = noam_factor(settings.lr, cfg.d_model, 3)
    assert hist["lr"] == pytest.approx([noam_rate(s, cfg.d_model, 3, f) for s in range(1, 7)])
    # the first batch (train's generator, seed + 1), scored by the untrained model
    src, tgt = small_data.tensors("train")
    idx = torch.randint(len(src), (8,), generator=torch.Generator().manual_seed(1))
    s, t = src[idx], tgt[idx]
    s, t = s[:, : int((s != PAD).sum(1).max())], t[:, : int((t != PAD).sum(1).max())]
    logits = first(s, t[:, :-1])[0].reshape(-1, cfg.tgt_vocab)
    y = t[:, 1:].reshape(-1)
    smoothed = label_smoothed_cross_entropy(logits, y, 0.1, ignore_index=PAD)
    assert hist["train_loss"][0] == pytest.approx(smoothed.item(), rel=1e-5)
    assert hist["train_loss"][0] != pytest.approx(
        F.cross_entropy(logits, y, ignore_index=PAD).item(), rel=1e-4
    )  # the untrained model is near uniform: smoothing changes its loss a little
    with pytest.raises(ValueError, match="schedule"):
        train(small_data, cfg, TrainSettings(steps=1, schedule="linear"))


def test_default_training_is_unchanged_by_the_options(small_data):
    """Chapter 14's run: cosine schedule, no smoothing, Seq2Seq; naming the defaults changes
    nothing, bit for bit."""
    cfg = _cfg(small_data)
    base = TrainSettings(steps=4, batch_size=8, warmup=2, eval_every=0)
    named = TrainSettings(
        steps=4, batch_size=8, warmup=2, eval_every=0, schedule="cosine", label_smoothing=0.0
    )
    a, ha = train(small_data, cfg, base)
    b, hb = train(small_data, cfg, named, build=Seq2Seq)
    assert type(a) is Seq2Seq and ha["train_loss"] == hb["train_loss"]
    for (k, v), w in zip(a.state_dict().items(), b.state_dict().values()):
        assert torch.equal(v, w), k


def test_original_model_decodes_with_chapter_14s_search(small_data):
    cfg = _cfg(small_data)
    model = randomise_(OriginalSeq2Seq(cfg), seed=3)
    src = small_data.tensors("test")[0][:4]
    greedy = greedy_decode(model, src, max_len=5)
    beam, scores = beam_search(model, src, beam_size=1, alpha=0.0, max_len=5)
    assert len(greedy) == 4 and scores.shape == (4,)
    assert all(len(g) <= 5 for g in greedy) and all(len(b) <= 5 for b in beam)
