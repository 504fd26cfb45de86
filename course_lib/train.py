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

Devices (``device`` in the config, ``--device`` on the command line): ``auto`` takes a CUDA GPU,
then Apple's MPS, then the CPU; under torchrun rank r of a machine takes ``cuda:LOCAL_RANK``.
``precision`` ``auto`` trains in bfloat16 autocast on GPUs that have it, in float16 with a
gradient scaler on GPUs that do not (Colab's T4), and in float32 on the CPU (where ``bf16`` or
``fp16`` can be asked for). The batch sampler stays on the CPU (its batches move to the device);
checkpoints hold CPU tensors, so a checkpoint from a GPU loads anywhere::

    python -m course_lib.train --config course_lib/configs/gpu.json --device auto
"""

from __future__ import annotations

import argparse
import json
import math
import os
import time
import warnings
from contextlib import nullcontext
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

import torch
from torch import nn

from .data import (
    BatchSampler,
    CharTokenizer,
    encode_splits,
    shakespeare_splits,
    split_text,
    synthetic_corpus,
    tokenizer_from_state,
)
from .model import GPTConfig, MiniGPT, flops_per_token
from .schedule import warmup_cosine

__all__ = [
    "TrainConfig",
    "History",
    "Trainer",
    "make_optimizer",
    "load_config",
    "load_model",
    "run",
    "main",
    "resolve_device",
    "resolve_precision",
    "ddp_backend",
]

PRECISIONS = ("auto", "fp32", "bf16", "fp16")
AUTOCAST_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}


def _check_device_name(name: str) -> None:
    kind, _, index = str(name).partition(":")
    if kind not in ("auto", "cpu", "cuda", "mps") or (
        index and (kind != "cuda" or not index.isdigit())
    ):
        raise ValueError(f"device must be 'auto', 'cpu', 'cuda', 'cuda:N' or 'mps'; got {name!r}.")


def resolve_device(name: str | torch.device = "auto", local_rank: int = 0) -> torch.device:
    """The torch.device a run trains on.

    ``auto``: a CUDA GPU if there is one, else Apple's MPS, else the CPU. ``cuda`` (and
    ``auto`` on a GPU machine) means ``cuda:local_rank``: under torchrun each process of a
    machine takes its own GPU (``LOCAL_RANK``). A device that is not there is an error,
    not a silent fall-back to a slower one."""
    if isinstance(name, torch.device):
        name = str(name)
    _check_device_name(name)
    if name == "auto":
        if torch.cuda.is_available():
            name = "cuda"
        elif torch.backends.mps.is_available():
            name = "mps"
        else:
            name = "cpu"
    if name.startswith("cuda"):
        if not torch.cuda.is_available():
            raise ValueError(
                f"device {name!r} was asked for, but PyTorch sees no CUDA GPU "
                "(torch.cuda.is_available() is False); use device 'auto' or 'cpu'."
            )
        index = int(name.partition(":")[2] or local_rank)
        if index >= torch.cuda.device_count():
            raise ValueError(
                f"device cuda:{index} does not exist: this machine has {torch.cuda.device_count()} "
                "GPU(s); start torchrun with --nproc_per_node at most the number of GPUs."
            )
        return torch.device("cuda", index)
    if name == "mps" and not torch.backends.mps.is_available():
        raise ValueError(
            "device 'mps' was asked for, but torch.backends.mps.is_available() is False; "
            "use device 'auto' or 'cpu'."
        )
    return torch.device(name)


def resolve_precision(name: str, device: torch.device) -> str:
    """``fp32``, ``bf16`` or ``fp16``: the arithmetic of the forward pass on ``device``.

    ``auto``: bf16 autocast on CUDA GPUs that support bfloat16 (Ampere and later), fp16 with
    a gradient scaler on those that do not (T4, V100), fp32 elsewhere (CPU, MPS). bf16 and
    fp16 can be asked for on the CPU too. Whether bf16 pays there depends on the CPU and the
    shape: on the course's 2-core AVX512-BF16 machine it measured x0.9 of fp32's tokens/s at
    the chapter shape and x1.2-1.4 at the long one (the products are larger there), with a
    different loss curve; fp32 stays the CPU default so the chapters' numbers do not move."""
    if name not in PRECISIONS:
        raise ValueError(f"precision must be one of {PRECISIONS}; got {name!r}.")
    cuda = device.type == "cuda"
    if name == "auto":
        if not cuda:
            return "fp32"
        return "bf16" if torch.cuda.is_bf16_supported() else "fp16"
    if name == "bf16" and cuda and not torch.cuda.is_bf16_supported():
        raise ValueError(
            "precision 'bf16': this GPU has no bfloat16 support; use 'fp16' or 'auto'."
        )
    return name


def ddp_backend(device: torch.device) -> str:
    """The torch.distributed backend for a rank on ``device``: NCCL between GPUs, gloo otherwise."""
    return "nccl" if device.type == "cuda" else "gloo"


def _to_cpu(obj):
    """A copy of a (nested) state dict with every tensor on the CPU: a checkpoint that loads on
    any machine, whatever device trained it."""
    if isinstance(obj, torch.Tensor):
        return obj.detach().cpu()
    if isinstance(obj, dict):
        return {k: _to_cpu(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(_to_cpu(v) for v in obj)
    return obj


def _device_rng_state(device: torch.device) -> torch.Tensor | None:
    """The random-number state of an accelerator (dropout masks there come from it), or None."""
    if device.type == "cuda":
        return torch.cuda.get_rng_state(device)
    if device.type == "mps":
        return torch.mps.get_rng_state()
    return None


def _set_device_rng_state(device: torch.device, state: torch.Tensor | None) -> None:
    if state is None:
        return
    if device.type == "cuda":
        torch.cuda.set_rng_state(state, device)
    elif device.type == "mps":
        torch.mps.set_rng_state(state)


def move_batch(
    x: torch.Tensor, y: torch.Tensor, device: torch.device
) -> tuple[torch.Tensor, torch.Tensor]:
    """x, y (B, T) from the CPU sampler onto ``device``. To a CUDA GPU through pinned
    (page-locked) memory with ``non_blocking``: the copy overlaps the GPU's work. On the CPU
    nothing moves."""
    if device.type == "cpu":
        return x, y
    pin = device.type == "cuda"
    if pin:
        x, y = x.pin_memory(), y.pin_memory()
    return x.to(device, non_blocking=pin), y.to(device, non_blocking=pin)  # (B, T), (B, T)


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
    # or "bpe-N": byte-level BPE with N tokens learned on the training split (Ch. 9)
    tokenizer: str = "char"
    val_fraction: float = 0.1
    threads: int | None = None
    name: str = "run"
    # hardware: see resolve_device and resolve_precision
    device: str = "auto"  # "auto", "cpu", "cuda", "cuda:N", "mps"
    precision: str = "auto"  # "auto", "fp32", "bf16", "fp16"
    # torch.compile the model (minutes of compiling; pays off on long GPU runs)
    compile: bool = False

    def __post_init__(self):
        if isinstance(self.model, dict):
            self.model = _model_from_dict(self.model)
        if self.max_steps < 1 or self.batch_size < 1 or self.eval_interval < 1:
            raise ValueError(
                "TrainConfig: max_steps, batch_size and eval_interval must be positive."
            )
        if not 0 <= self.warmup_steps <= self.max_steps:
            raise ValueError(
                f"TrainConfig: warmup_steps must lie in [0, max_steps={self.max_steps}]; got "
                f"{self.warmup_steps}."
            )
        if self.corpus not in ("shakespeare", "synthetic"):
            raise ValueError(
                f"TrainConfig: corpus must be 'shakespeare' or 'synthetic'; got {self.corpus!r}."
            )
        if self.tokenizer != "char" and bpe_vocab_size(self.tokenizer) is None:
            raise ValueError(
                "TrainConfig: tokenizer must be 'char' or 'bpe-N' with N >= 257 (e.g. "
                "'bpe-1024'); "
                f"got {self.tokenizer!r}."
            )
        try:
            _check_device_name(self.device)
        except ValueError as e:
            raise ValueError(f"TrainConfig: {e}") from None
        if self.precision not in PRECISIONS:
            raise ValueError(
                f"TrainConfig: precision must be one of {PRECISIONS}; got {self.precision!r}."
            )

    @property
    def tokens_per_step(self) -> int:
        return self.batch_size * self.model.block_size


def bpe_vocab_size(name: str) -> int | None:
    """1024 for the tokenizer setting 'bpe-1024'; None if ``name`` is not of that form."""
    head, _, size = name.partition("-")
    if head != "bpe" or not size.isdigit() or int(size) < 257:  # 256 bytes + the end-of-text token
        return None
    return int(size)


def _model_from_dict(data: dict) -> GPTConfig:
    known = {f.name for f in fields(GPTConfig)}
    unknown = sorted(set(data) - known)
    if unknown:
        raise ValueError(
            f"TrainConfig: the model section has unknown keys {unknown}; valid keys are "
            f"{sorted(known)}."
        )
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
        raise ValueError(
            f"load_config: {path} has unknown keys {unknown}; valid keys are {sorted(known)} "
            "(the model's shape goes in the \"model\" section)."
        )
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


def _seed_everything(seed: int) -> None:
    import random

    import numpy as np

    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


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
        _seed_everything(cfg.seed)  # the same initial weights on every rank and every device
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
        """What differs between the ranks of a DDP run: the batch sampler's generator and the
        global random-number state (dropout). One entry of the checkpoint's ``ranks`` list."""
        return {
            "sampler": self.sampler.state_dict(),
            "torch_rng": torch.get_rng_state(),
            "device_rng": _device_rng_state(self.device),
        }

    def state_dict(self) -> dict:
        """Everything ``load`` needs. Under DistributedDataParallel this is a collective call
        (every rank must make it): it gathers every rank's ``rank_state`` into ``ranks``."""
        mine = self.rank_state()
        ranks = [mine]
        if self.world_size > 1 and _dist_ready():
            ranks = [None] * self.world_size
            torch.distributed.all_gather_object(ranks, mine)  # ranks[r] is rank r's state
        return _to_cpu(
            {  # CPU tensors: the checkpoint loads on a machine without this device
                "config": asdict(self.cfg),
                "vocab_size": self.module.cfg.vocab_size,
                "model": self.module.state_dict(),
                "optimizer": self.optimizer.state_dict(),
                "scaler": self.scaler.state_dict(),
                "step": self.step,
                "history": asdict(self.history),
                "world_size": self.world_size,
                "ranks": ranks,
                "tokenizer": self.tokenizer.state_dict() if self.tokenizer is not None else None,
            }
        )

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
        state = torch.load(path, map_location=map_location, weights_only=False)
        data = {**state["config"], **{k: v for k, v in overrides.items() if v is not None}}
        _clamp_warmup(data, overrides)
        cfg = TrainConfig(**data)
        tok = tokenizer_from_state(state["tokenizer"]) if state.get("tokenizer") else None
        trainer = cls(
            cfg,
            train_tokens,
            val_tokens,
            state["vocab_size"],
            tokenizer=tok,
            rank=rank,
            world_size=world_size,
            device=device,
        )
        trainer.module.load_state_dict(state["model"])  # copies onto the trainer's device
        # moves the moments to the parameters' device
        trainer.optimizer.load_state_dict(state["optimizer"])
        if state.get("scaler") and trainer.scaler.is_enabled():
            trainer.scaler.load_state_dict(state["scaler"])
        trainer.step = state["step"]
        trainer.history = History(**state["history"])
        # checkpoints written before per-rank states held rank 0's state only
        ranks = state.get("ranks") or [
            {"sampler": state["sampler"], "torch_rng": state["torch_rng"]}
        ]
        saved_world = state.get("world_size", len(ranks))
        if saved_world != world_size and rank == 0:
            warnings.warn(
                f"Trainer.load: the checkpoint was written by {saved_world} process(es) and is "
                "resumed "
                f"by {world_size}; the batches will differ from those of an uninterrupted run.",
                stacklevel=2,
            )
        if rank < len(ranks):
            trainer.sampler.load_state_dict(ranks[rank]["sampler"])
            torch.set_rng_state(ranks[rank]["torch_rng"])
            if ranks[rank].get("device_rng") is not None and trainer.device.type != "cpu":
                _set_device_rng_state(trainer.device, ranks[rank]["device_rng"])
        # a rank the checkpoint has no state for keeps its fresh stream (seed + rank)
        return trainer


def load_model(
    path: str | Path, device: str | torch.device = "cpu", map_location="cpu"
) -> tuple[MiniGPT, object | None]:
    """Just the trained model (eval mode, on ``device``) and its tokenizer from a checkpoint.
    ``map_location`` as in ``Trainer.load``: the CPU by default, so a checkpoint written on a
    GPU loads on a machine without one."""
    state = torch.load(path, map_location=map_location, weights_only=False)
    cfg = TrainConfig(**state["config"])
    model = MiniGPT(cfg.model.with_vocab(state["vocab_size"]))
    model.load_state_dict(state["model"])
    model = model.to(resolve_device(device))
    tok = tokenizer_from_state(state["tokenizer"]) if state.get("tokenizer") else None
    return model.eval(), tok


def corpus_tokens(cfg: TrainConfig):
    """The tokenizer and the train/validation tokens (1-D int64) the config asks for. A BPE
    tokenizer (``tokenizer="bpe-N"``) learns its merges from the training split only."""
    if cfg.corpus == "synthetic":
        text = synthetic_corpus(20_000, seed=0)
        if cfg.tokenizer == "char":
            tok = CharTokenizer.from_text(text)
            train, val = split_text(text, cfg.val_fraction)
            return tok, tok.encode(train), tok.encode(val)
    else:
        if cfg.tokenizer == "char":
            s = shakespeare_splits(cfg.val_fraction)
            return s.tokenizer, s.train, s.val
        from .corpus import load_corpus

        text = load_corpus()
    from .bpe import BPETokenizer

    tok = BPETokenizer.train(split_text(text, cfg.val_fraction)[0], bpe_vocab_size(cfg.tokenizer))
    s = encode_splits(text, tok, cfg.val_fraction)
    return s.tokenizer, s.train, s.val


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
        cfg = TrainConfig(**torch.load(resume, map_location="cpu", weights_only=False)["config"])
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    overrides = {k: v for k, v in (overrides or {}).items() if v is not None}
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))  # this process's index on its machine
    device = resolve_device(overrides.get("device", cfg.device), local_rank)
    distributed = world_size > 1
    if distributed:
        import torch.distributed as dist

        if device.type == "cuda":
            torch.cuda.set_device(device)  # NCCL's collectives (and all_gather_object) use it
        dist.init_process_group(backend=ddp_backend(device))
    tok, train, val = corpus_tokens(cfg)
    if resume:
        # the device is resolved above
        settings = {k: v for k, v in overrides.items() if k != "device"}
        trainer = Trainer.load(
            resume, train, val, rank=rank, world_size=world_size, device=device, **settings
        )
        cfg = trainer.cfg  # the checkpoint's config with the overrides
    else:
        trainer = Trainer(
            cfg,
            train,
            val,
            tok.vocab_size,
            tokenizer=tok,
            rank=rank,
            world_size=world_size,
            device=device,
        )
    if distributed:
        from torch.nn.parallel import DistributedDataParallel

        # each rank's replica lives on its own GPU (device_ids); on the CPU there are none
        trainer.model = DistributedDataParallel(
            trainer.model, device_ids=[device.index] if device.type == "cuda" else None
        )
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
            f"(perplexity {math.exp(final['val']):.3f}), {history.tokens_per_second:,.0f} "
            "tokens/s, "
            f"{history.train_seconds:.1f} s training"
        )
    if distributed:
        import torch.distributed as dist

        dist.barrier()
        dist.destroy_process_group()
    return results


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description="Train MiniGPT on the course corpus.")
    p.add_argument(
        "--config", default=None, help="JSON file of TrainConfig fields (not needed with --resume)"
    )
    p.add_argument("--out", default=None, help="folder for ckpt.pt and results.json")
    p.add_argument(
        "--max-steps",
        type=int,
        default=None,
        help="override max_steps (also on --resume: the schedule then ends at the new value)",
    )
    p.add_argument(
        "--steps",
        type=int,
        default=None,
        help="train at most this many steps now, then save (continue later with --resume)",
    )
    p.add_argument(
        "--resume",
        default=None,
        help="checkpoint to continue from (its own config; --max-steps replaces its max_steps)",
    )
    p.add_argument(
        "--device", default=None, help="auto (CUDA, then MPS, then CPU), cpu, cuda, cuda:N or mps"
    )
    p.add_argument(
        "--precision",
        default=None,
        choices=PRECISIONS,
        help="auto (bf16 or fp16 on CUDA GPUs, fp32 elsewhere), fp32, bf16, fp16",
    )
    p.add_argument(
        "--compile",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="torch.compile the model",
    )
    p.add_argument("--no-progress", action="store_true")
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
