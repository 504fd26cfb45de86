"""course_lib.labs.backprop against autograd, torch.autograd.functional.jacobian, F.layer_norm and
finite differences."""

import pytest
import torch
import torch.nn.functional as F

from course_lib.attention import causal_mask
from course_lib.labs.backprop import (
    BLOCK_KINDS,
    Block,
    attention_backward,
    attention_forward,
    attention_scale_gradients,
    gradient_norms_per_layer,
    layer_norm_backward,
    layer_norm_forward,
    softmax_backward,
    softmax_jacobian,
)


@pytest.fixture
def gen():
    return torch.Generator().manual_seed(11)


def _randn(gen, *shape, scale=1.0):
    return torch.randn(*shape, generator=gen, dtype=torch.float64) * scale


# ----------------------------------------------------------------------------- softmax
def test_softmax_jacobian_matches_autograd_jacobian(gen):
    z = _randn(gen, 7, scale=2.0)
    expected = torch.autograd.functional.jacobian(lambda t: F.softmax(t, dim=-1), z)  # (7, 7)
    torch.testing.assert_close(softmax_jacobian(F.softmax(z, dim=-1)), expected)


def test_softmax_jacobian_batched_is_blockwise(gen):
    z = _randn(gen, 3, 5)
    full = torch.autograd.functional.jacobian(lambda t: F.softmax(t, dim=-1), z)  # (3, 5, 3, 5)
    J = softmax_jacobian(F.softmax(z, dim=-1))  # (3, 5, 5)
    for b in range(3):
        torch.testing.assert_close(J[b], full[b, :, b, :])


def test_softmax_jacobian_properties(gen):
    s = F.softmax(_randn(gen, 6), dim=-1)
    J = softmax_jacobian(s)
    torch.testing.assert_close(J, J.T)  # symmetric
    # shift-invariance
    torch.testing.assert_close(J.sum(dim=0), torch.zeros(6, dtype=torch.float64))


def test_softmax_backward_matches_autograd(gen):
    z = _randn(gen, 4, 9, scale=3.0).requires_grad_()
    ds = _randn(gen, 4, 9)
    s = F.softmax(z, dim=-1)
    (s * ds).sum().backward()
    torch.testing.assert_close(softmax_backward(s.detach(), ds), z.grad)


def test_softmax_backward_shape_mismatch_raises():
    with pytest.raises(ValueError, match="same shape"):
        softmax_backward(torch.ones(3) / 3, torch.ones(4))


# --------------------------------------------------------------------------- attention
@pytest.mark.parametrize("masked", [False, True])
@pytest.mark.parametrize("scaled", [True, False])
def test_attention_backward_matches_autograd(gen, masked, scaled):
    B, H, T, d_k, d_v = 2, 3, 5, 4, 6
    q = _randn(gen, B, H, T, d_k).requires_grad_()
    k = _randn(gen, B, H, T, d_k).requires_grad_()
    v = _randn(gen, B, H, T, d_v).requires_grad_()
    mask = causal_mask(T) if masked else None
    d_out = _randn(gen, B, H, T, d_v)
    # autograd reference through PyTorch's own attention
    ref = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=None if scaled else 1.0)
    (ref * d_out).sum().backward()
    out, cache = attention_forward(q.detach(), k.detach(), v.detach(), mask=mask, scaled=scaled)
    torch.testing.assert_close(out, ref.detach())
    grads = attention_backward(d_out, cache)
    torch.testing.assert_close(grads["dQ"], q.grad)
    torch.testing.assert_close(grads["dK"], k.grad)
    torch.testing.assert_close(grads["dV"], v.grad)
    if masked:  # no gradient reaches a blocked score
        assert (grads["dS"][..., ~mask] == 0).all()


def test_attention_intermediate_gradients_match_autograd(gen):
    T, d = 4, 3
    q, k, v = (_randn(gen, T, d) for _ in range(3))
    d_out = _randn(gen, T, d)
    S = (q @ k.T / d**0.5).requires_grad_()
    A = F.softmax(S, dim=-1)
    A.retain_grad()
    (A @ v * d_out).sum().backward()
    grads = attention_backward(d_out, attention_forward(q, k, v)[1])
    torch.testing.assert_close(grads["dA"], A.grad)
    torch.testing.assert_close(grads["dS"], S.grad)


def test_attention_backward_matches_finite_differences(gen):
    T, d = 3, 2
    q, k, v = (_randn(gen, T, d) for _ in range(3))
    d_out = _randn(gen, T, d)
    grads = attention_backward(d_out, attention_forward(q, k, v)[1])
    h = 1e-6
    for name, tensor in (("dQ", q), ("dK", k), ("dV", v)):
        fd = torch.zeros_like(tensor)
        for idx in range(tensor.numel()):
            e = torch.zeros(tensor.numel(), dtype=torch.float64)
            e[idx] = h
            e = e.view_as(tensor)
            args_p = {"q": q, "k": k, "v": v}
            args_m = dict(args_p)
            key = name[1].lower()
            args_p[key], args_m[key] = tensor + e, tensor - e
            fp = (attention_forward(**args_p)[0] * d_out).sum()
            fm = (attention_forward(**args_m)[0] * d_out).sum()
            fd.view(-1)[idx] = (fp - fm) / (2 * h)
        torch.testing.assert_close(grads[name], fd, rtol=1e-6, atol=1e-8)


def test_attention_backward_bad_shape_raises(gen):
    _, cache = attention_forward(*(_randn(gen, 4, 3) for _ in range(3)))
    with pytest.raises(ValueError, match="shape of the output"):
        attention_backward(_randn(gen, 4, 5), cache)


def test_attention_forward_bad_shapes_raise(gen):
    with pytest.raises(ValueError, match="d_k"):
        attention_forward(_randn(gen, 4, 3), _randn(gen, 4, 2), _randn(gen, 4, 3))


# --------------------------------------------------------------------------- LayerNorm
def test_layer_norm_forward_matches_torch(gen):
    x, g, b = _randn(gen, 2, 5, 8, scale=3.0), _randn(gen, 8), _randn(gen, 8)
    y, _ = layer_norm_forward(x, g, b)
    torch.testing.assert_close(y, F.layer_norm(x, (8,), g, b, eps=1e-5))


def test_layer_norm_backward_matches_autograd(gen):
    x = _randn(gen, 2, 5, 8, scale=3.0).requires_grad_()
    g, b = _randn(gen, 8).requires_grad_(), _randn(gen, 8).requires_grad_()
    dy = _randn(gen, 2, 5, 8)
    (F.layer_norm(x, (8,), g, b, eps=1e-5) * dy).sum().backward()
    _, cache = layer_norm_forward(x.detach(), g.detach(), b.detach())
    dx, dg, db = layer_norm_backward(dy, cache)
    torch.testing.assert_close(dx, x.grad)
    torch.testing.assert_close(dg, g.grad)
    torch.testing.assert_close(db, b.grad)


def test_layer_norm_backward_matches_finite_differences(gen):
    x, g, b, dy = _randn(gen, 6), _randn(gen, 6), _randn(gen, 6), _randn(gen, 6)
    dx, _, _ = layer_norm_backward(dy, layer_norm_forward(x, g, b)[1])
    h = 1e-6
    fd = torch.stack(
        [
            (
                (layer_norm_forward(x + h * e, g, b)[0] - layer_norm_forward(x - h * e, g, b)[0])
                * dy
            ).sum()
            / (2 * h)
            for e in torch.eye(6, dtype=torch.float64)
        ]
    )
    torch.testing.assert_close(dx, fd, rtol=1e-6, atol=1e-8)


def test_layer_norm_gradient_is_scale_inverse_and_orthogonal(gen):
    x, g, b, dy = _randn(gen, 4, 10), _randn(gen, 10), _randn(gen, 10), _randn(gen, 4, 10)
    dx1, _, _ = layer_norm_backward(dy, layer_norm_forward(x, g, b, eps=0.0)[1])
    dx10, _, _ = layer_norm_backward(dy, layer_norm_forward(10 * x, g, b, eps=0.0)[1])
    torch.testing.assert_close(dx10, dx1 / 10)
    x_hat = layer_norm_forward(
        x, torch.ones(10, dtype=torch.float64), torch.zeros(10, dtype=torch.float64), eps=0.0
    )[0]
    torch.testing.assert_close(dx1.sum(-1), torch.zeros(4, dtype=torch.float64))
    torch.testing.assert_close((dx1 * x_hat).sum(-1), torch.zeros(4, dtype=torch.float64))


def test_layer_norm_bad_gamma_raises(gen):
    with pytest.raises(ValueError, match="gamma and beta"):
        layer_norm_forward(_randn(gen, 3, 4), _randn(gen, 5), _randn(gen, 4))


# ------------------------------------------------------------------------ depth experiment
def _documented_wiring(blk, kind, x):
    a, m, l1, l2 = blk.attn, blk.mlp, blk.ln1, blk.ln2
    if kind == "plain":
        return m(a(x))
    if kind == "norm":
        return l2(m(l1(a(x))))
    if kind == "residual":
        h = x + a(x)
        return h + m(h)
    if kind == "post-norm":
        h = l1(x + a(x))
        return l2(h + m(h))
    assert kind == "pre-norm", kind
    h = x + a(l1(x))
    return h + m(l2(h))


def test_block_kinds_wire_as_documented(gen):
    torch.manual_seed(0)
    x = _randn(gen, 2, 5, 8)
    for kind in BLOCK_KINDS:
        blk = Block(8, 2, kind).double()
        torch.testing.assert_close(blk(x), _documented_wiring(blk, kind, x))
    with pytest.raises(ValueError, match="kind"):
        Block(8, 2, "sideways")


def test_gradient_norms_per_layer_reproducible_and_sensible():
    plain = gradient_norms_per_layer(6, "plain", d_model=16, seq_len=6)
    assert len(plain) == 6
    assert plain == gradient_norms_per_layer(6, "plain", d_model=16, seq_len=6)
    # without residual or normalisation the first layer's gradient vanishes
    assert plain[0] < 1e-3 * plain[-1]
    pre = gradient_norms_per_layer(6, "pre-norm", d_model=16, seq_len=6)
    assert 0.1 < pre[0] / pre[-1] < 10
    with pytest.raises(ValueError, match="n_layers"):
        gradient_norms_per_layer(0, "plain")
    with pytest.raises(ValueError, match="kind"):
        gradient_norms_per_layer(2, "upside-down")


def test_gradient_norms_match_autograd_of_one_block():
    # one block: recompute the gradient norm directly
    norms = gradient_norms_per_layer(1, "residual", d_model=8, seq_len=4, batch=2, vocab=5, seed=3)
    gen = torch.Generator().manual_seed(3)
    x = torch.randn(2, 4, 8, generator=gen, dtype=torch.float64)
    y = torch.randint(0, 5, (2, 4), generator=gen)
    torch.manual_seed(3)
    blk = Block(8, 2, "residual").double()
    head = torch.nn.Linear(8, 5).double()
    loss = F.cross_entropy(head(blk(x)).reshape(-1, 5), y.reshape(-1))
    grads = torch.autograd.grad(loss, list(blk.parameters()), allow_unused=True)  # LNs unused here
    expected = torch.sqrt(sum((g**2).sum() for g in grads if g is not None))
    assert norms[0] == pytest.approx(float(expected), rel=1e-12)


def test_unscaled_attention_saturates():
    d_ks = [4, 256]
    scaled = attention_scale_gradients(d_ks, scaled=True, n_trials=4)
    raw = attention_scale_gradients(d_ks, scaled=False, n_trials=4)
    assert raw["max_weight"][1] > 0.8 > scaled["max_weight"][1]
    assert raw["softmax_gain"][1] < 0.5 * scaled["softmax_gain"][1]
