"""The settings of a training run: ``TrainConfig`` (the model's shape and the optimisation,
evaluation and hardware settings) and ``load_config``, which reads one from a JSON file of its
fields (``course_lib/configs/*.json``)::

    {"model": {"n_layer": 4, "n_head": 4, "d_model": 96, ...}, "batch_size": 12, ...}

Unknown keys and impossible values are errors here, before any training starts.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, fields
from pathlib import Path

from .data import bpe_vocab_size
from .device import PRECISIONS, check_device_name
from .model import GPTConfig

__all__ = ["TrainConfig", "load_config", "config_from_dict", "clamp_warmup"]


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
    # hardware: see course_lib.device (resolve_device, resolve_precision)
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
                f"'bpe-1024'); got {self.tokenizer!r}."
            )
        try:
            check_device_name(self.device)
        except ValueError as e:
            raise ValueError(f"TrainConfig: {e}") from None
        if self.precision not in PRECISIONS:
            raise ValueError(
                f"TrainConfig: precision must be one of {PRECISIONS}; got {self.precision!r}."
            )

    @property
    def tokens_per_step(self) -> int:
        return self.batch_size * self.model.block_size

    @property
    def betas(self) -> tuple[float, float]:
        """AdamW's (beta1, beta2)."""
        return (self.beta1, self.beta2)


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
    return config_from_dict(json.loads(Path(path).read_text()), overrides, source=str(path))


def config_from_dict(data: dict, overrides: dict | None = None, source: str = "") -> TrainConfig:
    """A TrainConfig from a dict of its fields (``asdict``'s, a JSON file's) with ``overrides``
    as in ``load_config`` (None values are ignored); unknown keys are an error naming
    ``source``."""
    data = dict(data)
    overrides = {k: v for k, v in (overrides or {}).items() if v is not None}
    if "model" in overrides:
        overrides["model"] = {**data.get("model", {}), **overrides["model"]}
    data.update(overrides)
    clamp_warmup(data, overrides)
    known = {f.name for f in fields(TrainConfig)}
    unknown = sorted(set(data) - known)
    if unknown:
        raise ValueError(
            f"load_config: {source or 'the settings'} has unknown keys {unknown}; valid keys are "
            f"{sorted(known)} (the model's shape goes in the \"model\" section)."
        )
    return TrainConfig(**data)


def clamp_warmup(data: dict, overrides: dict) -> None:
    """A run shortened by a ``max_steps`` override keeps a valid schedule (warmup <= max_steps)."""
    if "max_steps" in overrides and data.get("warmup_steps", 0) > data["max_steps"]:
        data["warmup_steps"] = data["max_steps"]
