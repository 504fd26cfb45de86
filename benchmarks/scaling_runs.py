"""Scaling runs: validation loss against training compute for a small grid of MiniGPTs.

    OMP_NUM_THREADS=1 nice -n 10 python benchmarks/scaling_runs.py  # the grid (about 5-10 min)
    python benchmarks/scaling_runs.py --budgets 3e10,1e11 --out /tmp/s.json  # a quick smoke run

An IsoFLOP grid in the manner of Hoffmann et al. (2022): for every compute budget C (training
FLOPs, counted as ``model.flops_per_token`` times the tokens trained, the course's own count)
each model size is trained for C / (flops per token x tokens per step) steps, with its own
warmup-cosine schedule ending at that step, on the course corpus with one recipe (the
``chapter`` configuration's learning rate and clipping, batch 16 x 64 characters). A run is
left out when its step count falls outside [MIN_STEPS, MAX_STEPS] (too short for a schedule,
or longer than about a minute on one idle thread). Each run ends with one evaluation on the
same fixed validation windows. Prints a table and writes ``course_lib/results/scaling.json``,
which Chapter 1 reads (the chapter never trains) unless ``--out`` says otherwise.

Every run is seeded, so a run already in the output file with the same settings is reused
rather than trained again (``--fresh`` trains everything): extending the grid costs only the
new runs.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path

import torch
from _common import results_file, write_json  # run from benchmarks/

from course_lib.model import GPTConfig, flops_per_token
from course_lib.train import TrainConfig, Trainer, corpus_tokens

RESULTS = results_file("scaling.json")

#: (n_layer, d_model, n_head) of the model sizes, smallest first
SIZES = [(1, 32, 2), (2, 48, 2), (2, 64, 4), (3, 96, 4), (4, 128, 4), (6, 192, 6)]
#: training compute budgets in FLOPs
BUDGETS = [3e10, 1e11, 3e11, 1e12, 3e12]
BATCH, BLOCK = 16, 64
MIN_STEPS, MAX_STEPS = 30, 9000
RECIPE = dict(
    lr=0.01,
    min_lr=0.001,
    weight_decay=0.1,
    beta1=0.9,
    beta2=0.99,
    grad_clip=1.0,
    eval_batches=24,
    eval_batch_size=32,
    seed=1337,
    corpus="shakespeare",
    threads=1,
)


def plan(budgets=BUDGETS, sizes=SIZES, vocab_size: int = 81) -> list[dict]:
    """The runs of the grid: one dict per (budget, size) whose step count is in range."""
    runs = []
    for C in budgets:
        for n_layer, d_model, n_head in sizes:
            mcfg = GPTConfig(
                block_size=BLOCK,
                n_layer=n_layer,
                n_head=n_head,
                d_model=d_model,
                dropout=0.0,
                bias=False,
                vocab_size=vocab_size,
            )
            fpt = flops_per_token(mcfg)
            steps = round(C / (fpt * BATCH * BLOCK))
            if MIN_STEPS <= steps <= MAX_STEPS:
                runs.append(
                    {
                        "budget": C,
                        "n_layer": n_layer,
                        "d_model": d_model,
                        "n_head": n_head,
                        "steps": steps,
                        "flops_per_token": fpt,
                    }
                )
    return runs


def train_one(spec: dict, data) -> dict:
    """Train one run of the grid; returns the spec with params, compute, losses and seconds."""
    tok, train, val = data
    steps = spec["steps"]
    cfg = TrainConfig(
        model={
            "block_size": BLOCK,
            "n_layer": spec["n_layer"],
            "n_head": spec["n_head"],
            "d_model": spec["d_model"],
            "dropout": 0.0,
            "bias": False,
        },
        batch_size=BATCH,
        max_steps=steps,
        warmup_steps=max(5, steps // 20),
        eval_interval=steps,
        name=f"L{spec['n_layer']}-d{spec['d_model']}",
        device="cpu",
        **RECIPE,
    )
    trainer = Trainer(cfg, train, val, tok.vocab_size, tokenizer=tok, device="cpu")
    t0 = time.perf_counter()
    trainer.train(progress=False, evaluate=False)
    seconds = time.perf_counter() - t0
    losses = trainer.estimate_loss()  # the same fixed validation windows for every run
    tokens = steps * BATCH * BLOCK
    return {
        **spec,
        "params": trainer.module.num_params(),
        "tokens": tokens,
        "compute": spec["flops_per_token"] * tokens,
        "train_loss": losses["train"],
        "val_loss": losses["val"],
        "train_seconds": seconds,
    }


def _key(spec: dict) -> tuple:
    return tuple(spec[k] for k in ("budget", "n_layer", "d_model", "n_head", "steps"))


def _reusable(path: Path) -> dict:
    """Runs of an earlier output trained with the same batch, context and recipe, by key."""
    if not path.exists():
        return {}
    old = json.loads(path.read_text())
    if (old.get("batch_size"), old.get("block_size"), old.get("recipe")) != (BATCH, BLOCK, RECIPE):
        return {}
    return {_key(r): r for r in old["runs"]}


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--budgets", default=None, help="comma-separated FLOP budgets (default: the grid's)"
    )
    p.add_argument("--out", default=str(RESULTS), help="where to write the JSON")
    p.add_argument("--fresh", action="store_true", help="train every run, reusing none from --out")
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    budgets = [float(b) for b in args.budgets.split(",")] if args.budgets else BUDGETS
    data = corpus_tokens(TrainConfig(corpus="shakespeare"))
    runs = []
    print(
        f"{'budget':>8} {'model':>9} {'params':>9} {'steps':>6} {'tokens':>10} {'compute':>9} "
        f"{'val loss':>8} {'seconds':>8}"
    )
    done = {} if args.fresh else _reusable(Path(args.out))
    for spec in plan(budgets, vocab_size=data[0].vocab_size):
        r = done.get(_key(spec)) or train_one(spec, data)
        runs.append(r)
        print(
            f"{r['budget']:>8.0e} {'L%d-d%d' % (r['n_layer'], r['d_model']):>9} {r['params']:>9,} "
            f"{r['steps']:>6} {r['tokens']:>10,} {r['compute']:>9.2e} {r['val_loss']:>8.4f} "
            f"{r['train_seconds']:>8.1f}",
            flush=True,
        )
    out = {
        "description": "IsoFLOP grid of MiniGPTs on the course corpus "
        "(benchmarks/scaling_runs.py): compute = flops_per_token x tokens trained; val_loss in "
        "nats per character.",
        "machine": {
            "processor": platform.processor() or platform.machine(),
            "threads": 1,
            "torch": torch.__version__,
            "load_average_before": os.getloadavg()[0],
        },
        "batch_size": BATCH,
        "block_size": BLOCK,
        "recipe": RECIPE,
        "budgets": budgets,
        "sizes": [list(s) for s in SIZES],
        "min_steps": MIN_STEPS,
        "max_steps": MAX_STEPS,
        "runs": runs,
        "measured_at": time.strftime("%Y-%m-%d %H:%M"),
    }
    write_json(out, args.out)
    return out


if __name__ == "__main__":
    main()
