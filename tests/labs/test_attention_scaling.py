"""Tests for course_lib.labs.attention_scaling: the d_k experiment recomputed independently with
torch.nn.functional.softmax and the closed-form softmax Jacobian, and its statistics checked
against the theory (Var(q·k) = d_k)."""

import math

import pytest
import torch
import torch.nn.functional as F

from course_lib.labs.attention_scaling import scaling_experiment, softmax_with_temperature


def test_softmax_with_temperature_matches_torch():
    s = torch.randn(3, 7, generator=torch.Generator().manual_seed(0))
    for scale in (0.0, 0.3, 1.0, 25.0):
        assert torch.allclose(
            softmax_with_temperature(s, scale), F.softmax(scale * s, dim=-1), atol=1e-6
        )
    assert torch.allclose(softmax_with_temperature(s, 0.0), torch.full((3, 7), 1 / 7))
    with pytest.raises(ValueError, match="scale"):
        softmax_with_temperature(s, -1.0)
    with pytest.raises(ValueError, match="scale"):
        softmax_with_temperature(s, float("nan"))


def test_scaling_experiment_matches_an_independent_computation():
    d_ks, N, T, seed = [2, 32], 8, 5, 3
    res = scaling_experiment(d_ks, n_queries=N, n_keys=T, seed=seed)
    gen = torch.Generator().manual_seed(seed)
    g = torch.randn(N, T, generator=gen, dtype=torch.float64)
    for i, d in enumerate(d_ks):
        q = torch.randn(N, d, generator=gen, dtype=torch.float64)
        k = torch.randn(T, d, generator=gen, dtype=torch.float64)
        for name, scale in (("raw", 1.0), ("scaled", d**-0.5)):
            s = scale * q @ k.T
            p = F.softmax(s, dim=-1)
            # d/ds of sum(g * softmax(s)) = p * (g - <p, g>): the softmax Jacobian in closed form
            grad = p * (g - (p * g).sum(-1, keepdim=True))
            assert math.isclose(res[f"var_{name}"][i], s.var().item(), rel_tol=1e-9)
            assert math.isclose(
                res[f"max_weight_{name}"][i], p.amax(-1).mean().item(), rel_tol=1e-9
            )
            assert math.isclose(
                res[f"grad_{name}"][i], grad.norm(dim=-1).mean().item(), rel_tol=1e-9
            )


def test_scaling_experiment_shows_the_theory():
    d_ks = [4, 64, 1024]
    res = scaling_experiment(d_ks, n_queries=512, n_keys=16)
    for d, var_raw, var_scaled in zip(d_ks, res["var_raw"], res["var_scaled"]):
        assert abs(var_raw / d - 1) < 0.25  # Var(q·k) = d_k
        assert abs(var_scaled - 1) < 0.25  # ... and 1 after dividing by sqrt(d_k)
    assert res["max_weight_raw"] == sorted(res["max_weight_raw"])  # saturates as d_k grows
    assert res["max_weight_raw"][-1] > 0.9
    assert max(res["max_weight_scaled"]) - min(res["max_weight_scaled"]) < 0.1
    assert res["grad_raw"][-1] < 0.5 * res["grad_scaled"][-1]


@pytest.mark.parametrize(
    "bad", [dict(d_ks=[]), dict(d_ks=[0]), dict(d_ks=[2.5]), dict(d_ks=[4], n_keys=1)]
)
def test_scaling_experiment_rejects_bad_input(bad):
    with pytest.raises(ValueError):
        scaling_experiment(**bad)
