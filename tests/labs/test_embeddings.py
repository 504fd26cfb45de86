"""course_lib.labs.embeddings against torch.nn.functional and autograd."""

import math

import pytest
import torch
import torch.nn.functional as F

from course_lib.labs.embeddings import (
    cosine_matrix,
    embedding_lookup,
    group_similarity,
    one_hot,
    toy_skipgram_pairs,
    toy_vocab,
    train_toy_embeddings,
)


def test_one_hot_matches_torch_and_has_no_similarity():
    ids = torch.tensor([[0, 3, 2], [1, 1, 4]])
    oh = one_hot(ids, 5)
    assert oh.shape == (2, 3, 5)
    torch.testing.assert_close(oh, F.one_hot(ids, 5).float())
    flat = one_hot(torch.arange(5), 5)
    torch.testing.assert_close(flat @ flat.T, torch.eye(5))  # every pair of distinct words: dot 0


def test_lookup_equals_onehot_times_matrix_and_f_embedding():
    g = torch.Generator().manual_seed(0)
    E = torch.randn(7, 4, generator=g)
    ids = torch.tensor([[6, 0, 3], [3, 3, 1]])
    rows = embedding_lookup(E, ids)
    torch.testing.assert_close(rows, one_hot(ids, 7) @ E)
    torch.testing.assert_close(rows, F.embedding(ids, E))


def test_bad_ids_raise():
    E = torch.zeros(4, 2)
    with pytest.raises(ValueError, match=r"\[0, 3\]"):
        embedding_lookup(E, [0, 4])
    with pytest.raises(ValueError, match="integers"):
        one_hot(torch.tensor([0.0, 1.0]), 3)
    with pytest.raises(ValueError, match="negative|\\[0"):
        one_hot([-1], 3)
    with pytest.raises(ValueError, match="V, d"):
        embedding_lookup(torch.zeros(4), [0])


def test_lookup_gradient_reaches_only_used_rows():
    g = torch.Generator().manual_seed(1)
    E = torch.randn(6, 3, generator=g, requires_grad=True)
    ids = torch.tensor([1, 4, 1])
    (embedding_lookup(E, ids) ** 2).sum().backward()
    used = torch.zeros(6, dtype=torch.bool)
    used[ids] = True
    assert (E.grad[~used] == 0).all() and (E.grad[used] != 0).all()
    # row 1 is used twice, so its gradient is the sum of two contributions: 2 * (2 * E[1])
    torch.testing.assert_close(E.grad[1], 4 * E.detach()[1])


def test_cosine_matrix_matches_torch():
    g = torch.Generator().manual_seed(2)
    X = torch.randn(5, 3, generator=g, dtype=torch.float64)
    expected = F.cosine_similarity(X[:, None, :], X[None, :, :], dim=-1)
    torch.testing.assert_close(cosine_matrix(X), expected)


def test_skipgram_pairs_stay_within_groups():
    words, labels = toy_vocab()
    pairs = toy_skipgram_pairs(labels)
    assert all(labels[i] == labels[j] and i != j for i, j in pairs.tolist())
    sizes = [labels.count(g) for g in set(labels)]
    assert len(pairs) == sum(s * (s - 1) for s in sizes)


def test_training_lowers_the_loss_and_groups_related_words():
    r = train_toy_embeddings(steps=100)
    assert r["losses"][-1] < 0.6 * r["losses"][0]
    V = len(r["words"])
    assert r["losses"][0] == pytest.approx(math.log(V), rel=0.3)  # near-uniform guesses at first
    within_b, between_b = group_similarity(r["before"], r["labels"])
    within_a, between_a = group_similarity(r["after"], r["labels"])
    assert within_a - between_a > 0.8 and within_a - between_a > within_b - between_b + 0.5
    # the probe batch used two words; only their rows received a gradient
    used = set(r["probe_batch"])
    assert r["grad_rows"] == [i in used for i in range(V)]


def test_training_is_reproducible():
    a, b = train_toy_embeddings(steps=5, seed=3), train_toy_embeddings(steps=5, seed=3)
    torch.testing.assert_close(a["after"], b["after"])
    assert a["losses"] == b["losses"]
