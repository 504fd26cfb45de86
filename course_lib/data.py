"""Text to training batches: a character tokenizer, a deterministic split, a seeded batch sampler.

A character-level tokenizer keeps the whole pipeline visible: the vocabulary is the set of
characters in the corpus (about 80 for Shakespeare), every token is one character, and
decoding is exact. Any other tokenizer with ``encode(str)`` and ``decode(ids)`` (the
byte-level BPE of ``course_lib.bpe``) plugs into the same pipeline: ``shakespeare_splits``
takes one. ``BatchSampler`` draws random windows of ``block_size + 1`` tokens; the
first ``block_size`` are the input, the last ``block_size`` (shifted by one) the targets.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Iterable

import numpy as np
import torch

__all__ = [
    "CharTokenizer",
    "split_text",
    "BatchSampler",
    "synthetic_corpus",
    "shakespeare_splits",
    "encode_splits",
    "bpe_vocab_size",
    "corpus_tokens",
]


class CharTokenizer:
    """Maps each character of a fixed vocabulary to an id 0..V-1 (ids in sorted character order).

    ``CharTokenizer.from_text(text)`` builds the vocabulary from a corpus; ``encode`` raises
    ``ValueError`` naming any character outside it (a model has no embedding for it).
    """

    def __init__(self, chars: Iterable[str]):
        chars = sorted(set(chars))
        if not chars or any(len(c) != 1 for c in chars):
            raise ValueError("CharTokenizer: pass a non-empty collection of single characters.")
        self.chars = chars
        self.stoi = {c: i for i, c in enumerate(chars)}
        self._codes = np.array([ord(c) for c in chars], dtype=np.uint32)  # sorted, as chars are

    @classmethod
    def from_text(cls, text: str) -> "CharTokenizer":
        return cls(set(text))

    @property
    def vocab_size(self) -> int:
        return len(self.chars)

    def encode(self, text: str) -> torch.Tensor:
        """str of length T -> (T,) int64 ids."""
        codes = np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32)  # (T,) code points
        idx = np.searchsorted(self._codes, codes)  # vectorised lookup: megabytes in milliseconds
        idx_clipped = np.minimum(idx, len(self._codes) - 1)
        known = self._codes[idx_clipped] == codes
        if known.all():
            return torch.from_numpy(idx_clipped.astype(np.int64))
        else:
            unknown = sorted({c for c in text if c not in self.stoi})
            raise ValueError(
                f"CharTokenizer.encode: characters {unknown!r} are not in the vocabulary of "
                f"{self.vocab_size} characters. Remove or replace them, or build the tokenizer "
                "from a text that contains them."
            ) from None

    def decode(self, ids) -> str:
        """(T,) ids (tensor or list) -> str."""
        ids = ids.tolist() if hasattr(ids, "tolist") else list(ids)
        if ids and (min(ids) < 0 or max(ids) >= self.vocab_size):
            raise ValueError(
                f"CharTokenizer.decode: ids must lie in [0, {self.vocab_size}); got "
                f"{min(ids)}..{max(ids)}."
            )
        return "".join(self.chars[i] for i in ids)

    def state_dict(self) -> dict:
        return {"chars": "".join(self.chars)}

    @classmethod
    def from_state_dict(cls, state: dict) -> "CharTokenizer":
        return cls(state["chars"])


def tokenizer_from_state(state: dict):
    """The tokenizer a checkpoint saved: a ``BPETokenizer`` (its state has merges) or a
    ``CharTokenizer`` (its state has the characters)."""
    if "merges" in state:
        from .bpe import BPETokenizer

        return BPETokenizer.from_state_dict(state)
    if "chars" in state:
        return CharTokenizer.from_state_dict(state)
    raise ValueError(
        f"tokenizer_from_state: not a saved tokenizer (keys {sorted(state)}); expected "
        "the state_dict() of a CharTokenizer ('chars') or a BPETokenizer ('merges')."
    )


def split_text(text: str, val_fraction: float = 0.1) -> tuple[str, str]:
    """Deterministic split by position: the first (1 - val_fraction) of the text trains, the rest
    validates. For the Shakespeare corpus (plays in alphabetical order) the validation part is
    the last plays, so validation measures generalisation to unseen text, not memory."""
    if not 0.0 < val_fraction < 1.0:
        raise ValueError(
            f"split_text: val_fraction must lie strictly between 0 and 1; got {val_fraction}."
        )
    n = int(len(text) * (1.0 - val_fraction))
    return text[:n], text[n:]


class BatchSampler:
    """Random training windows from one long token sequence, reproducible from a seed.

    ``sample(batch_size)`` returns x, y, both (batch_size, block_size) int64, with
    ``y[b, t] = data[start_b + t + 1]``: the target of every position is the next token.
    The sampler owns its ``torch.Generator``, so the batches do not depend on (or disturb)
    any other random numbers, and its state can be saved for an exact resume.
    """

    def __init__(self, data: torch.Tensor, block_size: int, seed: int = 0):
        if data.dim() != 1:
            raise ValueError(
                f"BatchSampler: data must be a 1-D tensor of token ids; got {tuple(data.shape)}."
            )
        if len(data) < block_size + 2:
            raise ValueError(
                f"BatchSampler: data has {len(data)} tokens, too few for windows of block_size + 1 "
                "= "
                f"{block_size + 1}; use a smaller block_size or more text."
            )
        self.data, self.block_size = data, block_size
        self.generator = torch.Generator().manual_seed(seed)
        self._offsets = torch.arange(block_size + 1)  # (block_size + 1,)

    def sample(self, batch_size: int) -> tuple[torch.Tensor, torch.Tensor]:
        # (B,)
        starts = torch.randint(
            len(self.data) - self.block_size - 1, (batch_size,), generator=self.generator
        )
        windows = self.data[starts[:, None] + self._offsets]  # (B, block_size + 1)
        return windows[:, :-1], windows[:, 1:]  # x, y: (B, block_size)

    def state_dict(self) -> dict:
        return {"generator": self.generator.get_state()}

    def load_state_dict(self, state: dict) -> None:
        self.generator.set_state(state["generator"])


def synthetic_corpus(n_chars: int = 20_000, seed: int = 0) -> str:
    """A tiny, learnable toy corpus for fast tests: short rhyming lines built from a fixed
    word list by a seeded generator (pure Python, so identical everywhere)."""
    rng = random.Random(seed)
    subjects = ["the king", "a fool", "my lord", "the queen", "sweet love", "the moon"]
    verbs = ["doth weep", "shall sing", "will stay", "hath fled", "must sleep", "can see"]
    ends = ["tonight", "in light", "with might", "from sight"]
    lines, size = [], 0
    while size < n_chars:
        line = f"{rng.choice(subjects)} {rng.choice(verbs)} {rng.choice(ends)}.\n"
        lines.append(line)
        size += len(line)
    return "".join(lines)[:n_chars]


@dataclass
class Splits:
    """The tokenizer and the encoded train/validation token tensors (1-D int64)."""

    tokenizer: CharTokenizer
    train: torch.Tensor
    val: torch.Tensor


def encode_splits(text: str, tokenizer, val_fraction: float = 0.1) -> Splits:
    """Split ``text`` by position (``split_text``) and encode both parts with ``tokenizer``
    (a ``CharTokenizer``, a ``course_lib.bpe.BPETokenizer``, or anything whose ``encode``
    returns a tensor or a list of ids). Returns 1-D int64 tensors."""
    if not hasattr(tokenizer, "encode"):
        raise ValueError(
            "encode_splits: tokenizer must have an encode(str) method; got "
            f"{type(tokenizer).__name__}."
        )
    train, val = split_text(text, val_fraction)
    as_tensor = lambda ids: torch.as_tensor(ids, dtype=torch.int64)  # noqa: E731
    return Splits(tokenizer, as_tensor(tokenizer.encode(train)), as_tensor(tokenizer.encode(val)))


def shakespeare_splits(val_fraction: float = 0.1, tokenizer=None) -> Splits:
    """The course corpus, split 90/10 by position and tokenized by characters (the default)
    or by ``tokenizer`` (e.g. a ``BPETokenizer`` trained on the training part)."""
    from .corpus import load_corpus

    text = load_corpus()
    tok = CharTokenizer.from_text(text) if tokenizer is None else tokenizer
    return encode_splits(text, tok, val_fraction)


def bpe_vocab_size(name: str) -> int | None:
    """1024 for the tokenizer setting 'bpe-1024'; None if ``name`` is not of that form."""
    head, _, size = name.partition("-")
    if head != "bpe" or not size.isdigit() or int(size) < 257:  # 256 bytes + the end-of-text token
        return None
    return int(size)


def corpus_tokens(cfg):
    """The tokenizer and the train/validation tokens (1-D int64) a ``TrainConfig`` asks for
    (its ``corpus``, ``tokenizer`` and ``val_fraction``). A BPE tokenizer (``tokenizer="bpe-N"``)
    learns its merges from the training split only."""
    if cfg.corpus == "synthetic":
        text = synthetic_corpus(20_000, seed=0)
        if cfg.tokenizer == "char":
            tok = CharTokenizer.from_text(text)
            train, val = split_text(text, cfg.val_fraction)
            return tok, tok.encode(train), tok.encode(val)
    else:
        if cfg.tokenizer == "char":
            s = shakespeare_splits(cfg.val_fraction)
            return s.tokenizer, s.train, s.val
        from .corpus import load_corpus

        text = load_corpus()
    from .bpe import BPETokenizer

    tok = BPETokenizer.train(split_text(text, cfg.val_fraction)[0], bpe_vocab_size(cfg.tokenizer))
    s = encode_splits(text, tok, cfg.val_fraction)
    return s.tokenizer, s.train, s.val
