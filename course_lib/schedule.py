"""Learning-rate schedules: linear warmup, then cosine decay (as in GPT-2/3 and nanoGPT); or
warmup, a long constant stretch and a short linear decay (warmup-stable-decay, Chapter 15); or
the original transformer's warm-up then inverse square root ("Noam", Chapter 14)."""

from __future__ import annotations

import math

__all__ = ["warmup_cosine", "warmup_stable_decay", "noam_rate", "noam_factor"]


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


def noam_rate(
    step: int, d_model: int, warmup_steps: int, factor: float = 1.0, warm_up: bool = True
) -> float:
    """Learning rate at ``step`` (1-based, as the paper counts) of the original transformer
    (Vaswani et al. 2017, eq. 3, "Noam" after its author):

        lr = factor · d_model^-0.5 · min(step^-0.5, step · warmup_steps^-1.5),

    a linear rise for ``warmup_steps`` steps to its peak factor · (d_model · warmup_steps)^-0.5,
    then a decay proportional to 1 / √step. ``warm_up=False`` replaces the rise by the peak
    rate (the same schedule without warm-up: constant, then the same 1 / √step decay).
    """
    if step < 1 or warmup_steps < 1 or d_model < 1:
        raise ValueError(
            "noam_rate: step, warmup_steps and d_model must be >= 1 (steps count from 1); got "
            f"step={step}, warmup_steps={warmup_steps}, d_model={d_model}."
        )
    ramp = step * warmup_steps**-1.5 if warm_up else warmup_steps**-0.5
    return factor * d_model**-0.5 * min(step**-0.5, ramp)


def noam_factor(peak_lr: float, d_model: int, warmup_steps: int) -> float:
    """The ``factor`` that makes ``noam_rate`` peak at ``peak_lr`` (at step ``warmup_steps``):
    peak_lr · √(d_model · warmup_steps). With d_model = 512 and 4,000 warm-up steps the paper's
    factor 1 peaks at 7e-4; a small model trained for a few hundred steps needs another."""
    return peak_lr * math.sqrt(d_model * warmup_steps)
