"""Learning-rate schedules: linear warmup, then cosine decay (as in GPT-2/3 and nanoGPT); or
warmup, a long constant stretch and a short linear decay (warmup-stable-decay, Chapter 15)."""

from __future__ import annotations

import math

__all__ = ["warmup_cosine", "warmup_stable_decay"]


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


def warmup_stable_decay(
    step: int,
    max_lr: float,
    warmup_steps: int,
    total_steps: int,
    decay_fraction: float = 0.3,
    min_lr: float = 0.0,
) -> float:
    """Learning rate at ``step`` (0-based) of a warmup-stable-decay schedule (Hu et al. 2024):

    linear warmup as in ``warmup_cosine``, then ``max_lr`` held constant, then, over the last
    ``decay_fraction`` of ``total_steps``, a straight line down to ``min_lr`` (reached at
    ``total_steps``; kept after). Holding the peak rate longer learns faster; the loss drops
    during the decay, so a run can be stopped at any stable step and cooled down from there.
    """
    if not 0 < decay_fraction <= 1:
        raise ValueError(
            f"warmup_stable_decay: decay_fraction must lie in (0, 1]; got {decay_fraction}."
        )
    decay_start = total_steps - int(round(decay_fraction * total_steps))
    if not 0 <= warmup_steps <= decay_start:
        raise ValueError(
            f"warmup_stable_decay: need 0 <= warmup_steps <= the decay's start ({decay_start}); "
            f"got warmup_steps={warmup_steps}."
        )
    if step < warmup_steps:
        return max_lr * (step + 1) / warmup_steps
    if step >= total_steps:
        return min_lr
    if step < decay_start:
        return max_lr
    progress = (step - decay_start) / max(1, total_steps - decay_start)  # 0 -> 1
    return max_lr + (min_lr - max_lr) * progress
