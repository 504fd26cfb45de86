"""Chapter 12's look at attention on a Winograd pair: where does "it" point?

"The trophy doesn't fit in the suitcase because it is too big / small." (Levesque et al.
2012): "it" is the trophy when it is too big and the suitcase when it is too small. A model's
attention is over its tokens (characters for the course's model, byte-level BPE pieces for
GPT-2); ``word_attention`` sums it over the words, so the two read alike:

- a key word receives the sum of the weights on its tokens (a token of spaces belongs to the
  word after it, as GPT-2's " big" does), so every row still sums to 1;
- a query word is its last token: the one that has read the whole word.

``choose_head`` picks, among every layer and head, the one whose attention from the adjective
goes most to the right noun in both sentences. It is chosen after looking, among many heads:
some head will look right by chance, so a real "coreference head" needs many pairs to show.
"""

from __future__ import annotations

import re

import torch

__all__ = ["WINOGRAD_PAIR", "word_spans", "token_words", "word_attention", "choose_head"]

#: The pair of sentences and, for each, the noun "it" refers to.
WINOGRAD_PAIR = (
    ("The trophy doesn't fit in the suitcase because it is too big.", "trophy"),
    ("The trophy doesn't fit in the suitcase because it is too small.", "suitcase"),
)


def word_spans(text: str) -> list[tuple[str, int, int]]:
    """(word, start, end) of every word of ``text``: runs of letters, digits and apostrophes
    ("doesn't"), and each punctuation mark on its own."""
    return [(m.group(), m.start(), m.end()) for m in re.finditer(r"[\w']+|[^\w\s]", text)]


def token_words(pieces: list[str]) -> list[int]:
    """The index of the word (``word_spans`` of ``"".join(pieces)``) each token belongs to: the
    word holding the token's first non-space character; a token of spaces only, the word after
    it (or the last word at the end)."""
    spans = word_spans("".join(pieces))
    if not spans:
        raise ValueError("token_words: the text has no words.")
    out, pos = [], 0
    for piece in pieces:
        first = pos + len(piece) - len(piece.lstrip())  # first non-space character
        pos += len(piece)
        out.append(next((k for k, (_, _, end) in enumerate(spans) if end > first), len(spans) - 1))
    return out


def word_attention(weights: torch.Tensor, pieces: list[str]) -> tuple[list[str], torch.Tensor]:
    """Token attention (..., T, T) -> (words, word attention (..., W, W)).

    ``pieces``: the T tokens' strings (their concatenation is the text). Entry [q, k] is the
    weight that word q's last token puts on the tokens of word k; rows sum as the token rows do.
    """
    T = len(pieces)
    if weights.shape[-2:] != (T, T):
        raise ValueError(
            f"word_attention: weights must end in ({T}, {T}) for {T} tokens; got "
            f"{tuple(weights.shape)}."
        )
    owner = torch.tensor(token_words(pieces))  # (T,)
    words = [w for w, _, _ in word_spans("".join(pieces))]
    member = (owner[None, :] == torch.arange(len(words))[:, None]).to(weights.dtype)  # (W, T)
    last = torch.tensor([int(torch.nonzero(owner == k).max()) for k in range(len(words))])  # (W,)
    per_key = weights @ member.T  # (..., T, W): the weight on each word's tokens
    return words, per_key[..., last, :]  # (..., W, W)


def choose_head(
    maps: list[torch.Tensor], referents: list[str], query: list[str], words: list[list[str]]
) -> tuple[int, int, float]:
    """(layer, head, score) of the head whose attention from ``query[i]`` goes most to
    ``referents[i]`` rather than to the other referent, summed over the sentences.

    ``maps[i]``: sentence i's word attention (n_layer, n_head, W_i, W_i); ``words[i]`` its words.
    The score of a head is the sum over sentences of weight(right noun) - weight(other noun),
    so a head that looks at one noun whatever the sentence scores about 0.
    """
    nouns = sorted(set(referents))
    if len(nouns) != 2 or len(maps) != len(referents):
        raise ValueError("choose_head: pass one map per sentence and two distinct referents.")
    score = 0
    for m, right, q, ws in zip(maps, referents, query, words):
        wrong = nouns[1 - nouns.index(right)]
        row = m[:, :, ws.index(q), :]  # (n_layer, n_head, W)
        score = score + row[..., ws.index(right)] - row[..., ws.index(wrong)]
    flat = int(torch.argmax(score))
    layer, head = divmod(flat, score.shape[1])
    return layer, head, float(score[layer, head])
