"""Training MiniGPT: AdamW, warmup + cosine decay, gradient clipping, evaluation, checkpoints.

In a notebook::

    trainer = Trainer(TrainConfig(...), train_tokens, val_tokens, vocab_size)
    history = trainer.train()
    state = copy.deepcopy(trainer.state_dict())  # everything a resumed run needs
    trainer.load_state_dict(state)               # (as nn.Module's; deepcopy: a snapshot)
    trainer.save("ckpt.pt"); trainer = Trainer.load("ckpt.pt", train_tokens, val_tokens)

``Trainer`` holds the run's state (model, optimiser, gradient scaler, step, history, each
rank's batch sampler and random-number states) and builds the DistributedDataParallel wrapper
itself; ``course_lib.checkpoint`` only writes and reads the files. Its pieces are functions of
their own here: ``optimizer_step`` (one step: mixed precision, clipping), ``estimate_loss``
(the fixed evaluation windows), ``read_points`` (when the losses are read from the device).

From the command line (a JSON file of ``TrainConfig`` fields)::

    python -m course_lib.train --config course_lib/configs/long.json --out runs/long
    python -m course_lib.train --resume runs/long/ckpt.pt --out runs/long --max-steps 6000
    torchrun --nproc_per_node=2 -m course_lib.train --config ...   # DistributedDataParallel

Under ``torchrun`` every rank samples its own batches (seed + rank), gradients are averaged by
``DistributedDataParallel`` (NCCL on GPUs, gloo on CPUs), and only rank 0 prints and writes;
the checkpoint holds the plain (unwrapped) model, so the single-process code loads it, and the
sampler and random-number states of every rank, so a resumed run draws, on each rank, the
batches the uninterrupted run would have drawn.

Devices and precision (``device`` and ``precision`` in the config, ``--device`` on the command
line) are ``course_lib.device``'s: ``auto`` takes a CUDA GPU, then Apple's MPS, then the CPU,
and trains in bf16 or fp16 autocast on GPUs, in fp32 on the CPU. The batch sampler stays on the
CPU (its batches move to the device). Checkpoints are ``course_lib.checkpoint``'s: CPU tensors,
so a checkpoint from a GPU loads anywhere; the corpus and its tokenizer come from
``course_lib.data.corpus_tokens``::

    python -m course_lib.train --config course_lib/configs/gpu.json --device auto
"""

from __future__ import annotations

import argparse
import json
import math
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch
from torch import nn

from .checkpoint import load_model, rank_entry, read_checkpoint, write_checkpoint
from .config import TrainConfig, config_from_dict, load_config
from .data import BatchSampler, corpus_tokens, tokenizer_from_state
from .device import (
    AUTOCAST_DTYPES,
    PRECISIONS,
    all_ranks,
    autocast,
    ddp_backend,
    finish_distributed,
    init_distributed,
    move_batch,
    resolve_device,
    resolve_precision,
    rng_state,
    seed_everything,
    set_rng_state,
    wrap_distributed,
)
from .model import MiniGPT, flops_per_token
from .schedule import warmup_cosine

__all__ = ["History", "Trainer", "make_optimizer", "optimizer_step", "estimate_loss"]
__all__ += ["read_points", "progress_bar", "run", "main"]
# at home in course_lib.config, .checkpoint, .data and .device; importable from here too
__all__ += ["TrainConfig", "load_config", "load_model", "corpus_tokens", "move_batch"]
__all__ += ["resolve_device", "resolve_precision", "ddp_backend", "PRECISIONS", "AUTOCAST_DTYPES"]


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

    def record_steps(self, losses: list[torch.Tensor], since: float, tokens_per_step: int) -> None:
        """Read ``losses`` (0-d tensors, one per step, on the device: this waits for it) and
        count their time (from ``since``, a ``time.perf_counter()``) and tokens."""
        self.step_loss.extend(torch.stack(losses).tolist())
        self.train_seconds += time.perf_counter() - since
        self.tokens += len(losses) * tokens_per_step

    def record_evaluation(self, step: int, losses: dict[str, float]) -> None:
        self.step.append(step)
        self.train.append(losses["train"])
        self.val.append(losses["val"])

    @property
    def tokens_per_second(self) -> float:
        return self.tokens / self.train_seconds if self.train_seconds > 0 else float("nan")


def make_optimizer(
    model: nn.Module, lr: float, weight_decay: float, betas=(0.9, 0.99)
) -> torch.optim.AdamW:
    """AdamW with weight decay on matrices only (linear weights, embeddings); biases and
    LayerNorm gains are not decayed (shrinking them towards 0 has no regularising meaning)."""
    decay = [p for p in model.parameters() if p.requires_grad and p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.requires_grad and p.dim() < 2]
    groups = [
        {"params": decay, "weight_decay": weight_decay},
        {"params": no_decay, "weight_decay": 0.0},
    ]
    # fused=True: one kernel per step instead of a dozen passes over memory (several times
    # faster on CPU, where a small model's optimiser step is a large share of the step time;
    # on CUDA and MPS the same option takes PyTorch's fused GPU kernel).
    return torch.optim.AdamW(groups, lr=lr, betas=betas, fused=True)


@torch.no_grad()
def estimate_loss(
    model: nn.Module, splits: dict[str, torch.Tensor], cfg: TrainConfig, device, precision: str
) -> dict[str, float]:
    """Mean loss of ``model`` on the same fixed windows of each split (1-D token tensors) at
    every call (a fixed seed per split, in the order given), so successive evaluations differ
    only because the model did. The model is put back in the mode it was in."""
    was_training = model.training
    model.eval()
    out = {}
    for i, (split, data) in enumerate(splits.items()):
        sampler = BatchSampler(data, cfg.model.block_size, seed=10_000 + i)
        losses = []
        for _ in range(cfg.eval_batches):
            x, y = move_batch(*sampler.sample(cfg.eval_batch_size), device)  # (B, T), (B, T)
            with autocast(precision, device):
                losses.append(model(x, y)[1].item())
        out[split] = sum(losses) / len(losses)
    model.train(was_training)
    return out


def read_points(
    step: int, stop: int, read_every: int, cfg: TrainConfig, evaluate: bool = True
) -> list[tuple[int, bool]]:
    """Where ``Trainer.train`` reads the step losses from the device between ``step`` and
    ``stop``, as (step, whether it evaluates there): every ``read_every`` steps, and at each
    evaluation (every ``eval_interval`` steps and at ``max_steps``) and at ``stop``."""
    if int(read_every) < 1:
        raise ValueError(f"Trainer.train: read_every must be a positive number; got {read_every}.")
    points = []
    while step < stop:
        due = (step // cfg.eval_interval + 1) * cfg.eval_interval if evaluate else stop
        step = min(stop, step + int(read_every), due)
        points.append((step, evaluate and (step % cfg.eval_interval == 0 or step == cfg.max_steps)))
    return points


def optimizer_step(model, optimizer, scaler, batch, lr: float, grad_clip: float) -> torch.Tensor:
    """One step of ``optimizer`` at learning rate ``lr`` on ``batch`` = (x, y), both (B, T): the
    forward pass (in the caller's autocast context), the backward pass through ``scaler``
    (fp16's loss scaling; a disabled scaler passes everything through), the gradients clipped
    to norm ``grad_clip`` (0: not clipped). Returns the loss, detached, where it was computed:
    reading it makes the CPU wait for the device."""
    for group in optimizer.param_groups:
        group["lr"] = lr
    _, loss = model(*batch)
    optimizer.zero_grad(set_to_none=True)
    scaler.scale(loss).backward()
    if grad_clip > 0:
        scaler.unscale_(optimizer)  # clip the true gradients, not the scaled ones
        nn.utils.clip_grad_norm_(model.parameters(), grad_clip, foreach=True)
    scaler.step(optimizer)  # skips the step if fp16 gradients overflowed
    scaler.update()
    return loss.detach()


def progress_bar(total: int, name: str, show: bool):
    """A tqdm bar of ``total`` steps (disabled, all its calls do nothing)."""
    from tqdm.auto import tqdm  # the notebook's bar in Jupyter

    return tqdm(total=total, desc=name, mininterval=2.0, disable=not show)


class Trainer:
    """One run's model, optimiser, gradient scaler, batch sampler, step and history, all held by
    ``state_dict``; tokens: 1-D int64 tensors on the CPU. ``device``: a torch.device as it is, or
    a name for ``resolve_device`` (default: the config's). Under torchrun, DDP wraps the model."""

    def __init__(
        self,
        cfg: TrainConfig,
        train_tokens: torch.Tensor,
        val_tokens: torch.Tensor,
        vocab_size: int,
        tokenizer=None,
        rank: int = 0,
        world_size: int = 1,
        device: str | torch.device | None = None,
    ):
        self.cfg, self.tokenizer, self.rank, self.world_size = cfg, tokenizer, rank, world_size
        device = device or cfg.device
        self.device = device if isinstance(device, torch.device) else resolve_device(device)
        self.precision = resolve_precision(cfg.precision, self.device)
        seed_everything(cfg.seed)  # the same initial weights on every rank and every device
        self.module = MiniGPT(cfg.model.with_vocab(vocab_size)).to(self.device)
        model = torch.compile(self.module) if cfg.compile else self.module
        self.model = wrap_distributed(model, self.device)  # what steps call (DDP in a group)
        self.optimizer = make_optimizer(self.module, cfg.lr, cfg.weight_decay, cfg.betas)
        self.scaler = torch.amp.GradScaler(self.device.type, enabled=self.precision == "fp16")
        self.train_data, self.val_data = train_tokens, val_tokens
        self.sampler = BatchSampler(train_tokens, cfg.model.block_size, seed=cfg.seed + rank)
        self.step, self.history = 0, History()

    def estimate_loss(self, record: bool = False) -> dict[str, float]:
        """Mean train and validation losses on fixed windows; ``record``: into the history."""
        splits = {"train": self.train_data, "val": self.val_data}
        losses = estimate_loss(self.module, splits, self.cfg, self.device, self.precision)
        if record:
            self.history.record_evaluation(self.step, losses)
        return losses

    def train_step(self) -> float:
        """One optimisation step; returns the (pre-update) training loss of its batch."""
        self.history.step_loss.append(value := self._step().item())
        return value

    def _step(self) -> torch.Tensor:
        """One optimisation step on the next batch; its loss, a 0-d tensor left on the device."""
        cfg = self.cfg
        lr = warmup_cosine(self.step, cfg.lr, cfg.warmup_steps, cfg.max_steps, cfg.min_lr)
        batch = move_batch(*self.sampler.sample(cfg.batch_size), self.device)  # (B, T), (B, T)
        with autocast(self.precision, self.device):
            loss = optimizer_step(self.model, self.optimizer, self.scaler, batch, lr, cfg.grad_clip)
        self.step += 1
        self.history.lr.append(lr)
        return loss

    def train(self, steps=None, progress=True, evaluate=True, read_every=50) -> History:
        """Train until ``max_steps`` (or ``steps`` more), evaluating every ``eval_interval``
        steps and at the end; returns the history. Losses are read (waiting for the device) at
        ``read_points``; the training time leaves out the evaluations."""
        cfg, history = self.cfg, self.history
        stop = cfg.max_steps if steps is None else min(cfg.max_steps, self.step + steps)
        points = read_points(self.step, stop, read_every, cfg, evaluate)
        bar = progress_bar(stop - self.step, cfg.name, progress and self.rank == 0)
        self.model.train()
        if evaluate and self.step == 0 and not history.step:
            self.estimate_loss(record=True)
        for end, due in points:
            t0, losses = time.perf_counter(), [self._step() for _ in range(end - self.step)]
            history.record_steps(losses, t0, cfg.tokens_per_step * self.world_size)
            shown = self.estimate_loss(record=True) if due else {"loss": history.step_loss[-1]}
            bar.update(len(losses))
            bar.set_postfix({k: f"{v:.3f}" for k, v in shown.items()})
        bar.close()
        return history

    def state_dict(self) -> dict:
        """Everything a resumed run needs, each rank's sampler and RNG states in ``ranks`` (a
        collective call under DDP); its tensors are the live ones, as ``nn.Module``'s."""
        return {
            "config": asdict(self.cfg),
            "vocab_size": self.module.cfg.vocab_size,
            "model": self.module.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "scaler": self.scaler.state_dict(),
            "step": self.step,
            "history": asdict(self.history),
            "world_size": self.world_size,
            "ranks": all_ranks({"sampler": self.sampler.state_dict(), **rng_state(self.device)}),
            "tokenizer": self.tokenizer.state_dict() if self.tokenizer is not None else None,
        }

    def load_state_dict(self, state: dict) -> None:
        """Continue from a ``state_dict`` as if never stopped; rank r takes rank r's states."""
        self.module.load_state_dict(state["model"])  # copies onto the trainer's device
        self.optimizer.load_state_dict(state["optimizer"])  # moves the moments there too
        if state.get("scaler") and self.scaler.is_enabled():
            self.scaler.load_state_dict(state["scaler"])
        self.step, self.history = state["step"], History(**state["history"])
        mine = rank_entry(state, self.rank, self.world_size)
        if mine is not None:  # else this rank keeps its fresh stream (seed + rank)
            self.sampler.load_state_dict(mine["sampler"])
            set_rng_state(mine, self.device)

    def save(self, path: str | Path) -> None:
        """``state_dict`` to a file (``write_checkpoint``); every rank calls it, rank 0 writes."""
        state = self.state_dict()
        if self.rank == 0:
            write_checkpoint(state, path)

    @classmethod
    def load(cls, path, train_tokens, val_tokens, map_location="cpu", **settings) -> "Trainer":
        """``save``'s file as a Trainer. ``settings``: ``rank``, ``world_size``, ``device``, and
        config values to replace (``max_steps=6000``: the schedule stretched to the new end)."""
        state = read_checkpoint(path, map_location)
        where = {k: settings.pop(k) for k in ("rank", "world_size", "device") if k in settings}
        cfg = config_from_dict(state["config"], settings, source=str(path))
        tok = tokenizer_from_state(state["tokenizer"]) if state.get("tokenizer") else None
        trainer = cls(cfg, train_tokens, val_tokens, state["vocab_size"], tok, **where)
        trainer.load_state_dict(state)
        return trainer


def run(
    cfg: TrainConfig | None,
    out_dir: str | Path | None = None,
    progress: bool = True,
    resume: str | Path | None = None,
    steps: int | None = None,
    overrides: dict | None = None,
) -> dict:
    """Train ``cfg`` (under torchrun: with DistributedDataParallel), then write
    ``out_dir/ckpt.pt`` and ``out_dir/results.json`` from rank 0. Returns the results dict.

    ``resume``: a checkpoint to continue from; its own config is used (``cfg`` may be None),
    with ``overrides`` (e.g. ``{"max_steps": 6000}``) replacing its settings. ``steps``: train
    at most this many steps in this call (then save; a later ``resume`` continues the schedule).
    """
    if cfg is None and resume is None:
        raise ValueError("run: pass a TrainConfig, or a checkpoint to resume from.")
    if resume is not None:  # the checkpoint's config decides the corpus and threads too
        cfg = TrainConfig(**read_checkpoint(resume)["config"])
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    overrides = {k: v for k, v in (overrides or {}).items() if v is not None}
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))  # this process's index on its machine
    device = resolve_device(overrides.get("device", cfg.device), local_rank)
    distributed = world_size > 1
    if distributed:
        init_distributed(device)
    tok, train, val = corpus_tokens(cfg)
    where = {"rank": rank, "world_size": world_size, "device": device}  # device: resolved above
    if resume:
        settings = {k: v for k, v in overrides.items() if k != "device"}
        trainer = Trainer.load(resume, train, val, **where, **settings)
        cfg = trainer.cfg  # the checkpoint's config with the overrides
    else:
        trainer = Trainer(cfg, train, val, tok.vocab_size, tokenizer=tok, **where)
    t0 = time.perf_counter()
    history = trainer.train(steps=steps, progress=progress)
    if not history.step or history.step[-1] != trainer.step:
        trainer.estimate_loss(record=True)  # stopped between evaluations (``steps``): measure here
    wall = time.perf_counter() - t0
    mcfg = trainer.module.cfg
    final = {"train": history.train[-1], "val": history.val[-1]}
    results = {
        "name": cfg.name,
        "config": asdict(cfg),
        "world_size": world_size,
        "device": str(device),
        "precision": trainer.precision,
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
        gen = torch.Generator(device=device).manual_seed(0)  # sampling draws on the model's device
        start = tok.encode("\n")[None].to(device)  # (1, 1)
        sample = trainer.module.generate(start, 300, temperature=0.8, top_k=None, generator=gen)[0]
        results["sample"] = tok.decode(sample[1:].cpu())
        if out_dir is not None:
            (Path(out_dir) / "results.json").write_text(json.dumps(results, indent=1) + "\n")
        print(
            f"{cfg.name}: {trainer.step} steps, val loss {final['val']:.4f} "
            f"(perplexity {math.exp(final['val']):.3f}), "
            f"{history.tokens_per_second:,.0f} tokens/s, {history.train_seconds:.1f} s training"
        )
    if distributed:
        finish_distributed()
    return results


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description="Train MiniGPT on the course corpus.")
    add = p.add_argument
    add("--config", help="JSON file of TrainConfig fields (not needed with --resume)")
    add("--out", help="folder for ckpt.pt and results.json")
    add("--max-steps", type=int, help="override max_steps (on --resume: the schedule's new end)")
    add("--steps", type=int, help="train at most this many steps now, then save (see --resume)")
    add("--resume", help="checkpoint to continue from (its own config, with these overrides)")
    add("--device", help="auto (CUDA, then MPS, then CPU), cpu, cuda, cuda:N or mps")
    add("--precision", choices=PRECISIONS, help="auto: bf16 or fp16 on CUDA, fp32 elsewhere")
    add("--compile", action=argparse.BooleanOptionalAction, help="torch.compile the model")
    add("--no-progress", action="store_true")
    args = p.parse_args(argv)
    if args.config is None and args.resume is None:
        p.error("pass --config (a new run) or --resume (continue a checkpoint)")
    overrides = {
        "max_steps": args.max_steps,
        "device": args.device,
        "precision": args.precision,
        "compile": args.compile,
    }
    cfg = None if args.resume else load_config(args.config, **overrides)
    return run(
        cfg,
        args.out,
        progress=not args.no_progress,
        resume=args.resume,
        steps=args.steps,
        overrides=overrides,
    )


if __name__ == "__main__":
    main()
