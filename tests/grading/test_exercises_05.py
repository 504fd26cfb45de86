"""The hand-checkable numbers that Exercises 6-8 of solutions/05_worked_examples.ipynb state in
their text and hints (worked examples 4-6), recomputed here with torch from the notebook's own
set-up cells, so that a change to the set-up cannot leave the statements wrong.

Fast: it runs only the two set-up cells (no kernel, no grading);
tests/grading/test_exercises.py grades the notebook.
"""

from __future__ import annotations

import nbformat
import pytest
import torch
import torch.nn.functional as F

from tools.exercises import SOLUTIONS

NB = nbformat.read(SOLUTIONS / "05_worked_examples.ipynb", as_version=4)
CELLS = {c.id: c for c in NB.cells}


@pytest.fixture(scope="module")
def ns():
    """The names the notebook's set-up cells define (E, W_Q, W_O, BATCH_H, W1, b1, EPS, ...)."""
    g: dict = {}
    for cid in ("setup", "setup-examples-4-6"):
        exec(CELLS[cid].source, g)  # trusted notebook code: tensors only
    return g


def _text(exercise_slug: str) -> str:
    """An exercise's statement and the hints of its checks, as one string."""
    hints = [c["hint"] for c in CELLS[f"{exercise_slug}-check-1"].metadata["course"]["checks"]]
    return CELLS[f"{exercise_slug}-text"].source + "\n" + "\n".join(hints)


def _f(x: float, digits: int) -> str:
    return f"{x:.{digits}f}"


def test_batch_statement(ns):
    H, W_O, t = ns["BATCH_H"], ns["W_O"], ns["BATCH_TARGETS"]
    text = _text("batch-output-gradient")
    # "[A, A] has the context h = v_A = [0.1, 0]": the context is v_A = x_A W_V
    v_A = ns["E"][0] @ ns["W_V"]  # (d,)
    assert torch.allclose(H[1], v_A, atol=1e-15) and "h = v_A = [0.1, 0]" in text
    assert (_f(float(v_A[0]), 1), float(v_A[1])) == ("0.1", 0.0)
    # "... so its own gradient has a zero second row" (autograd, example [A, A] alone)
    W = W_O.clone().requires_grad_()
    (g_AA,) = torch.autograd.grad(F.cross_entropy((H[1] @ W)[None], t[1:2]), W)
    assert bool((g_AA[1] == 0).all()) and bool((g_AA[0] != 0).any())
    # "... the mean gradient's second row is the sum of the other two examples' second rows / 3"
    W = W_O.clone().requires_grad_()
    (g,) = torch.autograd.grad(F.cross_entropy(H @ W, t), W)
    rows = [
        torch.autograd.grad(F.cross_entropy((H[i] @ W)[None], t[i : i + 1]), W)[0][1]
        for i in (0, 2)
    ]
    assert torch.allclose(g[1], (rows[0] + rows[1]) / 3, atol=1e-15)
    # "about ln 4 here": the mean loss of the tiny initial W_O
    loss = float(F.cross_entropy(H @ W_O, t))
    assert abs(loss - torch.log(torch.tensor(4.0)).item()) < 0.01 and "about ln 4" in text


def test_ffn_statement(ns):
    E, W1, b1, W2, b2 = (ns[k] for k in ("E", "W1", "b1", "W2", "b2"))
    text = _text("ffn-block")
    assert "W1 = W2 = [[0.2, 0.1], [0.1, 0.2]]" in text and "b1 = [0, −0.15]" in text
    assert W1.tolist() == W2.tolist() == [[0.2, 0.1], [0.1, 0.2]] and b1.tolist() == [0.0, -0.15]
    assert b2.tolist() == [0.0, 0.0]
    pre = E @ W1 + b1  # (4, d_ff): one row per token A, B, C, D
    # token A: "[0.2, 0.1 − 0.15]" in the statement, "[0.2, -0.05]" in a hint; the ReLU cuts unit 2
    assert [_f(v, 2) for v in pre[0].tolist()] == ["0.20", "-0.05"]
    assert "[0.2, 0.1 − 0.15]" in text and "[0.2, -0.05]" in text
    # "Tokens A and D have pre-activations <= 0 ...; D's first one is exactly 0"
    assert (pre <= 0).any(1).tolist() == [True, False, False, True] and float(pre[3, 0]) == 0.0
    # "x + FFN(x) ... For token A that is [1, 0] + FFN(x_A), close to [1, 0]"
    out_A = E[0] + F.relu(pre[0]) @ W2 + b2
    assert float((out_A - E[0]).abs().max()) < 0.05 and "close to [1, 0]" in text
    # the symmetric W1, W2 are why only the random gradient check catches a missing transpose
    assert torch.equal(W1, W1.T) and torch.equal(W2, W2.T) and "symmetric" in text


def test_layer_norm_statement(ns):
    E, W1, b1, W2, b2, eps = (ns[k] for k in ("E", "W1", "b1", "W2", "b2", "EPS"))
    text = _text("layer-norm")
    x = E[0] + F.relu(E[0] @ W1 + b1) @ W2 + b2  # (2,): token A after the FFN block
    mean, var = float(x.mean()), float(((x - x.mean()) ** 2).mean())
    assert f"x = [{_f(float(x[0]), 2)}, {_f(float(x[1]), 2)}]" in text
    assert f"μ = {_f(mean, 2)}" in text and f"the row mean ({_f(mean, 2)})" in text
    assert f"σ² = {_f(var**0.5, 2)}² = {_f(var, 4)}" in text and f"deviations: {_f(var, 4)}" in text
    assert abs(var - round(var, 4)) < 1e-12  # 0.2601 is exact, not a rounding
    y = F.layer_norm(x, (2,), eps=eps)
    assert (
        torch.allclose(y, torch.tensor([1.0, -1.0], dtype=y.dtype), atol=1e-4) and "[1, −1]" in text
    )
    assert eps == 1e-5 and "= 1e-5" in text
