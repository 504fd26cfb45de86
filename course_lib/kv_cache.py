"""The KV cache (Chapter 10): the keys and values of the tokens a model has already seen, so
that generating one more token computes the new token's keys and values only.

- ``LayerKV``: one attention layer's cached keys and values, (B, n_kv_heads, T_past, head_dim);
- ``KVCache``: one ``LayerKV`` per layer, and the position of the next token
  (``MiniGPT.new_cache()`` makes one; ``MiniGPT.forward(idx, cache=...)`` fills it);
- ``kv_cache_bytes``: the memory a cache takes, by formula;
- ``to_grouped_query``: a multi-head MiniGPT turned into a grouped-query one (fewer key/value
  heads, so a smaller cache).
"""

from __future__ import annotations

from dataclasses import replace

import torch
from torch import nn

__all__ = ["LayerKV", "KVCache", "kv_cache_bytes", "to_grouped_query"]


def kv_cache_bytes(
    n_layer: int,
    n_kv_heads: int,
    head_dim: int,
    tokens: int = 1,
    batch: int = 1,
    bytes_per_value: int = 4,
) -> int:
    """Bytes a KV cache holds: 2 (a key and a value) x n_kv_heads x head_dim x bytes_per_value
    per token per layer, times n_layer x tokens x batch (bytes_per_value: 4 float32, 2 bf16)."""
    for name, v in (
        ("n_layer", n_layer),
        ("n_kv_heads", n_kv_heads),
        ("head_dim", head_dim),
        ("bytes_per_value", bytes_per_value),
    ):
        if int(v) < 1:
            raise ValueError(f"kv_cache_bytes: {name} must be a positive integer; got {v}.")
    if tokens < 0 or batch < 0:
        raise ValueError(f"kv_cache_bytes: tokens and batch must be >= 0; got {tokens}, {batch}.")
    return 2 * n_kv_heads * head_dim * bytes_per_value * n_layer * tokens * batch


class LayerKV:
    """The cached keys and values of one attention layer: k, v (B, n_kv_heads, T_past, head_dim).

    ``update(k, v)`` appends the new tokens' keys and values (concatenating, like Hugging
    Face's ``DynamicCache``) and returns all of them; ``crop(n)`` keeps the last n tokens.
    """

    def __init__(self):
        self.k: torch.Tensor | None = None
        self.v: torch.Tensor | None = None

    def __len__(self) -> int:
        return 0 if self.k is None else self.k.shape[2]

    def update(self, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if self.k is None:
            self.k, self.v = k, v  # (B, n_kv_heads, T, head_dim)
        else:
            self.k = torch.cat([self.k, k], dim=2)  # (B, n_kv_heads, T_past + T, head_dim)
            self.v = torch.cat([self.v, v], dim=2)
        return self.k, self.v

    def crop(self, n: int) -> None:
        if self.k is not None:
            self.k, self.v = self.k[:, :, -n:], self.v[:, :, -n:]  # keep the last n tokens


class KVCache:
    """The keys and values of every layer for the tokens a model has already seen.

    ``len(cache)``: the number of cached tokens. ``pos``: the position of the next token
    (equal to ``len(cache)`` unless ``crop`` dropped the oldest tokens, which only RoPE
    allows: its scores depend on position offsets, so a sliding window of cached keys stays
    valid). ``nbytes()``: the memory the tensors take.
    """

    def __init__(self, n_layer: int):
        self.layers = [LayerKV() for _ in range(n_layer)]
        self.pos = 0

    def __len__(self) -> int:
        return len(self.layers[0])

    def crop(self, n: int) -> None:
        """Keep only the last n tokens of every layer (``pos`` keeps counting)."""
        if n < 0:
            raise ValueError(f"KVCache.crop: n must be >= 0; got {n}.")
        for layer in self.layers:
            layer.crop(n)

    def nbytes(self) -> int:
        return sum(
            t.numel() * t.element_size()
            for layer in self.layers
            for t in (layer.k, layer.v)
            if t is not None
        )


@torch.no_grad()
def to_grouped_query(model: nn.Module, n_kv_heads: int) -> nn.Module:
    """A copy of a multi-head MiniGPT (of ``type(model)``) with ``n_kv_heads`` key/value heads:
    each group's key and value projections are the mean of its heads' (the conversion of
    Ainslie et al. 2023, before any further training). n_kv_heads = n_head gives the same
    model.

    Only the key/value rows of every ``attn.qkv`` change: (d + 2 n_head hd) -> (d + 2 n_kv hd) rows.
    """
    cfg = model.cfg
    if cfg.kv_heads != cfg.n_head:
        raise ValueError(
            "to_grouped_query: the model already has grouped key/value heads; start from "
            "multi-head attention."
        )
    new_cfg = replace(cfg, n_kv_heads=n_kv_heads)  # validates that n_kv_heads divides n_head
    out = type(model)(new_cfg)  # model's class: course_lib.model imports this module
    state = model.state_dict()
    d, hd, group = cfg.d_model, cfg.head_dim, cfg.n_head // n_kv_heads

    def pool(t):  # (n_head hd, ...) -> (n_kv hd, ...): each group's key/value rows averaged
        shape = t.shape[1:]
        return t.reshape(n_kv_heads, group, hd, *shape).mean(dim=1).reshape(n_kv_heads * hd, *shape)

    for i in range(cfg.n_layer):
        for kind in ("weight", "bias"):
            key = f"blocks.{i}.attn.qkv.{kind}"
            if key not in state:
                continue
            q, k, v = state[key].split(d)  # (d, ...) each: the rows of Q, K and V
            state[key] = torch.cat([q, pool(k), pool(v)])  # (d + 2 n_kv hd, ...)
    out.load_state_dict(state)
    return out.train(model.training)
