"""Muon: the Newton-Schulz orthogonalisation against the SVD, and the optimiser step for
step against torch.optim.Muon (PyTorch 2.13 has it)."""

import pytest
import torch

from course_lib.labs.muon import CUBIC, Muon, muon_param_groups, newton_schulz, orthogonalize_svd


def test_svd_reference_is_orthogonal():
    G = torch.randn(6, 10, dtype=torch.float64)
    O = orthogonalize_svd(G)  # noqa: E741
    torch.testing.assert_close(O @ O.T, torch.eye(6, dtype=torch.float64))


@pytest.mark.parametrize("shape", [(8, 20), (20, 8), (12, 12)])
def test_cubic_newton_schulz_converges_to_svd(shape):
    _ = torch.manual_seed(0)
    # a well-conditioned matrix: singular values in [0.5, 2]
    U, _ = torch.linalg.qr(torch.randn(shape[0], shape[0], dtype=torch.float64))
    V, _ = torch.linalg.qr(torch.randn(shape[1], shape[1], dtype=torch.float64))
    r = min(shape)
    S = torch.linspace(0.5, 2.0, r, dtype=torch.float64)
    G = U[:, :r] @ torch.diag(S) @ V[:, :r].T
    X = newton_schulz(G, steps=40, coefficients=CUBIC, dtype=torch.float64)
    torch.testing.assert_close(X, orthogonalize_svd(G), rtol=1e-7, atol=1e-7)


def test_quintic_keeps_directions_and_squeezes_singular_values():
    _ = torch.manual_seed(1)
    G = torch.randn(32, 64) @ torch.diag(torch.logspace(-2, 1, 64))  # badly conditioned
    X = newton_schulz(G, steps=5)
    s = torch.linalg.svdvals(X)
    assert s.min() > 0.5 and s.max() < 1.3  # all near 1: every direction the same size
    # the singular vectors are the SVD's: X is close to U V^T in angle
    O = orthogonalize_svd(G)  # noqa: E741
    cos = (X * O).sum() / (X.norm() * O.norm())
    assert cos > 0.95


def test_matches_torch_zeropower_in_bfloat16():
    from torch.optim._muon import _zeropower_via_newtonschulz

    _ = torch.manual_seed(2)
    for shape in [(16, 48), (48, 16)]:
        G = torch.randn(*shape)
        ref = _zeropower_via_newtonschulz(G, (3.4445, -4.7750, 2.0315), 5, 1e-7)
        ours = newton_schulz(G, 5, dtype=torch.bfloat16)
        # the same products in bfloat16, rounded in another order (torch fuses them with
        # addmm); the quintic amplifies round-off, so compare directions, not digits
        a, b = ours.float().flatten(), ref.float().flatten()
        assert torch.dot(a, b) / (a.norm() * b.norm()) > 0.995
        assert (a.norm() / b.norm() - 1).abs() < 0.02


@pytest.mark.skipif(not hasattr(torch.optim, "Muon"), reason="torch.optim.Muon needs torch >= 2.9")
def test_muon_steps_like_torch_optim_muon(monkeypatch):
    import torch.optim._muon as torch_muon

    # the same orthogonalisation on both sides (compared above), so the optimiser's own
    # bookkeeping (momentum, Nesterov, weight decay, the shape factor) must agree exactly
    monkeypatch.setattr(
        torch_muon,
        "_zeropower_via_newtonschulz",
        lambda g, coef, steps, eps: newton_schulz(g, steps),
    )
    _ = torch.manual_seed(3)
    W0 = [torch.randn(24, 8), torch.randn(8, 24)]
    ours = [w.clone().requires_grad_() for w in W0]
    ref = [w.clone().requires_grad_() for w in W0]
    opt = Muon(ours, lr=0.05, momentum=0.9, weight_decay=0.01)
    opt_ref = torch.optim.Muon(ref, lr=0.05, momentum=0.9, weight_decay=0.01)
    for _ in range(3):
        grads = [torch.randn_like(w) for w in W0]
        for ps, o in ((ours, opt), (ref, opt_ref)):
            for p, g in zip(ps, grads):
                p.grad = g.clone()
            o.step()
    for a, b in zip(ours, ref):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)


def test_muon_rejects_vectors_and_param_groups_split():
    with pytest.raises(ValueError, match="matrices"):
        Muon([torch.zeros(3, requires_grad=True)])
    from course_lib.model import GPTConfig, MiniGPT

    m = MiniGPT(GPTConfig(vocab_size=7, block_size=4, n_layer=1, n_head=1, d_model=8))
    muon, adamw = muon_param_groups(m)
    assert all(p.dim() == 2 for p in muon) and len(muon) == 4  # qkv, proj, fc, proj
    n = sum(p.numel() for p in m.parameters())
    assert sum(p.numel() for p in muon + adamw) == n


def test_bad_shapes_raise():
    with pytest.raises(ValueError, match="matrix"):
        newton_schulz(torch.zeros(3))
    with pytest.raises(ValueError, match="matrix"):
        orthogonalize_svd(torch.zeros(3))
