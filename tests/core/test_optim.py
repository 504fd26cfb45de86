"""course_lib.optim against torch.optim and torch.nn.utils.clip_grad_norm_, step for step."""

import math

import pytest
import torch

from course_lib.optim import (
    SGD,
    Adam,
    AdamW,
    adam_update,
    clip_grad_norm,
    optimise_2d,
    sgd_stability_limit,
)


def _params(seed=0):
    gen = torch.Generator().manual_seed(seed)
    W = torch.randn(4, 3, generator=gen, dtype=torch.float64)
    b = torch.randn(3, generator=gen, dtype=torch.float64)
    return [W.requires_grad_(), b.requires_grad_()]


def _loss(params, step):
    """A non-quadratic loss whose gradient changes from step to step (fresh data each step)."""
    W, b = params
    gen = torch.Generator().manual_seed(100 + step)
    x = torch.randn(8, 4, generator=gen, dtype=torch.float64)
    y = torch.randint(0, 3, (8,), generator=gen)
    return torch.nn.functional.cross_entropy(x @ W + b, y) + 0.1 * (W**4).sum()


CASES = [
    (SGD, torch.optim.SGD, dict(lr=0.1)),
    (SGD, torch.optim.SGD, dict(lr=0.05, momentum=0.9)),
    (SGD, torch.optim.SGD, dict(lr=0.05, momentum=0.8, weight_decay=0.1)),
    (Adam, torch.optim.Adam, dict(lr=0.01)),
    (Adam, torch.optim.Adam, dict(lr=0.02, betas=(0.8, 0.99), eps=1e-6, weight_decay=0.1)),
    (AdamW, torch.optim.AdamW, dict(lr=0.01)),
    (AdamW, torch.optim.AdamW, dict(lr=0.02, betas=(0.85, 0.95), weight_decay=0.3)),
]


@pytest.mark.parametrize("ours_cls, torch_cls, kw", CASES)
def test_matches_torch_optim_step_for_step(ours_cls, torch_cls, kw):
    ours_p, ref_p = _params(), _params()
    ours, ref = ours_cls(ours_p, **kw), torch_cls(ref_p, **kw)
    for step in range(25):
        for opt, ps in ((ours, ours_p), (ref, ref_p)):
            opt.zero_grad()
            _loss(ps, step).backward()
            opt.step()
        for a, b in zip(ours_p, ref_p):
            torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-13, msg=f"diverged at step {step}")


@pytest.mark.parametrize(
    "ours_cls, torch_cls", [(SGD, torch.optim.SGD), (AdamW, torch.optim.AdamW)]
)
def test_changing_lr_each_step_matches_torch(ours_cls, torch_cls):
    ours_p, ref_p = _params(1), _params(1)
    kw = dict(momentum=0.9) if ours_cls is SGD else {}
    ours, ref = ours_cls(ours_p, lr=0.1, **kw), torch_cls(ref_p, lr=0.1, **kw)
    for step in range(10):
        lr = 0.1 * (step + 1) / 10
        ours.lr = lr
        for g in ref.param_groups:
            g["lr"] = lr
        for opt, ps in ((ours, ours_p), (ref, ref_p)):
            opt.zero_grad()
            _loss(ps, step).backward()
            opt.step()
    for a, b in zip(ours_p, ref_p):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-13)


def test_parameters_without_gradient_are_skipped():
    W, b = _params()
    before = b.detach().clone()
    opt = AdamW([W, b], lr=0.1)
    (W**2).sum().backward()  # b gets no gradient
    opt.step()
    torch.testing.assert_close(b.detach(), before)


def test_adam_first_step_has_length_lr_whatever_the_gradient_scale():
    for scale in (1e-4, 1.0, 1e4):
        p = torch.zeros(3, dtype=torch.float64)
        m, v = torch.zeros(3, dtype=torch.float64), torch.zeros(3, dtype=torch.float64)
        adam_update(
            p, torch.tensor([1.0, -2.0, 0.5], dtype=torch.float64) * scale, m, v, t=1, lr=0.01
        )
        torch.testing.assert_close(
            p.abs(), torch.full((3,), 0.01, dtype=torch.float64), rtol=1e-3, atol=0
        )


def test_adamw_decay_is_decoupled_from_the_gradient_scale():
    # with a zero gradient AdamW still shrinks the weights by (1 - lr*wd); Adam's L2 does not
    p = torch.ones(2, dtype=torch.float64, requires_grad=True)
    opt = AdamW([p], lr=0.1, weight_decay=0.5)
    p.grad = torch.zeros(2, dtype=torch.float64)
    opt.step()
    torch.testing.assert_close(p.detach(), torch.full((2,), 0.95, dtype=torch.float64))


@pytest.mark.parametrize("max_norm", [0.5, 1e3])
def test_clip_grad_norm_matches_torch(max_norm):
    ours_p, ref_p = _params(2), _params(2)
    _loss(ours_p, 0).backward()
    _loss(ref_p, 0).backward()
    total = clip_grad_norm(ours_p, max_norm)
    ref_total = torch.nn.utils.clip_grad_norm_(ref_p, max_norm)
    assert total == pytest.approx(float(ref_total), rel=1e-12)
    for a, b in zip(ours_p, ref_p):
        torch.testing.assert_close(a.grad, b.grad)
    clipped = math.sqrt(sum(float((p.grad**2).sum()) for p in ours_p))
    assert clipped <= max_norm * (1 + 1e-9)


def test_bad_hyperparameters_raise():
    with pytest.raises(ValueError, match="lr"):
        SGD(_params(), lr=-1)
    with pytest.raises(ValueError, match="momentum"):
        SGD(_params(), lr=0.1, momentum=1.5)
    with pytest.raises(ValueError, match="betas"):
        Adam(_params(), betas=(0.9, 1.0))
    with pytest.raises(ValueError, match="empty"):
        AdamW([])
    with pytest.raises(ValueError, match="requires_grad"):
        AdamW([torch.zeros(2)])
    with pytest.raises(ValueError, match="max_norm"):
        clip_grad_norm(_params(), 0.0)
    with pytest.raises(ValueError, match="optimiser"):
        optimise_2d("Newton", 0.1)


def test_sgd_stability_limit_on_the_ravine():
    limit = sgd_stability_limit()
    _, below = optimise_2d("SGD", 0.95 * limit, steps=200)
    path, above = optimise_2d("SGD", 1.05 * limit, steps=200)
    assert below[-1] < 1e-3 * below[0]
    assert above[-1] > above[0]  # diverges
    assert len(path) == len(above)


def test_optimisers_reach_the_minimum():
    for name, lr in (("momentum", 0.05), ("Adam", 0.1), ("AdamW", 0.1)):
        path, losses = optimise_2d(name, lr, steps=300)
        assert losses[-1] < 1e-2 * losses[0], name
    path, _ = optimise_2d("Adam", 0.05, steps=2000, surface="rosenbrock", start=(-1.5, 2.0))
    assert abs(path[-1][0] - 1) < 0.1 and abs(path[-1][1] - 1) < 0.2
