"""Muon (Jordan et al. 2024): momentum, then the update matrix orthogonalised.

For a weight matrix W with gradient momentum M = U S Vᵀ (its SVD), Muon steps along U Vᵀ:
every singular direction of the update gets the same size, so directions that the gradient
barely touches are not starved by the few that dominate it. The SVD is slow on accelerators;
Muon approximates U Vᵀ with a few steps of a Newton–Schulz iteration, matrix products only:

    X ← M / ‖M‖_F                       (singular values now at most 1)
    X ← a X + (b X Xᵀ + c (X Xᵀ)²) X     (repeat ``steps`` times)

Each step maps every singular value σ to p(σ) = a σ + b σ³ + c σ⁵ and leaves U and V alone.
The quintic's coefficients (3.4445, -4.7750, 2.0315) are tuned to push small σ up fast; they
do not converge to exactly 1 but to roughly 0.7-1.2, which trains as well. The classic cubic
(1.5, -0.5, 0) converges to exactly U Vᵀ, slowly (``tests/labs/test_muon.py`` checks both against
``orthogonalize_svd``, and ``Muon`` against ``torch.optim.Muon``).

Muon is for the hidden layers' matrices; embeddings, the output head and the gains of the
norms keep AdamW (``muon_param_groups`` splits a model's parameters that way).
"""

from __future__ import annotations

import math

import torch
from torch import nn

__all__ = [
    "QUINTIC",
    "CUBIC",
    "newton_schulz",
    "orthogonalize_svd",
    "Muon",
    "muon_param_groups",
]

QUINTIC = (3.4445, -4.7750, 2.0315)  # Jordan et al. 2024 (modded-nanogpt)
CUBIC = (1.5, -0.5, 0.0)  # the textbook iteration: converges to U Vᵀ


def newton_schulz(
    G: torch.Tensor,
    steps: int = 5,
    coefficients: tuple[float, float, float] = QUINTIC,
    eps: float = 1e-7,
    dtype: torch.dtype = torch.float32,
) -> torch.Tensor:
    """Approximately orthogonalise G (..., m, n): returns ≈ U Vᵀ (..., m, n) where G = U S Vᵀ
    (a stack of matrices is done at once, each on its own).

    Works on the wide orientation (rows <= columns) so X Xᵀ is the small Gram matrix.
    ``dtype``: the precision of the products (modded-nanogpt and torch.optim.Muon use
    bfloat16 on GPUs; float32 is the default here, exact enough and fast on CPUs).
    """
    if G.dim() < 2:
        raise ValueError(f"newton_schulz: G must be a matrix (m, n); got shape {tuple(G.shape)}.")
    if steps < 0:
        raise ValueError(f"newton_schulz: steps must be >= 0; got {steps}.")
    a, b, c = coefficients
    X = G.to(dtype)
    tall = G.shape[-2] > G.shape[-1]
    if tall:
        X = X.mT  # (..., n, m): wide
    rows, cols = X.shape[-2:]
    X = X.reshape(-1, rows, cols)  # (N, rows, cols): one batch dimension, for baddbmm
    # Frobenius norm >= spectral norm, so every singular value is now at most 1
    X = X / X.norm(dim=(-2, -1), keepdim=True).clamp(min=eps)
    for _ in range(steps):
        A = X @ X.mT  # (N, rows, rows)
        # B = b A + c A², X = a X + B X: baddbmm scales and adds inside the product (one
        # kernel instead of three, about 13 % of the iteration's time on a CPU)
        B = torch.baddbmm(A, A, A, beta=b, alpha=c)  # (N, rows, rows)
        X = torch.baddbmm(X, B, X, beta=a)  # (N, rows, cols): σ -> a σ + b σ³ + c σ⁵
    X = X.reshape(*G.shape[:-2], rows, cols)
    return X.mT if tall else X


def orthogonalize_svd(G: torch.Tensor) -> torch.Tensor:
    """The exact orthogonalisation U Vᵀ of G (m, n) = U S Vᵀ, from the SVD (the reference)."""
    if G.dim() != 2:
        raise ValueError(
            f"orthogonalize_svd: G must be a matrix (m, n); got shape {tuple(G.shape)}."
        )
    U, _, Vh = torch.linalg.svd(G, full_matrices=False)  # (m, r), (r, n)
    return U @ Vh


class Muon(torch.optim.Optimizer):
    """Muon for 2-d parameters, step for step the update of ``torch.optim.Muon``:

        B ← μ B + g                      (momentum buffer)
        u = g + μ B  (Nesterov) or B
        O = newton_schulz(u)
        W ← W (1 - η λ) - η · √max(1, rows/cols) · O

    The factor √max(1, rows/cols) keeps the update's RMS alike for tall matrices.
    """

    def __init__(
        self,
        params,
        lr: float = 0.02,
        momentum: float = 0.95,
        nesterov: bool = True,
        weight_decay: float = 0.0,
        ns_steps: int = 5,
        ns_dtype: torch.dtype = torch.float32,
    ):
        if lr < 0 or not 0 <= momentum < 1 or weight_decay < 0:
            raise ValueError(
                f"Muon: need lr >= 0, 0 <= momentum < 1, weight_decay >= 0; got lr={lr}, "
                f"momentum={momentum}, weight_decay={weight_decay}."
            )
        defaults = dict(
            lr=lr,
            momentum=momentum,
            nesterov=nesterov,
            weight_decay=weight_decay,
            ns_steps=ns_steps,
        )
        super().__init__(params, defaults)
        self.ns_dtype = ns_dtype
        for group in self.param_groups:
            for p in group["params"]:
                if p.dim() != 2:
                    raise ValueError(
                        f"Muon: only matrices can be orthogonalised; got a parameter of shape "
                        f"{tuple(p.shape)}. Give vectors and embeddings to AdamW "
                        "(muon_param_groups)."
                    )

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            lr, mu = group["lr"], group["momentum"]
            by_shape: dict[tuple, list] = {}
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if "momentum_buffer" not in state:
                    state["momentum_buffer"] = torch.zeros_like(p.grad)
                buf = state["momentum_buffer"]
                buf.mul_(mu).add_(p.grad)
                u = p.grad.add(buf, alpha=mu) if group["nesterov"] else buf
                by_shape.setdefault(tuple(p.shape), []).append((p, u))
            # matrices of one shape are orthogonalised together: one batched product per
            # Newton-Schulz step instead of one per matrix (small matrices: fewer calls)
            for shape, items in by_shape.items():
                stack = torch.stack([u for _, u in items])  # (n_matrices, rows, cols)
                ortho = newton_schulz(stack, group["ns_steps"], dtype=self.ns_dtype)
                scale = math.sqrt(max(1.0, shape[0] / shape[1]))
                for (p, _), o in zip(items, ortho):
                    p.mul_(1 - lr * group["weight_decay"])
                    p.add_(o.to(p.dtype), alpha=-lr * scale)
        return loss


def muon_param_groups(model: nn.Module) -> tuple[list, list]:
    """Split a model's trainable parameters into (Muon's, AdamW's): the matrices of the
    blocks (attention and feed-forward projections, routers) go to Muon; embeddings, the
    output head and every vector (norm gains, biases) to AdamW."""
    muon, adamw = [], []
    seen = set()
    for name, p in model.named_parameters():
        if not p.requires_grad or id(p) in seen:
            continue
        seen.add(id(p))
        in_block = name.startswith("blocks.")
        (muon if in_block and p.dim() == 2 else adamw).append(p)
    return muon, adamw
