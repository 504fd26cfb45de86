"""Benchmark: Chapter 15's ablation and speedrun, on 2 threads.

    python benchmarks/speedrun.py                 # both parts (about 11 min on 2 idle cores)
    python benchmarks/speedrun.py --part race     # only the race
    python benchmarks/speedrun.py --part ablation --seeds 0,1,2 --ref-steps 200
    python benchmarks/speedrun.py --part recipe   # the speedrun less one change at a time

**Ablation** (``--part ablation``): on the chapter configuration (``configs/chapter.json``),
each modern change alone, then the helpful ones together, for several seeds, at equal wall
time: the seconds per step of every variant are measured side by side, and each variant gets
the steps it takes in the time the chapter recipe takes for ``--ref-steps`` steps. Reports the
validation loss at the end (mean and spread over seeds) and the time and steps each variant
takes to reach the chapter recipe's final loss.

**Race** (``--part race``): the nanoGPT CPU recipe (``configs/baseline.json``), the chapter's
recipe, and the speedrun recipe (``SPEEDRUN``) over two lengths at each Muon peak rate of
``MUON_RATES`` (the rate whose longer run ends lowest is the speedrun; the sweep is saved as
"tune"), trained interleaved in one process (10 steps each in turn; only a run's own steps
count towards its time) or, with ``--jobs``, each in its own process at once (CPU seconds then
count each one's work), evaluated every ``--eval-every`` steps on the same validation
windows. Targets: the baseline's and the chapter's final validation losses, as measured in
this run. Reports time, steps and tokens to each target, the final
losses, and tokens per second.

**The recipe less one change** (``--part recipe``, after the race): the speedrun recipe at the
rate and length the race chose, whole and without each of its changes in turn, for each of
``--seeds`` (in their own processes, on the race's evaluation windows; Welch's test of each
difference): what each change is worth
inside the recipe, where the changes act together (QK-norm bounds the attention logits that
Muon's larger steps would grow), which the ablation's one-change-at-a-time runs cannot show.

Interleaving makes the comparison fair on a shared machine: load that comes and goes hits
every recipe alike, so time ratios and steps to target stay meaningful when the absolute
seconds do not. Writes ``course_lib/results/speedrun.json`` (Chapter 15 glues from it; the
file is rewritten as the runs go, so an interrupted run leaves what it measured).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import platform
import statistics
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import replace
from pathlib import Path

import torch
from _common import results_file, write_json  # run from benchmarks/
from scipy.stats import ttest_ind, ttest_rel

from course_lib.config import load_config
from course_lib.data import corpus_tokens
from course_lib.labs.speedrun import (
    Recipe,
    Run,
    race,
    seconds_per_step,
    steps_for_budget,
    time_to_target,
)

RESULTS = results_file("speedrun.json")
CONFIGS = Path(__file__).resolve().parents[1] / "course_lib" / "configs"

# the modern changes, one at a time (ModernConfig fields, or the optimiser and schedule)
CHANGES = {
    "rmsnorm": {"modern": {"norm": "rmsnorm"}},
    "swiglu": {"modern": {"mlp": "swiglu"}},
    "qk_norm": {"modern": {"qk_norm": True}},
    "untied_head": {"modern": {"tie_head": False}},
    "moe": {"modern": {"mlp": "moe", "n_expert": 4, "top_k": 1}},
    "muon": {"optimizer": "muon"},
    "wsd": {"schedule": "wsd"},
}
# "all": every change of CHANGES at once except the mixture of experts, whose experts would
# replace the same feed-forward network that SwiGLU replaces
ALL_CHANGES = [k for k in CHANGES if k != "moe"]
ALL: dict = {"modern": {}}
for _k in ALL_CHANGES:
    for _field, _value in CHANGES[_k].items():
        if _field == "modern":
            ALL["modern"].update(_value)
        else:
            ALL[_field] = _value
# two settings of the speedrun's own, tuned on its length (probes of 2026-11-28 at 480-500
# steps, seeds 1337, 0 and 1: each lowered the final loss by about 0.004-0.005; ``--part
# recipe`` measures each again, with a test): {Recipe field: the speedrun's value}; the
# default it replaces is Recipe's. A short run spends more of its steps decaying, and Muon's
# decoupled weight decay keeps its orthogonal steps from growing the weights.
TUNED = {
    "decay_fraction": 0.5,
    "muon_weight_decay": 0.1,
}
# the speedrun: the chapter's shape with the changes that pay. A change that raised the loss
# alone stays only if taking it out of the recipe raises the recipe's loss (``--part recipe``):
# QK-norm (alone it raised the loss in the 400-step ablation of 2026-11-28; without it the
# recipe ends higher, the results' "recipe_less_one": it bounds the attention logits that
# Muon's larger steps grow). The untied head is out: alone it raised the loss, and taking it
# out of the recipe changed one run's final loss by less than the seeds' spread. Muon's peak
# rate is not fixed here: the race sweeps MUON_RATES and reports the best (results: "tune",
# and race "speedrun_recipe")
SPEEDRUN = {
    "modern": {"qk_norm": True},
    "optimizer": "muon",
    "schedule": "wsd",
    **TUNED,
}
# the sweep of 2026-11-27 (0.02, 0.04, 0.08) ended lowest at 0.02, the edge of its grid: this one
# brackets it from below
MUON_RATES = (0.01, 0.015, 0.02)
# chapter-shaped steps. The longer run aims at the chapter recipe's loss in half its time: a
# step costs about 1.28 chapter steps (90 against 70 CPU ms, measured side by side idle on
# 2026-11-28), so half of the chapter's 1,300 steps allows about 507; 500 leave a little room
SPEEDRUN_STEPS = {"speedrun-short": 330, "speedrun": 500}
RACE_EVAL = (10, 32)  # the race's evaluation: 10 batches of 32 windows for every recipe


def recipe(name: str, config: str, **changes) -> Recipe:
    return Recipe(name, load_config(CONFIGS / f"{config}.json"), **changes)


def machine() -> dict:
    return {
        "processor": platform.machine(),
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "cpu_count": os.cpu_count(),
        "load_average": os.getloadavg()[0],
    }


def summary(run: Run) -> dict:
    r = run.record
    return {
        "name": run.recipe.name,
        "seed": run.cfg.seed,
        "steps": run.step_count,
        "seconds": run.seconds,
        "cpu_seconds": run.cpu_seconds,
        "tokens": r["tokens"][-1],
        "tokens_per_second": r["tokens"][-1] / run.seconds if run.seconds else None,
        "final_val": r["val"][-1],
        "params": sum(p.numel() for p in run.model.parameters()),
        "curve": r,
    }


def _ablation_seed(
    seed: int, variants: list[Recipe], steps: list[int], threads: int, eval_every: int
) -> list[dict]:
    """One seed of the ablation: every variant trained side by side (a worker process's job:
    it loads the corpus itself). Returns each run's record and times as plain data."""
    torch.set_num_threads(threads)
    tok, train, val = corpus_tokens(load_config(CONFIGS / "chapter.json"))
    runs = [
        Run(v.with_steps(s).with_seed(seed), train, val, tok.vocab_size)
        for v, s in zip(variants, steps)
    ]
    race(runs, eval_every=eval_every, chunk=10)
    return [
        {
            "name": r.recipe.name,
            "steps": r.step_count,
            "seconds": r.seconds,
            "cpu_seconds": r.cpu_seconds,
            "params": sum(p.numel() for p in r.model.parameters()),
            "record": r.record,
        }
        for r in runs
    ]


def ablation(args, data, out: dict, save) -> None:
    tok, train, val = data
    chapter = recipe("chapter", "chapter")
    names = ["chapter", *CHANGES, "all"]
    variants = [chapter] + [replace(chapter, name=k, **v) for k, v in CHANGES.items()]
    variants.append(replace(chapter, name="all", **ALL))
    probe = [Run(v.with_steps(10_000), train, val, tok.vocab_size) for v in variants]
    per_step = seconds_per_step(probe, probe_steps=args.probe_steps)
    del probe
    steps = steps_for_budget(per_step, args.ref_steps)
    print("CPU milliseconds per step, measured side by side:")
    for n, t, s in zip(names, per_step, steps):
        print(f"  {n:12s} {t * 1e3:7.1f} ms  -> {s} steps")
    by_name: dict[str, list[dict]] = {n: [] for n in names}
    load = [os.getloadavg()[0]]

    def collect(results: list[dict]) -> None:  # one seed's runs; the table is saved after each
        for r in results:
            by_name[r["name"]].append(r)
        load.append(os.getloadavg()[0])
        out["ablation"] = ablation_table(args, names, per_step, by_name, load)
        save()

    job = (variants, steps, args.threads, args.eval_every)
    if args.jobs == 1:
        for seed in args.seeds:  # one seed at a time, all variants side by side
            collect(_ablation_seed(seed, *job))
    else:  # seeds in parallel processes (each still runs its variants side by side)
        ctx = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(args.jobs, mp_context=ctx) as pool:
            for results in pool.map(
                _ablation_seed, args.seeds, *([j] * len(args.seeds) for j in job)
            ):
                collect(results)


def welch(a: list[float], b: list[float]) -> dict:
    """Welch's t-test of mean(a) - mean(b) (scipy.stats.ttest_ind, unequal variances): the
    difference, its 95 % confidence interval and the two-sided p-value."""
    return _t_test(ttest_ind(a, b, equal_var=False), statistics.mean(a) - statistics.mean(b))


def _t_test(res, difference: float) -> dict:
    """A scipy t-test result as stored: the difference, its 95 % interval, p and df."""
    ci = res.confidence_interval(0.95)
    return {
        "difference": difference,
        "ci95": [float(ci.low), float(ci.high)],
        "p": float(res.pvalue),
        "df": float(res.df),
    }


def paired(a: list[float], b: list[float]) -> dict:
    """The paired t-test of mean(a - b) (scipy.stats.ttest_rel), for runs matched by seed
    (a[i] and b[i] share initial weights and batches): the mean difference, its 95 %
    confidence interval and the two-sided p-value. Sharper than Welch's when the seeds move
    both runs alike."""
    return _t_test(ttest_rel(a, b), statistics.mean(x - y for x, y in zip(a, b)))


def in_seed_order(results: list[dict], seeds: list[int]) -> dict[str, list[float]]:
    """{name: final losses in the order of ``seeds``} from runs finished in any order (each
    result a ``summary`` with its name and seed), so lists of two variants pair by seed."""
    by: dict[str, dict[int, float]] = {}
    for r in results:
        by.setdefault(r["name"], {})[r["seed"]] = r["final_val"]
    return {name: [runs[s] for s in seeds] for name, runs in by.items()}


def ablation_table(args, names, per_step, by_name, load) -> dict:
    ref_finals = [r["record"]["val"][-1] for r in by_name["chapter"]]
    target = statistics.mean(ref_finals)
    table = {}
    for n, rs in by_name.items():
        finals = [r["record"]["val"][-1] for r in rs]
        table[n] = {
            "steps": rs[0]["steps"],
            "ms_per_step": per_step[names.index(n)] * 1e3,
            "seconds": [r["seconds"] for r in rs],
            "cpu_seconds": [r["cpu_seconds"] for r in rs],
            "params": rs[0]["params"],
            "final_val": finals,
            "mean": statistics.mean(finals),
            "std": statistics.stdev(finals) if len(finals) > 1 else 0.0,
            "to_target": [time_to_target(r["record"], target) for r in rs],
            "curves": [r["record"] for r in rs],
        }
        if n != "chapter" and len(finals) > 1:
            table[n]["welch"] = welch(finals, ref_finals)
        w = table[n].get("welch")
        print(
            f"{n:12s} {table[n]['steps']:5d} steps  val {table[n]['mean']:.3f} "
            f"± {table[n]['std']:.3f} ({len(finals)} seeds)"
            + (
                f"  diff {w['difference']:+.3f} [{w['ci95'][0]:+.3f}, {w['ci95'][1]:+.3f}] "
                f"p={w['p']:.2g}"
                if w
                else ""
            ),
            flush=True,
        )
    return {
        "config": "chapter",
        # the MoE's top-1 weight: "switch" (the router's probability, as Switch Transformers;
        # course_lib.labs.modern since issue 36) or "renormalised" (p / p = 1: no gradient from the
        # loss reached the router, only the balance loss trained it)
        "moe_router": "switch",
        "ref_steps": args.ref_steps,
        "measured_at": time.strftime("%Y-%m-%d %H:%M"),
        "seeds": args.seeds[: len(by_name["chapter"])],
        "clock": "cpu",
        "threads": args.threads,
        "jobs": args.jobs,
        "target": target,
        "changes": {k: v for k, v in CHANGES.items()},
        "all": ALL,
        "all_changes": ALL_CHANGES,
        "variants": table,
        "load_average": load,
        "machine": machine(),
    }


def retable(args, out: dict, save) -> None:
    """The ablation's table (Welch tests, "all" defined) recomputed from the runs the results
    file holds, without training: for results measured before the table had them. Keeps
    the measurement's date, machine, threads and MoE router."""
    old = out["ablation"]
    rows = old["variants"]
    names = list(rows)
    per_step = [rows[n]["ms_per_step"] / 1e3 for n in names]
    by_name = {
        n: [
            {
                "record": c,
                "steps": v["steps"],
                "seconds": s,
                "cpu_seconds": cs,
                "params": v["params"],
            }
            for c, s, cs in zip(v["curves"], v["seconds"], v["cpu_seconds"])
        ]
        for n, v in rows.items()
    }
    args.ref_steps, args.seeds = old["ref_steps"], old["seeds"]
    args.threads = old.get("threads", old["machine"]["threads"])
    args.jobs = old.get("jobs", 1)
    load = old.get("load_average", [old["machine"]["load_average"]])
    table = ablation_table(args, names, per_step, by_name, load)
    table["machine"] = old["machine"]
    table["moe_router"] = old.get("moe_router", "renormalised")
    table["measured_at"] = old.get("measured_at", out.get("measured_at"))
    out["ablation"] = table
    save()


def _race_one(r: Recipe, threads: int, eval_every: int) -> dict:
    """One recipe of the race trained alone (a worker process's job: it loads the corpus
    itself); returns ``summary`` of its run and whether it finished."""
    torch.set_num_threads(threads)
    tok, train, val = corpus_tokens(load_config(CONFIGS / "chapter.json"))
    run = Run(r, train, val, tok.vocab_size)
    run.cfg = replace(run.cfg, eval_batches=RACE_EVAL[0], eval_batch_size=RACE_EVAL[1])
    race([run], eval_every=eval_every, chunk=10)
    return {**summary(run), "done": run.done}


def run_race(args, data, out: dict, save) -> None:
    """The race, with Muon's peak rate swept inside it: the speedrun recipe at each rate of
    ``MUON_RATES`` over both lengths; the rate whose longer run ends lowest is the speedrun
    (one seed each: the best of three flatters it a little), the others go to ``tune``."""
    tok, train, val = data
    recipes = [recipe("baseline", "baseline"), recipe("chapter", "chapter")]
    for lr in MUON_RATES:
        for name, steps in SPEEDRUN_STEPS.items():
            changes = {**SPEEDRUN, "muon_lr": lr}
            recipes.append(recipe(f"{name} {lr:g}", "chapter", **changes).with_steps(steps))
    if args.scale != 1:  # a shorter race: its targets are the shorter reference runs' losses
        recipes = [r.with_steps(max(10, round(r.train.max_steps * args.scale))) for r in recipes]
    # CPU seconds per step of the three shapes (the rate does not change a step's work),
    # measured side by side on fresh copies: with the steps to a target they give a time
    # ratio that does not depend on the machine's load
    shapes = recipes[:3]
    probe = [Run(r.with_steps(10_000), train, val, tok.vocab_size) for r in shapes]
    per_shape = seconds_per_step(probe, args.probe_steps)
    del probe
    per_step = {r.name: per_shape[min(i, 2)] for i, r in enumerate(recipes)}
    load = [os.getloadavg()[0]]
    res: dict[str, dict] = {}

    def report() -> None:
        if not {"baseline", "chapter"} <= set(res):
            return
        targets = {t: res[t]["final_val"] for t in ("baseline", "chapter")}
        for name, r in res.items():
            r["to_target"] = {t: time_to_target(r["curve"], v) for t, v in targets.items()}
            r["ms_per_step"] = per_step[name] * 1e3
        longs = {lr: res.get(f"speedrun {lr:g}") for lr in MUON_RATES}
        longs = {lr: r["final_val"] for lr, r in longs.items() if r is not None}
        if not longs:
            return
        best = min(longs, key=longs.get)
        runs = {t: res[t] for t in ("baseline", "chapter")}
        for name in SPEEDRUN_STEPS:
            if f"{name} {best:g}" in res:
                runs[name] = res[f"{name} {best:g}"]
        out["tune"] = {
            "recipe": SPEEDRUN,
            "steps": SPEEDRUN_STEPS["speedrun"],
            "in_race": True,
            "final_val": {f"{lr:g}": v for lr, v in longs.items()},
            "best": best,
            "runs": {n: r for n, r in res.items() if n.startswith("speedrun")},
        }
        out["race"] = {
            "targets": targets,
            "complete": len(res) == len(recipes) and all(r["done"] for r in res.values()),
            "scale": args.scale,
            "speedrun_recipe": {**SPEEDRUN, "muon_lr": best},
            "speedrun_steps": {n: runs[n]["steps"] for n in SPEEDRUN_STEPS if n in runs},
            "runs": runs,
            "threads": args.threads,
            "jobs": args.jobs,
            "load_average": [*load, os.getloadavg()[0]],
            "machine": machine(),
        }
        save()

    if args.jobs == 1:  # every recipe interleaved in this process
        runs = [Run(r, train, val, tok.vocab_size) for r in recipes]
        # one evaluation set for all (the baseline's: 10 batches of 32 windows)
        for run in runs:
            run.cfg = replace(run.cfg, eval_batches=RACE_EVAL[0], eval_batch_size=RACE_EVAL[1])

        def progress(run):
            print(
                f"  {run.recipe.name:18s} step {run.step_count:5d}  {run.cpu_seconds:7.1f} "
                f"CPU s  val {run.record['val'][-1]:.3f}",
                flush=True,
            )

        race(runs, eval_every=args.eval_every, chunk=10, progress=progress)
        res.update({run.recipe.name: {**summary(run), "done": run.done} for run in runs})
        load.append(os.getloadavg()[0])
        report()
    else:  # each recipe in its own process, all at once; CPU seconds count each one's work
        ctx = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(args.jobs, mp_context=ctx) as pool:
            futures = [pool.submit(_race_one, r, args.threads, args.eval_every) for r in recipes]
            for future in as_completed(futures):
                r = future.result()
                res[r["name"]] = r
                load.append(os.getloadavg()[0])
                print(
                    f"  {r['name']:18s} {r['steps']:5d} steps  {r['cpu_seconds']:7.1f} CPU s"
                    f"  final val {r['final_val']:.3f}",
                    flush=True,
                )
                report()
    for name, r in out["race"]["runs"].items():
        hits = ", ".join(
            f"{t} target at {h['cpu_seconds']:.1f} CPU s / step {h['step']}"
            if h
            else f"{t} target never"
            for t, h in r["to_target"].items()
        )
        print(f"{name:15s} final val {r['final_val']:.3f} in {r['cpu_seconds']:.1f} CPU s; {hits}")
    print("Muon rates (final val of the longer run):", out["tune"]["final_val"])


def without(changes: dict, change: str) -> dict:
    """``changes`` (a recipe's ``Recipe`` keyword arguments) less the ablation change
    ``change`` (a key of ``CHANGES``): its ``modern`` fields dropped, or the optimiser or
    schedule back to the chapter's."""
    out = {**changes, "modern": dict(changes.get("modern") or {})}
    for field, value in CHANGES[change].items():
        if field == "modern":
            for k in value:
                out["modern"].pop(k, None)
        else:
            out.pop(field, None)
    if change == "muon":
        out.pop("muon_lr", None)
        out.pop("muon_weight_decay", None)
    if change == "wsd":
        out.pop("decay_fraction", None)
    return out


def untuned(changes: dict, setting: str) -> dict:
    """``changes`` with the tuned ``setting`` (a key of ``TUNED``) back at Recipe's default."""
    return {**changes, setting: getattr(Recipe, setting)}


def changes_in(changes: dict) -> list[str]:
    """The ablation's changes (keys of ``CHANGES``) that a recipe's ``changes`` contain."""
    modern = changes.get("modern") or {}

    def has(change: str) -> bool:
        return all(
            all(modern.get(k) == v for k, v in value.items())
            if field == "modern"
            else changes.get(field) == value
            for field, value in CHANGES[change].items()
        )

    return [c for c in CHANGES if has(c)]


def recipe_less_one(args, out: dict, save) -> None:
    """The race's speedrun recipe, whole and less each of its changes (and each ``TUNED``
    setting back at its default), over ``--seeds`` seeds at the race's rate and length
    (``--part recipe``): each one's worth inside the recipe, with Welch's test of the
    difference (without it minus whole) and the paired test (runs matched by seed; the
    losses are stored in the order of ``seeds``)."""
    chosen = out["race"]["speedrun_recipe"]
    steps = out["race"]["speedrun_steps"]["speedrun"]
    inside = changes_in(chosen) + [t for t in TUNED if t in chosen]
    variants = {
        "whole": chosen,
        **{c: untuned(chosen, c) if c in TUNED else without(chosen, c) for c in inside},
    }
    recipes = [
        recipe(name, "chapter", **changes).with_steps(steps).with_seed(seed)
        for seed in args.seeds
        for name, changes in variants.items()
    ]
    results = []
    ctx = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(args.jobs, mp_context=ctx) as pool:
        futures = [pool.submit(_race_one, r, args.threads, args.eval_every) for r in recipes]
        for future in as_completed(futures):
            r = future.result()
            results.append(r)
            print(f"  {r['name']:12s} seed {r['seed']} final val {r['final_val']:.3f}", flush=True)
    finals = in_seed_order(results, args.seeds)  # each list in the order of args.seeds
    whole = finals["whole"]
    out["recipe_less_one"] = {
        "recipe": chosen,
        "steps": steps,
        "seeds": args.seeds,
        "whole": {"final_val": whole, "mean": statistics.mean(whole)},
        "without": {
            c: {
                "final_val": finals[c],
                "mean": statistics.mean(finals[c]),
                "welch": welch(finals[c], whole),
                "paired": paired(finals[c], whole),  # the same seed's whole recipe
            }
            for c in inside
        },
        "threads": args.threads,
        "measured_at": time.strftime("%Y-%m-%d %H:%M"),
        "load_average": os.getloadavg()[0],
    }
    save()


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument(
        "--part",
        choices=("all", "race", "ablation", "retable", "recipe"),
        default="all",
        help="retable: the ablation's statistics from the stored runs, without training",
    )
    ap.add_argument("--threads", type=int, default=2, help="threads per training process")
    ap.add_argument(
        "--jobs", type=int, default=1, help="processes: ablation seeds or race recipes at once"
    )
    ap.add_argument("--seeds", default="0,1,2,3,4")
    ap.add_argument("--ref-steps", type=int, default=250)
    ap.add_argument("--probe-steps", type=int, default=30)
    ap.add_argument("--eval-every", type=int, default=50, help="steps between evaluations")
    ap.add_argument("--scale", type=float, default=1.0, help="race steps x this (a shorter race)")
    ap.add_argument("--out", type=Path, default=RESULTS)
    args = ap.parse_args(argv)
    args.seeds = [int(s) for s in args.seeds.split(",")]
    torch.set_num_threads(args.threads)
    out = json.loads(args.out.read_text()) if args.out.exists() else {}
    if args.part != "retable":
        out["measured_at"] = time.strftime("%Y-%m-%d %H:%M")

    def save():
        write_json(out, args.out)

    if args.part == "retable":
        retable(args, out, save)
        return out

    data = corpus_tokens(load_config(CONFIGS / "chapter.json"))
    if args.part in ("all", "ablation"):
        ablation(args, data, out, save)
    if args.part in ("all", "race"):
        run_race(args, data, out, save)
    if args.part in ("all", "recipe"):
        recipe_less_one(args, out, save)
    return out


if __name__ == "__main__":
    main()
