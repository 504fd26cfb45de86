"""The Chapter 1 measurements behave as the chapter claims."""
import math

import pytest
import torch

from course_lib.labs.rnn import attention_gradient_norms, max_path_length, rnn_gradient_norms, sequential_steps


def test_steps_and_paths():
    assert [sequential_steps(T, "rnn") for T in (1, 10, 100)] == [1, 10, 100]
    assert {sequential_steps(T, "attention") for T in (1, 10, 100)} == {1}
    assert max_path_length(50, "rnn") == 49 and max_path_length(50, "attention") == 1
    with pytest.raises(ValueError, match="'rnn' or 'attention'"):
        sequential_steps(5, "lstm")


def test_rnn_gradient_decays_exponentially_attention_does_not():
    lengths = [4, 8, 16, 32, 64]
    rnn = rnn_gradient_norms(lengths)
    attn = attention_gradient_norms(lengths)
    assert all(a > b for a, b in zip(rnn, rnn[1:])), "RNN gradient must shrink as T grows"
    # exponential: the log-norm falls at least linearly in T (each step shrinks by < 0.9)
    slope = (math.log(rnn[-1]) - math.log(rnn[0])) / (lengths[-1] - lengths[0])
    assert slope < math.log(0.9)
    assert min(attn) > 1e3 * rnn[-1]


def test_rnn_gradient_matches_finite_differences():
    from course_lib.labs.rnn import _inputs, rnn_last_state, rnn_weights

    d, T, seed, eps = 4, 6, 3, 1e-6
    W, U = rnn_weights(d, 0.9, seed)
    x = _inputs(T, d, seed + 1)
    fd = torch.zeros(d, dtype=torch.float64)
    for j in range(d):
        dx = torch.zeros_like(x)
        dx[0, j] = eps
        fd[j] = (rnn_last_state(x + dx, W, U).sum() - rnn_last_state(x - dx, W, U).sum()) / (2 * eps)
    assert math.isclose(rnn_gradient_norms([T], d=d, seed=seed)[0], float(fd.norm()), rel_tol=1e-6)
