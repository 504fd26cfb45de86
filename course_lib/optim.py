"""Optimisers written from scratch: SGD, SGD with momentum, Adam and AdamW, plus gradient
clipping and the small 2-d loss surfaces of Chapter 7.

Each optimiser follows the update rules in the PyTorch documentation of ``torch.optim`` line
by line, so on the same parameters and gradients it produces the same numbers step for step
(``tests/core/test_optim.py`` checks this). The update itself is a pure function on tensors
(``sgd_update``, ``adam_update``) so it can be read, and tested, on its own.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable

import numpy as np
import torch

__all__ = [
    "sgd_update",
    "adam_update",
    "Optimizer",
    "SGD",
    "Adam",
    "AdamW",
    "clip_grad_norm",
    "SURFACES",
    "optimise_2d",
    "sgd_stability_limit",
]


# ------------------------------------------------------------------ the update rules
@torch.no_grad()
def sgd_update(
    p: torch.Tensor,
    grad: torch.Tensor,
    buf: torch.Tensor | None,
    lr: float,
    momentum: float = 0.0,
    weight_decay: float = 0.0,
) -> torch.Tensor | None:
    """One SGD step on ``p`` in place; returns the new momentum buffer (None without momentum).

        g ← grad + λ p                     (L2 weight decay, added to the gradient)
        b ← g on the first step, else μ b + g
        p ← p - η b                        (η the learning rate, μ the momentum)
    Shapes: p, grad and buf all have the parameter's shape.
    """
    g = grad + weight_decay * p if weight_decay else grad
    if momentum:
        buf = g.clone() if buf is None else momentum * buf + g
        g = buf
    p -= lr * g
    return buf


@torch.no_grad()
def adam_update(
    p: torch.Tensor,
    grad: torch.Tensor,
    m: torch.Tensor,
    v: torch.Tensor,
    t: int,
    lr: float,
    betas: tuple[float, float] = (0.9, 0.999),
    eps: float = 1e-8,
    weight_decay: float = 0.0,
    decoupled: bool = False,
) -> None:
    """One Adam (``decoupled=False``) or AdamW (``decoupled=True``) step, in place on p, m, v.

        Adam:  g ← grad + λ p          (weight decay goes through the adaptive scaling)
        AdamW: p ← p - η λ p           (weight decay applied to p directly, "decoupled")
        m ← β₁ m + (1 - β₁) g          first moment: a running mean of gradients
        v ← β₂ v + (1 - β₂) g²         second moment: a running mean of squared gradients
        m̂ = m / (1 - β₁ᵗ),  v̂ = v / (1 - β₂ᵗ)   bias correction (m, v start at 0)
        p ← p - η m̂ / (√v̂ + ε)
    ``t`` is the 1-based step number. Shapes: p, grad, m and v all have the parameter's shape.
    """
    beta1, beta2 = betas
    if decoupled:
        p.mul_(1 - lr * weight_decay)
        g = grad
    else:
        g = grad + weight_decay * p if weight_decay else grad
    m.mul_(beta1).add_(g, alpha=1 - beta1)
    v.mul_(beta2).addcmul_(g, g, value=1 - beta2)
    m_hat = m / (1 - beta1**t)
    v_hat = v / (1 - beta2**t)
    p -= lr * m_hat / (v_hat.sqrt() + eps)


# ------------------------------------------------------------------ optimiser classes
class Optimizer:
    """The shared part: a list of parameters, ``zero_grad()`` and ``step()``.

    ``lr`` is a plain attribute, so a schedule can set ``opt.lr = warmup_cosine(...)`` before
    each step. Parameters without a gradient are skipped, as in ``torch.optim``.
    """

    def __init__(self, params: Iterable[torch.Tensor], lr: float):
        self.params = list(params)
        if not self.params:
            raise ValueError(
                f"{type(self).__name__}: got an empty parameter list; pass model.parameters()."
            )
        if not all(isinstance(p, torch.Tensor) and p.requires_grad for p in self.params):
            raise ValueError(
                f"{type(self).__name__}: every parameter must be a tensor with requires_grad=True."
            )
        if not (isinstance(lr, (int, float)) and lr >= 0 and math.isfinite(lr)):
            raise ValueError(f"{type(self).__name__}: lr must be a finite number >= 0; got {lr!r}.")
        self.lr = float(lr)
        self.state: list[dict] = [{} for _ in self.params]

    def zero_grad(self) -> None:
        """Forget the gradients (set them to None, like ``torch.optim``'s default)."""
        for p in self.params:
            p.grad = None

    def step(self) -> None:  # pragma: no cover - abstract
        raise NotImplementedError


class SGD(Optimizer):
    """Stochastic gradient descent, optionally with momentum μ and L2 weight decay λ
    (matches ``torch.optim.SGD`` with dampening 0 and nesterov False)."""

    def __init__(self, params, lr: float, momentum: float = 0.0, weight_decay: float = 0.0):
        super().__init__(params, lr)
        if not 0.0 <= momentum < 1.0:
            raise ValueError(f"SGD: momentum must be in [0, 1); got {momentum}.")
        if weight_decay < 0:
            raise ValueError(f"SGD: weight_decay must be >= 0; got {weight_decay}.")
        self.momentum, self.weight_decay = momentum, weight_decay

    def step(self) -> None:
        for p, st in zip(self.params, self.state):
            if p.grad is None:
                continue
            st["buf"] = sgd_update(
                p, p.grad, st.get("buf"), self.lr, self.momentum, self.weight_decay
            )


class Adam(Optimizer):
    """Adam (Kingma & Ba, 2015) with L2 weight decay added to the gradient
    (matches ``torch.optim.Adam``)."""

    decoupled = False

    def __init__(
        self,
        params,
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0.0,
    ):
        super().__init__(params, lr)
        if not all(0.0 <= b < 1.0 for b in betas) or len(betas) != 2:
            raise ValueError(
                f"{type(self).__name__}: betas must be two numbers in [0, 1); got {betas}."
            )
        if eps <= 0 or weight_decay < 0:
            raise ValueError(
                f"{type(self).__name__}: need eps > 0 and weight_decay >= 0; got eps={eps}, "
                f"weight_decay={weight_decay}."
            )
        self.betas, self.eps, self.weight_decay = tuple(betas), eps, weight_decay

    def step(self) -> None:
        for p, st in zip(self.params, self.state):
            if p.grad is None:
                continue
            if not st:
                st.update(t=0, m=torch.zeros_like(p), v=torch.zeros_like(p))
            st["t"] += 1
            adam_update(
                p,
                p.grad,
                st["m"],
                st["v"],
                st["t"],
                self.lr,
                self.betas,
                self.eps,
                self.weight_decay,
                decoupled=self.decoupled,
            )


class AdamW(Adam):
    """AdamW (Loshchilov & Hutter, 2019): Adam with decoupled weight decay, default 0.01
    (matches ``torch.optim.AdamW``)."""

    decoupled = True

    def __init__(
        self,
        params,
        lr: float = 1e-3,
        betas=(0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 1e-2,
    ):
        super().__init__(params, lr, betas, eps, weight_decay)


# ------------------------------------------------------------------ gradient clipping
@torch.no_grad()
def clip_grad_norm(params: Iterable[torch.Tensor], max_norm: float) -> float:
    """Scale all gradients together so their global L2 norm is at most ``max_norm``.

    The global norm is √(Σ ‖g‖²) over every parameter; if it exceeds max_norm every gradient
    is multiplied by max_norm / (norm + 1e-6), so the step keeps its direction and only its
    length shrinks (as ``torch.nn.utils.clip_grad_norm_``). Returns the norm before clipping.
    """
    if not max_norm > 0:
        raise ValueError(f"clip_grad_norm: max_norm must be > 0; got {max_norm}.")
    grads = [p.grad for p in params if p.grad is not None]
    if not grads:
        return 0.0
    total = torch.sqrt(sum((g.double() ** 2).sum() for g in grads))
    coef = min(1.0, max_norm / (float(total) + 1e-6))
    for g in grads:
        g.mul_(coef)
    return float(total)


# ------------------------------------------------------------------ 2-d loss surfaces
def _ravine(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """An ill-conditioned quadratic bowl: gentle along x, steep along y (curvatures 0.2, 4)."""
    return 0.1 * x**2 + 2.0 * y**2


def _rosenbrock(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Rosenbrock's curved valley, scaled down 10×; minimum 0 at (1, 1)."""
    return 0.1 * ((1 - x) ** 2 + 10.0 * (y - x**2) ** 2)


#: name -> (function of x and y, minimum point, plot range (xmin, xmax, ymin, ymax))
SURFACES: dict[str, tuple[Callable, tuple[float, float], tuple[float, float, float, float]]] = {
    "ravine": (_ravine, (0.0, 0.0), (-5.0, 5.0, -2.0, 2.0)),
    "rosenbrock": (_rosenbrock, (1.0, 1.0), (-2.0, 2.0, -1.0, 3.0)),
}

_OPTIMISERS = {
    "SGD": lambda ps, lr, kw: SGD(ps, lr, **kw),
    "momentum": lambda ps, lr, kw: SGD(ps, lr, momentum=kw.pop("momentum", 0.9), **kw),
    "Adam": lambda ps, lr, kw: Adam(ps, lr, **kw),
    "AdamW": lambda ps, lr, kw: AdamW(ps, lr, **kw),
}


def sgd_stability_limit(surface: str = "ravine") -> float:
    """Largest stable plain-SGD learning rate on a quadratic surface: 2 / (largest curvature)."""
    if surface != "ravine":
        raise ValueError(
            "sgd_stability_limit: only the quadratic 'ravine' has a constant curvature."
        )
    return 2.0 / 4.0  # the Hessian of 0.1 x² + 2 y² is diag(0.2, 4)


def optimise_2d(
    optimiser: str,
    lr: float,
    steps: int = 60,
    start: tuple[float, float] = (-4.5, 1.5),
    surface: str = "ravine",
    **kwargs,
) -> tuple[np.ndarray, np.ndarray]:
    """Run ``optimiser`` ("SGD", "momentum", "Adam", "AdamW") on a 2-d ``surface`` from SURFACES.

    Returns (path, losses): path (steps + 1, 2) of (x, y) points and losses (steps + 1,).
    A run that diverges stops once the loss passes 1e6 (the path ends there). float64.
    """
    if optimiser not in _OPTIMISERS:
        raise ValueError(
            f"optimise_2d: optimiser must be one of {sorted(_OPTIMISERS)}; got {optimiser!r}."
        )
    if surface not in SURFACES:
        raise ValueError(
            f"optimise_2d: surface must be one of {sorted(SURFACES)}; got {surface!r}."
        )
    f = SURFACES[surface][0]
    p = torch.tensor(start, dtype=torch.float64, requires_grad=True)  # (2,)
    opt = _OPTIMISERS[optimiser]([p], lr, dict(kwargs))
    path, losses = [p.detach().clone().numpy()], []
    for _ in range(steps):
        opt.zero_grad()
        loss = f(p[0], p[1])
        losses.append(float(loss.detach()))
        if not losses[-1] < 1e6:
            break
        loss.backward()
        opt.step()
        path.append(p.detach().clone().numpy())
    else:
        losses.append(float(f(p[0], p[1]).detach()))
    return np.array(path), np.array(losses[: len(path)])
