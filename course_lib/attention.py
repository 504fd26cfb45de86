"""Attention, written out step by step.

Everything here is plain PyTorch on purpose: each line is one step of the equations in
Vaswani et al. (2017), so a reader can set a breakpoint anywhere and look at the numbers.
The tests compare every function with PyTorch's own implementation.

Mask convention (the same as ``torch.nn.functional.scaled_dot_product_attention`` with a
boolean mask): ``True`` means "this query may attend to this key", ``False`` means "blocked".
"""

from __future__ import annotations

import math
from contextlib import contextmanager
from typing import Iterator, Sequence

import torch
from torch import nn

__all__ = [
    "softmax",
    "scaled_dot_product_attention",
    "causal_mask",
    "padding_mask",
    "split_heads",
    "merge_heads",
    "MultiHeadAttention",
    "keep_attention_weights",
    "position_frequencies",
    "sinusoidal_positions",
    "rope_angles",
    "apply_rope",
    "LearnedPositionalEmbedding",
]


def softmax(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """Numerically stable softmax along ``dim``.

    Subtracting the row maximum first changes nothing mathematically (softmax is
    shift-invariant) but keeps ``exp`` from overflowing for logits like 1000.

    Shapes: ``x`` is any shape; the result has the same shape and sums to 1 along ``dim``.
    Entries equal to ``-inf`` get probability 0. A slice that is ``-inf`` everywhere has no
    valid probability distribution, so it raises ``ValueError`` instead of returning NaN.
    """
    x_max = x.amax(dim=dim, keepdim=True)
    if torch.isneginf(x_max).any():
        raise ValueError(
            "softmax: some rows are -inf everywhere (for attention: every key is masked for "
            "some query), so no probability distribution exists. Check the mask: each query "
            "must be allowed to see at least one key."
        )
    exp = torch.exp(x - x_max)
    return exp / exp.sum(dim=dim, keepdim=True)


def _check_qkv(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> None:
    if q.dim() < 2 or k.dim() < 2 or v.dim() < 2:
        raise ValueError(
            "attention: q, k and v need at least 2 dimensions (..., T, d); got shapes "
            f"q={tuple(q.shape)}, k={tuple(k.shape)}, v={tuple(v.shape)}."
        )
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(
            f"attention: queries and keys must have the same last dimension d_k to be "
            f"compared by a dot product; got q={tuple(q.shape)} and k={tuple(k.shape)}."
        )
    if k.shape[-2] != v.shape[-2]:
        raise ValueError(
            f"attention: every key needs one value (same T_k); got k={tuple(k.shape)} and "
            f"v={tuple(v.shape)}."
        )


def scaled_dot_product_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    mask: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """softmax(Q Kᵀ / √d_k) V, returning the output and the attention weights.

    Shapes (any leading batch/head dimensions ``...`` are allowed and broadcast):
        q: (..., T_q, d_k)    k: (..., T_k, d_k)    v: (..., T_k, d_v)
        mask: bool, broadcastable to (..., T_q, T_k); True = may attend
        returns out: (..., T_q, d_v), weights: (..., T_q, T_k) (rows sum to 1)

    A query whose keys are all masked raises ``ValueError`` (there is nothing to average).
    """
    _check_qkv(q, k, v)
    d_k = q.shape[-1]
    scores = q @ k.transpose(-2, -1)  # (..., T_q, T_k): every query against every key
    scores = scores / math.sqrt(d_k)  # keeps the variance of the scores near 1
    if mask is not None:
        mask = torch.as_tensor(mask, device=scores.device)
        if mask.dtype != torch.bool:
            raise ValueError(
                f"attention: mask must be boolean (True = may attend); got dtype {mask.dtype}."
            )
        try:
            torch.broadcast_shapes(mask.shape, scores.shape)
        except RuntimeError:
            raise ValueError(
                f"attention: mask of shape {tuple(mask.shape)} does not broadcast to the "
                f"scores of shape {tuple(scores.shape)} (..., T_q, T_k). For heads, add the "
                "head axis: mask[:, None] turns (B, T_q, T_k) into (B, 1, T_q, T_k)."
            ) from None
        if not mask.any(dim=-1).all():
            raise ValueError(
                "attention: a query has every key masked (a row of the mask is all False), "
                "so its weights are undefined. Let each query see at least one key "
                "(e.g. itself)."
            )
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = softmax(scores, dim=-1)  # (..., T_q, T_k)
    out = weights @ v  # (..., T_q, d_v): weighted average of the values
    return out, weights


def causal_mask(T: int, device: torch.device | str | None = None) -> torch.Tensor:
    """Lower-triangular boolean mask: position i may attend to positions 0..i.

    Returns (T, T) bool; ``mask[i, j]`` is True where j <= i.
    """
    if T < 1:
        raise ValueError(f"causal_mask: T must be a positive length; got {T}.")
    return torch.ones(T, T, dtype=torch.bool, device=device).tril()


def padding_mask(
    x: torch.Tensor | Sequence[int],
    pad_id: int | None = None,
    max_len: int | None = None,
) -> torch.Tensor:
    """Mask that hides padding keys.

    Two ways to call it:
        padding_mask(ids, pad_id=0)          ids: (B, T) token ids; keys equal to pad_id are hidden
        padding_mask(lengths, max_len=T)     lengths: (B,) true lengths; keys at t >= length hidden

    Returns (B, 1, T) bool, which broadcasts against scores of shape (B, T_q, T_k). For
    multi-head scores (B, n_head, T_q, T_k) add the head axis: ``mask[:, None]``.
    """
    x = torch.as_tensor(x)
    if pad_id is not None:
        if x.dim() != 2:
            raise ValueError(
                f"padding_mask: with pad_id, pass token ids of shape (B, T); got {tuple(x.shape)}."
            )
        keep = x != pad_id  # (B, T)
    else:
        if x.dim() != 1:
            raise ValueError(
                "padding_mask: pass either token ids (B, T) with pad_id=..., or lengths (B,) "
                f"with max_len=...; got shape {tuple(x.shape)} and no pad_id."
            )
        T = int(x.max()) if max_len is None else max_len
        if (x > T).any() or (x < 0).any():
            raise ValueError(f"padding_mask: lengths must lie in [0, {T}]; got {x.tolist()}.")
        keep = torch.arange(T, device=x.device)[None, :] < x[:, None]  # (B, T)
    return keep[:, None, :]  # (B, 1, T)


def split_heads(x: torch.Tensor, n_heads: int) -> torch.Tensor:
    """(B, T, d_model) -> (B, n_heads, T, head_dim), with head_dim = d_model // n_heads."""
    B, T, d_model = x.shape
    if d_model % n_heads:
        raise ValueError(f"split_heads: d_model={d_model} is not divisible by n_heads={n_heads}.")
    return x.view(B, T, n_heads, d_model // n_heads).transpose(1, 2)  # (B, n_heads, T, head_dim)


def merge_heads(x: torch.Tensor) -> torch.Tensor:
    """(B, n_heads, T, head_dim) -> (B, T, n_heads * head_dim): the inverse of split_heads."""
    B, n_heads, T, head_dim = x.shape
    return x.transpose(1, 2).reshape(B, T, n_heads * head_dim)  # (B, T, d_model)


class MultiHeadAttention(nn.Module):
    """Multi-head attention with separate W_Q, W_K, W_V, W_O projections (names from the paper).

    Args:
        d_model: width of the token vectors.
        n_heads: number of heads; each works in d_model // n_heads dimensions.
        causal: if True, every position attends only to itself and earlier positions.
        bias: whether the four projections have biases.

    ``forward(x, context=None, key_padding_mask=None)``:
        x: (B, T_q, d_model) queries (and keys/values for self-attention)
        context: (B, T_k, d_model) keys/values for cross-attention (default: x)
        key_padding_mask: (B, T_k) bool, True = real token, False = padding
        returns out: (B, T_q, d_model). While ``self.keep_weights`` is True (the default here:
        this from-scratch layer computes the weights anyway) the weights of the last call are
        kept in ``self.attn_weights``: (B, n_heads, T_q, T_k), detached.

    The course's attention layers share this one mechanism for showing their weights:
    ``forward`` returns only the output, and a layer whose ``keep_weights`` is True keeps its
    last weights in ``attn_weights`` (``keep_attention_weights(model)`` switches it on for
    every layer of a model; ``course_lib.model.CausalSelfAttention`` works the same way).
    """

    def __init__(self, d_model: int, n_heads: int, causal: bool = False, bias: bool = True):
        super().__init__()
        if d_model % n_heads:
            raise ValueError(
                f"MultiHeadAttention: d_model={d_model} must be divisible by n_heads={n_heads}."
            )
        self.d_model, self.n_heads, self.causal = d_model, n_heads, causal
        self.head_dim = d_model // n_heads
        self.W_Q = nn.Linear(d_model, d_model, bias=bias)
        self.W_K = nn.Linear(d_model, d_model, bias=bias)
        self.W_V = nn.Linear(d_model, d_model, bias=bias)
        self.W_O = nn.Linear(d_model, d_model, bias=bias)
        self.keep_weights = True
        self.attn_weights: torch.Tensor | None = None

    def forward(
        self,
        x: torch.Tensor,
        context: torch.Tensor | None = None,
        key_padding_mask: torch.Tensor | None = None,
    ) -> torch.Tensor:
        if x.dim() != 3 or x.shape[-1] != self.d_model:
            raise ValueError(
                f"MultiHeadAttention: expected x of shape (B, T, {self.d_model}); "
                f"got {tuple(x.shape)}."
            )
        context = x if context is None else context
        T_q, T_k = x.shape[1], context.shape[1]
        q = split_heads(self.W_Q(x), self.n_heads)  # (B, n_heads, T_q, head_dim)
        k = split_heads(self.W_K(context), self.n_heads)  # (B, n_heads, T_k, head_dim)
        v = split_heads(self.W_V(context), self.n_heads)  # (B, n_heads, T_k, head_dim)
        mask = None
        if self.causal:
            if T_q != T_k:
                raise ValueError(
                    "MultiHeadAttention: a causal mask needs T_q == T_k (self-attention)."
                )
            mask = causal_mask(T_q, device=x.device)  # (T, T)
        if key_padding_mask is not None:
            pad = key_padding_mask.bool()[:, None, None, :]  # (B, 1, 1, T_k)
            mask = pad if mask is None else mask & pad  # (B, 1, T_q, T_k)
        out, weights = scaled_dot_product_attention(q, k, v, mask)  # (B, n_heads, T_q, head_dim)
        self.attn_weights = weights.detach() if self.keep_weights else None
        return self.W_O(merge_heads(out))  # (B, T_q, d_model)


@contextmanager
def keep_attention_weights(model: nn.Module) -> Iterator[nn.Module]:
    """Within the ``with`` block, every attention layer of ``model`` (each submodule with a
    ``keep_weights`` attribute, the model itself included) keeps the weights of its last call
    in ``attn_weights``; afterwards the flags are restored::

        with keep_attention_weights(model):
            model(idx)
        weights = [block.attn.attn_weights for block in model.blocks]  # each (B, n_head, T, T)
    """
    layers = [m for m in model.modules() if hasattr(m, "keep_weights")]
    before = [m.keep_weights for m in layers]
    for m in layers:
        m.keep_weights = True
    try:
        yield model
    finally:
        for m, b in zip(layers, before):
            m.keep_weights = b


def position_frequencies(d: int, base: float = 10000.0) -> torch.Tensor:
    """The d/2 angular frequencies ω_i = base^(-2i/d), i = 0 .. d/2 - 1, fastest first.

    The one home of this formula: the sinusoidal encodings (Vaswani et al., 2017, section
    3.5) turn dimension pair i by ω_i radians per position, and rotary embeddings (RoPE,
    Su et al., 2021) rotate query/key pair i by the same ω_i per position.
    Returns (d/2,) float64 (float64 so that position x frequency stays accurate for large
    positions).
    """
    if d < 2 or d % 2:
        raise ValueError(
            "position_frequencies: d must be a positive even number (dimensions come in pairs); "
            f"got d={d}."
        )
    if base <= 1:
        raise ValueError(
            f"position_frequencies: base must be > 1 so the frequencies decrease; got {base}."
        )
    return base ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)  # (d/2,)


def sinusoidal_positions(T: int, d: int) -> torch.Tensor:
    """The fixed sinusoidal encodings of Vaswani et al. (2017), section 3.5.

    PE[p, 2i] = sin(p / 10000^(2i/d)),  PE[p, 2i+1] = cos(p / 10000^(2i/d)).
    Returns (T, d) float32. ``d`` must be even (sin/cos come in pairs).
    """
    if d % 2:
        raise ValueError(f"sinusoidal_positions: d must be even (sin/cos pairs); got d={d}.")
    pos = torch.arange(T, dtype=torch.float64)[:, None]  # (T, 1)
    freq = position_frequencies(d)  # (d/2,)
    pe = torch.empty(T, d, dtype=torch.float64)
    pe[:, 0::2] = torch.sin(pos * freq)  # computed in float64 so large p stays accurate
    pe[:, 1::2] = torch.cos(pos * freq)
    return pe.float()


def rope_angles(positions, d: int, base: float = 10000.0) -> torch.Tensor:
    """Rotation angle of every (position, pair): angles[t, i] = positions[t] * ω_i.

    Shapes: positions (T,) -> (T, d/2) float64 on the CPU (float64 so large positions stay
    accurate; callers move cos/sin to their device).
    """
    if d < 2 or d % 2:
        raise ValueError(
            f"rope_angles: d must be a positive even number (RoPE rotates pairs); got d={d}."
        )
    if base <= 1:
        raise ValueError(f"rope_angles: base must be > 1 so the frequencies decrease; got {base}.")
    pos = torch.as_tensor(positions).detach().to("cpu", torch.float64).reshape(-1)  # (T,)
    return pos[:, None] * position_frequencies(d, base)[None, :]  # (T, d/2)


def apply_rope(x: torch.Tensor, positions=None, base: float = 10000.0) -> torch.Tensor:
    """Rotary position embedding (Su et al., 2021): rotate each dimension pair (2i, 2i+1) of x
    by the angle position * ω_i (the pairs are adjacent dimensions, as in the RoFormer paper;
    Hugging Face's Llama pairs dimension i with i + d/2 instead, the same idea permuted).

    Shapes: x (..., T, d) with d even; positions (T,) (default 0, 1, ..., T-1).
    Returns a tensor of the same shape, dtype and device. Lengths are unchanged (a rotation).
    """
    if x.dim() < 2:
        raise ValueError(
            "apply_rope: x must be (..., T, d), one vector per position; got shape "
            f"{tuple(x.shape)}. "
            "For a single vector use x[None] and positions=[m]."
        )
    T, d = x.shape[-2], x.shape[-1]
    positions = torch.arange(T) if positions is None else torch.as_tensor(positions)
    if positions.reshape(-1).shape[0] != T:
        raise ValueError(
            f"apply_rope: need one position per row of x ({T}); got {positions.numel()}."
        )
    ang = rope_angles(positions, d, base)  # (T, d/2)
    cos = ang.cos().to(device=x.device, dtype=x.dtype)  # (T, d/2)
    sin = ang.sin().to(device=x.device, dtype=x.dtype)  # (T, d/2)
    x_even, x_odd = x[..., 0::2], x[..., 1::2]  # (..., T, d/2): first and second of each pair
    # the 2x2 rotation [[c, -s], [s, c]] of every pair, interleaved back into (..., T, d)
    return torch.stack((x_even * cos - x_odd * sin, x_even * sin + x_odd * cos), dim=-1).flatten(-2)


class LearnedPositionalEmbedding(nn.Module):
    """A trainable table of position vectors, as in GPT-2.

    ``forward(x, start=0)`` takes token vectors (B, T, d) at positions start .. start + T - 1
    and returns x + P[start:start + T]: (B, T, d) (``start`` > 0 when a KV cache holds the
    earlier tokens). Positions at or past ``max_len`` have no row in the table and raise
    ``ValueError``: learned positions cannot extrapolate.
    """

    def __init__(self, max_len: int, d: int):
        super().__init__()
        self.max_len = max_len
        self.table = nn.Embedding(max_len, d)
        nn.init.normal_(self.table.weight, std=0.02)

    def forward(self, x: torch.Tensor, start: int = 0) -> torch.Tensor:
        T = x.shape[1]
        if start + T > self.max_len:
            raise ValueError(
                f"LearnedPositionalEmbedding: positions {start}..{start + T - 1} exceed "
                f"max_len={self.max_len}; "
                "the table has no vector for those positions (crop the context to the last max_len "
                "tokens)."
            )
        return x + self.table(torch.arange(start, start + T, device=x.device))  # (B, T, d)
