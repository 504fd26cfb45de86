"""The Chapter 1 measurements behave as the chapter claims."""

import math

import pytest
import torch

from course_lib.labs.rnn import (
    attention_gradient_norms,
    max_path_length,
    rnn_gradient_norms,
    sequential_steps,
)


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
        fd[j] = (rnn_last_state(x + dx, W, U).sum() - rnn_last_state(x - dx, W, U).sum()) / (
            2 * eps
        )
    assert math.isclose(rnn_gradient_norms([T], d=d, seed=seed)[0], float(fd.norm()), rel_tol=1e-6)


# -- the LSTM cell written out, against PyTorch's --------------------------------------------
def _torch_cell(w, dtype):
    from course_lib.labs.rnn import LSTMWeights  # noqa: F401  (the layout nn.LSTMCell uses)

    H, D = w.W_hh.shape[1], w.W_ih.shape[1]
    cell = torch.nn.LSTMCell(D, H, dtype=dtype)
    with torch.no_grad():
        cell.weight_ih.copy_(w.W_ih)
        cell.weight_hh.copy_(w.W_hh)
        cell.bias_ih.copy_(w.b_ih)
        cell.bias_hh.copy_(w.b_hh)
    return cell


@pytest.mark.parametrize("dtype,tol", [(torch.float32, 1e-6), (torch.float64, 1e-12)])
def test_lstm_cell_matches_torch_lstmcell(dtype, tol):
    from course_lib.labs.rnn import LSTMWeights, lstm_cell

    g = torch.Generator().manual_seed(7)
    B, D, H = 5, 6, 4
    # random weights and biases everywhere (not the helper's zeros), so every term is exercised
    w = LSTMWeights(
        *(
            torch.randn(*s, generator=g, dtype=dtype)
            for s in ((4 * H, D), (4 * H, H), (4 * H,), (4 * H,))
        )
    )
    x = torch.randn(B, D, generator=g, dtype=dtype)
    h = torch.randn(B, H, generator=g, dtype=dtype)
    c = torch.randn(B, H, generator=g, dtype=dtype)
    ours_h, ours_c = lstm_cell(x, h, c, w)
    ref_h, ref_c = _torch_cell(w, dtype)(x, (h, c))
    torch.testing.assert_close(ours_h, ref_h, atol=tol, rtol=0)
    torch.testing.assert_close(ours_c, ref_c, atol=tol, rtol=0)


def test_lstm_run_and_gradient_match_torch_over_a_sequence():
    from course_lib.labs.rnn import _inputs, lstm_run, lstm_weights

    T, d = 20, 5
    w = lstm_weights(d, forget_bias=2.0, seed=3)
    x = _inputs(T, d, 4).requires_grad_(True)  # (T, d)
    h, c = lstm_run(x, w)
    (g_ours,) = torch.autograd.grad(h.sum(), x)
    cell = _torch_cell(w, torch.float64)
    x_ref = x.detach().clone().requires_grad_(True)
    hr = cr = torch.zeros(1, d, dtype=torch.float64)
    for t in range(T):
        hr, cr = cell(x_ref[t : t + 1], (hr, cr))
    (g_ref,) = torch.autograd.grad(hr.sum(), x_ref)
    torch.testing.assert_close(h, hr[0], atol=1e-12, rtol=0)
    torch.testing.assert_close(c, cr[0], atol=1e-12, rtol=0)
    torch.testing.assert_close(g_ours, g_ref, atol=1e-12, rtol=0)


def test_lstm_with_open_forget_gate_and_closed_input_gate_keeps_its_memory():
    # forget gate saturated at 1 and input gate at 0: c_t = c_{t-1} exactly, whatever the input
    from course_lib.labs.rnn import LSTMWeights, lstm_cell

    H = D = 3
    b = torch.zeros(4 * H, dtype=torch.float64)
    b[:H], b[H : 2 * H] = -100.0, 100.0  # input gate closed, forget gate open
    w = LSTMWeights(
        torch.zeros(4 * H, D, dtype=torch.float64),
        torch.zeros(4 * H, H, dtype=torch.float64),
        b,
        torch.zeros(4 * H, dtype=torch.float64),
    )
    c0 = torch.tensor([0.5, -1.0, 2.0], dtype=torch.float64)
    h, c = torch.zeros(H, dtype=torch.float64), c0
    for _ in range(50):
        h, c = lstm_cell(torch.randn(D, dtype=torch.float64), h, c, w)
    torch.testing.assert_close(c, c0, atol=1e-15, rtol=0)


def test_lstm_forget_gate_near_one_keeps_the_gradient_that_the_rnn_loses():
    from course_lib.labs.rnn import _inputs, lstm_gradient_norms, lstm_run, lstm_weights

    lengths = [8, 32, 128]
    rnn = rnn_gradient_norms(lengths)
    closed = lstm_gradient_norms(lengths, forget_bias=0.0)  # forget gate near 1/2
    open_ = lstm_gradient_norms(lengths, forget_bias=3.0)  # forget gate near 0.95
    _, _, gates = lstm_run(_inputs(64, 16, 1), lstm_weights(16, forget_bias=3.0), return_gates=True)
    assert float(gates["f"].mean()) > 0.9
    assert closed[-1] < 1e-15 and rnn[-1] < 1e-15  # both vanish over 127 steps
    assert open_[-1] > 1e10 * max(rnn[-1], closed[-1])  # the open forget gate keeps it
    assert all(g > 0 for g in open_)


def test_lstm_bad_shapes_raise():
    from course_lib.labs.rnn import lstm_cell, lstm_weights

    w = lstm_weights(4, hidden=3)
    with pytest.raises(ValueError, match="shapes do not fit"):
        lstm_cell(
            torch.zeros(5, dtype=torch.float64),
            torch.zeros(3, dtype=torch.float64),
            torch.zeros(3, dtype=torch.float64),
            w,
        )
    with pytest.raises(ValueError, match="must be positive"):
        lstm_weights(0)
