"""Why recurrence struggles with long sequences: the measurements behind Chapter 1.

An RNN reads tokens one after another, h_t = tanh(W h_{t-1} + U x_t), so information from
token 1 reaches position T only through T - 1 multiplications by W (and tanh'), and the
gradient flows back the same way. Self-attention connects every pair of positions directly.
The functions here measure both effects with autograd, in float64 so the numbers are
reproducible to the digits the chapter prints.
"""
from __future__ import annotations

from collections.abc import Sequence

import torch

from ..attention import causal_mask, scaled_dot_product_attention

__all__ = [
    "sequential_steps",
    "max_path_length",
    "rnn_weights",
    "rnn_last_state",
    "rnn_gradient_norms",
    "attention_gradient_norms",
]


def sequential_steps(T: int, layer: str) -> int:
    """Operations that must run one after another to process T tokens with one layer.

    An RNN must finish step t-1 before step t (T steps); self-attention computes all T
    positions at once (1 step, however long the sequence).
    """
    return {"rnn": T, "attention": 1}[_layer(layer)]


def max_path_length(T: int, layer: str) -> int:
    """Longest path, in layer steps, between the first and last of T tokens (Vaswani et al., Table 1)."""
    return {"rnn": T - 1, "attention": 1}[_layer(layer)]


def _layer(layer: str) -> str:
    if layer not in ("rnn", "attention"):
        raise ValueError(f"layer must be 'rnn' or 'attention'; got {layer!r}.")
    return layer


def _inputs(T: int, d: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(T, d, generator=g, dtype=torch.float64)  # (T, d)


def rnn_weights(d: int = 16, gain: float = 0.9, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """The RNN's (W, U), each (d, d): W a random orthogonal matrix times ``gain`` (so
    repeated multiplication shrinks vectors by ``gain`` per step, before tanh' shrinks them
    further), U random with variance 1/d."""
    g = torch.Generator().manual_seed(seed)
    W = gain * torch.linalg.qr(torch.randn(d, d, generator=g, dtype=torch.float64))[0]  # (d, d)
    U = torch.randn(d, d, generator=g, dtype=torch.float64) / d**0.5  # (d, d)
    return W, U


def rnn_last_state(x: torch.Tensor, W: torch.Tensor, U: torch.Tensor) -> torch.Tensor:
    """h_T of h_t = tanh(W h_{t-1} + U x_t), h_0 = 0. x: (T, d) -> (d,)."""
    h = torch.zeros(W.shape[0], dtype=x.dtype)
    for t in range(x.shape[0]):  # strictly sequential: step t needs h from step t-1
        h = torch.tanh(W @ h + U @ x[t])
    return h


def rnn_gradient_norms(lengths: Sequence[int], d: int = 16, gain: float = 0.9, seed: int = 0) -> list[float]:
    """||d sum(h_T) / d x_1|| for a tanh RNN, one value per sequence length T in ``lengths``.

    The same weights (``rnn_weights``) and inputs (prefixes of one sequence) serve every T.
    """
    W, U = rnn_weights(d, gain, seed)
    norms = []
    for T in lengths:
        x = _inputs(T, d, seed + 1).requires_grad_(True)  # (T, d)
        (grad,) = torch.autograd.grad(rnn_last_state(x, W, U).sum(), x)  # (T, d)
        norms.append(float(grad[0].norm()))
    return norms


def attention_gradient_norms(lengths: Sequence[int], d: int = 16, seed: int = 0) -> list[float]:
    """||d y_T / d x_1|| for one causal self-attention layer (random W_Q, W_K, W_V), per T.

    The last position attends to the first directly, so the gradient does not decay
    exponentially with T; it shrinks only as the attention weight is shared among T tokens.
    """
    g = torch.Generator().manual_seed(seed)
    W_Q, W_K, W_V = (torch.randn(d, d, generator=g, dtype=torch.float64) / d**0.5 for _ in range(3))
    norms = []
    for T in lengths:
        x = _inputs(T, d, seed + 1).requires_grad_(True)  # (T, d)
        y, _ = scaled_dot_product_attention(x @ W_Q, x @ W_K, x @ W_V, causal_mask(T))  # (T, d)
        (grad,) = torch.autograd.grad(y[-1].sum(), x)  # (T, d)
        norms.append(float(grad[0].norm()))
    return norms
