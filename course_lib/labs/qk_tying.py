"""Why queries and keys need different matrices (Chapter 4): tie W_Q = W_K and the scores
become symmetric, score(i, j) = score(j, i), with a positive semi-definite Gram matrix.

- ``symmetry_gap``: how far a score matrix is from its transpose (0 for a tied head).
- ``SuccessorTask``: a relation no symmetric score can express. Each sequence is the K
  symbols 0..K-1 in a random order, each carrying a random colour; at every position the
  target is the colour of the symbol's *successor* (a -> a + 1 mod K), wherever it stands.
  The head must attend from a to a + 1, from a + 1 to a + 2, ..., and from K - 1 back to 0.
  With tied matrices, s(a, b) = k_a . k_b, and Cauchy-Schwarz gives
  prod_a s(a, a+1) <= prod_a |k_a||k_(a+1)| = prod_a s(a, a): some symbol scores itself at
  least as high as its successor.
- ``OneHead``: one bidirectional attention head (token + colour embeddings, W_Q, W_K or the
  tied W_Q, W_V, a linear read-out); ``train_successor`` trains it and reports accuracy and
  the attention weight that lands on the successor.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

__all__ = ["QK_SETTINGS", "symmetry_gap", "SuccessorTask", "OneHead", "train_successor"]

#: The experiment: K symbols, C colours, head width d; Adam for ``steps`` steps.
QK_SETTINGS = {"K": 5, "C": 8, "d": 16, "steps": 150, "batch_size": 64, "lr": 2e-2}


def symmetry_gap(scores: torch.Tensor) -> float:
    """max |S - S^T| / max |S| of a square score matrix (..., T, T): 0 for a symmetric one."""
    if scores.dim() < 2 or scores.shape[-1] != scores.shape[-2]:
        raise ValueError(f"symmetry_gap: scores must be (..., T, T); got {tuple(scores.shape)}.")
    return ((scores - scores.transpose(-1, -2)).abs().max() / scores.abs().max()).item()


class SuccessorTask:
    """Batches of the successor task, reproducible from a seed.

    ``sample(n)`` returns symbols (n, K) (a permutation of 0..K-1 per row), colours (n, K)
    in 0..C-1, targets (n, K) (the colour of the successor of each position's symbol) and
    successor_pos (n, K) (where that successor stands)."""

    def __init__(self, K: int, C: int, seed: int = 0):
        if K < 3 or C < 2:
            raise ValueError(
                f"SuccessorTask: need K >= 3 symbols (a cycle; K = 2 is symmetric) and C >= 2 "
                f"colours; got K={K}, C={C}."
            )
        self.K, self.C = K, C
        self.generator = torch.Generator().manual_seed(seed)

    def sample(self, n: int):
        g = self.generator
        symbols = torch.argsort(torch.rand(n, self.K, generator=g), dim=1)  # (n, K)
        colours = torch.randint(self.C, (n, self.K), generator=g)  # (n, K)
        where = symbols.argsort(dim=1)  # (n, K): where[b, a] = position of symbol a
        successor_pos = where.gather(1, (symbols + 1) % self.K)  # (n, K)
        targets = colours.gather(1, successor_pos)  # (n, K)
        return symbols, colours, targets, successor_pos


class OneHead(nn.Module):
    """One bidirectional attention head over (symbol, colour) tokens.

    ``forward(symbols, colours)``: (B, K), (B, K) -> logits over colours (B, K, C) and the
    attention weights (B, K, K). ``tied=True`` uses W_Q for the keys as well.
    """

    def __init__(self, K: int, C: int, d: int, tied: bool):
        super().__init__()
        self.sym, self.col = nn.Embedding(K, d), nn.Embedding(C, d)
        self.W_Q = nn.Linear(d, d, bias=False)
        self.W_K = self.W_Q if tied else nn.Linear(d, d, bias=False)
        self.W_V = nn.Linear(d, d, bias=False)
        self.read_out = nn.Linear(d, C)

    def scores(self, symbols: torch.Tensor, colours: torch.Tensor) -> torch.Tensor:
        x = self.sym(symbols) + self.col(colours)  # (B, K, d)
        q, k = self.W_Q(x), self.W_K(x)  # (B, K, d) each
        return q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])  # (B, K, K)

    def forward(self, symbols: torch.Tensor, colours: torch.Tensor):
        x = self.sym(symbols) + self.col(colours)  # (B, K, d)
        weights = self.scores(symbols, colours).softmax(dim=-1)  # (B, K, K)
        return self.read_out(weights @ self.W_V(x)), weights  # (B, K, C), (B, K, K)


def train_successor(tied: bool, seed: int = 0, **overrides) -> dict:
    """Train ``OneHead`` on ``SuccessorTask`` (``QK_SETTINGS`` + overrides).

    Returns {"model", "loss" (mean of the last 20 steps), "accuracy" and "on_successor" (mean
    attention weight on the successor) on 1,024 fresh sequences}."""
    c = {**QK_SETTINGS, **overrides}
    torch.manual_seed(seed)
    model = OneHead(c["K"], c["C"], c["d"], tied)
    task = SuccessorTask(c["K"], c["C"], seed=seed)
    opt = torch.optim.Adam(model.parameters(), lr=c["lr"])
    losses = []
    for _ in range(c["steps"]):
        symbols, colours, targets, _ = task.sample(c["batch_size"])
        logits, _ = model(symbols, colours)  # (B, K, C)
        loss = F.cross_entropy(logits.reshape(-1, c["C"]), targets.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    with torch.no_grad():
        symbols, colours, targets, succ = task.sample(1024)
        logits, weights = model(symbols, colours)
        accuracy = (logits.argmax(-1) == targets).float().mean().item()
        on_successor = weights.gather(2, succ[..., None]).mean().item()
    return {
        "model": model,
        "loss": sum(losses[-20:]) / 20,
        "accuracy": accuracy,
        "on_successor": on_successor,
    }
