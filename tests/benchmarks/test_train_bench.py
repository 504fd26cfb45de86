"""The training benchmark script: a tiny smoke run of its pieces (the real run takes ~17 min)."""

from __future__ import annotations

import json
import statistics
import sys

import pytest

from tools import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))
import train_bench  # noqa: E402

from course_lib.model import GPTConfig  # noqa: E402

TINY = GPTConfig(vocab_size=23, block_size=16, n_layer=1, n_head=2, d_model=32, bias=False)


def test_comparison_is_the_median_of_paired_ratios():
    cmp = train_bench.compare_with_torch_encoder(TINY, batch=4, rounds=3)
    ratios = cmp["speedup_per_round"]
    assert len(ratios) == 3 and all(r > 0 for r in ratios)
    assert cmp["speedup"] == pytest.approx(statistics.median(ratios))
    assert cmp["minigpt_tokens_per_second"] > 0 and cmp["torch_encoder_tokens_per_second"] > 0


def test_matmul_rates_are_positive_and_count_every_product():
    assert train_bench.matmul_rate_at_model_shapes(TINY, batch=4, repeats=2) > 0
    assert train_bench.matmul_peak_gflops(n=128, repeats=1) > 0


@pytest.mark.slow  # trains the real baseline shape for a few steps (~9 s)
def test_a_scaled_down_run_writes_the_table(tmp_path, capsys):
    out = tmp_path / "bench.json"
    summary = train_bench.main(
        [
            "--only",
            "baseline",
            "--scale",
            "0.002",
            "--out",
            str(out),
            "--no-compare",
            "--threads",
            "1",
        ]
    )
    saved = json.loads(out.read_text())
    run = saved["runs"]["baseline"]
    assert run["steps"] == 4 and run["config"]["model"]["n_layer"] == 4  # the real shape, few steps
    assert 0 < run["mfu"] < 1 and run["final_val_loss"] == pytest.approx(
        summary["runs"]["baseline"]["final_val_loss"]
    )
    assert "baseline" in capsys.readouterr().out


import cpu_step_profile  # noqa: E402


@pytest.mark.parametrize(
    "event, kind",
    [
        ("aten::mm", "matrix products"),
        ("aten::addmm", "matrix products"),
        ("aten::_scaled_dot_product_flash_attention_for_cpu_backward", "attention"),
        ("aten::gelu_backward", "GELU"),
        ("aten::native_layer_norm_backward", "LayerNorm"),
        ("aten::_fused_adamw_", "optimiser and clipping"),
        ("aten::linalg_vector_norm", "optimiser and clipping"),
        ("aten::embedding_dense_backward", "embedding and loss"),
        ("aten::add", "rest"),
    ],
)
def test_profile_sorts_events_by_kind_of_work(event, kind):
    assert cpu_step_profile.kind_of(event) == kind


@pytest.mark.slow  # profiles two steps of the chapter's shape (~3 s)
def test_profile_accounts_for_the_whole_step(capsys):
    (row,) = cpu_step_profile.main(["--steps", "2", "--threads", "1", "--only", "chapter"])
    assert sum(row["by_kind_ms"].values()) == pytest.approx(row["profiled_ms"])
    assert row["by_kind_ms"]["matrix products"] > 0 and row["by_kind_ms"]["attention"] > 0
    assert 0 < row["mfu"] < row["mfu_ceiling"]  # the ceiling leaves out everything but the products
    assert "matrix products" in capsys.readouterr().out
