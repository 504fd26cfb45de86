"""The language-model loss in practice: shifted targets, padding and label smoothing.

Built on ``course_lib.loss`` (``log_softmax``, ``cross_entropy``); the tests compare with
``torch.nn.functional.cross_entropy`` (including its ``label_smoothing`` option).
"""

from __future__ import annotations

import torch

from .loss import cross_entropy, log_softmax

__all__ = ["next_token_targets", "lm_cross_entropy", "label_smoothed_cross_entropy"]


def next_token_targets(
    ids: torch.Tensor, pad_id: int | None = None, ignore_index: int = -100
) -> tuple[torch.Tensor, torch.Tensor]:
    """Split token ids into model inputs and next-token targets.

    The target at position t is the token at t + 1, so inputs = ids[:, :-1] and
    targets = ids[:, 1:]. Targets equal to ``pad_id`` become ``ignore_index`` so the loss
    skips them. Shapes: ids (B, T) -> inputs (B, T-1), targets (B, T-1).
    """
    if ids.dim() != 2 or ids.shape[1] < 2:
        raise ValueError(
            f"next_token_targets: ids must be (B, T) with T >= 2 (one input and one target); "
            f"got shape {tuple(ids.shape)}."
        )
    inputs = ids[:, :-1]  # (B, T-1)
    targets = ids[:, 1:].clone()  # (B, T-1); a copy, so padding can be marked without touching ids
    if pad_id is not None:
        targets[targets == pad_id] = ignore_index
    return inputs, targets


def lm_cross_entropy(
    logits: torch.Tensor, targets: torch.Tensor, ignore_index: int = -100
) -> torch.Tensor:
    """Mean next-token cross-entropy of a (B, T, V) logits tensor against (B, T) targets:
    flattens to (B·T, V) and (B·T,) and calls ``course_lib.loss.cross_entropy``."""
    if logits.dim() != 3 or logits.shape[:2] != targets.shape:
        raise ValueError(
            f"lm_cross_entropy: need logits (B, T, V) and targets (B, T); got "
            f"{tuple(logits.shape)} and {tuple(targets.shape)}."
        )
    V = logits.shape[-1]
    return cross_entropy(logits.reshape(-1, V), targets.reshape(-1), ignore_index=ignore_index)


def label_smoothed_cross_entropy(
    logits: torch.Tensor, targets: torch.Tensor, smoothing: float, ignore_index: int = -100
) -> torch.Tensor:
    """Cross-entropy against the smoothed target (1 - ε)·onehot(y) + ε/V·uniform.

    Equals (1 - ε)·NLL + ε·mean_k(-log p_k), averaged over the non-ignored positions, as
    ``F.cross_entropy(..., label_smoothing=ε)``. Shapes: logits (N, V), targets (N,).
    """
    if not 0.0 <= smoothing <= 1.0:
        raise ValueError(
            f"label_smoothed_cross_entropy: smoothing must be in [0, 1]; got {smoothing}."
        )
    if logits.dim() != 2 or targets.shape != logits.shape[:1]:
        raise ValueError(
            f"label_smoothed_cross_entropy: need logits (N, V) and targets (N,); got "
            f"{tuple(logits.shape)} and {tuple(targets.shape)}."
        )
    nll = cross_entropy(logits, targets, ignore_index=ignore_index)  # validates the targets
    keep = targets != ignore_index  # (N,)
    # mean over classes, then tokens
    uniform = -log_softmax(logits[keep], dim=-1).mean(dim=-1).mean()
    return (1.0 - smoothing) * nll + smoothing * uniform
