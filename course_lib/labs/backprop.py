"""Backpropagation written out by hand: softmax, attention and LayerNorm, plus the
gradient-flow experiments of Chapter 7.

Each ``*_backward`` function takes the upstream gradient (``dX`` means dLoss/dX, the same
shape as X) and the values cached by the matching forward pass, and returns the gradients of
the inputs. Tests compare every one with autograd, ``torch.autograd.functional.jacobian`` and
finite differences.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn

from ..attention import MultiHeadAttention, softmax

__all__ = [
    "softmax_jacobian",
    "softmax_backward",
    "AttentionCache",
    "attention_forward",
    "attention_backward",
    "LayerNormCache",
    "layer_norm_forward",
    "layer_norm_backward",
    "BLOCK_KINDS",
    "Block",
    "gradient_norms_per_layer",
    "attention_scale_gradients",
]


# --------------------------------------------------------------------------- softmax
def softmax_jacobian(s: torch.Tensor) -> torch.Tensor:
    """Jacobian of the softmax, ds_i/dz_j = s_i (δ_ij - s_j) = (diag(s) - s sᵀ)_ij.

    ``s`` is the softmax *output* (probabilities along the last axis).
    Shapes: s (..., V) -> (..., V, V).
    """
    if s.dim() < 1:
        raise ValueError(
            "softmax_jacobian: s must have a last axis of probabilities; got a scalar."
        )
    return torch.diag_embed(s) - s[..., :, None] * s[..., None, :]  # (..., V, V)


def softmax_backward(s: torch.Tensor, ds: torch.Tensor) -> torch.Tensor:
    """Vector-Jacobian product of the softmax along the last axis: dz = Jᵀ ds.

    Because J is symmetric, Jᵀ ds = s ⊙ (ds - ⟨ds, s⟩): one subtraction instead of a V×V
    matrix. Shapes: s (..., V) softmax outputs, ds (..., V) -> dz (..., V).
    """
    if s.shape != ds.shape:
        raise ValueError(
            f"softmax_backward: s and ds must have the same shape; got {tuple(s.shape)} and "
            f"{tuple(ds.shape)}."
        )
    return s * (ds - (ds * s).sum(dim=-1, keepdim=True))  # (..., V)


# ------------------------------------------------------------------------- attention
@dataclass
class AttentionCache:
    """Forward values kept for the backward pass of scaled dot-product attention."""

    q: torch.Tensor  # (..., T_q, d_k)
    k: torch.Tensor  # (..., T_k, d_k)
    v: torch.Tensor  # (..., T_k, d_v)
    weights: torch.Tensor  # (..., T_q, T_k), A = softmax(S)
    scale: float  # 1/√d_k, or 1.0 when unscaled


def attention_forward(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    mask: torch.Tensor | None = None,
    scaled: bool = True,
) -> tuple[torch.Tensor, AttentionCache]:
    """O = softmax(Q Kᵀ · scale) V, returning O and the cache for ``attention_backward``.

    Shapes: q (..., T_q, d_k), k (..., T_k, d_k), v (..., T_k, d_v); mask bool broadcastable to
    (..., T_q, T_k), True = may attend. Returns O (..., T_q, d_v). ``scaled=False`` drops the
    1/√d_k factor (to show what it is for).
    """
    if q.dim() < 2 or q.shape[-1] != k.shape[-1] or k.shape[-2] != v.shape[-2]:
        raise ValueError(
            "attention_forward: need q (..., T_q, d_k), k (..., T_k, d_k), v (..., T_k, d_v); "
            f"got q={tuple(q.shape)}, k={tuple(k.shape)}, v={tuple(v.shape)}."
        )
    scale = 1.0 / math.sqrt(q.shape[-1]) if scaled else 1.0
    scores = q @ k.transpose(-2, -1) * scale  # (..., T_q, T_k)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = softmax(scores, dim=-1)  # (..., T_q, T_k); masked entries are exactly 0
    out = weights @ v  # (..., T_q, d_v)
    return out, AttentionCache(q, k, v, weights, scale)


def attention_backward(d_out: torch.Tensor, cache: AttentionCache) -> dict[str, torch.Tensor]:
    """Gradients of scaled dot-product attention, one matrix-calculus rule per line.

    Given dO (..., T_q, d_v), returns a dict with
        dV = Aᵀ dO           (..., T_k, d_v)
        dA = dO Vᵀ           (..., T_q, T_k)
        dS = A ⊙ (dA - rowsum(dA ⊙ A))   (..., T_q, T_k)   (softmax backward, row by row)
        dQ = dS K · scale    (..., T_q, d_k)
        dK = dSᵀ Q · scale   (..., T_k, d_k)
    Masked positions have A = 0, so their dS is 0 without any special case.
    """
    A = cache.weights
    if d_out.shape[:-1] != A.shape[:-1] or d_out.shape[-1] != cache.v.shape[-1]:
        raise ValueError(
            f"attention_backward: d_out must have the shape of the output (..., T_q, d_v) = "
            f"{tuple(A.shape[:-1]) + (cache.v.shape[-1],)}; got {tuple(d_out.shape)}."
        )
    dV = A.transpose(-2, -1) @ d_out  # (..., T_k, d_v)
    dA = d_out @ cache.v.transpose(-2, -1)  # (..., T_q, T_k)
    dS = softmax_backward(A, dA)  # (..., T_q, T_k)
    dQ = dS @ cache.k * cache.scale  # (..., T_q, d_k)
    dK = dS.transpose(-2, -1) @ cache.q * cache.scale  # (..., T_k, d_k)
    return {"dQ": dQ, "dK": dK, "dV": dV, "dA": dA, "dS": dS}


# ------------------------------------------------------------------------- LayerNorm
@dataclass
class LayerNormCache:
    """Forward values kept for the backward pass of LayerNorm."""

    x_hat: torch.Tensor  # (..., d) normalised input
    inv_std: torch.Tensor  # (..., 1) 1/sqrt(var + eps)
    gamma: torch.Tensor  # (d,)


def layer_norm_forward(
    x: torch.Tensor, gamma: torch.Tensor, beta: torch.Tensor, eps: float = 1e-5
) -> tuple[torch.Tensor, LayerNormCache]:
    """y = γ ⊙ (x - μ)/√(σ² + ε) + β over the last axis (σ² the biased variance, as in
    ``F.layer_norm``). Shapes: x (..., d), gamma (d,), beta (d,) -> y (..., d)."""
    d = x.shape[-1]
    if gamma.shape != (d,) or beta.shape != (d,):
        raise ValueError(
            f"layer_norm_forward: gamma and beta must have shape ({d},) to match x's last axis; "
            f"got {tuple(gamma.shape)} and {tuple(beta.shape)}."
        )
    mu = x.mean(dim=-1, keepdim=True)  # (..., 1)
    var = ((x - mu) ** 2).mean(dim=-1, keepdim=True)  # (..., 1), biased like F.layer_norm
    inv_std = 1.0 / torch.sqrt(var + eps)  # (..., 1)
    x_hat = (x - mu) * inv_std  # (..., d)
    return gamma * x_hat + beta, LayerNormCache(x_hat, inv_std, gamma)


def layer_norm_backward(
    dy: torch.Tensor, cache: LayerNormCache
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Gradients of LayerNorm: (dx, dgamma, dbeta).

        dx̂ = dy ⊙ γ
        dx = (1/σ) (dx̂ - mean(dx̂) - x̂ ⊙ mean(dx̂ ⊙ x̂))       (means over the last axis)
        dγ = Σ dy ⊙ x̂,  dβ = Σ dy                            (sums over all leading axes)

    dx is dx̂ with its mean and its component along x̂ removed, divided by σ: LayerNorm's
    output does not change when x is shifted or scaled, so neither direction gets gradient.
    Shapes: dy (..., d) -> dx (..., d), dgamma (d,), dbeta (d,).
    """
    if dy.shape != cache.x_hat.shape:
        raise ValueError(
            f"layer_norm_backward: dy must have the input's shape {tuple(cache.x_hat.shape)}; "
            f"got {tuple(dy.shape)}."
        )
    x_hat = cache.x_hat
    dx_hat = dy * cache.gamma  # (..., d)
    dx = cache.inv_std * (
        dx_hat
        - dx_hat.mean(dim=-1, keepdim=True)
        - x_hat * (dx_hat * x_hat).mean(dim=-1, keepdim=True)
    )  # (..., d)
    lead = tuple(range(dy.dim() - 1))
    dgamma = (dy * x_hat).sum(dim=lead)  # (d,)
    dbeta = dy.sum(dim=lead)  # (d,)
    return dx, dgamma, dbeta


# ------------------------------------------------------------------ gradient flow
#: The block variants of the depth experiment.
#:   plain      x = f(x)                          (no residual, no normalisation)
#:   norm       x = LN(f(x))                      (normalisation without a residual)
#:   residual   x = x + f(x)                      (residual without normalisation)
#:   post-norm  x = LN(x + f(x))                  (the original transformer)
#:   pre-norm   x = x + f(LN(x)), final LN        (GPT-2 and most models since)
BLOCK_KINDS = ("plain", "norm", "residual", "post-norm", "pre-norm")


class Block(nn.Module):
    """A transformer block (causal self-attention, then a GELU MLP with 4× expansion),
    wired as one of ``BLOCK_KINDS``. forward: (B, T, d_model) -> (B, T, d_model)."""

    def __init__(self, d_model: int, n_heads: int, kind: str):
        super().__init__()
        if kind not in BLOCK_KINDS:
            raise ValueError(f"Block: kind must be one of {BLOCK_KINDS}; got {kind!r}.")
        self.kind = kind
        self.attn = MultiHeadAttention(d_model, n_heads, causal=True)
        self.mlp = nn.Sequential(
            nn.Linear(d_model, 4 * d_model), nn.GELU(), nn.Linear(4 * d_model, d_model)
        )
        self.ln1 = nn.LayerNorm(d_model)
        self.ln2 = nn.LayerNorm(d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (B, T, d_model)
        kind = self.kind
        if kind == "plain":
            return self.mlp(self.attn(x))
        if kind == "norm":
            x = self.ln1(self.attn(x))
            return self.ln2(self.mlp(x))
        if kind == "residual":
            x = x + self.attn(x)
            return x + self.mlp(x)
        if kind == "post-norm":
            x = self.ln1(x + self.attn(x))
            return self.ln2(x + self.mlp(x))
        x = x + self.attn(self.ln1(x))  # pre-norm: the residual path is never normalised
        return x + self.mlp(self.ln2(x))


def gradient_norms_per_layer(
    n_layers: int,
    kind: str,
    d_model: int = 32,
    n_heads: int = 2,
    seq_len: int = 16,
    batch: int = 4,
    vocab: int = 64,
    seed: int = 0,
) -> list[float]:
    """Build a stack of ``n_layers`` blocks of one ``kind`` (PyTorch's default initialisation),
    run a cross-entropy loss on random tokens and return, for each block from input to
    output, the L2 norm of the loss gradient with respect to all that block's parameters.

    Runs in float64 so the printed norms are the same on every machine and thread count.
    Input: (batch, seq_len, d_model) standard-normal embeddings; a linear head to ``vocab``
    classes (after a final LayerNorm for pre-norm, as in GPT-2).
    """
    if n_layers < 1:
        raise ValueError(f"gradient_norms_per_layer: n_layers must be at least 1; got {n_layers}.")
    if kind not in BLOCK_KINDS:
        raise ValueError(
            f"gradient_norms_per_layer: kind must be one of {BLOCK_KINDS}; got {kind!r}."
        )
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(batch, seq_len, d_model, generator=gen, dtype=torch.float64)  # (B, T, d)
    targets = torch.randint(0, vocab, (batch, seq_len), generator=gen)  # (B, T)
    with torch.random.fork_rng():
        torch.manual_seed(seed)  # the same weights for every kind, layer by layer
        blocks = nn.ModuleList(Block(d_model, n_heads, kind) for _ in range(n_layers)).double()
        final_ln = nn.LayerNorm(d_model).double() if kind == "pre-norm" else nn.Identity()
        head = nn.Linear(d_model, vocab).double()
    h = x
    for block in blocks:
        h = block(h)  # (B, T, d)
    logits = head(final_ln(h))  # (B, T, vocab)
    loss = nn.functional.cross_entropy(logits.reshape(-1, vocab), targets.reshape(-1))
    loss.backward()
    norms = []
    for block in blocks:
        sq = sum(float((p.grad**2).sum()) for p in block.parameters() if p.grad is not None)
        norms.append(math.sqrt(sq))
    return norms


def attention_scale_gradients(
    d_ks: list[int], scaled: bool, seq_len: int = 16, n_trials: int = 8, seed: int = 0
) -> dict[str, list[float]]:
    """How the 1/√d_k scale keeps attention trainable as the head dimension grows.

    For each d_k: random q, k, v with standard-normal entries (T = seq_len), a random upstream
    gradient dO, and the hand-written backward pass. Returns, averaged over ``n_trials``,
      ``max_weight``: the mean largest attention weight per query (1.0 = one-hot, saturated);
      ``softmax_gain``: the mean of ‖dS_i‖ / ‖dA_i‖ per query row i, the fraction of the
      gradient that gets through the softmax to the scores (and from there to Q and K).
    float64 throughout.
    """
    gen = torch.Generator().manual_seed(seed)
    max_w, gains = [], []
    for d_k in d_ks:
        mw, gs = 0.0, 0.0
        for _ in range(n_trials):
            q, k, v = (
                torch.randn(seq_len, d_k, generator=gen, dtype=torch.float64) for _ in range(3)
            )
            d_out = torch.randn(seq_len, d_k, generator=gen, dtype=torch.float64)  # (T, d_k)
            _, cache = attention_forward(q, k, v, scaled=scaled)
            grads = attention_backward(d_out, cache)
            mw += float(cache.weights.max(dim=-1).values.mean())
            gs += float((grads["dS"].norm(dim=-1) / grads["dA"].norm(dim=-1)).mean())
        max_w.append(mw / n_trials)
        gains.append(gs / n_trials)
    return {"max_weight": max_w, "softmax_gain": gains}
