"""LoRA: low-rank adapters for a frozen linear layer (Hu et al., 2022), written from scratch.

A frozen ``nn.Linear`` computes ``y = x W^T + b`` with W (out, in). LoRA learns a change of W
that has rank at most r: ``ΔW = (alpha / r) · B A`` with A (r, in) and B (out, r), so

    y = x W^T + b + (alpha / r) · (x A^T) B^T

costs r · (in + out) trainable numbers instead of in · out. A starts small and random, B at
zero, so at the start ``ΔW = 0`` and the adapted model computes exactly what the pretrained
one did. After training, ``merge`` folds ΔW into W: the adapted model runs as fast as the
original, with no extra layer.

``add_lora(model, rank)`` wraps the attention projections (``attn.qkv`` and ``attn.proj`` of
every block of a ``course_lib.model`` model) and freezes everything else except the modules
you name in ``trainable`` (e.g. a new classification head).
"""

from __future__ import annotations

import math

import torch
from torch import nn

__all__ = [
    "LoRALinear",
    "add_lora",
    "merge_lora",
    "lora_parameters",
    "count_trainable",
    "lora_param_count",
]


class LoRALinear(nn.Module):
    """A frozen ``nn.Linear`` plus a trainable low-rank update.

    ``forward(x)``: x (..., in) -> (..., out) = base(x) + (alpha / rank) · (x Aᵀ) Bᵀ.
    A: (rank, in), initialised like ``nn.Linear`` (Kaiming-uniform); B: (out, rank), zeros.
    """

    def __init__(self, base: nn.Linear, rank: int, alpha: float | None = None):
        super().__init__()
        if not isinstance(base, nn.Linear):
            raise ValueError(f"LoRALinear: wrap an nn.Linear; got {type(base).__name__}.")
        if int(rank) < 1 or rank > min(base.in_features, base.out_features):
            raise ValueError(
                "LoRALinear: rank must lie in [1, min(in, out) = "
                f"{min(base.in_features, base.out_features)}]; got {rank}."
            )
        self.base, self.rank = base, int(rank)
        self.alpha = float(rank if alpha is None else alpha)
        self.scale = self.alpha / self.rank  # keeps the update's size comparable across ranks
        for p in self.base.parameters():
            p.requires_grad_(False)  # the pretrained weights stay as they are
        self.A = nn.Parameter(torch.empty(self.rank, base.in_features))  # (r, in)
        # (out, r): ΔW = 0 at the start
        self.B = nn.Parameter(torch.zeros(base.out_features, self.rank))
        nn.init.kaiming_uniform_(self.A, a=math.sqrt(5))  # as nn.Linear initialises its weight
        self.merged = False

    @property
    def in_features(self) -> int:
        return self.base.in_features

    @property
    def out_features(self) -> int:
        return self.base.out_features

    @property
    def weight(self) -> torch.Tensor:
        """The effective weight W + scale · B A, (out, in) (what ``merge`` writes into the base)."""
        if self.merged:
            return self.base.weight
        return self.base.weight + self.scale * (self.B @ self.A)

    @property
    def bias(self) -> torch.Tensor | None:
        return self.base.bias

    def delta_weight(self) -> torch.Tensor:
        """ΔW = scale · B A, (out, in): rank at most ``rank``."""
        return self.scale * (self.B @ self.A)  # (out, in)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.base(x)  # (..., out): the frozen layer
        if self.merged:
            return y
        # two thin products, (..., in) -> (..., r) -> (..., out): never builds the (out, in) ΔW
        return y + self.scale * ((x @ self.A.T) @ self.B.T)  # (..., out)

    @torch.no_grad()
    def merge(self) -> nn.Linear:
        """Fold ΔW into the base weight and return the base ``nn.Linear`` (same outputs)."""
        if not self.merged:
            self.base.weight += self.delta_weight()
            self.merged = True
        return self.base

    def extra_repr(self) -> str:
        shape = f"in={self.in_features}, out={self.out_features}"
        return f"{shape}, rank={self.rank}, alpha={self.alpha:g}"


def add_lora(
    model: nn.Module,
    rank: int,
    alpha: float | None = None,
    targets: tuple[str, ...] = ("attn.qkv", "attn.proj"),
    trainable: tuple[str, ...] = (),
) -> nn.Module:
    """Freeze ``model`` and replace each ``nn.Linear`` whose qualified name ends with one of
    ``targets`` by a ``LoRALinear`` (in place; returns the model). Parameters whose name starts
    with one of ``trainable`` (e.g. ``("head",)``) stay trainable."""
    for p in model.parameters():
        p.requires_grad_(False)
    names = [
        n for n, m in model.named_modules() if isinstance(m, nn.Linear) and n.endswith(targets)
    ]
    if not names:
        raise ValueError(f"add_lora: no nn.Linear in the model has a name ending with {targets}.")
    for name in names:
        parent_name, _, child = name.rpartition(".")
        parent = model.get_submodule(parent_name) if parent_name else model
        setattr(parent, child, LoRALinear(getattr(parent, child), rank, alpha))
    for n, p in model.named_parameters():
        if n.startswith(tuple(trainable)):
            p.requires_grad_(True)
    return model


def merge_lora(model: nn.Module) -> nn.Module:
    """Replace every ``LoRALinear`` by its merged ``nn.Linear`` (in place; returns the model)."""
    names = [n for n, m in model.named_modules() if isinstance(m, LoRALinear)]
    for name in names:
        parent_name, _, child = name.rpartition(".")
        parent = model.get_submodule(parent_name) if parent_name else model
        setattr(parent, child, getattr(parent, child).merge())
    return model


def lora_parameters(model: nn.Module) -> list[nn.Parameter]:
    """The A and B matrices of every adapter."""
    return [p for m in model.modules() if isinstance(m, LoRALinear) for p in (m.A, m.B)]


def count_trainable(model: nn.Module) -> int:
    """Number of parameters with ``requires_grad`` (shared ones counted once)."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def lora_param_count(shapes: list[tuple[int, int]], rank: int) -> int:
    """Adapter parameters for weights of the given (out, in) shapes at ``rank``: Σ r (in + out)."""
    if rank < 1:
        raise ValueError(f"lora_param_count: rank must be >= 1; got {rank}.")
    return sum(rank * (i + o) for o, i in shapes)
