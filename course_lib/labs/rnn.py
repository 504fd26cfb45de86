"""Why recurrence struggles with long sequences: the measurements behind Chapter 1.

An RNN reads tokens one after another, h_t = tanh(W h_{t-1} + U x_t), so information from
token 1 reaches position T only through T - 1 multiplications by W (and tanh'), and the
gradient flows back the same way. Self-attention connects every pair of positions directly.
The functions here measure both effects with autograd, in float64 so the numbers are
reproducible to the digits the chapter prints.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import torch

from ..attention import causal_mask, scaled_dot_product_attention

__all__ = [
    "sequential_steps",
    "max_path_length",
    "rnn_weights",
    "rnn_last_state",
    "rnn_gradient_norms",
    "attention_gradient_norms",
    "LSTMWeights",
    "lstm_weights",
    "lstm_cell",
    "lstm_run",
    "lstm_gradient_norms",
    "lstm_gates",
]


def sequential_steps(T: int, layer: str) -> int:
    """Operations that must run one after another to process T tokens with one layer.

    An RNN must finish step t-1 before step t (T steps); self-attention computes all T
    positions at once (1 step, however long the sequence).
    """
    return {"rnn": T, "attention": 1}[_layer(layer)]


def max_path_length(T: int, layer: str) -> int:
    """Longest path in layer steps between the first and last of T tokens (Vaswani, Table 1)."""
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


def rnn_gradient_norms(
    lengths: Sequence[int], d: int = 16, gain: float = 0.9, seed: int = 0
) -> list[float]:
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


# -- LSTM: gates that let the gradient through -------------------------------------------------
class LSTMWeights(NamedTuple):
    """An LSTM cell's parameters in PyTorch's layout (``nn.LSTMCell``): the four gates' rows
    stacked in the order input, forget, candidate (g), output.

    W_ih: (4H, D), W_hh: (4H, H), b_ih: (4H,), b_hh: (4H,).
    """

    W_ih: torch.Tensor
    W_hh: torch.Tensor
    b_ih: torch.Tensor
    b_hh: torch.Tensor


def lstm_weights(
    d: int = 16,
    hidden: int | None = None,
    forget_bias: float = 0.0,
    seed: int = 0,
    dtype: torch.dtype = torch.float64,
) -> LSTMWeights:
    """Random LSTM weights: entries with variance 1/d (inputs) and 1/H (recurrent), biases
    zero except the forget gate's, which is ``forget_bias`` (a large one starts the forget
    gate near 1, so the cell remembers: Gers et al. 2000, Jozefowicz et al. 2015)."""
    if d < 1 or (hidden is not None and hidden < 1):
        raise ValueError(
            f"lstm_weights: d and hidden must be positive; got d={d}, hidden={hidden}."
        )
    H = d if hidden is None else hidden
    g = torch.Generator().manual_seed(seed)
    W_ih = torch.randn(4 * H, d, generator=g, dtype=dtype) / d**0.5  # (4H, D)
    W_hh = torch.randn(4 * H, H, generator=g, dtype=dtype) / H**0.5  # (4H, H)
    b_ih = torch.zeros(4 * H, dtype=dtype)  # (4H,)
    b_ih[H : 2 * H] = forget_bias  # rows H..2H are the forget gate
    return LSTMWeights(W_ih, W_hh, b_ih, torch.zeros(4 * H, dtype=dtype))


def lstm_cell(
    x: torch.Tensor, h: torch.Tensor, c: torch.Tensor, w: LSTMWeights, return_gates: bool = False
):
    """One LSTM step (Hochreiter & Schmidhuber 1997, with the forget gate of Gers et al. 2000),
    written out as ``nn.LSTMCell`` computes it:

        i = sigmoid(.)   input gate:  how much of the candidate to write
        f = sigmoid(.)   forget gate: how much of the old cell state to keep
        g = tanh(.)      candidate values
        o = sigmoid(.)   output gate: how much of the cell to show
        c' = f * c + i * g,   h' = o * tanh(c')

    x: (B, D) or (D,); h, c: (B, H) or (H,). Returns (h', c'), and with ``return_gates`` also
    a dict of the gates i, f, g, o, each shaped like h. The cell state c' is updated by a
    gated *sum*, not a matrix product: with f near 1 it carries c (and its gradient) along
    almost unchanged.
    """
    H = w.W_hh.shape[1]
    if (
        w.W_ih.shape[0] != 4 * H
        or x.shape[-1] != w.W_ih.shape[1]
        or h.shape[-1] != H
        or c.shape != h.shape
    ):
        raise ValueError(
            f"lstm_cell: shapes do not fit: x {tuple(x.shape)}, h {tuple(h.shape)}, c "
            f"{tuple(c.shape)}, "
            f"W_ih {tuple(w.W_ih.shape)}, W_hh {tuple(w.W_hh.shape)}; need x (..., D), h and c "
            "(..., H), "
            "W_ih (4H, D), W_hh (4H, H)."
        )
    z = x @ w.W_ih.T + w.b_ih + h @ w.W_hh.T + w.b_hh  # (B, 4H): all four gates' pre-activations
    zi, zf, zg, zo = z.split(H, dim=-1)  # each (B, H), in nn.LSTMCell's order
    i, f, o = torch.sigmoid(zi), torch.sigmoid(zf), torch.sigmoid(zo)  # (B, H) each, in (0, 1)
    g = torch.tanh(zg)  # (B, H)
    c_new = f * c + i * g  # (B, H): keep a fraction f of the old memory, write i of the new
    h_new = o * torch.tanh(c_new)  # (B, H)
    if return_gates:
        return h_new, c_new, {"i": i, "f": f, "g": g, "o": o}
    return h_new, c_new


def lstm_run(x: torch.Tensor, w: LSTMWeights, return_gates: bool = False):
    """Run the LSTM over a sequence from h_0 = c_0 = 0. x: (T, D).

    Returns (h_T, c_T), each (H,); with ``return_gates`` also a dict of the gates over time,
    each (T, H)."""
    H = w.W_hh.shape[1]
    h = torch.zeros(H, dtype=x.dtype)  # (H,)
    c = torch.zeros(H, dtype=x.dtype)  # (H,)
    trace: dict[str, list] = {"i": [], "f": [], "g": [], "o": []}
    for t in range(x.shape[0]):  # sequential, like the plain RNN
        h, c, gates = lstm_cell(x[t], h, c, w, return_gates=True)
        for k, v in gates.items():
            trace[k].append(v.detach())
    if return_gates:
        return h, c, {k: torch.stack(v) for k, v in trace.items()}  # each (T, H)
    return h, c


def lstm_gradient_norms(
    lengths: Sequence[int], d: int = 16, forget_bias: float = 0.0, seed: int = 0
) -> list[float]:
    """||d sum(h_T) / d x_1|| for an LSTM, one value per sequence length T in ``lengths``:
    the counterpart of ``rnn_gradient_norms`` (same inputs, same dimension)."""
    if any(T < 1 for T in lengths):
        raise ValueError(
            f"lstm_gradient_norms: sequence lengths must be >= 1; got {list(lengths)}."
        )
    w = lstm_weights(d, forget_bias=forget_bias, seed=seed)
    norms = []
    for T in lengths:
        x = _inputs(T, d, seed + 1).requires_grad_(True)  # (T, d)
        h, _ = lstm_run(x, w)
        (grad,) = torch.autograd.grad(h.sum(), x)  # (T, d)
        norms.append(float(grad[0].norm()))
    return norms


def lstm_gates(
    T: int, d: int = 16, forget_bias: float = 0.0, seed: int = 0
) -> dict[str, torch.Tensor]:
    """The gates of the LSTM of ``lstm_gradient_norms`` over the same T random inputs: a dict
    of i, f, g, o, each (T, H), and ``kept``, (T,): the fraction of what the cell held at
    step 1 that survives the forget gates to step t along the cell path alone,
    prod_{s=2..t} f_s averaged over the H units (1 at t = 1)."""
    if T < 1:
        raise ValueError(f"lstm_gates: T must be >= 1; got {T}.")
    _, _, gates = lstm_run(
        _inputs(T, d, seed + 1),
        lstm_weights(d, forget_bias=forget_bias, seed=seed),
        return_gates=True,
    )
    f = gates["f"]  # (T, H)
    kept = torch.cat([torch.ones(1, f.shape[1], dtype=f.dtype), f[1:].cumprod(0)])  # (T, H)
    return {**gates, "kept": kept.mean(1)}  # kept: (T,)
