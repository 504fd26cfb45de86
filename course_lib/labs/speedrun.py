"""Chapter 15's races: training recipes run side by side in one process, timed fairly.

A ``Recipe`` names a model (``MiniGPT`` or a ``ModernGPT`` with some modern changes), an
optimiser (AdamW, or Muon for the blocks' matrices with AdamW for the rest) and a schedule
(warmup + cosine, or warmup-stable-decay). A ``Run`` trains one recipe step by step with the
trainer's batches and evaluates on the trainer's fixed validation windows
(``course_lib.train.Trainer.estimate_loss``), so its losses compare with the trainer's.

``race(runs)`` interleaves the runs: each trains a chunk of steps in turn, and only its own
chunks count towards its training time. On a machine shared with other work, every run then
sees the same mix of busy and quiet moments, so the ratio of their times stays meaningful
even when the seconds themselves do not; steps and tokens to a target are recorded too.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, field, replace

import torch
from torch import nn

from ..config import TrainConfig
from ..data import BatchSampler
from ..device import seed_everything
from ..model import MiniGPT
from ..schedule import warmup_cosine, warmup_stable_decay
from ..train import make_optimizer
from .modern import ModernConfig, ModernGPT
from .muon import Muon, muon_param_groups

__all__ = [
    "Recipe",
    "Run",
    "race",
    "time_to_target",
    "seconds_per_step",
    "steps_for_budget",
    "bigram_loss",
    "describe_recipe",
]

OPTIMIZERS = ("adamw", "muon")
SCHEDULES = ("cosine", "wsd")


@dataclass
class Recipe:
    """One way to train: ``train`` (shape, batch, learning rate, steps, warmup, min_lr,
    weight decay, clipping, seed and evaluation windows, as in ``configs/*.json``),
    ``modern`` (ModernConfig changes; None: the plain MiniGPT), ``optimizer`` ("adamw" or
    "muon"; Muon's peak rate ``muon_lr`` and decoupled weight decay ``muon_weight_decay``),
    ``schedule`` ("cosine" or "wsd", with ``decay_fraction``) and ``aux_weight`` (the MoE
    balance loss's weight)."""

    name: str
    train: TrainConfig
    modern: dict | None = None
    optimizer: str = "adamw"
    muon_lr: float = 0.02
    muon_weight_decay: float = 0.0
    schedule: str = "cosine"
    decay_fraction: float = 0.3
    aux_weight: float = 0.01
    extra: dict = field(default_factory=dict)

    def __post_init__(self):
        if self.optimizer not in OPTIMIZERS:
            raise ValueError(
                f"Recipe: optimizer must be one of {OPTIMIZERS}; got {self.optimizer!r}."
            )
        if self.schedule not in SCHEDULES:
            raise ValueError(f"Recipe: schedule must be one of {SCHEDULES}; got {self.schedule!r}.")

    def with_steps(self, steps: int) -> "Recipe":
        """The same recipe over ``steps`` steps (the schedule stretches to fit)."""
        t = self.train
        warm = min(t.warmup_steps, max(1, steps // 10))
        return replace(self, train=replace(t, max_steps=steps, warmup_steps=warm))

    def with_seed(self, seed: int) -> "Recipe":
        return replace(self, train=replace(self.train, seed=seed))

    def build_model(self, vocab_size: int) -> nn.Module:
        cfg = self.train.model.with_vocab(vocab_size)
        if self.modern is None:
            return MiniGPT(cfg)
        return ModernGPT(ModernConfig.from_gpt(cfg, **self.modern))


class Run:
    """One recipe's model, optimisers, batches and record. ``step()`` trains one step and
    returns its loss; ``evaluate()`` is the validation loss on the trainer's fixed windows."""

    def __init__(self, recipe: Recipe, train_tokens, val_tokens, vocab_size: int):
        self.recipe, self.cfg = recipe, recipe.train
        self.val_tokens = val_tokens
        seed_everything(self.cfg.seed)
        self.model = recipe.build_model(vocab_size)
        cfg = self.cfg
        betas = (cfg.beta1, cfg.beta2)
        if recipe.optimizer == "muon":
            matrices, rest = muon_param_groups(self.model)
            self.muon = Muon(
                matrices, lr=recipe.muon_lr, momentum=0.95, weight_decay=recipe.muon_weight_decay
            )
            holder = nn.ParameterList(rest)  # make_optimizer splits by dimension
            self.adamw = make_optimizer(holder, cfg.lr, cfg.weight_decay, betas)
        else:
            self.muon = None
            self.adamw = make_optimizer(self.model, cfg.lr, cfg.weight_decay, betas)
        self.sampler = BatchSampler(train_tokens, cfg.model.block_size, seed=cfg.seed)
        self.step_count = 0
        self.seconds = 0.0  # wall-clock training time
        # CPU time of this process while training (all threads): on a busy machine it counts
        # the work done, not the waiting for a core
        self.cpu_seconds = 0.0
        self.record: dict[str, list] = {
            "step": [],
            "seconds": [],
            "cpu_seconds": [],
            "tokens": [],
            "val": [],
        }

    @property
    def done(self) -> bool:
        return self.step_count >= self.cfg.max_steps

    def lr_factor(self) -> float:
        """The schedule's learning rate now, as a fraction of the peak."""
        c, r = self.cfg, self.recipe
        if r.schedule == "wsd":
            lr = warmup_stable_decay(
                self.step_count, c.lr, c.warmup_steps, c.max_steps, r.decay_fraction, c.min_lr
            )
        else:
            lr = warmup_cosine(self.step_count, c.lr, c.warmup_steps, c.max_steps, c.min_lr)
        return lr / c.lr

    def step(self) -> float:
        c, f = self.cfg, self.lr_factor()
        for group in self.adamw.param_groups:
            group["lr"] = c.lr * f
        if self.muon is not None:
            for group in self.muon.param_groups:
                group["lr"] = self.recipe.muon_lr * f
        x, y = self.sampler.sample(c.batch_size)  # (B, T), (B, T)
        _, loss = self.model(x, y)
        total = loss
        if isinstance(self.model, ModernGPT) and self.model.cfg.mlp == "moe":
            total = loss + self.recipe.aux_weight * self.model.aux_loss()
        self.adamw.zero_grad(set_to_none=True)
        if self.muon is not None:
            self.muon.zero_grad(set_to_none=True)
        total.backward()
        if c.grad_clip > 0:
            nn.utils.clip_grad_norm_(self.model.parameters(), c.grad_clip, foreach=True)
        self.adamw.step()
        if self.muon is not None:
            self.muon.step()
        self.step_count += 1
        return loss.item()

    @torch.no_grad()
    def evaluate(self) -> float:
        """Mean validation loss on the windows ``Trainer.estimate_loss`` uses (seed 10_001)."""
        self.model.eval()
        sampler = BatchSampler(self.val_tokens, self.cfg.model.block_size, seed=10_001)
        losses = [
            self.model(*sampler.sample(self.cfg.eval_batch_size))[1].item()
            for _ in range(self.cfg.eval_batches)
        ]
        self.model.train()
        return sum(losses) / len(losses)

    def train_steps(self, n: int) -> None:
        """Train up to ``n`` more steps (not past max_steps), adding their time to ``seconds``."""
        t0, c0 = time.perf_counter(), time.process_time()
        for _ in range(min(n, self.cfg.max_steps - self.step_count)):
            self.step()
        self.seconds += time.perf_counter() - t0
        self.cpu_seconds += time.process_time() - c0

    def log(self) -> None:
        tokens = self.step_count * self.cfg.batch_size * self.cfg.model.block_size
        values = (self.step_count, self.seconds, self.cpu_seconds, tokens, self.evaluate())
        for key, value in zip(self.record, values):
            self.record[key].append(value)


def race(runs: list[Run], eval_every: int = 50, chunk: int = 10, progress=None) -> list[Run]:
    """Train every run to its end, interleaved ``chunk`` steps at a time, evaluating each
    every ``eval_every`` of its steps and at its end (evaluation time is not counted)."""
    if eval_every % chunk:
        raise ValueError(f"race: eval_every={eval_every} must be a multiple of chunk={chunk}.")
    for run in runs:
        run.log()
    while not all(run.done for run in runs):
        for run in runs:
            if run.done:
                continue
            run.train_steps(chunk)
            if run.step_count % eval_every == 0 or run.done:
                run.log()
                if progress is not None:
                    progress(run)
    return runs


def time_to_target(record: dict, target: float) -> dict | None:
    """The first evaluation at or below ``target``: its step, seconds and tokens (None if
    the run never got there). Evaluations are discrete, so this is an upper bound."""
    for i, v in enumerate(record["val"]):
        if v <= target:
            return {k: v[i] for k, v in record.items()}
    return None


def seconds_per_step(runs: list[Run], probe_steps: int = 30, clock: str = "cpu") -> list[float]:
    """Each run's seconds per training step: the median over rounds of 5 steps, the runs
    taking turns (so a busy moment of the machine hits every run alike). ``clock``: "cpu"
    (the process's CPU time, robust when other programs share the cores) or "wall". The runs
    are spent: build fresh ones for the measurement that counts."""
    for run in runs:  # warm-up: the first calls allocate
        run.train_steps(3)
    rounds: list[list[float]] = [[] for _ in runs]
    for _ in range(max(1, probe_steps // 5)):
        for i, run in enumerate(runs):
            before = run.cpu_seconds if clock == "cpu" else run.seconds
            run.train_steps(5)
            after = run.cpu_seconds if clock == "cpu" else run.seconds
            rounds[i].append((after - before) / 5)
    return [statistics.median(r) for r in rounds]


def steps_for_budget(per_step: list[float], reference_steps: int, reference: int = 0) -> list[int]:
    """Equal wall time: the steps each recipe takes in the time ``reference_steps`` steps of
    the ``reference``-th take, from the seconds per step of each (``seconds_per_step``). A
    ratio of speeds measured side by side, so it holds on a busy machine too."""
    budget = reference_steps * per_step[reference]
    return [max(10, round(budget / t)) for t in per_step]


def bigram_loss(train_tokens, val_tokens, vocab_size: int) -> float:
    """Cross-entropy (nats per token) on ``val_tokens`` of a character bigram model counted on
    ``train_tokens`` (add-one smoothing): what a model that reads only the previous token can
    reach. A language model's loss levels off near it early in training, before attention
    learns to use the context."""
    train = torch.as_tensor(train_tokens, dtype=torch.long)
    val = torch.as_tensor(val_tokens, dtype=torch.long)
    if train.numel() < 2 or val.numel() < 2:
        raise ValueError("bigram_loss: need at least two training and two validation tokens.")
    counts = torch.ones(vocab_size, vocab_size)  # (V, V): add-one smoothing
    counts.index_put_((train[:-1], train[1:]), torch.ones(train.numel() - 1), accumulate=True)
    logp = counts.log() - counts.sum(dim=1, keepdim=True).log()  # (V, V): log p(next | prev)
    return -logp[val[:-1], val[1:]].mean().item()


_CHANGE_NAMES = {
    ("norm", "rmsnorm"): "RMSNorm",
    ("mlp", "swiglu"): "SwiGLU",
    ("mlp", "moe"): "a mixture of experts",
    ("qk_norm", True): "QK-norm",
    ("tie_head", False): "an untied head",
}


def describe_recipe(changes: dict) -> str:
    """The changes of a recipe (``Recipe`` keyword arguments: ``modern``, ``optimizer``,
    ``muon_lr``, ``muon_weight_decay``, ``schedule``, ``decay_fraction``) in words, e.g.
    "QK-norm, an untied head, Muon (peak rate 0.04, weight decay 0.1) for the blocks' matrices
    and warmup-stable-decay decaying over the last 50 % of the steps"; a default value is not
    named."""
    parts = [
        _CHANGE_NAMES[(k, v)]
        for k, v in (changes.get("modern") or {}).items()
        if (k, v) in _CHANGE_NAMES
    ]
    if changes.get("optimizer") == "muon":
        rate = changes.get("muon_lr", Recipe.muon_lr)
        decay = changes.get("muon_weight_decay", Recipe.muon_weight_decay)
        settings = f"peak rate {rate:g}" + (f", weight decay {decay:g}" if decay else "")
        parts.append(f"Muon ({settings}) for the blocks' matrices")
    if changes.get("schedule") == "wsd":
        fraction = changes.get("decay_fraction", Recipe.decay_fraction)
        over = f" decaying over the last {fraction * 100:g} % of the steps"
        parts.append("warmup-stable-decay" + (over if fraction != Recipe.decay_fraction else ""))
    if not parts:
        return "no change"
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]
