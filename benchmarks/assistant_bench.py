"""Benchmark: Chapter 13's runs, from the pretrained model to an instruction follower.

    python benchmarks/assistant_bench.py          # everything (about 15 min on one core)
    python benchmarks/assistant_bench.py --sft-steps 20 --dpo-steps 5 --n-test 20 --n-mc 40 \\
        --betas 0.1 --out /tmp/assistant.json                 # a quick run

Starts from the course's pretrained model (``course_lib.checkpoint.load_pretrained``) and
measures, on the held-out plays (``course_lib.labs.instruct.HELD_OUT_PLAYS``):

- task accuracy (exact match, per instruction) of the base model asked in plain text, of SFT
  with the prompt's loss masked, and of the same SFT run with the prompt not masked;
- DPO from the masked SFT model at several β: preference accuracy (implicit reward), reward
  margin, log-ratios of chosen and rejected answers, the drift from the reference (mean
  per-token KL on the answers) and the task accuracy after DPO;
- the multiple-choice test "which is the real next line?" (four choices) of every model,
  with Wilson and Clopper–Pearson 95 % intervals.

Writes ``course_lib/results/assistant.json`` (Chapter 13 glues from it).
"""

from __future__ import annotations

import argparse
import copy
import os
import time
from pathlib import Path

import torch
from _common import results_file, write_json  # run from benchmarks/

from course_lib.checkpoint import PRETRAINED, load_pretrained, load_pretrained_info
from course_lib.labs.dpo import dpo_train, preference_metrics, preference_pairs
from course_lib.labs.evaluate import (
    clopper_pearson_interval,
    multiple_choice_accuracy,
    next_line_items,
    wilson_interval,
)
from course_lib.labs.instruct import (
    SPECIALS,
    extend_vocab,
    instruction_set,
    play_lines,
    sft,
    task_accuracy,
    with_specials,
)

RESULTS = results_file("assistant.json")
#: The recipe the chapter's live runs share (fewer steps there).
SETTINGS = {
    "n_train_per_task": 600,
    "sft_lr": 3e-3,
    "sft_batch": 16,
    "dpo_lr": 5e-4,
    "dpo_batch": 16,
    "train_seed": 0,
    "test_seed": 1,
    "mc_seed": 2,
}


def mc_row(model, tok, items) -> dict:
    k, n = multiple_choice_accuracy(model, tok, items)
    return {
        "right": k,
        "n": n,
        "accuracy": k / n,
        "wilson": list(wilson_interval(k, n)),
        "clopper_pearson": list(clopper_pearson_interval(k, n)),
    }


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--sft-steps", type=int, default=250)
    ap.add_argument("--dpo-steps", type=int, default=40)
    ap.add_argument("--betas", default="0.01,0.1,0.5,2.5")
    ap.add_argument("--n-test", type=int, default=60, help="held-out examples per task")
    ap.add_argument("--n-mc", type=int, default=300, help="multiple-choice items")
    ap.add_argument("--out", type=Path, default=RESULTS)
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    load_before = os.getloadavg()[0]
    t_start = time.perf_counter()
    s = SETTINGS
    base, tok = load_pretrained()
    itok = with_specials(tok)
    train = instruction_set(False, s["n_train_per_task"], s["train_seed"])
    test = instruction_set(True, args.n_test, s["test_seed"])
    items = next_line_items(play_lines(held_out=True), args.n_mc, seed=s["mc_seed"])
    out = {
        "settings": {**s, "sft_steps": args.sft_steps, "dpo_steps": args.dpo_steps},
        "n_train": len(train),
        "n_test": len(test),
        "threads": args.threads,
        "pretrained": {"val_loss": load_pretrained_info()["val_loss"]},
        "long_checkpoint": "long" in PRETRAINED,
        "tasks": {},
        "mc": {},
    }
    out["tasks"]["base_prompted"] = task_accuracy(base, tok, test, plain=True)
    out["mc"]["base"] = mc_row(base, tok, items)
    print("base", out["tasks"]["base_prompted"], out["mc"]["base"]["accuracy"], flush=True)

    models, curves = {}, {}
    for name, mask in (("sft_masked", True), ("sft_unmasked", False)):
        torch.manual_seed(0)
        model = extend_vocab(base, len(SPECIALS))
        t = time.perf_counter()
        curves[name] = sft(
            model,
            itok,
            train,
            args.sft_steps,
            mask_prompt=mask,
            lr=s["sft_lr"],
            batch_size=s["sft_batch"],
            seed=s["train_seed"],
        )
        secs = time.perf_counter() - t
        models[name] = model
        out["tasks"][name] = task_accuracy(model, itok, test)
        out["mc"][name] = mc_row(model, itok, items)
        print(name, f"{secs:.0f} s", out["tasks"][name], out["mc"][name]["accuracy"], flush=True)
    out["sft_losses"] = {k: [round(x, 4) for x in v] for k, v in curves.items()}

    train_pairs = preference_pairs(train, seed=s["train_seed"])
    test_pairs = preference_pairs(test, seed=s["test_seed"])
    sft_model = models["sft_masked"]
    out["dpo"] = []
    for beta in [float(b) for b in args.betas.split(",")]:
        policy = copy.deepcopy(sft_model)
        torch.manual_seed(0)
        t = time.perf_counter()
        ref, losses = dpo_train(
            policy,
            itok,
            train_pairs,
            beta,
            args.dpo_steps,
            lr=s["dpo_lr"],
            batch_size=s["dpo_batch"],
            seed=s["train_seed"],
        )
        secs = time.perf_counter() - t
        row = {
            "beta": beta,
            **preference_metrics(policy, ref, itok, test_pairs, beta),
            "train_loss_first": losses[0],
            "train_loss_last": losses[-1],
            "tasks": task_accuracy(policy, itok, test),
            "mc": mc_row(policy, itok, items),
            "seconds": secs,
        }
        out["dpo"].append(row)
        print(
            f"beta {beta}: pref acc {row['accuracy']:.3f} margin {row['margin']:.3f} "
            f"kl {row['kl']:.4f} chosen {row['chosen_logratio']:.3f} rejected "
            f"{row['rejected_logratio']:.3f} task {row['tasks']['all']:.3f} "
            f"mc {row['mc']['accuracy']:.3f} ({secs:.0f} s)",
            flush=True,
        )
    out["seconds"] = time.perf_counter() - t_start
    out["load_average_before"] = load_before
    write_json(out, args.out)
    return out


if __name__ == "__main__":
    main()
