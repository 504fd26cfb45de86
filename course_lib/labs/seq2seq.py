"""An encoder–decoder transformer that translates English number words into French ones.

The task (issue 27): ``num2words`` writes every number in both languages, so the pairs ship
offline and have real structure: "ninety-seven" -> "quatre-vingt-dix-sept" needs reordering
(French counts 4 x 20 + 17), "two hundred" -> "deux cents" but "two hundred and one" -> "deux
cent un" needs agreement, and "twenty-one thousand" -> "vingt et un mille" inserts a word.

Tokens are **words**, with the hyphen and the comma as tokens of their own ("quatre - vingt -
dix - sept"): the phenomena live at the level of words (which word, in which order, with or
without its plural s), the vocabularies stay tiny (about 30 words a side) and a sentence is
about a fifth as many tokens as characters (at most 14 English and 17 French tokens), so
attention and training are several times cheaper per pair and the cross-attention map reads
word against word.

The model reuses the course's pieces: the encoder is ``course_lib.encoder.Encoder`` (pre-norm
``course_lib.model.Block`` with bidirectional attention and a source padding mask); each
decoder block is ``CausalSelfAttention`` (the causal target mask), then ``CrossAttention``
(queries from the target, keys and values from the encoder's output, padding hidden), then the
``MLP``, each pre-norm with a residual. With the same weights it computes what
``torch.nn.Transformer(norm_first=True, activation="gelu")`` computes
(``torch_transformer_from`` copies the weights; ``tests/labs/test_seq2seq.py`` checks).
Training, decoding and metrics are in ``course_lib.translate``.
"""

from __future__ import annotations

import math
import warnings
from collections import Counter
from dataclasses import asdict, dataclass, field

import torch
import torch.nn.functional as F
from torch import nn

from ..attention import (
    LearnedPositionalEmbedding,
    keep_attention_weights,
    merge_heads,
    scaled_dot_product_attention,
    split_heads,
)
from ..encoder import Encoder
from ..model import MLP, CausalSelfAttention, GPTConfig, gpt_init_

__all__ = [
    "PAD",
    "BOS",
    "EOS",
    "Vocab",
    "words",
    "english",
    "french",
    "TranslationData",
    "number_pairs",
    "pad_rows",
    "join_words",
    "Seq2SeqConfig",
    "CrossAttention",
    "DecoderBlock",
    "Seq2Seq",
    "torch_transformer_from",
    "cross_attention_maps",
    "aligned_words",
]

PAD, BOS, EOS = 0, 1, 2  # the same three special ids in both vocabularies
SPECIALS = ("<pad>", "<bos>", "<eos>")


# --------------------------------------------------------------------------- tokens
def words(text: str) -> list[str]:
    """Split number words into tokens: spaces separate words, and the hyphen and the comma are
    tokens of their own ("ninety-seven" -> ["ninety", "-", "seven"])."""
    return text.replace("-", " - ").replace(",", " , ").split()


def join_words(tokens: list[str]) -> str:
    """The inverse of ``words``: "quatre - vingt" -> "quatre-vingt", "thousand ," -> "thousand,"."""
    return " ".join(tokens).replace(" - ", "-").replace(" ,", ",")


class Vocab:
    """A word-level vocabulary: ids 0, 1, 2 are <pad>, <bos>, <eos>, then the words in sorted
    order (so the same texts always give the same ids).

    ``encode(text)`` -> list of ids (no specials); ``decode(ids)`` -> text (specials dropped,
    decoding stops at <eos>); ``tokens(ids)`` -> the words themselves.
    """

    def __init__(self, texts):
        vocab = sorted({w for t in texts for w in words(t)})
        self.itos = list(SPECIALS) + vocab
        self.stoi = {w: i for i, w in enumerate(self.itos)}

    def __len__(self) -> int:
        return len(self.itos)

    def encode(self, text: str) -> list[int]:
        try:
            return [self.stoi[w] for w in words(text)]
        except KeyError as e:
            raise ValueError(
                f"Vocab.encode: the word {e.args[0]!r} of {text!r} is not in the vocabulary; "
                "build the Vocab from texts that contain it."
            ) from None

    def tokens(self, ids) -> list[str]:
        out = []
        for i in (int(i) for i in ids):
            if i == EOS:
                break
            if i not in (PAD, BOS):
                out.append(self.itos[i])
        return out

    def decode(self, ids) -> str:
        return join_words(self.tokens(ids))


# --------------------------------------------------------------------------- data
def english(n: int) -> str:
    """n in English words (num2words, British style: "one hundred and one")."""
    from num2words import num2words  # imported here: only the data builder needs it

    return num2words(int(n), lang="en")


def french(n: int) -> str:
    """n in French words (num2words: "quatre-vingt-dix-sept", "deux cents", "deux cent un")."""
    from num2words import num2words

    return num2words(int(n), lang="fr")


def pad_rows(rows: list[list[int]], width: int) -> torch.Tensor:
    """Lists of ids -> (N, width) int64, <pad> after each row's end."""
    out = torch.full((len(rows), width), PAD, dtype=torch.long)
    for i, r in enumerate(rows):
        out[i, : len(r)] = torch.tensor(r, dtype=torch.long)
    return out


@dataclass
class TranslationData:
    """The number pairs, split into train / val / test (disjoint sets of numbers).

    ``numbers[split]``: the numbers; ``src[split]``, ``tgt[split]``: their English and French
    texts; ``src_vocab``, ``tgt_vocab``: the two vocabularies. ``tensors(split)`` gives
    src (N, S) (English ids, <pad> after the end) and tgt (N, T + 1) (<bos> French ids <eos>,
    <pad> after the end); the decoder reads tgt[:, :-1] and predicts tgt[:, 1:] (teacher forcing).
    """

    numbers: dict[str, list[int]]
    src: dict[str, list[str]]
    tgt: dict[str, list[str]]
    src_vocab: Vocab
    tgt_vocab: Vocab
    max_src_len: int = 0
    max_tgt_len: int = 0  # including <bos> and <eos>
    _cache: dict = field(default_factory=dict, repr=False)

    def tensors(self, split: str) -> tuple[torch.Tensor, torch.Tensor]:
        if split not in self.numbers:
            raise ValueError(
                f"TranslationData: unknown split {split!r}; use one of {sorted(self.numbers)}."
            )
        if split not in self._cache:
            src = pad_rows(
                [self.src_vocab.encode(t) for t in self.src[split]], self.max_src_len
            )  # (N, S)
            tgt = pad_rows(
                [[BOS, *self.tgt_vocab.encode(t), EOS] for t in self.tgt[split]], self.max_tgt_len
            )  # (N, T + 1)
            self._cache[split] = (src, tgt)
        return self._cache[split]


def number_pairs(
    n_train: int = 10_000,
    n_val: int = 500,
    n_test: int = 1_000,
    max_number: int = 1_000_000,
    seed: int = 0,
) -> TranslationData:
    """English -> French number words for numbers drawn without replacement from
    0 .. max_number - 1 by a seeded permutation: the first ``n_test`` are the held-out test set,
    the next ``n_val`` the validation set, the next ``n_train`` the training set. The three sets
    of numbers are disjoint, and the same seed gives the same split on every machine.

    The vocabularies hold the words of all three splits (the words of the language: a word seen
    only in a test sentence keeps its untrained embedding; no test sentence is trained on).
    """
    if min(n_train, n_val, n_test) < 0 or n_train < 1:
        raise ValueError("number_pairs: need n_train >= 1 and n_val, n_test >= 0.")
    if n_train + n_val + n_test > max_number:
        raise ValueError(
            f"number_pairs: {n_train + n_val + n_test} numbers asked for, but only {max_number} "
            "exist below max_number; ask for fewer or raise max_number."
        )
    g = torch.Generator().manual_seed(seed)
    perm = torch.randperm(max_number, generator=g)
    cuts = {
        "test": (0, n_test),
        "val": (n_test, n_test + n_val),
        "train": (n_test + n_val, n_test + n_val + n_train),
    }
    numbers = {s: perm[a:b].tolist() for s, (a, b) in cuts.items()}
    src = {s: [english(n) for n in ns] for s, ns in numbers.items()}
    tgt = {s: [french(n) for n in ns] for s, ns in numbers.items()}
    every_src = [t for ts in src.values() for t in ts]
    every_tgt = [t for ts in tgt.values() for t in ts]
    return TranslationData(
        numbers,
        src,
        tgt,
        Vocab(every_src),
        Vocab(every_tgt),
        max_src_len=max(len(words(t)) for t in every_src),
        max_tgt_len=max(len(words(t)) for t in every_tgt) + 2,
    )


# --------------------------------------------------------------------------- model
@dataclass
class Seq2SeqConfig:
    """Shape of a ``Seq2Seq``: vocabulary sizes, the longest source (tokens) and target
    (tokens with <bos> and <eos>) the position tables hold, and the body."""

    src_vocab: int
    tgt_vocab: int
    max_src_len: int = 32
    max_tgt_len: int = 32
    n_enc_layer: int = 2
    n_dec_layer: int = 2
    n_head: int = 4
    d_model: int = 64
    dropout: float = 0.0
    attention: str = "fused"

    def block_config(self, causal: bool, block_size: int) -> GPTConfig:
        """The ``GPTConfig`` of the course's blocks (it also validates the numbers)."""
        return GPTConfig(
            vocab_size=1,
            block_size=block_size,
            n_layer=self.n_enc_layer if not causal else self.n_dec_layer,
            n_head=self.n_head,
            d_model=self.d_model,
            dropout=self.dropout,
            attention=self.attention,
            causal=causal,
        )

    def to_dict(self) -> dict:
        return asdict(self)


class CrossAttention(nn.Module):
    """Multi-head attention of the decoder's positions over the encoder's output.

    ``forward(x, memory, keep=None)``: x (B, T, d) queries, memory (B, S, d) keys and values,
    keep (B, S) bool, True = a real source token (False: padding, which gets zero weight).
    Returns (B, T, d). While ``keep_weights`` is True the weights (B, n_head, T, S) of the last
    call are kept in ``attn_weights`` (the course's mechanism, see ``course_lib.attention``).
    """

    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.n_head, self.kind = cfg.n_head, cfg.attention
        self.q = nn.Linear(cfg.d_model, cfg.d_model)
        self.kv = nn.Linear(
            cfg.d_model, 2 * cfg.d_model
        )  # keys and values from one matmul of the memory
        self.proj = nn.Linear(cfg.d_model, cfg.d_model)
        self.keep_weights = False
        self.attn_weights: torch.Tensor | None = None

    def forward(
        self, x: torch.Tensor, memory: torch.Tensor, keep: torch.Tensor | None = None
    ) -> torch.Tensor:
        q = split_heads(self.q(x), self.n_head)  # (B, n_head, T, head_dim)
        k, v = self.kv(memory).chunk(2, dim=-1)  # 2 x (B, S, d)
        k, v = split_heads(k, self.n_head), split_heads(v, self.n_head)  # (B, n_head, S, head_dim)
        mask = (
            None if keep is None else keep[:, None, None, :]
        )  # (B, 1, 1, S): the same for every query
        if self.kind == "course_lib" or self.keep_weights:
            out, weights = scaled_dot_product_attention(q, k, v, mask)  # (B, n_head, T, head_dim)
            self.attn_weights = weights.detach() if self.keep_weights else None
        else:
            out = F.scaled_dot_product_attention(
                q, k, v, attn_mask=mask
            )  # (B, n_head, T, head_dim)
        return self.proj(merge_heads(out))  # (B, T, d)


class DecoderBlock(nn.Module):
    """Pre-norm decoder block: x + self_attn(LN(x)) (causal), x + cross(LN(x), memory),
    x + MLP(LN(x)). ``forward(x, memory, keep=None)``: (B, T, d) -> (B, T, d)."""

    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.ln1 = nn.LayerNorm(cfg.d_model)
        self.attn = CausalSelfAttention(cfg)  # position t sees target positions <= t only
        self.ln2 = nn.LayerNorm(cfg.d_model)
        self.cross = CrossAttention(cfg)  # ... and every real source position
        self.ln3 = nn.LayerNorm(cfg.d_model)
        self.mlp = MLP(cfg)

    def forward(
        self, x: torch.Tensor, memory: torch.Tensor, keep: torch.Tensor | None = None
    ) -> torch.Tensor:
        x = x + self.attn(self.ln1(x))  # (B, T, d)
        x = x + self.cross(
            self.ln2(x), memory, keep
        )  # (B, T, d): where the source enters the decoder
        return x + self.mlp(self.ln3(x))  # (B, T, d)


class Seq2Seq(nn.Module):
    """Encoder–decoder transformer (Vaswani et al. 2017, with pre-norm blocks).

    source ids (B, S) -> embeddings + positions -> ``Encoder`` (padding hidden) -> memory (B, S, d)
    target ids (B, T) -> embeddings + positions -> decoder blocks (causal; cross-attention to
    the memory) -> final LayerNorm -> head tied to the target embedding -> logits (B, T, V_tgt).

    ``forward(src, tgt_in, targets=None)`` -> (logits, mean cross-entropy over non-<pad>
    targets or None). ``encode(src)`` -> (memory (B, S, d), keep (B, S)); ``decode(tgt_in,
    memory, keep)`` -> the final hidden states (B, T, d); ``logits(h)`` -> (B, T, V_tgt).
    """

    def __init__(self, cfg: Seq2SeqConfig):
        super().__init__()
        self.cfg = cfg
        enc_cfg, dec_cfg = (
            cfg.block_config(False, cfg.max_src_len),
            cfg.block_config(True, cfg.max_tgt_len),
        )
        self.src_emb = nn.Embedding(cfg.src_vocab, cfg.d_model)
        self.src_pos = LearnedPositionalEmbedding(cfg.max_src_len, cfg.d_model)
        self.encoder = Encoder(enc_cfg)  # its own final LayerNorm normalises the memory
        self.tgt_emb = nn.Embedding(cfg.tgt_vocab, cfg.d_model)
        self.tgt_pos = LearnedPositionalEmbedding(cfg.max_tgt_len, cfg.d_model)
        self.blocks = nn.ModuleList(DecoderBlock(dec_cfg) for _ in range(cfg.n_dec_layer))
        self.ln_f = nn.LayerNorm(cfg.d_model)
        self.drop = nn.Dropout(cfg.dropout)
        self.head = nn.Linear(cfg.d_model, cfg.tgt_vocab, bias=False)
        self.apply(gpt_init_)
        self.head.weight = self.tgt_emb.weight  # tied, as in MiniGPT
        depth = cfg.n_enc_layer + cfg.n_dec_layer
        for name, p in self.named_parameters():
            if name.endswith("proj.weight"):  # every projection that writes into a residual stream
                nn.init.normal_(p, std=0.02 / math.sqrt(2 * depth))

    def num_params(self) -> int:
        return sum(p.numel() for p in self.parameters())

    def encode(self, src: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """src (B, S) ids -> memory (B, S, d) and keep (B, S) (True = real token, not <pad>)."""
        if src.dim() != 2 or src.shape[1] > self.cfg.max_src_len:
            raise ValueError(
                f"Seq2Seq.encode: src must be (B, S) ids with S <= {self.cfg.max_src_len}; "
                f"got {tuple(src.shape)}."
            )
        keep = src != PAD  # (B, S)
        x = self.drop(self.src_pos(self.src_emb(src)))  # (B, S, d)
        return self.encoder(
            x, keep[:, None, None, :]
        ), keep  # (B, S, d): pads are never attended to

    def decode(
        self, tgt_in: torch.Tensor, memory: torch.Tensor, keep: torch.Tensor | None = None
    ) -> torch.Tensor:
        """tgt_in (B, T) ids starting with <bos> -> final hidden states (B, T, d)."""
        if tgt_in.dim() != 2 or tgt_in.shape[1] > self.cfg.max_tgt_len:
            raise ValueError(
                f"Seq2Seq.decode: tgt_in must be (B, T) ids with T <= {self.cfg.max_tgt_len}; "
                f"got {tuple(tgt_in.shape)}."
            )
        x = self.drop(self.tgt_pos(self.tgt_emb(tgt_in)))  # (B, T, d)
        for block in self.blocks:
            x = block(x, memory, keep)  # (B, T, d)
        return self.ln_f(x)

    def logits(self, h: torch.Tensor) -> torch.Tensor:
        return self.head(h)  # (B, T, V_tgt)

    def forward(self, src: torch.Tensor, tgt_in: torch.Tensor, targets: torch.Tensor | None = None):
        memory, keep = self.encode(src)  # (B, S, d), (B, S)
        logits = self.logits(self.decode(tgt_in, memory, keep))  # (B, T, V_tgt)
        if targets is None:
            return logits, None
        # teacher forcing: every position predicts the next reference word at once; pads don't count
        return logits, F.cross_entropy(
            logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), ignore_index=PAD
        )


@torch.no_grad()
def torch_transformer_from(
    model: Seq2Seq, norm_first: bool = True, activation: str = "gelu"
) -> nn.Transformer:
    """``torch.nn.Transformer(norm_first=True, activation="gelu", batch_first=True)`` holding
    ``model``'s body weights (no embeddings, no head; both have the final LayerNorms), in eval mode.
    (``norm_first`` and ``activation`` build the other layouts, for ``course_lib.original``'s
    post-norm ReLU model; a model whose final norm is ``nn.Identity`` gets none.)

    Feed it ``model.src_pos(model.src_emb(src))`` and ``model.tgt_pos(model.tgt_emb(tgt_in))``
    with ``tgt_mask`` causal and ``src_key_padding_mask = memory_key_padding_mask = src == PAD``
    (PyTorch's masks say True = hidden; the course's say True = may attend); its output equals
    ``model.decode(tgt_in, *model.encode(src))``.
    """
    cfg = model.cfg
    with (
        warnings.catch_warnings()
    ):  # "enable_nested_tensor is True, but ... norm_first was True": expected
        warnings.simplefilter("ignore", UserWarning)
        tr = nn.Transformer(
            cfg.d_model,
            cfg.n_head,
            cfg.n_enc_layer,
            cfg.n_dec_layer,
            dim_feedforward=4 * cfg.d_model,
            dropout=0.0,
            activation=activation,
            batch_first=True,
            norm_first=norm_first,
        )

    tr.encoder.use_nested_tensor = False  # post-norm's eval fast path would warn about it

    def copy(dst: nn.Module, src: nn.Module) -> None:
        dst.weight.copy_(src.weight)
        dst.bias.copy_(src.bias)

    def copy_mlp_and_self(layer, block) -> None:
        layer.self_attn.in_proj_weight.copy_(
            block.attn.qkv.weight
        )  # rows: W_Q, W_K, W_V, as PyTorch packs them
        layer.self_attn.in_proj_bias.copy_(block.attn.qkv.bias)
        copy(layer.self_attn.out_proj, block.attn.proj)
        copy(layer.linear1, block.mlp.fc)
        copy(layer.linear2, block.mlp.proj)

    for layer, block in zip(tr.encoder.layers, model.encoder.blocks):
        copy_mlp_and_self(layer, block)
        copy(layer.norm1, block.ln1)
        copy(layer.norm2, block.ln2)
    if isinstance(model.encoder.ln_f, nn.Identity):
        tr.encoder.norm = None  # a post-norm stack ends normalised
    else:
        copy(tr.encoder.norm, model.encoder.ln_f)
    for layer, block in zip(tr.decoder.layers, model.blocks):
        copy_mlp_and_self(layer, block)
        layer.multihead_attn.in_proj_weight.copy_(
            torch.cat([block.cross.q.weight, block.cross.kv.weight])
        )
        layer.multihead_attn.in_proj_bias.copy_(
            torch.cat([block.cross.q.bias, block.cross.kv.bias])
        )
        copy(layer.multihead_attn.out_proj, block.cross.proj)
        for ours, theirs in (
            (block.ln1, layer.norm1),
            (block.ln2, layer.norm2),
            (block.ln3, layer.norm3),
        ):
            copy(theirs, ours)
    if isinstance(model.ln_f, nn.Identity):
        tr.decoder.norm = None
    else:
        copy(tr.decoder.norm, model.ln_f)
    return tr.eval()


@torch.no_grad()
def cross_attention_maps(
    model: Seq2Seq, src: torch.Tensor, tgt_in: torch.Tensor
) -> list[torch.Tensor]:
    """The decoder's cross-attention weights for src (B, S) and tgt_in (B, T) (teacher-forced):
    n_dec_layer tensors (B, n_head, T, S); row t says which source words position t read while
    predicting target token t + 1 (rows sum to 1, padded source columns are 0)."""
    was_training = model.training
    model.eval()
    try:
        with keep_attention_weights(model):
            model(src, tgt_in)
    finally:
        model.train(was_training)
    return [block.cross.attn_weights for block in model.blocks]


def aligned_words(
    model: Seq2Seq, data: TranslationData, split: str = "test", n: int = 200, layer: int = -1
) -> dict[str, Counter]:
    """The alignment the cross-attention learned, word by word: for each French word of the
    first ``n`` pairs of ``split``, the English word that got the most attention (mean over
    heads, decoder layer ``layer``) at the position that predicted it. Returns
    {French word: Counter of English words}; e.g. a trained model's "sept" mostly reads "seven"."""
    src, tgt = (t[:n] for t in data.tensors(split))  # (n, S), (n, T + 1)
    w = cross_attention_maps(model, src, tgt[:, :-1])[layer].mean(1)  # (n, T, S): heads averaged
    top = w.argmax(-1)  # (n, T): the most-read source position of each target position
    out: dict[str, Counter] = {}
    for b, t in (tgt[:, 1:] != PAD).nonzero().tolist():  # row t predicts target token t + 1
        fr = data.tgt_vocab.itos[int(tgt[b, t + 1])]
        out.setdefault(fr, Counter())[data.src_vocab.itos[int(src[b, top[b, t]])]] += 1
    return out
