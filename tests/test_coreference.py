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
