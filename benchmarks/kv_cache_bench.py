"""Benchmark: generation with and without the KV cache.

    python benchmarks/kv_cache_bench.py                 # a few minutes on one CPU thread
    python benchmarks/kv_cache_bench.py --new 64,256 --out /tmp/kv.json   # a quick run

A MiniGPT of the chapter's shape (course_lib/configs/chapter.json: 4 layers, 4 heads,
d_model 96, no biases) with block_size 1152 and random weights (timing does not need trained
weights) continues a 128-token prompt greedily by 64, 256 and 1,024 new tokens, once
recomputing the whole context at every step and once with the KV cache. Prints a table
(time per new token, speed-up) and writes ``course_lib/results/kv_cache.json`` (Chapter 10
glues from it), including the time of every step of the longest run, for the figure of time
per token against the length of the context.
"""

from __future__ import annotations

import argparse
import os
import platform
import time
from pathlib import Path

import torch
from _common import results_file, write_json  # run from benchmarks/

from course_lib.generate import generate
from course_lib.kv_cache import kv_cache_bytes
from course_lib.model import GPTConfig, MiniGPT

RESULTS = results_file("kv_cache.json")
SHAPE = dict(vocab_size=65, n_layer=4, n_head=4, d_model=96, bias=False)


def build_model(block_size: int) -> MiniGPT:
    torch.manual_seed(0)
    return MiniGPT(GPTConfig(**SHAPE, block_size=block_size)).eval()


def time_generation(
    model: MiniGPT, prompt: torch.Tensor, n_new: int, use_cache: bool, repeats: int
) -> float:
    """Best wall time (s) of ``repeats`` greedy generations of n_new tokens."""
    best = float("inf")
    for _ in range(repeats):
        t = time.perf_counter()
        generate(model, prompt, n_new, temperature=0, use_cache=use_cache)
        best = min(best, time.perf_counter() - t)
    return best


@torch.no_grad()
def step_times(model: MiniGPT, prompt: torch.Tensor, n_new: int, use_cache: bool) -> list[float]:
    """Seconds of each of n_new greedy steps (step 0 includes reading the prompt)."""
    idx, cache, times = prompt, (model.new_cache() if use_cache else None), []
    for step in range(n_new):
        t = time.perf_counter()
        if cache is None:
            logits = model(idx)[0][:, -1]  # (1, V): the whole context again
        else:
            # (1, V): the new token only
            logits = model(idx if step == 0 else idx[:, -1:], cache=cache)[0][:, -1]
        idx = torch.cat([idx, logits.argmax(-1, keepdim=True)], dim=1)
        times.append(time.perf_counter() - t)
    return times


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--new", default="64,256,1024", help="numbers of new tokens")
    p.add_argument("--prompt", type=int, default=128, help="prompt length")
    p.add_argument(
        "--threads",
        type=int,
        default=1,
        help="torch threads (1: least disturbed on a shared machine)",
    )
    p.add_argument(
        "--repeats", type=int, default=3, help="best of this many runs (1 for the longest)"
    )
    p.add_argument("--out", default=str(RESULTS))
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    news = [int(n) for n in args.new.split(",")]
    block = args.prompt + max(news)
    model = build_model(block)
    prompt = torch.randint(
        SHAPE["vocab_size"], (1, args.prompt), generator=torch.Generator().manual_seed(0)
    )
    load_before = os.getloadavg()[0]
    generate(model, prompt, 8, temperature=0)  # warm-up
    rows = []
    for n in news:
        reps = 1 if n == max(news) else args.repeats
        plain = time_generation(model, prompt, n, False, reps)
        cached = time_generation(model, prompt, n, True, reps)
        rows.append(
            {
                "new_tokens": n,
                "context_at_end": args.prompt + n,
                "ms_per_token_no_cache": 1e3 * plain / n,
                "ms_per_token_cache": 1e3 * cached / n,
                "speedup": plain / cached,
            }
        )
    per_step = {
        "no_cache": step_times(model, prompt, max(news), False),
        "cache": step_times(model, prompt, max(news), True),
    }
    cfg = model.cfg
    results = {
        "machine": f"{platform.machine()} {platform.processor() or ''}".strip()
        + f", {os.cpu_count()} cores visible",
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "load_average_before": load_before,
        "load_average_after": os.getloadavg()[0],
        "model": {**SHAPE, "block_size": block, "params": model.num_params()},
        "prompt_tokens": args.prompt,
        "cache_bytes_per_token": kv_cache_bytes(cfg.n_layer, cfg.kv_heads, cfg.head_dim),
        "rows": rows,
        "step_ms": {k: [round(1e3 * t, 4) for t in v] for k, v in per_step.items()},
        "measured_at": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
    }
    print(
        f"MiniGPT {SHAPE['n_layer']} layers, d_model {SHAPE['d_model']}, block_size {block}, "
        f"{args.prompt}-token prompt, {torch.get_num_threads()} threads, greedy"
    )
    print(f"{'new tokens':>10} {'no cache ms/token':>18} {'cache ms/token':>15} {'speed-up':>9}")
    for r in rows:
        print(
            f"{r['new_tokens']:>10} {r['ms_per_token_no_cache']:>18.2f} "
            f"{r['ms_per_token_cache']:>15.2f} "
            f"{r['speedup']:>8.1f}x"
        )
    print(f"cache: {results['cache_bytes_per_token']} bytes per token (all layers, float32)")
    out = Path(args.out)
    write_json(results, out)
    return results


if __name__ == "__main__":
    main()
