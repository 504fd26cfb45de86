"""Learning-rate schedules: linear warmup, then cosine decay (as in GPT-2/3 and nanoGPT)."""

from __future__ import annotations

import math

__all__ = ["warmup_cosine"]


def warmup_cosine(
    step: int, max_lr: float, warmup_steps: int, total_steps: int, min_lr: float = 0.0
) -> float:
    """Learning rate at ``step`` (0-based).

    Rises linearly from max_lr/warmup_steps to max_lr over the first ``warmup_steps`` steps
    (never 0, so the first step already learns), then follows half a cosine from max_lr down
    to ``min_lr`` at ``total_steps``; stays at ``min_lr`` after that.
    """
    if not 0 <= warmup_steps <= total_steps:
        raise ValueError(
            f"warmup_cosine: need 0 <= warmup_steps <= total_steps; got {warmup_steps} and "
            f"{total_steps}."
        )
    if step < warmup_steps:
        return max_lr * (step + 1) / warmup_steps
    if step >= total_steps:
        return min_lr
    progress = (step - warmup_steps) / max(1, total_steps - warmup_steps)  # 0 -> 1
    return min_lr + 0.5 * (max_lr - min_lr) * (1.0 + math.cos(math.pi * progress))
