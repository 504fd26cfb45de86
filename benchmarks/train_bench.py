"""Benchmark: the baby-GPT baseline against the course's configurations, on the course corpus.

    python benchmarks/train_bench.py  # everything, on an otherwise idle machine (about 20 min)
    python benchmarks/train_bench.py --only baseline,chapter --scale 0.1   # a quick smoke run

Trains each configuration of ``course_lib/configs`` (baseline, chapter, long) in one process,
on the same corpus and split, and prints one table: parameters, steps, tokens/s, training
time, validation loss and perplexity, and the model-FLOP utilisation (MFU) against the
machine's measured fp32 matmul peak. Then compares the training-step throughput of MiniGPT
with the same architecture built from ``nn.TransformerEncoderLayer(norm_first=True)``.
Writes ``course_lib/results/train_bench.json`` (the chapter glues from it) unless ``--scale``
is not 1 or ``--out`` says otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from contextlib import nullcontext
from importlib.resources import files
from pathlib import Path

import torch
from _common import results_file, write_json  # run from benchmarks/
from torch_reference import TorchEncoderGPT  # run from benchmarks/

from course_lib.model import GPTConfig, MiniGPT, flops_per_token
from course_lib.train import load_config, make_optimizer, run

RESULTS = results_file("train_bench.json")
CONFIGS = ("baseline", "chapter", "long")


def matmul_peak_gflops(n: int = 2048, repeats: int = 5) -> float:
    """Best fp32 matrix-product rate (GFLOP/s) over ``repeats`` timings of an n x n x n product."""
    a, b = torch.randn(n, n), torch.randn(n, n)
    for _ in range(2):
        a @ b
    best = 0.0
    for _ in range(repeats):
        t = time.perf_counter()
        for _ in range(4):
            a @ b
        best = max(best, 4 * 2 * n**3 / (time.perf_counter() - t) / 1e9)
    return best


def step_seconds(
    model: torch.nn.Module,
    opt,
    x: torch.Tensor,
    y: torch.Tensor,
    steps: int,
    warmup: int = 3,
    autocast=nullcontext,
) -> float:
    """Seconds per full training step (forward, backward, clipping, AdamW) on the batch
    ``x, y`` (B, T), after ``warmup`` untimed steps. ``autocast``: a function returning the
    forward pass's context (e.g. ``lambda: torch.autocast("cuda", torch.bfloat16)``). On a GPU
    the clock waits for the device's queue (kernels run asynchronously). Also used by
    cpu_attention_bench.py and gpu_bench.py."""
    sync = torch.cuda.synchronize if x.is_cuda else (lambda: None)
    for i in range(steps + warmup):
        if i == warmup:
            sync()
            t = time.perf_counter()
        with autocast():
            _, loss = model(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0, foreach=True)
        opt.step()
    sync()
    return (time.perf_counter() - t) / steps


def step_throughput(
    model: torch.nn.Module, batch: int, T: int, vocab: int, steps: int = 20, autocast=nullcontext
) -> float:
    """Tokens/s of full training steps (forward, backward, clipping, AdamW) on random tokens,
    on the device the model's parameters are on."""
    device = next(model.parameters()).device
    opt = make_optimizer(model, 1e-3, 0.1)
    g = torch.Generator().manual_seed(0)
    x, y = (
        torch.randint(vocab, (batch, T), generator=g),
        torch.randint(vocab, (batch, T), generator=g),
    )
    x, y = x.to(device), y.to(device)  # (B, T), (B, T)
    return batch * T / step_seconds(model, opt, x, y, steps, warmup=3, autocast=autocast)


def compare_with_torch_encoder(
    cfg: GPTConfig,
    batch: int,
    rounds: int = 7,
    device: str = "cpu",
    autocast=nullcontext,
    compile: bool = False,
    steps: int = 30,
) -> dict:
    """Tokens/s of MiniGPT and TorchEncoderGPT over ``rounds`` paired measurements.

    Each round times both models back to back (in alternating order, so a slow drift of the
    machine's speed hits both alike); the speed-up is the median of the per-round ratios,
    which is far steadier on a noisy machine than a ratio of two separate medians.
    ``device``, ``autocast`` (see step_seconds) and ``compile`` (both models through
    ``torch.compile``) set how both models run."""
    torch.manual_seed(0)
    ours_model = MiniGPT(cfg).to(device)
    torch.manual_seed(0)
    ref_model = TorchEncoderGPT(cfg).to(device)
    if compile:
        ours_model, ref_model = torch.compile(ours_model), torch.compile(ref_model)
    ours, ref = [], []
    for r in range(rounds):
        pair = {}
        for kind in ("ours", "ref") if r % 2 == 0 else ("ref", "ours"):
            model = ours_model if kind == "ours" else ref_model
            pair[kind] = step_throughput(
                model, batch, cfg.block_size, cfg.vocab_size, steps=steps, autocast=autocast
            )
        ours.append(pair["ours"])
        ref.append(pair["ref"])
    ratios = [a / b for a, b in zip(ours, ref)]
    return {
        "minigpt_tokens_per_second": statistics.median(ours),
        "torch_encoder_tokens_per_second": statistics.median(ref),
        "speedup": statistics.median(ratios),
        "speedup_per_round": ratios,
    }


def matmul_rate_at_model_shapes(cfg: GPTConfig, batch: int, repeats: int = 20) -> float:
    """GFLOP/s of the model's own matrix products (forward and both backward products of
    every linear layer, M = batch x block_size rows), without anything else of a step:
    the ceiling for the model-FLOP utilisation at this shape. Small products run far below
    the large-product peak."""
    d, M = cfg.d_model, batch * cfg.block_size
    # (in, out) per linear
    shapes = [(d, 3 * d), (d, d), (d, 4 * d), (4 * d, d), (d, cfg.vocab_size)]
    counts = [cfg.n_layer] * 4 + [1]
    flops, seconds = 0.0, 0.0
    for (k, n), count in zip(shapes, counts):
        x, w, g = torch.randn(M, k), torch.randn(k, n), torch.randn(M, n)
        for _ in range(3):
            x @ w, g @ w.T, x.T @ g
        t = time.perf_counter()
        for _ in range(repeats):
            x @ w, g @ w.T, x.T @ g  # forward, input gradient, weight gradient
        seconds += count * (time.perf_counter() - t) / repeats
        flops += count * 3 * 2 * M * k * n
    return flops / seconds / 1e9


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--only", default=",".join(CONFIGS), help="comma-separated config names")
    p.add_argument("--scale", type=float, default=1.0, help="multiply every max_steps (smoke runs)")
    p.add_argument(
        "--out",
        type=Path,
        default=None,
        help="results JSON (default: the committed file when --scale is 1)",
    )
    p.add_argument("--threads", type=int, default=2)
    p.add_argument(
        "--merge",
        action="store_true",
        help="update only the listed runs in the existing results file (keeps the others)",
    )
    p.add_argument(
        "--no-compare", action="store_true", help="skip the nn.TransformerEncoderLayer comparison"
    )
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    out = args.out or (RESULTS if args.scale == 1.0 else None)

    load_before = os.getloadavg()
    peak_before = matmul_peak_gflops()
    print(
        f"fp32 matmul peak: {peak_before:.1f} GFLOP/s on {args.threads} threads "
        f"(load average before: {load_before[0]:.2f})",
        flush=True,
    )
    rows = []
    for name in filter(None, args.only.split(",")):
        cfg = load_config(files("course_lib").joinpath("configs", f"{name}.json"))
        cfg.max_steps = max(1, int(round(cfg.max_steps * args.scale)))
        cfg.warmup_steps = min(cfg.warmup_steps, cfg.max_steps)
        cfg.eval_interval = min(cfg.eval_interval, cfg.max_steps)
        cfg.threads = args.threads
        res = run(cfg, out_dir=None, progress=False)
        res["config_name"] = name
        res["load_average"] = os.getloadavg()[0]
        res["measured_at"] = time.strftime("%Y-%m-%d %H:%M")
        rows.append(res)

    # MiniGPT against nn.TransformerEncoderLayer(norm_first=True), at each configuration's shape.
    vocab = rows[0]["vocab_size"] if rows else 81
    comparisons = []
    for name in () if args.no_compare else CONFIGS:
        cfg = load_config(files("course_lib").joinpath("configs", f"{name}.json"))
        mcfg = cfg.model.with_vocab(vocab)
        cmp = compare_with_torch_encoder(mcfg, cfg.batch_size)
        cmp["config_name"] = name
        cmp["flops_per_token"] = flops_per_token(mcfg)
        cmp["matmul_gflops_at_shape"] = matmul_rate_at_model_shapes(mcfg, cfg.batch_size)
        comparisons.append(cmp)
    load_after = os.getloadavg()

    # The machine's speed drifts (a virtual machine's neighbours): the peak is the best of a
    # measurement before and one after, and every utilisation of this run is computed with it.
    peak = max(peak_before, matmul_peak_gflops())
    for r in rows:
        r["matmul_peak_gflops"] = peak
        r["mfu"] = r["tokens_per_second"] * r["flops_per_token"] / (peak * 1e9)
    for c in comparisons:
        c["mfu_minigpt"] = c["minigpt_tokens_per_second"] * c["flops_per_token"] / (peak * 1e9)

    previous = (
        json.loads(out.read_text()) if args.merge and out is not None and out.exists() else None
    )
    if previous:
        kept = [
            r
            for name, r in previous["runs"].items()
            if name not in {r["config_name"] for r in rows}
        ]
        rows = sorted(
            kept + rows,
            key=lambda r: CONFIGS.index(r["config_name"]) if r["config_name"] in CONFIGS else 99,
        )
        if args.no_compare:
            comparisons = list(previous["torch_encoder_comparison"].values())
    base = next((r for r in rows if r["config_name"] == "baseline"), None)
    print(f"\nfp32 matmul peak used: {peak:.1f} GFLOP/s (best of before and after)")
    print(
        f"{'config':<10} {'params':>9} {'steps':>6} {'tokens/s':>9} {'train s':>8} {'val loss':>9} "
        f"{'ppl':>6} {'vs base':>8} {'MFU':>6}"
    )
    for r in rows:
        delta = f"{r['final_val_loss'] - base['final_val_loss']:+.3f}" if base else "n/a"
        print(
            f"{r['config_name']:<10} {r['params']:>9,} {r['steps']:>6} "
            f"{r['tokens_per_second']:>9,.0f} "
            f"{r['train_seconds']:>8.1f} {r['final_val_loss']:>9.3f} {r['val_perplexity']:>6.2f} "
            f"{delta:>8} "
            f"{100 * r['mfu']:>5.1f}%"
        )
    for c in comparisons:
        print(
            f"{c['config_name']}: MiniGPT {c['minigpt_tokens_per_second']:,.0f} tokens/s, "
            f"nn.TransformerEncoderLayer {c['torch_encoder_tokens_per_second']:,.0f} tokens/s "
            f"(x{c['speedup']:.2f}, median of paired rounds); MiniGPT MFU "
            f"{100 * c['mfu_minigpt']:.1f}%; "
            f"this shape's matrix products alone: {c['matmul_gflops_at_shape']:.0f} GFLOP/s"
        )
    print(f"load average after: {load_after[0]:.2f}")
    summary = {
        "machine": {
            "processor": platform.processor() or platform.machine(),
            "threads": args.threads,
            "torch": torch.__version__,
            "cpu_count": os.cpu_count(),
            "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY", ""),
        },
        "load_average_before": load_before[0],
        "load_average_after": load_after[0],
        "matmul_peak_gflops": peak,
        "scale": args.scale,
        "runs": {r["config_name"]: r for r in rows},
        "torch_encoder_comparison": {c["config_name"]: c for c in comparisons},
        "measured_at": time.strftime("%Y-%m-%d %H:%M"),
    }
    if out is not None:
        write_json(summary, out)
    return summary


if __name__ == "__main__":
    main()
