"""Warmup + cosine decay: shape of the curve and its boundary values."""

import math

import pytest

from course_lib.schedule import warmup_cosine


def test_warmup_then_cosine():
    lrs = [warmup_cosine(s, 1e-3, 10, 110, min_lr=1e-4) for s in range(120)]
    assert lrs[0] == pytest.approx(1e-4)  # first step already learns
    assert lrs[9] == pytest.approx(1e-3)
    assert all(a < b for a, b in zip(lrs[:10], lrs[1:10]))  # rising during warmup
    assert all(a >= b for a, b in zip(lrs[10:], lrs[11:]))  # then never rising
    assert lrs[60] == pytest.approx(1e-4 + 0.5 * (1e-3 - 1e-4))  # halfway: the mean
    assert lrs[110] == pytest.approx(1e-4) and lrs[119] == pytest.approx(1e-4)
    mid = 10 + 25
    assert lrs[mid] == pytest.approx(1e-4 + 0.5 * 9e-4 * (1 + math.cos(math.pi * 0.25)))


def test_bad_arguments():
    with pytest.raises(ValueError, match="warmup_steps"):
        warmup_cosine(0, 1e-3, 20, 10)
