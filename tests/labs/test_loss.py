"""course_lib.labs.loss against F.cross_entropy, autograd and finite differences."""

import math

import pytest
import torch
import torch.nn.functional as F

from course_lib.labs.loss import cross_entropy, cross_entropy_grad, log_softmax, perplexity


@pytest.fixture
def gen():
    return torch.Generator().manual_seed(7)


def test_log_softmax_matches_torch(gen):
    z = torch.randn(6, 11, generator=gen, dtype=torch.float64) * 5
    torch.testing.assert_close(log_softmax(z), F.log_softmax(z, dim=-1))


@pytest.mark.parametrize("shape", [(8, 5), (2, 7, 13)])
def test_cross_entropy_matches_torch(gen, shape):
    logits = torch.randn(*shape, generator=gen, dtype=torch.float64)
    targets = torch.randint(0, shape[-1], shape[:-1], generator=gen)
    expected = F.cross_entropy(logits.reshape(-1, shape[-1]), targets.reshape(-1))
    torch.testing.assert_close(cross_entropy(logits, targets), expected)


def test_cross_entropy_ignore_index_matches_torch(gen):
    logits = torch.randn(10, 6, generator=gen, dtype=torch.float64)
    targets = torch.randint(0, 6, (10,), generator=gen)
    targets[[1, 4, 5]] = -100
    torch.testing.assert_close(cross_entropy(logits, targets), F.cross_entropy(logits, targets))
    # a different ignore_index, as used for padding ids
    padded = targets.clone()
    padded[[1, 4, 5]] = -1
    torch.testing.assert_close(
        cross_entropy(logits, padded, ignore_index=-1),
        F.cross_entropy(logits, padded, ignore_index=-1),
    )
    # ignoring positions changes the loss exactly to the mean over the kept ones
    kept = [i for i in range(10) if i not in (1, 4, 5)]
    torch.testing.assert_close(
        cross_entropy(logits, targets), cross_entropy(logits[kept], targets[kept])
    )


def test_cross_entropy_is_stable_for_extreme_logits():
    logits = torch.tensor([[1000.0, -1000.0, 0.0], [-1000.0, 1000.0, 999.0]])
    targets = torch.tensor([1, 2])
    loss = cross_entropy(logits, targets)
    assert torch.isfinite(loss)
    torch.testing.assert_close(loss, F.cross_entropy(logits, targets))
    naive = -torch.log(torch.softmax(logits, -1))[torch.arange(2), targets].mean()
    assert not torch.isfinite(naive), (
        "the naive form should overflow here (else this test proves nothing)"
    )


def test_cross_entropy_errors():
    logits = torch.zeros(3, 4)
    with pytest.raises(ValueError, match="ignore_index"):
        cross_entropy(logits, torch.full((3,), -100))
    with pytest.raises(ValueError, match=r"\[0, 4\)"):
        cross_entropy(logits, torch.tensor([0, 4, 1]))
    with pytest.raises(ValueError, match="shape"):
        cross_entropy(logits, torch.tensor([0, 1]))
    with pytest.raises(ValueError, match="integer"):
        cross_entropy(logits, torch.tensor([0.0, 1.0, 2.0]))


def test_perplexity_of_uniform_model_is_vocab_size():
    for V in (2, 10, 65):
        loss = cross_entropy(torch.zeros(4, V), torch.arange(4) % V)
        assert math.isclose(perplexity(loss), V, rel_tol=1e-6)


def test_cross_entropy_grad_matches_autograd(gen):
    logits = torch.randn(3, 4, 7, generator=gen, dtype=torch.float64, requires_grad=True)
    targets = torch.randint(0, 7, (3, 4), generator=gen)
    targets[0, 1] = -100
    F.cross_entropy(logits.reshape(-1, 7), targets.reshape(-1)).backward()
    grad = cross_entropy_grad(logits.detach(), targets)
    assert grad.shape == logits.shape
    torch.testing.assert_close(grad, logits.grad)
    assert torch.all(grad[0, 1] == 0)


def test_cross_entropy_grad_matches_finite_differences(gen):
    z = torch.randn(2, 5, generator=gen, dtype=torch.float64)
    y = torch.tensor([3, 0])
    g = cross_entropy_grad(z, y)
    eps = 1e-6
    for i in range(2):
        for j in range(5):
            dz = torch.zeros_like(z)
            dz[i, j] = eps
            fd = (cross_entropy(z + dz, y) - cross_entropy(z - dz, y)) / (2 * eps)
            assert math.isclose(fd.item(), g[i, j].item(), abs_tol=1e-8)
    # rows of softmax - onehot sum to zero: probability moves, it is not created
    torch.testing.assert_close(g.sum(-1), torch.zeros(2, dtype=torch.float64))
