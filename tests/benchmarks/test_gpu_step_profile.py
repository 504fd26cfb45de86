"""The GPU step profile (benchmarks/gpu_step_profile.py): its kernel classifier on names a real
H200 profile printed, and a smoke run on the CPU so that none of its code is dead on a machine
without a GPU. The real run needs a CUDA GPU."""

from __future__ import annotations

import sys

import pytest
import torch

from tools import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))
import gpu_step_profile as gsp  # noqa: E402


@pytest.mark.parametrize(
    "name, kind",
    [  # names from an H200's profile (torch 2.11 + CUDA 13, results/gpu_step_profile.json)
        ("nvjet_sm90_tst_192x128_64x5_1x2_h_bz_coopB_NNT", "matrix products"),
        (
            "void cublasLt::splitKreduce_kernel<32, 16, int, float>",
            "matrix products",
        ),
        ("cudnn_generated_fort_native_sdpa_sm90_flash_bprop_wgmma_f16_knob_26", "attention"),
        ("void at::native::GammaBetaBackwardCUDAKernelTemplate<float, float>", "LayerNorm"),
        ("void at::native::vectorized_layer_norm_kernel<float, float, false>", "LayerNorm"),
        ("void at::native::vectorized_elementwise_kernel<8, GeluBackwardCUDAKernelImpl>", "GELU"),
        ("multi_tensor_apply_kernel<FusedAdamMathFunctor<float, 4>>", "optimiser and clipping"),
        (
            "unrolled_elementwise_kernel<direct_copy_kernel_cuda>",
            "casts and copies",
        ),
        ("vectorized_elementwise_kernel<8, bfloat16_copy_kernel_cuda>", "casts and copies"),
        # every elementwise kernel's template names casts: an addition is not a cast
        ("unrolled_elementwise_kernel<CUDAFunctor_add<float>, LoadWithCast<2>>", gsp.REST),
        # torch.compile's Triton kernels are named after what they fused; LayerNorm comes first
        (
            "triton_per_fused__to_copy_add_native_dropout_backward_native_layer_norm_backward_view_4",
            "LayerNorm",
        ),
        ("triton_poi_fused__unsafe_view_gelu_gelu_backward_view_3", "GELU"),
        ("triton_poi_fused_cat_transpose_view_6", gsp.REST),
        # the CPU's operators
        ("aten::_scaled_dot_product_flash_attention_for_cpu", "attention"),
        ("aten::addmm", "matrix products"),
        ("aten::copy_", "casts and copies"),
    ],
)
def test_kernels_are_classified_by_their_names(name, kind):
    assert gsp.kind_of(name) == kind


@pytest.mark.slow  # profiles a tiny model eagerly and (torch.compile faked) "compiled" (~5 s)
def test_smoke_profile_on_the_cpu_accounts_for_the_step(monkeypatch, capsys):
    monkeypatch.setattr(torch, "compile", lambda model, mode: model)
    out = gsp.main(["--smoke", "--device", "cpu", "--steps", "2", "--top", "5", "--rounds", "2"])
    assert set(out["modes"]) == {"eager", "compiled"} and out["precision"] == "fp32"
    for r in out["modes"].values():
        assert r["wall_ms"] > 0 and r["busy_ms"] == pytest.approx(sum(r["by_kind_ms"].values()))
        # the step's big kinds of work are all seen
        for kind in ("matrix products", "attention", "optimiser and clipping", "LayerNorm"):
            assert r["by_kind_ms"][kind] > 0, kind
        assert len(r["top_kernels_ms"]) == 5
    printed = capsys.readouterr().out
    assert "idle (waiting for the host)" in printed and "top kernels" in printed


@pytest.mark.slow
@pytest.mark.skipif(
    not torch.cuda.is_available(), reason="needs a CUDA GPU (run it on the GPU machine)"
)
def test_smoke_profile_on_the_gpu_sees_its_kernels():
    out = gsp.main(["--smoke", "--device", "cuda", "--steps", "2", "--modes", "eager"])
    r = out["modes"]["eager"]
    assert out["precision"] in ("bf16", "fp16") and r["kernels"] > 10 and r["mfu_datasheet"] > 0
    assert r["by_kind_ms"]["matrix products"] > 0 and r["busy_ms"] < r["wall_ms"] * 1.5
