"""Encoders: the course's transformer blocks with bidirectional attention.

The blocks are ``course_lib.model.Block`` built from a ``GPTConfig`` with ``causal=False``:
the same pre-norm layout, attention, MLP and residual stream as MiniGPT, except that every
position may attend to every other one. On top of that stack sit two models:

- ``MaskedLM``: a BERT-style masked language model (Devlin et al., 2019) over characters; the
  corruption rule is ``mask_tokens`` (15 % of the positions chosen; of those 80 % become the
  mask token, 10 % a random token, 10 % stay) and the loss is read at the chosen positions only;
- ``ViT``: a vision transformer (Dosovitskiy et al., 2021): non-overlapping patches, one linear
  embedding per patch, a learned CLS token and learned positions, the encoder, and a linear
  classification head on the CLS token's final vector.
"""

from __future__ import annotations

from dataclasses import replace

import torch
import torch.nn.functional as F
from torch import nn

from .attention import LearnedPositionalEmbedding, keep_attention_weights
from .model import Block, GPTConfig, gpt_init_, scale_residual_projections_

__all__ = [
    "IGNORE_INDEX",
    "encoder_config",
    "Encoder",
    "mask_tokens",
    "MaskedLM",
    "patchify",
    "PatchEmbedding",
    "ViT",
]

#: Target value that ``F.cross_entropy`` skips: positions the MLM loss does not read.
IGNORE_INDEX = -100


def encoder_config(cfg: GPTConfig) -> GPTConfig:
    """A copy of ``cfg`` with bidirectional attention (``causal=False``)."""
    return replace(cfg, causal=False)


def _init_like_gpt(model: nn.Module, n_layer: int) -> None:
    """GPT-2's initialisation (as MiniGPT's), with the modules visited parent first."""
    for module in model.modules():
        gpt_init_(module)
    scale_residual_projections_(model, n_layer)


class Encoder(nn.Module):
    """``n_layer`` pre-norm blocks of ``course_lib.model`` and a final LayerNorm.

    Built from ``encoder_config(cfg)`` (bidirectional); ``Encoder(cfg, causal=True)`` keeps the
    decoder's mask, for showing what the mask changes. ``forward(x, mask=None)``:
    x (B, T, d) -> (B, T, d); mask (bool, broadcastable to (B, n_head, T, T), True = may
    attend) hides padding. ``attention_maps(x)``: the n_layer weights (B, n_head, T, T).
    """

    def __init__(self, cfg: GPTConfig, causal: bool = False):
        super().__init__()
        cfg = replace(cfg, causal=causal)
        self.cfg = cfg
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layer))
        self.ln_f = nn.LayerNorm(cfg.d_model, eps=cfg.ln_eps, bias=cfg.bias)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        for block in self.blocks:
            x = block(x, mask)  # (B, T, d)
        return self.ln_f(x)

    @torch.no_grad()
    def attention_maps(self, x: torch.Tensor) -> list[torch.Tensor]:
        with keep_attention_weights(self):
            self(x)
        return [block.attn.attn_weights for block in self.blocks]  # n_layer x (B, n_head, T, T)


# --------------------------------------------------------------------------- masked language model
def mask_tokens(
    ids: torch.Tensor,
    mask_id: int,
    vocab_size: int,
    mask_prob: float = 0.15,
    generator: torch.Generator | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """BERT's corruption rule. Each position is chosen with probability ``mask_prob``; a chosen
    position becomes ``mask_id`` with probability 0.8, a uniformly random token of
    ``0..vocab_size-1`` with probability 0.1, and stays itself with probability 0.1.

    ids: (B, T) int64. Returns (inputs (B, T), targets (B, T)): ``targets`` holds the original
    id at chosen positions and ``IGNORE_INDEX`` elsewhere, so the loss reads only those.
    """
    if ids.dim() != 2 or ids.dtype != torch.int64:
        raise ValueError(
            f"mask_tokens: ids must be (B, T) int64 token ids; got {tuple(ids.shape)} {ids.dtype}."
        )
    if not 0.0 < mask_prob <= 1.0:
        raise ValueError(f"mask_tokens: mask_prob must lie in (0, 1]; got {mask_prob}.")
    if not 0 <= mask_id < vocab_size + 1:
        raise ValueError(
            f"mask_tokens: mask_id must be a token id (usually vocab_size - 1); got {mask_id}."
        )
    u = torch.rand(ids.shape, generator=generator)  # (B, T): chooses the positions
    r = torch.rand(ids.shape, generator=generator)  # (B, T): chooses what a chosen position becomes
    random_ids = torch.randint(vocab_size, ids.shape, generator=generator)  # (B, T)
    chosen = u < mask_prob
    targets = torch.where(chosen, ids, torch.full_like(ids, IGNORE_INDEX))
    inputs = ids.clone()
    inputs[chosen & (r < 0.8)] = mask_id  # 80 %: the mask token
    # 10 %: a random token, so the model cannot trust any input
    swap = chosen & (r >= 0.8) & (r < 0.9)
    inputs[swap] = random_ids[swap]
    return inputs, targets  # the last 10 % keep their own id and must still be predicted


class MaskedLM(nn.Module):
    """A BERT-style masked language model over ``cfg.vocab_size`` tokens, the last of which
    is the mask token (``mask_id = vocab_size - 1``).

    ``forward(idx, targets=None)``: idx (B, T) -> logits (B, T, V) and the mean cross-entropy
    over positions whose target is not ``IGNORE_INDEX`` (or None).
    The output layer is tied to the token embedding, as in MiniGPT and BERT.
    """

    def __init__(self, cfg: GPTConfig):
        super().__init__()
        if cfg.vocab_size is None:
            raise ValueError("MaskedLM: set vocab_size (the characters plus one mask token).")
        cfg = encoder_config(cfg)
        self.cfg, self.mask_id = cfg, cfg.vocab_size - 1
        self.tok_emb = nn.Embedding(cfg.vocab_size, cfg.d_model)
        # pos="rope" rotates queries and keys inside attention instead (no table)
        self.pos_emb = (
            LearnedPositionalEmbedding(cfg.block_size, cfg.d_model)
            if cfg.pos == "learned"
            else None
        )
        self.encoder = Encoder(cfg)
        self.lm_head = nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)
        _init_like_gpt(self, cfg.n_layer)
        self.lm_head.weight = self.tok_emb.weight  # tied

    def forward(self, idx: torch.Tensor, targets: torch.Tensor | None = None):
        if idx.dim() != 2 or idx.shape[1] > self.cfg.block_size:
            raise ValueError(
                f"MaskedLM: idx must be (B, T) with T <= {self.cfg.block_size}; got "
                f"{tuple(idx.shape)}."
            )
        x = self.tok_emb(idx)  # (B, T, d)
        h = self.encoder(x if self.pos_emb is None else self.pos_emb(x))  # (B, T, d)
        logits = self.lm_head(h)  # (B, T, V)
        loss = None
        if targets is not None:
            loss = F.cross_entropy(
                logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), ignore_index=IGNORE_INDEX
            )
        return logits, loss

    @torch.no_grad()
    def fill(self, idx: torch.Tensor) -> torch.Tensor:
        """Replace every mask token of idx (B, T) by the model's most likely token, all at once."""
        logits = self(idx)[0]  # (B, T, V)
        logits[..., self.mask_id] = float("-inf")  # never predict the mask itself
        return torch.where(idx == self.mask_id, logits.argmax(-1), idx)


# --------------------------------------------------------------------------- vision transformer
def patchify(images: torch.Tensor, patch: int) -> torch.Tensor:
    """Cut images (B, H, W) or (B, C, H, W) into non-overlapping patch x patch squares, read
    row by row: returns (B, N, C * patch * patch) with N = (H / patch) * (W / patch)."""
    if images.dim() == 3:
        images = images[:, None]  # (B, 1, H, W)
    if images.dim() != 4:
        raise ValueError(
            f"patchify: images must be (B, H, W) or (B, C, H, W); got {tuple(images.shape)}."
        )
    B, C, H, W = images.shape
    if H % patch or W % patch:
        raise ValueError(f"patchify: patch={patch} must divide the image size {H}x{W}.")
    x = images.reshape(B, C, H // patch, patch, W // patch, patch)  # (B, C, rows, p, cols, p)
    x = x.permute(0, 2, 4, 1, 3, 5)  # (B, rows, cols, C, p, p): one patch per (row, col)
    return x.reshape(B, (H // patch) * (W // patch), C * patch * patch)  # (B, N, C p p)


class PatchEmbedding(nn.Module):
    """patchify, then one shared linear map per patch: (B, [C,] H, W) -> (B, N, d)."""

    def __init__(self, patch: int, in_dim: int, d_model: int):
        super().__init__()
        self.patch = patch
        self.proj = nn.Linear(in_dim, d_model)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return self.proj(patchify(images, self.patch))  # (B, N, d)


class ViT(nn.Module):
    """A vision transformer for small square images.

    image (B, [C,] H, W) -> patches (B, N, d) -> [CLS; patches] + positions (B, 1 + N, d)
    -> encoder -> CLS vector (B, d) -> head -> logits (B, n_classes).

    ``forward(images)`` returns the logits; ``attention_maps(images)`` the n_layer attention
    weights (B, n_head, 1 + N, 1 + N) (row 0 is the CLS token's).
    """

    def __init__(
        self,
        image_size: int = 8,
        patch: int = 2,
        channels: int = 1,
        n_classes: int = 10,
        n_layer: int = 2,
        n_head: int = 4,
        d_model: int = 64,
        dropout: float = 0.0,
    ):
        super().__init__()
        if image_size % patch:
            raise ValueError(f"ViT: patch={patch} must divide image_size={image_size}.")
        self.n_patches = (image_size // patch) ** 2
        cfg = GPTConfig(
            block_size=self.n_patches + 1,
            n_layer=n_layer,
            n_head=n_head,
            d_model=d_model,
            dropout=dropout,
            causal=False,
        )
        self.cfg = cfg
        self.patch_emb = PatchEmbedding(patch, channels * patch * patch, d_model)
        self.cls = nn.Parameter(torch.zeros(1, 1, d_model))
        self.pos_emb = LearnedPositionalEmbedding(self.n_patches + 1, d_model)
        self.encoder = Encoder(cfg)
        self.head = nn.Linear(d_model, n_classes)
        _init_like_gpt(self, n_layer)
        nn.init.normal_(self.cls, std=0.02)

    def tokens(self, images: torch.Tensor) -> torch.Tensor:
        """images -> the encoder's input: [CLS; patch embeddings] + positions, (B, 1 + N, d)."""
        p = self.patch_emb(images)  # (B, N, d)
        x = torch.cat([self.cls.expand(p.shape[0], -1, -1), p], dim=1)  # (B, 1 + N, d)
        return self.pos_emb(x)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        h = self.encoder(self.tokens(images))  # (B, 1 + N, d)
        return self.head(h[:, 0])  # (B, n_classes): read from the CLS token only

    @torch.no_grad()
    def attention_maps(self, images: torch.Tensor) -> list[torch.Tensor]:
        return self.encoder.attention_maps(self.tokens(images))

    def num_params(self) -> int:
        return sum(p.numel() for p in self.parameters())
