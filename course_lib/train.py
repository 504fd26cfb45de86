"""Training MiniGPT: AdamW, warmup + cosine decay, gradient clipping, evaluation, checkpoints.

In a notebook::

    trainer = Trainer(TrainConfig(...), train_tokens, val_tokens, vocab_size)
    history = trainer.train()
    trainer.save("ckpt.pt"); trainer = Trainer.load("ckpt.pt", train_tokens, val_tokens)

From the command line (a JSON file of ``TrainConfig`` fields)::

    python -m course_lib.train --config course_lib/configs/long.json --out runs/long
    python -m course_lib.train --resume runs/long/ckpt.pt --out runs/long --max-steps 6000
    torchrun --nproc_per_node=2 -m course_lib.train --config ...   # DistributedDataParallel

Under ``torchrun`` every rank samples its own batches (seed + rank), gradients are averaged by
``DistributedDataParallel`` (NCCL on GPUs, gloo on CPUs), and only rank 0 prints and writes;
the checkpoint holds the plain (unwrapped) model, so the single-process code loads it, and the
sampler and random-number states of every rank, so a resumed run draws, on each rank, the
batches the uninterrupted run would have drawn.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import time
import warnings
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

import torch
from torch import nn

from .data import BatchSampler, CharTokenizer, shakespeare_splits, split_text, synthetic_corpus
from .model import GPTConfig, MiniGPT, flops_per_token
from .schedule import warmup_cosine

__all__ = ["TrainConfig", "History", "Trainer", "make_optimizer", "load_config", "load_model", "run", "main"]


@dataclass
class TrainConfig:
    """Everything a run needs: the model's shape (a ``GPTConfig`` whose vocabulary size the
    tokenizer fills in) and the optimisation settings. In JSON the shape is a nested object:
    ``{"model": {"n_layer": 4, ...}, "batch_size": 12, ...}``."""

    model: GPTConfig = field(default_factory=GPTConfig)
    # optimisation
    batch_size: int = 12
    max_steps: int = 2000
    lr: float = 1e-3
    min_lr: float = 1e-4
    warmup_steps: int = 100
    weight_decay: float = 0.1
    beta1: float = 0.9
    beta2: float = 0.99
    grad_clip: float = 1.0
    # evaluation and bookkeeping
    eval_interval: int = 250
    eval_batches: int = 20
    eval_batch_size: int = 64
    seed: int = 1337
    corpus: str = "shakespeare"  # or "synthetic" (the tiny test corpus)
    val_fraction: float = 0.1
    threads: int | None = None
    name: str = "run"

    def __post_init__(self):
        if isinstance(self.model, dict):
            self.model = _model_from_dict(self.model)
        if self.max_steps < 1 or self.batch_size < 1 or self.eval_interval < 1:
            raise ValueError("TrainConfig: max_steps, batch_size and eval_interval must be positive.")
        if not 0 <= self.warmup_steps <= self.max_steps:
            raise ValueError(
                f"TrainConfig: warmup_steps must lie in [0, max_steps={self.max_steps}]; got {self.warmup_steps}."
            )
        if self.corpus not in ("shakespeare", "synthetic"):
            raise ValueError(f"TrainConfig: corpus must be 'shakespeare' or 'synthetic'; got {self.corpus!r}.")

    @property
    def tokens_per_step(self) -> int:
        return self.batch_size * self.model.block_size


def _model_from_dict(data: dict) -> GPTConfig:
    known = {f.name for f in fields(GPTConfig)}
    unknown = sorted(set(data) - known)
    if unknown:
        raise ValueError(f"TrainConfig: the model section has unknown keys {unknown}; valid keys are {sorted(known)}.")
    return GPTConfig(**data)


def load_config(path: str | Path, **overrides) -> TrainConfig:
    """A TrainConfig from a JSON file; unknown keys are an error (a typo would be ignored).
    ``overrides`` replace top-level keys (``model=`` a dict replaces keys of the model section)."""
    data = json.loads(Path(path).read_text())
    overrides = {k: v for k, v in overrides.items() if v is not None}
    if "model" in overrides:
        overrides["model"] = {**data.get("model", {}), **overrides["model"]}
    data.update(overrides)
    _clamp_warmup(data, overrides)
    known = {f.name for f in fields(TrainConfig)}
    unknown = sorted(set(data) - known)
    if unknown:
        raise ValueError(f"load_config: {path} has unknown keys {unknown}; valid keys are {sorted(known)} "
                         "(the model's shape goes in the \"model\" section).")
    return TrainConfig(**data)


def _clamp_warmup(data: dict, overrides: dict) -> None:
    """A run shortened by a ``max_steps`` override keeps a valid schedule (warmup <= max_steps)."""
    if "max_steps" in overrides and data.get("warmup_steps", 0) > data["max_steps"]:
        data["warmup_steps"] = data["max_steps"]


def _dist_ready() -> bool:
    return torch.distributed.is_available() and torch.distributed.is_initialized()


@dataclass
class History:
    """What happened during training: evaluations (step, train and validation loss), the
    loss and learning rate of every step, and timing. ``as_dict()`` feeds ``loss_curve``."""

    step: list[int] = field(default_factory=list)
    train: list[float] = field(default_factory=list)
    val: list[float] = field(default_factory=list)
    step_loss: list[float] = field(default_factory=list)
    lr: list[float] = field(default_factory=list)
    train_seconds: float = 0.0
    tokens: int = 0

    def as_dict(self) -> dict:
        return {"step": self.step, "train": self.train, "val": self.val}

    @property
    def tokens_per_second(self) -> float:
        return self.tokens / self.train_seconds if self.train_seconds > 0 else float("nan")


def make_optimizer(model: nn.Module, lr: float, weight_decay: float, betas=(0.9, 0.99)) -> torch.optim.AdamW:
    """AdamW with weight decay on matrices only (linear weights, embeddings); biases and
    LayerNorm gains are not decayed (shrinking them towards 0 has no regularising meaning)."""
    decay = [p for p in model.parameters() if p.requires_grad and p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.requires_grad and p.dim() < 2]
    groups = [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    # fused=True: one kernel per step instead of a dozen passes over memory (several times
    # faster on CPU, where a small model's optimiser step is a large share of the step time).
    return torch.optim.AdamW(groups, lr=lr, betas=betas, fused=True)


def _seed_everything(seed: int) -> None:
    import random

    import numpy as np

    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


class Trainer:
    """Owns the model, optimiser, batch samplers and history of one run.

    train_tokens, val_tokens: 1-D int64 token tensors. ``tokenizer`` (optional) is stored in
    checkpoints so a checkpoint can generate text on its own.
    """

    def __init__(self, cfg: TrainConfig, train_tokens: torch.Tensor, val_tokens: torch.Tensor,
                 vocab_size: int, tokenizer: CharTokenizer | None = None, rank: int = 0, world_size: int = 1):
        self.cfg, self.tokenizer, self.rank, self.world_size = cfg, tokenizer, rank, world_size
        _seed_everything(cfg.seed)  # the same initial weights on every rank
        self.model = MiniGPT(cfg.model.with_vocab(vocab_size))
        self.module = self.model  # the unwrapped model (the DDP wrapper, if any, is self.model)
        self.optimizer = make_optimizer(self.model, cfg.lr, cfg.weight_decay, (cfg.beta1, cfg.beta2))
        self.train_data, self.val_data = train_tokens, val_tokens
        self.sampler = BatchSampler(train_tokens, cfg.model.block_size, seed=cfg.seed + rank)
        self.step = 0
        self.history = History()

    # -- evaluation -------------------------------------------------------------------------
    @torch.no_grad()
    def estimate_loss(self) -> dict[str, float]:
        """Mean loss on the same fixed windows of train and validation data at every call
        (a fixed seed per split), so successive evaluations differ only because the model did."""
        model = self.module
        was_training = model.training
        model.eval()
        out = {}
        for i, (split, data) in enumerate((("train", self.train_data), ("val", self.val_data))):
            sampler = BatchSampler(data, self.cfg.model.block_size, seed=10_000 + i)
            losses = [model(*sampler.sample(self.cfg.eval_batch_size))[1].item() for _ in range(self.cfg.eval_batches)]
            out[split] = sum(losses) / len(losses)
        model.train(was_training)
        return out

    def _evaluate_and_record(self) -> dict[str, float]:
        losses = self.estimate_loss()
        self.history.step.append(self.step)
        self.history.train.append(losses["train"])
        self.history.val.append(losses["val"])
        return losses

    # -- training ---------------------------------------------------------------------------
    def train_step(self) -> float:
        """One optimisation step; returns the (pre-update) training loss of its batch."""
        cfg = self.cfg
        lr = warmup_cosine(self.step, cfg.lr, cfg.warmup_steps, cfg.max_steps, cfg.min_lr)
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        x, y = self.sampler.sample(cfg.batch_size)  # (B, T), (B, T)
        _, loss = self.model(x, y)
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if cfg.grad_clip > 0:
            nn.utils.clip_grad_norm_(self.model.parameters(), cfg.grad_clip, foreach=True)
        self.optimizer.step()
        self.step += 1
        value = loss.item()
        self.history.step_loss.append(value)
        self.history.lr.append(lr)
        return value

    def train(self, steps: int | None = None, progress: bool = True, evaluate: bool = True) -> History:
        """Train until ``max_steps`` (or for ``steps`` more steps), evaluating every
        ``eval_interval`` steps and at the end. Returns the history."""
        cfg = self.cfg
        stop = cfg.max_steps if steps is None else min(cfg.max_steps, self.step + steps)
        bar = None
        if progress and self.rank == 0:
            from tqdm.auto import tqdm

            bar = tqdm(total=stop - self.step, desc=cfg.name, mininterval=2.0)
        self.model.train()
        if evaluate and self.step == 0 and not self.history.step:
            self._evaluate_and_record()
        while self.step < stop:
            t0 = time.perf_counter()
            loss = self.train_step()
            self.history.train_seconds += time.perf_counter() - t0
            self.history.tokens += cfg.tokens_per_step * self.world_size
            if bar is not None:
                bar.update(1)
                if self.step % 50 == 0:
                    bar.set_postfix(loss=f"{loss:.3f}")
            if evaluate and (self.step % cfg.eval_interval == 0 or self.step == cfg.max_steps):
                losses = self._evaluate_and_record()
                if bar is not None:
                    bar.set_postfix(train=f"{losses['train']:.3f}", val=f"{losses['val']:.3f}")
        if bar is not None:
            bar.close()
        return self.history

    # -- checkpoints ------------------------------------------------------------------------
    def rank_state(self) -> dict:
        """What differs between the ranks of a DDP run: the batch sampler's generator and the
        global random-number state (dropout). One entry of the checkpoint's ``ranks`` list."""
        return {"sampler": self.sampler.state_dict(), "torch_rng": torch.get_rng_state()}

    def state_dict(self) -> dict:
        """Everything ``load`` needs. Under DistributedDataParallel this is a collective call
        (every rank must make it): it gathers every rank's ``rank_state`` into ``ranks``."""
        mine = self.rank_state()
        ranks = [mine]
        if self.world_size > 1 and _dist_ready():
            ranks = [None] * self.world_size
            torch.distributed.all_gather_object(ranks, mine)  # ranks[r] is rank r's state
        return {
            "config": asdict(self.cfg),
            "vocab_size": self.module.cfg.vocab_size,
            "model": self.module.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "step": self.step,
            "history": asdict(self.history),
            "world_size": self.world_size,
            "ranks": ranks,
            "tokenizer": self.tokenizer.state_dict() if self.tokenizer is not None else None,
        }

    def save(self, path: str | Path) -> None:
        """Write a checkpoint that resumes exactly (model, optimiser, and every rank's sampler
        and RNG states). Under DDP every rank calls it (it gathers the ranks' states); rank 0
        writes the file."""
        state = self.state_dict()
        if self.rank != 0:
            return
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        torch.save(state, path)

    @classmethod
    def load(cls, path: str | Path, train_tokens: torch.Tensor, val_tokens: torch.Tensor,
             rank: int = 0, world_size: int = 1, **overrides) -> "Trainer":
        """Rebuild a Trainer from ``save``; the next ``train_step`` continues as if never stopped.

        ``rank``/``world_size``: this process's place in a DDP run; rank r restores the sampler
        and RNG states that rank r saved. ``overrides`` replace settings of the checkpoint's
        config, e.g. ``max_steps=6000`` to train on (the cosine schedule then stretches to the
        new end, so the continuation is not the run a 6000-step config would have made)."""
        state = torch.load(path, map_location="cpu", weights_only=False)
        data = {**state["config"], **{k: v for k, v in overrides.items() if v is not None}}
        _clamp_warmup(data, overrides)
        cfg = TrainConfig(**data)
        tok = CharTokenizer.from_state_dict(state["tokenizer"]) if state.get("tokenizer") else None
        trainer = cls(cfg, train_tokens, val_tokens, state["vocab_size"], tokenizer=tok, rank=rank,
                      world_size=world_size)
        trainer.module.load_state_dict(state["model"])
        trainer.optimizer.load_state_dict(state["optimizer"])
        trainer.step = state["step"]
        trainer.history = History(**state["history"])
        # checkpoints written before per-rank states held rank 0's state only
        ranks = state.get("ranks") or [{"sampler": state["sampler"], "torch_rng": state["torch_rng"]}]
        saved_world = state.get("world_size", len(ranks))
        if saved_world != world_size and rank == 0:
            warnings.warn(f"Trainer.load: the checkpoint was written by {saved_world} process(es) and is resumed "
                          f"by {world_size}; the batches will differ from those of an uninterrupted run.",
                          stacklevel=2)
        if rank < len(ranks):
            trainer.sampler.load_state_dict(ranks[rank]["sampler"])
            torch.set_rng_state(ranks[rank]["torch_rng"])
        # a rank the checkpoint has no state for keeps its fresh stream (seed + rank)
        return trainer


def load_model(path: str | Path) -> tuple[MiniGPT, CharTokenizer | None]:
    """Just the trained model (eval mode) and its tokenizer from a checkpoint."""
    state = torch.load(path, map_location="cpu", weights_only=False)
    cfg = TrainConfig(**state["config"])
    model = MiniGPT(cfg.model.with_vocab(state["vocab_size"]))
    model.load_state_dict(state["model"])
    tok = CharTokenizer.from_state_dict(state["tokenizer"]) if state.get("tokenizer") else None
    return model.eval(), tok


def corpus_tokens(cfg: TrainConfig) -> tuple[CharTokenizer, torch.Tensor, torch.Tensor]:
    """The tokenizer and the train/validation tokens the config asks for."""
    if cfg.corpus == "synthetic":
        text = synthetic_corpus(20_000, seed=0)
        tok = CharTokenizer.from_text(text)
        train, val = split_text(text, cfg.val_fraction)
        return tok, tok.encode(train), tok.encode(val)
    s = shakespeare_splits(cfg.val_fraction)
    return s.tokenizer, s.train, s.val


def run(cfg: TrainConfig | None, out_dir: str | Path | None = None, progress: bool = True,
        resume: str | Path | None = None, steps: int | None = None, overrides: dict | None = None) -> dict:
    """Train ``cfg`` (under torchrun: with DistributedDataParallel), then write
    ``out_dir/ckpt.pt`` and ``out_dir/results.json`` from rank 0. Returns the results dict.

    ``resume``: a checkpoint to continue from; its own config is used (``cfg`` may be None),
    with ``overrides`` (e.g. ``{"max_steps": 6000}``) replacing its settings. ``steps``: train
    at most this many steps in this call (then save; a later ``resume`` continues the schedule).
    """
    if cfg is None and resume is None:
        raise ValueError("run: pass a TrainConfig, or a checkpoint to resume from.")
    if resume is not None:  # the checkpoint's config decides the corpus and threads too
        cfg = TrainConfig(**torch.load(resume, map_location="cpu", weights_only=False)["config"])
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    distributed = world_size > 1
    if distributed:
        import torch.distributed as dist

        dist.init_process_group(backend="nccl" if torch.cuda.is_available() else "gloo")
    tok, train, val = corpus_tokens(cfg)
    if resume:
        trainer = Trainer.load(resume, train, val, rank=rank, world_size=world_size, **(overrides or {}))
        cfg = trainer.cfg  # the checkpoint's config with the overrides
    else:
        trainer = Trainer(cfg, train, val, tok.vocab_size, tokenizer=tok, rank=rank, world_size=world_size)
    if distributed:
        from torch.nn.parallel import DistributedDataParallel

        trainer.model = DistributedDataParallel(trainer.module)
    t0 = time.perf_counter()
    history = trainer.train(steps=steps, progress=progress)
    if not history.step or history.step[-1] != trainer.step:
        trainer._evaluate_and_record()  # stopped between evaluations (``steps``): measure here
    wall = time.perf_counter() - t0
    mcfg = trainer.module.cfg
    final = {"train": history.train[-1], "val": history.val[-1]}
    results = {
        "name": cfg.name,
        "config": asdict(cfg),
        "world_size": world_size,
        "params": trainer.module.num_params(),
        "vocab_size": mcfg.vocab_size,
        "steps": trainer.step,
        "tokens_per_second": history.tokens_per_second,
        "train_seconds": history.train_seconds,
        "wall_seconds": wall,
        "flops_per_token": flops_per_token(mcfg),
        "final_train_loss": final["train"],
        "final_val_loss": final["val"],
        "val_perplexity": math.exp(final["val"]),
        "history": history.as_dict(),
        "threads": torch.get_num_threads(),
    }
    if out_dir is not None:
        trainer.save(Path(out_dir) / "ckpt.pt")  # every rank: it gathers the ranks' sampler states
    if rank == 0:
        gen = torch.Generator().manual_seed(0)
        start = tok.encode("\n")[None]  # (1, 1)
        sample = trainer.module.generate(start, 300, temperature=0.8, top_k=None, generator=gen)[0]
        results["sample"] = tok.decode(sample[1:])
        if out_dir is not None:
            (Path(out_dir) / "results.json").write_text(json.dumps(results, indent=1) + "\n")
        print(f"{cfg.name}: {trainer.step} steps, val loss {final['val']:.4f} "
              f"(perplexity {math.exp(final['val']):.3f}), {history.tokens_per_second:,.0f} tokens/s, "
              f"{history.train_seconds:.1f} s training")
    if distributed:
        import torch.distributed as dist

        dist.barrier()
        dist.destroy_process_group()
    return results


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description="Train MiniGPT on the course corpus.")
    p.add_argument("--config", default=None, help="JSON file of TrainConfig fields (not needed with --resume)")
    p.add_argument("--out", default=None, help="folder for ckpt.pt and results.json")
    p.add_argument("--max-steps", type=int, default=None,
                   help="override max_steps (also on --resume: the schedule then ends at the new value)")
    p.add_argument("--steps", type=int, default=None,
                   help="train at most this many steps now, then save (continue later with --resume)")
    p.add_argument("--resume", default=None,
                   help="checkpoint to continue from (its own config is used; --max-steps replaces its max_steps)")
    p.add_argument("--no-progress", action="store_true")
    args = p.parse_args(argv)
    if args.config is None and args.resume is None:
        p.error("pass --config (a new run) or --resume (continue a checkpoint)")
    overrides = {"max_steps": args.max_steps}
    cfg = None if args.resume else load_config(args.config, **overrides)
    return run(cfg, args.out, progress=not args.no_progress, resume=args.resume, steps=args.steps,
               overrides=overrides)


if __name__ == "__main__":
    main()
