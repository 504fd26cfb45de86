"""Cross-entropy, perplexity and the gradient that makes them learnable.

``cross_entropy`` is built from a log-softmax computed by log-sum-exp, so logits of ±1000 give
finite losses (a naive ``log(softmax(z))`` gives ``-inf`` there). Tests compare everything with
``torch.nn.functional.cross_entropy`` and autograd.
"""

from __future__ import annotations

import math

import torch

__all__ = ["log_softmax", "cross_entropy", "perplexity", "cross_entropy_grad"]


def log_softmax(z: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """log softmax(z) = z - logsumexp(z), computed stably.

    Shapes: ``z`` any shape; the result has the same shape.
    """
    z_max = z.amax(dim=dim, keepdim=True).detach()  # a constant shift: no gradient needed
    lse = z_max + torch.log(torch.exp(z - z_max).sum(dim=dim, keepdim=True))
    return z - lse


def _flatten(logits: torch.Tensor, targets: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(..., V) logits and (...) targets -> (N, V) and (N,)."""
    if logits.dim() < 1 or logits.shape[:-1] != targets.shape:
        raise ValueError(
            "cross_entropy: logits must have shape (..., V) and targets the same leading "
            f"shape (...); got logits {tuple(logits.shape)} and targets {tuple(targets.shape)}. "
            "For a language model, flatten with logits.view(-1, V) and targets.view(-1)."
        )
    if targets.dtype in (torch.float16, torch.float32, torch.float64, torch.bfloat16):
        raise ValueError(
            f"cross_entropy: targets must be integer class indices; got dtype {targets.dtype}."
        )
    return logits.reshape(-1, logits.shape[-1]), targets.reshape(-1)


def cross_entropy(
    logits: torch.Tensor,
    targets: torch.Tensor,
    ignore_index: int = -100,
) -> torch.Tensor:
    """Mean negative log-likelihood of the targets: mean over t of -log softmax(z_t)[y_t].

    Shapes: logits (..., V), targets (...) integer class ids. Positions whose target equals
    ``ignore_index`` (padding) are left out of both the sum and the count, as in
    ``F.cross_entropy``. Returns a scalar tensor. Raises ``ValueError`` if every target is
    ignored (the mean of nothing is undefined) or a target is outside [0, V).
    """
    z, y = _flatten(logits, targets)  # (N, V), (N,)
    keep = y != ignore_index  # (N,)
    if not keep.any():
        raise ValueError(
            "cross_entropy: every target equals ignore_index, so there is nothing to average."
        )
    V = z.shape[-1]
    y_kept = y[keep]
    if (y_kept < 0).any() or (y_kept >= V).any():
        raise ValueError(
            f"cross_entropy: targets must be class ids in [0, {V}) or ignore_index={ignore_index}; "
            f"got values from {int(y_kept.min())} to {int(y_kept.max())}."
        )
    logp = log_softmax(z[keep], dim=-1)  # (N_kept, V)
    nll = -logp.gather(1, y_kept[:, None]).squeeze(1)  # (N_kept,)
    return nll.mean()


def perplexity(loss: float | torch.Tensor) -> float:
    """exp(mean NLL in nats): the effective number of equally likely choices per token."""
    return math.exp(float(loss))


def cross_entropy_grad(
    logits: torch.Tensor,
    targets: torch.Tensor,
    ignore_index: int = -100,
) -> torch.Tensor:
    """Closed-form gradient of ``cross_entropy`` (mean reduction) with respect to the logits.

    For one position, d(-log softmax(z)[y]) / dz = softmax(z) - onehot(y). The mean divides
    by the number of kept positions; ignored positions get a zero gradient.

    Shapes: logits (..., V), targets (...); returns (..., V) like the logits.
    """
    z, y = _flatten(logits, targets)  # (N, V), (N,)
    keep = y != ignore_index  # (N,)
    n_kept = int(keep.sum())
    if n_kept == 0:
        raise ValueError("cross_entropy_grad: every target equals ignore_index.")
    p = torch.exp(log_softmax(z, dim=-1))  # (N, V)
    onehot = torch.zeros_like(p)
    onehot[keep, y[keep]] = 1.0
    grad = (p - onehot) * keep[:, None] / n_kept  # (N, V)
    return grad.reshape(logits.shape)
