"""Byte-level byte-pair encoding (BPE), written from scratch, and how to compare tokenizers.

The pipeline GPT-2 uses {Radford et al. 2019; the BPE algorithm is Sennrich et al. 2016}:

1. **Pre-tokenize**: split the text into "words" with a regular expression (``GPT2_PATTERN``):
   letters with an optional leading space, digits, punctuation, whitespace. Merges never cross
   these boundaries, so "dog." and "dog!" share the token " dog".
2. **Bytes**: every word becomes its UTF-8 bytes, token ids 0..255. Any string has a UTF-8
   encoding, so no character is ever unknown (*byte fallback*).
3. **Learn merges** (``learn_merges``): repeatedly find the most frequent adjacent pair of
   tokens in the training words and replace it everywhere by a new token (id 256, 257, ...).
4. **Encode**: apply the learned merges to each word in the order they were learned;
   **decode**: concatenate the tokens' bytes and decode UTF-8.

Learning is incremental: the words are counted once (a few tens of thousands of distinct words
for a few million characters), the pair counts are kept in a dict with a lazy max-heap on top,
and a merge updates only the words that contain the merged pair. A recount per merge would
cost a pass over every word for every merge.

Ties between equally frequent pairs go to the pair that comes first in GPT-2's vocabulary
order (``tie_rank``), which is also what Hugging Face ``tokenizers`` does, so the two learn the
same merges (``tests/core/test_bpe.py`` checks it).

GPT-2's own files (``vocab.json``: token string -> id; ``merges.txt``: one merge per line, in
the order learned; tokens written through ``bytes_to_unicode``) load into this tokenizer with
``GPT2FormatTokenizer.from_files``: the merges are ours, only the numbering of the tokens is the
files' (``tests/labs/test_gpt2.py`` checks that it encodes as Hugging Face's ``GPT2TokenizerFast``).

Python's ``re`` has no ``\\p{L}`` (any letter) or ``\\p{N}`` (any number), which GPT-2's
pattern uses. ``unicode_class`` builds those classes from ``unicodedata`` (every code point of
categories L* or N*), so ``GPT2_PATTERN`` is the same pattern under ``re``. Two differences
remain: ``unicodedata`` has Python's Unicode version (letters added to Unicode later are not
letters here), and ``re``'s ``\\s`` (``str.isspace``) also counts the separators U+001C..U+001F
as whitespace. The short approximation ``[^\\W\\d_]`` for a letter also accepts numbers
such as "½" and "²" (categories No, Nl), which ``\\p{L}`` does not.
"""

from __future__ import annotations

import heapq
import math
import re
import unicodedata
from collections import Counter
from dataclasses import dataclass
from functools import lru_cache
from typing import Iterable, Sequence

__all__ = [
    "END_OF_TEXT",
    "GPT2_PATTERN_TEMPLATE",
    "unicode_class",
    "gpt2_pattern",
    "pretokenize",
    "bytes_to_unicode",
    "tie_rank",
    "pair_counts",
    "merge_pair",
    "learn_merges",
    "BPETokenizer",
    "GPT2FormatTokenizer",
    "train_library_bpe",
    "chars_per_token",
    "bits_per_character",
]

END_OF_TEXT = "<|endoftext|>"
#: GPT-2's pre-tokenization pattern, with ``{L}`` and ``{N}`` standing for \p{L} and \p{N}.
GPT2_PATTERN_TEMPLATE = r"""'s|'t|'re|'ve|'m|'ll|'d| ?{L}+| ?{N}+| ?[^\s{L}{N}]+|\s+(?!\S)|\s+"""


@lru_cache(maxsize=None)
def _category_ranges() -> dict[str, list[tuple[int, int]]]:
    """{major general category ("L", "N", ...): sorted (first, last) code point ranges}."""
    ranges: dict[str, list[tuple[int, int]]] = {}
    category = unicodedata.category
    prev_major, start = None, 0
    for cp in range(0x110001):
        major = category(chr(cp))[0] if cp < 0x110000 else None
        if major != prev_major:
            if prev_major is not None:
                ranges.setdefault(prev_major, []).append((start, cp - 1))
            prev_major, start = major, cp
    return ranges


@lru_cache(maxsize=None)
def unicode_class(category: str) -> str:
    """The body of a ``re`` character class (no brackets) matching every code point of the
    major Unicode general category ``category`` ("L": letters, "N": numbers), as ranges:
    what ``\\p{L}`` means in the ``regex`` package and in Rust or Oniguruma."""
    ranges = _category_ranges().get(category) if isinstance(category, str) else None
    if not ranges:
        raise ValueError(
            f"unicode_class: pass a major general category such as 'L' or 'N'; got {category!r}."
        )
    return "".join(
        re.escape(chr(a)) if a == b else f"{re.escape(chr(a))}-{re.escape(chr(b))}"
        for a, b in ranges
    )


@lru_cache(maxsize=None)
def gpt2_pattern() -> re.Pattern:
    """GPT-2's pre-tokenization regular expression, compiled for Python's ``re``."""
    letters, numbers = f"[{unicode_class('L')}]", f"[{unicode_class('N')}]"
    # inside the negated class the bracketed sets are spliced in without their brackets
    body = GPT2_PATTERN_TEMPLATE.replace(
        "[^\\s{L}{N}]", f"[^\\s{unicode_class('L')}{unicode_class('N')}]"
    )
    return re.compile(body.replace("{L}", letters).replace("{N}", numbers))


def pretokenize(text: str) -> list[str]:
    """Split ``text`` into GPT-2's pre-tokens; ``"".join(pretokenize(s)) == s`` always."""
    if not isinstance(text, str):
        raise ValueError(f"pretokenize: pass a str; got {type(text).__name__}.")
    return gpt2_pattern().findall(text)


@lru_cache(maxsize=None)
def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's map from each byte to a printable character (used to show and store tokens):
    printable Latin-1 bytes map to themselves, the others (space, newline, controls) to
    U+0100 onwards, so the space byte shows as "Ġ" and the newline as "Ċ"."""
    printable = [
        *range(ord("!"), ord("~") + 1),
        *range(ord("¡"), ord("¬") + 1),
        *range(ord("®"), ord("ÿ") + 1),
    ]
    table, extra = {}, 0
    for b in range(256):
        if b in printable:
            table[b] = chr(b)
        else:
            table[b] = chr(256 + extra)
            extra += 1
    return table


@lru_cache(maxsize=None)
def _byte_tie_rank() -> tuple[int, ...]:
    order = sorted(range(256), key=lambda b: bytes_to_unicode()[b])  # GPT-2's byte order
    rank = [0] * 256
    for r, b in enumerate(order):
        rank[b] = r
    return tuple(rank)


def tie_rank(token_id: int) -> int:
    """Order used to break ties between equally frequent pairs: bytes in GPT-2's vocabulary
    order (printable ones first), then merged tokens in the order they were made."""
    return _byte_tie_rank()[token_id] if token_id < 256 else token_id


def pair_counts(words: dict[tuple[int, ...], int] | Sequence[int]) -> Counter:
    """Counts of adjacent token pairs. ``words``: one id sequence, or {id tuple: frequency}
    (each word's pairs count ``frequency`` times). Overlapping pairs all count: (1, 1, 1)
    has the pair (1, 1) twice."""
    if not isinstance(words, dict):
        words = {tuple(words): 1}
    counts: Counter = Counter()
    for ids, freq in words.items():
        for pair in zip(ids, ids[1:]):
            counts[pair] += freq
    return counts


def merge_pair(ids: Sequence[int], pair: tuple[int, int], new_id: int) -> list[int]:
    """Replace every occurrence of ``pair`` in ``ids`` (scanning left to right, without
    overlaps: (1, 1, 1) with pair (1, 1) gives (new, 1)) by ``new_id``."""
    out, i, n = [], 0, len(ids)
    a, b = pair
    while i < n:
        if i + 1 < n and ids[i] == a and ids[i + 1] == b:
            out.append(new_id)
            i += 2
        else:
            out.append(ids[i])
            i += 1
    return out


@dataclass
class Merges:
    """What ``learn_merges`` returns: the merges in order, ``merges[k] = ((a, b), new_id)``,
    the bytes of every token id (``vocab[i]``), and the count of each merged pair when chosen."""

    merges: list[tuple[tuple[int, int], int]]
    vocab: list[bytes]
    counts: list[int]


def learn_merges(text: str | Iterable[str], n_tokens: int) -> Merges:
    """Learn byte-level BPE merges until the vocabulary has ``n_tokens`` distinct tokens
    (the 256 bytes included), or no pair is left.

    ``text``: a str, or an iterable of strs (documents) pre-tokenized separately.
    Each step merges the most frequent adjacent pair over all pre-tokenized words (ties: the
    pair first in ``tie_rank`` order). A merge whose bytes already form a token (a+bc after
    ab+c) reuses that token's id, as Hugging Face ``tokenizers`` does, so the vocabulary only
    grows by distinct byte strings.
    """
    if not isinstance(n_tokens, int) or n_tokens < 256:
        raise ValueError(
            "learn_merges: n_tokens counts the 256 byte tokens too; pass an int >= 256, got "
            f"{n_tokens!r}."
        )
    docs = [text] if isinstance(text, str) else list(text)
    if not all(isinstance(d, str) for d in docs):
        raise ValueError("learn_merges: pass a str or an iterable of str.")
    word_freq: Counter = Counter()
    for doc in docs:
        word_freq.update(pretokenize(doc))
    words = [list(w.encode("utf-8")) for w in word_freq]  # distinct words, as byte ids
    freqs = list(word_freq.values())

    counts: dict[tuple[int, int], int] = {}
    where: dict[tuple[int, int], set[int]] = {}  # pair -> indices of the words that (may) hold it
    for w, (ids, f) in enumerate(zip(words, freqs)):
        for pair in zip(ids, ids[1:]):
            counts[pair] = counts.get(pair, 0) + f
            where.setdefault(pair, set()).add(w)
    # max-heap via negated counts; stale entries (a count that has since dropped) are fixed
    # when popped, so an update costs one push instead of a search for the entry
    heap = [(-c, tie_rank(a), tie_rank(b), a, b) for (a, b), c in counts.items()]
    heapq.heapify(heap)

    vocab = [bytes([i]) for i in range(256)]
    token_id = {v: i for i, v in enumerate(vocab)}
    merges, merge_counts = [], []
    while len(vocab) < n_tokens and heap:
        neg, _, _, a, b = heapq.heappop(heap)
        pair = (a, b)
        current = counts.get(pair, 0)
        if current != -neg:  # stale: push back with its current count
            if current > 0:
                heapq.heappush(heap, (-current, tie_rank(a), tie_rank(b), a, b))
            continue
        new_bytes = vocab[a] + vocab[b]
        new = token_id.get(new_bytes)
        if new is None:
            new = len(vocab)
            vocab.append(new_bytes)
            token_id[new_bytes] = new
        merges.append((pair, new))
        merge_counts.append(current)
        changed: set[tuple[int, int]] = set()
        for w in where.pop(pair):
            old = words[w]
            if len(old) < 2:
                continue
            merged = merge_pair(old, pair, new)
            if len(merged) == len(old):
                continue  # the word no longer holds the pair (stale index entry)
            f = freqs[w]
            for p in zip(old, old[1:]):
                counts[p] -= f
            for p in zip(merged, merged[1:]):
                counts[p] = counts.get(p, 0) + f
                where.setdefault(p, set()).add(w)
                changed.add(p)
            words[w] = merged
        counts.pop(pair, None)
        for p in changed:  # pairs that gained counts (new ones, or old ones with a reused id)
            c = counts.get(p, 0)
            if c > 0 and p != pair:
                heapq.heappush(heap, (-c, tie_rank(p[0]), tie_rank(p[1]), p[0], p[1]))
    return Merges(merges, vocab, merge_counts)


class BPETokenizer:
    """A byte-level BPE tokenizer: ids 0..255 are bytes, then the merged tokens, then the
    special tokens (``<|endoftext|>`` by default), as in GPT-2.

    ``BPETokenizer.train(text, vocab_size)`` learns merges; ``encode(str) -> list[int]``,
    ``decode(ids) -> str``; ``decode(encode(s)) == s`` for every string.
    """

    def __init__(
        self,
        merges: Sequence[tuple[tuple[int, int], int]],
        special_tokens: Sequence[str] = (END_OF_TEXT,),
    ):
        vocab = [bytes([i]) for i in range(256)]
        self.merges: list[tuple[tuple[int, int], int]] = []
        self.ranks: dict[tuple[int, int], tuple[int, int]] = {}  # pair -> (rank, new id)
        for rank, ((a, b), new) in enumerate(merges):
            a, b, new = int(a), int(b), int(new)
            if not (0 <= a < len(vocab) and 0 <= b < len(vocab)) or new > len(vocab):
                raise ValueError(
                    f"BPETokenizer: merge {rank} ({a}, {b}) -> {new} refers to tokens that do not "
                    "exist yet; merges must be in the order they were learned."
                )
            if new == len(vocab):
                vocab.append(vocab[a] + vocab[b])
            elif vocab[new] != vocab[a] + vocab[b]:
                raise ValueError(
                    f"BPETokenizer: merge {rank} reuses id {new}, whose bytes are not those of "
                    f"({a}, {b})."
                )
            self.merges.append(((a, b), new))
            self.ranks.setdefault((a, b), (rank, new))
        specials = list(special_tokens)
        if len(set(specials)) != len(specials) or not all(
            isinstance(s, str) and s for s in specials
        ):
            raise ValueError("BPETokenizer: special tokens must be distinct, non-empty strings.")
        self.vocab: list[bytes] = vocab
        self.special_tokens: dict[str, int] = {s: len(vocab) + i for i, s in enumerate(specials)}
        self._special_re = (
            re.compile(
                "(" + "|".join(re.escape(s) for s in sorted(specials, key=len, reverse=True)) + ")"
            )
            if specials
            else None
        )
        self._cache: dict[str, list[int]] = {}

    @classmethod
    def train(
        cls,
        text: str | Iterable[str],
        vocab_size: int,
        special_tokens: Sequence[str] = (END_OF_TEXT,),
    ) -> "BPETokenizer":
        """Learn merges from ``text`` so that the vocabulary (bytes, merges and special tokens)
        has ``vocab_size`` tokens; special-token strings in ``text`` are not learned from."""
        specials = list(special_tokens)
        if not isinstance(vocab_size, int) or vocab_size < 256 + len(specials):
            raise ValueError(
                f"BPETokenizer.train: vocab_size must be at least 256 + {len(specials)} special "
                f"token(s) = {256 + len(specials)}; got {vocab_size!r}."
            )
        docs = [text] if isinstance(text, str) else list(text)
        if specials:
            splitter = re.compile("|".join(re.escape(s) for s in specials))
            docs = [part for d in docs for part in splitter.split(d)]
        learned = learn_merges(docs, vocab_size - len(specials))
        tok = cls(learned.merges, specials)
        tok.merge_counts = learned.counts
        return tok

    def truncated(self, vocab_size: int) -> "BPETokenizer":
        """The tokenizer that training with ``vocab_size`` gives: this one's first merges (BPE
        is greedy, so a smaller vocabulary is a prefix of a larger one's merges)."""
        n_tokens = vocab_size - len(self.special_tokens)
        if not 256 <= n_tokens <= len(self.vocab):
            raise ValueError(
                "BPETokenizer.truncated: vocab_size must lie in "
                f"[{256 + len(self.special_tokens)}, "
                f"{self.vocab_size}]; got {vocab_size}."
            )
        # keep every merge up to the one that creates token n_tokens - 1 (later ones may reuse ids)
        k = next((r for r, (_, new) in enumerate(self.merges) if new >= n_tokens), len(self.merges))
        return type(self)(self.merges[:k], list(self.special_tokens))

    @property
    def vocab_size(self) -> int:
        return len(self.vocab) + len(self.special_tokens)

    @property
    def eot_id(self) -> int:
        """Id of ``<|endoftext|>``."""
        if END_OF_TEXT not in self.special_tokens:
            raise ValueError(f"BPETokenizer: this tokenizer has no {END_OF_TEXT} token.")
        return self.special_tokens[END_OF_TEXT]

    # -- encoding --------------------------------------------------------------------------
    def _encode_word(self, word: str) -> list[int]:
        ids = list(word.encode("utf-8"))
        ranks = self.ranks
        while len(ids) >= 2:
            # the adjacent pair learned earliest is the one to merge now
            best = min(zip(ids, ids[1:]), key=lambda p: ranks.get(p, (math.inf,))[0])
            if best not in ranks:
                break
            ids = merge_pair(ids, best, ranks[best][1])
        return ids

    def encode_ordinary(self, text: str) -> list[int]:
        """Encode ``text`` treating special-token strings as ordinary text."""
        if not isinstance(text, str):
            raise ValueError(f"BPETokenizer.encode: pass a str; got {type(text).__name__}.")
        out: list[int] = []
        cache = self._cache
        for word in pretokenize(text):
            ids = cache.get(word)
            if ids is None:
                ids = self._encode_word(word)
                if len(cache) < 500_000:
                    cache[word] = ids
            out.extend(ids)
        return out

    def encode(self, text: str, allowed_special: bool = True) -> list[int]:
        """str -> list of token ids. With ``allowed_special`` (default), the exact strings of
        special tokens ("<|endoftext|>") become their ids; otherwise they are ordinary text."""
        if not isinstance(text, str):
            raise ValueError(f"BPETokenizer.encode: pass a str; got {type(text).__name__}.")
        if not allowed_special or self._special_re is None:
            return self.encode_ordinary(text)
        out: list[int] = []
        for i, part in enumerate(self._special_re.split(text)):
            if i % 2:  # the splitter captures the special tokens at odd positions
                out.append(self.special_tokens[part])
            elif part:
                out.extend(self.encode_ordinary(part))
        return out

    # -- decoding --------------------------------------------------------------------------
    def decode_bytes(self, ids) -> bytes:
        """Token ids (list or 1-D tensor) -> the bytes they stand for."""
        ids = ids.tolist() if hasattr(ids, "tolist") else list(ids)
        n_vocab, special_bytes = (
            len(self.vocab),
            {i: s.encode("utf-8") for s, i in self.special_tokens.items()},
        )
        parts = []
        for i in ids:
            if isinstance(i, bool) or not isinstance(i, int) or not 0 <= i < self.vocab_size:
                raise ValueError(
                    f"BPETokenizer.decode: ids must be ints in [0, {self.vocab_size}); got {i!r}."
                )
            parts.append(self.vocab[i] if i < n_vocab else special_bytes[i])
        return b"".join(parts)

    def decode(self, ids, errors: str = "replace") -> str:
        """Token ids -> str. A sequence cut in the middle of a character's bytes decodes with
        U+FFFD in its place (``errors="replace"``); ``errors="strict"`` raises instead."""
        return self.decode_bytes(ids).decode("utf-8", errors=errors)

    def token_str(self, i: int) -> str:
        """A token as GPT-2 prints it: its bytes through ``bytes_to_unicode`` (space = "Ġ")."""
        if i >= len(self.vocab):
            return next(s for s, j in self.special_tokens.items() if j == i)
        table = bytes_to_unicode()
        return "".join(table[b] for b in self.vocab[i])

    # -- saving ----------------------------------------------------------------------------
    def state_dict(self) -> dict:
        return {
            "merges": [[a, b, new] for (a, b), new in self.merges],
            "special_tokens": list(self.special_tokens),
        }

    @classmethod
    def from_state_dict(cls, state: dict) -> "BPETokenizer":
        return cls([((a, b), new) for a, b, new in state["merges"]], state["special_tokens"])


class GPT2FormatTokenizer:
    """A ``BPETokenizer`` read from GPT-2's tokenizer files, numbered as the files number it.

    ``GPT2FormatTokenizer.from_files(vocab_json, merges_txt)``. The merges of ``merges.txt``
    (byte-level strings, "Ġ" for the space byte) become a ``BPETokenizer`` (``.bpe``), which
    does all the work; ``vocab.json`` only renumbers its tokens: GPT-2 gives the 256 bytes ids
    in ``bytes_to_unicode`` order ("!" is 0) and ``<|endoftext|>`` the last id (50256), where
    ``BPETokenizer`` gives byte b the id b. ``encode(str) -> list[int]`` and ``decode(ids)``
    use the files' ids.
    """

    def __init__(self, bpe: BPETokenizer, file_ids: Sequence[int]):
        if len(file_ids) != bpe.vocab_size or len(set(file_ids)) != len(file_ids):
            raise ValueError(
                "GPT2FormatTokenizer: file_ids must give every token of the BPETokenizer "
                f"({bpe.vocab_size}) a distinct id; got {len(file_ids)} ids."
            )
        self.bpe = bpe
        self.to_file = list(file_ids)  # our id -> the files' id
        self.from_file = {f: i for i, f in enumerate(self.to_file)}  # the files' id -> ours

    @classmethod
    def from_files(
        cls, vocab_json, merges_txt, special_tokens: Sequence[str] = (END_OF_TEXT,)
    ) -> "GPT2FormatTokenizer":
        """Read ``vocab.json`` and ``merges.txt`` (paths). ``special_tokens``: entries of
        vocab.json that are special tokens, never made by merges (those absent are skipped)."""
        import json
        from pathlib import Path

        vocab = json.loads(Path(vocab_json).read_text(encoding="utf-8"))
        if not isinstance(vocab, dict):
            raise ValueError(f"GPT2FormatTokenizer: {vocab_json} must hold a JSON object.")
        byte_of = {c: b for b, c in bytes_to_unicode().items()}
        ours = {bytes([b]): b for b in range(256)}  # token bytes -> our id
        merges = []
        for n, line in enumerate(Path(merges_txt).read_text(encoding="utf-8").splitlines()):
            if not line.strip() or (n == 0 and line.startswith("#version")):
                continue
            parts = line.split(" ")
            if len(parts) != 2 or not all(set(p) <= byte_of.keys() and p for p in parts):
                raise ValueError(
                    f"GPT2FormatTokenizer: line {n + 1} of {merges_txt} is not a merge of two "
                    f"byte-level tokens: {line!r}."
                )
            a, b = (bytes(byte_of[c] for c in p) for p in parts)
            if a not in ours or b not in ours:
                raise ValueError(
                    f"GPT2FormatTokenizer: line {n + 1} of {merges_txt} merges a token that no "
                    f"earlier merge made: {line!r}."
                )
            new = ours.setdefault(a + b, len(ours))  # an existing token's bytes: its id again
            merges.append(((ours[a], ours[b]), new))
        specials = [s for s in special_tokens if s in vocab]
        bpe = BPETokenizer(merges, specials)
        names = [bpe.token_str(i) for i in range(bpe.vocab_size)]
        missing = [t for t in names if t not in vocab]
        if missing:
            raise ValueError(
                f"GPT2FormatTokenizer: {len(missing)} tokens made by {merges_txt} are not in "
                f"{vocab_json} (e.g. {missing[:3]}); the two files do not belong together."
            )
        return cls(bpe, [vocab[t] for t in names])

    @property
    def vocab_size(self) -> int:
        return self.bpe.vocab_size

    @property
    def eot_id(self) -> int:
        """The files' id of ``<|endoftext|>``."""
        return self.to_file[self.bpe.eot_id]

    def encode(self, text: str, allowed_special: bool = True) -> list[int]:
        """str -> the files' token ids (see ``BPETokenizer.encode``)."""
        return [self.to_file[i] for i in self.bpe.encode(text, allowed_special)]

    def decode(self, ids, errors: str = "replace") -> str:
        """The files' token ids (list or 1-D tensor) -> str."""
        ids = ids.tolist() if hasattr(ids, "tolist") else list(ids)
        bad = [i for i in ids if i not in self.from_file]
        if bad:
            raise ValueError(f"GPT2FormatTokenizer.decode: unknown token ids {bad[:5]}.")
        return self.bpe.decode([self.from_file[i] for i in ids], errors=errors)

    def token_str(self, i: int) -> str:
        """The token with the files' id ``i`` as vocab.json writes it (space = "Ġ")."""
        if i not in self.from_file:
            raise ValueError(f"GPT2FormatTokenizer.token_str: unknown token id {i!r}.")
        return self.bpe.token_str(self.from_file[i])


def train_library_bpe(
    text: str | Iterable[str], vocab_size: int, special_tokens: Sequence[str] = (END_OF_TEXT,)
):
    """The same tokenizer trained by Hugging Face ``tokenizers`` (byte-level BPE with GPT-2's
    pre-tokenization, no prefix space): the reference ``BPETokenizer`` is checked against."""
    try:
        from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    except ImportError:  # pragma: no cover - tokenizers is in requirements.txt
        raise ValueError(
            "train_library_bpe needs Hugging Face tokenizers: pip install tokenizers"
        ) from None
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(special_tokens),
        show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        min_frequency=0,
    )
    docs = [text] if isinstance(text, str) else list(text)
    tok.train_from_iterator(docs, trainer=trainer, length=len(docs))
    return tok


def chars_per_token(n_chars: int, n_tokens: int) -> float:
    """Compression of a tokenization: characters per token (higher: shorter sequences)."""
    if n_tokens <= 0:
        raise ValueError("chars_per_token: n_tokens must be positive.")
    return n_chars / n_tokens


def bits_per_character(model, tokens, n_chars: int, block_size: int, batch_size: int = 64) -> float:
    """Bits per character of a language model on a whole tokenized text.

    tokens: (N,) int64 ids of a text of ``n_chars`` characters. The text is cut into
    consecutive windows of ``block_size + 1`` tokens overlapping by one (each window predicts
    ``block_size`` tokens from the context inside it), so every token but the first is
    predicted once. Returns total nats / (n_chars * ln 2): comparable across tokenizers,
    unlike the loss per token (a token of 3 characters is harder to predict than one).
    """
    import torch
    import torch.nn.functional as F

    tokens = torch.as_tensor(tokens, dtype=torch.int64)
    if tokens.dim() != 1 or len(tokens) < 2 or n_chars < 1:
        raise ValueError(
            "bits_per_character: pass a 1-D tensor of at least 2 token ids and n_chars >= 1."
        )
    T = block_size
    starts = list(range(0, len(tokens) - 1, T))
    total = 0.0
    was_training = model.training
    model.eval()
    with torch.no_grad():
        for i in range(0, len(starts), batch_size):
            chunk = starts[i : i + batch_size]
            lengths = [min(T, len(tokens) - 1 - s) for s in chunk]
            x = torch.zeros(len(chunk), T, dtype=torch.int64)  # (B, T), padded at the end
            y = torch.full((len(chunk), T), -100, dtype=torch.int64)  # (B, T); -100: not scored
            for r, (s, n) in enumerate(zip(chunk, lengths)):
                x[r, :n] = tokens[s : s + n]
                y[r, :n] = tokens[s + 1 : s + n + 1]
            logits = model(x)[0]  # (B, T, V)
            total += F.cross_entropy(
                logits.flatten(0, 1), y.flatten(), ignore_index=-100, reduction="sum"
            ).item()
    model.train(was_training)
    return total / (n_chars * math.log(2))
