"""Tokens to vectors: one-hot codes, embedding lookups and a toy embedding that learns.

Chapter 3 shows that looking up row i of an embedding matrix E (V, d) is the same as
multiplying the one-hot vector of i by E, and then trains a tiny 2-D embedding so the reader
can watch related tokens move together. The tests check every function against
``torch.nn.functional`` and autograd.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

__all__ = [
    "one_hot",
    "embedding_lookup",
    "cosine_matrix",
    "group_similarity",
    "TOY_GROUPS",
    "toy_vocab",
    "toy_skipgram_pairs",
    "train_toy_embeddings",
]

#: The toy vocabulary of Chapter 3: three groups of words that occur with each other.
TOY_GROUPS: dict[str, list[str]] = {
    "animal": ["cat", "dog", "horse"],
    "fruit": ["apple", "pear", "plum"],
    "colour": ["red", "green", "blue"],
}


def _check_ids(fn: str, ids: torch.Tensor, V: int) -> None:
    if ids.dtype in (torch.float16, torch.float32, torch.float64, torch.bfloat16, torch.bool):
        raise ValueError(f"{fn}: token ids must be integers; got dtype {ids.dtype}. Use .long().")
    if ids.numel() and (ids.min() < 0 or ids.max() >= V):
        raise ValueError(
            f"{fn}: token ids must lie in [0, {V - 1}] for a vocabulary of {V}; got ids from "
            f"{int(ids.min())} to {int(ids.max())}."
        )


def one_hot(ids, V: int) -> torch.Tensor:
    """One-hot vectors: row t is all zeros except a 1 at column ids[t].

    Shapes: ids (...,) integer token ids in [0, V) -> (..., V) float32.
    """
    ids = torch.as_tensor(ids)
    if V < 1:
        raise ValueError(f"one_hot: the vocabulary size V must be positive; got {V}.")
    _check_ids("one_hot", ids, V)
    return F.one_hot(ids.long(), num_classes=V).float()  # (..., V)


def embedding_lookup(E: torch.Tensor, ids) -> torch.Tensor:
    """Rows of the embedding matrix: E[ids].

    Shapes: E (V, d), ids (...,) integers in [0, V) -> (..., d). Equal to
    ``one_hot(ids, V) @ E``, without building the (..., V) one-hot matrix.
    """
    if E.dim() != 2:
        raise ValueError(
            f"embedding_lookup: E must be a (V, d) matrix; got shape {tuple(E.shape)}."
        )
    ids = torch.as_tensor(ids)
    _check_ids("embedding_lookup", ids, E.shape[0])
    return E[ids.long()]  # (..., d)


def cosine_matrix(X: torch.Tensor) -> torch.Tensor:
    """Cosine similarity of every row of X with every other row.

    Shapes: X (N, d) -> (N, N), entries in [-1, 1], ones on the diagonal.
    """
    if X.dim() != 2:
        raise ValueError(f"cosine_matrix: X must be (N, d); got shape {tuple(X.shape)}.")
    norms = X.norm(dim=1, keepdim=True)  # (N, 1)
    if (norms == 0).any():
        raise ValueError("cosine_matrix: a row of X is all zeros and has no direction.")
    U = X / norms  # (N, d) unit rows
    return U @ U.T  # (N, N)


def group_similarity(E: torch.Tensor, groups: list[int]) -> tuple[float, float]:
    """Mean cosine similarity of (within-group pairs, between-group pairs) of rows of E.

    Shapes: E (V, d); groups: V group labels. Returns two Python floats; the diagonal
    (a row with itself) is left out.
    """
    if len(groups) != E.shape[0]:
        raise ValueError(
            f"group_similarity: need one group label per row of E ({E.shape[0]}); got "
            f"{len(groups)}."
        )
    C = cosine_matrix(E.detach().double())  # (V, V)
    g = torch.as_tensor(groups)
    same = g[:, None] == g[None, :]  # (V, V)
    off_diag = ~torch.eye(len(groups), dtype=torch.bool)
    return float(C[same & off_diag].mean()), float(C[~same].mean())


def toy_vocab(groups: dict[str, list[str]] | None = None) -> tuple[list[str], list[int]]:
    """The words of ``groups`` (default ``TOY_GROUPS``) and each word's group number."""
    groups = TOY_GROUPS if groups is None else groups
    words, labels = [], []
    for g, members in enumerate(groups.values()):
        words += members
        labels += [g] * len(members)
    return words, labels


def toy_skipgram_pairs(labels: list[int]) -> torch.Tensor:
    """(centre, context) id pairs: every ordered pair of different words in the same group.

    This is the skip-gram idea of word2vec on a toy corpus in which words only ever appear
    next to words of their own group. Returns (N, 2) long.
    """
    pairs = [
        (i, j)
        for i in range(len(labels))
        for j in range(len(labels))
        if i != j and labels[i] == labels[j]
    ]
    return torch.tensor(pairs, dtype=torch.long)  # (N, 2)


def train_toy_embeddings(
    d: int = 2,
    steps: int = 100,
    lr: float = 0.5,
    seed: int = 0,
    groups: dict[str, list[str]] | None = None,
) -> dict:
    """Train a skip-gram embedding on the toy corpus and return it before and after.

    Model: logits = E[centre] @ Uᵀ, a score for every possible context word, trained with
    cross-entropy by plain full-batch gradient descent. E (V, d) is the embedding table we
    look at; U (V, d) is the output table.

    Returns a dict with ``words`` (V names), ``labels`` (V group ids), ``before`` and
    ``after`` (V, d) copies of E, ``losses`` (steps + 1 floats: the loss before each step
    and after the last) and ``grad_rows`` (which rows of E got a non-zero gradient on the
    first step, for a batch that uses only some words).
    """
    if d < 1 or steps < 1 or lr <= 0:
        raise ValueError(
            f"train_toy_embeddings: need d >= 1, steps >= 1, lr > 0; got d={d}, steps={steps}, "
            f"lr={lr}."
        )
    words, labels = toy_vocab(groups)
    V = len(words)
    gen = torch.Generator().manual_seed(seed)
    E = (0.5 * torch.randn(V, d, generator=gen)).requires_grad_()  # (V, d) the embedding table
    U = (0.5 * torch.randn(V, d, generator=gen)).requires_grad_()  # (V, d) the output table
    pairs = toy_skipgram_pairs(labels)  # (N, 2)
    centre, context = pairs[:, 0], pairs[:, 1]  # (N,), (N,)
    before = E.detach().clone()
    opt = torch.optim.SGD([E, U], lr=lr)
    losses = []
    for _ in range(steps):
        logits = E[centre] @ U.T  # (N, V): every context word scored for every centre word
        loss = F.cross_entropy(logits, context)
        losses.append(loss.item())
        opt.zero_grad()
        loss.backward()
        opt.step()
    with torch.no_grad():
        losses.append(F.cross_entropy(E[centre] @ U.T, context).item())
    # Which rows does one mini-batch touch? Only the looked-up ones get a gradient.
    E_probe = before.clone().requires_grad_()
    first = centre.tolist()
    probe = torch.tensor([first.index(0), first.index(V // 2)])  # (2,) two pairs, two centre words
    batch = centre[probe]  # (2,)
    F.cross_entropy(E_probe[batch] @ U.detach().T, context[probe]).backward()
    grad_rows = (E_probe.grad.abs().sum(dim=1) > 0).tolist()  # (V,) bools
    return {
        "words": words,
        "labels": labels,
        "before": before,
        "after": E.detach().clone(),
        "losses": losses,
        "grad_rows": grad_rows,
        "probe_batch": batch.tolist(),
    }
