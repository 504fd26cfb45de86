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
from contextlib import nullcontext
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch
from torch import nn

from .checkpoint import load_model, rank_state, read_checkpoint, restore_trainer, trainer_state
from .config import TrainConfig, clamp_warmup, load_config
from .data import BatchSampler, corpus_tokens, tokenizer_from_state
from .device import (
    AUTOCAST_DTYPES,
    PRECISIONS,
    ddp_backend,
    finish_distributed,
    init_distributed,
    move_batch,
    resolve_device,
    resolve_precision,
    seed_everything,
    wrap_distributed,
)
from .model import MiniGPT, flops_per_token
from .schedule import warmup_cosine

__all__ = ["History", "Trainer", "make_optimizer", "run", "main"]
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


class Trainer:
    """Owns the model, optimiser, batch samplers and history of one run.

    train_tokens, val_tokens: 1-D int64 token tensors (they stay on the CPU; each batch moves
    to the device). ``tokenizer`` (optional) is stored in checkpoints so a checkpoint can
    generate text on its own. ``device``: a torch.device or a name for ``resolve_device``
    (default: the config's ``device``).
    """

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
        self.device = resolve_device(cfg.device if device is None else device)
        self.precision = resolve_precision(cfg.precision, self.device)
        seed_everything(cfg.seed)  # the same initial weights on every rank and every device
        # built on the CPU, then moved
        self.module = MiniGPT(cfg.model.with_vocab(vocab_size)).to(self.device)
        # self.model is what train_step calls: the module, compiled and/or wrapped by DDP
        self.model = torch.compile(self.module) if cfg.compile else self.module
        # fused AdamW (see make_optimizer) runs on CUDA, MPS and CPU; built after the move
        self.optimizer = make_optimizer(
            self.module, cfg.lr, cfg.weight_decay, (cfg.beta1, cfg.beta2)
        )
        # fp16 needs loss scaling (small gradients underflow in float16); disabled, the scaler
        # passes everything through unchanged (scale returns the loss, step calls optimizer.step)
        self.scaler = torch.amp.GradScaler(self.device.type, enabled=self.precision == "fp16")
        self.train_data, self.val_data = train_tokens, val_tokens
        self.sampler = BatchSampler(train_tokens, cfg.model.block_size, seed=cfg.seed + rank)
        self.step = 0
        self.history = History()

    def autocast(self):
        """The context the forward pass runs in: autocast to bf16/fp16, or nothing for fp32."""
        if self.precision == "fp32":
            return nullcontext()
        return torch.autocast(device_type=self.device.type, dtype=AUTOCAST_DTYPES[self.precision])

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
            losses = []
            for _ in range(self.cfg.eval_batches):
                # (B, T), (B, T)
                x, y = move_batch(*sampler.sample(self.cfg.eval_batch_size), self.device)
                with self.autocast():
                    losses.append(model(x, y)[1].item())
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
        value = self._step().item()
        self.history.step_loss.append(value)
        return value

    def _step(self) -> torch.Tensor:
        """One optimisation step, without waiting for the device: returns the batch's loss as
        a detached 0-d tensor where it was computed. Reading it (``.item()``) makes the CPU
        wait until the GPU has finished the step, so ``train`` reads the losses in groups:
        meanwhile the CPU queues the next steps' kernels. (On the CPU nothing is queued and
        the values are the same either way.) The caller records the loss in the history."""
        cfg = self.cfg
        lr = warmup_cosine(self.step, cfg.lr, cfg.warmup_steps, cfg.max_steps, cfg.min_lr)
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        x, y = move_batch(*self.sampler.sample(cfg.batch_size), self.device)  # (B, T), (B, T)
        with self.autocast():
            _, loss = self.model(x, y)
        self.optimizer.zero_grad(set_to_none=True)
        self.scaler.scale(loss).backward()
        if cfg.grad_clip > 0:
            self.scaler.unscale_(self.optimizer)  # clip the true gradients, not the scaled ones
            nn.utils.clip_grad_norm_(self.module.parameters(), cfg.grad_clip, foreach=True)
        self.scaler.step(self.optimizer)  # skips the step if fp16 gradients overflowed
        self.scaler.update()
        self.step += 1
        self.history.lr.append(lr)
        return loss.detach()

    def train(
        self,
        steps: int | None = None,
        progress: bool = True,
        evaluate: bool = True,
        read_every: int = 50,
    ) -> History:
        """Train until ``max_steps`` (or for ``steps`` more steps), evaluating every
        ``eval_interval`` steps and at the end. Returns the history.

        The step losses are read from the device every ``read_every`` steps and before each
        evaluation (see ``_step``); the training time is measured between those reads, so it
        counts the device's work, not only the queueing, and leaves out the evaluations."""
        cfg = self.cfg
        if int(read_every) < 1:
            raise ValueError(
                f"Trainer.train: read_every must be a positive number of steps; got {read_every}."
            )
        stop = cfg.max_steps if steps is None else min(cfg.max_steps, self.step + steps)
        bar = None
        if progress and self.rank == 0:
            from tqdm.auto import tqdm

            bar = tqdm(total=stop - self.step, desc=cfg.name, mininterval=2.0)
        self.model.train()
        if evaluate and self.step == 0 and not self.history.step:
            self._evaluate_and_record()
        pending: list[torch.Tensor] = []
        t0 = time.perf_counter()
        while self.step < stop:
            pending.append(self._step())
            self.history.tokens += cfg.tokens_per_step * self.world_size
            if bar is not None:
                bar.update(1)
            due = evaluate and (self.step % cfg.eval_interval == 0 or self.step == cfg.max_steps)
            if due or len(pending) == read_every or self.step == stop:
                self.history.step_loss.extend(torch.stack(pending).tolist())  # waits for the device
                self.history.train_seconds += time.perf_counter() - t0
                pending = []
                if bar is not None:
                    bar.set_postfix(loss=f"{self.history.step_loss[-1]:.3f}")
                if due:
                    losses = self._evaluate_and_record()
                    if bar is not None:
                        bar.set_postfix(train=f"{losses['train']:.3f}", val=f"{losses['val']:.3f}")
                t0 = time.perf_counter()
        if bar is not None:
            bar.close()
        return self.history

    # -- checkpoints ------------------------------------------------------------------------
    def rank_state(self) -> dict:
        """This rank's sampler and random-number states (``checkpoint.rank_state``)."""
        return rank_state(self.sampler, self.device)

    def state_dict(self) -> dict:
        """Everything ``load`` needs (``checkpoint.trainer_state``; under DDP a collective
        call: every rank must make it)."""
        return trainer_state(self)

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
    def load(
        cls,
        path: str | Path,
        train_tokens: torch.Tensor,
        val_tokens: torch.Tensor,
        rank: int = 0,
        world_size: int = 1,
        device: str | torch.device | None = None,
        map_location="cpu",
        **overrides,
    ) -> "Trainer":
        """Rebuild a Trainer from ``save``; the next ``train_step`` continues as if never stopped.

        ``rank``/``world_size``: this process's place in a DDP run; rank r restores the sampler
        and RNG states that rank r saved. ``device``: where to train on (default: the config's
        ``device``, so "auto" picks this machine's best). ``map_location`` (a device, a
        {saved: here} dict or a function, as for ``torch.load``) decides where the saved tensors
        are read to; the default, the CPU, reads a checkpoint whatever device wrote it.
        ``overrides`` replace settings of the checkpoint's config, e.g. ``max_steps=6000`` to
        train on (the cosine schedule then stretches to the new end, so the continuation is not
        the run a 6000-step config would have made)."""
        state = read_checkpoint(path, map_location)
        data = {**state["config"], **{k: v for k, v in overrides.items() if v is not None}}
        clamp_warmup(data, overrides)
        tok = tokenizer_from_state(state["tokenizer"]) if state.get("tokenizer") else None
        trainer = cls(
            TrainConfig(**data),
            train_tokens,
            val_tokens,
            state["vocab_size"],
            tokenizer=tok,
            rank=rank,
            world_size=world_size,
            device=device,
        )
        restore_trainer(trainer, state, rank, world_size)
        trainer.history = History(**state["history"])
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
    if distributed:
        trainer.model = wrap_distributed(trainer.model, device)
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
