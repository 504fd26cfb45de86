"""What attention costs as sequences grow, and how a fused kernel avoids the T×T matrix.

- ``score_matrix_bytes`` / ``score_matrix_table``: the size of QKᵀ, computed, not guessed.
- ``peak_memory`` / ``best_time`` / ``measure_attention_cost``: measured peak memory (from
  PyTorch's allocator, via its profiler) and time of the naive formula
  (``course_lib.scaled_dot_product_attention``, which builds the whole score matrix) against
  ``torch.nn.functional.scaled_dot_product_attention`` (a fused, tiled kernel).
- ``tiled_attention``: the FlashAttention idea (Dao et al., 2022) in a dozen lines of PyTorch:
  keys are visited block by block with an *online softmax*, so no T×T matrix ever exists.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable, Sequence
from contextlib import contextmanager
from functools import partial

import torch
import torch.nn.functional as F

from ..attention import _check_qkv, scaled_dot_product_attention

__all__ = [
    "score_matrix_bytes",
    "format_bytes",
    "score_matrix_table",
    "peak_memory",
    "best_time",
    "measure_attention_cost",
    "tiled_attention",
]


def score_matrix_bytes(
    T: int, n_heads: int = 1, n_layers: int = 1, batch: int = 1, bytes_per_entry: int = 4
) -> int:
    """Bytes of the attention score matrices: batch · n_layers · n_heads · T² entries."""
    for name, val in (
        ("T", T),
        ("n_heads", n_heads),
        ("n_layers", n_layers),
        ("batch", batch),
        ("bytes_per_entry", bytes_per_entry),
    ):
        if int(val) != val or val < 1:
            raise ValueError(f"score_matrix_bytes: {name} must be a positive integer; got {val!r}.")
    return int(batch) * int(n_layers) * int(n_heads) * int(T) ** 2 * int(bytes_per_entry)


def format_bytes(n: float) -> str:
    """1536 -> '1.5 KiB': binary units (KiB = 1024 bytes), three significant figures."""
    if n < 0:
        raise ValueError(f"format_bytes: a size cannot be negative; got {n}.")
    units = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"]
    i = 0
    while n >= 1024 and i < len(units) - 1:
        n, i = n / 1024, i + 1
    return f"{n:.0f} {units[i]}" if i == 0 else f"{n:.3g} {units[i]}"


def score_matrix_table(
    lengths: Sequence[int], n_heads: int = 32, n_layers: int = 32, bytes_per_entry: int = 2
) -> list[dict[str, object]]:
    """One row per sequence length T: entries of one score matrix (T²), its size in float32,
    and the size of all score matrices of a model with ``n_heads`` heads in each of
    ``n_layers`` layers, stored with ``bytes_per_entry`` bytes (2 = bfloat16), as naive
    training keeps them for the backward pass."""
    rows = []
    for T in lengths:
        rows.append(
            {
                "T": int(T),
                "entries": int(T) ** 2,
                "one_matrix_fp32": score_matrix_bytes(T),
                "whole_model": score_matrix_bytes(
                    T, n_heads, n_layers, bytes_per_entry=bytes_per_entry
                ),
            }
        )
    return rows


@contextmanager
def _quiet_stderr():
    """Silence file descriptor 2: the profiler's C++ layer logs start/stop lines with a
    timestamp there, which would make notebook output differ from run to run."""
    try:
        saved = os.dup(2)
    except OSError:  # no real stderr (some embedded interpreters): nothing to silence
        yield
        return
    try:
        with open(os.devnull, "w") as devnull:
            os.dup2(devnull.fileno(), 2)
            yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def peak_memory(fn: Callable[[], object]) -> int:
    """Peak bytes that ``fn()`` holds in tensors allocated while it runs.

    PyTorch's profiler records every CPU allocation and free, attributed to the operator that
    made it; replaying them in time order gives the largest amount held at once. Memory that
    an operator allocates and frees internally (a fused kernel's small working buffers)
    nets to zero, so it is not counted. Deterministic: it counts bytes, not time.
    """
    with _quiet_stderr():
        with torch.autograd.profiler.profile(profile_memory=True, use_kineto=False) as prof:
            fn()
    events = sorted(prof.function_events, key=lambda e: e.time_range.start)
    held = peak = 0
    for e in events:
        held += e.self_cpu_memory_usage
        peak = max(peak, held)
    return int(peak)


def best_time(fn: Callable[[], object], repeats: int = 3) -> float:
    """Fastest of ``repeats`` calls, in seconds, after one warm-up call. The minimum is the
    least disturbed by other programs sharing the CPU."""
    if repeats < 1:
        raise ValueError(f"best_time: repeats must be at least 1; got {repeats}.")
    fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def measure_attention_cost(
    lengths: Sequence[int],
    n_heads: int = 2,
    head_dim: int = 64,
    repeats: int = 3,
    seed: int = 0,
    threads: int = 1,
    block: int = 128,
) -> dict[str, list]:
    """Time and peak memory of naive vs fused attention for each sequence length.

    Inputs are q, k, v of shape (1, n_heads, T, head_dim). "naive" is
    ``course_lib.scaled_dot_product_attention`` (builds the (1, n_heads, T, T) score and
    weight matrices); "fused" is ``F.scaled_dot_product_attention`` (never stores them);
    "tiled" is ``tiled_attention`` with key blocks of ``block`` (plain PyTorch, no fusion).
    Runs on ``threads`` CPU threads (default 1: on a shared machine, multi-threaded kernels
    wait for descheduled threads, which measures the neighbours rather than the algorithm).
    Returns a dict of lists: ``T``; ``time_naive``, ``time_fused``, ``time_tiled`` (seconds,
    vary run to run); ``mem_naive``, ``mem_fused``, ``mem_tiled`` (peak bytes,
    deterministic); ``max_abs_diff``: the largest difference of naive or tiled from fused.
    """
    if len(lengths) == 0 or any(int(T) != T or T < 1 for T in lengths):
        raise ValueError(
            f"measure_attention_cost: lengths must be positive integers; got {list(lengths)}."
        )
    if int(threads) != threads or threads < 1:
        raise ValueError(
            f"measure_attention_cost: threads must be a positive integer; got {threads!r}."
        )
    gen = torch.Generator().manual_seed(seed)
    old_threads = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        return _measure(lengths, n_heads, head_dim, repeats, gen, block)
    finally:
        torch.set_num_threads(old_threads)


def _measure(lengths, n_heads, head_dim, repeats, gen, block) -> dict[str, list]:
    res: dict[str, list] = {
        k: []
        for k in (
            "T",
            "time_naive",
            "time_fused",
            "time_tiled",
            "mem_naive",
            "mem_fused",
            "mem_tiled",
            "max_abs_diff",
        )
    }
    with torch.no_grad():  # inference: no graph kept, so memory is the forward pass alone
        for T in lengths:
            # (1, H, T, hd)
            q, k, v = (torch.randn(1, n_heads, T, head_dim, generator=gen) for _ in range(3))
            naive = partial(_attention_output, q, k, v)
            fused = partial(F.scaled_dot_product_attention, q, k, v)
            tiled = partial(tiled_attention, q, k, v, block=block)
            res["T"].append(int(T))
            for name, fn in (("naive", naive), ("fused", fused), ("tiled", tiled)):
                res[f"time_{name}"].append(best_time(fn, repeats))
                res[f"mem_{name}"].append(peak_memory(fn))
            reference = fused()
            res["max_abs_diff"].append(
                max(
                    (naive() - reference).abs().max().item(),
                    (tiled() - reference).abs().max().item(),
                )
            )
    return res


def _attention_output(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    return scaled_dot_product_attention(q, k, v)[0]  # the (..., T, d_v) output, weights dropped


def tiled_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, block: int = 64, causal: bool = False
) -> torch.Tensor:
    """Exact softmax(QKᵀ/√d_k)V computed over key blocks with an online softmax.

    Shapes: q (..., T_q, d_k), k (..., T_k, d_k), v (..., T_k, d_v) -> (..., T_q, d_v).
    Only a (..., T_q, block) slice of scores exists at any time. For each query it keeps a
    running maximum m, a running normaliser l = Σ exp(s - m) and a running numerator
    acc = Σ exp(s - m) v; when a new block raises the maximum, the old sums are rescaled by
    exp(m_old - m_new). This is the bookkeeping of FlashAttention (Dao et al., 2022), which
    also tiles the queries and keeps the blocks in fast on-chip memory.
    ``causal=True`` lets query i see keys j <= i (needs T_q == T_k).
    """
    _check_qkv(q, k, v)
    if int(block) != block or block < 1:
        raise ValueError(f"tiled_attention: block must be a positive integer; got {block!r}.")
    T_q, T_k = q.shape[-2], k.shape[-2]
    if causal and T_q != T_k:
        raise ValueError(f"tiled_attention: causal=True needs T_q == T_k; got {T_q} and {T_k}.")
    scale = 1.0 / math.sqrt(q.shape[-1])
    m = torch.full((*q.shape[:-1], 1), float("-inf"), dtype=q.dtype)  # (..., T_q, 1) running max
    l = torch.zeros_like(m)  # (..., T_q, 1) running Σ exp(s - m)  # noqa: E741 (the paper's l)
    acc = torch.zeros(*q.shape[:-1], v.shape[-1], dtype=q.dtype)  # (..., T_q, d_v)
    rows = torch.arange(T_q)[:, None]  # (T_q, 1)
    for start in range(0, T_k, block):
        kb, vb = k[..., start : start + block, :], v[..., start : start + block, :]  # (..., b, d)
        s = (q @ kb.transpose(-2, -1)) * scale  # (..., T_q, b): one block of scores
        if causal:
            cols = torch.arange(start, start + kb.shape[-2])[None, :]  # (1, b)
            s = s.masked_fill(cols > rows, float("-inf"))
        m_new = torch.maximum(m, s.amax(dim=-1, keepdim=True))  # (..., T_q, 1)
        # A row whose keys so far are all masked has m_new = -inf; use 0 there to avoid inf - inf.
        m_safe = torch.where(torch.isinf(m_new), torch.zeros_like(m_new), m_new)
        p = torch.exp(s - m_safe)  # (..., T_q, b)
        correction = torch.exp(m - m_safe)  # (..., T_q, 1): rescales the old sums
        l = l * correction + p.sum(dim=-1, keepdim=True)  # noqa: E741
        acc = acc * correction + p @ vb  # (..., T_q, d_v)
        m = m_new
    return acc / l  # (..., T_q, d_v)
