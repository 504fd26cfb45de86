"""A transformer small enough to compute by hand: float64 NumPy, every intermediate returned.

The setting of the worked examples (Chapter 5): a vocabulary of four tokens A, B, C, D with
2-dimensional embeddings, one causal self-attention layer with ``W_Q = W_K = W_V = 0.1·I`` and
an output projection ``W_O`` of shape (d_model, vocabulary) = (2, 4) that turns the context of
the **last** position into four logits. Row-vector convention throughout: ``Q = X @ W_Q``,
``logits = h @ W_O``.

Every function is written out step by step and returns a dataclass holding each
intermediate, so a page can show (and a test can check) any number along the way. The
backward functions are the chain rule written by hand; ``tests/handcalc/test_handcalc.py``
checks every gradient against torch autograd (float64) and finite differences.

Contents:
    forward / backward / sgd_step / batch_gradients / train_gd   (examples 1-4)
    ffn_forward / ffn_backward                                    (example 5)
    layernorm_forward / layernorm_backward                       (example 6)
    transformer_init / transformer_forward / transformer_backward /
    adamw_step / train_transformer                               (example 6)
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import Sequence

import numpy as np

__all__ = [
    "VOCAB",
    "EMBEDDINGS",
    "D_MODEL",
    "token_ids",
    "embed",
    "onehot",
    "Params",
    "initial_params",
    "log_softmax",
    "softmax",
    "softmax_jacobian",
    "softmax_backward",
    "causal_mask",
    "Attention",
    "attention_forward",
    "attention_backward",
    "Forward",
    "forward",
    "Grads",
    "backward",
    "sgd_step",
    "batch_gradients",
    "train_gd",
    "FFNParams",
    "example_ffn_params",
    "FFNForward",
    "ffn_forward",
    "ffn_backward",
    "LayerNormForward",
    "layernorm_forward",
    "layernorm_backward",
    "transformer_init",
    "transformer_forward",
    "transformer_backward",
    "transformer_loss",
    "AdamWState",
    "adamw_step",
    "train_transformer",
    "PATTERNS",
]

VOCAB = ("A", "B", "C", "D")
#: One row per token of VOCAB: A=[1,0], B=[0,1], C=[1,1], D=[0,0].
EMBEDDINGS = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [0.0, 0.0]])  # (V=4, d=2)
D_MODEL = 2

#: The three patterns of examples 4 and 6: input sequence -> next token.
PATTERNS = ((("A", "B"), "C"), (("A", "A"), "D"), (("B", "A"), "C"))


# --------------------------------------------------------------------------------------------
# Tokens
# --------------------------------------------------------------------------------------------
def token_ids(tokens: Sequence[str]) -> list[int]:
    """Token names ("A".."D") -> their row numbers in EMBEDDINGS."""
    if isinstance(tokens, str):
        tokens = list(tokens)
    unknown = [t for t in tokens if t not in VOCAB]
    if unknown or len(tokens) == 0:
        raise ValueError(
            f"handcalc: tokens must be a non-empty sequence drawn from {VOCAB}; got "
            f"{list(tokens)}. "
            "Write them as a list of letters, e.g. ['A', 'B']."
        )
    return [VOCAB.index(t) for t in tokens]


def embed(tokens: Sequence[str]) -> np.ndarray:
    """Stack the embeddings of ``tokens``: returns X of shape (T, 2)."""
    return EMBEDDINGS[token_ids(tokens)].copy()  # (T, d)


def onehot(target: str) -> np.ndarray:
    """The target as a one-hot vector y: (V=4,)."""
    y = np.zeros(len(VOCAB))
    y[token_ids([target])[0]] = 1.0
    return y


# --------------------------------------------------------------------------------------------
# Parameters of the one-layer model (examples 1-4)
# --------------------------------------------------------------------------------------------
@dataclass
class Params:
    """The four weight matrices: W_Q, W_K, W_V are (d, d); W_O is (d, V) = (2, 4)."""

    W_Q: np.ndarray
    W_K: np.ndarray
    W_V: np.ndarray
    W_O: np.ndarray

    def copy(self) -> "Params":
        return Params(*(getattr(self, f.name).copy() for f in fields(self)))

    def items(self):
        return [(f.name, getattr(self, f.name)) for f in fields(self)]


def initial_params() -> Params:
    """W_Q = W_K = W_V = 0.1·I and W_O = [[0.1, 0, 0, 0], [0, 0, 0.1, 0]]."""
    eye = np.eye(D_MODEL)
    W_O = np.array([[0.1, 0.0, 0.0, 0.0], [0.0, 0.0, 0.1, 0.0]])  # (d=2, V=4)
    return Params(0.1 * eye, 0.1 * eye, 0.1 * eye, W_O)


# --------------------------------------------------------------------------------------------
# Softmax and its derivative
# --------------------------------------------------------------------------------------------
def log_softmax(z: np.ndarray) -> np.ndarray:
    """log softmax over the last axis, by log-sum-exp (finite even where a probability is 0)."""
    z = np.asarray(z, dtype=float)
    shifted = z - z.max(axis=-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))


def softmax(z: np.ndarray) -> np.ndarray:
    """Softmax over the last axis, shifted by the maximum so exp cannot overflow.

    Entries equal to -inf (masked) get probability exactly 0.
    """
    z = np.asarray(z, dtype=float)
    e = np.exp(z - z.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def softmax_jacobian(s: np.ndarray) -> np.ndarray:
    """J[i, j] = ds_i/dz_j = s_i (δ_ij − s_j) for one probability vector s: (n,) -> (n, n)."""
    s = np.asarray(s, dtype=float)
    return np.diag(s) - np.outer(s, s)


def softmax_backward(s: np.ndarray, g: np.ndarray) -> np.ndarray:
    """dL/dz = s ⊙ (g − s·g), the Jacobian product J g without building J.

    s: softmax outputs (..., n); g: dL/ds (..., n); returns (..., n).
    """
    return s * (g - (s * g).sum(axis=-1, keepdims=True))


def causal_mask(T: int) -> np.ndarray:
    """(T, T) bool, True where key j may be seen by query i (j <= i)."""
    return np.tril(np.ones((T, T), dtype=bool))


# --------------------------------------------------------------------------------------------
# Causal self-attention over a whole sequence
# --------------------------------------------------------------------------------------------
@dataclass
class Attention:
    """Every intermediate of one causal self-attention (shapes for T tokens, d = 2)."""

    X: np.ndarray  # (T, d) input rows
    Q: np.ndarray  # (T, d) = X W_Q
    K: np.ndarray  # (T, d) = X W_K
    V: np.ndarray  # (T, d) = X W_V
    scores: np.ndarray  # (T, T) = Q Kᵀ
    scaled: np.ndarray  # (T, T) = scores / √d
    masked: np.ndarray  # (T, T) scaled, with -inf above the diagonal
    weights: np.ndarray  # (T, T) softmax of each row; rows sum to 1
    out: np.ndarray  # (T, d) = weights V


def attention_forward(
    X: np.ndarray, W_Q: np.ndarray, W_K: np.ndarray, W_V: np.ndarray
) -> Attention:
    """Causal single-head attention: softmax(mask(X W_Q (X W_K)ᵀ / √d)) X W_V.

    X: (T, d); W_Q, W_K, W_V: (d, d). Returns an ``Attention`` with every step.
    """
    X = np.asarray(X, dtype=float)
    if X.ndim != 2 or X.shape[1] != W_Q.shape[0]:
        raise ValueError(
            f"attention_forward: X must have shape (T, {W_Q.shape[0]}) to multiply W_Q of shape "
            f"{W_Q.shape}; got {X.shape}."
        )
    d_k = W_K.shape[1]
    Q, K, V = X @ W_Q, X @ W_K, X @ W_V  # (T, d) each
    scores = Q @ K.T  # (T, T): query i against key j
    scaled = scores / math.sqrt(d_k)  # keeps scores O(1) as d_k grows
    masked = np.where(causal_mask(len(X)), scaled, -np.inf)  # no peeking at later tokens
    weights = softmax(masked)  # (T, T)
    return Attention(X, Q, K, V, scores, scaled, masked, weights, weights @ V)


@dataclass
class AttentionGrads:
    """Gradients of the loss with respect to every intermediate of ``Attention``."""

    d_out: np.ndarray  # (T, d)
    d_weights: np.ndarray  # (T, T)
    d_V: np.ndarray  # (T, d)
    d_scaled: np.ndarray  # (T, T) through the softmax
    d_scores: np.ndarray  # (T, T) through the 1/√d scale
    d_Q: np.ndarray  # (T, d)
    d_K: np.ndarray  # (T, d)
    d_X: np.ndarray  # (T, d) summed over the Q, K and V paths
    d_W_Q: np.ndarray  # (d, d)
    d_W_K: np.ndarray  # (d, d)
    d_W_V: np.ndarray  # (d, d)


def attention_backward(
    a: Attention, W_Q: np.ndarray, W_K: np.ndarray, W_V: np.ndarray, d_out: np.ndarray
) -> AttentionGrads:
    """Chain rule back through ``attention_forward``; d_out: (T, d) = dL/d(out)."""
    d_weights = d_out @ a.V.T  # (T, T): out = weights V
    d_V = a.weights.T @ d_out  # (T, d)
    d_scaled = softmax_backward(a.weights, d_weights)  # masked entries have weight 0 -> gradient 0
    d_scores = d_scaled / math.sqrt(W_K.shape[1])
    d_Q = d_scores @ a.K  # (T, d): scores = Q Kᵀ
    d_K = d_scores.T @ a.Q  # (T, d)
    d_X = d_Q @ W_Q.T + d_K @ W_K.T + d_V @ W_V.T  # X feeds all three projections
    return AttentionGrads(
        d_out,
        d_weights,
        d_V,
        d_scaled,
        d_scores,
        d_Q,
        d_K,
        d_X,
        a.X.T @ d_Q,
        a.X.T @ d_K,
        a.X.T @ d_V,
    )


# --------------------------------------------------------------------------------------------
# The one-layer model of examples 1-4: attention, then W_O on the last position
# --------------------------------------------------------------------------------------------
@dataclass
class Forward:
    """Every number of the forward pass, from tokens to loss."""

    tokens: list
    target: str
    attn: Attention
    h: np.ndarray  # (d,) context of the last position (the row that predicts)
    logits: np.ndarray  # (V,) = h W_O
    probs: np.ndarray  # (V,) softmax(logits); sums to 1
    y: np.ndarray  # (V,) one-hot target
    loss: float  # −log probs[target]

    def __getattr__(self, name):  # fwd.Q, fwd.weights, ... reach into the attention step
        if name != "attn" and "attn" in self.__dict__ and hasattr(self.attn, name):
            return getattr(self.attn, name)
        raise AttributeError(name)


def forward(params: Params, tokens: Sequence[str], target: str) -> Forward:
    """Tokens -> embeddings -> causal attention -> last context -> logits -> probs -> loss."""
    y = onehot(target)
    attn = attention_forward(embed(tokens), params.W_Q, params.W_K, params.W_V)
    h = attn.out[-1]  # (d,): only the last position predicts the next token
    logits = h @ params.W_O  # (V,)
    probs = softmax(logits)
    loss = float(-log_softmax(logits)[y.argmax()])  # = −log probs[target], computed stably
    return Forward(list(tokens), target, attn, h, logits, probs, y, loss)


@dataclass
class Grads:
    """dL/d(everything), from the logits back to the four weight matrices."""

    d_logits: np.ndarray  # (V,) = p − y
    d_W_O: np.ndarray  # (d, V) = outer(h, p − y)
    d_h: np.ndarray  # (d,) = W_O (p − y)
    attn: AttentionGrads

    def __getattr__(self, name):
        if name != "attn" and "attn" in self.__dict__ and hasattr(self.attn, name):
            return getattr(self.attn, name)
        raise AttributeError(name)

    def params(self) -> Params:
        """The four weight gradients, shaped like ``Params``."""
        return Params(self.attn.d_W_Q, self.attn.d_W_K, self.attn.d_W_V, self.d_W_O)


def backward(params: Params, f: Forward) -> Grads:
    """Backpropagation through ``forward`` by hand."""
    d_logits = f.probs - f.y  # (V,): softmax followed by cross-entropy
    d_W_O = np.outer(f.h, d_logits)  # (d, V)
    d_h = params.W_O @ d_logits  # (d,)
    d_out = np.zeros_like(f.attn.out)  # (T, d): only the last row reaches the loss
    d_out[-1] = d_h
    attn = attention_backward(f.attn, params.W_Q, params.W_K, params.W_V, d_out)
    return Grads(d_logits, d_W_O, d_h, attn)


def sgd_step(params: Params, grads: Params, lr: float, only: Sequence[str] | None = None) -> Params:
    """W ← W − lr · dL/dW for every matrix (or only those named in ``only``)."""
    names = [n for n, _ in params.items()]
    only = names if only is None else list(only)
    bad = [n for n in only if n not in names]
    if bad:
        raise ValueError(f"sgd_step: unknown parameter names {bad}; choose from {names}.")
    new = params.copy()
    for n in only:
        setattr(new, n, getattr(params, n) - lr * getattr(grads, n))
    return new


def batch_gradients(params: Params, examples=PATTERNS):
    """Forward and backward for each (tokens, target); returns (forwards, grads, mean loss,
    mean gradient as ``Params``). The batch loss is the mean of the per-example losses, so its
    gradient is the mean of the per-example gradients."""
    fwds = [forward(params, toks, tgt) for toks, tgt in examples]
    grads = [backward(params, f) for f in fwds]
    mean = Params(
        *(np.mean([getattr(g.params(), n) for g in grads], axis=0) for n, _ in params.items())
    )
    return fwds, grads, float(np.mean([f.loss for f in fwds])), mean


def train_gd(params: Params, examples=PATTERNS, lr: float = 0.1, epochs: int = 100):
    """Full-batch gradient descent; returns (final params, mean loss before each epoch + final)."""
    history = []
    for _ in range(epochs):
        _, _, loss, g = batch_gradients(params, examples)
        history.append(loss)
        params = sgd_step(params, g, lr)
    history.append(batch_gradients(params, examples)[2])
    return params, history


# --------------------------------------------------------------------------------------------
# Feed-forward layer (example 5)
# --------------------------------------------------------------------------------------------
@dataclass
class FFNParams:
    """FFN(x) = ReLU(x W1 + b1) W2 + b2; W1: (d, d_ff), b1: (d_ff,), W2: (d_ff, d), b2: (d,)."""

    W1: np.ndarray
    b1: np.ndarray
    W2: np.ndarray
    b2: np.ndarray


def example_ffn_params() -> FFNParams:
    """W1 = W2 = [[0.2, 0.1], [0.1, 0.2]]; b1 = [0, −0.15] so ReLU really cuts; b2 = 0."""
    W = np.array([[0.2, 0.1], [0.1, 0.2]])
    return FFNParams(W.copy(), np.array([0.0, -0.15]), W.copy(), np.zeros(2))


@dataclass
class FFNForward:
    x: np.ndarray  # (..., d)
    pre: np.ndarray  # (..., d_ff) = x W1 + b1
    hidden: np.ndarray  # (..., d_ff) = ReLU(pre)
    out: np.ndarray  # (..., d) = hidden W2 + b2
    residual: np.ndarray  # (..., d) = x + out


def ffn_forward(p: FFNParams, x: np.ndarray) -> FFNForward:
    """The position-wise feed-forward layer and its residual, for x: (..., d)."""
    x = np.asarray(x, dtype=float)
    if x.shape[-1] != p.W1.shape[0]:
        raise ValueError(
            f"ffn_forward: x must end in dimension {p.W1.shape[0]}; got shape {x.shape}."
        )
    pre = x @ p.W1 + p.b1
    hidden = np.maximum(pre, 0.0)
    out = hidden @ p.W2 + p.b2
    return FFNForward(x, pre, hidden, out, x + out)


def ffn_backward(p: FFNParams, f: FFNForward, d_out: np.ndarray) -> dict:
    """Gradients of FFN(x) (not the residual) given d_out = dL/d(out): (..., d).

    Returns dict with d_hidden, d_pre, d_x (..., ·) and d_W1, d_b1, d_W2, d_b2 (summed over rows).
    """
    x2, h2 = f.x.reshape(-1, f.x.shape[-1]), f.hidden.reshape(-1, f.hidden.shape[-1])
    g2 = np.asarray(d_out, dtype=float).reshape(-1, p.W2.shape[1])  # (N, d)
    d_hidden = g2 @ p.W2.T  # (N, d_ff)
    # ReLU passes gradient only where it passed the signal
    d_pre = d_hidden * (f.pre.reshape(d_hidden.shape) > 0)
    return {
        "d_hidden": d_hidden.reshape(f.hidden.shape),
        "d_pre": d_pre.reshape(f.pre.shape),
        "d_x": (d_pre @ p.W1.T).reshape(f.x.shape),
        "d_W1": x2.T @ d_pre,
        "d_b1": d_pre.sum(0),
        "d_W2": h2.T @ g2,
        "d_b2": g2.sum(0),
    }


# --------------------------------------------------------------------------------------------
# LayerNorm (example 6)
# --------------------------------------------------------------------------------------------
@dataclass
class LayerNormForward:
    x: np.ndarray  # (..., d)
    mean: np.ndarray  # (..., 1)
    var: np.ndarray  # (..., 1) biased variance, as in torch.nn.LayerNorm
    xhat: np.ndarray  # (..., d) = (x − mean) / √(var + eps)
    y: np.ndarray  # (..., d) = gamma ⊙ xhat + beta
    eps: float


def layernorm_forward(
    x: np.ndarray, gamma: np.ndarray, beta: np.ndarray, eps: float = 1e-5
) -> LayerNormForward:
    """LayerNorm over the last axis, exactly as ``torch.nn.LayerNorm`` computes it."""
    x = np.asarray(x, dtype=float)
    if x.shape[-1] != len(gamma) or len(gamma) != len(beta):
        raise ValueError(
            f"layernorm_forward: gamma and beta need one entry per feature ({x.shape[-1]}); got "
            f"{len(gamma)} and {len(beta)}."
        )
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    xhat = (x - mean) / np.sqrt(var + eps)
    return LayerNormForward(x, mean, var, xhat, gamma * xhat + beta, eps)


def layernorm_backward(f: LayerNormForward, gamma: np.ndarray, d_y: np.ndarray):
    """Returns (d_x (..., d), d_gamma (d,), d_beta (d,)) given d_y = dL/dy."""
    d_xhat = d_y * gamma
    inv_std = 1.0 / np.sqrt(f.var + f.eps)
    # xhat depends on every x_i through the mean and the variance: two correction terms
    d_x = inv_std * (
        d_xhat - d_xhat.mean(-1, keepdims=True) - f.xhat * (d_xhat * f.xhat).mean(-1, keepdims=True)
    )
    flat = lambda a: a.reshape(-1, a.shape[-1])  # noqa: E731
    return d_x, (flat(d_y) * flat(f.xhat)).sum(0), flat(d_y).sum(0)


# --------------------------------------------------------------------------------------------
# The complete two-block transformer (example 6)
# --------------------------------------------------------------------------------------------
def transformer_init(n_blocks: int = 2) -> dict[str, np.ndarray]:
    """Deterministic start: each block has the attention weights of example 1 and the FFN of
    example 5; every LayerNorm starts as gamma = 1, beta = 0; W_O as in example 1.

    Keys: "block{i}.{name}" for name in ln1.g, ln1.b, W_Q, W_K, W_V, ln2.g, ln2.b, W1, b1,
    W2, b2; then "lnf.g", "lnf.b", "W_O".
    """
    p0, f0 = initial_params(), example_ffn_params()
    params: dict[str, np.ndarray] = {}
    for i in range(1, n_blocks + 1):
        for ln in ("ln1", "ln2"):
            params[f"block{i}.{ln}.g"], params[f"block{i}.{ln}.b"] = (
                np.ones(D_MODEL),
                np.zeros(D_MODEL),
            )
        params.update(
            {
                f"block{i}.W_Q": p0.W_Q.copy(),
                f"block{i}.W_K": p0.W_K.copy(),
                f"block{i}.W_V": p0.W_V.copy(),
                f"block{i}.W1": f0.W1.copy(),
                f"block{i}.b1": f0.b1.copy(),
                f"block{i}.W2": f0.W2.copy(),
                f"block{i}.b2": f0.b2.copy(),
            }
        )
    params.update({"lnf.g": np.ones(D_MODEL), "lnf.b": np.zeros(D_MODEL), "W_O": p0.W_O.copy()})
    return params


def _block(params: dict, i: int):
    """Block i's parameters by short name: ``_block(params, 1)("W_Q")`` is params["block1.W_Q"]."""
    return lambda name: params[f"block{i}.{name}"]


def _n_blocks(params: dict) -> int:
    return len({k.split(".")[0] for k in params if k.startswith("block")})


def transformer_forward(params: dict, tokens: Sequence[str], target: str) -> dict:
    """Pre-LayerNorm blocks, as in GPT-2: h ← h + Attn(LN1(h)); h ← h + FFN(LN2(h)); then a
    final LayerNorm and W_O on the last position.

    Returns a cache dict: "X" (T, d), "blocks" (list of per-block dicts with "ln1", "attn",
    "h_mid", "ln2", "ffn", "h_out"), "lnf", "logits" (V,), "probs" (V,), "y", "loss".
    """
    h = embed(tokens)  # (T, d)
    y = onehot(target)
    blocks = []
    for i in range(1, _n_blocks(params) + 1):
        P = _block(params, i)
        ln1 = layernorm_forward(h, P("ln1.g"), P("ln1.b"))
        attn = attention_forward(ln1.y, P("W_Q"), P("W_K"), P("W_V"))
        h_mid = h + attn.out  # residual around attention
        ln2 = layernorm_forward(h_mid, P("ln2.g"), P("ln2.b"))
        ffn = ffn_forward(FFNParams(P("W1"), P("b1"), P("W2"), P("b2")), ln2.y)
        h_out = h_mid + ffn.out  # residual around the FFN
        blocks.append(
            {
                "h_in": h,
                "ln1": ln1,
                "attn": attn,
                "h_mid": h_mid,
                "ln2": ln2,
                "ffn": ffn,
                "h_out": h_out,
            }
        )
        h = h_out
    lnf = layernorm_forward(h, params["lnf.g"], params["lnf.b"])
    logits = lnf.y[-1] @ params["W_O"]  # (V,)
    probs = softmax(logits)
    return {
        "X": embed(tokens),
        "blocks": blocks,
        "lnf": lnf,
        "logits": logits,
        "probs": probs,
        "y": y,
        "loss": float(-log_softmax(logits)[y.argmax()]),
    }


def transformer_backward(params: dict, cache: dict) -> dict[str, np.ndarray]:
    """dL/d(every parameter) for one sequence, by the chain rule through ``transformer_forward``."""
    grads: dict[str, np.ndarray] = {}
    d_logits = cache["probs"] - cache["y"]  # (V,)
    lnf = cache["lnf"]
    grads["W_O"] = np.outer(lnf.y[-1], d_logits)  # (d, V)
    d_lnf = np.zeros_like(lnf.y)  # (T, d): only the last position is scored
    d_lnf[-1] = params["W_O"] @ d_logits
    d_h, grads["lnf.g"], grads["lnf.b"] = layernorm_backward(lnf, params["lnf.g"], d_lnf)
    for i in range(len(cache["blocks"]), 0, -1):
        b = cache["blocks"][i - 1]
        P = _block(params, i)
        fp = FFNParams(P("W1"), P("b1"), P("W2"), P("b2"))
        g = ffn_backward(fp, b["ffn"], d_h)
        for n in ("W1", "b1", "W2", "b2"):
            grads[f"block{i}.{n}"] = g[f"d_{n}"]
        d_ln2_x, grads[f"block{i}.ln2.g"], grads[f"block{i}.ln2.b"] = layernorm_backward(
            b["ln2"], P("ln2.g"), g["d_x"]
        )
        d_h = d_h + d_ln2_x  # the residual passes d_h straight through
        a = attention_backward(b["attn"], P("W_Q"), P("W_K"), P("W_V"), d_h)
        grads[f"block{i}.W_Q"], grads[f"block{i}.W_K"], grads[f"block{i}.W_V"] = (
            a.d_W_Q,
            a.d_W_K,
            a.d_W_V,
        )
        d_ln1_x, grads[f"block{i}.ln1.g"], grads[f"block{i}.ln1.b"] = layernorm_backward(
            b["ln1"], P("ln1.g"), a.d_X
        )
        d_h = d_h + d_ln1_x
    return {k: grads[k] for k in params}  # same order as params


def transformer_loss(params: dict, examples=PATTERNS):
    """Mean loss over the examples and its gradient (dict like ``params``)."""
    caches = [transformer_forward(params, t, y) for t, y in examples]
    gs = [transformer_backward(params, c) for c in caches]
    mean = {k: np.mean([g[k] for g in gs], axis=0) for k in params}
    return float(np.mean([c["loss"] for c in caches])), mean, caches


@dataclass
class AdamWState:
    """First and second moment estimates and the step count of AdamW."""

    m: dict
    v: dict
    t: int = 0


def adamw_step(
    params: dict,
    grads: dict,
    state: AdamWState | None,
    lr: float = 0.05,
    betas=(0.9, 0.999),
    eps: float = 1e-8,
    weight_decay: float = 0.01,
    decay: Sequence[str] | None = None,
):
    """One AdamW update (Loshchilov & Hutter), exactly as ``torch.optim.AdamW`` does it.

    Weight decay shrinks only the parameters named in ``decay`` (default: the matrices, whose
    names contain "W"); LayerNorm gains and biases are left alone, as in GPT-2 training.
    Returns (new params, new state); the inputs are not modified.
    """
    if state is None:
        state = AdamWState(
            {k: np.zeros_like(p) for k, p in params.items()},
            {k: np.zeros_like(p) for k, p in params.items()},
        )
    decay = [k for k in params if "W" in k] if decay is None else list(decay)
    t = state.t + 1
    b1, b2 = betas
    new, m, v = {}, {}, {}
    for k, p in params.items():
        if k not in grads:
            raise ValueError(f"adamw_step: no gradient for parameter {k!r}.")
        p = p * (1 - lr * weight_decay) if k in decay else p.copy()  # decoupled decay
        m[k] = b1 * state.m[k] + (1 - b1) * grads[k]
        v[k] = b2 * state.v[k] + (1 - b2) * grads[k] ** 2
        m_hat, v_hat = m[k] / (1 - b1**t), v[k] / (1 - b2**t)  # undo the zero start
        new[k] = p - lr * m_hat / (np.sqrt(v_hat) + eps)
    return new, AdamWState(m, v, t)


def train_transformer(
    params: dict, examples=PATTERNS, steps: int = 300, lr: float = 0.05, weight_decay: float = 0.01
):
    """Full-batch AdamW on the mean loss over ``examples``.

    Returns (final params, history, first_learned): history holds the mean loss before each
    step and after the last (steps + 1 values); first_learned is the first step at which every
    example's target is the most probable token (None if that never happens).
    """
    state, history, first_learned = None, [], None
    for step in range(steps):
        loss, g, caches = transformer_loss(params, examples)
        history.append(loss)
        if first_learned is None and all(c["probs"].argmax() == c["y"].argmax() for c in caches):
            first_learned = step
        params, state = adamw_step(params, g, state, lr=lr, weight_decay=weight_decay)
    history.append(transformer_loss(params, examples)[0])
    return params, history, first_learned
