"""Benchmark: Chapter 8's broken transformers, trained long enough to show their symptoms.

    python benchmarks/debugging_bench.py                  # every bug (a few minutes, 2 cores)
    python benchmarks/debugging_bench.py --steps 20 --out /tmp/dbg.json   # a quick run

Trains the correct model and each bug of ``course_lib.labs.debugging.BUGS`` with the same data,
seed and steps (``DEBUG_CONFIG``, ``DEBUG_TRAIN``), and writes, per bug, the reported training
loss (every step), the honest loss (the token after each validation window) and the reading of
every diagnostic on the trained model, to ``course_lib/results/debugging.json`` (Chapter 8
glues from it; the chapter runs a shorter live version).
"""

from __future__ import annotations

import argparse
import math
import time

import torch
from _common import results_file, write_json  # run from benchmarks/

from course_lib.data import shakespeare_splits
from course_lib.labs.debugging import (
    BUGS,
    DEBUG_CONFIG,
    DEBUG_TRAIN,
    causality_leak,
    residual_similarity,
    train_variant,
    tying_check,
)


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=DEBUG_TRAIN["steps"])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--out", default=str(results_file("debugging.json")))
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    splits = shakespeare_splits()
    V = splits.tokenizer.vocab_size
    runs = {}
    for bug in BUGS:
        t0 = time.perf_counter()
        r = train_variant(bug, splits.train, splits.val, V, steps=args.steps, seed=args.seed)
        model = r["model"]
        runs[bug] = {
            "losses": [round(x, 4) if math.isfinite(x) else None for x in r["losses"]],
            "honest": round(r["honest"], 4),
            "leak": causality_leak(model),
            "residual_similarity": round(residual_similarity(model), 4),
            "tying": tying_check(model),
            "seconds": round(time.perf_counter() - t0, 1),
        }
        last = [x for x in r["losses"][-20:] if math.isfinite(x)]
        print(
            f"{bug:12} reported {sum(last) / max(len(last), 1):.3f}  honest {r['honest']:.3f}"
            f"  ({runs[bug]['seconds']} s)",
            flush=True,
        )
    out = {
        "config": DEBUG_CONFIG,
        "train": {**DEBUG_TRAIN, "steps": args.steps},
        "seed": args.seed,
        "vocab_size": V,
        "runs": runs,
    }
    write_json(out, args.out)
    return out


if __name__ == "__main__":
    main()
