"""course_lib.labs.vector_space: bigram counts against a loop, the factored bigram model's loss
against F.cross_entropy over the text's pairs, its limits (d = V fits the table, more width
never hurts on training data), and the analogy test on a table built so the answers are known."""

import string

import pytest
import torch
import torch.nn.functional as F

from course_lib.labs.vector_space import (
    _mean_nll,
    bigram_counts,
    bigram_table_loss,
    case_analogies,
    case_pairs,
    factored_bigram_params,
    train_factored_bigram,
)


def test_bigram_counts_and_loss_equal_cross_entropy_over_the_pairs():
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(0, 6, (500,), generator=g)
    C = bigram_counts(ids, 6)
    want = torch.zeros(6, 6, dtype=torch.float64)
    for a, b in zip(ids[:-1].tolist(), ids[1:].tolist()):
        want[a, b] += 1
    assert torch.equal(C, want)
    logits = torch.randn(6, 6, generator=g, dtype=torch.float64)
    ce = F.cross_entropy(logits[ids[:-1]], ids[1:])  # every pair of the text, one at a time
    torch.testing.assert_close(_mean_nll(logits, C), ce)


def test_factored_bigram_limits():
    g = torch.Generator().manual_seed(1)
    V = 8
    probs = torch.softmax(2 * torch.randn(V, V, generator=g, dtype=torch.float64), -1)
    ids = [0]
    for _ in range(20_000):
        ids.append(int(torch.multinomial(probs[ids[-1]], 1, generator=g)))
    ids = torch.tensor(ids)
    train, val = bigram_counts(ids[:15_000], V), bigram_counts(ids[15_000:], V)
    p_mle = train / train.sum(-1, keepdim=True)  # the full table's best fit (0 log 0 = 0)
    mle = float(-torch.special.xlogy(train, p_mle).sum() / train.sum())
    runs = [train_factored_bigram(train, val, d, steps=600, lr=0.1) for d in (1, 2, V)]
    assert [r["params"] for r in runs] == [factored_bigram_params(V, d) for d in (1, 2, V)]
    # more width never fits the training pairs worse; at d = V it reaches the table's optimum
    assert runs[0]["train_loss"] > runs[1]["train_loss"] > runs[2]["train_loss"]
    assert runs[2]["train_loss"] == pytest.approx(mle, abs=2e-3)
    assert runs[2]["val_loss"] == pytest.approx(bigram_table_loss(train, val), abs=0.02)


def test_case_analogies_on_a_table_with_a_known_case_direction():
    itos = list(string.ascii_lowercase[:6] + string.ascii_uppercase[:6] + ".!")
    g = torch.Generator().manual_seed(2)
    letters = torch.randn(6, 16, generator=g)
    case = 3 * torch.randn(16, generator=g)
    E = torch.cat([letters + case, letters, torch.randn(2, 16, generator=g)])  # x = X + case
    assert case_pairs(itos) == [(c, c.upper()) for c in "abcdef"]
    r = case_analogies(E, itos)
    assert r["tests"] == 30 and r["offset"] == 1.0 and r["offset_cos"] == pytest.approx(1.0)
    # a table with no shared case direction: the offsets point anywhere
    r0 = case_analogies(torch.randn(14, 16, generator=g), itos)
    assert r0["offset_cos"] < 0.5 and r0["offset"] < 1.0
    with pytest.raises(ValueError, match="two letters"):
        case_analogies(torch.randn(3, 4), ["a", "A", "b"])
