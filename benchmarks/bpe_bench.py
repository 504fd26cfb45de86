"""Benchmark: our byte-level BPE against Hugging Face ``tokenizers``, and characters against BPE
tokens for training the chapter's model.

    python benchmarks/bpe_bench.py               # everything (about 15 min, idle 2-core machine)
    python benchmarks/bpe_bench.py --scale 0.05  # a quick smoke run (writes nothing unless --out)

1. Learning speed: 1,000 merges on the whole corpus, ours (``course_lib.bpe``, pure Python)
   and the library's (Rust), best of ``--repeats``; whether they learn the same merges.
2. Token counts: both tokenizers trained on the training text at several vocabulary sizes,
   counted on the validation text (characters per token, and the difference in %).
3. Training: the chapter's model (``course_lib/configs/chapter.json``) trained on characters
   (the chapter's step count) and on BPE tokens at several vocabulary sizes, each BPE run for
   the same summed step time as the character run. The runs take one step each in turn, so a
   change in a shared machine's load affects them alike (``train_interleaved``). Each model
   is scored in bits per character on the whole validation text
   (``course_lib.bpe.bits_per_character``).

Prints tables and writes ``course_lib/results/bpe_vs_char.json`` (Chapter 9 glues from it)
unless ``--scale`` is not 1 or ``--out`` says otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from dataclasses import asdict, replace
from importlib.resources import files
from pathlib import Path

import torch
from _common import results_file, write_json  # run from benchmarks/

from course_lib.bpe import BPETokenizer, bits_per_character, gpt2_pattern, train_library_bpe
from course_lib.corpus import load_corpus
from course_lib.data import CharTokenizer, encode_splits, split_text
from course_lib.model import flops_per_token
from course_lib.train import Trainer, load_config

RESULTS = results_file("bpe_vs_char.json")
COUNT_VOCABS = (512, 1024, 4096)
TRAIN_VOCABS = (512, 1024, 4096)


def library_merges(tok) -> list[tuple[str, str]]:
    merges = json.loads(tok.to_str())["model"]["merges"]
    return [tuple(m) if isinstance(m, list) else tuple(m.split(" ")) for m in merges]


def time_merges(text: str, n_merges: int, repeats: int) -> dict:
    """Best-of-``repeats`` seconds to learn ``n_merges`` merges, ours and the library's."""
    gpt2_pattern()  # built once per process (about a second), not part of learning
    ours, lib = [], []
    for _ in range(repeats):
        t = time.perf_counter()
        tok = BPETokenizer.train(text, 256 + 1 + n_merges)
        ours.append(time.perf_counter() - t)
        t = time.perf_counter()
        hf = train_library_bpe(text, 256 + 1 + n_merges)
        lib.append(time.perf_counter() - t)
    mine = [(tok.token_str(a), tok.token_str(b)) for (a, b), _ in tok.merges]
    theirs = library_merges(hf)
    agree = next(
        (i for i, (x, y) in enumerate(zip(mine, theirs)) if x != y), min(len(mine), len(theirs))
    )
    return {
        "corpus_chars": len(text),
        "n_merges": n_merges,
        "repeats": repeats,
        "ours_seconds": min(ours),
        "library_seconds": min(lib),
        "ours_all_seconds": ours,
        "library_all_seconds": lib,
        "same_merges": mine == theirs,
        "merges_agreeing_from_start": agree,
        "first_merges": [list(m) for m in mine[:12]],
    }


def token_counts(train_text: str, val_text: str, vocabs) -> dict:
    out = {}
    for v in vocabs:
        ours = BPETokenizer.train(train_text, v)
        lib = train_library_bpe(train_text, v)
        n_ours, n_lib = len(ours.encode(val_text)), len(lib.encode(val_text).ids)
        out[str(v)] = {
            "ours": n_ours,
            "library": n_lib,
            "diff_pct": 100 * (n_ours - n_lib) / n_lib,
            "chars_per_token": len(val_text) / n_ours,
        }
    return out


def train_interleaved(base, data: dict, scale: float = 1.0) -> dict:
    """Train one model per tokenizer, one step of each in turn, for the same training time.

    ``data``: {name: (tokenizer, Splits)}; "char" is the reference run, with the chapter's
    step count. Every other run trains until its own summed step time reaches the character
    run's; its step count is projected from its speed so far (``cfg.max_steps``, which sets
    the cosine schedule, is updated before every step and converges long before the end).
    Running the models in turn exposes them to the same load on a shared machine.
    """
    char_steps = max(2, round(base.max_steps * scale))
    trainers, elapsed = {}, {}
    for name, (tok, splits) in data.items():
        cfg = replace(
            base, max_steps=char_steps, warmup_steps=min(base.warmup_steps, char_steps), name=name
        )
        trainers[name] = Trainer(cfg, splits.train, splits.val, tok.vocab_size)
        trainers[name].model.train()
        elapsed[name] = 0.0
    char, char_total, done = trainers["char"], None, set()
    while len(done) < len(trainers):
        for name, tr in trainers.items():
            if name in done:
                continue
            if name != "char":
                # the character run's training time: measured once it has finished, projected before
                target = (
                    char_total
                    if char_total is not None
                    else elapsed["char"] / max(char.step, 1) * char_steps
                )
                if tr.step >= tr.cfg.warmup_steps and elapsed[name] >= target:
                    done.add(name)
                    continue
                if tr.step > 0 and elapsed[name] > 0:
                    projected = round(tr.step * target / elapsed[name])
                    tr.cfg.max_steps = max(tr.step + 1, tr.cfg.warmup_steps + 1, projected)
            t = time.perf_counter()
            tr.train_step()
            elapsed[name] += time.perf_counter() - t
            if name == "char" and tr.step >= char_steps:
                char_total = elapsed["char"]
                done.add(name)
    results = {}
    for name, tr in trainers.items():
        tok, splits = data[name]
        tr.cfg.max_steps = tr.step
        model = tr.module.eval()
        losses = tr.estimate_loss()
        t1 = time.perf_counter()
        bpc = bits_per_character(model, splits.val, VAL_CHARS[0], tr.cfg.model.block_size)
        eval_s = time.perf_counter() - t1
        gen = torch.Generator().manual_seed(0)
        start = splits.val[:8][None]  # (1, 8): the first tokens of the validation text
        sample = model.generate(start, 120, temperature=0.8, generator=gen)[0]
        results[name] = {
            "vocab_size": tok.vocab_size,
            "params": model.num_params(),
            "steps": tr.step,
            "train_seconds": elapsed[name],
            "eval_seconds": eval_s,
            "final_val_loss_per_token": losses["val"],
            "final_train_loss_per_token": losses["train"],
            "val_tokens": len(splits.val),
            "val_chars_per_token": VAL_CHARS[0] / len(splits.val),
            "bits_per_char": bpc,
            "flops_per_token": flops_per_token(model.cfg),
            "tokens_seen": tr.step * tr.cfg.tokens_per_step,
            "config": asdict(tr.cfg),
            "sample": tok.decode(sample),
        }
    return results


VAL_CHARS = [0]


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument(
        "--scale", type=float, default=1.0, help="fraction of the training steps (smoke runs)"
    )
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--vocabs", default=",".join(map(str, TRAIN_VOCABS)))
    p.add_argument("--out", default=None)
    args = p.parse_args(argv)
    threads = int(os.environ.get("BENCH_THREADS", "2"))
    torch.set_num_threads(threads)
    load_before = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    text = load_corpus()
    train_text, val_text = split_text(text, 0.1)

    print("1. learning 1,000 merges on the whole corpus")
    timing = time_merges(text, 1000, args.repeats)
    print(
        f"   ours {timing['ours_seconds']:.2f} s, tokenizers {timing['library_seconds']:.2f} s "
        f"(best of {args.repeats}); same merges: {timing['same_merges']}"
    )

    print("2. validation tokens, both trained on the training text")
    counts = token_counts(train_text, val_text, COUNT_VOCABS)
    print(f"   {'vocab':>6} {'ours':>9} {'library':>9} {'diff %':>7} {'chars/token':>12}")
    for v, c in counts.items():
        print(
            f"   {v:>6} {c['ours']:>9,} {c['library']:>9,} {c['diff_pct']:>7.2f} "
            f"{c['chars_per_token']:>12.2f}"
        )

    print("3. the chapter's model on characters and on BPE tokens, same training time")
    base = load_config(files("course_lib").joinpath("configs", "chapter.json"))
    char_tok = CharTokenizer.from_text(text)
    vocabs = [int(v) for v in args.vocabs.split(",") if v]
    data = {"char": (char_tok, encode_splits(text, char_tok))}
    for v in vocabs:
        bpe = BPETokenizer.train(train_text, v)  # learnt on the training text only
        data[f"bpe_{v}"] = (bpe, encode_splits(text, bpe))
    VAL_CHARS[0] = len(val_text)
    runs = train_interleaved(base, data, args.scale)
    for name, r in runs.items():
        print(
            f"   {name:<9} V={r['vocab_size']:>5} {r['params']:>8,} params {r['steps']:>5} steps "
            f"{r['train_seconds']:>6.1f} s  loss/token {r['final_val_loss_per_token']:.3f}  "
            f"chars/token {r['val_chars_per_token']:.2f}  bpc {r['bits_per_char']:.3f}"
        )

    result = {
        "machine": {
            "platform": platform.platform(),
            "processor": platform.processor(),
            "threads": threads,
            "torch": torch.__version__,
            "load_average_before": load_before,
        },
        "scale": args.scale,
        "merge_learning": timing,
        "token_counts": counts,
        "runs": runs,
    }
    out = Path(args.out) if args.out else (RESULTS if args.scale == 1.0 else None)
    if out is not None:
        write_json(result, out)
    return result


if __name__ == "__main__":
    main()
