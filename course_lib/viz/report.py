"""One-word verdicts for the chapters' "does ours agree with PyTorch?" lines.

Raw differences such as ``3.5e-17`` change with the thread count and the machine; a word
("yes" / "NO") within a stated tolerance does not, so the printed output of a chapter is
identical on every run.
"""

from __future__ import annotations

import math

import torch

__all__ = ["verdict", "agrees", "ROUND_OFF"]

#: (rtol, atol) for "equal up to round-off" by dtype: float64 agreements are held to ~1e-10;
#: float32 ones use ``torch.allclose``'s defaults.
ROUND_OFF = {torch.float64: (1e-10, 1e-12), torch.float32: (1e-5, 1e-8)}


def verdict(ok: bool) -> str:
    """ "yes" or "NO" (capitals, so a failure stands out in printed output)."""
    return "yes" if bool(ok) else "NO"


def agrees(ours, reference, *, rtol: float | None = None, atol: float | None = None) -> str:
    """ "yes" when ``ours`` equals ``reference`` within tolerance, else "NO".

    ours, reference: tensors of the same shape (or Python numbers). By default the tolerance
    is the round-off of the dtype (``ROUND_OFF``: rtol 1e-10, atol 1e-12 for float64; torch's
    allclose defaults for float32 and for numbers); pass rtol/atol to state another.
    """
    if not torch.is_tensor(ours) and not torch.is_tensor(reference):
        r, a = ROUND_OFF[torch.float32]
        return verdict(
            math.isclose(
                ours,
                reference,
                rel_tol=rtol if rtol is not None else r,
                abs_tol=atol if atol is not None else a,
            )
        )
    ours, reference = torch.as_tensor(ours), torch.as_tensor(reference)
    if ours.shape != reference.shape:
        raise ValueError(
            f"agrees: shapes {tuple(ours.shape)} and {tuple(reference.shape)} differ; "
            "compare tensors of the same shape."
        )
    dtype = torch.promote_types(ours.dtype, reference.dtype)
    r, a = ROUND_OFF.get(dtype, ROUND_OFF[torch.float32])
    return verdict(
        torch.allclose(
            ours.to(dtype),
            reference.to(dtype),
            rtol=r if rtol is None else rtol,
            atol=a if atol is None else atol,
        )
    )
