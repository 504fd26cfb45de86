"""course_lib.labs.lm_loss against F.cross_entropy (with ignore_index and label_smoothing)."""

import pytest
import torch
import torch.nn.functional as F

from course_lib.labs.lm_loss import (
    label_smoothed_cross_entropy,
    lm_cross_entropy,
    next_token_targets,
)


@pytest.fixture
def gen():
    return torch.Generator().manual_seed(5)


def test_next_token_targets_shift_and_padding():
    ids = torch.tensor([[5, 6, 7, 0, 0], [1, 2, 3, 4, 9]])
    inputs, targets = next_token_targets(ids, pad_id=0)
    assert torch.equal(inputs, ids[:, :-1])
    assert torch.equal(targets, torch.tensor([[6, 7, -100, -100], [2, 3, 4, 9]]))
    assert ids[0, 3] == 0  # the input ids are not modified
    with pytest.raises(ValueError, match="T >= 2"):
        next_token_targets(torch.tensor([[1]]))


def test_lm_cross_entropy_matches_torch(gen):
    logits = torch.randn(3, 6, 11, generator=gen, dtype=torch.float64)
    targets = torch.randint(0, 11, (3, 6), generator=gen)
    targets[0, 4:] = -100
    expected = F.cross_entropy(logits.transpose(1, 2), targets)  # torch's (B, V, T) layout
    torch.testing.assert_close(lm_cross_entropy(logits, targets), expected)
    with pytest.raises(ValueError, match=r"\(B, T, V\)"):
        lm_cross_entropy(logits[0], targets[0])


@pytest.mark.parametrize("eps", [0.0, 0.1, 0.5, 1.0])
def test_label_smoothing_matches_torch(gen, eps):
    logits = torch.randn(9, 7, generator=gen, dtype=torch.float64) * 3
    targets = torch.randint(0, 7, (9,), generator=gen)
    targets[2] = -100
    torch.testing.assert_close(
        label_smoothed_cross_entropy(logits, targets, eps),
        F.cross_entropy(logits, targets, label_smoothing=eps),
    )
    with pytest.raises(ValueError, match="smoothing"):
        label_smoothed_cross_entropy(logits, targets, 1.5)
