"""The GPU benchmark script (benchmarks/gpu_bench.py): its pieces, and a smoke run on the CPU so
that none of its code is dead on a machine without a GPU. The real run needs a CUDA GPU."""

from __future__ import annotations

import math
import statistics
import sys

import pytest
import torch

from tools import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))
import gpu_bench  # noqa: E402


@pytest.mark.parametrize(
    "name, tflops",
    [
        ("NVIDIA H100 80GB HBM3", 989.4),  # SXM: the most specific entries come first
        ("NVIDIA H100 PCIe", 756.0),
        ("NVIDIA H200", 989.4),
        ("NVIDIA A100-SXM4-40GB", 312.0),
        ("NVIDIA L40S", 362.0),
        ("NVIDIA L4", 121.0),
        ("Tesla T4", 65.0),
        ("Some Future GPU", None),
    ],
)
def test_datasheet_peaks_match_the_most_specific_name(name, tflops):
    assert gpu_bench.datasheet_peak_tflops(name) == tflops


def test_smoke_config_is_a_small_copy_of_the_gpu_config():
    real, smoke = gpu_bench.gpu_config(False), gpu_bench.gpu_config(True)
    assert (real.model.n_layer, real.model.d_model, real.model.block_size, real.batch_size) == (
        6,
        384,
        256,
        64,
    )
    assert smoke.model.d_model < real.model.d_model and smoke.max_steps < real.max_steps
    # only the size shrinks
    assert smoke.lr == real.lr and smoke.model.dropout == real.model.dropout


@pytest.mark.slow  # trains a tiny model on the corpus and times both architectures (~5 s)
def test_smoke_run_on_the_cpu_fills_every_table(monkeypatch, capsys):
    compiled = []

    def fake_compile(model):  # torch.compile's path without minutes of compiling
        compiled.append(type(model).__name__)
        return model

    monkeypatch.setattr(torch, "compile", fake_compile)
    out = gpu_bench.main(["--smoke", "--rounds", "3", "--device", "cpu"])
    assert (
        out["device"] == "cpu"
        and out["precision"] == "fp32"
        and out["datasheet_peak_tflops"] is None
    )
    # the compiled row compiles both models
    assert sorted(compiled) == ["MiniGPT", "TorchEncoderGPT"]
    for mode, row in out["comparison"].items():
        assert row["mode"] == mode and len(row["speedup_per_round"]) == 3
        assert row["speedup"] == pytest.approx(statistics.median(row["speedup_per_round"]))
        expected = (
            row["minigpt_tokens_per_second"]
            * row["flops_per_token"]
            / (out["measured_peak_tflops"] * 1e12)
        )
        assert row["mfu_measured"] == pytest.approx(expected) and 0 < row["mfu_measured"] < 1
    assert set(out["comparison"]) == {"eager", "compiled"}
    run = out["gpu_run"]
    assert run["steps"] == 6 and math.isfinite(run["final_val_loss"]) and run["device"] == "cpu"
    printed = capsys.readouterr().out
    assert "MiniGPT tok/s" in printed and "long (CPU, fp32)" in printed


@pytest.mark.slow
@pytest.mark.skipif(
    not torch.cuda.is_available(), reason="needs a CUDA GPU (run it on the GPU machine)"
)
def test_smoke_run_on_the_gpu_uses_its_precision_and_peak():
    out = gpu_bench.main(["--smoke", "--rounds", "1", "--no-compile", "--device", "cuda"])
    assert out["device"].startswith("cuda") and out["precision"] in ("bf16", "fp16")
    assert out["measured_peak_tflops"] > 1  # any tensor-core GPU does more than a TFLOP/s
    assert out["gpu_run"]["device"].startswith("cuda") and math.isfinite(
        out["gpu_run"]["final_val_loss"]
    )
