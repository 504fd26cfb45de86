"""Benchmark: training on a GPU. MiniGPT against nn.TransformerEncoderLayer, and the GPU run.

    python benchmarks/gpu_bench.py            # on a CUDA machine (a few minutes on an H100)
    python benchmarks/gpu_bench.py --smoke    # tiny shapes on whatever device is present

Prints three tables, for the device ``course_lib.train.resolve_device("auto")`` picks:

1. the device, its datasheet dense bf16 (or fp16) tensor peak and the rate a large matrix
   product reaches on it (the measured peak);
2. training-step tokens/s of ``MiniGPT`` and of the same architecture built from
   ``nn.TransformerEncoderLayer(norm_first=True)`` (``TorchEncoderGPT``) at the shape of
   ``course_lib/configs/gpu.json`` (6 layers, 6 heads, d_model 384, context 256, batch 64, the
   well-known "baby GPT"), in the precision ``resolve_precision("auto")`` picks (bf16 autocast
   where the GPU has it), eager and through ``torch.compile``; each ratio is the median of
   paired rounds; the model-FLOP utilisation (MFU) against both peaks;
3. the GPU configuration trained by ``course_lib.train.run``: wall time, tokens/s and the
   validation loss beside the long CPU run's (``course_lib/results/train_bench.json``).

Writes ``course_lib/results/gpu_bench.json`` on a CUDA machine (not for ``--smoke``) unless
``--out`` says otherwise. ``--smoke`` shrinks every shape and step count so the whole script
runs in seconds on a CPU (plus the compile time, unless ``--no-compile``): the tests run it
that way, so no code path here is dead on a machine without a GPU.
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from contextlib import nullcontext
from dataclasses import replace
from importlib.resources import files
from pathlib import Path

import torch
from _common import results_file, write_json  # run from benchmarks/
from train_bench import compare_with_torch_encoder  # run from benchmarks/

from course_lib.device import AUTOCAST_DTYPES, resolve_device, resolve_precision
from course_lib.model import flops_per_token
from course_lib.train import load_config, run

RESULTS = results_file("gpu_bench.json")
CPU_RESULTS = results_file("train_bench.json")

#: Dense (not 2:4-sparse) tensor-core peaks in TFLOP/s, from NVIDIA's datasheets: bf16 where the
#: GPU has it, fp16 on the T4 and V100 (no bf16). Matched against torch.cuda.get_device_name(),
#: most specific name first. A GPU not listed is reported against its measured peak only.
DATASHEET_PEAK_TFLOPS = (
    ("H100 PCIe", 756.0),
    ("H100 NVL", 835.0),
    ("H100", 989.4),  # SXM5
    ("H200", 989.4),
    ("GH200", 989.4),
    ("A100", 312.0),
    ("L40S", 362.0),
    ("L4", 121.0),
    ("T4", 65.0),  # fp16
    ("V100", 125.0),  # fp16
)


def datasheet_peak_tflops(device_name: str) -> float | None:
    """The datasheet dense tensor peak (TFLOP/s) of a GPU named ``device_name``, or None."""
    for key, tflops in DATASHEET_PEAK_TFLOPS:
        if key.lower() in device_name.lower():
            return tflops
    return None


def measured_peak_tflops(
    device: torch.device, dtype: torch.dtype, n: int = 8192, repeats: int = 10
) -> float:
    """Best TFLOP/s of an n x n x n matrix product in ``dtype`` on ``device``. The clock waits
    for a GPU's queue; the same code measures the CPU (the smoke run does)."""
    sync = (lambda: torch.cuda.synchronize(device)) if device.type == "cuda" else (lambda: None)
    a = torch.randn(n, n, device=device, dtype=dtype)
    b = torch.randn(n, n, device=device, dtype=dtype)
    a @ b  # warm-up: the first product pays for library set-up
    best = 0.0
    for _ in range(repeats):
        sync()
        t = time.perf_counter()
        for _ in range(5):
            a @ b
        sync()
        best = max(best, 5 * 2 * n**3 / (time.perf_counter() - t) / 1e12)
    return best


def write_results(summary: dict, out, default, device: torch.device, smoke: bool) -> None:
    """Write ``summary`` to ``out`` if given, else to the committed ``default`` results file when
    the run was a real one (on CUDA, not ``--smoke``); a CPU or smoke run writes nothing."""
    out = out or (default if device.type == "cuda" and not smoke else None)
    if out is not None:
        write_json(summary, out)


def autocast_for(device: torch.device, precision: str):
    """A function returning the forward pass's context for ``precision`` on ``device``."""
    if precision == "fp32":
        return nullcontext
    return lambda: torch.autocast(device_type=device.type, dtype=AUTOCAST_DTYPES[precision])


def gpu_config(smoke: bool):
    """course_lib/configs/gpu.json, or (``smoke``) a tiny version of it that runs in seconds."""
    cfg = load_config(files("course_lib").joinpath("configs", "gpu.json"))
    if smoke:
        cfg.model = replace(cfg.model, n_layer=1, n_head=2, d_model=32, block_size=32)
        cfg.batch_size, cfg.max_steps, cfg.warmup_steps = 4, 6, 2
        cfg.eval_interval, cfg.eval_batches, cfg.eval_batch_size = 3, 2, 4
    return cfg


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument(
        "--smoke", action="store_true", help="tiny shapes and few steps (any device; for tests)"
    )
    p.add_argument("--rounds", type=int, default=5, help="paired rounds per comparison")
    p.add_argument("--no-compile", action="store_true", help="skip the torch.compile rows")
    p.add_argument(
        "--no-train", action="store_true", help="skip the GPU configuration's training run"
    )
    p.add_argument(
        "--device", default="auto", help="auto (CUDA, then MPS, then CPU), cuda, cuda:N, mps or cpu"
    )
    p.add_argument(
        "--out", type=Path, default=None, help="results JSON (default: the committed file on CUDA)"
    )
    args = p.parse_args(argv)

    device = resolve_device(args.device)
    precision = resolve_precision("auto", device)
    cfg = gpu_config(args.smoke)
    cfg.device, cfg.precision = str(device), precision
    mcfg = cfg.model.with_vocab(81)  # the corpus's 81 characters
    name = (
        torch.cuda.get_device_name(device)
        if device.type == "cuda"
        else platform.processor() or "cpu"
    )
    sheet = datasheet_peak_tflops(name) if device.type == "cuda" else None
    dtype = AUTOCAST_DTYPES.get(precision, torch.float32)
    size = 8192 if device.type == "cuda" and not args.smoke else 1024
    measured = measured_peak_tflops(device, dtype, n=size, repeats=3 if args.smoke else 10)
    print(f"device {device} ({name}), precision {precision}, torch {torch.__version__}")
    print(
        f"peak: datasheet {f'{sheet:.0f}' if sheet else 'n/a'} TFLOP/s, "
        f"measured {measured:.1f} TFLOP/s ({str(dtype).removeprefix('torch.')} {size}^3 product)"
    )

    # 2. MiniGPT against the nn.TransformerEncoderLayer reference, eager and compiled.
    fpt = flops_per_token(mcfg)
    modes = [False] if args.no_compile else [False, True]
    rows = []
    print(
        f"\ntraining step at {mcfg.n_layer} layers, {mcfg.n_head} heads, d_model {mcfg.d_model}, "
        f"T {mcfg.block_size}, batch {cfg.batch_size} ({precision}), median of {args.rounds} "
        "paired rounds"
    )
    print(
        f"{'mode':<9} {'MiniGPT tok/s':>14} {'reference tok/s':>16} {'ratio':>7} {'MFU sheet':>10} "
        f"{'MFU measured':>13}"
    )
    for compiled in modes:
        cmp = compare_with_torch_encoder(
            mcfg,
            cfg.batch_size,
            rounds=args.rounds,
            device=device,
            autocast=autocast_for(device, precision),
            compile=compiled,
            steps=5 if args.smoke else 30,
        )
        flops = cmp["minigpt_tokens_per_second"] * fpt
        cmp.update(
            mode="compiled" if compiled else "eager",
            flops_per_token=fpt,
            mfu_datasheet=flops / (sheet * 1e12) if sheet else None,
            mfu_measured=flops / (measured * 1e12),
        )
        rows.append(cmp)
        sheet_mfu = f"{100 * cmp['mfu_datasheet']:.1f}%" if sheet else "n/a"
        print(
            f"{cmp['mode']:<9} {cmp['minigpt_tokens_per_second']:>14,.0f} "
            f"{cmp['torch_encoder_tokens_per_second']:>16,.0f} "
            f"{cmp['speedup']:>6.2f}x {sheet_mfu:>10} {100 * cmp['mfu_measured']:>12.1f}%",
            flush=True,
        )

    # 3. The GPU configuration's run, beside the long CPU run.
    trained = None
    if not args.no_train:
        t0 = time.perf_counter()
        trained = run(cfg, out_dir=None, progress=False)
        trained["wall_seconds_with_setup"] = time.perf_counter() - t0
        trained.pop("history", None)
        cpu = (
            json.loads(CPU_RESULTS.read_text())["runs"].get("long")
            if CPU_RESULTS.exists()
            else None
        )
        print(
            f"\n{'run':<24} {'steps':>6} {'tokens/s':>11} {'train s':>8} {'wall s':>7} "
            f"{'val loss':>9}"
        )
        print(
            f"{cfg.name + ' (' + str(device) + ', ' + precision + ')':<24} {trained['steps']:>6} "
            f"{trained['tokens_per_second']:>11,.0f} {trained['train_seconds']:>8.1f} "
            f"{trained['wall_seconds_with_setup']:>7.1f} {trained['final_val_loss']:>9.3f}"
        )
        if cpu:
            print(
                f"{'long (CPU, fp32)':<24} {cpu['steps']:>6} {cpu['tokens_per_second']:>11,.0f} "
                f"{cpu['train_seconds']:>8.1f} {cpu['wall_seconds']:>7.1f} "
                f"{cpu['final_val_loss']:>9.3f}"
            )
    summary = {
        "device": str(device),
        "device_name": name,
        "precision": precision,
        "torch": torch.__version__,
        "smoke": args.smoke,
        "datasheet_peak_tflops": sheet,
        "measured_peak_tflops": measured,
        "shape": {"model": mcfg.to_dict(), "batch_size": cfg.batch_size},
        "comparison": {r["mode"]: r for r in rows},
        "gpu_run": trained,
        "measured_at": time.strftime("%Y-%m-%d %H:%M"),
    }
    write_results(summary, args.out, RESULTS, device, args.smoke)
    return summary


if __name__ == "__main__":
    main()
