"""MiniGPT: a decoder-only transformer language model assembled from the course's pieces.

token embedding + learned positions -> n_layer pre-norm blocks -> final LayerNorm -> tied LM head

Each block is ``x + attn(LN(x))`` then ``x + MLP(LN(x))`` (GPT-2's pre-norm layout). Attention
runs either through ``course_lib.attention.scaled_dot_product_attention`` (the from-scratch
code of the attention chapter, which also returns the weights) or through PyTorch's fused
``F.scaled_dot_product_attention`` (same numbers, less memory, faster); ``tests/test_model.py``
checks that the two agree.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace

import torch
import torch.nn.functional as F
from torch import nn

from .attention import LearnedPositionalEmbedding, causal_mask, merge_heads, scaled_dot_product_attention, split_heads

__all__ = ["GPTConfig", "CausalSelfAttention", "MLP", "Block", "MiniGPT", "TorchEncoderGPT", "flops_per_token"]

ATTENTION_KINDS = ("fused", "course_lib")


@dataclass
class GPTConfig:
    """Shape of a MiniGPT. ``attention``: "fused" (F.scaled_dot_product_attention) or
    "course_lib" (the from-scratch attention of the attention chapter).

    ``vocab_size`` may stay None in a training config (the tokenizer decides it); ``with_vocab``
    fills it in, and MiniGPT refuses a config without it."""

    vocab_size: int | None = None
    block_size: int = 64
    n_layer: int = 4
    n_head: int = 4
    d_model: int = 128
    dropout: float = 0.0
    attention: str = "fused"
    bias: bool = True  # biases in the linear layers and layer norms (GPT-2 has them)

    def __post_init__(self):
        for name in ("vocab_size", "block_size", "n_layer", "n_head", "d_model"):
            if name == "vocab_size" and self.vocab_size is None:
                continue
            if int(getattr(self, name)) < 1:
                raise ValueError(f"GPTConfig: {name} must be a positive integer; got {getattr(self, name)}.")
        if self.d_model % self.n_head:
            raise ValueError(
                f"GPTConfig: d_model={self.d_model} must be divisible by n_head={self.n_head} "
                "(each head gets d_model // n_head dimensions)."
            )
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"GPTConfig: dropout must lie in [0, 1); got {self.dropout}.")
        if self.attention not in ATTENTION_KINDS:
            raise ValueError(f"GPTConfig: attention must be one of {ATTENTION_KINDS}; got {self.attention!r}.")

    def to_dict(self) -> dict:
        return asdict(self)

    def with_vocab(self, vocab_size: int) -> "GPTConfig":
        """A copy with ``vocab_size`` set (from the tokenizer)."""
        return replace(self, vocab_size=vocab_size)


def _require_vocab(cfg: GPTConfig) -> None:
    if cfg.vocab_size is None:
        raise ValueError("GPTConfig.vocab_size is not set: build the model from cfg.with_vocab(tokenizer.vocab_size).")


class CausalSelfAttention(nn.Module):
    """Multi-head causal self-attention with one fused Q/K/V projection.

    One (d, 3d) matrix product instead of three (d, d) ones computes the same W_Q, W_K, W_V
    projections as ``course_lib.attention.MultiHeadAttention`` with fewer, larger matmuls.
    ``forward(x, need_weights)``: x (B, T, d) -> (B, T, d), and the weights (B, n_head, T, T)
    when ``need_weights`` (always computed by the from-scratch path, which returns them).
    """

    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.n_head, self.d_model, self.kind = cfg.n_head, cfg.d_model, cfg.attention
        self.qkv = nn.Linear(cfg.d_model, 3 * cfg.d_model, bias=cfg.bias)
        self.proj = nn.Linear(cfg.d_model, cfg.d_model, bias=cfg.bias)
        self.dropout = cfg.dropout
        self.resid_drop = nn.Dropout(cfg.dropout)

    def forward(self, x: torch.Tensor, need_weights: bool = False):
        B, T, d = x.shape
        q, k, v = self.qkv(x).split(d, dim=2)  # 3 x (B, T, d)
        q, k, v = (split_heads(t, self.n_head) for t in (q, k, v))  # (B, n_head, T, head_dim)
        weights = None
        if self.kind == "course_lib" or need_weights:
            out, weights = scaled_dot_product_attention(q, k, v, causal_mask(T, device=x.device))  # (B, n_head, T, head_dim)
            if self.training and self.dropout > 0:
                raise ValueError("CausalSelfAttention: attention dropout is only implemented on the fused path.")
        else:
            out = F.scaled_dot_product_attention(
                q, k, v, is_causal=True, dropout_p=self.dropout if self.training else 0.0
            )  # (B, n_head, T, head_dim)
        out = self.resid_drop(self.proj(merge_heads(out)))  # (B, T, d)
        return out, weights


class MLP(nn.Module):
    """Position-wise feed-forward network: d -> 4d -> GELU -> d."""

    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.fc = nn.Linear(cfg.d_model, 4 * cfg.d_model, bias=cfg.bias)
        self.proj = nn.Linear(4 * cfg.d_model, cfg.d_model, bias=cfg.bias)
        self.drop = nn.Dropout(cfg.dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.drop(self.proj(F.gelu(self.fc(x))))  # (B, T, d)


class Block(nn.Module):
    """Pre-norm transformer block: x + attn(LN(x)), then x + MLP(LN(x))."""

    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.ln1 = nn.LayerNorm(cfg.d_model, bias=cfg.bias)
        self.attn = CausalSelfAttention(cfg)
        self.ln2 = nn.LayerNorm(cfg.d_model, bias=cfg.bias)
        self.mlp = MLP(cfg)

    def forward(self, x: torch.Tensor, need_weights: bool = False):
        a, weights = self.attn(self.ln1(x), need_weights)
        x = x + a  # (B, T, d): the residual stream carries everything forward
        x = x + self.mlp(self.ln2(x))  # (B, T, d)
        return x, weights


class MiniGPT(nn.Module):
    """A GPT-2-style character (or token) language model.

    ``forward(idx, targets=None, return_attention=False)``:
        idx (B, T) int64 with T <= block_size; targets (B, T) or None
        returns (logits (B, T, V), loss or None), plus a list of n_layer attention weights
        (B, n_head, T, T) when ``return_attention``.
    """

    def __init__(self, cfg: GPTConfig):
        super().__init__()
        _require_vocab(cfg)
        self.cfg = cfg
        self.tok_emb = nn.Embedding(cfg.vocab_size, cfg.d_model)
        self.pos_emb = LearnedPositionalEmbedding(cfg.block_size, cfg.d_model)
        self.drop = nn.Dropout(cfg.dropout)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layer))
        self.ln_f = nn.LayerNorm(cfg.d_model, bias=cfg.bias)
        self.lm_head = nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)
        self.lm_head.weight = self.tok_emb.weight  # weight tying: one matrix reads and writes tokens
        self.apply(self._init_weights)
        # GPT-2: scale the projections that write into the residual stream by 1/sqrt(2 n_layer),
        # so the stream's variance does not grow with depth at initialisation.
        for name, p in self.named_parameters():
            if name.endswith("attn.proj.weight") or name.endswith("mlp.proj.weight"):
                nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * cfg.n_layer))

    @staticmethod
    def _init_weights(module: nn.Module) -> None:
        if isinstance(module, nn.Linear):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)

    def num_params(self, non_embedding: bool = False) -> int:
        """Number of distinct parameters (the tied head counts once). ``non_embedding`` leaves
        out the position table (and the token table, which the head shares, stays in: it is
        also the output matrix)."""
        n = sum(p.numel() for p in self.parameters())
        if non_embedding:
            n -= self.pos_emb.table.weight.numel()
        return n

    def forward(self, idx: torch.Tensor, targets: torch.Tensor | None = None, return_attention: bool = False):
        if idx.dim() != 2:
            raise ValueError(f"MiniGPT: idx must be (B, T) token ids; got shape {tuple(idx.shape)}.")
        if idx.shape[1] > self.cfg.block_size:
            raise ValueError(
                f"MiniGPT: sequence length {idx.shape[1]} exceeds block_size={self.cfg.block_size}; "
                "crop the context to the last block_size tokens."
            )
        x = self.drop(self.pos_emb(self.tok_emb(idx)))  # (B, T, d)
        attentions = []
        for block in self.blocks:
            x, w = block(x, need_weights=return_attention)  # (B, T, d)
            attentions.append(w)
        logits = self.lm_head(self.ln_f(x))  # (B, T, V)
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.reshape(-1))
        if return_attention:
            return logits, loss, attentions
        return logits, loss

    @torch.no_grad()
    def generate(
        self,
        idx: torch.Tensor,
        max_new_tokens: int,
        temperature: float = 1.0,
        top_k: int | None = None,
        generator: torch.Generator | None = None,
    ) -> torch.Tensor:
        """Continue idx (B, T) by ``max_new_tokens`` sampled tokens; returns (B, T + max_new_tokens).

        temperature divides the logits (below 1 sharpens, above 1 flattens; 0 means always the
        most likely token); top_k keeps only the k most likely tokens before sampling.
        """
        if temperature < 0:
            raise ValueError(f"generate: temperature must be >= 0 (0 = greedy); got {temperature}.")
        if top_k is not None and not 1 <= top_k <= self.cfg.vocab_size:
            raise ValueError(f"generate: top_k must lie in [1, {self.cfg.vocab_size}] or be None; got {top_k}.")
        was_training = self.training
        self.eval()
        for _ in range(max_new_tokens):
            context = idx[:, -self.cfg.block_size:]  # (B, <= block_size)
            logits = self(context)[0][:, -1, :]  # (B, V): the prediction for the next token
            if temperature == 0:
                nxt = logits.argmax(dim=-1, keepdim=True)  # (B, 1)
            else:
                logits = logits / temperature
                if top_k is not None:
                    kth = torch.topk(logits, top_k, dim=-1).values[:, -1:]  # (B, 1)
                    logits = logits.masked_fill(logits < kth, float("-inf"))
                probs = F.softmax(logits, dim=-1)  # (B, V)
                nxt = torch.multinomial(probs, 1, generator=generator)  # (B, 1)
            idx = torch.cat([idx, nxt], dim=1)
        self.train(was_training)
        return idx


def flops_per_token(cfg: GPTConfig, n_matmul_params: int | None = None) -> float:
    """Training FLOPs per token (forward + backward) of a MiniGPT, as in Kaplan et al. (2020)
    and PaLM: 6 per weight of every matrix product (2 forward, 4 backward) plus
    12 · n_layer · d_model · T for the attention scores and weighted sums. Elementwise work
    (LayerNorm, GELU, softmax) is not counted, so the model-FLOP utilisation is conservative.
    """
    d, L, V, T = cfg.d_model, cfg.n_layer, cfg.vocab_size, cfg.block_size
    if n_matmul_params is None:
        n_matmul_params = L * (3 * d * d + d * d + 8 * d * d) + V * d  # blocks + LM head
    return 6.0 * n_matmul_params + 12.0 * L * d * T


class TorchEncoderGPT(nn.Module):
    """The same architecture from PyTorch's ``nn.TransformerEncoderLayer(norm_first=True)``
    with a causal mask: the reference for the throughput comparison. Same parameter count as
    MiniGPT (tied head, learned positions, final LayerNorm)."""

    def __init__(self, cfg: GPTConfig):
        super().__init__()
        _require_vocab(cfg)
        self.cfg = cfg
        self.tok_emb = nn.Embedding(cfg.vocab_size, cfg.d_model)
        self.pos_emb = LearnedPositionalEmbedding(cfg.block_size, cfg.d_model)
        layer = nn.TransformerEncoderLayer(
            cfg.d_model, cfg.n_head, dim_feedforward=4 * cfg.d_model, dropout=cfg.dropout,
            activation="gelu", batch_first=True, norm_first=True, bias=cfg.bias,
        )
        self.encoder = nn.TransformerEncoder(layer, cfg.n_layer, enable_nested_tensor=False)
        self.ln_f = nn.LayerNorm(cfg.d_model, bias=cfg.bias)
        self.lm_head = nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)
        self.lm_head.weight = self.tok_emb.weight
        self.register_buffer("mask", nn.Transformer.generate_square_subsequent_mask(cfg.block_size), persistent=False)

    def num_params(self) -> int:
        return sum(p.numel() for p in self.parameters())

    def forward(self, idx: torch.Tensor, targets: torch.Tensor | None = None):
        T = idx.shape[1]
        x = self.pos_emb(self.tok_emb(idx))  # (B, T, d)
        x = self.encoder(x, mask=self.mask[:T, :T], is_causal=True)  # (B, T, d)
        logits = self.lm_head(self.ln_f(x))  # (B, T, V)
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.reshape(-1))
        return logits, loss
