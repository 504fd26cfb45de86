"""course_lib.handcalc against torch autograd (float64) and finite differences."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from course_lib import handcalc as hc
from course_lib.handcalc.worksheet import dot_str, fmt

RNG = np.random.default_rng(0)
SEQS = [(["A", "B"], "C"), (["A", "A"], "D"), (["B", "A"], "C"), (["C", "D", "A"], "B")]


# float64 as the default dtype for this module only (see conftest.float64_default).
pytestmark = pytest.mark.usefixtures("float64_default")


def random_params(scale=1.0) -> hc.Params:
    return hc.Params(*(scale * RNG.normal(size=s) for s in [(2, 2), (2, 2), (2, 2), (2, 4)]))


def torch_loss(W: dict, tokens, target):
    """The one-layer model in torch: independent of handcalc."""
    X = torch.tensor(hc.EMBEDDINGS)[[hc.VOCAB.index(t) for t in tokens]]  # (T, 2)
    Q, K, V = X @ W["W_Q"], X @ W["W_K"], X @ W["W_V"]
    T = len(tokens)
    mask = torch.ones(T, T, dtype=torch.bool).tril()
    out = F.scaled_dot_product_attention(Q[None], K[None], V[None], attn_mask=mask)[0]  # (T, 2)
    logits = out[-1] @ W["W_O"]
    return F.cross_entropy(logits[None], torch.tensor([hc.VOCAB.index(target)]))


def torch_grads(params: hc.Params, tokens, target):
    W = {n: torch.tensor(v, requires_grad=True) for n, v in params.items()}
    loss = torch_loss(W, tokens, target)
    loss.backward()
    return loss.item(), {n: w.grad.numpy() for n, w in W.items()}


@pytest.mark.parametrize("tokens,target", SEQS)
@pytest.mark.parametrize("which", ["initial", "random"])
def test_gradients_match_autograd(tokens, target, which):
    p = hc.initial_params() if which == "initial" else random_params()
    f = hc.forward(p, tokens, target)
    g = hc.backward(p, f).params()
    loss, tg = torch_grads(p, tokens, target)
    assert f.loss == pytest.approx(loss, rel=1e-12)
    for n, _ in p.items():
        np.testing.assert_allclose(getattr(g, n), tg[n], rtol=1e-9, atol=1e-13, err_msg=n)


def test_intermediate_gradients_match_autograd():
    """d_logits, d_h, d_weights, d_scaled, d_scores, d_Q, d_K, d_V via retain_grad."""
    p = random_params()
    tokens, target = ["C", "A", "B"], "D"
    f = hc.forward(p, tokens, target)
    g = hc.backward(p, f)
    X = torch.tensor(f.X)
    W = {n: torch.tensor(v) for n, v in p.items()}
    Q, K, V = X @ W["W_Q"], X @ W["W_K"], X @ W["W_V"]
    for t in (Q, K, V):
        t.requires_grad_(True)
    scores = Q @ K.T
    scaled = scores / math.sqrt(2)
    masked = scaled.masked_fill(~torch.ones(3, 3, dtype=torch.bool).tril(), float("-inf"))
    weights = torch.softmax(masked, -1)
    out = weights @ V
    logits = out[-1] @ W["W_O"]
    for t in (scores, scaled, weights, out, logits):
        t.retain_grad()
    F.cross_entropy(logits[None], torch.tensor([3])).backward()
    pairs = {
        "d_logits": logits,
        "d_weights": weights,
        "d_scaled": scaled,
        "d_scores": scores,
        "d_Q": Q,
        "d_K": K,
        "d_V": V,
    }
    for name, t in pairs.items():
        np.testing.assert_allclose(
            getattr(g, name), t.grad.numpy(), rtol=1e-9, atol=1e-13, err_msg=name
        )
    np.testing.assert_allclose(g.d_h, out.grad[-1].numpy(), rtol=1e-9, atol=1e-13)
    np.testing.assert_allclose(f.weights, weights.detach().numpy(), rtol=1e-12)


def finite_difference(fun, x: np.ndarray, eps=1e-6) -> np.ndarray:
    grad = np.zeros_like(x)
    for idx in np.ndindex(x.shape):
        old = x[idx]
        x[idx] = old + eps
        up = fun()
        x[idx] = old - eps
        down = fun()
        x[idx] = old
        grad[idx] = (up - down) / (2 * eps)
    return grad


@pytest.mark.parametrize("tokens,target", SEQS[:3])
def test_gradients_match_finite_differences(tokens, target):
    p = random_params()
    g = hc.backward(p, hc.forward(p, tokens, target)).params()
    for n, W in p.items():
        num = finite_difference(lambda: hc.forward(p, tokens, target).loss, W)
        np.testing.assert_allclose(getattr(g, n), num, rtol=1e-6, atol=1e-9, err_msg=n)


def test_softmax_jacobian_and_shortcut_agree_with_autograd():
    z = torch.tensor(RNG.normal(size=5), requires_grad=True)
    g = RNG.normal(size=5)
    s = torch.softmax(z, -1)
    (s * torch.tensor(g)).sum().backward()
    s_np = hc.softmax(z.detach().numpy())
    np.testing.assert_allclose(hc.softmax_jacobian(s_np) @ g, z.grad.numpy(), rtol=1e-12)
    np.testing.assert_allclose(hc.softmax_backward(s_np, g), z.grad.numpy(), rtol=1e-12)
    J = torch.autograd.functional.jacobian(lambda v: torch.softmax(v, -1), z.detach())
    np.testing.assert_allclose(hc.softmax_jacobian(s_np), J.numpy(), rtol=1e-12, atol=1e-15)


def test_invariants_probabilities_and_descent():
    p = hc.initial_params()
    for tokens, target in SEQS:
        f = hc.forward(p, tokens, target)
        assert f.probs.sum() == pytest.approx(1.0, abs=1e-15)
        np.testing.assert_allclose(f.weights.sum(-1), 1.0, atol=1e-15)
        assert np.all(f.weights[np.triu_indices(len(tokens), 1)] == 0.0)  # causal
    f = hc.forward(p, ["A", "B"], "C")
    g = hc.backward(p, f).params()
    for only in (["W_O"], None):
        f2 = hc.forward(hc.sgd_step(p, g, 0.1, only=only), ["A", "B"], "C")
        assert f2.loss < f.loss and f2.probs[2] > f.probs[2]
    # adding the gradient instead makes things worse
    f3 = hc.forward(hc.sgd_step(p, g, -0.1), ["A", "B"], "C")
    assert f3.loss > f.loss


def test_batch_gradient_is_mean_and_training_learns_the_patterns():
    p = hc.initial_params()
    fwds, grads, loss, mean = hc.batch_gradients(p)
    assert loss == pytest.approx(np.mean([f.loss for f in fwds]))
    W = {n: torch.tensor(v, requires_grad=True) for n, v in p.items()}
    total = sum(torch_loss(W, t, y) for t, y in hc.PATTERNS) / 3
    total.backward()
    for n, w in W.items():
        np.testing.assert_allclose(getattr(mean, n), w.grad.numpy(), rtol=1e-10, atol=1e-14)
    final, hist = hc.train_gd(p, lr=0.1, epochs=400)
    assert hist[-1] < 0.1 * hist[0]
    assert all(hc.forward(final, t, y).probs.argmax() == hc.VOCAB.index(y) for t, y in hc.PATTERNS)


def test_ffn_forward_backward_against_torch():
    fp = hc.FFNParams(
        RNG.normal(size=(2, 3)), RNG.normal(size=3), RNG.normal(size=(3, 2)), RNG.normal(size=2)
    )
    x = RNG.normal(size=(4, 2))
    d_out = RNG.normal(size=(4, 2))
    f = hc.ffn_forward(fp, x)
    g = hc.ffn_backward(fp, f, d_out)
    T = {k: torch.tensor(getattr(fp, k), requires_grad=True) for k in ("W1", "b1", "W2", "b2")}
    xt = torch.tensor(x, requires_grad=True)
    out = torch.relu(xt @ T["W1"] + T["b1"]) @ T["W2"] + T["b2"]
    np.testing.assert_allclose(f.out, out.detach().numpy(), rtol=1e-12)
    np.testing.assert_allclose(f.residual, (xt + out).detach().numpy(), rtol=1e-12)
    (out * torch.tensor(d_out)).sum().backward()
    np.testing.assert_allclose(g["d_x"], xt.grad.numpy(), rtol=1e-10, atol=1e-14)
    for k, t in T.items():
        np.testing.assert_allclose(g[f"d_{k}"], t.grad.numpy(), rtol=1e-10, atol=1e-14, err_msg=k)


def test_example_ffn_really_zeroes_something():
    f = hc.ffn_forward(hc.example_ffn_params(), hc.EMBEDDINGS)
    assert (f.pre < 0).any() and (f.hidden == 0).any()


@pytest.mark.parametrize("d", [2, 5])
def test_layernorm_against_torch(d):
    x = RNG.normal(size=(3, d))
    gamma, beta, d_y = RNG.normal(size=d), RNG.normal(size=d), RNG.normal(size=(3, d))
    f = hc.layernorm_forward(x, gamma, beta)
    xt = torch.tensor(x, requires_grad=True)
    gt, bt = torch.tensor(gamma, requires_grad=True), torch.tensor(beta, requires_grad=True)
    y = F.layer_norm(xt, (d,), gt, bt, eps=1e-5)
    np.testing.assert_allclose(f.y, y.detach().numpy(), rtol=1e-12)
    (y * torch.tensor(d_y)).sum().backward()
    dx, dg, db = hc.layernorm_backward(f, gamma, d_y)
    for mine, theirs in ((dx, xt), (dg, gt), (db, bt)):
        np.testing.assert_allclose(mine, theirs.grad.numpy(), rtol=1e-8, atol=1e-12)


def test_layernorm_in_two_dimensions_keeps_only_a_sign():
    for v in RNG.normal(size=(20, 2)) * 10:
        xhat = hc.layernorm_forward(v, np.ones(2), np.zeros(2)).xhat
        np.testing.assert_allclose(np.abs(xhat), 1.0, atol=1e-4)
        assert np.sign(xhat[0]) == np.sign(v[0] - v[1])


class TorchTransformer(torch.nn.Module):
    """The two-block pre-LN model in torch modules (independent of handcalc)."""

    def __init__(self, params: dict):
        super().__init__()
        self.p = torch.nn.ParameterDict(
            {k.replace(".", "_"): torch.nn.Parameter(torch.tensor(v)) for k, v in params.items()}
        )

    def forward(self, tokens, target):
        P = lambda k: self.p[k.replace(".", "_")]  # noqa: E731
        h = torch.tensor(hc.EMBEDDINGS)[[hc.VOCAB.index(t) for t in tokens]]
        T = len(tokens)
        mask = torch.ones(T, T, dtype=torch.bool).tril()
        for i in (1, 2):
            a = F.layer_norm(h, (2,), P(f"block{i}.ln1.g"), P(f"block{i}.ln1.b"))
            att = F.scaled_dot_product_attention(
                (a @ P(f"block{i}.W_Q"))[None],
                (a @ P(f"block{i}.W_K"))[None],
                (a @ P(f"block{i}.W_V"))[None],
                attn_mask=mask,
            )[0]
            h = h + att
            m = F.layer_norm(h, (2,), P(f"block{i}.ln2.g"), P(f"block{i}.ln2.b"))
            h = (
                h
                + torch.relu(m @ P(f"block{i}.W1") + P(f"block{i}.b1")) @ P(f"block{i}.W2")
                + P(f"block{i}.b2")
            )
        z = F.layer_norm(h, (2,), P("lnf.g"), P("lnf.b"))[-1] @ P("W_O")
        return F.cross_entropy(z[None], torch.tensor([hc.VOCAB.index(target)]))


@pytest.mark.parametrize("random_start", [False, True])
def test_transformer_gradients_against_autograd(random_start):
    params = hc.transformer_init()
    if random_start:
        params = {k: v + 0.3 * RNG.normal(size=v.shape) for k, v in params.items()}
    loss, grads, _ = hc.transformer_loss(params)
    model = TorchTransformer(params)
    tl = sum(model(t, y) for t, y in hc.PATTERNS) / 3
    tl.backward()
    assert loss == pytest.approx(tl.item(), rel=1e-12)
    for k in params:
        np.testing.assert_allclose(
            grads[k], model.p[k.replace(".", "_")].grad.numpy(), rtol=1e-7, atol=1e-10, err_msg=k
        )


def test_transformer_gradient_finite_differences():
    params = {k: v + 0.3 * RNG.normal(size=v.shape) for k, v in hc.transformer_init().items()}
    _, grads, _ = hc.transformer_loss(params)
    for k in ("block1.W_Q", "block1.ln1.g", "block2.b1", "lnf.b", "W_O"):
        num = finite_difference(lambda: hc.transformer_loss(params)[0], params[k])
        np.testing.assert_allclose(grads[k], num, rtol=1e-5, atol=1e-8, err_msg=k)


def test_adamw_matches_torch():
    params = hc.transformer_init()
    model = TorchTransformer(params)
    decay = [v for k, v in model.p.items() if "W" in k]
    rest = [v for k, v in model.p.items() if "W" not in k]
    opt = torch.optim.AdamW(
        [{"params": decay, "weight_decay": 0.01}, {"params": rest, "weight_decay": 0.0}], lr=0.01
    )
    state = None
    for _ in range(5):
        _, g, _ = hc.transformer_loss(params)
        params, state = hc.adamw_step(params, g, state, lr=0.01, weight_decay=0.01)
        opt.zero_grad()
        (sum(model(t, y) for t, y in hc.PATTERNS) / 3).backward()
        opt.step()
    for k, v in params.items():
        np.testing.assert_allclose(
            v, model.p[k.replace(".", "_")].detach().numpy(), rtol=1e-9, atol=1e-12, err_msg=k
        )


def test_bad_input_raises_clear_errors():
    with pytest.raises(ValueError, match="drawn from"):
        hc.forward(hc.initial_params(), ["A", "E"], "C")
    with pytest.raises(ValueError, match="unknown parameter"):
        hc.sgd_step(hc.initial_params(), hc.initial_params(), 0.1, only=["W_X"])
    with pytest.raises(ValueError, match="shape"):
        hc.attention_forward(np.ones((2, 3)), np.eye(2), np.eye(2), np.eye(2))


def test_formatting():
    assert fmt(0.0070710678) == "0.007071" and fmt(0) == "0.0" and fmt(-0.75) == "\u22120.75"
    assert fmt(0.1) == "0.1" and fmt(1.0) == "1.0"
    assert dot_str([0.0, 0.1], [0.1, 0.0]) == "0.0×0.1 + 0.1×0.0 = 0.0"


def test_math_mode_arithmetic_shows_the_same_numbers_typeset():
    """The pages' variant (tex=True) is the worksheets' arithmetic written for MathJax: read back
    as text by pylatexenc (the search page's converter) it is the plain line, number for number."""
    import sys

    from course_lib.handcalc.worksheet import affine_str, inline_math, sum_str
    from tools import ROOT

    sys.path.insert(0, str(ROOT / "book" / "_ext"))
    from course_search import math_text

    rng = np.random.default_rng(0)
    a, b, bias = rng.normal(size=3), rng.normal(size=3), -0.15
    for plain, tex in [
        (dot_str(a, b), dot_str(a, b, tex=True)),
        (affine_str(a, b, bias), affine_str(a, b, bias, tex=True)),
        (sum_str(a, 6), sum_str(a, 6, tex=True)),
    ]:
        assert "\u2212" not in tex and "×" not in tex and "$" not in tex
        assert math_text(tex) == plain.replace("×", " × ").replace("\u2212", "-")
    assert "\\times" in dot_str(a, b, tex=True)
    assert inline_math("e^{0.1} = 1.105")._repr_latex_() == "$e^{0.1} = 1.105$"
    with pytest.raises(ValueError, match="without dollar signs"):
        inline_math("$x$")


def test_train_transformer_matches_torch_adamw_and_finds_the_first_learned_step():
    """train_transformer (Chapter 5.6's loop) against torch.optim.AdamW on the autograd model."""
    steps = 60
    params, history, first = hc.train_transformer(
        hc.transformer_init(), steps=steps, lr=0.01, weight_decay=0.01
    )
    model = TorchTransformer(hc.transformer_init())
    decay = [v for k, v in model.p.items() if "W" in k]
    rest = [v for k, v in model.p.items() if "W" not in k]
    opt = torch.optim.AdamW(
        [{"params": decay, "weight_decay": 0.01}, {"params": rest, "weight_decay": 0.0}], lr=0.01
    )
    torch_history, torch_first = [], None
    for step in range(steps + 1):
        with torch.no_grad():  # prediction = the target with the lowest loss
            predicted = [min(hc.VOCAB, key=lambda c: model(t, c).item()) for t, _ in hc.PATTERNS]
        if torch_first is None and predicted == [y for _, y in hc.PATTERNS]:
            torch_first = step
        loss = sum(model(t, y) for t, y in hc.PATTERNS) / 3
        torch_history.append(loss.item())
        if step < steps:
            opt.zero_grad()
            loss.backward()
            opt.step()
    np.testing.assert_allclose(history, torch_history, rtol=1e-9)
    assert first == (torch_first if torch_first is not None and torch_first < steps else None)
    for k, v in params.items():
        np.testing.assert_allclose(
            v, model.p[k.replace(".", "_")].detach().numpy(), rtol=1e-9, atol=1e-12, err_msg=k
        )
