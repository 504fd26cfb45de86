"""DPO (course_lib.labs.dpo): the loss against the paper's equation computed by brute force, its
gradient against autograd and finite differences, the sequence log-probability against one
forward pass per token, and the measurements on a tiny model."""

from __future__ import annotations

import math

import pytest
import torch

from course_lib.data import CharTokenizer
from course_lib.labs.dpo import (
    Pair,
    dpo_loss,
    dpo_loss_grad,
    dpo_train,
    encode_pairs,
    preference_metrics,
    preference_pairs,
    token_kl,
)
from course_lib.labs.evaluate import completion_logprobs
from course_lib.labs.instruct import END, SPECIALS, Example
from course_lib.model import GPTConfig, MiniGPT


def _logps(seed):
    g = torch.Generator().manual_seed(seed)
    return [-5 * torch.rand(6, generator=g, dtype=torch.float64) for _ in range(4)]


@pytest.mark.parametrize("beta", [0.05, 0.5, 3.0])
def test_dpo_loss_matches_equation_by_brute_force(beta):
    pw, pl, rw, rl = _logps(0)
    loss, reward_w, reward_l = dpo_loss(pw, pl, rw, rl, beta)
    brute = 0.0
    for i in range(6):  # the paper's equation, one pair at a time, in plain floats
        z = beta * (pw[i].item() - rw[i].item()) - beta * (pl[i].item() - rl[i].item())
        brute += -math.log(1.0 / (1.0 + math.exp(-z)))
    assert loss.item() == pytest.approx(brute / 6, rel=1e-12)
    assert torch.allclose(reward_w, beta * (pw - rw)) and torch.allclose(reward_l, beta * (pl - rl))


def test_dpo_loss_is_stable_for_large_margins():
    big = torch.tensor([1000.0], dtype=torch.float64)
    zero = torch.zeros(1, dtype=torch.float64)
    assert dpo_loss(zero, big, zero, zero, 1.0)[0].item() == pytest.approx(1000.0)
    assert dpo_loss(big, zero, zero, zero, 1.0)[0].item() == 0.0


def test_dpo_loss_grad_matches_autograd_and_finite_differences():
    pw, pl, rw, rl = _logps(1)
    beta = 0.7
    pw.requires_grad_(True)
    pl.requires_grad_(True)
    dpo_loss(pw, pl, rw, rl, beta)[0].backward()
    gw, gl = dpo_loss_grad(pw.detach(), pl.detach(), rw, rl, beta)
    assert torch.allclose(gw, pw.grad, atol=1e-12) and torch.allclose(gl, pl.grad, atol=1e-12)
    h = 1e-6
    for i in range(3):
        up, down = pw.detach().clone(), pw.detach().clone()
        up[i] += h
        down[i] -= h
        fd = (dpo_loss(up, pl, rw, rl, beta)[0] - dpo_loss(down, pl, rw, rl, beta)[0]) / (2 * h)
        assert fd.item() == pytest.approx(gw[i].item(), abs=1e-8)


def test_dpo_loss_rejects_bad_input():
    pw, pl, rw, rl = _logps(2)
    with pytest.raises(ValueError, match="beta"):
        dpo_loss(pw, pl, rw, rl, 0.0)
    with pytest.raises(ValueError, match="one shape"):
        dpo_loss(pw, pl[:3], rw, rl, 0.1)


def _tiny():
    torch.manual_seed(0)
    tok = CharTokenizer("abcdefghij \n" + "".join(SPECIALS))
    model = MiniGPT(
        GPTConfig(vocab_size=tok.vocab_size, block_size=24, n_layer=1, n_head=2, d_model=16)
    )
    return model.eval(), tok


def test_completion_logprobs_matches_one_forward_per_token():
    model, tok = _tiny()
    ids = tok.encode("abc def\ngh")[None]  # (1, 10)
    mask = torch.zeros_like(ids, dtype=torch.bool)
    mask[0, 4:] = True
    got = completion_logprobs(model, ids, mask)
    brute = 0.0
    for t in range(4, ids.shape[1]):  # the model sees only the prefix: no leak from the future
        logits = model(ids[:, :t])[0][0, -1].double()
        brute += torch.log_softmax(logits, -1)[ids[0, t]].item()
    assert got.item() == pytest.approx(brute, abs=1e-4)


def test_dpo_train_prefers_chosen_and_kl_grows():
    model, tok = _tiny()
    exs = [Example("Next word?", "abc", "de", "p"), Example("Next word?", "fgh", "ij", "p")]
    pairs = [
        Pair(f"{SPECIALS[0]}a\n{e.input}{SPECIALS[1]}", e.response + END, "aa" + END) for e in exs
    ]
    ref, losses = dpo_train(model, tok, pairs, beta=0.5, steps=30, lr=3e-3, batch_size=4)
    m = preference_metrics(model, ref, tok, pairs, beta=0.5)
    assert losses[-1] < losses[0] and m["accuracy"] == 1.0 and m["margin"] > 0
    ids_w, mask_w, _, _ = encode_pairs(tok, pairs)
    assert token_kl(ref, ref, ids_w, mask_w) == pytest.approx(0.0, abs=1e-12)
    assert m["kl"] > 0


def test_preference_pairs_reject_a_wrong_answer():
    exs = [
        Example("First word?", "To be or not", "To", "p"),
        Example("End mark?", "Go.", "stop", "p"),
    ]
    for pair, ex in zip(preference_pairs(exs, seed=0), exs):
        assert pair.chosen == ex.response + END and pair.rejected != pair.chosen
        assert pair.rejected.endswith(END)
