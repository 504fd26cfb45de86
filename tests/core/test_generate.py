"""course_lib.generate: decoding filters checked against brute-force loops and Hugging Face's
documented semantics; generation with a KV cache checked against recomputing every prefix."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from course_lib.generate import (
    apply_repetition_penalty,
    apply_temperature,
    distinct_n,
    generate,
    longest_repeat,
    sample_next,
    sequence_log_likelihood,
    top_k_filter,
    top_p_filter,
)
from course_lib.model import GPTConfig, MiniGPT

CFG = dict(vocab_size=23, block_size=16, n_layer=2, n_head=4, d_model=32)


def _model(**kw) -> MiniGPT:
    torch.manual_seed(0)
    model = MiniGPT(GPTConfig(**{**CFG, **kw}))
    with torch.no_grad():  # larger weights than the initialisation, so the logits vary
        for p in model.parameters():
            p.mul_(8.0) if p.dim() > 1 else None
    return model.eval()


def _logits(B=4, V=30, seed=0):
    return torch.randn(B, V, generator=torch.Generator().manual_seed(seed), dtype=torch.float64) * 2


# -- filters --------------------------------------------------------------------------------------


def _top_p_by_hand(row: list[float], p: float) -> set[int]:
    """The nucleus, as the definition says: walk the tokens from most to least likely and stop
    once the probabilities taken so far add up to p."""
    m = max(row)
    probs = [math.exp(x - m) for x in row]
    z = sum(probs)
    probs = [q / z for q in probs]
    kept, total = set(), 0.0
    for i in sorted(range(len(row)), key=lambda j: -probs[j]):
        kept.add(i)
        total += probs[i]
        if total >= p:
            break
    return kept


@pytest.mark.parametrize("p", [0.05, 0.3, 0.5, 0.9, 0.999, 1.0])
def test_top_p_keeps_the_smallest_set_reaching_p(p):
    logits = _logits(6, 40, seed=1)
    out = top_p_filter(logits, p)
    for row, filtered in zip(logits.tolist(), out):
        kept = set(torch.nonzero(torch.isfinite(filtered)).flatten().tolist())
        assert kept == _top_p_by_hand(row, p)
        fin = torch.isfinite(filtered)
        # kept logits unchanged
        assert torch.equal(filtered[fin], torch.tensor(row, dtype=torch.float64)[fin])


def test_top_p_matches_hugging_face_ascending_formulation():
    """HF TopPLogitsWarper: sort ascending, drop tokens whose cumulative probability is <= 1 - p."""
    logits = _logits(5, 50, seed=2)
    for p in (0.2, 0.7, 0.95):
        sorted_logits, idx = torch.sort(logits, descending=False)
        cum = sorted_logits.softmax(-1).cumsum(-1)
        remove = cum <= 1 - p
        remove[:, -1:] = False  # min_tokens_to_keep = 1
        want = logits.masked_fill(remove.scatter(1, idx, remove), float("-inf"))
        assert torch.equal(top_p_filter(logits, p), want)


def test_top_p_min_keep_and_bad_input():
    logits = torch.tensor([[10.0, 0.0, 0.0, 0.0]])
    assert torch.isfinite(top_p_filter(logits, 0.5)).sum() == 1
    assert torch.isfinite(top_p_filter(logits, 0.5, min_keep=3)).sum() == 3
    with pytest.raises(ValueError, match=r"\(0, 1\]"):
        top_p_filter(logits, 0.0)
    with pytest.raises(ValueError, match=r"\(B, V\)"):
        top_p_filter(logits[0], 0.5)


def test_top_k_keeps_the_k_largest():
    logits = _logits(4, 30, seed=3)
    for k in (1, 5, 30):
        out = top_k_filter(logits, k)
        for row, filtered in zip(logits, out):
            want = set(sorted(range(30), key=lambda j: -float(row[j]))[:k])
            assert set(torch.nonzero(torch.isfinite(filtered)).flatten().tolist()) == want
    with pytest.raises(ValueError, match="k must lie"):
        top_k_filter(logits, 31)


def test_repetition_penalty_follows_the_ctrl_rule():
    logits = _logits(2, 10, seed=4).float()
    prev = torch.tensor([[1, 1, 3, 7], [0, 2, 2, 2]])
    out = apply_repetition_penalty(logits, prev, 1.3)
    for b in range(2):
        for v in range(10):
            s = float(logits[b, v])
            want = (s / 1.3 if s > 0 else s * 1.3) if v in prev[b].tolist() else s
            assert float(out[b, v]) == pytest.approx(want, rel=1e-6)
    assert torch.equal(apply_repetition_penalty(logits, prev, 1.0), logits)
    assert (out[0, [1, 3, 7]] < logits[0, [1, 3, 7]]).all()  # every seen token moves down
    with pytest.raises(ValueError, match="penalty must be > 0"):
        apply_repetition_penalty(logits, prev, 0.0)


def test_temperature_and_sample_next():
    logits = _logits(3, 12, seed=5).float()
    assert torch.allclose(apply_temperature(logits, 0.5).softmax(-1), (logits * 2).softmax(-1))
    assert torch.equal(sample_next(logits, temperature=0), logits.argmax(-1, keepdim=True))
    assert torch.equal(
        sample_next(logits, top_k=1, generator=torch.Generator().manual_seed(0)),
        logits.argmax(-1, keepdim=True),
    )
    # draws follow the filtered distribution: empirical frequencies match the softmax
    row = logits[:1].expand(20000, 12)
    draws = sample_next(
        row, temperature=0.7, top_p=0.8, generator=torch.Generator().manual_seed(1)
    )[:, 0]
    freq = torch.bincount(draws, minlength=12).float() / 20000
    want = F.softmax(top_p_filter(logits[:1] / 0.7, 0.8), -1)[0]
    assert (freq - want).abs().max() < 0.02
    assert set(draws.unique().tolist()) == set(torch.nonzero(want).flatten().tolist())
    with pytest.raises(ValueError, match="prev_ids"):
        sample_next(logits, repetition_penalty=1.2)
    with pytest.raises(ValueError, match="temperature"):
        sample_next(logits, temperature=-1)


def test_longest_repeat_finds_the_longest_stretch_written_twice():
    import random

    assert longest_repeat("abcabc") == 3 and longest_repeat("abcd") == 0
    assert longest_repeat("aaaa") == 3  # occurrences may overlap
    assert longest_repeat([1, 2, 3, 9, 1, 2, 3]) == 3
    rng = random.Random(0)
    for _ in range(50):  # against brute force over every pair of substrings
        s = "".join(rng.choice("ab") for _ in range(rng.randint(1, 12)))
        brute = max(
            (
                n
                for n in range(1, len(s))
                for i in range(len(s))
                for j in range(i + 1, len(s))
                if s[i : i + n] == s[j : j + n] and i + n <= len(s) and j + n <= len(s)
            ),
            default=0,
        )
        assert longest_repeat(s) == brute, s


def test_distinct_n_and_log_likelihood():
    assert distinct_n([1, 2, 3, 4], 2) == 1.0
    assert distinct_n([1, 2, 1, 2, 1, 2], 2) == pytest.approx(2 / 5)
    with pytest.raises(ValueError, match="shorter"):
        distinct_n([1], 2)
    model = _model()
    # longer than block_size 16
    ids = torch.randint(23, (1, 40), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        for start in (1, 5, 16, 23):
            # token t scored by a separate forward pass on the (at most 16) tokens before it
            want = [
                float(
                    F.log_softmax(model(ids[:, max(0, t - 16) : t])[0][0, -1].double(), -1)[
                        ids[0, t]
                    ]
                )
                for t in range(start, 40)
            ]
            assert sequence_log_likelihood(model, ids, start) == pytest.approx(
                sum(want) / len(want), abs=1e-5
            )


# -- generation with and without the KV cache -----------------------------------------------------


@pytest.mark.parametrize(
    "kw", [{}, {"pos": "rope"}, {"n_kv_heads": 1}, {"pos": "rope", "n_kv_heads": 2}]
)
@pytest.mark.parametrize(
    "sampling", [dict(temperature=0), dict(temperature=1.0, top_p=0.9, repetition_penalty=1.2)]
)
def test_cache_gives_the_same_logits_as_recomputing_every_step(kw, sampling):
    """Every step's logits agree to float tolerance; the tokens are the same. 30 new tokens
    from a 4-token prompt pass block_size=16: the learned model then recomputes the window, the
    RoPE model slides its cache (and still equals recomputing the cropped window)."""
    model = _model(**kw)
    prompt = torch.randint(23, (2, 4), generator=torch.Generator().manual_seed(1))
    runs = [
        generate(
            model,
            prompt,
            30,
            generator=torch.Generator().manual_seed(2),
            use_cache=c,
            return_logits=True,
            **sampling,
        )
        for c in (False, True)
    ]
    (ids_plain, logits_plain), (ids_cached, logits_cached) = runs
    assert torch.equal(ids_plain, ids_cached)
    assert len(logits_plain) == 30
    for a, b in zip(logits_plain, logits_cached):
        torch.testing.assert_close(b, a, rtol=1e-4, atol=1e-4)


def test_generate_keeps_mode_and_device_and_crops():
    model = _model().train()
    prompt = torch.zeros(1, 20, dtype=torch.long)  # longer than block_size: cropped to the last 16
    out = model.generate(prompt, 3, temperature=0)
    assert model.training and out.shape == (1, 23) and out.device == prompt.device
    want = model.eval()(prompt[:, -16:])[0][:, -1].argmax(-1)
    assert int(out[0, 20]) == int(want)
    with pytest.raises(ValueError, match="max_new_tokens"):
        generate(model, prompt, -1)
