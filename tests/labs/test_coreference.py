"""course_lib.labs.coreference: token attention summed into words, and the head chooser."""

from __future__ import annotations

import pytest
import torch

from course_lib.labs.coreference import (
    WINOGRAD_PAIR,
    choose_head,
    token_words,
    word_attention,
    word_spans,
)


def test_tokens_belong_to_the_word_of_their_first_non_space_character():
    bpe = ["The", " trophy", " doesn", "'t", " fit", "."]  # GPT-2's pieces
    assert token_words(bpe) == [0, 1, 2, 2, 3, 4]
    chars = list("it is.")  # a character model: a space belongs to the word after it
    assert token_words(chars) == [0, 0, 1, 1, 1, 2]
    assert token_words(["a", "  "]) == [0, 0]  # trailing spaces: the last word
    assert [w for w, _, _ in word_spans(WINOGRAD_PAIR[0][0])][-4:] == ["is", "too", "big", "."]
    with pytest.raises(ValueError, match="no words"):
        token_words([" "])


def test_word_attention_sums_keys_and_reads_each_words_last_token():
    torch.manual_seed(0)
    pieces = ["The", " trophy", " doesn", "'t", " fit", "."]
    w = torch.softmax(torch.randn(2, 3, 6, 6), dim=-1)  # (L, H, T, T)
    words, W = word_attention(w, pieces)
    assert words == ["The", "trophy", "doesn't", "fit", "."] and W.shape == (2, 3, 5, 5)
    owner, last = [0, 1, 2, 2, 3, 4], [0, 1, 3, 4, 5]
    for q in range(5):  # the same sums, written as loops
        for k in range(5):
            expected = sum(w[..., last[q], t] for t in range(6) if owner[t] == k)
            torch.testing.assert_close(W[..., q, k], expected)
    torch.testing.assert_close(W.sum(-1), torch.ones(2, 3, 5))
    with pytest.raises(ValueError, match="must end in"):
        word_attention(w, pieces[:-1])


def test_choose_head_finds_the_head_that_follows_the_referent():
    words = [["it", "trophy", "suitcase", "big"], ["it", "trophy", "suitcase", "small"]]
    maps = [torch.full((3, 4, 4, 4), 0.25), torch.full((3, 4, 4, 4), 0.25)]
    maps[0][1, 2, 3] = torch.tensor([0.1, 0.8, 0.1, 0.0])  # big -> trophy
    maps[1][1, 2, 3] = torch.tensor([0.1, 0.1, 0.8, 0.0])  # small -> suitcase
    maps[0][2, 0, 3] = torch.tensor([0.0, 0.9, 0.1, 0.0])  # always the trophy: scores 0
    maps[1][2, 0, 3] = torch.tensor([0.0, 0.9, 0.1, 0.0])
    layer, head, score = choose_head(maps, ["trophy", "suitcase"], ["big", "small"], words)
    assert (layer, head) == (1, 2) and score == pytest.approx(1.4)
    with pytest.raises(ValueError, match="two distinct referents"):
        choose_head(maps, ["trophy", "trophy"], ["big", "small"], words)


# --------------------------------------------------------------------------- Exercise 12.7's data
def test_winograd_pairs_fit_the_course_model_and_name_their_words_once():
    from course_lib.labs.coreference import WINOGRAD_PAIRS, pair_sentences

    sentences = pair_sentences()
    assert len(sentences) == 2 * len(WINOGRAD_PAIRS) >= 60
    for s in sentences:
        words = [w for w, _, _ in word_spans(s["text"])]
        assert len(s["text"]) <= 64  # the context of the course's character model
        assert all(words.count(c) == 1 for c in s["candidates"]), s["text"]
        assert words.count(s["word"]) == 1, s["text"]
    # in each pair one word decides: the two sentences differ there only, and answer differently
    for a, b in zip(sentences[::2], sentences[1::2]):
        assert a["text"].replace(a["word"], b["word"]) == b["text"]
        assert (a["answer"], b["answer"]) == (0, 1)


def test_head_accuracy_and_binomial_tail_against_loops_and_scipy():
    from scipy.stats import binom

    from course_lib.labs.coreference import binomial_tail, head_accuracy

    g = torch.Generator().manual_seed(0)
    att = torch.rand(12, 2, 3, 2, generator=g)  # (N, L, H, 2)
    answers = torch.randint(0, 2, (12,), generator=g)
    acc = head_accuracy(att, answers)
    for layer in range(2):
        for head in range(3):
            right = [
                att[i, layer, head, answers[i]] > att[i, layer, head, 1 - answers[i]]
                for i in range(12)
            ]
            assert acc[layer, head] == pytest.approx(sum(right) / 12)
    for n, k in ((30, 0), (30, 15), (30, 19), (30, 30), (7, 4)):
        assert binomial_tail(k, n) == pytest.approx(binom.sf(k - 1, n, 0.5), rel=1e-12)
    with pytest.raises(ValueError, match="answers"):
        head_accuracy(att, answers[:5])
    with pytest.raises(ValueError, match="k <= n"):
        binomial_tail(5, 4)


def test_candidate_attention_reads_word_attention_from_the_deciding_word():
    from course_lib.labs.coreference import candidate_attention, pair_sentences
    from course_lib.model import GPTConfig, MiniGPT

    class Chars:  # a character tokenizer over the pairs' characters
        def __init__(self, texts):
            self.chars = sorted(set("".join(texts)))

        def encode(self, text):
            return [self.chars.index(c) for c in text]

        def decode(self, ids):
            return "".join(self.chars[i] for i in ids)

    sentences = pair_sentences()[:4]
    tok = Chars([s["text"] for s in sentences])
    torch.manual_seed(0)
    model = MiniGPT(
        GPTConfig(vocab_size=len(tok.chars), block_size=64, n_layer=2, n_head=2, d_model=16)
    )
    att = candidate_attention(model.eval(), tok, sentences)  # (4, 2, 2, 2)
    assert att.shape == (4, 2, 2, 2)
    s = sentences[1]
    ids = torch.tensor([tok.encode(s["text"])])
    pieces = [tok.decode([i]) for i in ids[0].tolist()]
    words, w = word_attention(torch.stack(model.attention_maps(ids))[:, 0], pieces)
    q = words.index(s["word"])
    for j, c in enumerate(s["candidates"]):
        torch.testing.assert_close(att[1, ..., j], w[:, :, q, words.index(c)])


def test_candidate_attention_reads_words_split_into_gpt2_like_pieces():
    """GPT-2's pieces carry the space before a word and may split it: the deciding word and the
    candidates are still found, and their attention is the sum over each candidate's pieces."""
    from course_lib.labs.coreference import candidate_attention, pair_sentences

    class Pieces:  # " trophy" -> " tro" + "phy": a space-led first piece, a tail of 3 letters
        def __init__(self):
            self.vocab = []

        def encode(self, text):
            out = []
            for word, start, _end in word_spans(text):
                lead = text[start - 1] if start and text[start - 1] == " " else ""
                for p in (lead + word[:-3], word[-3:]) if len(word) > 4 else (lead + word,):
                    self.vocab += [p] if p not in self.vocab else []
                    out.append(self.vocab.index(p))
            return out

        def decode(self, ids):
            return "".join(self.vocab[i] for i in ids)

    class Uniform:  # every query spreads its weight evenly over the tokens it may see
        def attention_maps(self, ids):
            T = ids.shape[1]
            causal = torch.tril(torch.ones(T, T))
            return [(causal / causal.sum(-1, keepdim=True))[None, None].expand(1, 2, T, T)]

    s = pair_sentences()[0]  # "The trophy doesn't fit in the suitcase because it is too big."
    tok = Pieces()
    ids = tok.encode(s["text"])
    assert tok.decode(ids) == s["text"]
    att = candidate_attention(Uniform(), tok, [s])  # (1, 1, 2, 2)
    pieces = [tok.decode([i]) for i in ids]
    seen = pieces.index(" big") + 1  # tokens the deciding word's last token can see
    per_token = 1 / seen
    assert att.shape == (1, 1, 2, 2)
    # "trophy" is two pieces (" tro", "phy"), "suitcase" two (" suitc", "ase"): both count
    torch.testing.assert_close(att[0, 0, 0], torch.tensor([2 * per_token, 2 * per_token]))
