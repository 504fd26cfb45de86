"""What an embedding's width buys, and what arithmetic on trained vectors can do (Chapter 3).

**Width.** ``train_factored_bigram`` fits the smallest model that has an embedding: the next
character predicted from the current one through a d-dimensional vector,
logits(next | a) = E[a] Uᵀ + c, with E (V, d), U (V, d), c (V,): 2Vd + V parameters against
the V² of a full bigram table. It trains on the corpus's bigram counts (the exact full-batch
loss of every pair in the text, so one step costs V²d, not the corpus's length), and
``width_sweep`` measures the held-out loss for several d. The loss falls steeply for small d
and flattens once d is large enough to hold the bigram statistics: past that point width costs
parameters and buys nothing (for this model; a transformer's width also carries the context
its layers compute, so it is set by what they need).

**Arithmetic.** ``case_analogies`` tests the offset method of word2vec (Mikolov, Yih & Zweig
2013, "a − b + c ≈ d") on the character embeddings of the course's pretrained model: does
E[y] − E[Y] + E[X] land nearest to E[x] (lower − upper + upper = lower) for every pair of
letters? It reports the hit rate with the three query characters excluded from the answers
(the usual, generous protocol), without that exclusion, and a baseline that ignores the
offset (the nearest neighbour of E[X] alone, excluding X), so the offset's own contribution
can be read off (Linzen 2016).
"""

from __future__ import annotations

import string

import torch
import torch.nn.functional as F

__all__ = [
    "bigram_counts",
    "bigram_table_loss",
    "factored_bigram_params",
    "train_factored_bigram",
    "width_sweep",
    "case_pairs",
    "case_analogies",
]


def bigram_counts(ids: torch.Tensor, V: int) -> torch.Tensor:
    """Counts of every (current, next) pair in a 1-D id sequence: (V, V) float64, row = current."""
    if ids.dim() != 1 or ids.numel() < 2:
        raise ValueError("bigram_counts: ids must be a 1-D sequence of at least two ids.")
    pairs = ids[:-1].long() * V + ids[1:].long()  # (N - 1,)
    return torch.bincount(pairs, minlength=V * V).reshape(V, V).double()


def _mean_nll(logits: torch.Tensor, counts: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy (nats per pair) of row-wise logits (V, V) under pair counts (V, V)."""
    return -(counts * torch.log_softmax(logits, dim=-1)).sum() / counts.sum()


def bigram_table_loss(train: torch.Tensor, val: torch.Tensor, alpha: float = 0.1) -> float:
    """Held-out loss of the full V × V bigram table (add-alpha smoothed counts, so a pair never
    seen in training keeps a little probability): the limit a factored model approaches."""
    probs = (train + alpha) / (train + alpha).sum(-1, keepdim=True)  # (V, V)
    return float(_mean_nll(probs.log(), val))


def factored_bigram_params(V: int, d: int) -> int:
    """Parameters of E (V, d), U (V, d) and c (V,)."""
    return 2 * V * d + V


def train_factored_bigram(
    train: torch.Tensor,
    val: torch.Tensor,
    d: int,
    steps: int = 400,
    lr: float = 0.05,
    seed: int = 0,
) -> dict:
    """Fit logits(next | a) = E[a] Uᵀ + c to bigram counts ``train`` (V, V) by full-batch Adam.

    Returns {"d", "params", "train_loss", "val_loss"} (nats per character pair; ``val`` (V, V)
    are the held-out counts). Seeded; float64, so it does not depend on the thread count.
    """
    if d < 1 or train.shape != val.shape or train.dim() != 2 or train.shape[0] != train.shape[1]:
        raise ValueError("train_factored_bigram: need d >= 1 and two (V, V) count matrices.")
    V = train.shape[0]
    g = torch.Generator().manual_seed(seed)
    E = (torch.randn(V, d, generator=g, dtype=torch.float64) / d**0.5).requires_grad_()
    U = (torch.randn(V, d, generator=g, dtype=torch.float64) / d**0.5).requires_grad_()
    c = torch.zeros(V, dtype=torch.float64, requires_grad=True)
    opt = torch.optim.Adam([E, U, c], lr=lr)
    for _ in range(steps):
        loss = _mean_nll(E @ U.T + c, train)  # (V, V) logits: every pair of the text at once
        opt.zero_grad()
        loss.backward()
        opt.step()
    with torch.no_grad():
        logits = E @ U.T + c
        return {
            "d": d,
            "params": factored_bigram_params(V, d),
            "train_loss": float(_mean_nll(logits, train)),
            "val_loss": float(_mean_nll(logits, val)),
        }


def width_sweep(train: torch.Tensor, val: torch.Tensor, widths, **options) -> list[dict]:
    """``train_factored_bigram`` for each d in ``widths``."""
    return [train_factored_bigram(train, val, int(d), **options) for d in widths]


def case_pairs(itos: list[str]) -> list[tuple[str, str]]:
    """(lower, upper) for every letter whose two cases are both in the vocabulary ``itos``."""
    have = set(itos)
    return [(c, c.upper()) for c in string.ascii_lowercase if c in have and c.upper() in have]


def case_analogies(E: torch.Tensor, itos: list[str]) -> dict:
    """The offset method on letter case: for every ordered pair of letters (x, y), x ≠ y, the
    query E[y] − E[Y] + E[X] (Y, X upper case) should be nearest, by cosine, to E[x].

    E (V, d): one row per character of ``itos``. Returns the number of ``tests`` and the hit
    rates ``offset`` (the three query characters excluded from the answers), ``offset_all``
    (nothing excluded) and ``baseline`` (the nearest neighbour of E[X] alone, X excluded: is x
    the nearest character to X anyway?), with the mean cosine ``offset_cos`` between the case
    offsets E[x] − E[X] of different letters (1 if every letter had the same offset), and
    ``misses``: for up to 10 failed analogies, (y, Y, X, wanted x, the answer).
    """
    pairs = case_pairs(itos)
    if len(pairs) < 2:
        raise ValueError("case_analogies: the vocabulary needs two letters in both cases.")
    stoi = {ch: i for i, ch in enumerate(itos)}
    unit = F.normalize(E.double(), dim=-1)  # (V, d)
    offsets = torch.stack([E[stoi[lo]] - E[stoi[up]] for lo, up in pairs]).double()  # (L, d)
    cos = F.normalize(offsets, dim=-1) @ F.normalize(offsets, dim=-1).T  # (L, L)
    L = len(pairs)
    hits = {"offset": 0, "offset_all": 0, "baseline": 0}
    misses = []
    for x_lo, x_up in pairs:
        base = unit @ unit[stoi[x_up]]  # (V,): cosine of every character with X
        base[stoi[x_up]] = -2.0
        hits["baseline"] += int(int(base.argmax()) == stoi[x_lo])
        for y_lo, y_up in pairs:
            if y_lo == x_lo:
                continue
            query = E[stoi[y_lo]] - E[stoi[y_up]] + E[stoi[x_up]]  # (d,)
            sims = unit @ F.normalize(query.double(), dim=0)  # (V,)
            hits["offset_all"] += int(int(sims.argmax()) == stoi[x_lo])
            sims[[stoi[y_lo], stoi[y_up], stoi[x_up]]] = -2.0  # the usual exclusion
            answer = int(sims.argmax())
            if answer == stoi[x_lo]:
                hits["offset"] += 1
            elif len(misses) < 10:
                misses.append((y_lo, y_up, x_up, x_lo, itos[answer]))
    tests = L * (L - 1)
    return {
        "letters": L,
        "tests": tests,
        "offset": hits["offset"] / tests,
        "offset_all": hits["offset_all"] / tests,
        "baseline": hits["baseline"] / L,
        "offset_cos": float((cos.sum() - L) / (L * (L - 1))),
        "misses": misses,
    }
