"""GPT-2 inside MiniGPT (course_lib.labs.gpt2, GPTConfig.gpt2, bpe.GPT2FormatTokenizer), checked
against Hugging Face transformers and tokenizers offline: a small random GPT2LMHeadModel loaded
into MiniGPT gives the same logits and the same greedy text, a checkpoint saved in the Hub's
file layout loads from a directory, and GPT-2-format tokenizer files encode as GPT-2's
tokenizer encodes them."""

from __future__ import annotations

import math
import sys
import time

import pytest
import torch
import torch.nn.functional as F

from course_lib.bpe import GPT2FormatTokenizer
from course_lib.corpus import load_corpus
from course_lib.labs.gpt2 import (
    gpt2_config,
    gpt2_files,
    gpt2_name,
    hub_reachable,
    load_gpt2,
    load_gpt2_pretrained,
    load_gpt2_tokenizer,
    random_gpt2,
    transformers_greedy,
)
from course_lib.model import MLP, GPTConfig, MiniGPT

transformers = pytest.importorskip("transformers")
tokenizers = pytest.importorskip("tokenizers")


@pytest.fixture(scope="module")
def reference():
    """A random 2-layer, 64-wide GPT2LMHeadModel and the MiniGPT loaded from its weights."""
    ref = random_gpt2(vocab_size=300, block_size=32, n_layer=2, n_head=4, d_model=64, seed=0)
    ours = load_gpt2(ref.state_dict(), gpt2_config(ref.config.to_dict()))
    return ref, ours


@pytest.fixture(scope="module")
def tokenizer_dir(tmp_path_factory):
    """vocab.json + merges.txt of a small byte-level BPE trained by Hugging Face tokenizers."""
    d = tmp_path_factory.mktemp("gpt2_tok")
    tok = tokenizers.ByteLevelBPETokenizer()
    tok.train_from_iterator(
        [load_corpus()[:100_000]],
        vocab_size=500,
        min_frequency=2,
        special_tokens=["<|endoftext|>"],
        show_progress=False,
    )
    tok.save_model(str(d))
    return d


def _ids(seed: int, shape=(3, 32), vocab: int = 300) -> torch.Tensor:
    return torch.randint(0, vocab, shape, generator=torch.Generator().manual_seed(seed))


# -- the configuration --------------------------------------------------------------------------


def test_gpt2_config_is_gpt2_small_and_validates_its_options():
    cfg = GPTConfig.gpt2()
    assert (cfg.vocab_size, cfg.block_size, cfg.n_layer, cfg.n_head, cfg.d_model) == (
        50257,
        1024,
        12,
        12,
        768,
    )
    assert cfg.gelu == "tanh" and cfg.bias and cfg.pos == "learned" and cfg.ln_eps == 1e-5
    assert GPTConfig.gpt2(n_layer=24, n_head=16, d_model=1024).n_layer == 24
    # the same parameter count as Hugging Face's GPT-2 small (tied head counted once)
    with torch.device("meta"):
        ours = MiniGPT(cfg).num_params()
        hf = transformers.GPT2LMHeadModel(transformers.GPT2Config())
    assert ours == sum(p.numel() for p in hf.parameters())
    with pytest.raises(ValueError, match="gelu must be one of"):
        GPTConfig(gelu="relu")
    with pytest.raises(ValueError, match="ln_eps"):
        GPTConfig(ln_eps=0.0)
    with pytest.raises(ValueError, match="unsupported"):
        gpt2_config({**transformers.GPT2Config().to_dict(), "activation_function": "relu"})


def test_mlp_gelu_option_is_the_tanh_formula_and_ln_eps_reaches_every_layernorm():
    torch.manual_seed(0)
    cfg = GPTConfig(vocab_size=11, d_model=16, n_head=2, gelu="tanh", ln_eps=1e-3)
    mlp = MLP(cfg)
    x = torch.randn(2, 5, 16)
    h = mlp.fc(x)
    # GPT-2's GELU written out (Hendrycks & Gimpel 2016, eq. for the tanh approximation)
    tanh_gelu = 0.5 * h * (1 + torch.tanh(math.sqrt(2 / math.pi) * (h + 0.044715 * h**3)))
    torch.testing.assert_close(mlp(x), mlp.proj(tanh_gelu))
    exact = MLP(GPTConfig(vocab_size=11, d_model=16, n_head=2))
    exact.load_state_dict(mlp.state_dict())
    torch.testing.assert_close(exact(x), exact.proj(F.gelu(h)))
    assert not torch.allclose(exact(x), mlp(x), atol=1e-6, rtol=0)
    eps = {m.eps for m in MiniGPT(cfg).modules() if isinstance(m, torch.nn.LayerNorm)}
    assert eps == {1e-3}


# -- weights --------------------------------------------------------------------------------------


def test_loaded_minigpt_gives_transformers_logits(reference):
    ref, ours = reference
    idx = _ids(1)
    with torch.no_grad():
        diff = (ours(idx)[0] - ref(idx).logits).abs().max().item()
    assert diff <= 1e-5
    # the exact GELU is a different function: the tanh option is what makes it equal
    exact = load_gpt2(ref.state_dict(), GPTConfig.gpt2(**{**ours.cfg.to_dict(), "gelu": "exact"}))
    with torch.no_grad():
        assert (exact(idx)[0] - ref(idx).logits).abs().max().item() > 1e-4


def test_greedy_generation_with_and_without_kv_cache_matches_transformers(reference):
    ref, ours = reference
    prompt = _ids(2, (2, 6))
    n = 32 - 6  # up to the context's end
    theirs = transformers_greedy(ref, prompt, n)
    cached = ours.generate(prompt, n, temperature=0)
    assert torch.equal(cached, theirs)
    assert torch.equal(ours.generate(prompt, n, temperature=0, use_cache=False), theirs)


def test_load_gpt2_reads_the_hubs_original_key_layout_and_infers_the_shape():
    # width 128 = 2 heads of 64, as every GPT-2 has
    ref = random_gpt2(vocab_size=50, block_size=16, n_layer=3, n_head=2, d_model=128, seed=3)
    hub = {k.removeprefix("transformer."): v for k, v in ref.state_dict().items()}
    hub.pop("lm_head.weight")
    for i in range(3):  # the causal-mask buffers old GPT-2 files carry
        hub[f"h.{i}.attn.bias"] = torch.tril(torch.ones(1, 1, 16, 16))
    ours = load_gpt2(hub)
    assert (ours.cfg.n_layer, ours.cfg.n_head, ours.cfg.d_model, ours.cfg.block_size) == (
        3,
        2,
        128,
        16,
    )
    assert ours.lm_head.weight is ours.tok_emb.weight
    idx = _ids(4, (2, 16), 50)
    with torch.no_grad():
        assert (ours(idx)[0] - ref(idx).logits).abs().max().item() <= 1e-5


def test_gpt2_names_transpose_conv1d_weights():
    assert gpt2_name("blocks.3.attn.qkv.weight", (192, 64)) == (
        "transformer.h.3.attn.c_attn.weight",
        (64, 192),
    )
    assert gpt2_name("blocks.0.attn.qkv.bias", (192,)) == (
        "transformer.h.0.attn.c_attn.bias",
        (192,),
    )
    assert gpt2_name("tok_emb.weight", (300, 64)) == ("transformer.wte.weight", (300, 64))


def test_minigpt_written_under_gpt2_names_loads_back_exactly_and_trains():
    torch.manual_seed(0)
    src = MiniGPT(GPTConfig.gpt2(vocab_size=50, block_size=16, n_layer=2, n_head=2, d_model=128))
    sd = {}
    for name, p in src.state_dict().items():
        key, _ = gpt2_name(name, tuple(p.shape))
        conv1d = p.dim() == 2 and (".attn.c_" in key or ".mlp.c_" in key)
        sd[key] = p.t() if conv1d else p  # (in, out), as Conv1D stores it, square ones too
    loaded = load_gpt2(sd)
    x = _ids(7, (2, 16), 50)
    assert torch.equal(loaded(x)[0], src.eval()(x)[0])
    assert all(p.requires_grad for p in loaded.parameters())
    loaded(x, x)[1].backward()  # fine-tuning starts from here
    assert loaded.lm_head.weight is loaded.tok_emb.weight and loaded.tok_emb.weight.grad is not None


def test_load_gpt2_refuses_what_does_not_fit(reference):
    ref, ours = reference
    sd, cfg = ref.state_dict(), ours.cfg
    with pytest.raises(ValueError, match="GPT-2 state dict"):
        load_gpt2({"weight": torch.zeros(2)})
    missing = {k: v for k, v in sd.items() if "h.1.mlp.c_fc.bias" not in k}
    with pytest.raises(ValueError, match="has no 'transformer.h.1.mlp.c_fc.bias'"):
        load_gpt2(missing, cfg)
    with pytest.raises(ValueError, match="has shape"):
        load_gpt2(sd, GPTConfig.gpt2(**{**cfg.to_dict(), "n_layer": 2, "d_model": 128}))
    with pytest.raises(ValueError, match="no place for"):
        load_gpt2({**sd, "transformer.extra.weight": torch.zeros(3)}, cfg)
    with pytest.raises(ValueError, match="ties them"):
        load_gpt2({**sd, "lm_head.weight": torch.zeros_like(sd["lm_head.weight"])}, cfg)
    with pytest.raises(ValueError, match="GPTConfig.gpt2"):
        load_gpt2(sd, GPTConfig(**{**cfg.to_dict(), "pos": "rope"}))
    narrow = random_gpt2(vocab_size=20, block_size=8, n_layer=1, n_head=4, d_model=48)
    with pytest.raises(ValueError, match="cannot guess the number of heads"):
        load_gpt2(narrow.state_dict())  # 48 wide: not heads of 64, so cfg is needed
    load_gpt2(narrow.state_dict(), gpt2_config(narrow.config.to_dict()))


# -- files in the Hub's layout -------------------------------------------------------------------


def test_checkpoint_saved_in_the_hub_layout_loads_from_a_directory(reference, tmp_path):
    ref, _ = reference
    ref.save_pretrained(tmp_path)  # config.json + model.safetensors, as on the Hub
    ours = load_gpt2_pretrained(tmp_path)
    idx = _ids(5)
    with torch.no_grad():
        assert (ours(idx)[0] - ref(idx).logits).abs().max().item() <= 1e-5
    with pytest.raises(FileNotFoundError, match="vocab.json"):
        load_gpt2_tokenizer(tmp_path)


def test_a_repo_id_goes_through_the_hub_download(reference, tokenizer_dir, tmp_path, monkeypatch):
    """The repo-id branch, with the Hub replaced by a folder: the files the download returns
    are the ones loaded."""
    import shutil

    huggingface_hub = pytest.importorskip("huggingface_hub")
    ref, _ = reference
    ref.save_pretrained(tmp_path)
    for name in ("vocab.json", "merges.txt"):
        shutil.copy(tokenizer_dir / name, tmp_path / name)
    asked = []

    def fake_download(repo_id, filename, **kw):
        asked.append((repo_id, filename))
        return str(tmp_path / filename)

    monkeypatch.setattr("course_lib.labs.gpt2.hub_reachable", lambda **kw: (True, ""))
    monkeypatch.setattr(huggingface_hub, "hf_hub_download", fake_download)
    ours = load_gpt2_pretrained("someone/tiny-gpt2")
    tok = load_gpt2_tokenizer("someone/tiny-gpt2")
    assert sorted(asked) == sorted(
        ("someone/tiny-gpt2", n)
        for n in ("config.json", "model.safetensors", "vocab.json", "merges.txt")
    )
    idx = _ids(6)
    with torch.no_grad():
        assert (ours(idx)[0] - ref(idx).logits).abs().max().item() <= 1e-5
    assert tok.decode(tok.encode(SAMPLES[1])) == SAMPLES[1]


def test_offline_download_fails_fast_and_readably(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    start = time.perf_counter()
    assert hub_reachable()[0] is False
    with pytest.raises(ConnectionError, match="HF_HUB_OFFLINE"):
        load_gpt2_pretrained("openai-community/gpt2")
    assert time.perf_counter() - start < 1.0
    monkeypatch.delenv("HF_HUB_OFFLINE")
    ok, why = hub_reachable("no-such-host.invalid", timeout=1.0)
    assert not ok and "cannot be reached" in why
    with pytest.raises(ValueError, match="neither a directory nor a Hub repo id"):
        gpt2_files(str(tmp_path / "absent"), ["config.json"])


def test_transformers_is_optional(monkeypatch):
    monkeypatch.setitem(sys.modules, "transformers", None)  # as if not installed
    with pytest.raises(ImportError, match="pip install transformers"):
        random_gpt2()


# -- the tokenizer ---------------------------------------------------------------------------------

SAMPLES = [
    "The trophy doesn't fit in the suitcase because it is too big.",
    "ROMEO: O, she doth teach the torches to burn bright!\n\n  And   then?  ",
    "naïve café — 日本語 😀 ½² 1234567 I'll we've they'd",
    "one<|endoftext|>two <|endoftext|>",
    "",
]


def test_gpt2_format_files_encode_as_gpt2s_tokenizer(tokenizer_dir):
    ours = GPT2FormatTokenizer.from_files(
        tokenizer_dir / "vocab.json", tokenizer_dir / "merges.txt"
    )
    fast = transformers.GPT2TokenizerFast.from_pretrained(str(tokenizer_dir))
    lib = tokenizers.ByteLevelBPETokenizer(
        str(tokenizer_dir / "vocab.json"), str(tokenizer_dir / "merges.txt")
    )
    lib.add_special_tokens(["<|endoftext|>"])
    text = load_corpus()[200_000:230_000]
    for s in [*SAMPLES, text]:
        ids = ours.encode(s)
        assert ids == fast.encode(s) == lib.encode(s).ids, s[:40]
        assert ours.decode(ids) == s
    assert ours.eot_id == fast.convert_tokens_to_ids("<|endoftext|>")
    assert ours.vocab_size == len(fast)
    i = ours.encode(" the")[0]
    assert ours.token_str(i) == fast.convert_ids_to_tokens(i) == "Ġthe"
    assert load_gpt2_tokenizer(tokenizer_dir).encode(SAMPLES[0]) == ours.encode(SAMPLES[0])


def test_gpt2_format_tokenizer_refuses_broken_files(tokenizer_dir, tmp_path):
    merges = (tokenizer_dir / "merges.txt").read_text().splitlines()
    bad = tmp_path / "merges.txt"
    bad.write_text("\n".join([merges[0], "a b c", *merges[1:]]))
    with pytest.raises(ValueError, match="line 2"):
        GPT2FormatTokenizer.from_files(tokenizer_dir / "vocab.json", bad)
    bad.write_text("\n".join([merges[0], "Ġthe Ġcat"]))
    with pytest.raises(ValueError, match="no earlier merge made"):
        GPT2FormatTokenizer.from_files(tokenizer_dir / "vocab.json", bad)
    vocab = tmp_path / "vocab.json"
    vocab.write_text('{"a": 0}')
    with pytest.raises(ValueError, match="do not belong together"):
        GPT2FormatTokenizer.from_files(vocab, tokenizer_dir / "merges.txt")
    ours = GPT2FormatTokenizer.from_files(
        tokenizer_dir / "vocab.json", tokenizer_dir / "merges.txt"
    )
    with pytest.raises(ValueError, match="unknown token ids"):
        ours.decode([10**6])
