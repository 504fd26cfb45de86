"""The experiments two exercise notebooks ask for keep their margins: what the checks judge by
re-running must not sit on a knife's edge (another machine's round-off, another thread count).

``05_worked_examples`` / ``training_experiments``: the rate the solution calls fast lowers the
loss at every step by more than round-off, the rate above it overshoots by more than round-off,
and the step at which all three patterns are first predicted has a clear logit gap.
``15_speedrun`` / ``tuned_rates``: the solution's rates clear the targets, the known-wrong rates
miss them, and no AdamW rate of a fine grid reaches Muon's target (what the text says). The code
comes from the solution notebooks themselves (set-up cells, answer).
"""

from __future__ import annotations

import nbformat
import pytest
import torch
import torch.nn.functional as F

from tools.exercises import SOLUTIONS

ROUND_OFF = 1e-6  # float64 round-off over 20 steps is ~1e-15: a million times below this margin


def _solution_env(stem: str, *cell_ids: str) -> dict:
    """The names a solution notebook's cells ``cell_ids`` define, run in order here."""
    nb = nbformat.read(SOLUTIONS / f"{stem}.ipynb", as_version=4)
    cells, env = {c.id: c.source for c in nb.cells}, {}
    for cid in cell_ids:
        exec(cells[cid], env)  # trusted notebook code
    return env


@pytest.fixture(scope="module")
def worked():
    return _solution_env(
        "05_worked_examples", "setup", "setup-examples-4-6", "training-experiments-answer"
    )


def _run(env, lr, steps):
    """Mean losses and the smallest gap (target logit minus the best other) at each step."""
    P = [env[n].clone().requires_grad_() for n in ("W_Q", "W_K", "W_V", "W_O")]
    X, t = env["BATCH_X"], env["BATCH_TARGETS"]
    losses, gaps = [], []
    for step in range(steps + 1):
        h = F.scaled_dot_product_attention(X @ P[0], X @ P[1], X @ P[2], is_causal=True)[:, -1]
        logits = h @ P[3]  # (N, V)
        loss = F.cross_entropy(logits, t)
        others = logits.detach().clone()
        others[torch.arange(len(t)), t] = -float("inf")
        gaps.append(float((logits.detach()[torch.arange(len(t)), t] - others.max(-1).values).min()))
        losses.append(loss.item())
        if step < steps:
            grads = torch.autograd.grad(loss, P)
            P = [(W - lr * g).detach().requires_grad_() for W, g in zip(P, grads)]
    return losses, gaps


@pytest.fixture
def one_thread():
    """Tiny float64 steps: on 2 threads of a busy machine they wait for each other (100x slower)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def test_worked_training_claims_have_margins(worked, one_thread):
    claims = worked["training_experiments"]()
    losses, gaps = _run(worked, worked["LR"], claims["steps"])
    assert gaps[-1] > ROUND_OFF and gaps[-2] < -ROUND_OFF  # first right at that step, clearly
    assert abs(losses[-1] - claims["loss"]) < 1e-9
    fast, _ = _run(worked, claims["fast_lr"], 20)
    assert min(a - b for a, b in zip(fast, fast[1:])) > ROUND_OFF
    fast_gaps = _run(worked, claims["fast_lr"], 10)[1]
    assert fast_gaps[-1] > ROUND_OFF
    too_fast, _ = _run(worked, claims["too_fast_lr"], 20)
    assert max(b - a for a, b in zip(too_fast, too_fast[1:])) > ROUND_OFF
    assert claims["too_fast_lr"] <= 2 * claims["fast_lr"]


@pytest.fixture(scope="module")
def race():
    return _solution_env("15_speedrun", "setup", "tuned-rates-setup", "tuned-rates-answer")


@pytest.mark.slow
def test_tuned_rates_clear_the_targets_and_wrong_rates_miss(race):
    train = race["train_tiny"]
    claims = race["tuned_rates"]()
    assert claims["adamw_loss"] <= 2.95 - 0.03 and claims["muon_loss"] < 2.80 - 0.015
    assert train("adamw", 0.05) > 2.95 + 0.05  # the known-wrong answers' rates
    assert train("muon", 0.001) > 2.80 + 0.015
    # "below 2.80, lower than the best AdamW run we found": a fine grid of AdamW rates
    best_adamw = min(train("adamw", lr) for lr in (0.004, 0.006, 0.008, 0.01, 0.012, 0.015))
    assert best_adamw > 2.80 + 0.05


def test_train_tiny_refuses_bad_input(race):
    with pytest.raises(ValueError, match="optimizer"):
        race["train_tiny"]("sgd", 0.01)
    with pytest.raises(ValueError, match="learning rate"):
        race["train_tiny"]("muon", 0.0)
