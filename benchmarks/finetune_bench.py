"""Benchmark: Chapter 12's transfer-learning table on the "which play?" task.

    python benchmarks/finetune_bench.py                 # everything (about 10 min on 2 idle cores)
    python benchmarks/finetune_bench.py --steps 20 --seeds 0 --out /tmp/ft.json   # a quick run

Starts from the course's pretrained model (``course_lib.checkpoint.load_pretrained``; or
``--checkpoint PATH``, a checkpoint written by ``python -m course_lib.train``) and trains, with
the same data, steps and schedule (``course_lib.labs.finetune.FT_SETTINGS``):

- ``scratch``: the same architecture from a random initialisation (the control);
- ``probe``: the pretrained body frozen, a linear head trained (a linear probe);
- ``full``: every weight fine-tuned;
- ``lora``: the body frozen, LoRA adapters of rank 1, 4 and 16 on the attention projections.

plus logistic regression on character n-grams of the same passages. Prints one table
(trainable parameters, test accuracy mean over seeds, seconds) and writes
``course_lib/results/finetune_bench.json`` (Chapter 12 glues from it).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
from pathlib import Path

import torch
from _common import results_file, write_json  # run from benchmarks/

from course_lib.labs.finetune import (
    FT_SETTINGS,
    TASK_PLAYS,
    finetune,
    ngram_baseline,
    play_data,
    zero_shot,
)

RESULTS = results_file("finetune_bench.json")
RUNS = [("scratch", None), ("probe", None), ("full", None), ("lora", 1), ("lora", 4), ("lora", 16)]


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--steps", type=int, default=FT_SETTINGS["steps"])
    ap.add_argument("--seeds", default="0,1")
    ap.add_argument(
        "--checkpoint",
        type=Path,
        default=None,
        help="a course_lib.train checkpoint instead of the shipped one",
    )
    ap.add_argument("--out", type=Path, default=RESULTS)
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    load_before = os.getloadavg()[0]
    if args.checkpoint is None:
        from course_lib.checkpoint import load_pretrained, load_pretrained_info

        pretrained, tok = load_pretrained()
        info = load_pretrained_info()
        source = {
            "path": "course_lib/checkpoints/chapter.pt",
            "val_loss": info["val_loss"],
            "steps": info.get("config", {}).get("max_steps"),
        }
    else:
        from course_lib.train import load_model

        pretrained, tok = load_model(args.checkpoint)
        results = args.checkpoint.parent / "results.json"  # written next to ckpt.pt by the trainer
        meta = json.loads(results.read_text()) if results.exists() else {}
        source = {
            "path": str(args.checkpoint),
            "val_loss": meta.get("final_val_loss"),
            "steps": meta.get("steps"),
        }
    seeds = [int(s) for s in args.seeds.split(",")]
    rows = []
    for seed in seeds:
        data = play_data(tok, pretrained.cfg.block_size, seed=seed)
        rows.append(
            {
                "mode": "ngram",
                "rank": None,
                "seed": seed,
                "accuracy": ngram_baseline(data),
                "trainable": None,
                "seconds": None,
            }
        )
        zs = zero_shot(pretrained, data)
        rows.append(
            {"mode": "zero_shot", "rank": None, "seed": seed, "trainable": 0, "seconds": None, **zs}
        )
        print(f"seed {seed} zero-shot   : test {zs['accuracy']:.3f}", flush=True)
        for mode, rank in RUNS:
            _, r = finetune(pretrained, data, mode, rank=rank or 4, steps=args.steps, seed=seed)
            rows.append({**r.to_dict(), "seed": seed, "losses": [round(x, 4) for x in r.losses]})
            print(
                f"seed {seed} {mode:8} {rank or '':>3}: test {r.accuracy:.3f} train "
                f"{r.train_accuracy:.3f} "
                f"({r.trainable:,} trainable, {r.seconds:.0f} s)",
                flush=True,
            )
    table = []
    for mode, rank in [("ngram", None), ("zero_shot", None)] + RUNS:
        sel = [r for r in rows if r["mode"] == mode and r["rank"] == rank]
        accs = [r["accuracy"] for r in sel]
        table.append(
            {
                "mode": mode,
                "rank": rank,
                "accuracy_mean": statistics.mean(accs),
                "accuracy_min": min(accs),
                "accuracy_max": max(accs),
                "train_accuracy_mean": statistics.mean(r["train_accuracy"] for r in sel)
                if "train_accuracy" in sel[0]
                else None,
                "trainable": sel[0]["trainable"],
                "total": sel[0].get("total"),
                "seconds_mean": statistics.mean(r["seconds"] for r in sel)
                if sel[0]["seconds"] is not None
                else None,
            }
        )
        if mode == "zero_shot":
            table[-1].update(
                {
                    k: statistics.mean(r[k] for r in sel)
                    for k in ("loss_as_written", "loss_shuffled")
                }
            )
    print(f"\n{'run':12} {'trainable':>10} {'test acc':>9} {'(min-max)':>13} {'seconds':>8}")
    for t in table:
        name = t["mode"] + (f" r={t['rank']}" if t["rank"] else "")
        tr = f"{t['trainable']:,}" if t["trainable"] is not None else "-"
        sec = f"{t['seconds_mean']:.0f}" if t["seconds_mean"] is not None else "-"
        print(
            f"{name:12} {tr:>10} {t['accuracy_mean']:9.3f} "
            f"{t['accuracy_min']:6.3f}-{t['accuracy_max']:.3f} {sec:>8}"
        )
    result = {
        "settings": {**FT_SETTINGS, "steps": args.steps},
        "plays": list(TASK_PLAYS),
        "seeds": seeds,
        "threads": args.threads,
        "pretrained": source,
        "table": table,
        "rows": rows,
        "load_average_before": load_before,
    }
    write_json(result, args.out)
    return result


if __name__ == "__main__":
    main()
