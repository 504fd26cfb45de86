"""Benchmark: the number-words translator (course_lib.labs.seq2seq) with the chapter's config.

    python benchmarks/seq2seq_bench.py                       # the chapter's run (2 threads)
    python benchmarks/seq2seq_bench.py --seeds 0,1,2         # several seeds: how reliable is it?
    python benchmarks/seq2seq_bench.py --steps 100 --out /tmp/s.json   # a quick run

Builds the data (``number_pairs()``: 10,000 training numbers, 500 validation, 1,000 held-out
test numbers below 1,000,000), trains ``Seq2Seq`` with the defaults of ``Seq2SeqConfig`` and
``TrainSettings`` (the chapter's config) on ``--threads`` threads, then translates the test
set greedily and with beam search. Prints one table (wall time of data, training and
evaluation, steps, target tokens per second, final validation loss, exact match and BLEU
greedy / beam, errors by kind) and writes the same, with the wrong translations and the learned
word alignment (``aligned_words``), to ``course_lib/results/seq2seq.json``, with the load
average before and after (the times mean little on a busy machine: say which it was).
"""

from __future__ import annotations

import argparse
import os
import platform
import time
from dataclasses import replace
from pathlib import Path

import torch
from _common import write_json  # run from benchmarks/

from course_lib.labs.seq2seq import Seq2SeqConfig, aligned_words, number_pairs
from course_lib.labs.translate import TrainSettings, evaluate, train

RESULTS = Path(__file__).resolve().parents[1] / "course_lib" / "results" / "seq2seq.json"


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--steps", type=int, default=TrainSettings.steps)
    ap.add_argument("--seeds", default="0", help="training seeds (the data split stays seed 0)")
    ap.add_argument("--beam", type=int, default=4)
    ap.add_argument("--alpha", type=float, default=0.6)
    ap.add_argument("--out", type=Path, default=RESULTS)
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    load_before = os.getloadavg()
    t0 = time.perf_counter()
    data = number_pairs()
    data_s = time.perf_counter() - t0
    cfg = Seq2SeqConfig(
        len(data.src_vocab), len(data.tgt_vocab), data.max_src_len, data.max_tgt_len
    )
    runs = []
    for seed in (int(s) for s in args.seeds.split(",")):
        settings = replace(TrainSettings(), steps=args.steps, seed=seed)
        model, hist = train(data, cfg, settings)
        t1 = time.perf_counter()
        ev = evaluate(model, data, "test", beam_size=args.beam, alpha=args.alpha)
        eval_s = time.perf_counter() - t1
        runs.append(
            {
                "seed": seed,
                "train_seconds": hist["seconds"],
                "eval_seconds": eval_s,
                "steps": settings.steps,
                "tokens_per_s": hist["tokens"] / hist["seconds"],
                "val_loss": hist["val_loss"][-1],
                **{
                    k: ev[k]
                    for k in (
                        "exact_greedy",
                        "exact_beam",
                        "bleu_greedy",
                        "bleu_beam",
                        "errors_greedy",
                        "errors_beam",
                    )
                },
                "wrong_greedy": [
                    (n, e, h, r)
                    for n, e, h, r in zip(
                        data.numbers["test"], data.src["test"], ev["hyps_greedy"], data.tgt["test"]
                    )
                    if h != r
                ][:20],
                "val_curve": list(zip(hist["val_step"], [round(v, 5) for v in hist["val_loss"]])),
                # the learned alignment: for each French word, the English words the last decoder
                # layer read most
                "alignment": {
                    fr: c.most_common(3)
                    for fr, c in sorted(aligned_words(model, data, "test", n=200).items())
                },
            }
        )
        print(
            f"seed {seed}: trained in {hist['seconds']:.1f} s, exact {ev['exact_greedy']:.3f} / "
            f"{ev['exact_beam']:.3f}",
            flush=True,
        )
    load_after = os.getloadavg()
    print(
        f"\ndata: {data_s:.1f} s for {sum(len(v) for v in data.numbers.values()):,} pairs; "
        f"model {sum(p.numel() for p in model.parameters()):,} parameters; {args.threads} threads; "
        f"load average {load_before[0]:.1f} before, {load_after[0]:.1f} after"
    )
    print(
        f"{'seed':>4} {'train s':>8} {'steps':>6} {'tok/s':>7} {'val loss':>9} {'EM greedy':>10} "
        f"{'EM beam':>8} "
        f"{'BLEU greedy':>12} {'BLEU beam':>10} {'eval s':>7}"
    )
    for r in runs:
        print(
            f"{r['seed']:4d} {r['train_seconds']:8.1f} {r['steps']:6d} {r['tokens_per_s']:7.0f} "
            f"{r['val_loss']:9.4f} "
            f"{r['exact_greedy']:10.3f} {r['exact_beam']:8.3f} {r['bleu_greedy']:12.2f} "
            f"{r['bleu_beam']:10.2f} "
            f"{r['eval_seconds']:7.1f}"
        )
        print(f"     errors greedy {r['errors_greedy']}  beam {r['errors_beam']}")
    result = {
        "config": cfg.to_dict(),
        "settings": TrainSettings().to_dict() | {"steps": args.steps},
        "data": {
            "n": {k: len(v) for k, v in data.numbers.items()},
            "seconds": data_s,
            "src_vocab": len(data.src_vocab),
            "tgt_vocab": len(data.tgt_vocab),
        },
        "beam_size": args.beam,
        "alpha": args.alpha,
        "threads": args.threads,
        "params": sum(p.numel() for p in model.parameters()),
        "runs": runs,
        "load_average_before": list(load_before),
        "load_average_after": list(load_after),
        "machine": platform.processor() or platform.machine(),
        "cpus": os.cpu_count(),
    }
    write_json(result, args.out)
    return result


if __name__ == "__main__":
    main()
