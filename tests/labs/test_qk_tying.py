"""course_lib.labs.qk_tying: tied queries and keys give symmetric scores; the successor task."""

import pytest
import torch

from course_lib.labs.qk_tying import OneHead, SuccessorTask, symmetry_gap, train_successor


def test_tied_scores_are_symmetric_and_untied_are_not():
    torch.manual_seed(0)
    sym, col = SuccessorTask(5, 4).sample(3)[:2]
    tied, untied = OneHead(5, 4, 8, tied=True), OneHead(5, 4, 8, tied=False)
    assert tied.W_K is tied.W_Q
    assert symmetry_gap(tied.scores(sym, col)) < 1e-6
    assert symmetry_gap(untied.scores(sym, col)) > 0.1
    # the scores are the attention of the forward pass before the softmax
    _, w = untied(sym, col)
    assert torch.allclose(w, untied.scores(sym, col).softmax(-1))
    with pytest.raises(ValueError, match="T, T"):
        symmetry_gap(torch.zeros(2, 3))


def test_successor_task_by_brute_force():
    task = SuccessorTask(K=4, C=3, seed=2)
    symbols, colours, targets, succ = task.sample(6)
    for b in range(6):
        assert sorted(symbols[b].tolist()) == [0, 1, 2, 3]
        for i in range(4):
            j = symbols[b].tolist().index((symbols[b, i].item() + 1) % 4)
            assert succ[b, i] == j and targets[b, i] == colours[b, j]
    with pytest.raises(ValueError, match="K >= 3"):
        SuccessorTask(K=2, C=3)


def test_a_tied_head_cannot_prefer_every_successor():
    # Cauchy-Schwarz around the cycle: for any tied weights, some symbol scores itself at
    # least as high as its successor (symbol vectors alone, no colour)
    for seed in range(20):
        torch.manual_seed(seed)
        head = OneHead(5, 2, 6, tied=True)
        k = head.W_Q(head.sym.weight)  # (K, d)
        s = k @ k.T  # (K, K)
        assert any(s[a, a] >= s[a, (a + 1) % 5] - 1e-6 for a in range(5))


@pytest.mark.slow
def test_training_untied_learns_and_tied_does_not():
    untied, tied = train_successor(False), train_successor(True)
    assert untied["accuracy"] > 0.95
    assert tied["accuracy"] < 0.7
    assert tied["on_successor"] < untied["on_successor"]
