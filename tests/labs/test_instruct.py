"""The instruction set, its template and special tokens, and SFT with the prompt masked
(course_lib.labs.instruct)."""

from __future__ import annotations

import random

import pytest
import torch
import torch.nn.functional as F

from course_lib.corpus import load_corpus
from course_lib.data import CharTokenizer
from course_lib.labs.instruct import (
    END,
    HELD_OUT_PLAYS,
    IGNORE_INDEX,
    INSTRUCTION,
    RESPONSE,
    SPECIALS,
    TASKS,
    Example,
    encode_example,
    extend_vocab,
    format_prompt,
    instruction_set,
    make_example,
    mask_prompt_targets,
    sft,
    sft_batch,
    with_specials,
)
from course_lib.model import GPTConfig, MiniGPT


def test_specials_never_occur_in_the_corpus_and_keep_old_ids():
    text = load_corpus()
    assert not any(s in text for s in SPECIALS)
    tok = CharTokenizer.from_text(text)
    big = with_specials(tok)
    assert big.vocab_size == tok.vocab_size + 3
    assert all(big.stoi[c] == i for c, i in tok.stoi.items())
    assert {big.stoi[s] for s in SPECIALS} == {81, 82, 83}  # appended after the old ids
    with pytest.raises(ValueError, match="already"):
        with_specials(big)


def test_extend_vocab_keeps_the_old_model():
    torch.manual_seed(0)
    model = MiniGPT(GPTConfig(vocab_size=10, block_size=16, n_layer=1, n_head=2, d_model=8))
    big = extend_vocab(model, 3)
    x = torch.randint(10, (2, 7))
    old, new = model(x)[0], big(x)[0]  # (2, 7, 10), (2, 7, 13)
    assert torch.allclose(new[..., :10], old, atol=1e-6)  # old tokens: the same logits
    w = big.tok_emb.weight
    assert torch.allclose(w[10:], model.tok_emb.weight.mean(0).expand(3, -1))
    assert big.lm_head.weight is big.tok_emb.weight  # still tied


def test_examples_follow_the_template():
    rng = random.Random(0)
    line = "What lady she her lord.--You'll stay?"
    assert make_example(line, "First word?", "p", rng).response == "What"
    assert make_example(line, "End mark?", "p", rng).response == "question"
    nxt = make_example(line, "Next word?", "p", rng)
    assert line.startswith(nxt.input + " " + nxt.response)
    assert make_example("Too short", "First word?", "p", rng) is None
    assert make_example("x " * 30, "First word?", "p", rng) is None  # longer than MAX_LINE
    assert format_prompt("First word?", "a b c") == f"{INSTRUCTION}First word?\na b c{RESPONSE}"


def test_instruction_set_holds_out_plays():
    test = instruction_set(held_out=True, n_per_task=20, seed=1)
    train = instruction_set(held_out=False, n_per_task=50, seed=0)
    assert [e.instruction for e in test[:3]] == list(TASKS)
    assert all(any(e.play.startswith(p) for p in HELD_OUT_PLAYS) for e in test)
    assert not any(any(e.play.startswith(p) for p in HELD_OUT_PLAYS) for e in train)
    assert len(train) == 150 and len({(e.instruction, e.input) for e in train}) == 150


def test_mask_prompt_targets():
    ids = torch.arange(10)
    x, y = mask_prompt_targets(ids, prompt_len=4)
    assert torch.equal(x, ids[:-1])
    assert y.tolist() == [IGNORE_INDEX] * 3 + [4, 5, 6, 7, 8, 9]
    with pytest.raises(ValueError, match="prompt_len"):
        mask_prompt_targets(ids, prompt_len=10)


def test_masked_loss_is_the_response_loss():
    """The masked batch's cross-entropy equals the mean loss of the response tokens alone,
    computed token by token."""
    tok = with_specials(CharTokenizer("abcdefghijklmnopqrstuvwxyz ?\n"))
    exs = [Example("a?", "bc de", "fg", "p"), Example("a?", "hij k", "lmn", "p")]
    torch.manual_seed(0)
    model = MiniGPT(
        GPTConfig(vocab_size=tok.vocab_size, block_size=32, n_layer=1, n_head=2, d_model=16)
    )
    x, y = sft_batch(tok, exs, 32, mask_prompt=True)
    logits = model(x)[0]
    got = F.cross_entropy(logits.flatten(0, 1), y.flatten(), ignore_index=IGNORE_INDEX)
    terms = []
    for ex in exs:
        ids, n = encode_example(tok, ex)
        lp = torch.log_softmax(model(ids[None, :-1])[0][0], -1)
        terms += [-lp[t - 1, ids[t]] for t in range(n, len(ids))]  # response + END only
    assert len(terms) == 7
    assert got.item() == pytest.approx(torch.stack(terms).mean().item(), abs=1e-5)
    _, y_all = sft_batch(tok, exs, 32, mask_prompt=False)
    assert (y_all != IGNORE_INDEX).sum() > (y != IGNORE_INDEX).sum()
    assert (y[0] == tok.stoi[END]).sum() == 1


def test_sft_learns_a_toy_instruction():
    tok = with_specials(CharTokenizer("abcdefghijklmnopqrstuvwxyz ?\n"))
    exs = [Example("up?", w, w[0], "p") for w in ["abc", "bcd", "cde", "def", "efg"]]
    torch.manual_seed(0)
    model = MiniGPT(
        GPTConfig(vocab_size=tok.vocab_size, block_size=32, n_layer=1, n_head=2, d_model=32)
    )
    losses = sft(model, tok, exs, steps=60, lr=1e-2, batch_size=8)
    assert losses[-1] < 0.3 * losses[0]
