"""Benchmark: the original transformer's recipe beside Chapter 14's modern one, same budget.

    python benchmarks/original_bench.py                  # what Chapter 14 reads (2 processes)
    python benchmarks/original_bench.py --seeds 0 --steps 20 --grid-steps 10 --out /tmp/o.json

Two parts, each run on one thread, ``--jobs`` runs at a time:

- **recipe**: ``OriginalSeq2Seq`` (post-norm, ReLU, sinusoidal ``PositionalEncoding``,
  embeddings × √d_model, Xavier) trained with the paper's label smoothing 0.1 and Noam schedule
  (warm-up ``TrainSettings.warmup`` steps to the peak ``TrainSettings.lr``, then 1 / √step),
  for the chapter's budget (``TrainSettings``: 500 steps of 64 pairs) and config
  (``Seq2SeqConfig`` sized for ``number_pairs()``), from each of ``--seeds``; the modern model
  trained the same way is ``results/seq2seq.json`` (``benchmarks/seq2seq_bench.py``), run again
  here only with ``--modern``.
- **warm-up**: why the paper needed warm-up: the original model with post-norm and with
  pre-norm, Noam with and without warm-up, at peak rates ``--rates``, ``--grid-steps`` steps
  from seed 0; each run's validation loss and its largest gradient norm over the first steps.

Exact match is greedy decoding of the 1,000 held-out numbers; the validation loss is plain
cross-entropy (no smoothing) in nats per token. Writes ``course_lib/results/original.json``
after every run (``complete`` is true once all have finished), with the load average (times
on a busy machine mean little).
"""

from __future__ import annotations

import argparse
import functools
import os
import platform
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import replace

from _common import results_file, write_json  # run from benchmarks/

RESULTS = results_file("original.json")
EARLY = 50  # steps over which the largest gradient norm is recorded


def _build(norm: str):
    from course_lib.labs.original import OriginalSeq2Seq
    from course_lib.labs.seq2seq import Seq2Seq

    return Seq2Seq if norm == "modern" else functools.partial(OriginalSeq2Seq, norm=norm)


def run(job: dict) -> dict:
    """Train and evaluate one variant: job = {part, model ("modern", "post", "pre"), schedule,
    label_smoothing, lr, steps, seed}."""
    import torch

    from course_lib.labs.seq2seq import Seq2SeqConfig, number_pairs
    from course_lib.labs.translate import TrainSettings, exact_match, train, translate

    torch.set_num_threads(1)
    data = number_pairs()
    cfg = Seq2SeqConfig(
        len(data.src_vocab), len(data.tgt_vocab), data.max_src_len, data.max_tgt_len
    )
    settings = replace(
        TrainSettings(),
        steps=job["steps"],
        seed=job["seed"],
        lr=job["lr"],
        schedule=job["schedule"],
        label_smoothing=job["label_smoothing"],
        eval_every=max(job["steps"] // 10, 1),
    )
    model, hist = train(data, cfg, settings, build=_build(job["model"]))
    t0 = time.perf_counter()
    hyps = translate(model, data, data.src["test"], "greedy")
    out = dict(job)
    out.update(
        train_seconds=hist["seconds"],
        eval_seconds=time.perf_counter() - t0,
        val_loss=hist["val_loss"][-1],
        exact_greedy=exact_match(hyps, data.tgt["test"]),
        val_curve=[[s, round(v, 5)] for s, v in zip(hist["val_step"], hist["val_loss"])],
        train_curve=[[s, round(v, 4)] for s, v in zip(hist["step"], hist["train_loss"])][::5],
        early_grad_norm_max=max(hist["grad_norm"][:EARLY]),
        params=sum(p.numel() for p in model.parameters()),
    )
    print(
        f"{job['part']:8s} {job['model']:6s} {job['schedule']:20s} lr {job['lr']:.0e} seed "
        f"{job['seed']}: val {out['val_loss']:.4f}  exact {out['exact_greedy']:.3f}  early |g| "
        f"{out['early_grad_norm_max']:.2f}  ({out['train_seconds']:.0f} s)",
        flush=True,
    )
    return out


def main(argv: list[str] | None = None) -> dict:
    from course_lib.labs.translate import TrainSettings

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--steps", type=int, default=TrainSettings.steps, help="the recipe's")
    ap.add_argument("--modern", action="store_true", help="train the modern model here too")
    ap.add_argument("--rates", default="0.003,0.01,0.03")
    ap.add_argument("--grid-steps", type=int, default=100)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--out", default=str(RESULTS))
    args = ap.parse_args(argv)
    base = TrainSettings()
    seeds = [int(s) for s in args.seeds.split(",")]
    recipe = dict(part="recipe", model="post", schedule="noam", label_smoothing=0.1, lr=base.lr)
    modern = dict(part="recipe", model="modern", schedule="cosine", label_smoothing=0.0, lr=base.lr)
    # the order runs what the chapter needs most first: the file is rewritten after every run
    jobs = [dict(recipe, steps=args.steps, seed=s) for s in seeds[:2]]
    rates = [float(r) for r in args.rates.split(",")]
    for lr in sorted(rates, reverse=True):
        for model in ("post", "pre"):
            for schedule in ("noam", "noam-without-warmup"):
                jobs.append(
                    dict(
                        part="warm-up",
                        model=model,
                        schedule=schedule,
                        label_smoothing=0.1,
                        lr=lr,
                        steps=args.grid_steps,
                        seed=0,
                    )
                )
    jobs += [dict(recipe, steps=args.steps, seed=s) for s in seeds[2:]]
    if args.modern:
        jobs += [dict(modern, steps=args.steps, seed=s) for s in seeds]
    load_before = os.getloadavg()
    result = {
        "settings": base.to_dict() | {"steps": args.steps},
        "early_steps": EARLY,
        "grid_steps": args.grid_steps,
        "rates": rates,
        "jobs_planned": len(jobs),
        "complete": False,
        "runs": [],
        "jobs": args.jobs,
        "threads_per_job": 1,
        "load_average_before": list(load_before),
        "machine": platform.processor() or platform.machine(),
        "cpus": os.cpu_count(),
    }
    with ProcessPoolExecutor(args.jobs) as pool:
        for done in as_completed([pool.submit(run, job) for job in jobs]):
            result["runs"].append(done.result())
            result["complete"] = len(result["runs"]) == len(jobs)
            result["load_average_after"] = list(os.getloadavg())
            write_json(result, args.out)
    return result


if __name__ == "__main__":
    main()
