"""course_lib.cost: the FLOP formulas against PyTorch's FLOP counter and the papers."""

import pytest

from course_lib.cost import (
    A100,
    GPT3,
    LLAMA2_70B,
    MFU,
    gpu_hours,
    implied_mfu,
    inference_cost_rows,
    inference_flops_per_token,
    measured_training_flops,
    training_cost_rows,
    training_flops,
)
from course_lib.model import GPTConfig


@pytest.mark.parametrize(
    "shape",
    [
        dict(block_size=16, n_layer=2, n_head=2, d_model=32),
        dict(block_size=24, n_layer=3, n_head=4, d_model=48, n_kv_heads=2, bias=False),
    ],
)
def test_formula_counts_what_pytorch_counts(shape):
    # FlopCounterMode sees every matrix product of the forward and backward pass
    out = measured_training_flops(GPTConfig(**shape).with_vocab(37), batch_size=3)
    assert out["measured"] > 0
    assert out["ratio"] == pytest.approx(1.0, rel=1e-9)


def test_gpt3_matches_its_paper():
    # Brown et al. (2020), Table D.1: 3.14e23 FLOPs; 6ND alone is 3.15e23
    six_nd = 6 * GPT3.n_params * GPT3.n_tokens
    assert six_nd == pytest.approx(GPT3.reported["train_flops"], rel=0.01)
    # the attention term adds a few per cent at a 2048-token context
    assert 1.0 < training_flops(GPT3) / GPT3.reported["train_flops"] < 1.05


def test_llama2_reported_hours_imply_a_plausible_mfu():
    mfu = implied_mfu(LLAMA2_70B, A100, LLAMA2_70B.reported["gpu_hours_a100"])
    assert 0.3 < mfu < 0.6


def test_gpu_hours_by_hand():
    # 312e12 FLOP/s x 0.5 = 1.56e14 FLOP/s; one hour of it is 5.616e17 FLOPs
    assert gpu_hours(5.616e17, A100, 0.5) == pytest.approx(1.0)
    with pytest.raises(ValueError, match="at most 1"):
        gpu_hours(1e18, A100, 1.5)
    with pytest.raises(ValueError, match="positive"):
        gpu_hours(1e18, A100, 0.0)


def test_inference_is_the_forward_third_of_training():
    per_token_train = training_flops(LLAMA2_70B) / LLAMA2_70B.n_tokens
    assert 3 * inference_flops_per_token(LLAMA2_70B) == pytest.approx(per_token_train)
    # a shorter context costs less: only the attention term changes
    short = inference_flops_per_token(LLAMA2_70B, context=1)
    assert short == pytest.approx(2 * LLAMA2_70B.n_params + 4 * 80 * 8192)


def test_tables_are_consistent():
    rows = training_cost_rows()
    assert len(rows) == 4
    for r in rows:
        assert r["dollars"] > 0 and r["gpu_hours"] * 3600 * MFU > 0
        assert r["flops"] > r["flops_6nd"]
    # the faster GPU needs fewer hours for the same model
    by = {(r["model"], r["gpu"]): r for r in rows}
    assert by[("GPT-3 175B", "H100")]["gpu_hours"] < by[("GPT-3 175B", "A100")]["gpu_hours"]
    for r in inference_cost_rows():
        assert 0 < r["attention_share"] < 0.2
        assert r["batch1_ms_per_token"] > 0
