"""Checkpoint files: the trainer's (a run that resumes exactly) and the course's pretrained model.

This module reads and writes files; what a trainer's state holds is the trainer's own
(``Trainer.state_dict`` / ``load_state_dict`` in ``course_lib.train``), and nothing here calls
back into it.

- ``write_checkpoint`` / ``read_checkpoint``: a state dict to a file and back. Tensors are
  written on the CPU, so a checkpoint from a GPU loads anywhere. ``rank_entry``: one rank's
  part of a trainer checkpoint (checkpoints of every format so far).
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
from .device import resolve_device
from .model import GPTConfig, MiniGPT

__all__ = [
    "read_checkpoint",
    "write_checkpoint",
    "rank_entry",
    "to_cpu",
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


def write_checkpoint(state: dict, path: str | Path) -> None:
    """Write a (nested) state dict to ``path`` with every tensor on the CPU (``to_cpu``),
    creating the folder."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    torch.save(to_cpu(state), path)


def rank_entry(state: dict, rank: int, world_size: int) -> dict | None:
    """Rank ``rank``'s sampler and RNG states in a trainer checkpoint's dict (``ranks[rank]``),
    or None where the checkpoint has none for it. A checkpoint written by another number of
    processes than ``world_size`` resumes with a warning (rank 0's): its batches cannot be the
    uninterrupted run's. Checkpoints from before per-rank states held rank 0's only."""
    ranks = state.get("ranks") or [{"sampler": state["sampler"], "torch_rng": state["torch_rng"]}]
    saved_world = state.get("world_size", len(ranks))
    if saved_world != world_size and rank == 0:
        warnings.warn(
            f"Trainer.load: the checkpoint was written by {saved_world} process(es) and is "
            f"resumed by {world_size}; the batches will differ from those of an uninterrupted "
            "run.",
            stacklevel=3,
        )
    return ranks[rank] if rank < len(ranks) else None


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
