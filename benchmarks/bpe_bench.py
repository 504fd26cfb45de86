"""Benchmark: our byte-level BPE against Hugging Face ``tokenizers``, and characters against BPE
tokens for training the chapter's model.

    python benchmarks/bpe_bench.py                  # everything (about 15 min on an idle 2-core machine)
    python benchmarks/bpe_bench.py --scale 0.05     # a quick smoke run (writes nothing unless --out)

1. Learning speed: 1,000 merges on the whole corpus, ours (``course_lib.bpe``, pure Python)
   and the library's (Rust), best of ``--repeats``; whether they learn the same merges.
2. Token counts: both tokenizers trained on the training text at several vocabulary sizes,
   counted on the validation text (characters per token, and the difference in %).
3. Training: the chapter's model (``course_lib/configs/chapter.json``) trained on characters
   and on BPE tokens at several vocabulary sizes for the same training time. The steps of a
   BPE run are the character run's steps times the ratio of their step times, measured
   interleaved (so a change in the machine's load affects both alike). Each model is scored
   in bits per character on the whole validation text (``course_lib.bpe.bits_per_character``).

Prints tables and writes ``course_lib/results/bpe_vs_char.json`` (Chapter 9 glues from it)
unless ``--scale`` is not 1 or ``--out`` says otherwise.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from dataclasses import asdict, replace
from importlib.resources import files
from pathlib import Path

import torch

from course_lib.bpe import BPETokenizer, bits_per_character, gpt2_pattern, learn_merges, train_library_bpe
from course_lib.corpus import load_corpus
from course_lib.data import CharTokenizer, encode_splits, split_text
from course_lib.model import MiniGPT, flops_per_token
from course_lib.train import Trainer, load_config, make_optimizer

RESULTS = Path(__file__).resolve().parents[1] / "course_lib" / "results" / "bpe_vs_char.json"
COUNT_VOCABS = (512, 1024, 4096)
TRAIN_VOCABS = (512, 1024, 2048, 4096)


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
    agree = next((i for i, (x, y) in enumerate(zip(mine, theirs)) if x != y), min(len(mine), len(theirs)))
    return {"corpus_chars": len(text), "n_merges": n_merges, "repeats": repeats,
            "ours_seconds": min(ours), "library_seconds": min(lib),
            "ours_all_seconds": ours, "library_all_seconds": lib,
            "same_merges": mine == theirs, "merges_agreeing_from_start": agree,
            "first_merges": [list(m) for m in mine[:12]]}


def token_counts(train_text: str, val_text: str, vocabs) -> dict:
    out = {}
    for v in vocabs:
        ours = BPETokenizer.train(train_text, v)
        lib = train_library_bpe(train_text, v)
        n_ours, n_lib = len(ours.encode(val_text)), len(lib.encode(val_text).ids)
        out[str(v)] = {"ours": n_ours, "library": n_lib, "diff_pct": 100 * (n_ours - n_lib) / n_lib,
                       "chars_per_token": len(val_text) / n_ours}
    return out


def step_seconds(cfgs: dict, rounds: int = 6, steps: int = 4) -> dict:
    """Median seconds per training step of each model config, measured round-robin."""
    setups = {}
    for name, mcfg in cfgs.items():
        torch.manual_seed(0)
        model = MiniGPT(mcfg)
        opt = make_optimizer(model, 1e-3, 0.1)
        g = torch.Generator().manual_seed(0)
        x = torch.randint(mcfg.vocab_size, (BATCH, mcfg.block_size), generator=g)  # (B, T)
        setups[name] = (model, opt, x)
    times = {name: [] for name in cfgs}
    for r in range(rounds + 1):
        for name, (model, opt, x) in setups.items():
            t = time.perf_counter()
            for _ in range(steps):
                _, loss = model(x, x)
                opt.zero_grad(set_to_none=True)
                loss.backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0, foreach=True)
                opt.step()
            if r > 0:  # the first round warms up
                times[name].append((time.perf_counter() - t) / steps)
    return {name: statistics.median(t) for name, t in times.items()}


BATCH = 24


def train_one(cfg, tokens_train, tokens_val, vocab_size: int, val_chars: int, decode) -> dict:
    trainer = Trainer(cfg, tokens_train, tokens_val, vocab_size)
    t0 = time.perf_counter()
    history = trainer.train(progress=False)
    wall = time.perf_counter() - t0
    model = trainer.module.eval()
    t1 = time.perf_counter()
    bpc = bits_per_character(model, tokens_val, val_chars, cfg.model.block_size)
    eval_s = time.perf_counter() - t1
    gen = torch.Generator().manual_seed(0)
    start = tokens_val[:8][None]  # (1, 8): the first tokens of the validation text
    sample = model.generate(start, 120, temperature=0.8, generator=gen)[0]
    return {"vocab_size": vocab_size, "params": model.num_params(), "steps": trainer.step,
            "train_seconds": history.train_seconds, "wall_seconds": wall, "eval_seconds": eval_s,
            "final_val_loss_per_token": history.val[-1], "final_train_loss_per_token": history.train[-1],
            "val_tokens": len(tokens_val), "val_chars_per_token": val_chars / len(tokens_val),
            "bits_per_char": bpc, "flops_per_token": flops_per_token(model.cfg),
            "history": history.as_dict(), "sample": decode(sample)}


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--scale", type=float, default=1.0, help="fraction of the training steps (smoke runs)")
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
    print(f"   ours {timing['ours_seconds']:.2f} s, tokenizers {timing['library_seconds']:.2f} s "
          f"(best of {args.repeats}); same merges: {timing['same_merges']}")

    print("2. validation tokens, both trained on the training text")
    counts = token_counts(train_text, val_text, COUNT_VOCABS)
    print(f"   {'vocab':>6} {'ours':>9} {'library':>9} {'diff %':>7} {'chars/token':>12}")
    for v, c in counts.items():
        print(f"   {v:>6} {c['ours']:>9,} {c['library']:>9,} {c['diff_pct']:>7.2f} {c['chars_per_token']:>12.2f}")

    print("3. the chapter's model on characters and on BPE tokens, same training time")
    base = load_config(files("course_lib").joinpath("configs", "chapter.json"))
    char_tok = CharTokenizer.from_text(text)
    vocabs = [int(v) for v in args.vocabs.split(",") if v]
    data = {"char": (char_tok, encode_splits(text, char_tok))}
    for v in vocabs:
        bpe = BPETokenizer.train(train_text, v)  # learnt on the training text only
        data[f"bpe_{v}"] = (bpe, encode_splits(text, bpe))
    mcfgs = {name: base.model.with_vocab(tok.vocab_size) for name, (tok, _) in data.items()}
    step_s = step_seconds(mcfgs)
    char_steps = max(2, round(base.max_steps * args.scale))
    runs = {}
    for name, (tok, splits) in data.items():
        steps = max(2, round(char_steps * step_s["char"] / step_s[name]))
        cfg = replace(base, max_steps=steps, warmup_steps=min(base.warmup_steps, steps),
                      eval_interval=max(1, steps // 10), name=name)
        r = train_one(cfg, splits.train, splits.val, tok.vocab_size, len(val_text), tok.decode)
        r["step_seconds_probe"] = step_s[name]
        r["config"] = asdict(cfg)
        runs[name] = r
        print(f"   {name:<9} V={r['vocab_size']:>5} {r['params']:>8,} params {r['steps']:>5} steps "
              f"{r['train_seconds']:>6.1f} s  loss/token {r['final_val_loss_per_token']:.3f}  "
              f"chars/token {r['val_chars_per_token']:.2f}  bpc {r['bits_per_char']:.3f}")

    result = {
        "machine": {"platform": platform.platform(), "processor": platform.processor(), "threads": threads,
                    "torch": torch.__version__, "load_average_before": load_before},
        "scale": args.scale,
        "merge_learning": timing,
        "token_counts": counts,
        "runs": runs,
    }
    out = Path(args.out) if args.out else (RESULTS if args.scale == 1.0 else None)
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n")
        print(f"wrote {out}")
    return result


if __name__ == "__main__":
    main()
