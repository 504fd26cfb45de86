"""Where and in what arithmetic a run trains: the device, the precision, the random-number
state, and the backend of DistributedDataParallel.

``resolve_device("auto")`` takes a CUDA GPU, then Apple's MPS, then the CPU; under torchrun
rank r of a machine takes ``cuda:LOCAL_RANK``. ``resolve_precision("auto", device)`` trains in
bfloat16 autocast on GPUs that have it, in float16 with a gradient scaler on GPUs that do not
(Colab's T4), and in float32 on the CPU (where ``bf16`` or ``fp16`` can be asked for).
``move_batch`` takes a batch from the CPU sampler to the device. ``seed_everything`` and the
device's random-number state make runs and resumed runs repeat; ``ddp_backend`` and
``init_distributed`` / ``finish_distributed`` set up the process group under torchrun,
``all_ranks`` gathers a value from each rank.
"""

from __future__ import annotations

from contextlib import nullcontext

import torch

__all__ = [
    "PRECISIONS",
    "AUTOCAST_DTYPES",
    "check_device_name",
    "resolve_device",
    "resolve_precision",
    "ddp_backend",
    "move_batch",
    "seed_everything",
    "autocast",
    "device_rng_state",
    "set_device_rng_state",
    "rng_state",
    "set_rng_state",
    "dist_ready",
    "all_ranks",
    "init_distributed",
    "wrap_distributed",
    "finish_distributed",
]

PRECISIONS = ("auto", "fp32", "bf16", "fp16")
AUTOCAST_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}


def check_device_name(name: str) -> None:
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
    check_device_name(name)
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


def autocast(precision: str, device: torch.device):
    """The context a forward pass runs in: autocast to bf16/fp16 on ``device``, or none (fp32)."""
    if precision == "fp32":
        return nullcontext()
    return torch.autocast(device_type=device.type, dtype=AUTOCAST_DTYPES[precision])


def ddp_backend(device: torch.device) -> str:
    """The torch.distributed backend for a rank on ``device``: NCCL between GPUs, gloo otherwise."""
    return "nccl" if device.type == "cuda" else "gloo"


def device_rng_state(device: torch.device) -> torch.Tensor | None:
    """The random-number state of an accelerator (dropout masks there come from it), or None."""
    if device.type == "cuda":
        return torch.cuda.get_rng_state(device)
    if device.type == "mps":
        return torch.mps.get_rng_state()
    return None


def set_device_rng_state(device: torch.device, state: torch.Tensor | None) -> None:
    """Restore what ``device_rng_state`` returned (nothing to do for None or the CPU)."""
    if state is None:
        return
    if device.type == "cuda":
        torch.cuda.set_rng_state(state, device)
    elif device.type == "mps":
        torch.mps.set_rng_state(state)


def rng_state(device: torch.device) -> dict:
    """The global random-number states a run draws from (dropout masks): torch's CPU
    generator's and ``device``'s (None on the CPU)."""
    return {"torch_rng": torch.get_rng_state(), "device_rng": device_rng_state(device)}


def set_rng_state(state: dict, device: torch.device) -> None:
    """Restore what ``rng_state`` returned (a state without ``device_rng`` restores the CPU's)."""
    torch.set_rng_state(state["torch_rng"])
    if device.type != "cpu":
        set_device_rng_state(device, state.get("device_rng"))


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


def dist_ready() -> bool:
    """Whether this process is one rank of an initialised torch.distributed group."""
    return torch.distributed.is_available() and torch.distributed.is_initialized()


def all_ranks(obj) -> list:
    """Every rank's ``obj`` in rank order (``all_gather_object``: a collective call, every rank
    makes it) in a torchrun process group; ``[obj]`` in a single process."""
    if not dist_ready():
        return [obj]
    gathered = [None] * torch.distributed.get_world_size()
    torch.distributed.all_gather_object(gathered, obj)
    return gathered


def seed_everything(seed: int) -> None:
    """Seed Python's, NumPy's and torch's generators (the same initial weights everywhere)."""
    import random

    import numpy as np

    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def init_distributed(device: torch.device) -> None:
    """Join the torchrun process group on ``device`` (NCCL between GPUs, gloo on CPUs)."""
    import torch.distributed as dist

    if device.type == "cuda":
        torch.cuda.set_device(device)  # NCCL's collectives (and all_gather_object) use it
    dist.init_process_group(backend=ddp_backend(device))


def wrap_distributed(model: torch.nn.Module, device: torch.device) -> torch.nn.Module:
    """``model`` in DistributedDataParallel where this process is a rank of a process group
    (``init_distributed``), else ``model`` itself: each rank's replica lives on its own GPU
    (``device_ids``); on the CPU there are none."""
    from torch.nn.parallel import DistributedDataParallel

    if not dist_ready():
        return model

    return DistributedDataParallel(
        model, device_ids=[device.index] if device.type == "cuda" else None
    )


def finish_distributed() -> None:
    """Wait for every rank, then leave the process group."""
    import torch.distributed as dist

    dist.barrier()
    dist.destroy_process_group()
