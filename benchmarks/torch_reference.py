"""PyTorch's own transformer layers at MiniGPT's shape: the reference the training benchmarks
compare MiniGPT's throughput with (``train_bench``, ``gpu_bench``). Not course material: a
benchmark's yardstick, so it lives here rather than in ``course_lib.model``."""

from __future__ import annotations

import torch
from torch import nn

from course_lib.attention import LearnedPositionalEmbedding
from course_lib.model import GPTConfig, next_token_loss

__all__ = ["TorchEncoderGPT"]


class TorchEncoderGPT(nn.Module):
    """The same architecture from PyTorch's ``nn.TransformerEncoderLayer(norm_first=True)``
    with a causal mask: the reference for the throughput comparison. Same parameter count as
    MiniGPT (tied head, learned positions, final LayerNorm)."""

    def __init__(self, cfg: GPTConfig):
        super().__init__()
        if cfg.vocab_size is None:
            raise ValueError("TorchEncoderGPT: build it from cfg.with_vocab(vocab_size).")
        self.cfg = cfg
        self.tok_emb = nn.Embedding(cfg.vocab_size, cfg.d_model)
        self.pos_emb = LearnedPositionalEmbedding(cfg.block_size, cfg.d_model)
        layer = nn.TransformerEncoderLayer(
            cfg.d_model,
            cfg.n_head,
            dim_feedforward=4 * cfg.d_model,
            dropout=cfg.dropout,
            activation="gelu",
            batch_first=True,
            norm_first=True,
            bias=cfg.bias,
        )
        self.encoder = nn.TransformerEncoder(layer, cfg.n_layer, enable_nested_tensor=False)
        self.ln_f = nn.LayerNorm(cfg.d_model, bias=cfg.bias)
        self.lm_head = nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)
        self.lm_head.weight = self.tok_emb.weight
        self.register_buffer(
            "mask", nn.Transformer.generate_square_subsequent_mask(cfg.block_size), persistent=False
        )

    def num_params(self) -> int:
        return sum(p.numel() for p in self.parameters())

    def forward(self, idx: torch.Tensor, targets: torch.Tensor | None = None):
        T = idx.shape[1]
        x = self.pos_emb(self.tok_emb(idx))  # (B, T, d)
        x = self.encoder(x, mask=self.mask[:T, :T], is_causal=True)  # (B, T, d)
        logits = self.lm_head(self.ln_f(x))  # (B, T, V)
        return logits, next_token_loss(logits, targets)
