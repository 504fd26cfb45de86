"""course_lib.labs.debugging: each diagnostic flags its own bug and passes the correct model."""

import json
import math
from importlib.resources import files

import pytest
import torch

from course_lib.data import BatchSampler
from course_lib.labs.debugging import (
    BUGS,
    DEBUG_CONFIG,
    NoResidualGPT,
    bug_batch,
    build_model,
    causality_leak,
    honest_loss,
    residual_similarity,
    targets_shifted,
    train_variant,
    tying_check,
    update_ratio,
)
from course_lib.model import MiniGPT

V = 29
SMALL = {"block_size": 12, "n_layer": 2, "d_model": 24}


def data(n=2000, seed=0):
    return torch.randint(V, (n,), generator=torch.Generator().manual_seed(seed))


def test_causality_leak_flags_only_the_missing_mask():
    assert causality_leak(build_model("none", V, **SMALL)) == 0.0
    assert causality_leak(build_model("no_mask", V, **SMALL)) > 1e-3


@pytest.mark.parametrize("bug", ["none", "no_mask"])
def test_causality_leak_agrees_with_changing_a_later_token(bug):
    # the same question without gradients: does changing token 7 move outputs 0..6?
    model = build_model(bug, V, **SMALL).eval()
    idx = torch.randint(V, (1, SMALL["block_size"]), generator=torch.Generator().manual_seed(1))
    changed = idx.clone()
    changed[0, 7] = (idx[0, 7] + 1) % V
    with torch.no_grad():
        moved = (model(idx)[0] - model(changed)[0])[0, :7].abs().max().item()
    assert (moved > 1e-6) == (causality_leak(model) > 0)


def test_bug_batch_shifts_by_one_and_the_check_sees_it():
    d = data()
    sampler = BatchSampler(d, 16, seed=0)
    x, y = bug_batch(sampler, 8)
    # every window is a slice of the data; y is that slice one token later
    for row_x, row_y in zip(x, y):
        starts = [s for s in range(len(d) - 17) if torch.equal(d[s : s + 16], row_x)]
        assert any(torch.equal(d[s + 1 : s + 17], row_y) for s in starts)
    assert targets_shifted(x, y) == 1.0
    x0, y0 = bug_batch(sampler, 8, "unshifted")
    assert torch.equal(x0, y0)
    assert targets_shifted(x0, y0) < 0.2  # random tokens repeat 1 time in V
    with pytest.raises(ValueError, match="B, T"):
        targets_shifted(x0, y0[:, :3])


def test_update_ratio_flags_the_high_learning_rate():
    model = build_model("none", V, **SMALL)
    x, y = BatchSampler(data(), SMALL["block_size"], seed=0).sample(8)
    before = [p.clone() for p in model.parameters()]
    ok, high = update_ratio(model, x, y, 3e-3), update_ratio(model, x, y, 0.3)
    assert high > 1.0 > ok
    assert high / ok == pytest.approx(100, rel=0.2)  # Adam's first step is ~lr per weight
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters()))  # untouched


def test_residual_similarity_flags_the_missing_residual():
    assert residual_similarity(build_model("none", V, **SMALL)) > 0.8
    assert abs(residual_similarity(build_model("no_residual", V, **SMALL))) < 0.3
    # same parameters: the bug is in forward only
    a, b = build_model("none", V, **SMALL), build_model("no_residual", V, **SMALL)
    assert isinstance(b, NoResidualGPT) and a.num_params() == b.num_params()


def test_tying_check_flags_the_copy():
    good, bad = build_model("none", V, **SMALL), build_model("untied", V, **SMALL)
    assert tying_check(good)["tied"] and tying_check(good)["extra"] == 0
    out = tying_check(bad)
    assert not out["tied"]
    assert out["extra"] == V * SMALL["d_model"]
    assert out["n_params"] == good.num_params() + V * SMALL["d_model"]
    assert out["drift"] == 0.0  # equal at the start: only the storage tells


def test_honest_loss_of_an_untrained_model_is_about_ln_v():
    torch.manual_seed(0)
    model = build_model("none", V, **SMALL)
    assert isinstance(model, MiniGPT)
    assert honest_loss(model, data()) == pytest.approx(math.log(V), abs=0.15)


def test_unknown_bug_is_refused():
    with pytest.raises(ValueError, match="unknown bug"):
        build_model("typo", V)


@pytest.mark.slow
def test_short_runs_show_the_symptoms():
    d, val = data(5000), data(2000, seed=1)
    runs = {b: train_variant(b, d, val, V, steps=60) for b in ("none", "unshifted")}
    # copying the current token is easy; random next tokens are not
    assert runs["unshifted"]["losses"][-1] < 0.5 * runs["none"]["losses"][-1]
    assert runs["unshifted"]["honest"] > runs["none"]["honest"]


def test_results_file_matches_the_bugs():
    res = json.loads(files("course_lib").joinpath("results", "debugging.json").read_text())
    assert set(res["runs"]) == set(BUGS)
    assert res["config"] == DEBUG_CONFIG
    runs = res["runs"]
    last = {b: sum(r["losses"][-20:]) / 20 for b, r in runs.items() if None not in r["losses"]}
    assert last["unshifted"] < last["no_mask"] < last["none"]  # too good to be true
    assert runs["none"]["honest"] < runs["no_mask"]["honest"] < runs["unshifted"]["honest"]
    assert last["no_residual"] > last["none"] + 0.5
    assert runs["lr_too_high"]["honest"] > math.log(res["vocab_size"])
    assert runs["no_mask"]["leak"] > 0 and runs["none"]["leak"] == 0
    assert not runs["untied"]["tying"]["tied"] and runs["none"]["tying"]["tied"]
