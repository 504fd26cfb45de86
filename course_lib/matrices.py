"""The matrix operations a transformer is made of, written out so each number can be checked.

Chapter 2 uses these to show, on 2x2 examples, what ``A @ B``, ``Q @ K.T`` and the two
backpropagation rules of a matrix product compute. Everything here is deliberately slow
(Python loops) where the point is to see each multiply-add; the tests compare every function
with PyTorch's own operators and with autograd.
"""

from __future__ import annotations

import math

import torch

__all__ = [
    "matmul_by_hand",
    "matmul_entry_terms",
    "pairwise_scores_loop",
    "rotation_matrix",
    "cosine_similarity",
    "matmul_backward",
]


def _as_matrix(name: str, x) -> torch.Tensor:
    x = torch.as_tensor(x)
    if x.dim() != 2:
        raise ValueError(
            f"{name} must be a matrix (2 dimensions, rows x columns); got shape {tuple(x.shape)}. "
            "Reshape vectors to (1, n) or (n, 1) first."
        )
    return x


def _check_inner(fn: str, A: torch.Tensor, B: torch.Tensor) -> None:
    if A.shape[1] != B.shape[0]:
        raise ValueError(
            f"{fn}: A is {tuple(A.shape)} and B is {tuple(B.shape)}; A @ B needs the columns of "
            f"A ({A.shape[1]}) to equal the rows of B ({B.shape[0]}). Transpose one of them "
            "if you meant to pair them the other way."
        )


def matmul_by_hand(A, B) -> torch.Tensor:
    """C = A B computed one entry at a time: C[i, j] = sum_k A[i, k] * B[k, j].

    Shapes: A (n, m), B (m, p) -> C (n, p). Three nested loops, exactly the definition,
    so it is slow; use ``A @ B`` for real work.
    """
    A, B = _as_matrix("matmul_by_hand: A", A), _as_matrix("matmul_by_hand: B", B)
    _check_inner("matmul_by_hand", A, B)
    n, m = A.shape
    p = B.shape[1]
    C = torch.zeros(n, p, dtype=torch.promote_types(A.dtype, B.dtype))  # (n, p)
    for i in range(n):
        for j in range(p):
            total = 0.0
            for k in range(m):
                total += A[i, k].item() * B[k, j].item()  # row i of A meets column j of B
            C[i, j] = total
    return C


def matmul_entry_terms(A, B, i: int, j: int) -> list[tuple[float, float]]:
    """The pairs (A[i, k], B[k, j]) whose products add up to (A @ B)[i, j].

    Shapes: A (n, m), B (m, p); returns m pairs of Python floats. Chapter 2 uses it to
    write one entry of a product out in full.
    """
    A, B = _as_matrix("matmul_entry_terms: A", A), _as_matrix("matmul_entry_terms: B", B)
    _check_inner("matmul_entry_terms", A, B)
    if not (0 <= i < A.shape[0] and 0 <= j < B.shape[1]):
        raise ValueError(
            f"matmul_entry_terms: entry ({i}, {j}) is outside the {A.shape[0]} x {B.shape[1]} "
            "product; indices start at 0."
        )
    return [(A[i, k].item(), B[k, j].item()) for k in range(A.shape[1])]


def pairwise_scores_loop(Q, K) -> torch.Tensor:
    """Every query against every key, one dot product at a time.

    Shapes: Q (T_q, d), K (T_k, d) -> S (T_q, T_k) with S[i, j] = Q[i] . K[j].
    This is what ``Q @ K.T`` computes in one call.
    """
    Q, K = _as_matrix("pairwise_scores_loop: Q", Q), _as_matrix("pairwise_scores_loop: K", K)
    if Q.shape[1] != K.shape[1]:
        raise ValueError(
            f"pairwise_scores_loop: queries have {Q.shape[1]} dimensions and keys {K.shape[1]}; "
            "a dot product needs vectors of the same length."
        )
    # (T_q, T_k)
    S = torch.zeros(Q.shape[0], K.shape[0], dtype=torch.promote_types(Q.dtype, K.dtype))
    for i in range(Q.shape[0]):
        for j in range(K.shape[0]):
            S[i, j] = torch.dot(Q[i], K[j])  # one query, one key
    return S


def rotation_matrix(theta: float, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """The 2x2 matrix that turns vectors counter-clockwise by ``theta`` radians.

    R = [[cos θ, -sin θ], [sin θ, cos θ]]; R @ [1, 0] = [cos θ, sin θ]. Returns (2, 2).
    """
    theta = float(theta)
    if not math.isfinite(theta):
        raise ValueError(f"rotation_matrix: theta must be a finite angle in radians; got {theta}.")
    c, s = math.cos(theta), math.sin(theta)
    return torch.tensor([[c, -s], [s, c]], dtype=dtype)  # (2, 2)


def cosine_similarity(u, v) -> float:
    """u . v / (|u| |v|): 1 for the same direction, 0 for perpendicular, -1 for opposite.

    Shapes: u (d,), v (d,). Returns a Python float. Zero vectors have no direction and raise.
    """
    u, v = torch.as_tensor(u, dtype=torch.float64), torch.as_tensor(v, dtype=torch.float64)
    if u.dim() != 1 or u.shape != v.shape:
        raise ValueError(
            f"cosine_similarity: pass two vectors of the same length; got {tuple(u.shape)} and "
            f"{tuple(v.shape)}."
        )
    nu, nv = u.norm(), v.norm()
    if nu == 0 or nv == 0:
        raise ValueError(
            "cosine_similarity: a zero vector has no direction; its cosine is undefined."
        )
    return float(u @ v / (nu * nv))


def matmul_backward(A, B, grad_C) -> tuple[torch.Tensor, torch.Tensor]:
    """The two matrix-calculus rules of backpropagation through C = A B.

    Given dL/dC, returns (dL/dA, dL/dB) = (dL/dC @ Bᵀ, Aᵀ @ dL/dC).
    Shapes: A (n, m), B (m, p), grad_C (n, p) -> grad_A (n, m), grad_B (m, p): each
    gradient has the shape of the matrix it belongs to, which is how to remember the rules.
    """
    A, B = _as_matrix("matmul_backward: A", A), _as_matrix("matmul_backward: B", B)
    grad_C = _as_matrix("matmul_backward: grad_C", grad_C)
    _check_inner("matmul_backward", A, B)
    if grad_C.shape != (A.shape[0], B.shape[1]):
        raise ValueError(
            "matmul_backward: grad_C must have the shape of C = A @ B, "
            f"{(A.shape[0], B.shape[1])}; "
            f"got {tuple(grad_C.shape)}."
        )
    grad_A = grad_C @ B.T  # (n, p) @ (p, m) -> (n, m)
    grad_B = A.T @ grad_C  # (m, n) @ (n, p) -> (m, p)
    return grad_A, grad_B
