"""Chapter 15's modern blocks against references: torch.nn.RMSNorm, a SwiGLU and a QK-norm
attention written out with torch.nn.functional, a mixture of experts computed token by token,
the balance loss at its extremes, and ModernGPT with GPT-2's choices equal to MiniGPT."""

import pytest
import torch
import torch.nn.functional as F

from course_lib.labs.modern import (
    ModernConfig,
    ModernGPT,
    MoE,
    QKNormAttention,
    RMSNorm,
    SwiGLU,
    TopKRouter,
    load_balance_loss,
    swiglu_hidden,
)
from course_lib.model import GPTConfig, MiniGPT
from course_lib.schedule import warmup_stable_decay

CFG = GPTConfig(vocab_size=11, block_size=8, n_layer=2, n_head=2, d_model=16, bias=False)


def test_rmsnorm_matches_torch():
    _ = torch.manual_seed(0)
    x = torch.randn(3, 5, 16) * 3 + 1
    ours = RMSNorm(16, eps=1e-6)
    ref = torch.nn.RMSNorm(16, eps=1e-6)
    with torch.no_grad():
        ours.weight.normal_()
        ref.weight.copy_(ours.weight)
    torch.testing.assert_close(ours(x), ref(x))
    # and its gradient, by finite differences in float64
    xd = torch.randn(2, 6, dtype=torch.float64, requires_grad=True)
    norm = RMSNorm(6).double()
    assert torch.autograd.gradcheck(norm, (xd,))


def test_rmsnorm_output_has_unit_rms():
    x = torch.randn(4, 32) * 7
    y = RMSNorm(32)(x)
    torch.testing.assert_close(y.pow(2).mean(-1), torch.ones(4), rtol=1e-4, atol=1e-4)


def test_swiglu_matches_functional_formula():
    _ = torch.manual_seed(1)
    m = SwiGLU(16, 40)
    x = torch.randn(2, 3, 16)
    g, u, p = m.gate.weight, m.up.weight, m.proj.weight
    ref = (F.silu(x @ g.T) * (x @ u.T)) @ p.T
    torch.testing.assert_close(m(x), ref)
    # silu(z) = z * sigmoid(z), the gate's definition
    z = torch.linspace(-4, 4, 9)
    torch.testing.assert_close(F.silu(z), z * torch.sigmoid(z))


def test_swiglu_hidden_matches_gelu_mlp_parameters():
    for d in (96, 128, 384):
        h = swiglu_hidden(d)
        assert h % 32 == 0 and abs(3 * d * h - 8 * d * d) <= 3 * d * 32


def test_qk_norm_attention_matches_explicit_softmax():
    """Forward and gradients (input, projections, both gains) against the formula written
    out on the transposed heads (its norm checked against torch.nn.RMSNorm), in float64."""
    _ = torch.manual_seed(2)
    att = QKNormAttention(CFG).double()
    with torch.no_grad():
        att.q_norm.weight.uniform_(0.5, 1.5)
        att.k_norm.weight.uniform_(0.5, 1.5)
    x = torch.randn(2, 5, 16, dtype=torch.float64, requires_grad=True)

    def rms(t, g):  # (..., 8): the formula
        return t / t.pow(2).mean(-1, keepdim=True).add(1e-6).sqrt() * g

    def explicit(x):
        q, k, v = (x @ att.qkv.weight.T).split(16, dim=-1)
        heads = lambda t: t.view(2, 5, 2, 8).transpose(1, 2)  # noqa: E731
        qn = rms(heads(q), att.q_norm.weight)
        kn = rms(heads(k), att.k_norm.weight)
        scores = qn @ kn.transpose(-1, -2) / 8**0.5
        scores = scores.masked_fill(~torch.ones(5, 5, dtype=torch.bool).tril(), float("-inf"))
        out = (scores.softmax(-1) @ heads(v)).transpose(1, 2).reshape(2, 5, 16)
        return out @ att.proj.weight.T

    ref_norm = torch.nn.RMSNorm(8, eps=1e-6).double()
    with torch.no_grad():
        ref_norm.weight.copy_(att.q_norm.weight)
    probe = torch.randn(2, 5, 8, dtype=torch.float64)
    torch.testing.assert_close(rms(probe, att.q_norm.weight), ref_norm(probe))  # the formula
    params = [x, att.qkv.weight, att.proj.weight, att.q_norm.weight, att.k_norm.weight]
    ours, want = att(x), explicit(x)
    torch.testing.assert_close(ours, want, rtol=1e-10, atol=1e-12)
    w = torch.randn_like(ours)
    g_ours = torch.autograd.grad((ours * w).sum(), params)
    g_want = torch.autograd.grad((want * w).sum(), params)
    for a, b in zip(g_ours, g_want):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-12)


def test_qk_norm_bounds_the_logits():
    # scaling the query/key weights up does not change the output: the norms undo it
    _ = torch.manual_seed(3)
    att = QKNormAttention(CFG)
    x = torch.randn(1, 6, 16)
    before = att(x)
    with torch.no_grad():
        att.qkv.weight[:32] *= 100.0  # the query and key rows
    torch.testing.assert_close(att(x), before, rtol=1e-4, atol=1e-5)


def test_router_picks_top_k_and_renormalises():
    _ = torch.manual_seed(4)
    r = TopKRouter(16, 5, 2)
    x = torch.randn(7, 16)
    w, e, p = r(x)
    ref_p = (x @ r.w.weight.T).softmax(-1)
    torch.testing.assert_close(p, ref_p)
    for t in range(7):
        best = ref_p[t].argsort(descending=True)[:2]
        assert set(e[t].tolist()) == set(best.tolist())
    torch.testing.assert_close(w.sum(-1), torch.ones(7))
    with pytest.raises(ValueError, match="k <= n_expert"):
        TopKRouter(16, 3, 4)


def test_router_with_one_expert_keeps_the_switch_gate():
    """k = 1: the weight is the chosen expert's probability itself (Switch), not p / p = 1."""
    _ = torch.manual_seed(4)
    r = TopKRouter(16, 5, 1)
    x = torch.randn(7, 16)
    w, e, p = r(x)
    torch.testing.assert_close(w, p.max(-1, keepdim=True).values)
    assert (w < 1).all()


@pytest.mark.parametrize("k", [1, 2, 3, 4])
def test_router_learns_from_the_loss_at_every_k(k):
    """The language-model loss (here: a loss on the MoE's output alone, no balance loss) must
    reach the router's weights for every k; with renormalised k = 1 it got ~1e-7 (float noise).
    The gradient is compared with central finite differences in float64."""
    _ = torch.manual_seed(7)
    moe = MoE(16, n_expert=4, k=k, hidden=24).double()
    x = torch.randn(2, 5, 16, dtype=torch.float64)
    target = torch.randn(2, 5, 16, dtype=torch.float64)

    def loss() -> torch.Tensor:
        return ((moe(x) - target) ** 2).mean()  # no aux_loss: the task's loss only

    loss().backward()
    g = moe.router.w.weight.grad
    assert g is not None and g.norm() > 1e-3, f"router gradient norm {g.norm():.2e} at k={k}"
    # finite differences on a few router weights (small enough not to change the top-k)
    w = moe.router.w.weight
    with torch.no_grad():
        for i, j in [(0, 0), (1, 3), (3, 15)]:
            old, h = w[i, j].item(), 1e-6
            w[i, j] = old + h
            up = loss().item()
            w[i, j] = old - h
            down = loss().item()
            w[i, j] = old
            assert (up - down) / (2 * h) == pytest.approx(g[i, j].item(), rel=1e-4, abs=1e-9)


def test_moe_matches_token_by_token_loop():
    _ = torch.manual_seed(5)
    moe = MoE(16, n_expert=4, k=2, hidden=24)
    x = torch.randn(2, 3, 16)
    out = moe(x)
    w, e, _ = moe.router(x.reshape(6, 16))
    ref = torch.stack(
        [
            sum(w[t, j] * moe.experts[e[t, j]](x.reshape(6, 16)[t]) for j in range(2))
            for t in range(6)
        ]
    )
    torch.testing.assert_close(out.reshape(6, 16), ref, rtol=1e-5, atol=1e-6)
    # every expert's weights get a gradient only through the tokens routed to it
    out.sum().backward()
    used = set(e.reshape(-1).tolist())
    for i, ex in enumerate(moe.experts):
        assert (ex.gate.weight.grad is not None and ex.gate.weight.grad.abs().sum() > 0) == (
            i in used
        )


def test_balance_loss_extremes_and_gradient():
    E, N = 4, 8
    uniform = torch.full((N, E), 1 / E)
    spread = torch.arange(N)[:, None] % E  # (N, 1): each expert gets N / E tokens
    assert load_balance_loss(uniform, spread).item() == pytest.approx(1.0)
    collapsed = torch.zeros(N, E)
    collapsed[:, 0] = 1.0
    assert load_balance_loss(
        collapsed, torch.zeros(N, 1, dtype=torch.long)
    ).item() == pytest.approx(E)
    # gradient flows through the probabilities, not the counts
    p = torch.rand(N, E, dtype=torch.float64).softmax(-1).requires_grad_()
    e = p.argmax(-1, keepdim=True)
    assert torch.autograd.gradcheck(lambda q: load_balance_loss(q, e), (p,))


def test_moe_active_parameters_follow_k_not_n_expert():
    small, big = MoE(16, 2, 1, hidden=32), MoE(16, 8, 1, hidden=32)
    n_small = sum(p.numel() for p in small.parameters())
    n_big = sum(p.numel() for p in big.parameters())
    assert n_big > 3.5 * n_small
    assert big.active_params() - small.active_params() == 16 * 6  # only the router grew


def test_modern_gpt_with_gpt2_choices_is_minigpt():
    _ = torch.manual_seed(6)
    a = MiniGPT(CFG)
    _ = torch.manual_seed(6)
    b = ModernGPT(ModernConfig.from_gpt(CFG))
    for (na, pa), (nb, pb) in zip(a.state_dict().items(), b.state_dict().items()):
        assert na == nb and torch.equal(pa, pb)
    idx = torch.randint(0, 11, (2, 8))
    torch.testing.assert_close(a(idx, idx)[1], b(idx, idx)[1])


def test_untied_head_and_all_changes_train():
    cfg = ModernConfig.from_gpt(CFG, norm="rmsnorm", mlp="moe", qk_norm=True, tie_head=False)
    m = ModernGPT(cfg)
    assert m.lm_head.weight is not m.tok_emb.weight
    assert ModernGPT(ModernConfig.from_gpt(CFG)).lm_head.weight is not None
    idx = torch.randint(0, 11, (3, 8))
    logits, loss = m(idx, idx)
    assert logits.shape == (3, 8, 11) and m.aux_loss().item() >= 1.0 - 1e-6
    (loss + 0.01 * m.aux_loss()).backward()
    assert all(p.grad is not None for n, p in m.named_parameters() if "experts" not in n)


def test_modern_config_rejects_bad_choices():
    with pytest.raises(ValueError, match="norm must be"):
        ModernConfig.from_gpt(CFG, norm="batchnorm")
    with pytest.raises(ValueError, match="mlp must be"):
        ModernConfig.from_gpt(CFG, mlp="relu")
    with pytest.raises(ValueError, match="top_k"):
        ModernConfig.from_gpt(CFG, mlp="moe", n_expert=2, top_k=3)
    with pytest.raises(ValueError, match="block_size"):
        ModernGPT(ModernConfig.from_gpt(CFG))(torch.zeros(1, 9, dtype=torch.long))


def test_warmup_stable_decay():
    lrs = [warmup_stable_decay(s, 1.0, 10, 100, 0.2, 0.1) for s in range(110)]
    assert lrs[0] == pytest.approx(0.1) and lrs[9] == pytest.approx(1.0)
    assert all(v == 1.0 for v in lrs[10:80])  # stable
    assert lrs[90] == pytest.approx(0.55)  # halfway down the straight line
    assert all(a > b for a, b in zip(lrs[80:100], lrs[81:100]))
    assert lrs[100] == pytest.approx(0.1) and lrs[109] == pytest.approx(0.1)
    with pytest.raises(ValueError, match="decay_fraction"):
        warmup_stable_decay(0, 1.0, 10, 100, 0.0)
    with pytest.raises(ValueError, match="warmup_steps"):
        warmup_stable_decay(0, 1.0, 90, 100, 0.5)
