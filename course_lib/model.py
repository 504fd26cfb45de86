"""MiniGPT: a decoder-only transformer language model assembled from the course's pieces.

token embedding + positions -> n_layer pre-norm blocks -> final LayerNorm -> tied LM head

Each block is ``x + attn(LN(x))`` then ``x + MLP(LN(x))`` (GPT-2's pre-norm layout). Attention
runs either through ``course_lib.attention.scaled_dot_product_attention`` (the from-scratch
code of the attention chapter, which also gives the weights) or through PyTorch's fused
``F.scaled_dot_product_attention`` (same numbers, less memory, faster); ``tests/core/test_model.py``
checks that the two agree.

GPT-2 itself is ``GPTConfig.gpt2()``: the defaults differ from it only in the GELU (exact here,
the tanh approximation in GPT-2: ``gelu="tanh"``) and in the sizes; ``course_lib.labs.gpt2`` loads
its weights. Options of ``GPTConfig`` beyond GPT-2: ``causal=False`` (bidirectional attention, for
encoders built from these blocks), ``n_kv_heads`` (grouped-query attention: fewer key/value
heads, shared by groups of query heads) and ``pos="rope"`` (rotary embeddings of queries and
keys instead of a learned position table). ``MiniGPT.forward(idx, cache=KVCache)`` runs one
step of generation on top of the cached keys and values of the earlier tokens.

Attention weights: every attention layer returns only its output; a layer whose
``keep_weights`` is True keeps its last weights in ``attn_weights`` (the same mechanism as
``course_lib.attention.MultiHeadAttention``). ``MiniGPT.attention_maps(idx)`` collects them.

Next door: the KV cache and the grouped-query conversion in ``course_lib.kv_cache``;
checkpoints and the course's pretrained model in ``course_lib.checkpoint`` (imported from
there: this module imports neither back). A new
chapter's variant of the model is a module of its own (as ``encoder`` and ``lora`` are), not
another option here.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace

import torch
import torch.nn.functional as F
from torch import nn

from .attention import (
    LearnedPositionalEmbedding,
    apply_rope,
    keep_attention_weights,
    merge_heads,
    scaled_dot_product_attention,
    split_heads,
)
from .generate import generate as _generate
from .kv_cache import KVCache, LayerKV

__all__ = ["GPTConfig", "CausalSelfAttention", "MLP", "Block", "MiniGPT", "flops_per_token"]

ATTENTION_KINDS = ("fused", "course_lib")
POSITION_KINDS = ("learned", "rope")
GELU_KINDS = ("exact", "tanh")


def next_token_loss(logits: torch.Tensor, targets: torch.Tensor | None) -> torch.Tensor | None:
    """Mean cross-entropy of logits (B, T, V) against targets (B, T); None without targets."""
    if targets is None:
        return None
    return F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.reshape(-1))


@dataclass
class GPTConfig:
    """Shape of a MiniGPT. ``attention``: "fused" (F.scaled_dot_product_attention) or
    "course_lib" (the from-scratch attention of the attention chapter).

    ``vocab_size`` may stay None in a training config (the tokenizer decides it); ``with_vocab``
    fills it in, and MiniGPT refuses a config without it.

    ``causal``: True (a decoder: position t sees positions <= t) or False (an encoder: every
    position sees every position). ``n_kv_heads``: number of key/value heads (None = n_head,
    multi-head attention; 1 = multi-query attention; in between = grouped-query attention);
    it must divide n_head. ``pos``: "learned" (a table of block_size position vectors added
    to the tokens, GPT-2) or "rope" (queries and keys rotated by their position, Su et al.
    2021; no table, so no parameters and no hard limit at block_size). ``rope_base``: the
    base of RoPE's frequencies.

    The options that make it GPT-2 (``GPTConfig.gpt2()`` sets them all): ``gelu``, the MLP's
    activation: "exact" (x Φ(x), PyTorch's default) or "tanh" (the tanh approximation GPT-2
    was trained with); ``bias`` (True: biases in every linear layer and LayerNorm, as GPT-2);
    ``ln_eps``, the epsilon under every LayerNorm's square root (1e-5, GPT-2's and PyTorch's);
    ``pos="learned"`` with ``block_size`` 1,024 positions; ``vocab_size`` 50,257 tokens.
    """

    vocab_size: int | None = None
    block_size: int = 64
    n_layer: int = 4
    n_head: int = 4
    d_model: int = 128
    dropout: float = 0.0
    attention: str = "fused"
    bias: bool = True  # biases in the linear layers and layer norms (GPT-2 has them)
    causal: bool = True
    n_kv_heads: int | None = None
    pos: str = "learned"
    rope_base: float = 10000.0
    gelu: str = "exact"
    ln_eps: float = 1e-5

    @classmethod
    def gpt2(cls, **overrides) -> "GPTConfig":
        """GPT-2 small (Radford et al. 2019): 12 layers of width 768 with 12 heads, 1,024
        learned positions, a vocabulary of 50,257 byte-level BPE tokens, biases, tanh GELU,
        LayerNorm epsilon 1e-5. ``overrides`` change any field (the larger GPT-2s:
        n_layer=24, n_head=16, d_model=1024 is GPT-2 medium)."""
        settings = dict(
            vocab_size=50257,
            block_size=1024,
            n_layer=12,
            n_head=12,
            d_model=768,
            bias=True,
            pos="learned",
            gelu="tanh",
            ln_eps=1e-5,
        )
        return cls(**{**settings, **overrides})

    def __post_init__(self):
        for name in ("vocab_size", "block_size", "n_layer", "n_head", "d_model", "n_kv_heads"):
            if name in ("vocab_size", "n_kv_heads") and getattr(self, name) is None:
                continue
            if int(getattr(self, name)) < 1:
                raise ValueError(
                    f"GPTConfig: {name} must be a positive integer; got {getattr(self, name)}."
                )
        if self.d_model % self.n_head:
            raise ValueError(
                f"GPTConfig: d_model={self.d_model} must be divisible by n_head={self.n_head} "
                "(each head gets d_model // n_head dimensions)."
            )
        if self.n_kv_heads is not None and self.n_head % self.n_kv_heads:
            raise ValueError(
                f"GPTConfig: n_kv_heads={self.n_kv_heads} must divide n_head={self.n_head} "
                "(each key/value head serves an equal group of query heads)."
            )
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"GPTConfig: dropout must lie in [0, 1); got {self.dropout}.")
        if self.attention not in ATTENTION_KINDS:
            raise ValueError(
                f"GPTConfig: attention must be one of {ATTENTION_KINDS}; got {self.attention!r}."
            )
        if self.attention == "course_lib" and self.dropout > 0:
            raise ValueError(
                f"GPTConfig: attention='course_lib' has no attention dropout; got dropout="
                f"{self.dropout}. Use attention='fused' to train with dropout, or dropout=0."
            )
        if self.pos not in POSITION_KINDS:
            raise ValueError(f"GPTConfig: pos must be one of {POSITION_KINDS}; got {self.pos!r}.")
        if self.pos == "rope" and (self.d_model // self.n_head) % 2:
            raise ValueError(
                "GPTConfig: pos='rope' rotates pairs of dimensions, so head_dim = d_model // "
                "n_head "
                f"must be even; got {self.d_model // self.n_head}."
            )
        if self.rope_base <= 1:
            raise ValueError(f"GPTConfig: rope_base must be > 1; got {self.rope_base}.")
        if self.gelu not in GELU_KINDS:
            raise ValueError(
                f"GPTConfig: gelu must be one of {GELU_KINDS} ('tanh' is GPT-2's approximation);"
                f" got {self.gelu!r}."
            )
        if not 0.0 < self.ln_eps < 1.0:
            raise ValueError(
                f"GPTConfig: ln_eps (LayerNorm's epsilon) must lie in (0, 1); got {self.ln_eps}."
            )

    @property
    def head_dim(self) -> int:
        return self.d_model // self.n_head

    @property
    def kv_heads(self) -> int:
        """The number of key/value heads (n_kv_heads, or n_head when it is None)."""
        return self.n_head if self.n_kv_heads is None else self.n_kv_heads

    def to_dict(self) -> dict:
        return asdict(self)

    def with_vocab(self, vocab_size: int) -> "GPTConfig":
        """A copy with ``vocab_size`` set (from the tokenizer)."""
        return replace(self, vocab_size=vocab_size)


def _require_vocab(cfg: GPTConfig) -> None:
    if cfg.vocab_size is None:
        raise ValueError(
            "GPTConfig.vocab_size is not set: build the model from "
            "cfg.with_vocab(tokenizer.vocab_size)."
        )


class CausalSelfAttention(nn.Module):
    """Multi-head self-attention with one fused Q/K/V projection; causal unless
    ``cfg.causal`` is False (then every position attends to every position: an encoder).

    One (d, d + 2 n_kv head_dim) matrix product computes the W_Q, W_K, W_V projections of
    ``course_lib.attention.MultiHeadAttention`` with fewer, larger matmuls. With
    ``n_kv_heads`` < n_head (grouped-query attention) there are fewer key/value heads, and
    query head h uses key/value head h // (n_head // n_kv_heads).

    ``forward(x, mask=None, kv=None, positions=None)``: x (B, T, d) -> (B, T, d).
        mask: bool, broadcastable to (B, n_head, T, T_k), True = may attend (e.g. padding
              ``course_lib.attention.padding_mask(ids, pad)[:, None]``); combined with the
              causal mask.
        kv: a ``LayerKV`` holding the earlier tokens' keys and values (T_k = T_past + T);
            the new ones are appended to it.
        positions: (T,) positions of the tokens, needed for pos="rope".
    While ``keep_weights`` is True the weights (B, n_head, T, T_k) of the last call are kept
    in ``attn_weights`` (the from-scratch path computes them).
    """

    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.n_head, self.n_kv, self.d_model, self.kind = (
            cfg.n_head,
            cfg.kv_heads,
            cfg.d_model,
            cfg.attention,
        )
        self.head_dim, self.causal = cfg.head_dim, cfg.causal
        self.rope_base = cfg.rope_base if cfg.pos == "rope" else None
        self.qkv = nn.Linear(
            cfg.d_model, cfg.d_model + 2 * self.n_kv * self.head_dim, bias=cfg.bias
        )
        self.proj = nn.Linear(cfg.d_model, cfg.d_model, bias=cfg.bias)
        self.dropout = cfg.dropout
        self.resid_drop = nn.Dropout(cfg.dropout)
        self.keep_weights = False
        self.attn_weights: torch.Tensor | None = None

    def forward(
        self,
        x: torch.Tensor,
        mask: torch.Tensor | None = None,
        kv: LayerKV | None = None,
        positions: torch.Tensor | None = None,
    ) -> torch.Tensor:
        B, T, d = x.shape
        kv_dim = self.n_kv * self.head_dim
        q, k, v = self.qkv(x).split([d, kv_dim, kv_dim], dim=2)  # (B, T, d), 2 x (B, T, kv_dim)
        q = split_heads(q, self.n_head)  # (B, n_head, T, head_dim)
        k, v = split_heads(k, self.n_kv), split_heads(v, self.n_kv)  # (B, n_kv, T, head_dim)
        if self.rope_base is not None:
            if positions is None:
                positions = torch.arange(T)
            # rotated by position: scores see only offsets
            q = apply_rope(q, positions, self.rope_base)
            k = apply_rope(k, positions, self.rope_base)
        T_past = 0
        if kv is not None:
            T_past = len(kv)
            # (B, n_kv, T_past + T, head_dim): only the new tokens were computed
            k, v = kv.update(k, v)
        if self.n_kv != self.n_head:
            # each key/value head serves n_head // n_kv query heads (Llama's repeat_kv)
            k = k.repeat_interleave(self.n_head // self.n_kv, dim=1)  # (B, n_head, T_k, head_dim)
            v = v.repeat_interleave(self.n_head // self.n_kv, dim=1)
        T_k = k.shape[2]
        allowed = mask
        if self.causal and (
            T_past > 0 or mask is not None or self.kind == "course_lib" or self.keep_weights
        ):
            # query i sits at position T_past + i and may see keys 0 .. T_past + i
            tri = (
                torch.arange(T, device=x.device)[:, None] + T_past
                >= torch.arange(T_k, device=x.device)[None, :]
            )  # (T, T_k)
            allowed = tri if mask is None else tri & mask
        if self.kind == "course_lib" or self.keep_weights:
            if self.training and self.dropout > 0:  # keep_weights on a fused model in training
                raise ValueError(
                    "CausalSelfAttention: the weights are kept by the from-scratch path, which has "
                    "no attention dropout; call model.eval() first."
                )
            # (B, n_head, T, head_dim)
            out, weights = scaled_dot_product_attention(q, k, v, allowed)
            self.attn_weights = weights.detach() if self.keep_weights else None
        else:
            out = F.scaled_dot_product_attention(
                q,
                k,
                v,
                attn_mask=allowed,
                is_causal=self.causal and allowed is None,
                dropout_p=self.dropout if self.training else 0.0,
            )  # (B, n_head, T, head_dim)
        return self.resid_drop(self.proj(merge_heads(out)))  # (B, T, d)


class MLP(nn.Module):
    """Position-wise feed-forward network: d -> 4d -> GELU -> d (``cfg.gelu``: the exact GELU
    or GPT-2's tanh approximation)."""

    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.fc = nn.Linear(cfg.d_model, 4 * cfg.d_model, bias=cfg.bias)
        self.proj = nn.Linear(4 * cfg.d_model, cfg.d_model, bias=cfg.bias)
        self.drop = nn.Dropout(cfg.dropout)
        self.approximate = "tanh" if cfg.gelu == "tanh" else "none"  # F.gelu's names

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = F.gelu(self.fc(x), approximate=self.approximate)  # (B, T, 4d)
        return self.drop(self.proj(h))  # (B, T, d)


class Block(nn.Module):
    """Pre-norm transformer block: x + attn(LN(x)), then x + MLP(LN(x)).

    ``forward(x, mask=None, kv=None, positions=None)``: (B, T, d) -> (B, T, d); the optional
    arguments go to the attention (see ``CausalSelfAttention``). ``GPTConfig(causal=False)``
    makes it an encoder block (bidirectional attention).
    """

    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.ln1 = nn.LayerNorm(cfg.d_model, eps=cfg.ln_eps, bias=cfg.bias)
        self.attn = CausalSelfAttention(cfg)
        self.ln2 = nn.LayerNorm(cfg.d_model, eps=cfg.ln_eps, bias=cfg.bias)
        self.mlp = MLP(cfg)

    def forward(
        self,
        x: torch.Tensor,
        mask: torch.Tensor | None = None,
        kv: LayerKV | None = None,
        positions: torch.Tensor | None = None,
    ) -> torch.Tensor:
        # (B, T, d): the residual stream carries everything forward
        x = x + self.attn(self.ln1(x), mask, kv, positions)
        return x + self.mlp(self.ln2(x))  # (B, T, d)


def gpt_init_(module: nn.Module) -> None:
    """GPT-2's initialisation of one module: N(0, 0.02) weights for linear and embedding
    layers, zero biases (use as ``model.apply(gpt_init_)``)."""
    if isinstance(module, nn.Linear):
        nn.init.normal_(module.weight, mean=0.0, std=0.02)
        if module.bias is not None:
            nn.init.zeros_(module.bias)
    elif isinstance(module, nn.Embedding):
        nn.init.normal_(module.weight, mean=0.0, std=0.02)


def scale_residual_projections_(model: nn.Module, n_layer: int) -> None:
    """GPT-2: re-draw the projections that write into the residual stream (attn.proj, mlp.proj)
    with std 0.02 / sqrt(2 n_layer), so the stream's variance does not grow with depth."""
    for name, p in model.named_parameters():
        if name.endswith("attn.proj.weight") or name.endswith("mlp.proj.weight"):
            nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * n_layer))


class MiniGPT(nn.Module):
    """A GPT-2-style character (or token) language model.

    ``forward(idx, targets=None, cache=None)``:
        idx (B, T) int64; targets (B, T) or None; cache a ``KVCache`` (from ``new_cache()``)
        holding the earlier tokens, or None. The cached and new tokens together must fit in
        block_size.
        returns (logits (B, T, V), loss or None).
    ``attention_maps(idx)``: the n_layer attention weights (B, n_head, T, T).
    ``generate(idx, max_new_tokens, ...)``: see ``course_lib.generate.generate``.
    """

    def __init__(self, cfg: GPTConfig):
        super().__init__()
        _require_vocab(cfg)
        self.cfg = cfg
        self.tok_emb = nn.Embedding(cfg.vocab_size, cfg.d_model)
        self.pos_emb = (
            LearnedPositionalEmbedding(cfg.block_size, cfg.d_model)
            if cfg.pos == "learned"
            else None
        )
        self.drop = nn.Dropout(cfg.dropout)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layer))
        self.ln_f = nn.LayerNorm(cfg.d_model, eps=cfg.ln_eps, bias=cfg.bias)
        self.lm_head = nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)
        # weight tying: one matrix reads and writes tokens
        self.lm_head.weight = self.tok_emb.weight
        self.apply(gpt_init_)
        scale_residual_projections_(self, cfg.n_layer)

    def num_params(self, non_embedding: bool = False) -> int:
        """Number of distinct parameters (the tied head counts once). ``non_embedding`` leaves
        out the position table (and the token table, which the head shares, stays in: it is
        also the output matrix)."""
        n = sum(p.numel() for p in self.parameters())
        if non_embedding and self.pos_emb is not None:
            n -= self.pos_emb.table.weight.numel()
        return n

    def new_cache(self) -> KVCache:
        """An empty KV cache for ``forward(..., cache=...)`` (one slot per layer)."""
        return KVCache(self.cfg.n_layer)

    def forward(
        self, idx: torch.Tensor, targets: torch.Tensor | None = None, cache: KVCache | None = None
    ):
        if idx.dim() != 2:
            raise ValueError(
                f"MiniGPT: idx must be (B, T) token ids; got shape {tuple(idx.shape)}."
            )
        T = idx.shape[1]
        past = 0 if cache is None else len(cache)
        if past + T > self.cfg.block_size:
            raise ValueError(
                f"MiniGPT: sequence length {past + T} ({past} cached + {T} new) exceeds "
                f"block_size={self.cfg.block_size}; crop the context to the last block_size tokens."
            )
        start = 0 if cache is None else cache.pos  # position of idx[:, 0]
        x = self.tok_emb(idx)  # (B, T, d)
        positions = None
        if self.pos_emb is not None:
            x = self.pos_emb(x, start)  # (B, T, d): token vector + position vector
        else:
            # (T,): RoPE rotates q and k inside attention
            positions = torch.arange(start, start + T)
        x = self.drop(x)
        layers = [None] * len(self.blocks) if cache is None else cache.layers
        for block, kv in zip(self.blocks, layers):
            x = block(x, kv=kv, positions=positions)  # (B, T, d)
        if cache is not None:
            cache.pos += T
        logits = self.lm_head(self.ln_f(x))  # (B, T, V)
        return logits, next_token_loss(logits, targets)

    @torch.no_grad()
    def attention_maps(self, idx: torch.Tensor) -> list[torch.Tensor]:
        """The attention weights of every layer for idx (B, T): n_layer x (B, n_head, T, T)."""
        with keep_attention_weights(self):
            self(idx)
        return [block.attn.attn_weights for block in self.blocks]

    @torch.no_grad()
    def generate(self, idx: torch.Tensor, max_new_tokens: int, **options) -> torch.Tensor:
        """Continue idx (B, T) by ``max_new_tokens`` sampled tokens: (B, T + max_new_tokens).

        ``options`` are those of ``course_lib.generate.generate`` (their one home):
        temperature (below 1 sharpens, above 1 flattens; 0 means always the most likely
        token), top_k, top_p, repetition_penalty, generator, and use_cache (default True:
        the keys and values of earlier tokens are reused, the same logits to float rounding
        in a fraction of the time).
        """
        return _generate(self, idx, max_new_tokens, **options)


def flops_per_token(cfg: GPTConfig, n_matmul_params: int | None = None) -> float:
    """Training FLOPs per token (forward + backward) of a MiniGPT, as in Kaplan et al. (2020)
    and PaLM: 6 per weight of every matrix product (2 forward, 4 backward) plus
    12 · n_layer · d_model · T for the attention scores and weighted sums. Elementwise work
    (LayerNorm, GELU, softmax) is not counted, so the model-FLOP utilisation is conservative.
    """
    d, L, V, T = cfg.d_model, cfg.n_layer, cfg.vocab_size, cfg.block_size
    if n_matmul_params is None:
        qkv = d * (d + 2 * cfg.kv_heads * cfg.head_dim)  # 3 d^2 unless grouped-query attention
        n_matmul_params = L * (qkv + d * d + 8 * d * d) + V * d  # blocks + LM head
    return 6.0 * n_matmul_params + 12.0 * L * d * T
