"""Chapter 15's benchmark script: the recipe less one change (``--part recipe``) takes out
exactly one change and finds exactly the changes a recipe has (the runs themselves take
minutes; the ablation's and race's pieces are tested in tests/labs/test_speedrun_lab.py)."""

from __future__ import annotations

import sys

from tools import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))
import speedrun  # noqa: E402


def test_without_takes_out_one_change_and_keeps_the_others():
    recipe = {
        "modern": {"qk_norm": True, "tie_head": False},
        "optimizer": "muon",
        "muon_lr": 0.015,
        "muon_weight_decay": 0.1,
        "schedule": "wsd",
        "decay_fraction": 0.5,
    }
    assert speedrun.without(recipe, "qk_norm") == {**recipe, "modern": {"tie_head": False}}
    assert speedrun.without(recipe, "untied_head") == {**recipe, "modern": {"qk_norm": True}}
    # taking out Muon or warmup-stable-decay takes its own settings with it
    assert speedrun.without(recipe, "muon") == {
        "modern": recipe["modern"],
        "schedule": "wsd",
        "decay_fraction": 0.5,
    }
    assert speedrun.without(recipe, "wsd") == {
        "modern": recipe["modern"],
        "optimizer": "muon",
        "muon_lr": 0.015,
        "muon_weight_decay": 0.1,
    }
    assert recipe["modern"] == {"qk_norm": True, "tie_head": False}  # not changed in place


def test_changes_in_names_what_a_recipe_contains():
    assert speedrun.changes_in(speedrun.SPEEDRUN) == ["qk_norm", "muon", "wsd"]
    assert speedrun.changes_in({"modern": {"mlp": "swiglu"}}) == ["swiglu"]
    assert speedrun.changes_in(speedrun.ALL) == speedrun.ALL_CHANGES
    assert speedrun.changes_in({}) == []


def test_each_tuned_setting_goes_back_to_the_default_it_replaced():
    from course_lib.labs.speedrun import Recipe

    for setting, value in speedrun.TUNED.items():
        default = getattr(Recipe, setting)  # the default is Recipe's
        assert speedrun.SPEEDRUN[setting] == value != default, setting
        back = speedrun.untuned(speedrun.SPEEDRUN, setting)
        assert back == {**speedrun.SPEEDRUN, setting: default}
        Recipe("r", None, **back)  # still a recipe


def test_recipe_runs_pair_by_seed_whatever_order_they_finish_in():
    from scipy.stats import ttest_rel

    finished = [  # as_completed's order, not the seeds'
        {"name": "whole", "seed": 2, "final_val": 1.754},
        {"name": "wsd", "seed": 0, "final_val": 1.768},
        {"name": "whole", "seed": 0, "final_val": 1.751},
        {"name": "wsd", "seed": 2, "final_val": 1.765},
        {"name": "wsd", "seed": 1, "final_val": 1.763},
        {"name": "whole", "seed": 1, "final_val": 1.742},
    ]
    finals = speedrun.in_seed_order(finished, [0, 1, 2])
    assert finals == {"whole": [1.751, 1.742, 1.754], "wsd": [1.768, 1.763, 1.765]}
    got = speedrun.paired(finals["wsd"], finals["whole"])
    want = ttest_rel(finals["wsd"], finals["whole"])
    assert got["p"] == want.pvalue and got["df"] == want.df
    assert got["difference"] == sum(a - b for a, b in zip(finals["wsd"], finals["whole"])) / 3
    # pairing by seed sees what Welch's test misses: the same seed moves both runs alike
    assert got["p"] < speedrun.welch(finals["wsd"], finals["whole"])["p"]
