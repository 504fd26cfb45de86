"""Checkpoints: the trainer's (a run that resumes exactly) and the course's pretrained model.

- ``trainer_state`` / ``restore_trainer``: what ``Trainer.save`` writes and ``Trainer.load``
  restores: model, optimiser, gradient scaler, step, and every rank's batch sampler and
  random-number states (a resumed run draws the batches the uninterrupted run would have
  drawn). Tensors are saved on the CPU, so a checkpoint from a GPU loads anywhere.
- ``load_model``: just the trained model and its tokenizer from a trainer checkpoint.
- ``load_pretrained``: the course's pretrained MiniGPT (Part IV starts from it), checked
  against its sha256; ``export_pretrained`` writes one from a trainer checkpoint.
"""

from __future__ import annotations

import hashlib
import warnings
from pathlib import Path

import torch

from .data import CharTokenizer, tokenizer_from_state
from .device import device_rng_state, dist_ready, resolve_device, set_device_rng_state
from .model import GPTConfig, MiniGPT

__all__ = [
    "read_checkpoint",
    "to_cpu",
    "rank_state",
    "trainer_state",
    "restore_trainer",
    "load_model",
    "PRETRAINED",
    "load_pretrained",
    "load_pretrained_info",
    "export_pretrained",
]


def read_checkpoint(path: str | Path, map_location="cpu") -> dict:
    """A checkpoint's dict, its tensors read to ``map_location`` (a device, a {saved: here}
    dict or a function, as for ``torch.load``); the CPU reads one whatever device wrote it."""
    return torch.load(path, map_location=map_location, weights_only=False)


def to_cpu(obj):
    """A copy of a (nested) state dict with every tensor on the CPU: a checkpoint that loads on
    any machine, whatever device trained it."""
    if isinstance(obj, torch.Tensor):
        return obj.detach().cpu()
    if isinstance(obj, dict):
        return {k: to_cpu(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(to_cpu(v) for v in obj)
    return obj


# --------------------------------------------------------------------------- the trainer's
def rank_state(sampler, device: torch.device) -> dict:
    """What differs between the ranks of a DDP run: the batch sampler's generator and the
    global random-number state (dropout). One entry of the checkpoint's ``ranks`` list."""
    return {
        "sampler": sampler.state_dict(),
        "torch_rng": torch.get_rng_state(),
        "device_rng": device_rng_state(device),
    }


def trainer_state(trainer) -> dict:
    """Everything ``Trainer.load`` needs, as CPU tensors. Under DistributedDataParallel this is
    a collective call (every rank must make it): it gathers every rank's state into ``ranks``."""
    from dataclasses import asdict

    mine = trainer.rank_state()
    ranks = [mine]
    if trainer.world_size > 1 and dist_ready():
        ranks = [None] * trainer.world_size
        torch.distributed.all_gather_object(ranks, mine)  # ranks[r] is rank r's state
    tok = trainer.tokenizer
    return to_cpu(
        {
            "config": asdict(trainer.cfg),
            "vocab_size": trainer.module.cfg.vocab_size,
            "model": trainer.module.state_dict(),
            "optimizer": trainer.optimizer.state_dict(),
            "scaler": trainer.scaler.state_dict(),
            "step": trainer.step,
            "history": asdict(trainer.history),
            "world_size": trainer.world_size,
            "ranks": ranks,
            "tokenizer": tok.state_dict() if tok is not None else None,
        }
    )


def restore_trainer(trainer, state: dict, rank: int = 0, world_size: int = 1) -> None:
    """Put a checkpoint's model, optimiser, scaler, step and rank ``rank``'s sampler and RNG
    states into a freshly built ``trainer`` (its history is the caller's)."""
    trainer.module.load_state_dict(state["model"])  # copies onto the trainer's device
    trainer.optimizer.load_state_dict(state["optimizer"])  # moves the moments there too
    if state.get("scaler") and trainer.scaler.is_enabled():
        trainer.scaler.load_state_dict(state["scaler"])
    trainer.step = state["step"]
    # checkpoints written before per-rank states held rank 0's state only
    ranks = state.get("ranks") or [{"sampler": state["sampler"], "torch_rng": state["torch_rng"]}]
    saved_world = state.get("world_size", len(ranks))
    if saved_world != world_size and rank == 0:
        warnings.warn(
            f"Trainer.load: the checkpoint was written by {saved_world} process(es) and is "
            f"resumed by {world_size}; the batches will differ from those of an uninterrupted "
            "run.",
            stacklevel=3,
        )
    if rank < len(ranks):
        trainer.sampler.load_state_dict(ranks[rank]["sampler"])
        torch.set_rng_state(ranks[rank]["torch_rng"])
        if ranks[rank].get("device_rng") is not None and trainer.device.type != "cpu":
            set_device_rng_state(trainer.device, ranks[rank]["device_rng"])
    # a rank the checkpoint has no state for keeps its fresh stream (seed + rank)


def load_model(
    path: str | Path, device: str | torch.device = "cpu", map_location="cpu"
) -> tuple[MiniGPT, object | None]:
    """Just the trained model (eval mode, on ``device``) and its tokenizer from a checkpoint.
    ``map_location`` as in ``read_checkpoint``: the CPU by default, so a checkpoint written on a
    GPU loads on a machine without one."""
    state = read_checkpoint(path, map_location)
    model = MiniGPT(GPTConfig(**state["config"]["model"]).with_vocab(state["vocab_size"]))
    model.load_state_dict(state["model"])
    model = model.to(resolve_device(device))
    tok = tokenizer_from_state(state["tokenizer"]) if state.get("tokenizer") else None
    return model.eval(), tok


# --------------------------------------------------------------------------- the pretrained model
# The course's pretrained MiniGPT (Part IV starts from it): see course_lib/checkpoints/README.md.
PRETRAINED = {
    "chapter": Path(__file__).parent / "checkpoints" / "chapter.pt",
}


def _sha256(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def load_pretrained(name: str = "chapter", verify: bool = True):
    """The course's pretrained model (eval mode) and its tokenizer.

    ``model, tok = load_pretrained()``.

    ``chapter``: the Chapter 8 shape (course_lib/configs/chapter.json) trained on the
    Shakespeare corpus by ``python -m course_lib.train``. With ``verify`` the file's sha256 is
    checked against ``course_lib/checkpoints/<name>.sha256`` (a corrupted or Git-LFS-pointer
    file raises ValueError instead of loading garbage). The checkpoint also holds
    ``val_loss``, the validation loss recorded when it was made (``load_pretrained_info``).
    """
    state = load_pretrained_info(name, verify)
    cfg = GPTConfig(**state["config"]["model"]).with_vocab(state["vocab_size"])
    model = MiniGPT(cfg)
    model.load_state_dict(state["model"])
    return model.eval(), CharTokenizer.from_state_dict(state["tokenizer"])


def load_pretrained_info(name: str = "chapter", verify: bool = True) -> dict:
    """The raw checkpoint dict of a pretrained model (config, vocab_size, model, tokenizer,
    val_loss, command); see ``load_pretrained``."""
    if name not in PRETRAINED:
        raise ValueError(
            f"load_pretrained: unknown model {name!r}; available: {sorted(PRETRAINED)}."
        )
    path = PRETRAINED[name]
    if not path.exists():
        raise ValueError(
            f"load_pretrained: {path} is missing; reinstall course_lib from the repository."
        )
    if verify:
        want = path.with_suffix(".sha256").read_text().split()[0]
        got = _sha256(path)
        if got != want:
            raise ValueError(
                f"load_pretrained: {path} has sha256 {got}, expected {want}: the file is damaged "
                "(or a Git LFS pointer); fetch it again from the repository."
            )
    return read_checkpoint(path)


def export_pretrained(trainer_checkpoint: str | Path, out: str | Path) -> str:
    """Write the inference part of a ``course_lib.train`` checkpoint (config, vocab_size, model
    weights, tokenizer, the final validation loss and step; no optimiser or RNG state) to
    ``out`` and its sha256 to ``out`` with suffix ``.sha256``. Returns the sha256."""
    state = read_checkpoint(trainer_checkpoint)
    history = state.get("history") or {}
    if not history.get("val"):
        raise ValueError(
            f"export_pretrained: {trainer_checkpoint} has no validation history; train with "
            "evaluation on."
        )
    keep = {
        "config": state["config"],
        "vocab_size": state["vocab_size"],
        "model": state["model"],
        "tokenizer": state["tokenizer"],
        "val_loss": float(history["val"][-1]),
        "step": int(state["step"]),
    }
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    torch.save(keep, out)
    digest = _sha256(out)
    out.with_suffix(".sha256").write_text(f"{digest}  {out.name}\n")
    return digest
