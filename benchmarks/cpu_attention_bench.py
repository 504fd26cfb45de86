"""Benchmark: PyTorch's fused causal attention against a plain baddbmm + softmax + bmm on the CPU.

    python benchmarks/cpu_attention_bench.py             # op and training-step tables (minutes)
    python benchmarks/cpu_attention_bench.py --rounds 3  # quicker, noisier

A profile of the chapter's training step put ``F.scaled_dot_product_attention``'s CPU kernel
at about a quarter of the step at T=64. This script measures whether the three-kernel path
(scores = baddbmm(causal bias, q, kᵀ, alpha=1/√d), softmax, bmm with v) is faster, first for
the attention op alone (forward + backward) at the shapes of ``course_lib/configs``, then for
whole MiniGPT training steps with the fused call swapped for the plain path. Every speed-up is
the median of per-round ratios over rounds that alternate the two paths (a drifting machine
hits both alike). It checks first that both paths give the same outputs and gradients.
A third table times GELU's exact (erf) form against its tanh approximation (GPT-2's), whose
outputs differ slightly. It changes nothing in course_lib: the tables are for deciding whether
model.py should switch.
"""

from __future__ import annotations

import argparse
import math
import statistics
import time
from contextlib import contextmanager
from functools import partial
from importlib.resources import files

import torch
import torch.nn.functional as F
from train_bench import step_seconds  # the one timed training step (run from benchmarks/)

from course_lib.model import MiniGPT
from course_lib.train import load_config, make_optimizer

CONFIGS = ("chapter", "long", "baseline")
_fused = F.scaled_dot_product_attention
_bias_cache: dict = {}


def causal_bias(T: int, dtype: torch.dtype) -> torch.Tensor:
    """(T, T) additive mask: 0 where query i may see key j (j <= i), -inf elsewhere."""
    key = (T, dtype)
    if key not in _bias_cache:
        _bias_cache[key] = torch.full((T, T), float("-inf"), dtype=dtype).triu(1)
    return _bias_cache[key]


def plain_causal_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """softmax(q kᵀ/√d + causal bias) v with three batched kernels.

    q, k, v: (B, H, T, hd) -> (B, H, T, hd)."""
    B, H, T, hd = q.shape
    qf, kf, vf = (t.reshape(B * H, T, hd) for t in (q, k, v))  # (B·H, T, hd)
    # (B·H, T, T)
    scores = torch.baddbmm(
        causal_bias(T, q.dtype), qf, kf.transpose(1, 2), alpha=1.0 / math.sqrt(hd)
    )
    return torch.bmm(scores.softmax(dim=-1), vf).view(B, H, T, hd)  # (B, H, T, hd)


def _sdpa_or_plain(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, **kw):
    """Drop-in for F.scaled_dot_product_attention that takes the plain path where it applies
    (causal, no extra mask, no dropout, default scale) and the fused call otherwise."""
    if (
        is_causal
        and attn_mask is None
        and dropout_p == 0.0
        and scale is None
        and not kw
        and q.shape[-2] == k.shape[-2]
    ):
        return plain_causal_attention(q, k, v)
    return _fused(
        q, k, v, attn_mask=attn_mask, dropout_p=dropout_p, is_causal=is_causal, scale=scale, **kw
    )


@contextmanager
def plain_attention():
    F.scaled_dot_product_attention = _sdpa_or_plain
    try:
        yield
    finally:
        F.scaled_dot_product_attention = _fused


def check_same_numbers(B=4, H=2, T=16, hd=8) -> float:
    """Largest difference between the two paths (outputs and all three gradients)."""
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(B, H, T, hd, generator=g, requires_grad=True) for _ in range(3))
    grads = []
    for fn in (lambda: _fused(q, k, v, is_causal=True), lambda: plain_causal_attention(q, k, v)):
        out = fn()
        gq, gk, gv = torch.autograd.grad(out.pow(2).sum(), (q, k, v))
        grads.append((out, gq, gk, gv))
    return max((a - b).abs().max().item() for a, b in zip(*grads))


def _gelu_exact(a, b, c):
    return F.gelu(a)


def _gelu_tanh(a, b, c):
    return F.gelu(a, approximate="tanh")


def _plain_step_seconds(model, opt, x, y) -> float:
    with plain_attention():
        return step_seconds(model, opt, x, y, 10, warmup=2)


def op_seconds(fn, q, k, v, repeats: int) -> float:
    """Seconds per forward + backward of one attention call."""
    for _ in range(3):
        fn(q, k, v).sum().backward()
    t = time.perf_counter()
    for _ in range(repeats):
        fn(q, k, v).sum().backward()
    return (time.perf_counter() - t) / repeats


def paired(measure_fused, measure_plain, rounds: int) -> tuple[float, float, float]:
    """Median seconds of each path and the median per-round speed-up (fused time / plain time)."""
    fused, plain = [], []
    for r in range(rounds):
        order = (0, 1) if r % 2 == 0 else (1, 0)
        pair = {}
        for which in order:
            pair[which] = measure_fused() if which == 0 else measure_plain()
        fused.append(pair[0])
        plain.append(pair[1])
    ratios = [a / b for a, b in zip(fused, plain)]
    return statistics.median(fused), statistics.median(plain), statistics.median(ratios)


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--only", default=",".join(CONFIGS))
    p.add_argument(
        "--no-steps", action="store_true", help="only the attention op, not whole training steps"
    )
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    diff = check_same_numbers()
    print(f"largest difference between the paths (outputs and gradients): {diff:.2e}")
    results = {"threads": args.threads, "max_abs_difference": diff, "op": {}, "step": {}}
    print(
        f"\nattention forward + backward, median of {args.rounds} paired rounds, {args.threads} "
        "threads"
    )
    print(f"{'config':<10} {'B,H,T,hd':<16} {'fused ms':>9} {'plain ms':>9} {'speed-up':>9}")
    shapes = {}
    for name in filter(None, args.only.split(",")):
        cfg = load_config(files("course_lib").joinpath("configs", f"{name}.json"))
        m = cfg.model
        shape = (cfg.batch_size, m.n_head, m.block_size, m.d_model // m.n_head)
        shapes[name] = cfg
        g = torch.Generator().manual_seed(0)
        q, k, v = (torch.randn(*shape, generator=g, requires_grad=True) for _ in range(3))
        repeats = 30
        f, pl, ratio = paired(
            partial(op_seconds, partial(_fused, is_causal=True), q, k, v, repeats),
            partial(op_seconds, plain_causal_attention, q, k, v, repeats),
            args.rounds,
        )
        results["op"][name] = {
            "shape": shape,
            "fused_ms": 1e3 * f,
            "plain_ms": 1e3 * pl,
            "speedup": ratio,
        }
        print(
            f"{name:<10} {','.join(map(str, shape)):<16} {1e3 * f:>9.3f} {1e3 * pl:>9.3f} "
            f"{ratio:>8.2f}x",
            flush=True,
        )
    print(
        "\nGELU forward + backward on the MLP's hidden activations (B·T, 4d), exact erf against "
        "the tanh form"
    )
    print(
        f"{'config':<10} {'shape':<16} {'exact ms':>9} {'tanh ms':>9} {'speed-up':>9} "
        f"{'max diff':>9}"
    )
    for name, cfg in shapes.items():
        h = torch.randn(
            cfg.batch_size * cfg.model.block_size,
            4 * cfg.model.d_model,
            generator=torch.Generator().manual_seed(0),
            requires_grad=True,
        )
        f, pl, ratio = paired(
            partial(op_seconds, _gelu_exact, h, None, None, 30),
            partial(op_seconds, _gelu_tanh, h, None, None, 30),
            args.rounds,
        )
        diff = (F.gelu(h) - F.gelu(h, approximate="tanh")).abs().max().item()
        results.setdefault("gelu", {})[name] = {
            "exact_ms": 1e3 * f,
            "tanh_ms": 1e3 * pl,
            "speedup": ratio,
            "max_diff": diff,
        }
        print(
            f"{name:<10} {'x'.join(map(str, h.shape)):<16} {1e3 * f:>9.3f} {1e3 * pl:>9.3f} "
            f"{ratio:>8.2f}x {diff:>9.1e}",
            flush=True,
        )
    if args.no_steps:
        return results
    print(f"\nMiniGPT training step (vocabulary 81), median of {args.rounds} paired rounds")
    print(
        f"{'config':<10} {'fused ms':>9} {'plain ms':>9} {'speed-up':>9} {'tokens/s fused':>15} "
        f"{'tokens/s plain':>15}"
    )
    for name, cfg in shapes.items():
        mcfg = cfg.model.with_vocab(81)
        torch.manual_seed(0)
        model = MiniGPT(mcfg)
        opt = make_optimizer(model, 1e-4, 0.1)
        g = torch.Generator().manual_seed(0)
        x = torch.randint(81, (cfg.batch_size, mcfg.block_size), generator=g)
        y = torch.randint(81, (cfg.batch_size, mcfg.block_size), generator=g)
        f, pl, ratio = paired(
            partial(step_seconds, model, opt, x, y, 10, warmup=2),
            partial(_plain_step_seconds, model, opt, x, y),
            args.rounds,
        )
        tokens = cfg.batch_size * mcfg.block_size
        results["step"][name] = {
            "fused_ms": 1e3 * f,
            "plain_ms": 1e3 * pl,
            "speedup": ratio,
            "tokens_per_second_fused": tokens / f,
            "tokens_per_second_plain": tokens / pl,
        }
        print(
            f"{name:<10} {1e3 * f:>9.2f} {1e3 * pl:>9.2f} {ratio:>8.2f}x {tokens / f:>15,.0f} "
            f"{tokens / pl:>15,.0f}",
            flush=True,
        )
    return results


if __name__ == "__main__":
    main()
