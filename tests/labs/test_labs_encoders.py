"""The experiments of Chapters 11 and 12 (course_lib.labs.vision, .mlm, .finetune): data splits,
masks, the play task, the GPT-2 name map. Training runs are marked slow."""

import re

import pytest
import torch

from course_lib.corpus import load_corpus
from course_lib.data import CharTokenizer
from course_lib.labs.finetune import (
    PlayClassifier,
    clean_play,
    finetune,
    play_data,
    play_texts,
    shuffle_words,
)
from course_lib.labs.gpt2 import gpt2_name
from course_lib.labs.mlm import encode_masked, fill_blanks
from course_lib.labs.vision import SmallCNN, digits_split, subset, train_classifier
from course_lib.model import GPTConfig, MiniGPT


@pytest.fixture(scope="module")
def tok():
    return CharTokenizer.from_text(load_corpus())


def test_digits_split_is_fixed_stratified_and_disjoint():
    a, b = digits_split(), digits_split()
    assert torch.equal(a.x_test, b.x_test) and torch.equal(a.y_train, b.y_train)
    assert len(a.y_train) + len(a.y_test) == 1797 and a.x_train.shape[1:] == (8, 8)
    assert 0.0 <= float(a.x_train.min()) and float(a.x_train.max()) <= 1.0
    # stratified: each digit in proportion to the whole set
    counts = torch.bincount(a.y_test, minlength=10)
    full = torch.bincount(torch.cat([a.y_train, a.y_test]), minlength=10)
    assert ((counts - full * len(a.y_test) / 1797).abs() <= 1).all()
    train_rows = {tuple(x.flatten().tolist()) for x in a.x_train}
    # (the data has a few duplicates)
    assert sum(tuple(x.flatten().tolist()) in train_rows for x in a.x_test) < 10


def test_subset_is_class_balanced():
    part = subset(digits_split(), 30, seed=1)
    assert torch.equal(torch.bincount(part.y_train, minlength=10), torch.full((10,), 3))
    with pytest.raises(ValueError, match="n must"):
        subset(digits_split(), 5)


def test_small_cnn_shape():
    assert SmallCNN()(torch.rand(4, 8, 8)).shape == (4, 10)


def test_encode_masked(tok):
    ids = encode_masked(tok, "a_b")
    assert ids.tolist() == [tok.stoi["a"], tok.vocab_size, tok.stoi["b"]]
    with pytest.raises(ValueError, match="outside the vocabulary"):
        encode_masked(tok, "a~b")


def test_clean_play_drops_headings_directions_and_acts():
    raw = (
        "TITLE\n\nPERSONS.\n\nACT I.\n\nSCENE 1. A room.\n\n[Enter VIOLA.]\n\n"
        "VIOLA.\nWhat country, friends, is this?\n"
    )
    assert clean_play(raw) == "What country, friends, is this?"


def test_play_data_windows_are_disjoint_and_labelled(tok):
    d = play_data(tok, 64, n_train_per_play=20, n_test_per_play=10, seed=0)
    assert d.x_train.shape == (60, 64) and d.x_test.shape == (30, 64)
    # half shuffled, half as written
    assert torch.equal(torch.bincount(d.y_train), torch.full((2,), 30))
    assert not set(d.text_train) & set(d.text_test)
    assert all(tok.decode(x) == t for x, t in zip(d.x_test, d.text_test))
    texts = play_texts()
    written = [t for t, y in zip(d.text_test, d.y_test) if y == 1]
    shuffled = [t for t, y in zip(d.text_test, d.y_test) if y == 0]
    assert all(any(t in play for play in texts.values()) for t in written)
    assert not any(any(t in play for play in texts.values()) for t in shuffled)
    # no speaker headings
    assert not any(re.search(r"^[A-Z]{3,}\.$", t, re.M) for t in d.text_train)


def test_shuffle_words_keeps_the_words_and_changes_the_order():
    g = torch.Generator().manual_seed(0)
    passage = "If music be the food of love, play on,\nGive me"
    out = shuffle_words(passage, g)
    assert out != passage and len(out) == len(passage)
    assert sorted(out.split(" ")) == sorted(passage.split(" "))
    with pytest.raises(ValueError, match="two different words"):
        shuffle_words("so so", g)


def test_gpt2_names_cover_the_state_dict_and_transpose_conv1d_weights():
    model = MiniGPT(GPTConfig(vocab_size=11, block_size=8, n_layer=2, n_head=2, d_model=16))
    mapped = {gpt2_name(n, tuple(p.shape)) for n, p in model.state_dict().items()}
    names = dict(mapped)
    # nn.Linear (48, 16) stored as Conv1D (in, out)
    assert names["transformer.h.1.attn.c_attn.weight"] == (16, 48)
    assert names["transformer.h.0.mlp.c_fc.weight"] == (16, 64)
    assert names["transformer.wte.weight"] == (11, 16) and names["transformer.wpe.weight"] == (
        8,
        16,
    )
    assert len(names) == len(model.state_dict())
    with pytest.raises(ValueError, match="no GPT-2 counterpart"):
        gpt2_name("head.weight", (3, 16))


def test_play_classifier_features_match_the_body():
    torch.manual_seed(0)
    body = MiniGPT(GPTConfig(vocab_size=11, block_size=8, n_layer=2, n_head=2, d_model=16))
    clf = PlayClassifier(body, 3)
    idx = torch.randint(11, (4, 8))
    h = body.tok_emb(idx) + body.pos_emb.table.weight[:8]
    for block in body.blocks:
        h = block(h)
    torch.testing.assert_close(clf.features(idx), body.ln_f(h)[:, -1])
    assert clf(idx).shape == (4, 3)


def test_probe_and_lora_train_only_what_they_should(tok):
    torch.manual_seed(0)
    body = MiniGPT(
        GPTConfig(vocab_size=tok.vocab_size, block_size=64, n_layer=1, n_head=2, d_model=16)
    )
    d = play_data(tok, 64, n_train_per_play=8, n_test_per_play=4)
    before = {k: v.clone() for k, v in body.state_dict().items()}
    _, probe = finetune(body, d, "probe", steps=2)
    _, lora = finetune(body, d, "lora", rank=2, steps=2)
    assert probe.trainable == 16 * 2 + 2  # the head: d x 2 classes + 2 biases
    assert lora.trainable == probe.trainable + 2 * ((16 + 48) + (16 + 16))
    # the pretrained model is copied
    assert all(torch.equal(before[k], v) for k, v in body.state_dict().items())
    with pytest.raises(ValueError, match="mode"):
        finetune(body, d, "half")


@pytest.mark.slow
def test_vit_learns_digits_quickly():
    from course_lib.labs.vision import make_vit

    r = train_classifier(make_vit(0), digits_split(), epochs=5, lr=1e-3)
    assert r.accuracy > 0.6  # chance is 0.1


@pytest.mark.slow
def test_mlm_fills_common_words(tok):
    from course_lib.data import shakespeare_splits
    from course_lib.labs.mlm import train_mlm

    s = shakespeare_splits()
    model, losses, _ = train_mlm(s.tokenizer, s.train, steps=300)
    assert sum(losses[-20:]) / 20 < sum(losses[:20]) / 20 - 1.0
    assert fill_blanks(model, s.tokenizer, "the k_ng") != "the k ng"


def test_mean_lm_loss_matches_a_per_passage_cross_entropy(tok):
    from course_lib.labs.finetune import mean_lm_loss, zero_shot

    torch.manual_seed(0)
    model = MiniGPT(
        GPTConfig(vocab_size=tok.vocab_size, block_size=64, n_layer=1, n_head=2, d_model=16)
    ).eval()
    d = play_data(tok, 64, n_train_per_play=4, n_test_per_play=4)
    got = mean_lm_loss(model, d.x_test)
    with torch.no_grad():
        want = torch.stack(
            [torch.nn.functional.cross_entropy(model(x[None])[0][0, :-1], x[1:]) for x in d.x_test]
        )
    torch.testing.assert_close(got, want)
    zs = zero_shot(model, d)
    assert 0.0 <= zs["accuracy"] <= 1.0 and set(zs) == {
        "accuracy",
        "loss_as_written",
        "loss_shuffled",
    }
