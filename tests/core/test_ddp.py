"""The command-line trainer under DistributedDataParallel: 2 CPU processes, gloo.

Every test here starts processes (torchrun or torch.multiprocessing), so all are ``slow``."""

from __future__ import annotations

import json
import math
import os
import socket
import subprocess
import sys

import pytest
import torch
import torch.multiprocessing as mp

from course_lib.data import BatchSampler
from course_lib.schedule import warmup_cosine
from course_lib.train import TrainConfig, Trainer, corpus_tokens, load_model, main

TINY = dict(
    model=dict(block_size=16, n_layer=2, n_head=2, d_model=32),
    batch_size=8,
    max_steps=40,
    lr=3e-3,
    min_lr=3e-4,
    warmup_steps=5,
    eval_interval=20,
    eval_batches=4,
    eval_batch_size=16,
    corpus="synthetic",
    name="ddp",
    threads=1,
    device="cpu",  # gloo on the CPU; the CUDA test overrides it with --device auto
)


@pytest.mark.slow
def test_torchrun_two_gloo_processes_train_and_save_a_loadable_checkpoint(tmp_path):
    cfg_path = tmp_path / "tiny.json"
    cfg_path.write_text(json.dumps(TINY))
    out = tmp_path / "run"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc_per_node=2",
        "-m",
        "course_lib.train",
        "--config",
        str(cfg_path),
        "--out",
        str(out),
        "--no-progress",
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.count("ddp: 40 steps") == 1  # only rank 0 reports
    res = json.loads((out / "results.json").read_text())
    assert res["world_size"] == 2 and res["steps"] == 40
    h = res["history"]
    # same curve shape as a single process: starts near ln V, falls well below it
    cfg = TrainConfig(**TINY)
    tok, train, val = corpus_tokens(cfg)
    assert abs(h["val"][0] - math.log(tok.vocab_size)) < 0.15
    assert h["val"][-1] < h["val"][0] - 1.0
    # the checkpoint is the plain model: the single-process code loads it and gets the same loss
    model, tok2 = load_model(out / "ckpt.pt")
    assert tok2.chars == tok.chars
    # one process resumes a 2-process run
    with pytest.warns(UserWarning, match="written by 2 process"):
        resumed = Trainer.load(out / "ckpt.pt", train, val)
    assert resumed.step == 40
    assert abs(resumed.estimate_loss()["val"] - h["val"][-1]) < 1e-5
    # and matches the single-process run closely in shape: both end far below the start
    single = Trainer(cfg, train, val, tok.vocab_size, tokenizer=tok)
    threads = torch.get_num_threads()
    torch.set_num_threads(cfg.threads)  # as run() would: on a 16-core GPU machine, under xdist,
    try:  # all cores per worker made this 40-step run take minutes
        hs = single.train(progress=False)
    finally:
        torch.set_num_threads(threads)
    assert abs(hs.val[0] - h["val"][0]) < 1e-5  # same initial weights and evaluation windows
    assert abs(hs.val[-1] - h["val"][-1]) < 0.3


# -- resume under DDP (issue 12) --------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _ddp_worker(rank: int, world_size: int, port: int, argv: list[str], log: str) -> None:
    """One rank of a torchrun-like launch: the environment torchrun sets, then the CLI. Records
    the training batches this rank draws (the ones of ``batch_size``; evaluation batches are
    larger) in ``log.rank{r}.pt``."""
    os.environ.update(
        RANK=str(rank),
        LOCAL_RANK=str(rank),
        WORLD_SIZE=str(world_size),
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(port),
        OMP_NUM_THREADS="1",
    )
    torch.set_num_threads(1)
    drawn = []
    original = BatchSampler.sample

    def recording(self, batch_size):
        x, y = original(self, batch_size)
        if batch_size == TINY["batch_size"]:
            drawn.append(x.clone())  # (B, T)
        return x, y

    BatchSampler.sample = recording
    main(argv + ["--no-progress"])
    torch.save(drawn, f"{log}.rank{rank}.pt")


def _launch(argv: list[str], log) -> list[list[torch.Tensor]]:
    """Run the CLI as 2 gloo processes; the batches each rank drew, per rank."""
    mp.spawn(_ddp_worker, args=(2, _free_port(), argv, str(log)), nprocs=2, join=True)
    return [torch.load(f"{log}.rank{r}.pt") for r in range(2)]


@pytest.mark.slow
def test_ddp_resume_gives_each_rank_its_own_batches_and_the_uninterrupted_run(tmp_path):
    N, M = 20, 10
    cfg = {
        **TINY,
        "max_steps": N + M,
        "eval_interval": 10,
        "model": {**TINY["model"], "dropout": 0.1},
    }
    cfg_path = tmp_path / "tiny.json"
    cfg_path.write_text(json.dumps(cfg))
    straight = _launch(["--config", str(cfg_path), "--out", str(tmp_path / "a")], tmp_path / "a")
    first = _launch(
        ["--config", str(cfg_path), "--out", str(tmp_path / "b"), "--steps", str(N)],
        tmp_path / "b1",
    )
    assert [len(d) for d in first] == [N, N]
    resumed = _launch(
        ["--resume", str(tmp_path / "b" / "ckpt.pt"), "--out", str(tmp_path / "b")], tmp_path / "b2"
    )

    # (a) after the resume the two ranks draw different batches, each its own continuation
    assert [len(d) for d in resumed] == [M, M]
    assert all(not torch.equal(x0, x1) for x0, x1 in zip(*resumed))
    for r in range(2):
        assert all(torch.equal(a, b) for a, b in zip(resumed[r], straight[r][N:]))
    # (b) the interrupted run equals the uninterrupted one: every step's loss, the final weights
    a = torch.load(tmp_path / "a" / "ckpt.pt", weights_only=False)
    b = torch.load(tmp_path / "b" / "ckpt.pt", weights_only=False)
    assert b["step"] == a["step"] == N + M
    assert b["history"]["step_loss"] == a["history"]["step_loss"]  # bit for bit
    assert all(torch.equal(a["model"][k], b["model"][k]) for k in a["model"])
    assert b["world_size"] == 2 and len(b["ranks"]) == 2
    assert not torch.equal(
        b["ranks"][0]["sampler"]["generator"], b["ranks"][1]["sampler"]["generator"]
    )
    # (c) --max-steps is honoured on resume: 10 more steps, on the schedule stretched to the new end
    more = _launch(
        [
            "--resume",
            str(tmp_path / "b" / "ckpt.pt"),
            "--out",
            str(tmp_path / "b"),
            "--max-steps",
            str(N + M + 10),
        ],
        tmp_path / "b3",
    )
    assert [len(d) for d in more] == [10, 10]
    c = torch.load(tmp_path / "b" / "ckpt.pt", weights_only=False)
    assert c["step"] == N + M + 10 and c["config"]["max_steps"] == N + M + 10
    expected_lr = [
        warmup_cosine(s, cfg["lr"], cfg["warmup_steps"], N + M + 10, cfg["min_lr"])
        for s in range(N + M, N + M + 10)
    ]
    assert c["history"]["lr"][N + M :] == pytest.approx(expected_lr)
    res = json.loads((tmp_path / "b" / "results.json").read_text())
    assert res["steps"] == N + M + 10 and res["world_size"] == 2


@pytest.mark.slow
@pytest.mark.skipif(
    not torch.cuda.is_available(), reason="needs a CUDA GPU (none on this machine); NCCL needs two"
)
def test_torchrun_on_cuda_gpus_one_process_per_gpu(tmp_path):
    """On a GPU machine: torchrun with one process per GPU (at most two): NCCL when there are
    two, each rank on cuda:LOCAL_RANK, mixed precision, and a checkpoint that loads on the CPU."""
    nproc = min(2, torch.cuda.device_count())
    cfg_path = tmp_path / "tiny.json"
    cfg_path.write_text(json.dumps({**TINY, "threads": None}))
    out = tmp_path / "run"
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        f"--nproc_per_node={nproc}",
        "-m",
        "course_lib.train",
        "--config",
        str(cfg_path),
        "--out",
        str(out),
        "--device",
        "auto",
        "--no-progress",
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    res = json.loads((out / "results.json").read_text())
    assert (
        res["device"] == "cuda:0"
        and res["precision"] in ("bf16", "fp16")
        and res["world_size"] == nproc
    )
    # bf16 autocast learns a little less in these 40 steps than fp32 on the CPU (the test above
    # asks for 1.0 there); an H100 went from 3.22 to 2.26, so half a nat says it learned
    assert res["history"]["val"][-1] < res["history"]["val"][0] - 0.5
    model, _ = load_model(out / "ckpt.pt")  # on the CPU
    assert next(model.parameters()).device.type == "cpu"
    state = torch.load(out / "ckpt.pt", map_location="cpu", weights_only=False)
    assert len(state["ranks"]) == nproc and state["ranks"][0]["device_rng"] is not None
