"""Benchmark: Chapter 11's vision transformer on the 8x8 digits, its baselines, and data hunger.

    python benchmarks/vision_bench.py                    # everything (about 10 min on 2 idle cores)
    python benchmarks/vision_bench.py --sizes 50,200 --seeds 0 --out /tmp/v.json   # a quick run

1. The chapter's ViT (``course_lib.labs.vision.VIT_SETTINGS``) trained on the full training
   split, with its training time on ``--threads`` threads (the goal: >= 97 % test accuracy in
   <= 60 s on 2 cores), against logistic regression on the raw pixels and the small CNN, all on
   the same fixed split.
2. Data hunger: the test accuracy of the ViT, the CNN and logistic regression trained on the
   first n images (class-balanced) for each n in ``--sizes`` and each seed in ``--seeds``.

Prints two tables and writes ``course_lib/results/vision_bench.json`` (Chapter 11 glues and
plots from it).
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time
from pathlib import Path

import torch
from _common import results_file, write_json  # run from benchmarks/

from course_lib.labs.vision import (
    VIT_SETTINGS,
    SmallCNN,
    data_hunger,
    digits_split,
    logistic_baseline,
    make_vit,
    train_classifier,
)

RESULTS = results_file("vision_bench.json")


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--sizes", default="30,60,120,250,500,1000,1437")
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--out", type=Path, default=RESULTS)
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    load_before = os.getloadavg()[0]
    data = digits_split()
    s = VIT_SETTINGS

    vit = make_vit(0)
    r_vit = train_classifier(
        vit,
        data,
        epochs=s["epochs"],
        lr=s["lr"],
        batch_size=s["batch_size"],
        weight_decay=s["weight_decay"],
        seed=0,
    )
    torch.manual_seed(0)
    r_cnn = train_classifier(
        SmallCNN(),
        data,
        epochs=s["epochs"],
        lr=3e-3,
        batch_size=s["batch_size"],
        weight_decay=s["weight_decay"],
        seed=0,
    )
    lr_acc, lr_s = logistic_baseline(data)
    main_rows = {
        "vit": {**r_vit.to_dict(), "params": sum(p.numel() for p in vit.parameters())},
        "cnn": {**r_cnn.to_dict(), "params": sum(p.numel() for p in SmallCNN().parameters())},
        "logistic": {"accuracy": lr_acc, "seconds": lr_s, "params": 65 * 10},
    }
    print(f"{'model':10} {'params':>8} {'test acc':>9} {'train s':>8}")
    for name, r in main_rows.items():
        print(f"{name:10} {r['params']:8,} {r['accuracy']:9.3f} {r['seconds']:8.1f}")

    sizes = [int(n) for n in args.sizes.split(",")]
    seeds = [int(n) for n in args.seeds.split(",")]
    t0 = time.perf_counter()
    rows = data_hunger(sizes, seeds, data, progress=True)
    hunger = {}
    for name in ("vit", "cnn", "logistic"):
        hunger[name] = {
            str(n): statistics.mean(
                r["accuracy"] for r in rows if r["model"] == name and r["n_train"] == n
            )
            for n in sizes
        }
    print(
        f"\nmean test accuracy over seeds {seeds}\n{'n_train':>8} "
        + " ".join(f"{m:>9}" for m in hunger)
    )
    for n in sizes:
        print(f"{n:8} " + " ".join(f"{hunger[m][str(n)]:9.3f}" for m in hunger))
    result = {
        "settings": VIT_SETTINGS,
        "threads": args.threads,
        "n_train": len(data.y_train),
        "n_test": len(data.y_test),
        "main": main_rows,
        "sizes": sizes,
        "seeds": seeds,
        "hunger_mean": hunger,
        "hunger_rows": rows,
        "hunger_seconds": time.perf_counter() - t0,
        "load_average_before": load_before,
        "machine": {
            "processor": platform.processor() or platform.machine(),
            "torch": torch.__version__,
        },
    }
    write_json(result, args.out)
    return result


if __name__ == "__main__":
    main()
