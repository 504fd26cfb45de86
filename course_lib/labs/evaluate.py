"""Evaluation beyond the loss: a completion's log-probability, a held-out multiple-choice test
and binomial confidence intervals (Chapter 13; usable on any model from Chapter 8 on).

**Multiple choice: which is the real next line?** Each item is a context (the text just before
a spoken line of a held-out play) and four candidate lines: the real next line and three other
lines of the same play. A model picks the candidate it gives the highest mean log-probability
per character after the context (``completion_logprobs``; the mean, not the sum, so a short
candidate is not favoured for being short). Guessing scores 1/4 on average.

**How sure is an accuracy?** k right out of n is an estimate of the probability p of being
right; ``wilson_interval`` (Wilson 1927: the p whose normal test would not reject k/n) and
``clopper_pearson_interval`` (the exact interval from the binomial distribution's tails,
found here by bisection on sums of ``math.comb`` terms) give 95 % intervals. The tests
compare both with ``scipy.stats.binomtest``.

**Is one model better than another?** Two models scored on the same items are paired data:
``mcnemar_test`` (McNemar 1947) uses only the items on which they disagree, b that only the
first gets right and c that only the second does, and asks whether b out of b + c is
compatible with a fair coin (the exact binomial test, ``scipy.stats.binomtest``).
``mcnemar_power`` is that test's exact power for a given disagreement rate and difference of
accuracies, and ``paired_items_needed`` the number of items at which it reaches a power.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np
import torch
import torch.nn.functional as F

__all__ = [
    "completion_logprobs",
    "MCItem",
    "next_line_items",
    "choice_scores",
    "multiple_choice_correct",
    "multiple_choice_accuracy",
    "mcnemar_test",
    "mcnemar_power",
    "paired_items_needed",
    "wilson_interval",
    "binomial_tail",
    "clopper_pearson_interval",
]


def completion_logprobs(model, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Sum of log p(ids[b, t] | ids[b, :t]) over the positions t where mask[b, t] is True:
    the log-probability of the completion the mask marks, given everything before it.

    ids (B, T) int64, mask (B, T) bool with mask[:, 0] False (the first token has no
    context); returns (B,) float, differentiable with respect to the model's weights."""
    if ids.shape != mask.shape or ids.dim() != 2:
        raise ValueError(
            f"completion_logprobs: need ids and mask of the same (B, T) shape; got "
            f"{tuple(ids.shape)} and {tuple(mask.shape)}."
        )
    if mask[:, 0].any():
        raise ValueError(
            "completion_logprobs: mask[:, 0] must be False: the first token has no context."
        )
    logits, _ = model(ids[:, :-1])  # (B, T-1, V): row t predicts token t + 1
    logp = F.log_softmax(logits.float(), dim=-1)  # (B, T-1, V)
    picked = logp.gather(-1, ids[:, 1:, None])[..., 0]  # (B, T-1)
    return (picked * mask[:, 1:]).sum(dim=1)  # (B,)


@dataclass(frozen=True)
class MCItem:
    """A context, its candidate continuations and the index of the right one."""

    context: str
    choices: tuple[str, ...]
    answer: int


def next_line_items(
    plays: dict[str, list[str]],
    n_items: int,
    n_choices: int = 4,
    context_chars: int = 24,
    max_line: int = 36,
    seed: int = 0,
) -> list[MCItem]:
    """``n_items`` items "which line comes next?": context = the last ``context_chars``
    characters before a line (lines joined by newlines), choices = that line and
    ``n_choices - 1`` other lines of the same play (all at most ``max_line`` characters),
    in random order; the right answer's position is uniform."""
    if n_choices < 2 or n_items < 1:
        raise ValueError("next_line_items: need n_choices >= 2 and n_items >= 1.")
    rng = random.Random(seed)
    pool = []
    for lines in plays.values():
        short = [ln for ln in lines if len(ln) <= max_line]
        for i in range(1, len(lines)):
            before = "\n".join(lines[max(0, i - 4) : i]) + "\n"
            if len(lines[i]) <= max_line and len(before) > context_chars:
                pool.append((before[-context_chars:], lines[i], short))
    if len(pool) < n_items:
        raise ValueError(f"next_line_items: only {len(pool)} candidate items; ask for fewer.")
    items = []
    for context, real, short in rng.sample(pool, n_items):
        others = set()
        while len(others) < n_choices - 1:
            ln = rng.choice(short)
            if ln != real:
                others.add(ln)
        choices = sorted(others)
        answer = rng.randrange(n_choices)
        choices.insert(answer, real)
        items.append(MCItem(context, tuple(choices), answer))
    return items


@torch.no_grad()
def choice_scores(model, tok, item: MCItem, normalise: bool = True) -> torch.Tensor:
    """(n_choices,) score of each candidate: its log-probability after the context (each
    candidate followed by a newline, the end of a line), divided by its length with
    ``normalise``."""
    seqs = [tok.encode(item.context + c + "\n") for c in item.choices]
    L = max(len(s) for s in seqs)
    if L - 1 > model.cfg.block_size:
        raise ValueError(
            f"choice_scores: context + choice is {L} tokens, more than block_size + 1; "
            "use a shorter context or shorter lines."
        )
    n_ctx = len(tok.encode(item.context))
    ids = torch.zeros(len(seqs), L, dtype=torch.long)  # (C, L), padded with token 0
    mask = torch.zeros(len(seqs), L, dtype=torch.bool)  # (C, L): the candidate's tokens
    for i, s in enumerate(seqs):
        ids[i, : len(s)] = s
        mask[i, n_ctx : len(s)] = True
    scores = completion_logprobs(model, ids, mask).double()  # (C,)
    if normalise:
        scores = scores / mask.sum(dim=1)
    return scores


def multiple_choice_correct(model, tok, items: list[MCItem], normalise: bool = True) -> list[bool]:
    """For each item, whether the model's pick (the highest score) is the right answer."""
    was_training = model.training
    model.eval()
    right = [int(choice_scores(model, tok, it, normalise).argmax()) == it.answer for it in items]
    model.train(was_training)
    return right


def multiple_choice_accuracy(model, tok, items: list[MCItem], normalise: bool = True):
    """(number right, number of items) of the model's picks (the highest score)."""
    return sum(multiple_choice_correct(model, tok, items, normalise)), len(items)


def mcnemar_test(a_right, b_right) -> dict:
    """McNemar's exact test of two models scored on the same items.

    ``a_right``, ``b_right``: one bool per item (the same items, in the same order). Returns
    the 2 x 2 counts (``both``, ``only_a``, ``only_b``, ``neither``) and ``p``, the two-sided
    p-value of the exact binomial test of only_a out of only_a + only_b at 1/2 (1 when the two
    never disagree). The items both get right or both get wrong say nothing about which is
    better, so they do not enter."""
    from scipy.stats import binomtest

    a, b = [bool(x) for x in a_right], [bool(x) for x in b_right]
    if len(a) != len(b) or not a:
        raise ValueError(
            f"mcnemar_test: need the same number (>= 1) of results for both models; got "
            f"{len(a)} and {len(b)}."
        )
    only_a = sum(x and not y for x, y in zip(a, b))
    only_b = sum(y and not x for x, y in zip(a, b))
    both = sum(x and y for x, y in zip(a, b))
    disagree = only_a + only_b
    p = binomtest(only_a, disagree, 0.5).pvalue if disagree else 1.0
    return {
        "n": len(a),
        "both": both,
        "only_a": only_a,
        "only_b": only_b,
        "neither": len(a) - both - disagree,
        "p": float(p),
    }


def _check_paired(p_disagree: float, gap: float, alpha: float) -> None:
    if not (0 < p_disagree <= 1 and 0 < gap <= p_disagree and 0 < alpha < 1):
        raise ValueError(
            "need 0 < gap <= p_disagree <= 1 and 0 < alpha < 1 (the accuracies can differ by "
            f"at most the share of items the models disagree on); got p_disagree={p_disagree}, "
            f"gap={gap}, alpha={alpha}."
        )


def mcnemar_power(n: int, p_disagree: float, gap: float, alpha: float = 0.05) -> float:
    """The exact power of ``mcnemar_test`` at level ``alpha`` on ``n`` items, for two models
    that disagree on a share ``p_disagree`` of the items and whose accuracies differ by ``gap``
    (fractions). Then the number of disagreements d is Binomial(n, p_disagree), and of those
    the first model wins Binomial(d, q) with q = (p_disagree + gap) / (2 p_disagree); the test
    rejects when min(only_a, only_b) <= c_d, c_d the largest count whose two tails at 1/2 sum
    to at most alpha. Power = sum over d of P(d) P(reject | d)."""
    from scipy.stats import binom

    _check_paired(p_disagree, gap, alpha)
    d = np.arange(n + 1)  # (n + 1,): every possible number of disagreements
    # c_d: the largest c with P(X <= c) <= alpha / 2 for X ~ Binomial(d, 1/2) (-1: none)
    c = binom.ppf(alpha / 2, d, 0.5)
    c = np.where(binom.cdf(c, d, 0.5) > alpha / 2, c - 1, c)  # (n + 1,)
    q = (p_disagree + gap) / (2 * p_disagree)
    reject = np.where(c >= 0, binom.cdf(c, d, q) + binom.sf(d - c - 1, d, q), 0.0)  # (n + 1,)
    return float((binom.pmf(d, n, p_disagree) * reject).sum())


def paired_items_needed(
    p_disagree: float, gap: float, alpha: float = 0.05, power: float = 0.8
) -> int:
    """The number of items at which ``mcnemar_test`` detects a difference ``gap`` between two
    accuracies with probability ``power``, for models that disagree on a share ``p_disagree``
    of the items: the first n (by doubling, then bisection) with ``mcnemar_power`` >= power.
    (The exact power wiggles slightly with n, so a neighbouring n can fall just short.)"""
    _check_paired(p_disagree, gap, alpha)
    if not 0 < power < 1:
        raise ValueError(f"paired_items_needed: power must lie in (0, 1); got {power}.")
    hi = 16
    while mcnemar_power(hi, p_disagree, gap, alpha) < power:
        hi *= 2
    lo = hi // 2  # power(lo) < power (or lo is below the first tried)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if mcnemar_power(mid, p_disagree, gap, alpha) >= power else (mid, hi)
    return hi


def _check_counts(k: int, n: int, confidence: float, name: str) -> None:
    if not (isinstance(k, int) and isinstance(n, int) and 0 <= k <= n and n >= 1):
        raise ValueError(f"{name}: need integers 0 <= k <= n and n >= 1; got k={k}, n={n}.")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"{name}: confidence must lie in (0, 1); got {confidence}.")


def wilson_interval(k: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson's score interval for a binomial proportion k/n:
    (p̂ + z²/2n ± z·sqrt(p̂(1-p̂)/n + z²/4n²)) / (1 + z²/n), z the normal quantile."""
    _check_counts(k, n, confidence, "wilson_interval")
    z = NormalDist().inv_cdf(0.5 + confidence / 2)
    p = k / n
    centre = p + z * z / (2 * n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return (centre - half) / (1 + z * z / n), (centre + half) / (1 + z * z / n)


def items_to_resolve(p: float, gap: float, confidence: float = 0.95) -> int:
    """How many items a test needs so that two accuracies ``gap`` apart (both near ``p``, as
    fractions) have intervals that no longer overlap: each normal-approximation half-width
    z * sqrt(p (1 - p) / n) must shrink to gap / 2."""
    if not 0 < p < 1 or not 0 < gap < 1:
        raise ValueError(f"p={p} and gap={gap} must be fractions strictly between 0 and 1")
    z = NormalDist().inv_cdf(0.5 + confidence / 2)
    return math.ceil((2 * z / gap) ** 2 * p * (1 - p))


def binomial_tail(k: int, n: int, p: float, upper: bool) -> float:
    """P(X >= k) (``upper``) or P(X <= k) for X ~ Binomial(n, p): the sum of the terms
    C(n, i) p^i (1-p)^(n-i), each computed through logarithms (no overflow for large n)."""
    terms = range(k, n + 1) if upper else range(0, k + 1)
    if p <= 0.0 or p >= 1.0:  # the distribution sits on 0 (p = 0) or on n (p = 1)
        return float((0 if p <= 0.0 else n) in terms)
    lc = math.lgamma(n + 1)
    return sum(
        math.exp(
            lc
            - math.lgamma(i + 1)
            - math.lgamma(n - i + 1)
            + i * math.log(p)
            + (n - i) * math.log1p(-p)
        )
        for i in terms
    )


def clopper_pearson_interval(k: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """The exact (Clopper–Pearson) interval: the lower end is the p with P(X >= k) = α/2, the
    upper end the p with P(X <= k) = α/2 (0 and 1 when k = 0 or k = n), each found by
    bisection (the tails are monotone in p)."""
    _check_counts(k, n, confidence, "clopper_pearson_interval")
    alpha = 1 - confidence

    def solve(f) -> float:  # the root of an increasing function on [0, 1]
        lo, hi = 0.0, 1.0
        for _ in range(60):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if f(mid) < 0 else (lo, mid)
        return (lo + hi) / 2

    lower = 0.0 if k == 0 else solve(lambda p: binomial_tail(k, n, p, True) - alpha / 2)
    upper = 1.0 if k == n else solve(lambda p: alpha / 2 - binomial_tail(k, n, p, False))
    return lower, upper
