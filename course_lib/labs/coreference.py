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

``WINOGRAD_PAIRS`` are such pairs for an honest test (Exercise 12's ``pronoun_head``): one
deciding word changes what the pronoun refers to; ``candidate_attention`` measures, for every
sentence, the attention each head sends from the deciding word to the two candidates;
``head_accuracy`` scores every head on a set of sentences (right when it attends more to the
right candidate), and ``binomial_tail`` is the exact one-sided test against chance (a head that
always looks at the same noun is right in one sentence of every pair: half the time).
"""

from __future__ import annotations

import math
import re

import torch

__all__ = [
    "WINOGRAD_PAIR",
    "WINOGRAD_PAIRS",
    "pair_sentences",
    "word_spans",
    "token_words",
    "word_attention",
    "choose_head",
    "candidate_attention",
    "head_accuracy",
    "binomial_tail",
]

#: The pair of sentences and, for each, the noun "it" refers to.
WINOGRAD_PAIR = (
    ("The trophy doesn't fit in the suitcase because it is too big.", "trophy"),
    ("The trophy doesn't fit in the suitcase because it is too small.", "suitcase"),
)

#: Winograd-style pairs, written for the course (each sentence at most 64 characters, the
#: context of the course's model): (sentence with {} for the deciding word, candidate 0,
#: candidate 1, the word that makes the pronoun candidate 0, the word that makes it candidate 1).
WINOGRAD_PAIRS = (
    (
        "The trophy doesn't fit in the suitcase because it is too {}.",
        "trophy",
        "suitcase",
        "big",
        "small",
    ),
    ("The man couldn't lift his son because he was so {}.", "man", "son", "weak", "heavy"),
    ("The fish ate the worm because it was {}.", "fish", "worm", "hungry", "tasty"),
    ("The cat caught the mouse because it was {}.", "cat", "mouse", "quick", "slow"),
    ("Joan thanked Susan for the help she had {}.", "Joan", "Susan", "received", "given"),
    ("The truck passed the bus because it was going so {}.", "truck", "bus", "fast", "slowly"),
    (
        "The table won't fit through the door because it is too {}.",
        "table",
        "door",
        "wide",
        "narrow",
    ),
    ("The knife couldn't cut the bread because it was too {}.", "knife", "bread", "dull", "hard"),
    ("The horse couldn't jump the fence because it was too {}.", "horse", "fence", "tired", "high"),
    ("The rope couldn't hold the box because it was too {}.", "rope", "box", "weak", "heavy"),
    ("The ice couldn't hold the boy because it was too {}.", "ice", "boy", "thin", "heavy"),
    ("The nail wouldn't go into the wall because it was too {}.", "nail", "wall", "bent", "hard"),
    (
        "The ladder couldn't reach the roof because it was too {}.",
        "ladder",
        "roof",
        "short",
        "high",
    ),
    ("The blanket didn't cover the bed because it was too {}.", "blanket", "bed", "small", "large"),
    ("The key wouldn't open the lock because it was {}.", "key", "lock", "bent", "rusted"),
    ("The lamp didn't light the room because it was too {}.", "lamp", "room", "dim", "large"),
    (
        "The bridge couldn't bear the truck because it was too {}.",
        "bridge",
        "truck",
        "old",
        "heavy",
    ),
    ("The wolf couldn't catch the deer because it was too {}.", "wolf", "deer", "slow", "fast"),
    ("The glove didn't fit the hand because it was too {}.", "glove", "hand", "small", "large"),
    (
        "The tent couldn't shelter the family because it was too {}.",
        "tent",
        "family",
        "small",
        "large",
    ),
    ("The dog couldn't carry the stick because it was too {}.", "dog", "stick", "young", "long"),
    ("The ship couldn't cross the river because it was too {}.", "ship", "river", "big", "shallow"),
    ("The shoe didn't fit the foot because it was too {}.", "shoe", "foot", "tight", "swollen"),
    ("The bird couldn't crack the seed because it was too {}.", "bird", "seed", "weak", "hard"),
    ("The car couldn't climb the hill because it was too {}.", "car", "hill", "old", "steep"),
    ("Anna beat Maria at chess because she was so {}.", "Anna", "Maria", "clever", "careless"),
    ("The wind couldn't move the stone because it was too {}.", "wind", "stone", "weak", "heavy"),
    ("Paul tried to call George, but he wasn't {}.", "Paul", "George", "successful", "available"),
    ("The boat couldn't carry the piano because it was too {}.", "boat", "piano", "small", "heavy"),
    ("The cup couldn't hold the tea because it was {}.", "cup", "tea", "cracked", "boiling"),
)


def pair_sentences(pairs=WINOGRAD_PAIRS) -> list[dict]:
    """Every sentence of ``pairs``, two per pair in order: {"text", "candidates" (the two
    nouns), "word" (the deciding word), "answer" (0 or 1: the candidate the pronoun refers
    to), "pair" (its pair's index)}."""
    out = []
    for i, (template, a, b, word_a, word_b) in enumerate(pairs):
        for answer, word in ((0, word_a), (1, word_b)):
            out.append(
                {
                    "text": template.format(word),
                    "candidates": (a, b),
                    "word": word,
                    "answer": answer,
                    "pair": i,
                }
            )
    return out


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


@torch.no_grad()
def candidate_attention(model, tok, sentences: list[dict]) -> torch.Tensor:
    """For each sentence of ``pair_sentences``: every head's attention from the deciding word
    to candidate 0 and to candidate 1, summed over each word's tokens (``word_attention``).

    ``model.attention_maps(ids)`` gives n_layer x (1, n_head, T, T) (the course's ``MiniGPT``
    and GPT-2 loaded into it); ``tok`` has ``encode(text)`` and ``decode([id])``.
    Returns (N, n_layer, n_head, 2).
    """
    rows = []
    for s in sentences:
        ids = torch.as_tensor(tok.encode(s["text"]))[None]  # (1, T)
        pieces = [tok.decode([i]) for i in ids[0].tolist()]  # each token's text
        att = torch.stack(model.attention_maps(ids))[:, 0]  # (n_layer, n_head, T, T)
        words, word_att = word_attention(att, pieces)  # (n_layer, n_head, W, W)
        row = word_att[:, :, words.index(s["word"])]  # (n_layer, n_head, W): from the word
        rows.append(torch.stack([row[..., words.index(c)] for c in s["candidates"]], dim=-1))
    return torch.stack(rows)  # (N, n_layer, n_head, 2)


def head_accuracy(att: torch.Tensor, answers: torch.Tensor) -> torch.Tensor:
    """The fraction of sentences on which each head attends more to the right candidate than
    to the other: att (N, n_layer, n_head, 2), answers (N,) in {0, 1} -> (n_layer, n_head)."""
    if att.dim() != 4 or att.shape[-1] != 2 or answers.shape != att.shape[:1]:
        raise ValueError(
            "head_accuracy: need att (N, n_layer, n_head, 2) and answers (N,); got "
            f"{tuple(att.shape)} and {tuple(answers.shape)}."
        )
    right = att.gather(-1, answers.long()[:, None, None, None].expand(*att.shape[:3], 1))[..., 0]
    wrong = att.sum(-1) - right  # (N, n_layer, n_head)
    return (right > wrong).double().mean(0)  # (n_layer, n_head)


def binomial_tail(k: int, n: int, p: float = 0.5) -> float:
    """P(X >= k) for X ~ Binomial(n, p): the exact one-sided p-value of k successes in n."""
    if not 0 <= k <= n:
        raise ValueError(f"binomial_tail: need 0 <= k <= n; got k={k}, n={n}.")
    return sum(math.comb(n, j) * p**j * (1 - p) ** (n - j) for j in range(k, n + 1))
