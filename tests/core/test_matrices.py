"""course_lib.matrices against PyTorch's operators, autograd and finite differences."""

import math

import pytest
import torch

from course_lib.matrices import (
    cosine_similarity,
    matmul_backward,
    matmul_by_hand,
    matmul_entry_terms,
    pairwise_scores_loop,
    rotation_matrix,
)


@pytest.mark.parametrize("n,m,p", [(1, 1, 1), (2, 2, 2), (3, 4, 2), (5, 1, 3)])
def test_matmul_by_hand_matches_torch(n, m, p):
    g = torch.Generator().manual_seed(n * 100 + m * 10 + p)
    A = torch.randn(n, m, generator=g, dtype=torch.float64)
    B = torch.randn(m, p, generator=g, dtype=torch.float64)
    torch.testing.assert_close(matmul_by_hand(A, B), A @ B)


def test_entry_terms_sum_to_the_entry():
    g = torch.Generator().manual_seed(1)
    A, B = torch.randn(3, 4, generator=g), torch.randn(4, 2, generator=g)
    for i in range(3):
        for j in range(2):
            total = sum(a * b for a, b in matmul_entry_terms(A, B, i, j))
            assert total == pytest.approx((A @ B)[i, j].item(), abs=1e-5)


def test_shape_mismatch_is_a_clear_error():
    with pytest.raises(ValueError, match="columns of A"):
        matmul_by_hand(torch.ones(2, 3), torch.ones(2, 3))
    with pytest.raises(ValueError, match="matrix"):
        matmul_by_hand(torch.ones(3), torch.ones(3, 1))
    with pytest.raises(ValueError, match="outside"):
        matmul_entry_terms(torch.ones(2, 2), torch.ones(2, 2), 2, 0)
    with pytest.raises(ValueError, match="same length"):
        pairwise_scores_loop(torch.ones(2, 3), torch.ones(2, 4))


def test_pairwise_loop_equals_q_kt():
    g = torch.Generator().manual_seed(2)
    Q, K = torch.randn(4, 3, generator=g), torch.randn(6, 3, generator=g)
    torch.testing.assert_close(pairwise_scores_loop(Q, K), Q @ K.T)


def test_rotation_matrix_is_a_rotation():
    R = rotation_matrix(math.pi / 2)
    torch.testing.assert_close(
        R @ torch.tensor([1.0, 0.0], dtype=torch.float64),
        torch.tensor([0.0, 1.0], dtype=torch.float64),
    )
    for a, b in [(0.3, 1.1), (-2.0, 0.7)]:
        Ra, Rb = rotation_matrix(a), rotation_matrix(b)
        torch.testing.assert_close(Ra @ Rb, rotation_matrix(a + b))  # angles add
        torch.testing.assert_close(Ra.T @ Ra, torch.eye(2, dtype=torch.float64))  # lengths kept
        assert torch.linalg.det(Ra).item() == pytest.approx(1.0)
    with pytest.raises(ValueError):
        rotation_matrix(float("nan"))


def test_cosine_similarity_matches_torch():
    g = torch.Generator().manual_seed(3)
    u, v = torch.randn(5, generator=g), torch.randn(5, generator=g)
    expected = torch.nn.functional.cosine_similarity(u, v, dim=0).item()
    assert cosine_similarity(u, v) == pytest.approx(expected, abs=1e-6)
    assert cosine_similarity([1, 0], [2, 0]) == pytest.approx(1.0)
    assert cosine_similarity([1, 0], [0, 3]) == pytest.approx(0.0)
    assert cosine_similarity([1, 1], [-1, -1]) == pytest.approx(-1.0)
    with pytest.raises(ValueError, match="zero vector"):
        cosine_similarity([0, 0], [1, 0])


@pytest.mark.parametrize("n,m,p", [(2, 2, 2), (3, 5, 4)])
def test_matmul_backward_matches_autograd(n, m, p):
    g = torch.Generator().manual_seed(4)
    A = torch.randn(n, m, generator=g, dtype=torch.float64, requires_grad=True)
    B = torch.randn(m, p, generator=g, dtype=torch.float64, requires_grad=True)
    W = torch.randn(n, p, generator=g, dtype=torch.float64)
    loss = ((A @ B) * W).sum() + ((A @ B) ** 2).sum()  # a loss with a non-trivial dL/dC
    loss.backward()
    grad_C = W + 2 * (A @ B).detach()
    gA, gB = matmul_backward(A.detach(), B.detach(), grad_C)
    torch.testing.assert_close(gA, A.grad)
    torch.testing.assert_close(gB, B.grad)


def test_matmul_backward_matches_finite_differences():
    g = torch.Generator().manual_seed(5)
    A = torch.randn(2, 3, generator=g, dtype=torch.float64)
    B = torch.randn(3, 2, generator=g, dtype=torch.float64)
    W = torch.randn(2, 2, generator=g, dtype=torch.float64)

    def L(A_, B_):
        return ((A_ @ B_) * W).sum().item()  # dL/dC = W

    gA, gB = matmul_backward(A, B, W)
    eps = 1e-6
    for X, grad, which in [(A, gA, 0), (B, gB, 1)]:
        for idx in [(i, j) for i in range(X.shape[0]) for j in range(X.shape[1])]:
            Xp, Xm = X.clone(), X.clone()
            Xp[idx] += eps
            Xm[idx] -= eps
            args_p = (Xp, B) if which == 0 else (A, Xp)
            args_m = (Xm, B) if which == 0 else (A, Xm)
            fd = (L(*args_p) - L(*args_m)) / (2 * eps)
            assert fd == pytest.approx(grad[idx].item(), abs=1e-6)


def test_matmul_backward_rejects_wrong_gradient_shape():
    with pytest.raises(ValueError, match="grad_C"):
        matmul_backward(torch.ones(2, 3), torch.ones(3, 4), torch.ones(4, 2))
