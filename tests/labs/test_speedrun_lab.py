"""Chapter 15's race lab: a Run of the plain recipe is the trainer's run step for step; the
modern recipes train; the race interleaves and records; time to target and equal-time
budgets are computed as documented."""

from dataclasses import replace

import pytest
import torch

from course_lib.labs.modern import ModernGPT
from course_lib.labs.speedrun import Recipe, Run, race, steps_for_budget, time_to_target
from course_lib.train import TrainConfig, Trainer, corpus_tokens
from tests.train_support import TINY as TINY_FIELDS

TINY = TrainConfig(**TINY_FIELDS)


@pytest.fixture(scope="module")
def data():
    return corpus_tokens(TINY)


def test_plain_recipe_is_the_trainer(data):
    tok, train, val = data
    cfg = replace(TINY, max_steps=6, warmup_steps=2, device="cpu", precision="fp32")
    trainer = Trainer(cfg, train, val, tok.vocab_size)
    run = Run(Recipe("plain", cfg), train, val, tok.vocab_size)
    for _ in range(6):
        assert run.step() == pytest.approx(trainer.train_step(), rel=1e-6)
    for a, b in zip(run.model.parameters(), trainer.module.parameters()):
        torch.testing.assert_close(a, b)
    assert run.evaluate() == pytest.approx(trainer.estimate_loss()["val"], rel=1e-6)


def test_modern_recipe_with_muon_and_wsd_learns(data):
    tok, train, val = data
    cfg = replace(TINY, max_steps=30, warmup_steps=3)
    modern = {"norm": "rmsnorm", "mlp": "moe", "qk_norm": True, "tie_head": False}
    run = Run(
        Recipe("m", cfg, modern, optimizer="muon", schedule="wsd"), train, val, tok.vocab_size
    )
    assert isinstance(run.model, ModernGPT) and run.muon is not None
    start = run.evaluate()
    run.train_steps(30)
    assert run.done and run.evaluate() < start - 0.3
    assert run.lr_factor() == pytest.approx(cfg.min_lr / cfg.lr)  # the decay's end
    with pytest.raises(ValueError, match="optimizer"):
        Recipe("x", cfg, optimizer="sgd")


def test_muon_weight_decay_and_the_decay_fraction_reach_the_run(data):
    """The recipe's Muon weight decay shrinks the blocks' matrices by (1 - lr wd) a step (the
    decoupled decay), and its decay fraction sets where the schedule starts to fall."""
    tok, train, val = data
    cfg = replace(TINY, max_steps=20, warmup_steps=2)
    runs = {
        wd: Run(
            Recipe(
                "m",
                cfg,
                {},
                optimizer="muon",
                schedule="wsd",
                muon_weight_decay=wd,
                decay_fraction=0.5,
            ),
            train,
            val,
            tok.vocab_size,
        )
        for wd in (0.0, 0.5)
    }
    assert [g["weight_decay"] for g in runs[0.5].muon.param_groups] == [0.5]
    for run in runs.values():
        run.train_steps(1)
    p0, p1 = (next(iter(r.muon.param_groups[0]["params"])) for r in runs.values())
    lr = runs[0.5].muon.param_groups[0]["lr"]
    # same data and seed: the only difference after one step is the decay of the start
    start = next(
        iter(
            Run(
                Recipe("m", cfg, {}, optimizer="muon"), train, val, tok.vocab_size
            ).muon.param_groups[0]["params"]
        )
    ).detach()
    torch.testing.assert_close(p1 - p0, -lr * 0.5 * start, rtol=1e-4, atol=1e-7)
    run = runs[0.0]
    factors = [run.lr_factor() for run.step_count in range(20)]
    # 20 steps, the last 50 % decaying: the rate leaves its peak after step 10 (0.3: step 14)
    assert factors[2:11] == [1.0] * 9 and factors[11] < 1.0


def test_race_interleaves_and_records(data):
    tok, train, val = data
    cfg = replace(TINY, max_steps=20, warmup_steps=2)
    runs = [
        Run(Recipe(n, cfg).with_steps(s), train, val, tok.vocab_size)
        for n, s in (("a", 20), ("b", 10))
    ]
    race(runs, eval_every=10, chunk=5)
    assert [r.record["step"] for r in runs] == [[0, 10, 20], [0, 10]]
    assert all(r.seconds > 0 and r.cpu_seconds > 0 for r in runs)
    with pytest.raises(ValueError, match="multiple"):
        race(runs, eval_every=7, chunk=5)


def test_time_to_target_and_budget():
    rec = {
        "step": [0, 50, 100],
        "seconds": [0, 1, 2],
        "cpu_seconds": [0, 2, 4],
        "tokens": [0, 5, 10],
        "val": [4.0, 2.5, 2.0],
    }
    assert time_to_target(rec, 2.6)["step"] == 50
    assert time_to_target(rec, 2.0)["cpu_seconds"] == 4
    assert time_to_target(rec, 1.9) is None
    # the reference takes 0.1 s a step: 100 steps are 10 s, which a 0.2 s step spends in 50
    assert steps_for_budget([0.1, 0.2, 0.05], 100) == [100, 50, 200]


def test_bigram_loss_is_the_counted_models_cross_entropy():
    from course_lib.labs.speedrun import bigram_loss

    train = torch.tensor([0, 1, 2, 0, 1, 2, 0, 1, 0, 2])
    val = torch.tensor([0, 1, 2, 0, 2])
    V = 3
    counts = torch.ones(V, V)
    for a, b in zip(train[:-1].tolist(), train[1:].tolist()):
        counts[a, b] += 1
    probs = counts / counts.sum(1, keepdim=True)
    expected = torch.nn.functional.nll_loss(probs[val[:-1]].log(), val[1:])
    assert bigram_loss(train, val, V) == pytest.approx(expected.item(), rel=1e-6)
    # a text that always repeats the same pair is learnt almost perfectly from a long sample
    cycle = torch.arange(2).repeat(5000)
    assert bigram_loss(cycle, cycle[:100], 2) < 1e-3
    with pytest.raises(ValueError, match="two"):
        bigram_loss(train[:1], val, V)


def test_describe_recipe_names_each_change():
    from course_lib.labs.speedrun import describe_recipe

    text = describe_recipe(
        {
            "modern": {"norm": "rmsnorm", "qk_norm": True, "tie_head": False},
            "optimizer": "muon",
            "muon_lr": 0.04,
            "schedule": "wsd",
        }
    )
    assert text == (
        "RMSNorm, QK-norm, an untied head, Muon (peak rate 0.04) for the blocks' matrices "
        "and warmup-stable-decay"
    )
    tuned = {"optimizer": "muon", "muon_lr": 0.015, "muon_weight_decay": 0.1}
    tuned |= {"schedule": "wsd", "decay_fraction": 0.5}
    assert describe_recipe(tuned) == (
        "Muon (peak rate 0.015, weight decay 0.1) for the blocks' matrices and "
        "warmup-stable-decay decaying over the last 50 % of the steps"
    )
    assert describe_recipe({"modern": {"mlp": "swiglu"}}) == "SwiGLU"
    assert describe_recipe({}) == "no change"
