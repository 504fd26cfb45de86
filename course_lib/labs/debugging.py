""" "My transformer isn't learning": five classic bugs, built on purpose, and the check that
finds each one (Chapter 8's debugging section).

The bugs (``BUGS``), each a few characters away from the correct model:

- ``no_mask``: the causal mask left out (``GPTConfig(causal=False)``): every position reads
  the token it is asked to predict.
- ``unshifted``: the targets are the inputs, not the inputs moved one token left.
- ``lr_too_high``: a learning rate 100 times the working one.
- ``no_residual``: blocks that return ``attn(LN(x))`` and ``mlp(LN(x))`` instead of adding
  them to ``x`` (``NoResidualBlock``).
- ``untied``: a model that claims to tie its input and output embeddings but holds a copy
  (``UntiedGPT``: ``nn.Parameter(tok_emb.weight.clone())``, a common slip).

``train_variant`` trains one of them for a few hundred steps and measures both the loss the
buggy pipeline reports and an honest one (``honest_loss``: the next token after each window,
which no leak can see). The diagnostics, one per bug, each pass the correct model:
``causality_leak`` (gradient of output t with respect to the input at t' > t),
``targets_shifted`` (the batch's targets are its inputs moved by one), ``update_ratio``
(the size of one optimiser step relative to the weights), ``residual_similarity`` (a block's
output at initialisation is close to its input) and ``tying_check`` (one tensor, not two).
"""

from __future__ import annotations

import copy
import math
from dataclasses import replace

import torch
from torch import nn

from ..data import BatchSampler
from ..model import Block, GPTConfig, MiniGPT, gpt_init_, scale_residual_projections_

__all__ = [
    "BUGS",
    "DEBUG_CONFIG",
    "DEBUG_TRAIN",
    "NoResidualBlock",
    "NoResidualGPT",
    "UntiedGPT",
    "build_model",
    "bug_batch",
    "train_variant",
    "honest_loss",
    "causality_leak",
    "targets_shifted",
    "update_ratio",
    "residual_similarity",
    "tying_check",
]

BUGS = ("none", "no_mask", "unshifted", "lr_too_high", "no_residual", "untied")
#: A small model, so that six short runs fit in the chapter's time budget.
DEBUG_CONFIG = {"block_size": 32, "n_layer": 4, "n_head": 2, "d_model": 48, "bias": False}
#: The runs: AdamW at ``lr`` (``lr_too_high`` multiplies it by ``high_lr_factor``), no schedule,
#: no clipping (clipping would hide part of the learning-rate bug).
DEBUG_TRAIN = {"steps": 400, "batch_size": 32, "lr": 3e-3, "high_lr_factor": 100.0}


class NoResidualBlock(Block):
    """The bug: ``attn(LN(x))`` then ``mlp(LN(x))`` with nothing added back.
    (B, T, d) -> (B, T, d), the same parameters as ``Block``."""

    def forward(self, x, mask=None, kv=None, positions=None):
        x = self.attn(self.ln1(x), mask, kv, positions)  # (B, T, d): x itself is lost
        return self.mlp(self.ln2(x))  # (B, T, d)


class NoResidualGPT(MiniGPT):
    """MiniGPT built from ``NoResidualBlock``s (same parameters, same initialisation)."""

    def __init__(self, cfg: GPTConfig):
        super().__init__(cfg)
        self.blocks = nn.ModuleList(NoResidualBlock(cfg) for _ in range(cfg.n_layer))
        self.blocks.apply(gpt_init_)
        scale_residual_projections_(self, cfg.n_layer)


class UntiedGPT(MiniGPT):
    """A MiniGPT whose docstring (its parent's) says the head is tied to the token embedding,
    but whose head is a copy: equal at the start, two matrices that drift apart in training."""

    def __init__(self, cfg: GPTConfig):
        super().__init__(cfg)
        # the bug: clone() makes a new tensor; the tie needs the same Parameter object
        self.lm_head.weight = nn.Parameter(self.tok_emb.weight.detach().clone())


def _check_bug(bug: str) -> None:
    if bug not in BUGS:
        raise ValueError(f"debugging: unknown bug {bug!r}; choose one of {BUGS}.")


def build_model(bug: str, vocab_size: int, seed: int = 0, **overrides) -> MiniGPT:
    """The model a bug trains: MiniGPT, or its broken variant (``DEBUG_CONFIG`` + overrides)."""
    _check_bug(bug)
    cfg = GPTConfig(**{**DEBUG_CONFIG, **overrides}, vocab_size=vocab_size)
    torch.manual_seed(seed)
    if bug == "no_mask":
        return MiniGPT(replace(cfg, causal=False))
    if bug == "no_residual":
        return NoResidualGPT(cfg)
    if bug == "untied":
        return UntiedGPT(cfg)
    return MiniGPT(cfg)


def bug_batch(sampler: BatchSampler, batch_size: int, bug: str = "none"):
    """A training batch as ``bug`` makes it: ``sampler``'s windows (x, y), both
    (batch_size, block_size), y the next tokens; for the unshifted-targets bug the targets are
    the inputs themselves (y = x)."""
    x, y = sampler.sample(batch_size)  # (B, T) each
    return (x, x.clone()) if bug == "unshifted" else (x, y)


@torch.no_grad()
def honest_loss(model: MiniGPT, data: torch.Tensor, n_windows: int = 256, seed: int = 1) -> float:
    """Cross-entropy of predicting the token *after* each window from the window's last
    position: nothing in the input shows it, whatever the mask or the targets did in training.
    ``data``: 1-D token ids (e.g. the validation text)."""
    model.eval()
    T = model.cfg.block_size
    x, y = BatchSampler(data, T, seed).sample(n_windows)  # (n, T); y[:, -1] follows the window
    logits, _ = model(x)  # (n, T, V)
    return nn.functional.cross_entropy(logits[:, -1], y[:, -1]).item()


def train_variant(
    bug: str,
    train_ids: torch.Tensor,
    val_ids: torch.Tensor,
    vocab_size: int,
    steps: int | None = None,
    seed: int = 0,
) -> dict:
    """Train ``build_model(bug)`` for ``steps`` (default ``DEBUG_TRAIN``) and measure it.

    Returns {"losses": reported training loss per step, "honest": ``honest_loss`` on
    ``val_ids``, "model": the trained model}. A loss that is not finite stops the run (the
    rest of the curve is NaN)."""
    _check_bug(bug)
    c = DEBUG_TRAIN
    steps = c["steps"] if steps is None else steps
    model = build_model(bug, vocab_size, seed)
    lr = c["lr"] * (c["high_lr_factor"] if bug == "lr_too_high" else 1.0)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    sampler = BatchSampler(train_ids, model.cfg.block_size, seed + 1)
    losses: list[float] = []
    model.train()
    for _ in range(steps):
        x, y = bug_batch(sampler, c["batch_size"], bug)
        _, loss = model(x, y)
        if not math.isfinite(loss.item()):
            losses += [math.nan] * (steps - len(losses))
            break
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return {"losses": losses, "honest": honest_loss(model, val_ids), "model": model}


# ---------------------------------------------------------------- diagnostics, one per bug


def causality_leak(model: MiniGPT, seed: int = 0) -> float:
    """Largest gradient of any output logit at position t with respect to the input vector at
    a later position t' > t, over one random sequence of block_size tokens. Zero (exactly) for
    a causal model; anything else means the future leaks into the past."""
    T = model.cfg.block_size
    g = torch.Generator().manual_seed(seed)
    idx = torch.randint(model.cfg.vocab_size, (1, T), generator=g)  # (1, T)
    captured = {}

    def keep(_module, _inputs, output):
        output.retain_grad()
        captured["emb"] = output  # (1, T, d): the token vectors entering the model

    handle = model.tok_emb.register_forward_hook(keep)
    was_training = model.training
    model.eval()
    try:
        logits, _ = model(idx)  # (1, T, V)
    finally:
        handle.remove()
    leak = 0.0
    for t in range(T - 1):
        (grad,) = torch.autograd.grad(logits[0, t].sum(), captured["emb"], retain_graph=True)
        leak = max(leak, grad[0, t + 1 :].abs().max().item())  # positions after t
    model.train(was_training)
    return leak


def targets_shifted(x: torch.Tensor, y: torch.Tensor) -> float:
    """Fraction of positions where the target is the next input, y[:, t] == x[:, t+1]
    (the last target is not checked: it lies outside the window). 1.0 for a correct batch;
    near chance (the rate of repeated characters) for unshifted targets."""
    if x.shape != y.shape or x.dim() != 2:
        raise ValueError("targets_shifted: x and y must both be (B, T) token ids.")
    return (y[:, :-1] == x[:, 1:]).float().mean().item()


def update_ratio(model: MiniGPT, x: torch.Tensor, y: torch.Tensor, lr: float) -> float:
    """Median over weight matrices of |step| / |weights| for one AdamW step at ``lr`` on the
    batch (x, y), measured on a copy (the model is not changed). Large ratios (a step as large
    as a sizeable fraction of the weights) mean the learning rate is too high."""
    trial = copy.deepcopy(model)
    trial.train()
    before = {n: p.detach().clone() for n, p in trial.named_parameters() if p.dim() == 2}
    opt = torch.optim.AdamW(trial.parameters(), lr=lr, weight_decay=0.0)
    _, loss = trial(x, y)
    loss.backward()
    opt.step()
    ratios = [
        ((p.detach() - before[n]).norm() / before[n].norm()).item()
        for n, p in trial.named_parameters()
        if n in before
    ]
    return float(torch.tensor(ratios).median())


@torch.no_grad()
def residual_similarity(model: MiniGPT, seed: int = 0) -> float:
    """Mean cosine similarity between each block's input and output vectors, on random
    tokens. With residual connections a block adds a small update to its input, so the
    similarity is close to 1 at initialisation; without them it is near 0."""
    g = torch.Generator().manual_seed(seed)
    idx = torch.randint(model.cfg.vocab_size, (4, model.cfg.block_size), generator=g)  # (4, T)
    model.eval()
    x = model.pos_emb(model.tok_emb(idx), 0)  # (4, T, d)
    sims = []
    for block in model.blocks:
        out = block(x)  # (4, T, d)
        sims.append(nn.functional.cosine_similarity(x, out, dim=-1).mean().item())
        x = out
    return sum(sims) / len(sims)


def tying_check(model: MiniGPT) -> dict:
    """Is the LM head the token embedding? {"tied": same tensor storage,
    "n_params": distinct parameters, "extra": how many more than a tied model has,
    "drift": relative difference of the two matrices}."""
    head, emb = model.lm_head.weight, model.tok_emb.weight
    tied = head.data_ptr() == emb.data_ptr()
    n_params = sum(p.numel() for p in model.parameters())
    tied_count = n_params - (0 if tied else head.numel())
    drift = ((head - emb).norm() / emb.norm()).item()
    return {"tied": tied, "n_params": n_params, "extra": n_params - tied_count, "drift": drift}
