"""What training and serving a language model costs, from the FLOP formulas (where_next).

Every constant lives here, once, with its source; the chapter computes its tables from them.

- Training: ``training_flops`` = (6 N + 12 L d T) per token times D tokens, the count of
  ``course_lib.model.flops_per_token`` (Kaplan et al. 2020; PaLM, Chowdhery et al. 2023):
  2 FLOPs per weight per token forward, 4 backward, plus the attention scores and weighted sums.
- Inference: ``inference_flops_per_token`` = 2 N + 4 L d T, the forward third of the same count,
  for one new token that attends to T earlier ones.
- Time and money: FLOPs / (peak FLOP/s x MFU) = GPU-seconds, times a price per GPU-hour.
- ``measured_training_flops``: PyTorch's own FLOP counter on a MiniGPT step, the check that the
  formula counts what the model computes.

Prices are assumptions, stated as such; the peak rates are the vendors' dense BF16 numbers.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .model import GPTConfig, MiniGPT, flops_per_token

__all__ = [
    "LanguageModel",
    "GPU",
    "GPT3",
    "LLAMA2_70B",
    "A100",
    "H100",
    "MFU",
    "PALM_MFU",
    "CLUSTER_GPUS",
    "counted_flops",
    "training_flops",
    "inference_flops_per_token",
    "gpu_hours",
    "training_cost_rows",
    "inference_cost_rows",
    "implied_mfu",
    "measured_training_flops",
]


@dataclass(frozen=True)
class LanguageModel:
    """A published model: parameters N, training tokens D, and the shape the attention term
    needs (n_layer L, d_model d, context n_ctx T); ``reported`` holds what its paper reports."""

    name: str
    n_params: float
    n_tokens: float
    n_layer: int
    d_model: int
    n_ctx: int
    source: str
    reported: dict


@dataclass(frozen=True)
class GPU:
    """An accelerator: dense BF16 peak FLOP/s, memory bandwidth (bytes/s), and an assumed
    price per GPU-hour in US dollars."""

    name: str
    peak_flops: float
    bandwidth: float
    price_per_hour: float
    source: str


#: GPT-3 175B: 96 layers, d_model 12288, context 2048, trained on 300 B tokens; its paper's
#: Table D.1 gives the training compute, 3.14e23 FLOPs (Brown et al. 2020, brown2020language).
GPT3 = LanguageModel(
    name="GPT-3 175B",
    n_params=175e9,
    n_tokens=300e9,
    n_layer=96,
    d_model=12288,
    n_ctx=2048,
    source="brown2020language",
    reported={"train_flops": 3.14e23},
)

#: Llama 2 70B: 80 layers, d_model 8192, context 4096, 2 T tokens; its paper's Table 2 gives
#: 1,720,320 A100-80GB GPU-hours of pretraining (Touvron et al. 2023, touvron2023llama2).
LLAMA2_70B = LanguageModel(
    name="Llama 2 70B",
    n_params=70e9,
    n_tokens=2e12,
    n_layer=80,
    d_model=8192,
    n_ctx=4096,
    source="touvron2023llama2",
    reported={"gpu_hours_a100": 1_720_320},
)

#: NVIDIA A100 SXM 80 GB: 312 TFLOP/s dense BF16, 2.039 TB/s HBM2e (NVIDIA A100 datasheet,
#: nvidia2020a100). The price is an assumption (a round on-demand cloud figure), not a quote.
A100 = GPU("A100", 312e12, 2.039e12, 2.0, "nvidia2020a100")

#: NVIDIA H100 SXM: 989 TFLOP/s dense BF16 (1,979 with 2:4 sparsity), 3.35 TB/s HBM3 (NVIDIA
#: H100 datasheet, nvidia2022h100). The price is an assumption, as for the A100.
H100 = GPU("H100", 989e12, 3.35e12, 3.0, "nvidia2022h100")

#: Model FLOP utilisation assumed for training: the fraction of the peak a large run sustains.
#: PaLM reported 46.2 % on TPU v4 (Chowdhery et al. 2023, chowdhery2023palm); 40 % is a round,
#: slightly conservative figure.
MFU = 0.40
#: PaLM 540B's model FLOP utilisation (Chowdhery et al. 2023, Table 3), for comparison.
PALM_MFU = 0.462
#: The cluster size the training table quotes days for.
CLUSTER_GPUS = 1024


def _check_positive(**values: float) -> None:
    for name, v in values.items():
        if not v > 0:
            raise ValueError(f"cost: {name} must be positive; got {v}.")


def training_flops(model: LanguageModel) -> float:
    """(6 N + 12 L d T) D: training FLOPs, forward and backward, attention included."""
    _check_positive(n_params=model.n_params, n_tokens=model.n_tokens)
    per_token = 6 * model.n_params + 12 * model.n_layer * model.d_model * model.n_ctx
    return per_token * model.n_tokens


def inference_flops_per_token(model: LanguageModel, context: int | None = None) -> float:
    """2 N + 4 L d T: forward FLOPs of one new token attending to ``context`` tokens
    (default: the model's full context)."""
    T = model.n_ctx if context is None else context
    _check_positive(n_params=model.n_params, context=T)
    return 2 * model.n_params + 4 * model.n_layer * model.d_model * T


def gpu_hours(flops: float, gpu: GPU, mfu: float = MFU) -> float:
    """GPU-hours to compute ``flops`` at ``mfu`` of the GPU's peak."""
    _check_positive(flops=flops, mfu=mfu)
    if mfu > 1:
        raise ValueError(f"cost: mfu is a fraction of the peak, at most 1; got {mfu}.")
    return flops / (gpu.peak_flops * mfu) / 3600


def training_cost_rows(
    models=(GPT3, LLAMA2_70B), gpus=(A100, H100), mfu: float = MFU
) -> list[dict]:
    """One row per model and GPU: FLOPs, 6ND alone, GPU-hours, days on ``CLUSTER_GPUS`` GPUs,
    dollars."""
    rows = []
    for m in models:
        flops = training_flops(m)
        for g in gpus:
            hours = gpu_hours(flops, g, mfu)
            rows.append(
                {
                    "model": m.name,
                    "gpu": g.name,
                    "flops": flops,
                    "flops_6nd": 6 * m.n_params * m.n_tokens,
                    "gpu_hours": hours,
                    "days_on_cluster": hours / CLUSTER_GPUS / 24,
                    "dollars": hours * g.price_per_hour,
                }
            )
    return rows


def inference_cost_rows(
    models=(GPT3, LLAMA2_70B), gpus=(A100, H100), mfu: float = MFU
) -> list[dict]:
    """One row per model and GPU: FLOPs per generated token at full context, the dollars per
    million tokens when the GPU runs at ``mfu`` (large batches), and the memory-bound floor of
    one sequence alone: every token reads all 2N bytes of BF16 weights."""
    rows = []
    for m in models:
        per_token = inference_flops_per_token(m)
        for g in gpus:
            hours = gpu_hours(per_token * 1e6, g, mfu)
            rows.append(
                {
                    "model": m.name,
                    "gpu": g.name,
                    "flops_per_token": per_token,
                    "attention_share": 4 * m.n_layer * m.d_model * m.n_ctx / per_token,
                    "dollars_per_million": hours * g.price_per_hour,
                    "batch1_ms_per_token": 2 * m.n_params / g.bandwidth * 1e3,
                }
            )
    return rows


def implied_mfu(model: LanguageModel, gpu: GPU, reported_gpu_hours: float) -> float:
    """The MFU a reported number of GPU-hours implies: training FLOPs / (hours x peak)."""
    _check_positive(reported_gpu_hours=reported_gpu_hours)
    return training_flops(model) / (reported_gpu_hours * 3600 * gpu.peak_flops)


def counted_flops(model: torch.nn.Module, idx: torch.Tensor, backward: bool = False) -> float:
    """The FLOPs PyTorch's ``FlopCounterMode`` counts in ``model(idx)`` (idx (B, T) token ids),
    and, with ``backward``, in the backward pass of its loss on ``idx`` as targets."""
    from torch.utils.flop_counter import FlopCounterMode

    with FlopCounterMode(display=False) as counter:
        if backward:
            _, loss = model(idx, idx)
            loss.backward()
        else:
            model(idx)
    return float(counter.get_total_flops())


def measured_training_flops(cfg: GPTConfig, batch_size: int = 2, seed: int = 0) -> dict:
    """Count the FLOPs of one forward and backward pass of a MiniGPT with PyTorch's
    ``FlopCounterMode`` and compare them with ``flops_per_token``.

    The model uses the from-scratch attention (``attention="course_lib"``: explicit matrix
    products the counter sees; the formula, like it, counts the full T x T scores).
    Returns {"measured", "formula", "ratio"} for batch_size x block_size tokens.
    """
    from dataclasses import replace

    if cfg.vocab_size is None:
        raise ValueError("measured_training_flops: cfg.vocab_size is not set (cfg.with_vocab).")
    cfg = replace(cfg, attention="course_lib", dropout=0.0)
    torch.manual_seed(seed)
    model = MiniGPT(cfg)
    idx = torch.randint(cfg.vocab_size, (batch_size, cfg.block_size))  # (B, T)
    measured = counted_flops(model, idx, backward=True)
    formula = flops_per_token(cfg) * batch_size * cfg.block_size
    return {"measured": measured, "formula": formula, "ratio": measured / formula}
