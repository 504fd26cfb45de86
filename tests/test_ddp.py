"""The command-line trainer under torchrun: 2 CPU processes, gloo, DistributedDataParallel."""
from __future__ import annotations

import json
import math
import os
import subprocess
import sys

import torch

from course_lib.train import Trainer, TrainConfig, corpus_tokens, load_model

TINY = dict(model=dict(block_size=16, n_layer=2, n_head=2, d_model=32), batch_size=8, max_steps=40, lr=3e-3,
            min_lr=3e-4, warmup_steps=5, eval_interval=20, eval_batches=4, eval_batch_size=16,
            corpus="synthetic", name="ddp", threads=1)


def test_torchrun_two_gloo_processes_train_and_save_a_loadable_checkpoint(tmp_path):
    cfg_path = tmp_path / "tiny.json"
    cfg_path.write_text(json.dumps(TINY))
    out = tmp_path / "run"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
           "-m", "course_lib.train", "--config", str(cfg_path), "--out", str(out), "--no-progress"]
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
    resumed = Trainer.load(out / "ckpt.pt", train, val)
    assert resumed.step == 40
    assert abs(resumed.estimate_loss()["val"] - h["val"][-1]) < 1e-5
    # and matches the single-process run closely in shape: both end far below the start
    single = Trainer(cfg, train, val, tok.vocab_size, tokenizer=tok)
    hs = single.train(progress=False)
    assert abs(hs.val[0] - h["val"][0]) < 1e-5  # same initial weights and evaluation windows
    assert abs(hs.val[-1] - h["val"][-1]) < 0.3
