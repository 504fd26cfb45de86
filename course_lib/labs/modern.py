"""Modern blocks (Chapter 15): the pieces that replaced GPT-2's in today's language models,
each a module of its own, and ``ModernGPT`` assembled from them.

- ``RMSNorm`` (Zhang & Sennrich 2019): LayerNorm without the mean and the bias;
- ``SwiGLU`` (Shazeer 2020): a gated feed-forward network, silu(x W_gate) * (x W_up) W_down;
- ``QKNormAttention`` (Henry et al. 2020; Dehghani et al. 2023): causal self-attention whose
  queries and keys are RMS-normalised per head before their dot product;
- ``TopKRouter`` and ``MoE`` (Shazeer et al. 2017; Fedus et al. 2021): a mixture of experts,
  each token sent to its k best feed-forward experts, with the load-balancing loss;
- an untied output head (``ModernConfig.tie_head=False``): the head gets its own matrix.

``ModernConfig`` chooses one of each (``norm``, ``mlp``, ``qk_norm``, ``tie_head``), so an
ablation can switch one change at a time; with every choice at GPT-2's value ``ModernGPT`` is
``MiniGPT`` (the same pieces from ``course_lib.model``, the same initialisation; the tests
check it). Positions stay learned (Chapter 3's table) so the changes here are the only ones.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields

import torch
import torch.nn.functional as F
from torch import nn

from ..attention import LearnedPositionalEmbedding, merge_heads, split_heads
from ..model import MLP, CausalSelfAttention, GPTConfig, gpt_init_, next_token_loss

__all__ = [
    "RMSNorm",
    "SwiGLU",
    "swiglu_hidden",
    "QKNormAttention",
    "TopKRouter",
    "MoE",
    "load_balance_loss",
    "ModernConfig",
    "ModernBlock",
    "ModernGPT",
    "NORMS",
    "MLPS",
]

NORMS = ("layernorm", "rmsnorm")
MLPS = ("gelu", "swiglu", "moe")


class RMSNorm(nn.Module):
    """Root-mean-square normalisation: x / sqrt(mean(x²) + eps) * g, over the last dimension.

    Unlike LayerNorm it neither subtracts the mean nor adds a bias: one reduction instead of
    two, and (Zhang & Sennrich 2019) the same quality. x (..., d) -> (..., d).
    """

    def __init__(self, d: int, eps: float = 1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d))  # the gain g, one per feature

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rms = x.pow(2).mean(dim=-1, keepdim=True).add(self.eps).rsqrt()  # (..., 1): 1 / RMS
        return x * rms * self.weight  # (..., d)


def swiglu_hidden(d_model: int, multiple: int = 32) -> int:
    """The hidden width that gives SwiGLU's three matrices the parameters of GPT-2's two
    (d -> 4d -> d): 2/3 of 4d, rounded up to a multiple of ``multiple`` (as Llama does)."""
    h = int(8 * d_model / 3)
    return multiple * math.ceil(h / multiple)


class SwiGLU(nn.Module):
    """Gated feed-forward network: (silu(x W_gate) * (x W_up)) W_down. x (..., d) -> (..., d).

    The gate, a smooth 0-to-1 switch per hidden unit computed from the input, multiplies a
    second linear map of the same input (Shazeer 2020, "GLU variants").
    """

    def __init__(self, d_model: int, hidden: int | None = None, bias: bool = False):
        super().__init__()
        hidden = swiglu_hidden(d_model) if hidden is None else hidden
        self.gate = nn.Linear(d_model, hidden, bias=bias)
        self.up = nn.Linear(d_model, hidden, bias=bias)
        self.proj = nn.Linear(hidden, d_model, bias=bias)  # W_down: writes to the residual

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.proj(F.silu(self.gate(x)) * self.up(x))  # (..., d)


class QKNormAttention(nn.Module):
    """Causal multi-head self-attention with RMSNorm on every head's queries and keys.

    Normalised queries and keys have RMS 1 (times a learned gain), so the attention logits
    q·k/√head_dim cannot grow without bound as the weights grow: the softmax cannot saturate,
    which lets training take a higher learning rate. x (B, T, d) -> (B, T, d).
    """

    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.n_head = cfg.n_head
        self.qkv = nn.Linear(cfg.d_model, 3 * cfg.d_model, bias=cfg.bias)
        self.q_norm = RMSNorm(cfg.head_dim)  # one gain per head dimension, shared by heads
        self.k_norm = RMSNorm(cfg.head_dim)
        self.proj = nn.Linear(cfg.d_model, cfg.d_model, bias=cfg.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = self.qkv(x).chunk(3, dim=-1)  # 3 x (B, T, d)
        q = split_heads(self._normed(self.q_norm, q), self.n_head)  # (B, n_head, T, head_dim)
        k = split_heads(self._normed(self.k_norm, k), self.n_head)  # (B, n_head, T, head_dim)
        v = split_heads(v, self.n_head)  # (B, n_head, T, head_dim)
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # (B, n_head, T, hd)
        return self.proj(merge_heads(out))  # (B, T, d)

    def _normed(self, norm: RMSNorm, x: torch.Tensor) -> torch.Tensor:
        """``norm`` over each head's slice of x (B, T, d) -> (B, T, d): the formula of
        ``RMSNorm``, computed by PyTorch's fused kernel on the heads before they are
        transposed (contiguous slices), about a fifth faster than the module on the
        transposed heads; the race times every step. The tests check it against RMSNorm."""
        B, T, d = x.shape
        heads = x.view(B, T, self.n_head, d // self.n_head)  # (B, T, n_head, head_dim)
        out = F.rms_norm(heads, (heads.shape[-1],), norm.weight, norm.eps)
        return out.view(B, T, d)


class TopKRouter(nn.Module):
    """Scores each token against ``n_expert`` experts and keeps the k best.

    ``forward(x)``: x (N, d) -> (weights (N, k), experts (N, k) int64, probs (N, n_expert)).
    ``probs`` is the softmax over all experts (the balance loss needs it). ``weights`` are the
    kept probabilities: as they are for k = 1 (the Switch Transformer's gate, Fedus et al.
    2021), renormalised to sum to 1 per token for k >= 2 (as Mixtral). Renormalising a single
    weight would give p / p = 1, a constant: the language-model loss would then send the router
    no gradient at all, and only the balance loss would train it.
    """

    def __init__(self, d_model: int, n_expert: int, k: int):
        super().__init__()
        if not 1 <= k <= n_expert:
            raise ValueError(
                f"TopKRouter: need 1 <= k <= n_expert; got k={k}, n_expert={n_expert}."
            )
        self.k = k
        self.w = nn.Linear(d_model, n_expert, bias=False)

    def forward(self, x: torch.Tensor):
        probs = self.w(x).softmax(dim=-1)  # (N, n_expert)
        weights, experts = probs.topk(self.k, dim=-1)  # (N, k), (N, k)
        if self.k > 1:  # k = 1 keeps p itself: p / p = 1 would cut the router's gradient
            weights = weights / weights.sum(dim=-1, keepdim=True)  # (N, k): sums to 1
        return weights, experts, probs


def load_balance_loss(probs: torch.Tensor, experts: torch.Tensor) -> torch.Tensor:
    """The Switch Transformer's auxiliary loss (Fedus et al. 2021), for k experts per token:

        n_expert · Σ_i f_i P_i,

    f_i the fraction of the N·k assignments that went to expert i (counted, no gradient),
    P_i the mean router probability of expert i (differentiable). It is 1 when the load is
    uniform and n_expert when every token goes to one expert. probs (N, E), experts (N, k).
    """
    E = probs.shape[-1]
    counts = torch.bincount(experts.reshape(-1), minlength=E).to(probs.dtype)  # (E,)
    f = counts / experts.numel()  # (E,): share of assignments
    P = probs.mean(dim=0)  # (E,)
    return E * (f * P).sum()


class MoE(nn.Module):
    """A mixture-of-experts feed-forward layer: ``n_expert`` SwiGLU experts, each token
    processed by its top-k (``TopKRouter``) and the outputs mixed by the router's weights.

    Parameters grow with n_expert; the work per token only with k (``active_params``).
    After each forward, ``aux_loss`` holds the load-balancing loss of that batch.
    x (B, T, d) -> (B, T, d).
    """

    def __init__(self, d_model: int, n_expert: int = 4, k: int = 1, hidden: int | None = None):
        super().__init__()
        self.router = TopKRouter(d_model, n_expert, k)
        self.experts = nn.ModuleList(SwiGLU(d_model, hidden) for _ in range(n_expert))
        self.aux_loss = torch.zeros(())

    def active_params(self) -> int:
        """Parameters one token's forward pass uses: the router plus k experts."""
        one = sum(p.numel() for p in self.experts[0].parameters())
        return self.router.w.weight.numel() + self.router.k * one

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, d = x.shape
        flat = x.reshape(B * T, d)  # (N, d)
        weights, experts, probs = self.router(flat)  # (N, k), (N, k), (N, E)
        self.aux_loss = load_balance_loss(probs, experts)
        out = torch.zeros_like(flat)  # (N, d)
        for i, expert in enumerate(self.experts):
            token, slot = torch.where(experts == i)  # the (token, choice) pairs sent to i
            if token.numel():
                y = expert(flat[token]) * weights[token, slot, None]  # (n_i, d)
                out.index_add_(0, token, y)
        return out.view(B, T, d)


@dataclass
class ModernConfig(GPTConfig):
    """A ``GPTConfig`` plus the modern choices, one field per change:

    ``norm``: "layernorm" (GPT-2) or "rmsnorm"; ``mlp``: "gelu" (GPT-2), "swiglu" or "moe";
    ``qk_norm``: RMS-normalise queries and keys; ``tie_head``: share the token table with the
    output head (GPT-2) or not; ``n_expert``, ``top_k``: the mixture's size (mlp="moe").
    Attention is PyTorch's fused kernel and causal; positions are learned.
    """

    norm: str = "layernorm"
    mlp: str = "gelu"
    qk_norm: bool = False
    tie_head: bool = True
    n_expert: int = 4
    top_k: int = 1

    def __post_init__(self):
        super().__post_init__()
        if self.norm not in NORMS:
            raise ValueError(f"ModernConfig: norm must be one of {NORMS}; got {self.norm!r}.")
        if self.mlp not in MLPS:
            raise ValueError(f"ModernConfig: mlp must be one of {MLPS}; got {self.mlp!r}.")
        if not 1 <= self.top_k <= self.n_expert:
            raise ValueError(
                f"ModernConfig: need 1 <= top_k <= n_expert; got top_k={self.top_k}, "
                f"n_expert={self.n_expert}."
            )
        if self.pos != "learned" or not self.causal or self.n_kv_heads is not None:
            raise ValueError(
                "ModernConfig: ModernGPT is causal with learned positions and full multi-head "
                "attention; leave pos, causal and n_kv_heads at their defaults."
            )

    @classmethod
    def from_gpt(cls, cfg: GPTConfig, **changes) -> "ModernConfig":
        """A ModernConfig with ``cfg``'s shape and the given changes."""
        base = {f.name: getattr(cfg, f.name) for f in fields(GPTConfig)}
        return cls(**{**base, **changes})


def _norm(cfg: ModernConfig) -> nn.Module:
    return (
        RMSNorm(cfg.d_model) if cfg.norm == "rmsnorm" else nn.LayerNorm(cfg.d_model, bias=cfg.bias)
    )


def _mlp(cfg: ModernConfig) -> nn.Module:
    if cfg.mlp == "swiglu":
        return SwiGLU(cfg.d_model, bias=cfg.bias)
    if cfg.mlp == "moe":
        return MoE(cfg.d_model, cfg.n_expert, cfg.top_k)
    return MLP(cfg)


class ModernBlock(nn.Module):
    """Pre-norm block, x + attn(norm(x)), then x + mlp(norm(x)), with the config's norm,
    attention and feed-forward network. (B, T, d) -> (B, T, d)."""

    def __init__(self, cfg: ModernConfig):
        super().__init__()
        self.ln1 = _norm(cfg)
        self.attn = QKNormAttention(cfg) if cfg.qk_norm else CausalSelfAttention(cfg)
        self.ln2 = _norm(cfg)
        self.mlp = _mlp(cfg)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln1(x))  # (B, T, d)
        return x + self.mlp(self.ln2(x))  # (B, T, d)


class ModernGPT(nn.Module):
    """A decoder-only language model built from ``ModernBlock``s.

    ``forward(idx, targets=None)``: idx (B, T) -> (logits (B, T, V), loss or None); the loss
    is the next-token cross-entropy (without the MoE's balance loss: ``aux_loss()`` returns
    the sum over layers of the last forward's, which the trainer adds with its own weight).
    """

    def __init__(self, cfg: ModernConfig):
        super().__init__()
        if cfg.vocab_size is None:
            raise ValueError("ModernGPT: build it from cfg.with_vocab(tokenizer.vocab_size).")
        self.cfg = cfg
        self.tok_emb = nn.Embedding(cfg.vocab_size, cfg.d_model)
        self.pos_emb = LearnedPositionalEmbedding(cfg.block_size, cfg.d_model)
        self.blocks = nn.ModuleList(ModernBlock(cfg) for _ in range(cfg.n_layer))
        self.ln_f = _norm(cfg)
        self.lm_head = nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)
        if cfg.tie_head:
            self.lm_head.weight = self.tok_emb.weight
        self.apply(gpt_init_)
        # GPT-2: the matrices that write into the residual stream start smaller with depth
        for name, p in self.named_parameters():
            if name.endswith(".proj.weight"):
                nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * cfg.n_layer))

    def num_params(self) -> int:
        """Distinct parameters (a tied head counts once)."""
        return sum(p.numel() for p in self.parameters())

    def aux_loss(self) -> torch.Tensor:
        """Sum of the MoE layers' load-balancing losses of the last forward (0 without MoE)."""
        losses = [b.mlp.aux_loss for b in self.blocks if isinstance(b.mlp, MoE)]
        return torch.stack(losses).sum() if losses else torch.zeros(())

    def forward(self, idx: torch.Tensor, targets: torch.Tensor | None = None):
        if idx.dim() != 2 or idx.shape[1] > self.cfg.block_size:
            raise ValueError(
                f"ModernGPT: idx must be (B, T) token ids with T <= block_size="
                f"{self.cfg.block_size}; got shape {tuple(idx.shape)}."
            )
        x = self.pos_emb(self.tok_emb(idx))  # (B, T, d)
        for block in self.blocks:
            x = block(x)  # (B, T, d)
        logits = self.lm_head(self.ln_f(x))  # (B, T, V)
        return logits, next_token_loss(logits, targets)
