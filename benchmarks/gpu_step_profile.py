"""Benchmark: where a MiniGPT training step spends its time on a GPU, by kind of kernel.

    python benchmarks/gpu_step_profile.py                        # CUDA, gpu.json's shape
    python benchmarks/gpu_step_profile.py --smoke --device cpu   # tiny shapes (the tests)

Profiles whole training steps (forward in the device's autocast precision, backward, clipping,
fused AdamW: ``train_bench.step_seconds``) at the shape of ``course_lib/configs/gpu.json`` with
``torch.profiler``, in each mode of ``--modes`` (``MODES``: eager, ``torch.compile``, and
``torch.compile`` with CUDA graphs), and prints per mode:

- the step's wall milliseconds (timed unprofiled) and its model-FLOP utilisation (MFU) against the
  datasheet peak (``gpu_bench.DATASHEET_PEAK_TFLOPS``);
- the device's busy time per step by kind of kernel (``KINDS``: matrix products, attention, ...),
  each kernel counted once (its self time), and the idle rest: the wall time minus the busy time,
  which is the GPU waiting for the host (Python, the framework launching kernels one by one);
- the kernels that took the most time, by name.

It is ``cpu_step_profile.py``'s question asked of a GPU: what a faster step could come from.
On a CPU (``--smoke --device cpu``, the tests) the "kernels" are the CPU operators' self times
and the idle rest is the profiler's view of Python; the same code classifies both. Writes
``course_lib/results/gpu_step_profile.json`` on a CUDA machine (not for ``--smoke``) unless
``--out`` says otherwise.

Measured 2026-11-28 on an H200 (16-core VM, torch 2.11, bf16; the results file): eager 11.2 ms
per step with the GPU idle 40 % of it (6.8 ms of kernels), compiled 11.3 ms idle 53 % (5.3 ms of
kernels: matrix products 2.0, LayerNorm 1.3, attention 0.6): the step is launch-bound. CUDA graphs
(``--modes cudagraphs``: ``torch.compile(mode="reduce-overhead")``) replay the kernels in one
launch: 5.5 ms, idle 4 %, MFU 10.5 % -> 21.5 % of the datasheet peak.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
from _common import results_file  # run from benchmarks/
from gpu_bench import (  # run from benchmarks/
    autocast_for,
    datasheet_peak_tflops,
    gpu_config,
    write_results,
)
from torch.profiler import ProfilerActivity, profile
from train_bench import step_seconds  # run from benchmarks/

from course_lib.device import resolve_device, resolve_precision
from course_lib.model import MiniGPT, flops_per_token
from course_lib.train import make_optimizer

#: Kinds of work, each a tuple of lower-case substrings of a kernel's (or, on the CPU, an
#: operator's) name; the first kind that matches wins, so the order matters: a Triton kernel
#: that torch.compile fused from a LayerNorm and an addition is named after both, and counts as
#: LayerNorm. GPU names from PyTorch 2.11 + CUDA 13 on an H200 (cuBLAS's ``nvjet`` products,
#: cuDNN's ``sdpa`` flash attention, ``multi_tensor_apply`` for the fused optimiser and the
#: foreach norm of the clipping); CPU names are ATen's operators.
KINDS = (
    ("attention", ("flash", "fmha", "attention", "sdpa", "scaled_dot_product")),
    (
        "matrix products",
        ("gemm", "xmma", "nvjet", "cutlass", "cublas", "aten::mm", "aten::addmm", "aten::bmm"),
    ),
    ("optimiser and clipping", ("multi_tensor_apply", "adam", "lpnorm", "_foreach", "clamp")),
    ("LayerNorm", ("layer_norm", "layernorm", "gammabeta")),
    ("GELU", ("gelu",)),
    ("embedding and loss", ("embedding", "indexselect", "softmax", "nll_loss", "cross_entropy")),
    # not "cast": every elementwise kernel's template names its LoadWithCast/StoreWithCast
    ("casts and copies", ("copy_kernel", "copy_")),
)
REST = "other elementwise"
RESULTS = results_file("gpu_step_profile.json")


def kind_of(name: str) -> str:
    """The kind of work a kernel or operator named ``name`` belongs to (``REST`` if none)."""
    low = name.lower()
    for kind, keys in KINDS:
        if any(k in low for k in keys):
            return kind
    return REST


def device_times(prof, device: torch.device, steps: int) -> dict[str, float]:
    """Milliseconds per step of each kernel (CUDA) or CPU operator (CPU) in ``prof``, each
    microsecond counted once: a kernel's duration, an operator's self time. On the GPU the
    profiler also draws ``record_function`` ranges (``Optimizer.step#AdamW.step``) on the
    device's timeline, spanning the kernels inside them; those are left out."""
    out: dict[str, float] = {}
    for ev in prof.events():
        if device.type == "cuda":
            if ev.device_type != torch.autograd.DeviceType.CUDA or ev.is_user_annotation:
                continue  # the host's operators: their kernels are counted as kernels
            us = ev.device_time_total  # a kernel's duration
        else:
            us = ev.self_cpu_time_total
        if us > 0:
            out[ev.key] = out.get(ev.key, 0.0) + us / 1e3 / steps
    return out


#: how the model runs: eager, torch.compile, torch.compile with CUDA graphs (one launch replays
#: the forward's or the backward's kernels, so the host no longer launches them one by one)
MODES = {"eager": None, "compiled": "default", "cudagraphs": "reduce-overhead"}


def profile_mode(cfg, device, precision, mode: str, steps: int, top: int, rounds: int) -> dict:
    """One mode's profile: wall ms per step (the median of ``rounds`` unprofiled timings of
    ``steps`` steps), busy ms by kind, idle ms, the top kernels."""
    mcfg = cfg.model.with_vocab(81)  # the corpus's 81 characters
    torch.manual_seed(0)
    model = MiniGPT(mcfg).to(device)
    opt = make_optimizer(model, cfg.lr, cfg.weight_decay)
    if MODES[mode] is not None:
        model = torch.compile(model, mode=MODES[mode])
    g = torch.Generator().manual_seed(0)
    x = torch.randint(81, (cfg.batch_size, mcfg.block_size), generator=g).to(device)  # (B, T)
    y = torch.randint(81, (cfg.batch_size, mcfg.block_size), generator=g).to(device)  # (B, T)
    autocast = autocast_for(device, precision)
    # warm-up compiles (torch.compile) and settles the allocator; the profiler adds overhead,
    # so the wall time comes from unprofiled steps
    step_seconds(model, opt, x, y, 1, warmup=5, autocast=autocast)  # compiles, if it does
    wall = 1e3 * statistics.median(
        step_seconds(model, opt, x, y, steps, warmup=0, autocast=autocast) for _ in range(rounds)
    )
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    with profile(activities=activities) as prof:
        step_seconds(model, opt, x, y, steps, warmup=0, autocast=autocast)
    kernels = device_times(prof, device, steps)
    by_kind = dict.fromkeys([k for k, _ in KINDS] + [REST], 0.0)
    for name, ms in kernels.items():
        by_kind[kind_of(name)] += ms
    busy = sum(by_kind.values())
    tokens = cfg.batch_size * mcfg.block_size
    sheet = (
        datasheet_peak_tflops(torch.cuda.get_device_name(device)) if device.type == "cuda" else None
    )
    mfu = flops_per_token(mcfg) * tokens / (wall / 1e3) / (sheet * 1e12) if sheet else None
    return {
        "mode": mode,
        "wall_ms": wall,
        "tokens_per_second": tokens / wall * 1e3,
        "mfu_datasheet": mfu,
        "busy_ms": busy,
        "idle_ms": max(wall - busy, 0.0),
        "by_kind_ms": by_kind,
        "kernels": len(kernels),
        "top_kernels_ms": dict(sorted(kernels.items(), key=lambda kv: -kv[1])[:top]),
    }


def print_mode(r: dict) -> None:
    mfu = f", MFU {100 * r['mfu_datasheet']:.1f}% of the datasheet" if r["mfu_datasheet"] else ""
    print(
        f"\n{r['mode']}: {r['wall_ms']:.2f} ms per step ({r['tokens_per_second']:,.0f} tokens/s"
        f"{mfu}); {r['kernels']} distinct kernels"
    )
    print(f"  {'kind of work':<24} {'ms/step':>8} {'of wall':>8}")
    rows = sorted(r["by_kind_ms"].items(), key=lambda kv: -kv[1])
    for kind, ms in rows + [("idle (waiting for the host)", r["idle_ms"])]:
        print(f"  {kind:<28} {ms:>8.3f} {100 * ms / r['wall_ms']:>7.1f}%")
    print("  top kernels:")
    for name, ms in r["top_kernels_ms"].items():
        print(f"    {ms:>7.3f} ms  {kind_of(name):<22} {name[:90]}")


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--smoke", action="store_true", help="tiny shapes (any device; for tests)")
    p.add_argument("--steps", type=int, default=20, help="profiled steps per mode")
    p.add_argument("--top", type=int, default=12, help="kernels listed per mode")
    p.add_argument("--rounds", type=int, default=5, help="timings per mode (the median is kept)")
    p.add_argument(
        "--modes", default="eager,compiled", help=f"comma-separated, of {', '.join(MODES)}"
    )
    p.add_argument("--device", default="auto", help="auto, cuda, cuda:N, mps or cpu")
    p.add_argument("--out", default=None, help="results JSON")
    args = p.parse_args(argv)
    device = resolve_device(args.device)
    precision = resolve_precision("auto", device)
    cfg = gpu_config(args.smoke)
    m = cfg.model
    print(
        f"{device} ({torch.cuda.get_device_name(device) if device.type == 'cuda' else 'cpu'}), "
        f"torch {torch.__version__}, {precision}; {m.n_layer} layers, d_model {m.d_model}, "
        f"T {m.block_size}, batch {cfg.batch_size}; {args.steps} profiled steps per mode"
    )
    modes = args.modes.split(",")
    if unknown := set(modes) - set(MODES):
        p.error(f"unknown mode(s) {', '.join(sorted(unknown))}; known: {', '.join(MODES)}")
    rows = [
        profile_mode(cfg, device, precision, m, args.steps, args.top, args.rounds) for m in modes
    ]
    for r in rows:
        print_mode(r)
    summary = {
        "device": str(device),
        "device_name": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
        "precision": precision,
        "torch": torch.__version__,
        "smoke": args.smoke,
        "modes": {r["mode"]: r for r in rows},
        "measured_at": time.strftime("%Y-%m-%d %H:%M"),
    }
    write_results(summary, args.out, RESULTS, device, args.smoke)
    return summary


if __name__ == "__main__":
    main()
