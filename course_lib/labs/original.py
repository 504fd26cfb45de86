"""The original transformer's recipe (Vaswani et al. 2017), Chapter 14's variant of its own.

Chapter 14's ``Seq2Seq`` is a modern encoder–decoder: pre-norm blocks, GELU, learned
positions, GPT-2's initialisation, warm-up then cosine decay. ``OriginalSeq2Seq`` is the
paper's model on the same task and interface:

- **post-norm** blocks, x <- LN(x + sublayer(x)) after every sublayer (section 3.1), and no
  final LayerNorm (the last sublayer's output is already normalised);
- a **ReLU** feed-forward network, max(0, x W1 + b1) W2 + b2 (section 3.3), ``ReLUMLP``;
- **sinusoidal positions** from a ``PositionalEncoding`` module (section 3.5): the fixed table
  is a *buffer* (``register_buffer``): it moves with ``.to(device)`` and is saved in the
  ``state_dict``, but it is not a parameter, so no optimiser updates it; dropout is applied to
  the sum of embeddings and positions (section 5.4);
- **embeddings multiplied by √d_model** (section 3.4), ``ScaledEmbedding``: an embedding drawn
  with standard deviation d^-1/2 and scaled by √d has entries of size about 1, the size of the
  sinusoids added to it; the output head shares the target embedding's matrix, unscaled;
- Xavier-uniform weights (as ``torch.nn.Transformer`` initialises its own).

Training (``course_lib.translate.train``) adds the paper's **label smoothing** ε = 0.1 and the
**Noam schedule** (``course_lib.schedule.noam_rate``). ``norm="pre"`` keeps everything else and
puts the LayerNorms first (with final LayerNorms, as Chapter 14's model), so an ablation can
switch the normalisation alone.

The blocks reuse the course's attention (``CausalSelfAttention`` for self-attention, causal or
not; ``course_lib.seq2seq.CrossAttention``) under the attribute names of ``Seq2Seq``'s, so
``Seq2Seq``'s ``encode``, ``decode``, ``logits`` and ``forward``, and every decoder and metric of
``course_lib.translate``, run unchanged. With the same weights ``norm="post"`` computes what
``torch.nn.Transformer(norm_first=False, activation="relu")`` without its final norms computes
(``torch_reference``; ``tests/labs/test_original.py`` checks, layer by layer and whole).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from ..attention import sinusoidal_positions
from ..model import CausalSelfAttention, GPTConfig
from .seq2seq import CrossAttention, Seq2Seq, Seq2SeqConfig, torch_transformer_from

__all__ = [
    "NORMS",
    "PositionalEncoding",
    "ScaledEmbedding",
    "ReLUMLP",
    "PostNormEncoderBlock",
    "PostNormDecoderBlock",
    "OriginalEncoder",
    "OriginalSeq2Seq",
    "torch_reference",
]

NORMS = ("post", "pre")


class PositionalEncoding(nn.Module):
    """x + PE[:T], then dropout: the paper's fixed sinusoidal positions as a module.

    PE[p, 2i] = sin(p / 10000^(2i/d)), PE[p, 2i+1] = cos(p / 10000^(2i/d))
    (``course_lib.attention.sinusoidal_positions``), held in the buffer ``pe`` (max_len, d):
    in ``state_dict()`` and moved by ``.to()``, absent from ``parameters()``.
    ``forward(x)``: x (B, T, d) with T <= max_len -> (B, T, d).
    """

    def __init__(self, d_model: int, max_len: int = 512, dropout: float = 0.1):
        super().__init__()
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"PositionalEncoding: dropout must lie in [0, 1); got {dropout}.")
        self.drop = nn.Dropout(dropout)
        self.register_buffer("pe", sinusoidal_positions(max_len, d_model))  # (max_len, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        T = x.shape[1]
        if T > self.pe.shape[0]:
            raise ValueError(
                f"PositionalEncoding: {T} positions, but the table holds {self.pe.shape[0]}; "
                "build it with a larger max_len (sinusoids extend to any length)."
            )
        return self.drop(x + self.pe[:T])  # (B, T, d): the table broadcasts over the batch


class ScaledEmbedding(nn.Embedding):
    """An embedding whose output is multiplied by √d (the paper's section 3.4): ids (...) ->
    (..., d). Drawn from N(0, 1/d), so the scaled vectors have entries of size about 1."""

    def __init__(self, num_embeddings: int, d_model: int):
        super().__init__(num_embeddings, d_model)
        nn.init.normal_(self.weight, std=d_model**-0.5)
        self.scale = math.sqrt(d_model)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return super().forward(ids) * self.scale  # (..., d)


class ReLUMLP(nn.Module):
    """The paper's position-wise feed-forward network: max(0, x W1 + b1) W2 + b2,
    d -> 4d -> d (``fc``, ``proj``, as ``course_lib.model.MLP``), dropout on its output."""

    def __init__(self, d_model: int, dropout: float = 0.0):
        super().__init__()
        self.fc = nn.Linear(d_model, 4 * d_model)
        self.proj = nn.Linear(4 * d_model, d_model)
        self.drop = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.drop(self.proj(F.relu(self.fc(x))))  # (B, T, d)


def _residual(x: torch.Tensor, ln: nn.LayerNorm, sublayer, post: bool) -> torch.Tensor:
    """Post-norm: LN(x + f(x)); pre-norm: x + f(LN(x)). (B, T, d) -> (B, T, d)."""
    return ln(x + sublayer(x)) if post else x + sublayer(ln(x))


class PostNormEncoderBlock(nn.Module):
    """x <- LN1(x + SelfAttn(x)); x <- LN2(x + FFN(x)) (``norm="pre"``: x + f(LN(x)) instead).
    ``forward(x, mask=None)``: (B, S, d) -> (B, S, d); mask (bool, True = may attend) hides
    padding."""

    def __init__(self, cfg: GPTConfig, norm: str = "post"):
        super().__init__()
        self.post = norm == "post"
        self.ln1 = nn.LayerNorm(cfg.d_model)
        self.attn = CausalSelfAttention(cfg)  # cfg.causal is False: every position sees all
        self.ln2 = nn.LayerNorm(cfg.d_model)
        self.mlp = ReLUMLP(cfg.d_model, cfg.dropout)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        x = _residual(x, self.ln1, lambda h: self.attn(h, mask), self.post)  # (B, S, d)
        return _residual(x, self.ln2, self.mlp, self.post)  # (B, S, d)


class PostNormDecoderBlock(nn.Module):
    """x <- LN1(x + CausalSelfAttn(x)); x <- LN2(x + Cross(x, memory)); x <- LN3(x + FFN(x))
    (``norm="pre"``: x + f(LN(x)) instead). ``forward(x, memory, keep=None)``:
    (B, T, d), (B, S, d), keep (B, S) True = a real source token -> (B, T, d)."""

    def __init__(self, cfg: GPTConfig, norm: str = "post"):
        super().__init__()
        self.post = norm == "post"
        self.ln1 = nn.LayerNorm(cfg.d_model)
        self.attn = CausalSelfAttention(cfg)
        self.ln2 = nn.LayerNorm(cfg.d_model)
        self.cross = CrossAttention(cfg)
        self.ln3 = nn.LayerNorm(cfg.d_model)
        self.mlp = ReLUMLP(cfg.d_model, cfg.dropout)

    def forward(
        self, x: torch.Tensor, memory: torch.Tensor, keep: torch.Tensor | None = None
    ) -> torch.Tensor:
        x = _residual(x, self.ln1, self.attn, self.post)  # (B, T, d)
        x = _residual(x, self.ln2, lambda h: self.cross(h, memory, keep), self.post)
        return _residual(x, self.ln3, self.mlp, self.post)  # (B, T, d)


class OriginalEncoder(nn.Module):
    """``n_layer`` ``PostNormEncoderBlock``s; a final LayerNorm only with ``norm="pre"`` (a
    post-norm stack ends normalised). ``forward(x, mask=None)``: (B, S, d) -> (B, S, d)."""

    def __init__(self, cfg: GPTConfig, norm: str = "post"):
        super().__init__()
        self.blocks = nn.ModuleList(PostNormEncoderBlock(cfg, norm) for _ in range(cfg.n_layer))
        self.ln_f = nn.Identity() if norm == "post" else nn.LayerNorm(cfg.d_model)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        for block in self.blocks:
            x = block(x, mask)  # (B, S, d)
        return self.ln_f(x)


class OriginalSeq2Seq(Seq2Seq):
    """The paper's encoder–decoder on Chapter 14's task (the module docstring lists what differs
    from ``Seq2Seq``).

    source ids (B, S) -> embedding × √d + sinusoids, dropout -> post-norm encoder -> memory
    target ids (B, T) -> embedding × √d + sinusoids, dropout -> post-norm decoder blocks
    (causal; cross-attention to the memory) -> head tied to the target embedding -> (B, T, V).

    ``cfg.dropout`` is the paper's P_drop (positions, every sublayer's output, attention
    weights). ``norm``: "post" (the paper) or "pre". It inherits ``Seq2Seq``'s ``encode``,
    ``decode``, ``logits`` and ``forward``: the parts below carry the names those read
    (``src_emb``, ``src_pos``, ``encoder``, ``tgt_emb``, ``tgt_pos``, ``blocks``, ``ln_f``,
    ``drop``, ``head``).
    """

    def __init__(self, cfg: Seq2SeqConfig, norm: str = "post"):
        if norm not in NORMS:
            raise ValueError(f"OriginalSeq2Seq: norm must be one of {NORMS}; got {norm!r}.")
        nn.Module.__init__(self)  # Seq2Seq's parts are not built: these replace them
        self.cfg, self.norm = cfg, norm
        enc_cfg = cfg.block_config(False, cfg.max_src_len)
        dec_cfg = cfg.block_config(True, cfg.max_tgt_len)
        self.src_emb = ScaledEmbedding(cfg.src_vocab, cfg.d_model)
        self.src_pos = PositionalEncoding(cfg.d_model, cfg.max_src_len, cfg.dropout)
        self.encoder = OriginalEncoder(enc_cfg, norm)
        self.tgt_emb = ScaledEmbedding(cfg.tgt_vocab, cfg.d_model)
        self.tgt_pos = PositionalEncoding(cfg.d_model, cfg.max_tgt_len, cfg.dropout)
        self.blocks = nn.ModuleList(
            PostNormDecoderBlock(dec_cfg, norm) for _ in range(cfg.n_dec_layer)
        )
        self.ln_f = nn.Identity() if norm == "post" else nn.LayerNorm(cfg.d_model)
        self.drop = nn.Identity()  # the dropout on embeddings + positions is PositionalEncoding's
        self.head = nn.Linear(cfg.d_model, cfg.tgt_vocab, bias=False)
        for name, p in self.named_parameters():
            if p.dim() >= 2 and "emb" not in name and not name.startswith("head"):
                nn.init.xavier_uniform_(p)  # as torch.nn.Transformer's _reset_parameters
            elif name.endswith("bias") and "ln" not in name:
                nn.init.zeros_(p)
        self.head.weight = self.tgt_emb.weight  # tied, as in the paper (section 3.4)


@torch.no_grad()
def torch_reference(model: OriginalSeq2Seq) -> nn.Transformer:
    """``torch.nn.Transformer(norm_first=..., activation="relu", batch_first=True)`` holding
    ``model``'s body weights, in eval mode; for ``norm="post"`` without the encoder's and the
    decoder's final norms (``nn.Transformer`` always adds them; the paper has none). Feed it
    ``model.src_pos(model.src_emb(src))`` and ``model.tgt_pos(model.tgt_emb(tgt_in))`` with
    the masks of ``course_lib.seq2seq.torch_transformer_from``."""
    return torch_transformer_from(model, norm_first=model.norm == "pre", activation="relu")
