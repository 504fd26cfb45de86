"""Evaluation beyond the loss (course_lib.labs.evaluate): binomial intervals against scipy and an
exact computation, and the multiple-choice items and scorer."""

from __future__ import annotations

import math

import pytest
import torch

from course_lib.data import CharTokenizer
from course_lib.labs.evaluate import (
    MCItem,
    binomial_tail,
    choice_scores,
    clopper_pearson_interval,
    items_to_resolve,
    multiple_choice_accuracy,
    next_line_items,
    wilson_interval,
)
from course_lib.model import GPTConfig, MiniGPT

CASES = [(0, 10), (3, 10), (10, 10), (57, 200), (130, 400), (1, 1500)]


@pytest.mark.parametrize("k,n", CASES)
def test_intervals_match_scipy(k, n):
    stats = pytest.importorskip("scipy.stats")
    ci = stats.binomtest(k, n).proportion_ci(confidence_level=0.95, method="wilson")
    assert wilson_interval(k, n) == pytest.approx((ci.low, ci.high), abs=1e-9)
    ci = stats.binomtest(k, n).proportion_ci(confidence_level=0.95, method="exact")
    assert clopper_pearson_interval(k, n) == pytest.approx((ci.low, ci.high), abs=1e-9)


def test_clopper_pearson_ends_have_exact_tails():
    k, n = 7, 30
    lo, hi = clopper_pearson_interval(k, n, 0.9)
    exact = lambda p, ks: sum(math.comb(n, i) * p**i * (1 - p) ** (n - i) for i in ks)  # noqa: E731
    assert exact(lo, range(k, n + 1)) == pytest.approx(0.05, abs=1e-9)
    assert exact(hi, range(0, k + 1)) == pytest.approx(0.05, abs=1e-9)
    assert binomial_tail(k, n, 0.3, True) == pytest.approx(exact(0.3, range(k, n + 1)))


def test_wilson_covers_about_95_percent():
    g = torch.Generator().manual_seed(0)
    n, p = 100, 0.3
    ks = torch.binomial(torch.full((2000,), float(n)), torch.full((2000,), p), generator=g)
    cover = sum(lo <= p <= hi for lo, hi in (wilson_interval(int(k), n) for k in ks))
    assert 0.93 < cover / 2000 < 0.97


def test_intervals_reject_bad_counts():
    with pytest.raises(ValueError, match="0 <= k <= n"):
        wilson_interval(5, 3)
    with pytest.raises(ValueError, match="confidence"):
        clopper_pearson_interval(1, 3, 1.5)


def test_next_line_items():
    plays = {"A": [f"line number {i}" for i in range(40)]}
    items = next_line_items(plays, 30, seed=0)
    for it in items:
        assert len(set(it.choices)) == 4
        real = int(it.context.strip().rsplit(" ", 1)[-1]) + 1  # the line after the context
        assert it.choices[it.answer] == f"line number {real}"
    assert len({it.answer for it in items}) > 1  # the right answer is not always first


def test_multiple_choice_scorer_matches_per_choice_loop():
    torch.manual_seed(0)
    tok = CharTokenizer("abcdef \n")
    model = MiniGPT(GPTConfig(vocab_size=8, block_size=20, n_layer=1, n_head=2, d_model=16))
    model.eval()
    item = MCItem("ab ", ("cde", "f", "aaaa", "bd"), 0)
    got = choice_scores(model, tok, item)
    for c, s in zip(item.choices, got):
        ids = tok.encode("ab " + c + "\n")
        logp = torch.log_softmax(model(ids[None, :-1])[0][0].double(), -1)
        want = sum(logp[t - 1, ids[t]].item() for t in range(3, len(ids))) / (len(c) + 1)
        assert s.item() == pytest.approx(want, abs=1e-4)
    right, n = multiple_choice_accuracy(model, tok, [item] * 3)
    assert n == 3 and right in (0, 3)


def test_items_to_resolve_separates_the_wilson_intervals():
    # at the returned size, two accuracies `gap` apart have (nearly) touching Wilson intervals;
    # at a quarter of it they overlap by about one gap
    p, gap = 0.33, 0.03
    n = items_to_resolve(p, gap)
    lo_hi = wilson_interval(round((p + gap) * n), n)[0]
    hi_lo = wilson_interval(round(p * n), n)[1]
    assert abs(lo_hi - hi_lo) < 0.1 * gap
    small = n // 4
    assert (
        wilson_interval(round(p * small), small)[1]
        - wilson_interval(round((p + gap) * small), small)[0]
        > 0.5 * gap
    )
    with pytest.raises(ValueError, match="fractions"):
        items_to_resolve(0.3, 3)


# --------------------------------------------------------------------------- paired: McNemar
def test_mcnemar_counts_and_p_match_scipy_binomtest():
    stats = pytest.importorskip("scipy.stats")
    from course_lib.labs.evaluate import mcnemar_test

    gen = torch.Generator().manual_seed(3)
    a = (torch.rand(200, generator=gen) < 0.4).tolist()
    b = [x if torch.rand(1, generator=gen) < 0.7 else not x for x in a]  # mostly the same
    r = mcnemar_test(a, b)
    only_a = sum(x and not y for x, y in zip(a, b))
    only_b = sum(y and not x for x, y in zip(a, b))
    assert (r["only_a"], r["only_b"], r["n"]) == (only_a, only_b, 200)
    assert r["both"] + r["only_a"] + r["only_b"] + r["neither"] == 200
    assert r["p"] == pytest.approx(stats.binomtest(only_a, only_a + only_b, 0.5).pvalue)
    # the exact two-sided p-value by hand: twice the smaller tail of Binomial(d, 1/2)
    d, k = only_a + only_b, min(only_a, only_b)
    tail = sum(math.comb(d, i) for i in range(k + 1)) / 2**d
    assert r["p"] == pytest.approx(min(1.0, 2 * tail))
    # the items both get right (or wrong) do not enter: adding some changes nothing
    more = mcnemar_test(a + [True] * 50 + [False] * 50, b + [True] * 50 + [False] * 50)
    assert more["p"] == r["p"]
    assert mcnemar_test([True, False], [True, False])["p"] == 1.0
    with pytest.raises(ValueError, match="same number"):
        mcnemar_test([True], [True, False])


@pytest.mark.parametrize("n,p_disagree,gap", [(40, 0.5, 0.2), (60, 0.3, 0.1), (25, 0.8, 0.4)])
def test_mcnemar_power_matches_binomtest_rejections(n, p_disagree, gap):
    """The exact power, summed item count by item count with scipy's binomtest deciding each
    outcome (a brute force over every number of disagreements and of wins)."""
    stats = pytest.importorskip("scipy.stats")
    from course_lib.labs.evaluate import mcnemar_power

    q = (p_disagree + gap) / (2 * p_disagree)
    power = 0.0
    for d in range(1, n + 1):  # no disagreement (d = 0): no evidence, no rejection
        p_d = stats.binom.pmf(d, n, p_disagree)
        for k in range(d + 1):
            if stats.binomtest(k, d, 0.5).pvalue <= 0.05:
                power += p_d * stats.binom.pmf(k, d, q)
    assert mcnemar_power(n, p_disagree, gap) == pytest.approx(power, abs=1e-9)


def test_paired_items_needed_is_the_first_n_with_the_power_and_near_connor():
    from statistics import NormalDist

    from course_lib.labs.evaluate import mcnemar_power, paired_items_needed

    p_d, gap = 0.3, 0.06
    n = paired_items_needed(p_d, gap)
    assert mcnemar_power(n, p_d, gap) >= 0.8 > mcnemar_power(n - 1, p_d, gap)
    # Connor's (1987) normal approximation for McNemar's test lands close to the exact count
    za, zb = NormalDist().inv_cdf(0.975), NormalDist().inv_cdf(0.8)
    connor = (za * math.sqrt(p_d) + zb * math.sqrt(p_d - gap**2)) ** 2 / gap**2
    assert n == pytest.approx(connor, rel=0.1)
    # models that disagree less are easier to tell apart
    assert paired_items_needed(0.15, gap) < n
    with pytest.raises(ValueError, match="gap <= p_disagree"):
        paired_items_needed(0.05, 0.1)
