"""LoRA (course_lib.labs.lora) against plain PyTorch: the adapted layer is F.linear with
W + (α/r) BA."""

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from course_lib.labs.lora import (
    LoRALinear,
    add_lora,
    count_trainable,
    lora_param_count,
    lora_parameters,
    merge_lora,
)
from course_lib.model import GPTConfig, MiniGPT


def tiny_gpt(seed=0):
    torch.manual_seed(seed)
    return MiniGPT(GPTConfig(vocab_size=11, block_size=8, n_layer=2, n_head=2, d_model=16))


def randomise_adapters(model, seed=1):
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in lora_parameters(model):
            p.copy_(torch.randn(p.shape, generator=g) * 0.1)


def test_forward_is_linear_with_the_low_rank_update():
    torch.manual_seed(0)
    layer = LoRALinear(nn.Linear(12, 7), rank=3, alpha=6.0)
    randomise_adapters(layer)
    x = torch.randn(4, 5, 12)
    W = layer.base.weight + (6.0 / 3) * layer.B @ layer.A  # (7, 12)
    torch.testing.assert_close(layer(x), F.linear(x, W, layer.base.bias))
    assert torch.linalg.matrix_rank(layer.delta_weight()) <= 3


def test_zero_initialised_adapters_leave_the_model_unchanged():
    model = tiny_gpt()
    idx = torch.randint(11, (3, 8))
    before = model(idx)[0]
    add_lora(model, rank=2)
    assert all(bool((m.B == 0).all()) for m in model.modules() if isinstance(m, LoRALinear))
    assert any(bool((m.A != 0).any()) for m in model.modules() if isinstance(m, LoRALinear))
    torch.testing.assert_close(model(idx)[0], before, rtol=0, atol=0)


def test_merged_model_equals_the_adapted_forward_pass():
    model = add_lora(tiny_gpt(), rank=4, alpha=8.0)
    randomise_adapters(model)
    idx = torch.randint(11, (3, 8))
    adapted = model(idx)[0]
    assert not torch.allclose(adapted, tiny_gpt()(idx)[0], atol=1e-4)  # the adapters do change it
    merge_lora(model)
    assert not any(isinstance(m, LoRALinear) for m in model.modules())
    assert all(type(b.attn.qkv) is nn.Linear for b in model.blocks)
    torch.testing.assert_close(model(idx)[0], adapted, rtol=1e-5, atol=1e-5)


def test_gradients_reach_only_the_adapters_and_the_named_head():
    torch.manual_seed(0)
    model = tiny_gpt()
    model.head = nn.Linear(16, 3)  # a new task head, trained with the adapters
    add_lora(model, rank=2, trainable=("head",))
    randomise_adapters(model)
    idx = torch.randint(11, (3, 8))
    h = model.ln_f(model.blocks[1](model.blocks[0](model.tok_emb(idx))))  # (3, 8, 16)
    model.head(h[:, -1]).square().sum().backward()
    with_grad = {n for n, p in model.named_parameters() if p.grad is not None}
    want = {
        n for n, _ in model.named_parameters() if n.endswith((".A", ".B")) or n.startswith("head.")
    }
    assert with_grad == want
    assert {n for n, p in model.named_parameters() if p.requires_grad} == want


def test_adapter_gradients_match_autograd_through_the_merged_weight():
    torch.manual_seed(0)
    layer = LoRALinear(nn.Linear(6, 5), rank=2)
    randomise_adapters(layer)
    x = torch.randn(4, 6)
    layer(x).pow(2).sum().backward()
    A, B = layer.A.detach().clone().requires_grad_(), layer.B.detach().clone().requires_grad_()
    F.linear(x, layer.base.weight + layer.scale * B @ A, layer.base.bias).pow(2).sum().backward()
    torch.testing.assert_close(layer.A.grad, A.grad)
    torch.testing.assert_close(layer.B.grad, B.grad)


def test_parameter_counts():
    model = tiny_gpt()
    add_lora(model, rank=3)
    shapes = [tuple(m.base.weight.shape) for m in model.modules() if isinstance(m, LoRALinear)]
    assert shapes == [(48, 16), (16, 16)] * 2  # qkv and proj of both blocks
    assert count_trainable(model) == lora_param_count(shapes, 3) == 2 * 3 * ((16 + 48) + (16 + 16))


@pytest.mark.parametrize("rank", [0, 17])
def test_bad_rank_raises(rank):
    with pytest.raises(ValueError, match="rank"):
        LoRALinear(nn.Linear(16, 16), rank=rank)


def test_no_target_raises():
    with pytest.raises(ValueError, match="no nn.Linear"):
        add_lora(nn.Sequential(nn.Linear(3, 3)), rank=1)
