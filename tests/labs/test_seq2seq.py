"""The number-words translator (course_lib.labs.seq2seq, course_lib.labs.translate) against
references: the encoder–decoder computes what torch.nn.Transformer(norm_first=True) computes with
the same weights; padding and the causal mask hide what they should; beam search with a beam as
wide as every prefix finds what brute force finds; BLEU is sacrebleu's; the data split is
disjoint and seeded; and (slow) the chapter's run, in each test build, translates held-out
numbers."""

import itertools
import math

import pytest
import sacrebleu
import torch
from build_support import get_build, page_builds
from torch import nn

from course_lib.labs.seq2seq import (
    BOS,
    EOS,
    PAD,
    Seq2Seq,
    Seq2SeqConfig,
    Vocab,
    aligned_words,
    cross_attention_maps,
    english,
    french,
    join_words,
    number_pairs,
    torch_transformer_from,
    words,
)
from course_lib.labs.translate import (
    TrainSettings,
    beam_search,
    corpus_bleu,
    error_kind,
    evaluate,
    exact_match,
    exhaustive_search,
    greedy_decode,
    length_penalty,
    train,
    translate,
)
from tools import reader
from tools.claims import Values
from tools.spread import measured_range

TINY = Seq2SeqConfig(
    src_vocab=9,
    tgt_vocab=11,
    max_src_len=7,
    max_tgt_len=8,
    n_enc_layer=2,
    n_dec_layer=2,
    n_head=2,
    d_model=16,
)


def random_model(cfg=TINY, seed=0, std=0.3) -> Seq2Seq:
    """A Seq2Seq with large random weights (GPT's 0.02 init would make every output look alike)."""
    torch.manual_seed(seed)
    model = Seq2Seq(cfg)
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn(p.shape, generator=g) * std)
    return model.eval()


def padded_batch(cfg=TINY, lengths=(7, 4, 2), seed=1) -> torch.Tensor:
    """Source ids (B, S) with the given true lengths, <pad> after them."""
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(3, cfg.src_vocab, (len(lengths), max(lengths)), generator=g)
    for i, n in enumerate(lengths):
        src[i, n:] = PAD
    return src


# --------------------------------------------------------------------------- the model vs PyTorch
def test_equals_torch_transformer_with_padding_and_causal_mask():
    model = random_model()
    src = padded_batch()  # (3, 7): two rows padded
    tgt_in = torch.cat(
        [torch.full((3, 1), BOS), torch.randint(3, TINY.tgt_vocab, (3, 6))], dim=1
    )  # (3, 7)
    ref = torch_transformer_from(model)
    with torch.no_grad():
        memory, keep = model.encode(src)
        ours = model.decode(tgt_in, memory, keep)  # (3, 7, 16)
        theirs = ref(
            model.src_pos(model.src_emb(src)),
            model.tgt_pos(model.tgt_emb(tgt_in)),
            tgt_mask=nn.Transformer.generate_square_subsequent_mask(7),
            tgt_is_causal=True,
            src_key_padding_mask=src == PAD,
            memory_key_padding_mask=src == PAD,
        )
        their_memory = ref.encoder(
            model.src_pos(model.src_emb(src)), src_key_padding_mask=src == PAD
        )
    assert ours.abs().max() > 0.1  # not a trivially small output
    torch.testing.assert_close(ours, theirs, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(
        memory[keep], their_memory[keep], atol=1e-5, rtol=1e-5
    )  # PyTorch may zero pad rows
    # the comparison sees the cross-attention: change one of its weights and the outputs differ
    with torch.no_grad():
        model.blocks[1].cross.kv.weight.mul_(2.0)
        assert (model.decode(tgt_in, *model.encode(src)) - theirs).abs().max() > 1e-3


def test_course_lib_attention_path_equals_fused():
    fused = random_model()
    slow = Seq2Seq(Seq2SeqConfig(**{**TINY.to_dict(), "attention": "course_lib"}))
    slow.load_state_dict(fused.state_dict())
    src, tgt_in = padded_batch(), torch.randint(1, TINY.tgt_vocab, (3, 5))
    with torch.no_grad():
        torch.testing.assert_close(
            slow.eval()(src, tgt_in)[0], fused(src, tgt_in)[0], atol=1e-5, rtol=1e-5
        )


def test_padding_changes_nothing_and_gets_zero_attention():
    model = random_model()
    src = padded_batch(lengths=(3,))  # (1, 3), no padding
    tgt_in = torch.tensor([[BOS, 4, 5, 6]])
    extra = torch.cat([src, torch.full((1, 4), PAD)], dim=1)  # the same source with 4 pads after it
    with torch.no_grad():
        a, _ = model(src, tgt_in)
        b, _ = model(extra, tgt_in)
    torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)
    maps = cross_attention_maps(model, padded_batch(), torch.randint(1, TINY.tgt_vocab, (3, 5)))
    keep = padded_batch() != PAD  # (3, 7)
    for w in maps:  # (B, n_head, T, S)
        assert w.shape == (3, TINY.n_head, 5, 7)
        assert (w.masked_select(~keep[:, None, None, :]) == 0).all()  # no weight on padding
        torch.testing.assert_close(w.sum(-1), torch.ones(3, TINY.n_head, 5))
        assert (w.masked_select(keep[:, None, None, :]) > 0).all()


def test_aligned_words_reads_the_cross_attention_argmax():
    data = number_pairs(n_train=40, n_val=0, n_test=12, seed=2)
    cfg = Seq2SeqConfig(
        len(data.src_vocab),
        len(data.tgt_vocab),
        data.max_src_len,
        data.max_tgt_len,
        n_enc_layer=1,
        n_dec_layer=2,
        n_head=2,
        d_model=16,
    )
    model = random_model(cfg)
    counts = aligned_words(model, data, "test", n=12, layer=0)
    src, tgt = data.tensors("test")
    w = cross_attention_maps(model, src, tgt[:, :-1])[0]  # (12, n_head, T, S)
    want = {}
    for b in range(12):  # by hand: the French words after <bos>, <eos> included
        fr = [data.tgt_vocab.itos[i] for i in tgt[b, 1:].tolist() if i != PAD]
        for t, word in enumerate(fr):
            s = int(w[b, :, t].mean(0).argmax())
            want.setdefault(word, []).append(data.src_vocab.itos[int(src[b, s])])
    assert {k: sorted(v.elements()) for k, v in counts.items()} == {
        k: sorted(v) for k, v in want.items()
    }
    assert "<pad>" not in counts and "<pad>" not in {e for c in counts.values() for e in c}


def test_evaluate_scores_its_own_translations():
    """``evaluate``'s numbers, recomputed from the translations it returns: greedy and beam are
    ``translate``'s, exact match counted by hand, BLEU sacrebleu's, the error kinds
    ``error_kind``'s (a briefly trained model: partly right, so BLEU is not zero)."""
    data = number_pairs(n_train=200, n_val=20, n_test=40, max_number=1000, seed=0)
    cfg = Seq2SeqConfig(
        len(data.src_vocab), len(data.tgt_vocab), data.max_src_len, data.max_tgt_len,
        n_enc_layer=1, n_dec_layer=1, d_model=32,
    )  # fmt: skip
    model, _ = train(data, cfg, TrainSettings(steps=150, batch_size=32, warmup=5, eval_every=150))
    out = evaluate(model, data, "test", beam_size=3, alpha=0.6)
    refs = data.tgt["test"]
    assert out["n"] == len(refs) == 40
    for method, opts in (("greedy", {}), ("beam", {"beam_size": 3, "alpha": 0.6})):
        hyps = out[f"hyps_{method}"]
        assert hyps == translate(model, data, data.src["test"], method, **opts)
        assert out[f"exact_{method}"] == sum(h == r for h, r in zip(hyps, refs)) / len(refs)
        bleu = _sacre([words(h) for h in hyps], [words(r) for r in refs]).score
        assert bleu > 0 and out[f"bleu_{method}"] == pytest.approx(bleu, abs=1e-9)
        kinds = [error_kind(h, r) for h, r in zip(hyps, refs)]
        assert out[f"errors_{method}"] == {k: kinds.count(k) for k in set(kinds) if k}


def test_future_target_tokens_do_not_change_earlier_outputs():
    model = random_model()
    src = padded_batch()
    tgt_in = torch.randint(1, TINY.tgt_vocab, (3, 8))
    changed = tgt_in.clone()
    changed[:, 5:] = (changed[:, 5:] + 1) % TINY.tgt_vocab  # rewrite the future from position 5 on
    with torch.no_grad():
        a, b = model(src, tgt_in)[0], model(src, changed)[0]  # (3, 8, V)
    torch.testing.assert_close(a[:, :5], b[:, :5], atol=1e-6, rtol=1e-6)
    assert (a[:, 5:] - b[:, 5:]).abs().max() > 1e-3  # ... while the later positions do see it


def test_loss_is_teacher_forced_cross_entropy_without_pads():
    model = random_model()
    src = padded_batch()
    tgt = torch.tensor([[BOS, 4, 5, EOS, PAD], [BOS, 6, EOS, PAD, PAD], [BOS, 3, 4, 5, EOS]])
    logits, loss = model(src, tgt[:, :-1], tgt[:, 1:])
    logp = torch.log_softmax(logits, -1)
    picked = [
        -logp[b, t, tgt[b, t + 1]] for b in range(3) for t in range(4) if tgt[b, t + 1] != PAD
    ]
    torch.testing.assert_close(loss, torch.stack(picked).mean())


# --------------------------------------------------------------------------- decoding
SEARCH = Seq2SeqConfig(
    src_vocab=8,
    tgt_vocab=6,
    max_src_len=6,
    max_tgt_len=4,
    n_enc_layer=1,
    n_dec_layer=1,
    n_head=2,
    d_model=16,
)  # targets: <pad> <bos> <eos> and three words, at most 3 tokens
SEARCH_SRC = padded_batch(SEARCH, lengths=(6, 3, 5, 1, 4, 2), seed=3)


def candidates(model, max_len):
    """Every finished output: some words then <eos>, or max_len words. Returns them and the
    teacher-forcing batch (N, max_len + 1) <bos> ... <pad>."""
    words_ = range(3, model.cfg.tgt_vocab)
    cands = [list(c) + [EOS] for n in range(max_len) for c in itertools.product(words_, repeat=n)]
    cands += [list(c) for c in itertools.product(words_, repeat=max_len)]
    tgt = torch.full((len(cands), max_len + 1), PAD)
    for i, c in enumerate(cands):
        tgt[i, : len(c) + 1] = torch.tensor([BOS, *c])
    return cands, tgt


def normalised_scores(model, src_row, tgt, alpha):
    """log P(Y | X) / lp(Y) of each row of tgt (<bos> Y <pad>...) from one teacher-forced pass."""
    with torch.no_grad():
        logits, _ = model(src_row[None].expand(len(tgt), -1), tgt[:, :-1])  # (N, T, V)
    logits[..., [PAD, BOS]] = float("-inf")  # the decoders never write these
    y = tgt[:, 1:]
    logp = (
        torch.log_softmax(logits, -1)
        .gather(-1, y[..., None])[..., 0]
        .masked_fill(y == PAD, 0.0)
        .sum(-1)
    )  # (N,)
    return logp / length_penalty((y != PAD).sum(-1).float(), alpha)


def brute_force(model, src, max_len, alpha):
    """The best finished output of every source by exhaustive search: (ids, normalised score)."""
    cands, tgt = candidates(model, max_len)
    best = []
    for s in src:
        scores = normalised_scores(model, s, tgt, alpha)
        i = int(scores.argmax())
        best.append(([t for t in cands[i] if t != EOS], float(scores[i])))
    return best


def as_batch(ids, max_len):
    """Decoded ids (no <eos>) -> the teacher-forcing row <bos> ids [<eos>] <pad>..."""
    row = [BOS, *ids] + ([EOS] if len(ids) < max_len else [])
    return torch.tensor([row + [PAD] * (max_len + 1 - len(row))])


@pytest.mark.parametrize("alpha", [0.0, 0.6, 2.0])
def test_wide_beam_equals_exhaustive_search(alpha):
    max_len, n_words = 3, 3
    misses = 0
    for seed, std in itertools.product(
        range(6), (0.5, 1.0)
    ):  # std 0.5: flatter, so longer outputs can win late
        model = random_model(SEARCH, seed=seed, std=std)
        want = brute_force(model, SEARCH_SRC, max_len, alpha)
        got, scores = beam_search(
            model, SEARCH_SRC, beam_size=n_words**max_len, alpha=alpha, max_len=max_len
        )
        assert got == [ids for ids, _ in want]
        torch.testing.assert_close(scores, torch.tensor([s for _, s in want]), atol=1e-5, rtol=1e-5)
        narrow, narrow_scores = beam_search(
            model, SEARCH_SRC, beam_size=1, alpha=alpha, max_len=max_len
        )
        assert (
            narrow_scores <= scores + 1e-5
        ).all()  # a narrow beam may miss the best, never beat it
        for s, ids, sc in zip(
            SEARCH_SRC, narrow, narrow_scores
        ):  # ... and its score is its output's
            assert float(
                normalised_scores(model, s, as_batch(ids, max_len), alpha)
            ) == pytest.approx(float(sc), abs=1e-5)
        misses += sum(a != b for a, b in zip(narrow, got))
    assert misses > 0  # the tiny problem is not trivial: a beam of one does miss the best output


@pytest.mark.parametrize("alpha", [0.0, 0.6])
def test_exhaustive_search_equals_brute_force(alpha):
    """The library's exhaustive search (what the chapter compares the decoders with) finds what
    this file's brute force finds, and refuses a vocabulary too large to enumerate."""
    for seed in range(3):
        model = random_model(SEARCH, seed=seed, std=1.0)
        want = brute_force(model, SEARCH_SRC, 3, alpha)
        got, scores = exhaustive_search(model, SEARCH_SRC, alpha=alpha, max_len=3)
        assert got == [ids for ids, _ in want]
        torch.testing.assert_close(scores, torch.tensor([s for _, s in want]), atol=1e-5, rtol=1e-5)
    with pytest.raises(ValueError, match="tiny vocabularies"):
        exhaustive_search(random_model(), padded_batch(), max_len=8)


def test_beam_of_one_is_at_least_as_good_as_greedy():
    """A beam of one follows greedy's path but also keeps every <eos> it passed, so its output
    scores at least as high as greedy's (and often is greedy's)."""
    for seed in range(3):
        model = random_model(SEARCH, seed=seed, std=1.0)
        greedy = greedy_decode(model, SEARCH_SRC, max_len=3)
        beam, scores = beam_search(model, SEARCH_SRC, beam_size=1, alpha=0.0, max_len=3)
        for s, g, sc in zip(SEARCH_SRC, greedy, scores):
            assert float(normalised_scores(model, s, as_batch(g, 3), 0.0)) <= float(sc) + 1e-5


def test_greedy_takes_the_argmax_step_by_step():
    model = random_model(SEARCH, seed=6, std=1.0)
    src = padded_batch(SEARCH, lengths=(6, 2), seed=7)
    out = greedy_decode(model, src, max_len=4)
    with torch.no_grad():
        for s, ids in zip(src, out):
            prefix = [BOS]
            for _ in range(4):
                logits = model(s[None], torch.tensor([prefix]))[0][0, -1]
                logits[[PAD, BOS]] = float("-inf")
                prefix.append(int(logits.argmax()))
                if prefix[-1] == EOS:
                    break
            assert ids == [t for t in prefix[1:] if t != EOS]


def test_length_penalty_is_gnmt():
    assert length_penalty(7, 0.6) == pytest.approx(2**0.6)  # (5 + 7) / 6 = 2
    assert length_penalty(1, 0.6) == pytest.approx(1.0)  # one token: no penalty
    assert length_penalty(12, 0.0) == 1.0  # alpha 0: plain log-probability
    torch.testing.assert_close(
        length_penalty(torch.tensor([1.0, 13.0]), 1.0), torch.tensor([1.0, 3.0])
    )
    with pytest.raises(ValueError):
        length_penalty(3, -0.1)


# --------------------------------------------------------------------------- metrics
def _sacre(hyps, refs):
    return sacrebleu.corpus_bleu(
        [" ".join(h) for h in hyps],
        [[" ".join(r) for r in refs]],
        tokenize="none",
        smooth_method="none",
        force=True,
    )


def _random_sets():
    g = torch.Generator().manual_seed(0)
    vocab = "le chat est sur tapis un deux trois".split()

    def sent(n):
        return [vocab[int(i)] for i in torch.randint(len(vocab), (n,), generator=g)]

    refs = [sent(int(n)) for n in torch.randint(4, 12, (20,), generator=g)]
    near = [r[:] for r in refs]
    for h in near:  # a few words changed: every n-gram order still matches somewhere
        h[int(torch.randint(len(h), (1,), generator=g))] = "chien"
    return {
        "near": (near, refs),
        "short (brevity penalty)": ([h[: max(4, len(h) - 3)] for h in near], refs),
        "long (no penalty)": ([h + ["et", "puis"] for h in near], refs),
        "repeats (clipping)": ([h[:2] * 3 for h in refs], refs),
        "perfect": (refs, refs),
        "numbers": (
            [words(french(n + (n % 7 == 0))) for n in range(1000, 1060)],
            [words(french(n)) for n in range(1000, 1060)],
        ),
        "no 4-gram match": (
            [["a", "b", "c", "d"], ["b", "c", "d", "a"]],
            [["a", "b", "c", "x", "b", "c", "d", "a"]] * 2,
        ),
    }


@pytest.mark.parametrize("name", list(_random_sets()))
def test_bleu_equals_sacrebleu(name):
    hyps, refs = _random_sets()[name]
    ours, theirs = corpus_bleu(hyps, refs), _sacre(hyps, refs)
    assert ours["bleu"] == pytest.approx(theirs.score, abs=1e-9)
    assert ours["bp"] == pytest.approx(theirs.bp, abs=1e-12)
    assert ours["precisions"] == pytest.approx(theirs.precisions, abs=1e-9)
    assert (ours["sys_len"], ours["ref_len"]) == (theirs.sys_len, theirs.ref_len)
    if name.startswith("short"):
        assert ours["bp"] < 1
    if name == "perfect":
        assert ours["bleu"] == pytest.approx(100.0)


def test_bleu_clips_repeated_words_by_hand():
    # Papineni et al.'s example: "the the the the the the the" against "the cat is on the mat": p1
    # = 2/7
    out = corpus_bleu([["the"] * 7], [["the", "cat", "is", "on", "the", "mat"]], max_n=1)
    assert out["precisions"][0] == pytest.approx(100 * 2 / 7)
    assert out["bleu"] == pytest.approx(
        100 * 2 / 7
    )  # longer than the reference: no brevity penalty


def test_exact_match_and_error_kinds():
    assert exact_match(["a", "b", "c", "d"], ["a", "b", "x", "d"]) == 0.75
    with pytest.raises(ValueError):
        exact_match(["a"], ["a", "b"])
    assert error_kind("deux cents", "deux cents") is None
    assert error_kind("deux cent", "deux cents") == "agreement"
    assert error_kind("vingt-un mille", "vingt et un mille") == "et"
    assert error_kind("trois cent un", "trois mille un") == "mille"
    assert error_kind("trois mille deux", "trois mille un") == "hundreds"
    assert error_kind("quatre mille un", "trois mille un") == "thousands"
    assert error_kind("quatre mille deux", "trois mille un") == "both"
    assert error_kind("dix-sept", "dix-huit") == "hundreds"


# --------------------------------------------------------------------------- data and tokens
def test_tokenizer_round_trip():
    numbers = [
        0,
        1,
        17,
        21,
        71,
        80,
        81,
        97,
        100,
        101,
        200,
        201,
        1000,
        1001,
        1100,
        21000,
        80000,
        200000,
        999999,
        *torch.randint(1_000_000, (150,), generator=torch.Generator().manual_seed(0)).tolist(),
    ]
    for lang in (english, french):
        texts = [lang(n) for n in numbers]
        vocab = Vocab(texts)
        assert vocab.itos[:3] == ["<pad>", "<bos>", "<eos>"]
        for t in texts:
            ids = vocab.encode(t)
            assert min(ids) > EOS  # no special ids inside a sentence
            assert vocab.decode(ids) == t and vocab.decode([BOS, *ids, EOS, PAD]) == t
            assert join_words(words(t)) == t
    assert words("quatre-vingt-dix-sept") == ["quatre", "-", "vingt", "-", "dix", "-", "sept"]
    assert words("one thousand, one hundred") == ["one", "thousand", ",", "one", "hundred"]
    with pytest.raises(ValueError, match="not in the vocabulary"):
        Vocab(["un deux"]).encode("trois")


def test_split_is_disjoint_seeded_and_consistent():
    a = number_pairs(n_train=300, n_val=50, n_test=80, seed=0)
    b = number_pairs(n_train=300, n_val=50, n_test=80, seed=0)
    c = number_pairs(n_train=300, n_val=50, n_test=80, seed=1)
    sets = {k: set(v) for k, v in a.numbers.items()}
    assert {k: len(v) for k, v in sets.items()} == {"train": 300, "val": 50, "test": 80}
    assert (
        not (sets["train"] & sets["test"])
        and not (sets["train"] & sets["val"])
        and not (sets["val"] & sets["test"])
    )
    assert a.numbers == b.numbers and a.tgt == b.tgt and a.src_vocab.itos == b.src_vocab.itos
    assert a.numbers["test"] != c.numbers["test"]
    assert all(0 <= n < 1_000_000 for v in a.numbers.values() for n in v)
    assert a.src["test"][5] == english(a.numbers["test"][5]) and a.tgt["train"][7] == french(
        a.numbers["train"][7]
    )
    src, tgt = a.tensors("train")
    assert src.shape == (300, a.max_src_len) and tgt.shape == (300, a.max_tgt_len)
    assert (tgt[:, 0] == BOS).all() and ((tgt == EOS).sum(1) == 1).all()
    for i in (0, 99):
        assert (
            a.tgt_vocab.decode(tgt[i]) == a.tgt["train"][i]
            and a.src_vocab.decode(src[i]) == a.src["train"][i]
        )
    with pytest.raises(ValueError):
        number_pairs(n_train=10, n_val=5, n_test=5, max_number=12)


def test_training_is_reproducible_and_learns():
    data = number_pairs(n_train=200, n_val=20, n_test=0, max_number=1000, seed=0)
    cfg = Seq2SeqConfig(
        len(data.src_vocab),
        len(data.tgt_vocab),
        data.max_src_len,
        data.max_tgt_len,
        n_enc_layer=1,
        n_dec_layer=1,
        d_model=32,
    )
    settings = TrainSettings(steps=30, batch_size=32, warmup=5, eval_every=10)
    m1, h1 = train(data, cfg, settings, snapshots=(10, 30))
    m2, h2 = train(data, cfg, settings)
    assert h1["train_loss"] == h2["train_loss"] and h1["val_loss"] == h2["val_loss"]
    assert all(
        torch.equal(p, q) for p, q in zip(m1.state_dict().values(), m2.state_dict().values())
    )
    assert h1["val_step"] == [10, 20, 30]
    # snapshots: the final one is the trained model; an earlier one gives that step's val loss
    assert sorted(h1["snapshots"]) == [10, 30] and h2["snapshots"] == {}
    assert all(torch.equal(h1["snapshots"][30][k], v) for k, v in m1.state_dict().items())
    early = Seq2Seq(cfg)
    early.load_state_dict(h1["snapshots"][10])
    src_val, tgt_val = data.tensors("val")
    with torch.no_grad():
        _, loss10 = early.eval()(src_val, tgt_val[:, :-1], tgt_val[:, 1:])
    assert float(loss10) == pytest.approx(h1["val_loss"][0], rel=1e-4)
    with pytest.raises(ValueError, match="snapshot"):
        train(data, cfg, settings, snapshots=(31,))
    assert h1["val_loss"][-1] < 0.8 * math.log(
        len(data.tgt_vocab)
    )  # below a uniform guess after 30 steps
    assert not m1.training


# --------------------------------------------------------------------------- the chapter's run
@pytest.mark.slow
@pytest.mark.parametrize("build", [b for _, b in page_builds(["book/14_translation"])])
def test_chapter_config_translates_held_out_numbers(build, request):
    """The chapter's run: the defaults of number_pairs, Seq2SeqConfig and TrainSettings (500
    steps), as each of the test run's builds computed it (this CPU's path, and the simulated
    AVX2 laptop's). Measured on 2 threads (2026-11-25, seeds 0, 1, 2;
    benchmarks/seq2seq_bench.py): exact match on the 1,000 held-out numbers 0.997, 0.996,
    0.996, greedy and beam alike. The threshold, 98 %, leaves room for another CPU's rounding
    sending training down a slightly different path; the issue's target is 95 %. The learned
    alignment: French digit words read their English digit word, as many of them as the
    measurement saw (``tools.spread``; which English word a French word reads most is a
    training run's measurement: on one machine *cent* reads *hundred*, on another *thousand*),
    and most of them.

    (The test trained the model itself before: the builds train the same model on two CPU
    paths, so it reads what they computed; ``evaluate`` and ``corpus_bleu`` are tested against
    their definitions and sacrebleu above.)"""
    glue = reader.site_data_from_build(get_build(request, build).path)["pages"]
    v = Values(glue["book/14_translation"]["glue"])
    assert v.num("em_greedy") >= 98.0 and v.num("em_beam") >= 98.0, (
        v.num("em_greedy"),
        v.num("em_beam"),
    )
    own = int(v.num("digits_own"))
    low, high = measured_range("book/14_translation", "digits_own")
    assert low <= own <= high, (own, low, high)
    assert own > 4, "most digit words read their English digit (Chapter 14 says so)"
