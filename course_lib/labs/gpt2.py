"""GPT-2 inside MiniGPT: GPT-2's names for MiniGPT's weights, and its checkpoints loaded.

MiniGPT is GPT-2's architecture (Radford et al. 2019) but for a few choices, each an option
of ``GPTConfig`` that ``GPTConfig.gpt2()`` sets: the tanh approximation of GELU
(``gelu="tanh"``), biases in every linear layer and LayerNorm (``bias=True``), LayerNorm's
epsilon (``ln_eps=1e-5``), 1,024 learned positions (``pos="learned"``, ``block_size=1024``) and
50,257 byte-level BPE tokens (``vocab_size``). What remains are the names of the weights and the
layout of the blocks' matrices:

- ``gpt2_name`` maps a MiniGPT state-dict entry to its name in Hugging Face's
  ``GPT2LMHeadModel`` and the shape stored there; GPT-2 keeps its linear layers as ``Conv1D``
  with weights (in, out), the transpose of ``nn.Linear``'s (out, in).
- ``load_gpt2(state_dict)`` builds a MiniGPT holding a GPT-2 checkpoint's weights (the
  configuration read from the tensors' shapes, or given); ``gpt2_config`` reads a Hugging Face
  ``config.json``.
- ``load_gpt2_pretrained(source)`` and ``load_gpt2_tokenizer(source)`` read a checkpoint in the
  Hub's file layout (``config.json``, ``model.safetensors``, ``vocab.json``, ``merges.txt``)
  from a local directory or, given a repo id such as "openai-community/gpt2", from the
  Hugging Face Hub; ``hub_reachable`` says quickly (a short timeout) whether the Hub can be
  reached, so an offline caller skips instead of hanging.

Hugging Face ``transformers`` is optional (Colab installs only course_lib's dependencies):
``random_gpt2`` and ``transformers_gpt2``, which build its ``GPT2LMHeadModel`` to compare with,
and ``transformers_greedy``, which runs that model's greedy decoding, import it when called;
``huggingface_hub`` and ``safetensors`` are imported only to download and read files.
"""

from __future__ import annotations

import json
import os
import re
import socket
from pathlib import Path

import torch

from ..bpe import GPT2FormatTokenizer
from ..model import GPTConfig, MiniGPT

__all__ = [
    "GPT2_REPO",
    "GPT2_NAMES",
    "gpt2_name",
    "gpt2_config",
    "load_gpt2",
    "hub_reachable",
    "gpt2_files",
    "load_gpt2_pretrained",
    "load_gpt2_tokenizer",
    "random_gpt2",
    "transformers_gpt2",
    "transformers_greedy",
]

#: GPT-2 small (124 M parameters) on the Hugging Face Hub.
GPT2_REPO = "openai-community/gpt2"
#: (MiniGPT name pattern, GPT-2 name) for every entry of MiniGPT's state dict.
GPT2_NAMES = [
    (r"^tok_emb\.weight$", "transformer.wte.weight"),
    (r"^pos_emb\.table\.weight$", "transformer.wpe.weight"),
    (r"^blocks\.(\d+)\.ln1\.(weight|bias)$", r"transformer.h.\1.ln_1.\2"),
    (r"^blocks\.(\d+)\.attn\.qkv\.(weight|bias)$", r"transformer.h.\1.attn.c_attn.\2"),
    (r"^blocks\.(\d+)\.attn\.proj\.(weight|bias)$", r"transformer.h.\1.attn.c_proj.\2"),
    (r"^blocks\.(\d+)\.ln2\.(weight|bias)$", r"transformer.h.\1.ln_2.\2"),
    (r"^blocks\.(\d+)\.mlp\.fc\.(weight|bias)$", r"transformer.h.\1.mlp.c_fc.\2"),
    (r"^blocks\.(\d+)\.mlp\.proj\.(weight|bias)$", r"transformer.h.\1.mlp.c_proj.\2"),
    (r"^ln_f\.(weight|bias)$", r"transformer.ln_f.\1"),
    (r"^lm_head\.weight$", "lm_head.weight"),
]
# GPT-2's activation names (config.json's activation_function) -> GPTConfig.gelu
_GELU = {"gelu_new": "tanh", "gelu_pytorch_tanh": "tanh", "gelu_fast": "tanh", "gelu": "exact"}


def _is_conv1d(gpt2_key: str) -> bool:
    """Whether a GPT-2 weight is a Conv1D's, stored (in, out)."""
    return (".attn.c_" in gpt2_key or ".mlp.c_" in gpt2_key) and gpt2_key.endswith(".weight")


def gpt2_name(name: str, shape: tuple[int, ...]) -> tuple[str, tuple[int, ...]]:
    """The Hugging Face GPT-2 name and stored shape of a MiniGPT state-dict entry. GPT-2 keeps
    its linear layers as ``Conv1D`` with weights (in, out), the transpose of ``nn.Linear``'s
    (out, in), so 2-D weights of the blocks' linear layers swap their axes."""
    for pattern, repl in GPT2_NAMES:
        if re.match(pattern, name):
            new = re.sub(pattern, repl, name)
            flip = _is_conv1d(new) and len(shape) == 2
            return new, (tuple(reversed(shape)) if flip else tuple(shape))
    raise ValueError(f"gpt2_name: no GPT-2 counterpart known for {name!r}.")


def gpt2_config(hf_config: dict) -> GPTConfig:
    """The GPTConfig of a Hugging Face GPT-2 ``config.json`` (a dict, or a path to the file).

    Settings MiniGPT has no option for (an MLP width other than 4 d, attention scaled by layer,
    an untied output matrix) raise ValueError rather than load into a different model."""
    if isinstance(hf_config, (str, Path)):
        hf_config = json.loads(Path(hf_config).read_text())
    if not isinstance(hf_config, dict) or hf_config.get("model_type", "gpt2") != "gpt2":
        raise ValueError("gpt2_config: pass the dict (or path) of a GPT-2 config.json.")
    c = hf_config
    act = c.get("activation_function", "gelu_new")
    unsupported = {
        "activation_function": act not in _GELU,
        "n_inner": c.get("n_inner") not in (None, 4 * c["n_embd"]),
        "scale_attn_weights": not c.get("scale_attn_weights", True),
        "scale_attn_by_inverse_layer_idx": c.get("scale_attn_by_inverse_layer_idx", False),
        "tie_word_embeddings": not c.get("tie_word_embeddings", True),
    }
    bad = [k for k, v in unsupported.items() if v]
    if bad:
        raise ValueError(
            "gpt2_config: MiniGPT cannot hold this GPT-2: unsupported "
            f"{[(k, c.get(k)) for k in bad]} (MiniGPT has a 4 d GELU MLP, 1/sqrt(head_dim) "
            "attention and a tied output matrix)."
        )
    return GPTConfig.gpt2(
        vocab_size=c["vocab_size"],
        block_size=c["n_positions"],
        n_layer=c["n_layer"],
        n_head=c["n_head"],
        d_model=c["n_embd"],
        gelu=_GELU[act],
        ln_eps=c.get("layer_norm_epsilon", 1e-5),
    )


def _gpt2_keys(state_dict: dict) -> dict:
    """A GPT-2 state dict with every key as ``GPT2LMHeadModel`` names it: the Hub's original
    checkpoints leave out "transformer." (they are ``GPT2Model``'s) and store each layer's causal
    mask as a buffer ("h.0.attn.bias", 4-D), which is no weight and is dropped."""
    out = {}
    for key, value in state_dict.items():
        if key.endswith(".attn.masked_bias") or (key.endswith(".attn.bias") and value.dim() == 4):
            continue
        if not key.startswith(("transformer.", "lm_head.")):
            key = "transformer." + key
        out[key] = value
    return out


def _infer_config(sd: dict) -> GPTConfig:
    """GPT-2's shape read from its tensors; the number of heads, which no shape holds, is
    d_model // 64 (every GPT-2, small to XL, has heads of 64 dimensions)."""
    V, d = sd["transformer.wte.weight"].shape
    T = sd["transformer.wpe.weight"].shape[0]
    layers = {int(m.group(1)) for k in sd if (m := re.match(r"transformer\.h\.(\d+)\.", k))}
    if d % 64:
        raise ValueError(
            f"load_gpt2: cannot guess the number of heads for width {d} (GPT-2's heads have 64 "
            "dimensions); pass cfg=gpt2_config(config.json) or GPTConfig.gpt2(n_head=...)."
        )
    return GPTConfig.gpt2(
        vocab_size=V, block_size=T, n_layer=len(layers), n_head=d // 64, d_model=d
    )


def load_gpt2(state_dict: dict, cfg: GPTConfig | None = None) -> MiniGPT:
    """A MiniGPT (eval mode) holding the weights of a GPT-2 checkpoint.

    ``state_dict``: GPT-2's tensors under Hugging Face's names (``GPT2LMHeadModel``'s or, as in
    the Hub's original files, ``GPT2Model``'s without "transformer."). ``cfg``: the shape
    (``gpt2_config(config.json)``); None reads it from the tensors' shapes (heads of 64
    dimensions, GPT-2's defaults otherwise). Each weight is copied under its MiniGPT name,
    Conv1D weights transposed; a missing, extra or misshapen tensor raises ValueError.
    """
    if not isinstance(state_dict, dict) or "transformer.wte.weight" not in _gpt2_keys(state_dict):
        raise ValueError(
            "load_gpt2: pass a GPT-2 state dict (Hugging Face names, e.g. 'transformer.wte.weight' "
            "or 'wte.weight')."
        )
    sd = _gpt2_keys(state_dict)
    cfg = _infer_config(sd) if cfg is None else cfg
    if not (
        cfg.bias and cfg.pos == "learned" and cfg.causal and cfg.n_kv_heads in (None, cfg.n_head)
    ):
        raise ValueError(
            "load_gpt2: GPT-2 has biases, learned positions, causal multi-head attention; build "
            "cfg with GPTConfig.gpt2(...)."
        )
    with torch.device("meta"):  # shapes only: the checkpoint brings every number
        model = MiniGPT(cfg)
    head = sd.pop("lm_head.weight", None)
    if head is not None and not torch.equal(head, sd["transformer.wte.weight"]):
        raise ValueError("load_gpt2: the checkpoint's lm_head differs from wte; MiniGPT ties them.")
    ours = {}
    for name, p in model.state_dict().items():
        if name == "lm_head.weight":
            continue  # tied to tok_emb.weight
        key, shape = gpt2_name(name, tuple(p.shape))
        if key not in sd:
            raise ValueError(f"load_gpt2: the checkpoint has no {key!r} (for {name}).")
        w = sd.pop(key)
        if tuple(w.shape) != shape:
            raise ValueError(
                f"load_gpt2: {key} has shape {tuple(w.shape)}; a MiniGPT of this cfg needs "
                f"{shape}. Does cfg match the checkpoint?"
            )
        ours[name] = (w.t() if _is_conv1d(key) else w).float().contiguous()
    if sd:
        raise ValueError(
            f"load_gpt2: the checkpoint has tensors MiniGPT has no place for: {sorted(sd)[:5]}."
        )
    model.load_state_dict(ours, strict=False, assign=True)
    model.lm_head.weight = model.tok_emb.weight  # assign=True replaced the tied parameter
    return model.eval()


def hub_reachable(host: str = "huggingface.co", timeout: float = 3.0) -> tuple[bool, str]:
    """(True, "") if a TCP connection to ``host``:443 opens within ``timeout`` seconds, else
    (False, why). ``HF_HUB_OFFLINE=1`` (the Hub's own switch) answers False without trying."""
    if os.environ.get("HF_HUB_OFFLINE", "0").lower() in ("1", "true", "yes"):
        return False, "HF_HUB_OFFLINE is set"
    try:
        with socket.create_connection((host, 443), timeout=timeout):
            return True, ""
    except OSError as e:  # no DNS, refused, timed out: all the same to the caller
        return False, f"{host} cannot be reached ({type(e).__name__}: {e})"


def gpt2_files(source: str | Path, names: list[str], timeout: float = 3.0) -> dict[str, Path]:
    """Paths of the files ``names`` of a checkpoint in the Hub's layout. ``source``: a local
    directory holding them, or a Hub repo id (downloaded with ``huggingface_hub`` into its
    cache, after ``hub_reachable`` said yes within ``timeout`` seconds). Raises ConnectionError
    when the Hub cannot be reached, FileNotFoundError when a local file is missing."""
    if Path(source).is_dir():
        paths = {n: Path(source) / n for n in names}
        missing = [n for n, p in paths.items() if not p.is_file()]
        if missing:
            raise FileNotFoundError(f"gpt2_files: {source} has no {missing}.")
        return paths
    if not isinstance(source, str) or source.count("/") != 1:
        raise ValueError(
            f"gpt2_files: {source!r} is neither a directory nor a Hub repo id ('owner/name')."
        )
    ok, why = hub_reachable(timeout=timeout)
    if not ok:
        raise ConnectionError(f"gpt2_files: cannot download {source}: {why}.")
    try:
        from huggingface_hub import hf_hub_download
    except ImportError:
        raise ImportError(
            "Downloading from the Hugging Face Hub needs huggingface_hub: pip install "
            "huggingface_hub (it comes with pip install transformers)."
        ) from None
    return {n: Path(hf_hub_download(source, n)) for n in names}


def load_gpt2_pretrained(source: str | Path = GPT2_REPO, timeout: float = 3.0) -> MiniGPT:
    """A MiniGPT holding a GPT-2 checkpoint in the Hub's layout (``config.json`` and
    ``model.safetensors``): a local directory (e.g. written by ``save_pretrained``) or a Hub
    repo id ("openai-community/gpt2", 124 M parameters, about 550 MB). See ``gpt2_files``."""
    paths = gpt2_files(source, ["config.json", "model.safetensors"], timeout)
    try:
        from safetensors.torch import load_file
    except ImportError:
        raise ImportError(
            "Reading model.safetensors needs safetensors: pip install safetensors (it comes with "
            "pip install transformers)."
        ) from None
    return load_gpt2(load_file(paths["model.safetensors"]), gpt2_config(paths["config.json"]))


def load_gpt2_tokenizer(
    source: str | Path = GPT2_REPO, timeout: float = 3.0
) -> GPT2FormatTokenizer:
    """GPT-2's tokenizer (``vocab.json`` and ``merges.txt``) in the course's BPE: a local
    directory or a Hub repo id, as ``load_gpt2_pretrained``."""
    paths = gpt2_files(source, ["vocab.json", "merges.txt"], timeout)
    return GPT2FormatTokenizer.from_files(paths["vocab.json"], paths["merges.txt"])


def _transformers():
    try:
        import transformers
    except ImportError:
        raise ImportError(
            "This comparison needs Hugging Face transformers: pip install transformers"
        ) from None
    return transformers


def random_gpt2(
    vocab_size: int = 300,
    block_size: int = 32,
    n_layer: int = 2,
    n_head: int = 4,
    d_model: int = 64,
    seed: int = 0,
):
    """A small ``transformers.GPT2LMHeadModel`` with random weights (eval mode, seeded), the
    reference ``load_gpt2`` is checked against offline. GPT-2's initialisation leaves biases
    and LayerNorms at 0 and 1, which would hide a misplaced one, so every tensor is redrawn."""
    tf = _transformers()
    cfg = tf.GPT2Config(
        vocab_size=vocab_size,
        n_positions=block_size,
        n_layer=n_layer,
        n_head=n_head,
        n_embd=d_model,
        bos_token_id=0,
        eos_token_id=0,
    )
    torch.manual_seed(seed)
    model = tf.GPT2LMHeadModel(cfg).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.normal_(1.0 if ".ln_" in name and name.endswith("weight") else 0.0, 0.1)
    return model


def transformers_gpt2(source: str | Path = GPT2_REPO):
    """Hugging Face's own ``GPT2LMHeadModel`` of ``source`` (a directory or a repo id), in eval
    mode: the reference a loaded MiniGPT is compared with."""
    return _transformers().GPT2LMHeadModel.from_pretrained(str(source)).eval()


@torch.no_grad()
def transformers_greedy(hf_model, idx: torch.Tensor, max_new_tokens: int) -> torch.Tensor:
    """Hugging Face's greedy decoding (``hf_model.generate``, its own KV cache) of exactly
    ``max_new_tokens`` tokens after idx (B, T): (B, T + max_new_tokens), as
    ``MiniGPT.generate(idx, max_new_tokens, temperature=0)`` computes it. No padding: every
    position is attended to, and the end-of-text token does not stop it."""
    eos = hf_model.config.eos_token_id
    return hf_model.generate(
        idx,
        attention_mask=torch.ones_like(idx),
        max_new_tokens=max_new_tokens,
        min_new_tokens=max_new_tokens,
        do_sample=False,
        pad_token_id=eos if eos is not None else 0,
    )
