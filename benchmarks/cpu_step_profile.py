"""Benchmark: where a MiniGPT training step spends its time on the CPU, by kind of work.

    python benchmarks/cpu_step_profile.py               # chapter and long shapes, 2 threads
    python benchmarks/cpu_step_profile.py --steps 10    # quicker

Profiles whole training steps (forward, backward, clipping, fused AdamW) with
``torch.profiler`` at the shapes of ``course_lib/configs`` and prints, per configuration, the
milliseconds per step of each kind of work: matrix products, attention
(``F.scaled_dot_product_attention``'s kernel), GELU, LayerNorm, the optimiser and clipping,
embedding and loss, and the rest (framework overhead, copies, additions). Then the matrix
products' rate inside the step against the same products timed alone
(``train_bench.matmul_rate_at_model_shapes``), the model-FLOP utilisation (MFU) against the
machine's fp32 matmul peak, and its ceiling: the products' own rate inside the step, the MFU
if everything else (attention included) took no time. It changes nothing in course_lib: the
table says what a faster step could come from.

Known cost inside "attention" (measured 2026-11-23, torch 2.13.0 CPU wheel): the flash kernel's
``parallel_for`` calls MKL's sgemm on each thread, and MKL opens a nested one-thread OpenMP team
per call; libgomp ends each team with a ``futex_wake`` system call (about 3,560 per attention
forward and backward at the chapter shape). Preloading Intel's OpenMP runtime
(``LD_PRELOAD=libiomp5.so``) removes them: the op ran x1.55 faster with bit-identical results,
the whole long run x1.045. Not adopted (it needs the preload before Python starts); see the
session-6 closing note.
"""

from __future__ import annotations

import argparse
from importlib.resources import files

import torch
from torch.profiler import ProfilerActivity, profile

# run from benchmarks/
from train_bench import matmul_peak_gflops, matmul_rate_at_model_shapes, step_seconds

from course_lib.model import MiniGPT, flops_per_token
from course_lib.train import load_config, make_optimizer

CONFIGS = ("chapter", "long")
#: kinds of work, each a tuple of substrings of profiler event names (first match wins)
KINDS = (
    ("matrix products", ("aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm")),
    ("attention", ("scaled_dot_product",)),
    ("GELU", ("aten::gelu",)),
    ("LayerNorm", ("layer_norm",)),
    ("optimiser and clipping", ("adamw", "Optimizer", "linalg_vector_norm", "_foreach", "clamp")),
    ("embedding and loss", ("embedding", "log_softmax", "nll_loss")),
)


def kind_of(name: str) -> str:
    """The kind of work a profiler event belongs to (``"rest"`` if none matches)."""
    for kind, keys in KINDS:
        if any(k.lower() in name.lower() for k in keys):
            return kind
    return "rest"


def profile_step(name: str, steps: int) -> dict:
    """Milliseconds per step by kind of work, and the step's total, for config ``name``."""
    cfg = load_config(files("course_lib").joinpath("configs", f"{name}.json"))
    mcfg = cfg.model.with_vocab(81)
    torch.manual_seed(0)
    model = MiniGPT(mcfg)
    opt = make_optimizer(model, 1e-4, 0.1)
    g = torch.Generator().manual_seed(0)
    x = torch.randint(81, (cfg.batch_size, mcfg.block_size), generator=g)  # (B, T)
    y = torch.randint(81, (cfg.batch_size, mcfg.block_size), generator=g)
    wall = step_seconds(model, opt, x, y, steps, warmup=3)  # unprofiled: the profiler adds overhead
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        step_seconds(model, opt, x, y, steps, warmup=0)
    by_kind = dict.fromkeys([k for k, _ in KINDS] + ["rest"], 0.0)
    total = 0.0
    for ev in prof.key_averages():
        ms = ev.self_cpu_time_total / 1e3 / steps  # self time: each microsecond counted once
        by_kind[kind_of(ev.key)] += ms
        total += ms
    tokens = cfg.batch_size * mcfg.block_size
    # per token, in "attention"
    attention_flops = 12.0 * mcfg.n_layer * mcfg.d_model * mcfg.block_size
    # the linear layers' products
    mm_gflop = (flops_per_token(mcfg) - attention_flops) * tokens / 1e9
    return {
        "config": name,
        "tokens_per_step": tokens,
        "wall_ms": 1e3 * wall,
        "profiled_ms": total,
        "by_kind_ms": by_kind,
        "matmul_gflop_per_step": mm_gflop,
        "flops_per_token": flops_per_token(mcfg),
        "batch_size": cfg.batch_size,
        "model": mcfg,
    }


def main(argv: list[str] | None = None) -> list[dict]:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--only", default=",".join(CONFIGS))
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    peak = matmul_peak_gflops()
    print(
        f"fp32 matmul peak: {peak:.0f} GFLOP/s on {args.threads} threads; {args.steps} profiled "
        "steps per shape"
    )
    rows = []
    for name in filter(None, args.only.split(",")):
        r = profile_step(name, args.steps)
        r["matmul_alone_gflops"] = matmul_rate_at_model_shapes(r["model"], r["batch_size"])
        scale = r["wall_ms"] / r["profiled_ms"]  # the profiler's overhead, spread evenly
        r["matmul_in_step_gflops"] = r["matmul_gflop_per_step"] / (
            r["by_kind_ms"]["matrix products"] * scale / 1e3
        )
        r["mfu"] = r["flops_per_token"] * r["tokens_per_step"] / (r["wall_ms"] / 1e3) / (peak * 1e9)
        # the linear layers' products at their in-step rate: the MFU if nothing else took time
        r["mfu_ceiling"] = r["matmul_in_step_gflops"] / peak
        rows.append(r)
        print(
            f"\n{name}: {r['wall_ms']:.1f} ms per step "
            f"({r['tokens_per_step'] / r['wall_ms'] * 1e3:,.0f} tokens/s)"
        )
        print(f"  {'kind of work':<24} {'ms/step':>8} {'share':>6}")
        for kind, ms in sorted(r["by_kind_ms"].items(), key=lambda kv: -kv[1]):
            print(f"  {kind:<24} {ms * scale:>8.2f} {100 * ms / r['profiled_ms']:>5.1f}%")
        print(
            f"  matrix products: {r['matmul_in_step_gflops']:.0f} GFLOP/s inside the step, "
            f"{r['matmul_alone_gflops']:.0f} alone at the same shapes; MFU {100 * r['mfu']:.1f}% "
            "of the peak, "
            f"ceiling {100 * r['mfu_ceiling']:.1f}% (the products' rate in the step)"
        )
    for r in rows:
        r.pop("model")
    return rows


if __name__ == "__main__":
    main()
