"""Devices, mixed precision and device-independent checkpoints (issue 16).

This machine has no GPU, so every device path runs here on the CPU: the resolvers with
``torch.cuda``/``torch.backends.mps`` answers patched, bf16 and fp16 autocast (with a real
GradScaler) on the CPU, checkpoints whose tensors carry another device's location tag. The
last test runs only where a CUDA GPU exists."""

from __future__ import annotations

import json
import math
from importlib.resources import files

import pytest
import torch
import train_support
from torch import nn

import course_lib.device as device_mod
from course_lib.checkpoint import load_model
from course_lib.data import BatchSampler, corpus_tokens
from course_lib.device import ddp_backend, move_batch, resolve_device, resolve_precision
from course_lib.model import MiniGPT
from course_lib.schedule import warmup_cosine
from course_lib.train import TrainConfig, Trainer, load_config, main

# the shared tiny run, shortened: these tests look at one step or a few
TINY = {
    **train_support.TINY,
    "max_steps": 30,
    "warmup_steps": 5,
    "eval_interval": 10,
    "eval_batches": 2,
}


def _trainer(**kw) -> Trainer:
    return train_support.tiny_trainer(**{**TINY, **kw})


@pytest.fixture
def machine(monkeypatch):
    """Pretend this machine has ``gpus`` CUDA GPUs (bf16 or not) and/or MPS."""

    def set_(gpus=0, bf16=True, mps=False):
        monkeypatch.setattr(torch.cuda, "is_available", lambda: gpus > 0)
        monkeypatch.setattr(torch.cuda, "device_count", lambda: gpus)
        monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: bf16)
        monkeypatch.setattr(torch.backends.mps, "is_available", lambda: mps)

    return set_


# -- choosing the device and the precision ----------------------------------------------------


def test_auto_takes_cuda_then_mps_then_cpu(machine):
    machine(gpus=2, mps=True)
    assert resolve_device("auto") == torch.device("cuda", 0)
    # torchrun: LOCAL_RANK's GPU
    assert resolve_device("auto", local_rank=1) == torch.device("cuda", 1)
    assert resolve_device("cuda", local_rank=1) == torch.device("cuda", 1)
    assert resolve_device("cuda:1") == torch.device("cuda", 1)
    machine(gpus=0, mps=True)
    assert resolve_device("auto") == torch.device("mps")
    machine(gpus=0, mps=False)
    assert resolve_device("auto") == torch.device("cpu")
    assert resolve_device(torch.device("cpu")) == torch.device("cpu")


def test_a_missing_or_misspelt_device_is_a_readable_error(machine):
    machine(gpus=0)
    with pytest.raises(ValueError, match="no CUDA GPU"):
        resolve_device("cuda")
    with pytest.raises(ValueError, match="mps"):
        resolve_device("mps")
    machine(gpus=2)
    with pytest.raises(ValueError, match="nproc_per_node"):
        resolve_device("auto", local_rank=2)  # a third process on a two-GPU machine
    for bad in ("gpu", "cuda:x", "cpu:1", "tpu"):
        with pytest.raises(ValueError, match="device must be"):
            resolve_device(bad)
    with pytest.raises(ValueError, match="TrainConfig: device must be"):
        TrainConfig(**{**TINY, "device": "gpu"})
    with pytest.raises(ValueError, match="precision must be"):
        TrainConfig(**{**TINY, "precision": "fp8"})


def test_precision_auto_is_bf16_or_fp16_on_cuda_and_fp32_elsewhere(machine):
    cuda, cpu, mps = torch.device("cuda", 0), torch.device("cpu"), torch.device("mps")
    machine(gpus=1, bf16=True)
    assert resolve_precision("auto", cuda) == "bf16"
    machine(gpus=1, bf16=False)  # a T4
    assert resolve_precision("auto", cuda) == "fp16"
    assert resolve_precision("fp16", cuda) == "fp16"
    with pytest.raises(ValueError, match="no bfloat16"):
        resolve_precision("bf16", cuda)
    assert resolve_precision("auto", cpu) == "fp32" and resolve_precision("auto", mps) == "fp32"
    assert resolve_precision("bf16", cpu) == "bf16" and resolve_precision("fp32", cuda) == "fp32"
    with pytest.raises(ValueError, match="precision must be"):
        resolve_precision("half", cpu)


def test_ddp_backend_is_nccl_on_gpus_and_gloo_on_cpus():
    assert ddp_backend(torch.device("cuda", 1)) == "nccl"
    assert ddp_backend(torch.device("cpu")) == "gloo"


def test_batches_stay_on_the_cpu_and_go_to_cuda_pinned_and_non_blocking(monkeypatch):
    x, y = torch.zeros(2, 3, dtype=torch.long), torch.ones(2, 3, dtype=torch.long)
    assert move_batch(x, y, torch.device("cpu"))[0] is x  # nothing moves on the CPU
    mx, my = move_batch(x, y, torch.device("meta"))  # another device: a plain copy
    assert mx.device.type == "meta" and my.shape == (2, 3)
    # CUDA: record what move_batch asks of the tensors (no GPU here to copy to)
    calls = []
    monkeypatch.setattr(torch.Tensor, "pin_memory", lambda self: calls.append("pin") or self)
    monkeypatch.setattr(
        torch.Tensor,
        "to",
        lambda self, device, non_blocking=False: calls.append((str(device), non_blocking)) or self,
    )
    move_batch(x, y, torch.device("cuda", 0))
    assert calls == ["pin", "pin", ("cuda:0", True), ("cuda:0", True)]


def test_accelerator_rng_states_are_read_from_the_device_module(monkeypatch):
    monkeypatch.setattr(torch.cuda, "get_rng_state", lambda device: torch.tensor([7]))
    monkeypatch.setattr(torch.mps, "get_rng_state", lambda: torch.tensor([8]))
    assert device_mod.device_rng_state(torch.device("cuda", 0)).item() == 7
    assert device_mod.device_rng_state(torch.device("mps")).item() == 8
    assert device_mod.device_rng_state(torch.device("cpu")) is None
    seen = []
    monkeypatch.setattr(
        torch.cuda, "set_rng_state", lambda state, device: seen.append(("cuda", state.item()))
    )
    monkeypatch.setattr(
        torch.mps, "set_rng_state", lambda state: seen.append(("mps", state.item()))
    )
    device_mod.set_device_rng_state(torch.device("cuda", 0), torch.tensor([7]))
    device_mod.set_device_rng_state(torch.device("mps"), torch.tensor([8]))
    device_mod.set_device_rng_state(torch.device("cpu"), None)
    assert seen == [("cuda", 7), ("mps", 8)]


# -- the CPU default is plain fp32 PyTorch ----------------------------------------------------


def test_default_cpu_training_is_exactly_a_plain_pytorch_loop(machine):
    """No autocast, and the disabled GradScaler passes everything through: the Trainer's
    losses equal, bit for bit, those of a hand-written fp32 AdamW loop."""
    machine(gpus=0, mps=False)
    t = _trainer(max_steps=15, warmup_steps=3)
    assert t.device == torch.device("cpu") and t.precision == "fp32" and not t.scaler.is_enabled()
    t.train(progress=False, evaluate=False)

    cfg = t.cfg
    torch.manual_seed(cfg.seed)
    model = MiniGPT(cfg.model.with_vocab(t.module.cfg.vocab_size))
    params = list(model.parameters())
    opt = torch.optim.AdamW(
        [
            {"params": [p for p in params if p.dim() >= 2], "weight_decay": cfg.weight_decay},
            {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0},
        ],
        lr=cfg.lr,
        betas=(cfg.beta1, cfg.beta2),
        fused=True,
    )
    sampler = BatchSampler(t.train_data, cfg.model.block_size, seed=cfg.seed)
    losses = []
    for step in range(cfg.max_steps):
        for g in opt.param_groups:
            g["lr"] = warmup_cosine(step, cfg.lr, cfg.warmup_steps, cfg.max_steps, cfg.min_lr)
        _, loss = model(*sampler.sample(cfg.batch_size))
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(params, cfg.grad_clip)
        opt.step()
        losses.append(loss.item())
    assert t.history.step_loss == losses


# -- mixed precision on the CPU ---------------------------------------------------------------


def test_bf16_autocast_trains_on_the_cpu():
    fp32 = _trainer(precision="fp32")
    bf16 = _trainer(precision="bf16")
    assert bf16.precision == "bf16" and not bf16.scaler.is_enabled()  # bf16 needs no loss scaling
    x, y = fp32.sampler.sample(8)
    with device_mod.autocast(bf16.precision, bf16.device):  # what the trainer's steps run in
        logits, loss = bf16.model(x, y)
    # matmuls in bf16, loss in fp32
    assert logits.dtype == torch.bfloat16 and loss.dtype == torch.float32
    assert all(p.dtype == torch.float32 for p in bf16.module.parameters())  # the weights stay fp32
    h32 = fp32.train(steps=20, progress=False)
    h16 = bf16.train(steps=20, progress=False)
    assert h16.step_loss != h32.step_loss  # autocast really changed the arithmetic
    assert h16.step_loss[0] == pytest.approx(h32.step_loss[0], abs=0.02)  # same weights, same batch
    assert h16.val[-1] < h16.val[0] - 0.5 and abs(h16.val[-1] - h32.val[-1]) < 0.1


def test_fp16_uses_a_real_grad_scaler_and_resumes_with_its_scale(tmp_path):
    t = _trainer(precision="fp16")
    assert t.scaler.is_enabled()
    h = t.train(steps=20, progress=False)
    assert all(math.isfinite(v) for v in h.step_loss) and h.val[-1] < h.val[0] - 0.5
    t.save(tmp_path / "ckpt.pt")
    t.train(steps=5, progress=False, evaluate=False)
    _, train, val = corpus_tokens(t.cfg)
    resumed = Trainer.load(tmp_path / "ckpt.pt", train, val)
    assert resumed.scaler.is_enabled() and resumed.step == 20
    resumed.train(steps=5, progress=False, evaluate=False)
    assert (
        resumed.history.step_loss == t.history.step_loss
        and resumed.scaler.get_scale() == t.scaler.get_scale()
    )


def test_fp16_overflow_skips_the_step_and_lowers_the_scale():
    t = _trainer(precision="fp16")
    # gradients x 2^40 overflow float16
    t.scaler = torch.amp.GradScaler("cpu", init_scale=2.0**40)
    before = [p.detach().clone() for p in t.module.parameters()]
    t.train_step()
    assert all(torch.equal(b, p) for b, p in zip(before, t.module.parameters()))  # step skipped
    assert t.scaler.get_scale() < 2.0**40


def test_compile_option_compiles_the_training_model_only(monkeypatch):
    compiled = []

    def fake_compile(module):
        compiled.append(module)
        return module

    monkeypatch.setattr(torch, "compile", fake_compile)
    t = _trainer(compile=True)
    assert compiled == [t.module] and t.model is t.module
    assert not _trainer().cfg.compile and len(compiled) == 1  # off by default


@pytest.mark.slow  # dynamo tracing takes ~15 s on two shared cores
def test_compiled_training_matches_eager_training():
    eager = _trainer(max_steps=5, warmup_steps=1)
    eager.train(progress=False, evaluate=False)
    orig = torch.compile
    try:
        # no C compiler needed: dynamo's tracing only
        torch.compile = lambda m: orig(m, backend="eager")
        t = _trainer(max_steps=5, warmup_steps=1, compile=True)
    finally:
        torch.compile = orig
    assert type(t.model).__name__ == "OptimizedModule"
    t.train(progress=False, evaluate=False)
    assert t.history.step_loss == pytest.approx(eager.history.step_loss, abs=1e-5)
    # the checkpoint holds the plain module
    assert "_orig_mod" not in "".join(t.state_dict()["model"])


# -- device-independent checkpoints -----------------------------------------------------------


def _locations(path) -> list[str]:
    seen = []
    torch.load(
        path,
        map_location=lambda storage, location: seen.append(location) or storage,
        weights_only=False,
    )
    return seen


def test_checkpoints_hold_cpu_tensors_and_load_through_map_location(tmp_path):
    t = _trainer(precision="bf16")
    t.train(steps=3, progress=False, evaluate=False)
    t.save(tmp_path / "ckpt.pt")
    locations = _locations(tmp_path / "ckpt.pt")
    assert locations and set(locations) == {"cpu"}
    _, train, val = corpus_tokens(t.cfg)
    seen = []
    resumed = Trainer.load(
        tmp_path / "ckpt.pt",
        train,
        val,
        map_location=lambda storage, location: seen.append(location) or storage.cpu(),
    )
    assert seen and all(p.device.type == "cpu" for p in resumed.module.parameters())
    assert all(
        torch.equal(a, b) for a, b in zip(resumed.module.parameters(), t.module.parameters())
    )


def _device_present(tag: str) -> bool:
    """Whether this machine has the device a location tag names (on a GPU machine cuda:0 is
    not absent, and torch.load restores onto it without complaint)."""
    if tag.startswith("cuda"):
        return torch.cuda.is_available()
    return tag == "mps" and torch.backends.mps.is_available()


@pytest.mark.parametrize("tag", ["cuda:0", "mps"])
def test_a_checkpoint_tagged_for_an_absent_device_loads_on_the_cpu(tmp_path, monkeypatch, tag):
    """A checkpoint whose storages carry another device's location tag, as ``torch.save`` writes
    them on that device: made here by registering a tagger in front of the CPU's for the save."""
    t = _trainer()
    t.train(steps=3, progress=False, evaluate=False)
    registry = list(torch.serialization._package_registry)
    monkeypatch.setattr(torch.serialization, "_package_registry", registry)  # undone after the test
    torch.serialization.register_package(0, lambda storage: tag, lambda obj, location: None)
    t.save(tmp_path / "ckpt.pt")
    # saving over: loads see real devices
    registry[:] = [entry for entry in registry if entry[0] != 0]
    assert set(_locations(tmp_path / "ckpt.pt")) == {tag}
    if not _device_present(tag):  # without map_location torch tries to restore onto the device
        with pytest.raises(RuntimeError):
            torch.load(tmp_path / "ckpt.pt", weights_only=False)
    model, _ = load_model(tmp_path / "ckpt.pt")
    _, train, val = corpus_tokens(t.cfg)
    resumed = Trainer.load(tmp_path / "ckpt.pt", train, val)
    for m in (model, resumed.module):
        assert all(p.device.type == "cpu" for p in m.parameters())
        assert all(torch.equal(a, b) for a, b in zip(m.parameters(), t.module.parameters()))
    resumed.train(steps=2, progress=False, evaluate=False)  # and it trains on
    t.train(steps=2, progress=False, evaluate=False)
    assert resumed.history.step_loss == t.history.step_loss


# -- the command line -------------------------------------------------------------------------


def test_cli_device_and_precision_flags(tmp_path, machine):
    machine(gpus=0, mps=False)
    path = tmp_path / "tiny.json"
    path.write_text(json.dumps({**TINY, "max_steps": 6}))
    res = main(
        [
            "--config",
            str(path),
            "--device",
            "cpu",
            "--precision",
            "bf16",
            "--out",
            str(tmp_path / "run"),
            "--no-progress",
        ]
    )
    assert (
        res["device"] == "cpu"
        and res["precision"] == "bf16"
        and res["config"]["precision"] == "bf16"
    )
    # generated under the device's generator
    assert isinstance(res["sample"], str) and len(res["sample"]) == 300
    with pytest.raises(ValueError, match="no CUDA GPU"):
        main(["--config", str(path), "--device", "cuda", "--no-progress"])
    with pytest.raises(ValueError, match="no CUDA GPU"):  # also when resuming
        main(["--resume", str(tmp_path / "run" / "ckpt.pt"), "--device", "cuda", "--no-progress"])
    res2 = main(
        [
            "--resume",
            str(tmp_path / "run" / "ckpt.pt"),
            "--precision",
            "fp32",
            "--max-steps",
            "8",
            "--no-progress",
        ]
    )
    assert res2["steps"] == 8 and res2["precision"] == "fp32"


def test_gpu_config_is_the_baby_gpt_shape_with_the_expected_parameter_count():
    cfg = load_config(files("course_lib").joinpath("configs", "gpu.json"))
    m = cfg.model
    assert (m.n_layer, m.n_head, m.d_model, m.block_size, cfg.batch_size) == (6, 6, 384, 256, 64)
    assert cfg.device == "auto" and cfg.precision == "auto" and m.dropout == 0.2
    assert cfg.warmup_steps < cfg.max_steps and cfg.min_lr < cfg.lr
    V, d, L, T = 65, m.d_model, m.n_layer, m.block_size
    # q,k,v,o: 4d^2; MLP: 8d^2; two LayerNorms
    per_block = 12 * d * d + 2 * d + (11 * d if m.bias else 0)
    # tied embedding, positions, final LN
    expected = V * d + T * d + L * per_block + d * (2 if m.bias else 1)
    assert MiniGPT(m.with_vocab(V)).num_params() == expected


# -- on a real GPU ----------------------------------------------------------------------------


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (none on this machine)")
def test_training_on_a_cuda_gpu(tmp_path):
    cpu = _trainer(device="cpu", precision="fp32")
    gpu = _trainer(device="auto")
    assert gpu.device.type == "cuda" and gpu.precision in ("bf16", "fp16")
    hc = cpu.train(steps=20, progress=False)
    hg = gpu.train(steps=20, progress=False)
    assert abs(hg.val[0] - hc.val[0]) < 0.02 and abs(hg.val[-1] - hc.val[-1]) < 0.15
    gpu.save(tmp_path / "ckpt.pt")
    assert set(_locations(tmp_path / "ckpt.pt")) == {"cpu"}  # loads on machines without a GPU
    _, train, val = corpus_tokens(gpu.cfg)
    resumed = Trainer.load(tmp_path / "ckpt.pt", train, val)
    assert next(resumed.module.parameters()).device.type == "cuda"
    resumed.train(steps=5, progress=False, evaluate=False)
    gpu.train(steps=5, progress=False, evaluate=False)
    assert resumed.history.step_loss == pytest.approx(gpu.history.step_loss, abs=1e-3)
    model, tok = load_model(tmp_path / "ckpt.pt", device="cuda")
    out = model.generate(
        torch.zeros(1, 1, dtype=torch.long, device="cuda"),
        10,
        generator=torch.Generator(device="cuda").manual_seed(0),
    )
    assert out.device.type == "cuda" and out.shape == (1, 11)
