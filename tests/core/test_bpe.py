"""Byte-level BPE (course_lib.bpe): merge learning against a brute-force recount, agreement with
Hugging Face ``tokenizers``, round trips on random Unicode, special tokens, bad input."""

from __future__ import annotations

import json
import math
import random
import unicodedata

import pytest
import torch

from course_lib import bpe
from course_lib.bpe import (
    END_OF_TEXT,
    BPETokenizer,
    learn_merges,
    merge_pair,
    pair_counts,
    pretokenize,
)
from course_lib.corpus import load_corpus
from course_lib.data import (
    CharTokenizer,
    encode_splits,
    shakespeare_splits,
    split_text,
    synthetic_corpus,
)

tokenizers = pytest.importorskip("tokenizers")


@pytest.fixture(scope="module")
def corpus():
    return load_corpus()


@pytest.fixture(scope="module")
def small_text(corpus):
    # Shakespeare plus a little of everything the pattern treats differently
    extra = "It's 1,234.5 dollars; they'll say \"café\" naïvely — 東京 2024 ½ x² 🎉🎉!\n\tok  \n"
    return corpus[:60_000] + extra * 20


# --------------------------------------------------------------------------- a brute-force
# reference
def brute_force_merges(text: str, n_tokens: int):
    """The textbook algorithm: recount every pair of every word before every merge."""
    words = {}
    for w in pretokenize(text):
        key = tuple(w.encode("utf-8"))
        words[key] = words.get(key, 0) + 1
    vocab = [bytes([i]) for i in range(256)]
    merges, counts = [], []
    while len(vocab) < n_tokens:
        c = {}
        for ids, f in words.items():
            for p in zip(ids, ids[1:]):
                c[p] = c.get(p, 0) + f
        if not c:
            break
        best = max(c, key=lambda p: (c[p], -bpe.tie_rank(p[0]), -bpe.tie_rank(p[1])))
        new_bytes = vocab[best[0]] + vocab[best[1]]
        new = vocab.index(new_bytes) if new_bytes in vocab else len(vocab)
        if new == len(vocab):
            vocab.append(new_bytes)
        merges.append((best, new))
        counts.append(c[best])
        merged = {}
        for ids, f in words.items():
            key = tuple(merge_pair(ids, best, new))
            merged[key] = merged.get(key, 0) + f
        words = merged
    return merges, counts, vocab


def random_unicode(rng: random.Random, n: int) -> str:
    """Characters from wide code point ranges (no surrogates): ASCII with NUL and controls,
    Latin-1, combining marks, CJK, emoji, astral planes, private use, noncharacters."""
    ranges = [
        (0x00, 0x7F),
        (0x80, 0xFF),
        (0x300, 0x36F),
        (0x370, 0x3FF),
        (0x4E00, 0x9FFF),
        (0x1F300, 0x1FAFF),
        (0x10000, 0x1FFFF),
        (0x20000, 0x2FFFF),
        (0xE000, 0xF8FF),
        (0xFFF0, 0xFFFF),
        (0xF0000, 0x10FFFF),
    ]
    out = []
    for _ in range(n):
        lo, hi = rng.choice(ranges)
        out.append(chr(rng.randint(lo, hi)))
    return "".join(out)


# --------------------------------------------------------------------------- pieces
def test_pair_counts_and_merge_pair_by_hand():
    assert pair_counts([1, 1, 1, 2]) == {(1, 1): 2, (1, 2): 1}  # overlapping pairs all count
    assert pair_counts({(1, 2): 3, (2, 1, 2): 2}) == {(1, 2): 5, (2, 1): 2}
    assert merge_pair([1, 1, 1], (1, 1), 9) == [9, 1]  # left to right, no overlap
    assert merge_pair([1, 2, 3, 1, 2], (1, 2), 7) == [7, 3, 7]
    assert merge_pair([5], (1, 2), 7) == [5]


def test_bytes_to_unicode_matches_the_library():
    alphabet = set(tokenizers.pre_tokenizers.ByteLevel.alphabet())
    table = bpe.bytes_to_unicode()
    assert set(table.values()) == alphabet and len(alphabet) == 256
    assert table[ord(" ")] == "Ġ" and table[ord("\n")] == "Ċ" and table[ord("a")] == "a"


def test_unicode_classes_agree_with_unicodedata():
    rng = random.Random(3)
    letters = __import__("re").compile(f"[{bpe.unicode_class('L')}]")
    numbers = __import__("re").compile(f"[{bpe.unicode_class('N')}]")
    for _ in range(20_000):
        c = chr(rng.randint(0, 0x10FFFF))
        cat = unicodedata.category(c)
        assert bool(letters.fullmatch(c)) == cat.startswith("L"), (hex(ord(c)), cat)
        assert bool(numbers.fullmatch(c)) == cat.startswith("N"), (hex(ord(c)), cat)
    with pytest.raises(ValueError, match="category"):
        bpe.unicode_class("Q")


def test_pretokenize_matches_gpt2_pretokenizer_of_the_library(small_text):
    pre = tokenizers.pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    table = bpe.bytes_to_unicode()

    def ours(s):
        return ["".join(table[b] for b in w.encode("utf-8")) for w in pretokenize(s)]

    def theirs(s):
        return [w for w, _ in pre.pre_tokenize_str(s)]

    assert ours(small_text) == theirs(small_text)
    rng = random.Random(0)
    for _ in range(200):
        # common scripts, digits, spaces and punctuation (characters both Unicode versions agree on)
        s = "".join(
            rng.choice(
                [
                    "a",
                    "Z",
                    "é",
                    "ß",
                    "я",
                    "東",
                    "7",
                    "½",
                    "²",
                    " ",
                    "  ",
                    "\n",
                    "\t",
                    "'s",
                    "'ll",
                    "!",
                    "—",
                    "🎉",
                    "\u0301",
                    "_",
                    "\x00",
                ]
            )
            for _ in range(rng.randint(0, 30))
        )
        assert ours(s) == theirs(s), repr(s)
        assert "".join(pretokenize(s)) == s


# --------------------------------------------------------------------------- learning
def test_incremental_learning_equals_brute_force_recount(small_text):
    learned = learn_merges(small_text, 256 + 150)
    merges, counts, vocab = brute_force_merges(small_text, 256 + 150)
    assert learned.merges == merges
    assert learned.counts == counts
    assert learned.vocab == vocab


def test_reused_ids_when_two_merges_make_the_same_bytes():
    # "ab c" and "a bc" both make "abc": the second merge reuses the first one's id
    text = " ".join(["abx"] * 9 + ["xbc"] * 9 + ["abc"] * 4 + ["zabc"] * 3)
    learned = learn_merges(text, 256 + 8)
    merges, counts, vocab = brute_force_merges(text, 256 + 8)
    assert learned.merges == merges and learned.counts == counts
    assert len(set(learned.vocab)) == len(learned.vocab)


def test_learning_stops_when_no_pair_is_left():
    learned = learn_merges("aaaa", 300)
    assert [learned.vocab[new] for _, new in learned.merges] == [b"aa", b"aaaa"]


def test_same_merges_and_tokens_as_the_library(small_text):
    vocab_size = 256 + 1 + 200
    ours = BPETokenizer.train(small_text, vocab_size)
    lib = bpe.train_library_bpe(small_text, vocab_size)
    assert lib.get_vocab_size() == ours.vocab_size == vocab_size
    lib_merges = json.loads(lib.to_str())["model"]["merges"]
    lib_merges = [tuple(m) if isinstance(m, list) else tuple(m.split(" ")) for m in lib_merges]
    assert [(ours.token_str(a), ours.token_str(b)) for (a, b), _ in ours.merges] == lib_merges
    probe = load_corpus()[-20_000:] + "Zounds, 12345 times!  Ünïcödé 🎉\n"
    assert [ours.token_str(i) for i in ours.encode(probe)] == lib.encode(probe).tokens


# --------------------------------------------------------------------------- encode / decode
@pytest.fixture(scope="module")
def tok(small_text):
    return BPETokenizer.train(small_text, 256 + 1 + 300)


def test_round_trip_on_random_unicode(tok):
    rng = random.Random(1234)
    for n in [0, 1, 2, 5, 50, 500] * 20:
        s = random_unicode(rng, n)
        ids = tok.encode(s)
        assert all(0 <= i < tok.vocab_size for i in ids)
        assert tok.decode(ids) == s
        assert tok.decode_bytes(ids) == s.encode("utf-8")


def test_round_trip_on_unseen_characters_and_byte_fallback(tok):
    s = "\x00Zoë 👩‍👩‍👧 e\u0301 \U0010fffd 🎉"
    ids = tok.encode(s)
    assert tok.decode(ids) == s
    # characters never seen in training fall back to their UTF-8 bytes, one token per byte
    assert tok.encode("\U0010fffd") == list("\U0010fffd".encode("utf-8"))


def test_encoding_applies_merges_in_learned_order(tok, small_text):
    # the merges replayed in order on each pre-token give the same ids as encode
    word = " thoughts"
    ids = list(word.encode("utf-8"))
    for pair, new in tok.merges:
        ids = merge_pair(ids, pair, new)
    assert tok.encode(word) == ids


def test_special_tokens(tok):
    eot = tok.eot_id
    assert eot == tok.vocab_size - 1 and tok.token_str(eot) == END_OF_TEXT
    s = f"First.{END_OF_TEXT}Second{END_OF_TEXT}"
    ids = tok.encode(s)
    assert ids.count(eot) == 2 and tok.decode(ids) == s
    assert ids == tok.encode("First.") + [eot] + tok.encode("Second") + [eot]
    plain = tok.encode(s, allowed_special=False)
    assert eot not in plain and tok.decode(plain) == s
    # training never learns from the special token's characters
    learned = BPETokenizer.train((END_OF_TEXT + " ") * 50 + "ab ab", 256 + 1 + 5)
    assert all(b"<|" not in t and b"|>" not in t for t in learned.vocab[256:])


def test_special_token_count_agrees_with_the_library(small_text):
    ours = BPETokenizer.train(small_text, 256 + 1 + 100)
    lib = bpe.train_library_bpe(small_text, 256 + 1 + 100)
    s = f"To be{END_OF_TEXT}or not{END_OF_TEXT}"
    assert [ours.token_str(i) for i in ours.encode(s)] == lib.encode(s).tokens


def test_decode_of_a_cut_character(tok):
    ids = tok.encode("é")  # two bytes, never merged
    assert tok.decode(ids[:1]) == "\ufffd"
    with pytest.raises(UnicodeDecodeError):
        tok.decode(ids[:1], errors="strict")


def test_state_dict_round_trip(tok):
    again = BPETokenizer.from_state_dict(json.loads(json.dumps(tok.state_dict())))
    s = "Now is the winter of our discontent 🎉"
    assert again.encode(s) == tok.encode(s) and again.vocab_size == tok.vocab_size


def test_bad_input_raises_readable_errors(tok):
    with pytest.raises(ValueError, match="vocab_size"):
        BPETokenizer.train("abc", 200)
    with pytest.raises(ValueError, match="n_tokens"):
        learn_merges("abc", 10)
    with pytest.raises(ValueError, match="str"):
        tok.encode(b"bytes")
    with pytest.raises(ValueError, match="ids must be"):
        tok.decode([tok.vocab_size])
    with pytest.raises(ValueError, match="ids must be"):
        tok.decode([-1])
    with pytest.raises(ValueError, match="order"):
        BPETokenizer([((300, 1), 256)])
    with pytest.raises(ValueError, match="distinct"):
        BPETokenizer([], special_tokens=["<a>", "<a>"])
    with pytest.raises(ValueError, match="no <\\|endoftext\\|>"):
        _ = BPETokenizer([], special_tokens=[]).eot_id


# ------------------------------------------------------------------ the data pipeline and scoring
def test_encode_splits_with_bpe_and_char_tokenizer_unchanged(small_text):
    tok = BPETokenizer.train(small_text, 300)
    s = encode_splits(small_text, tok, 0.1)
    train, val = split_text(small_text, 0.1)
    assert (
        s.train.dtype == torch.int64 and tok.decode(s.train) == train and tok.decode(s.val) == val
    )
    text = synthetic_corpus(2000)
    char = CharTokenizer.from_text(text)
    c = encode_splits(text, char, 0.1)
    assert torch.equal(c.train, char.encode(split_text(text, 0.1)[0]))
    with pytest.raises(ValueError, match="encode"):
        encode_splits(text, object())


class _Fixed(torch.nn.Module):
    """A stand-in language model: logits from a fixed random table of (previous token -> next)."""

    def __init__(self, V):
        super().__init__()
        self.table = torch.randn(V, V, generator=torch.Generator().manual_seed(0))

    def forward(self, idx, targets=None):
        return self.table[idx], None  # (B, T, V)


def test_bits_per_character_against_a_direct_sum():
    g = torch.Generator().manual_seed(1)
    tokens = torch.randint(7, (1000,), generator=g)
    model = _Fixed(7)
    logp = torch.log_softmax(model.table[tokens[:-1]], -1)  # (N-1, V): every token after the first
    nats = -logp.gather(1, tokens[1:, None]).sum().item()
    for block in (1, 16, 64, 999, 2000):
        got = bpe.bits_per_character(model, tokens, 2500, block_size=block, batch_size=5)
        assert math.isclose(got, nats / (2500 * math.log(2)), rel_tol=1e-5)
    with pytest.raises(ValueError):
        bpe.bits_per_character(model, tokens[:1], 10, 8)


# --------------------------------------------------------------------------- slow: the whole corpus
@pytest.mark.slow
def test_whole_corpus_agrees_with_the_library(corpus):
    ours = BPETokenizer.train(corpus, 256 + 1 + 1000)
    lib = bpe.train_library_bpe(corpus, 256 + 1 + 1000)
    lib_merges = json.loads(lib.to_str())["model"]["merges"]
    lib_merges = [tuple(m) if isinstance(m, list) else tuple(m.split(" ")) for m in lib_merges]
    assert [(ours.token_str(a), ours.token_str(b)) for (a, b), _ in ours.merges] == lib_merges
    train, val = split_text(corpus, 0.1)
    ours, lib = BPETokenizer.train(train, 1024), bpe.train_library_bpe(train, 1024)
    n_ours, n_lib = len(ours.encode(val)), len(lib.encode(val).ids)
    assert abs(n_ours - n_lib) <= 0.01 * n_lib
    assert ours.decode(ours.encode(val)) == val


@pytest.mark.slow
def test_shakespeare_splits_with_a_bpe_tokenizer(corpus):
    train, _ = split_text(corpus, 0.1)
    tok = BPETokenizer.train(train[:200_000], 512)
    s = shakespeare_splits(tokenizer=tok)
    assert s.tokenizer is tok and tok.decode(s.val) == split_text(corpus, 0.1)[1]


def test_truncated_tokenizer_equals_training_a_smaller_one(small_text):
    big = BPETokenizer.train(small_text, 256 + 1 + 300)
    for v in (257, 300, 400):
        assert big.truncated(v).merges == BPETokenizer.train(small_text, v).merges
        assert big.truncated(v).vocab_size == v
    with pytest.raises(ValueError, match="vocab_size"):
        big.truncated(10_000)
