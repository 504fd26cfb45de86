"""Chapter 11's masked language model on the Shakespeare characters.

The character tokenizer of Chapter 8 gets one extra id for the mask token (shown as ``█``,
a character the corpus does not contain); ``train_mlm`` trains a ``course_lib.encoder.MaskedLM``
on windows of the training text corrupted by ``course_lib.encoder.mask_tokens``;
``fill_blanks`` asks it to fill in the masked characters of a string, all at once.
"""

from __future__ import annotations

import time

import torch

from ..data import BatchSampler, CharTokenizer
from ..encoder import IGNORE_INDEX, MaskedLM, mask_tokens
from ..model import GPTConfig
from ..schedule import warmup_cosine

__all__ = [
    "MASK_CHAR",
    "MLM_CONFIG",
    "encode_masked",
    "train_mlm",
    "fill_blanks",
    "masked_accuracy",
]

MASK_CHAR = "█"  # how the mask token is printed (not a character of the corpus)
#: The chapter's encoder: small and short, so it trains inside the chapter's time budget.
MLM_CONFIG = {
    "block_size": 48,
    "n_layer": 2,
    "n_head": 4,
    "d_model": 64,
    "bias": False,
    "pos": "rope",
    "steps": 500,
    "batch_size": 32,
    "lr": 3e-3,
    "warmup": 30,
}


def encode_masked(tok: CharTokenizer, text: str, blank: str = "_") -> torch.Tensor:
    """Encode ``text``, every ``blank`` character turned into the mask id (tok.vocab_size): (T,)."""
    ids = [tok.vocab_size if c == blank else tok.stoi.get(c, -1) for c in text]
    if -1 in ids:
        raise ValueError(f"encode_masked: {text!r} has characters outside the vocabulary.")
    return torch.tensor(ids)


def train_mlm(
    tok: CharTokenizer,
    train_ids: torch.Tensor,
    steps: int | None = None,
    seed: int = 0,
    progress: bool = False,
) -> tuple[MaskedLM, list[float], float]:
    """Train the chapter's ``MaskedLM`` (``MLM_CONFIG``) for ``steps`` steps on random windows
    of ``train_ids`` (1-D); every batch is corrupted afresh by ``mask_tokens``. AdamW, linear
    warm-up then cosine decay. Returns (model in eval mode, loss of every step, seconds)."""
    c = MLM_CONFIG
    steps = c["steps"] if steps is None else steps
    torch.manual_seed(seed)
    cfg = GPTConfig(
        vocab_size=tok.vocab_size + 1,
        block_size=c["block_size"],
        n_layer=c["n_layer"],
        n_head=c["n_head"],
        d_model=c["d_model"],
        bias=c["bias"],
        pos=c["pos"],
    )
    model = MaskedLM(cfg)
    sampler = BatchSampler(train_ids, c["block_size"], seed=seed)
    g = torch.Generator().manual_seed(seed + 1)
    opt = torch.optim.AdamW(model.parameters(), lr=c["lr"], weight_decay=0.01)
    losses = []
    t0 = time.perf_counter()
    for step in range(steps):
        for group in opt.param_groups:
            group["lr"] = warmup_cosine(step, c["lr"], c["warmup"], steps, c["lr"] / 10)
        x, _ = sampler.sample(c["batch_size"])  # (B, T): the next-token targets are not needed
        inputs, targets = mask_tokens(x, model.mask_id, tok.vocab_size, generator=g)  # (B, T) each
        loss = model(inputs, targets)[1]
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        losses.append(loss.item())
        if progress and step % 100 == 0:
            print(f"step {step}: loss {loss.item():.3f}", flush=True)
    return model.eval(), losses, time.perf_counter() - t0


@torch.no_grad()
def fill_blanks(model: MaskedLM, tok: CharTokenizer, text: str, blank: str = "_") -> str:
    """``text`` with each ``blank`` replaced by the model's most likely character (in one pass)."""
    ids = encode_masked(tok, text, blank)[None]  # (1, T)
    return tok.decode(model.fill(ids)[0])


@torch.no_grad()
def masked_accuracy(
    model: MaskedLM, ids: torch.Tensor, n_windows: int = 64, seed: int = 0
) -> tuple[float, float]:
    """(accuracy, mean loss) of the model on the corrupted positions of ``n_windows`` random
    windows of ``ids`` (1-D, e.g. the validation text), with the same 80/10/10 rule."""
    sampler = BatchSampler(ids, model.cfg.block_size, seed=seed)
    x, _ = sampler.sample(n_windows)  # (n, T)
    inputs, targets = mask_tokens(
        x, model.mask_id, model.cfg.vocab_size - 1, generator=torch.Generator().manual_seed(seed)
    )
    logits, loss = model(inputs, targets)
    chosen = targets != IGNORE_INDEX
    return (logits.argmax(-1)[chosen] == targets[chosen]).float().mean().item(), loss.item()
