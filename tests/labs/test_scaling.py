"""The power-law fits of course_lib.labs.scaling recover known laws from synthetic data."""

import math

import numpy as np
import pytest

from course_lib.labs.scaling import (
    CHINCHILLA,
    chinchilla_compute_exponent,
    fit_power_law,
    fit_power_law_with_floor,
    isoflop_minima,
    load_scaling_runs,
    pareto_frontier,
)

C = np.logspace(10, 13, 9)  # nine budgets over three decades


@pytest.mark.parametrize("a,alpha", [(30.0, 0.05), (200.0, 0.154), (5.0, 0.5)])
def test_power_law_recovers_exponent_exactly_without_noise(a, alpha):
    fit = fit_power_law(C, a * C ** (-alpha))
    assert math.isclose(fit.alpha, alpha, rel_tol=1e-9)
    assert math.isclose(fit.a, a, rel_tol=1e-7)
    assert fit.floor == 0.0 and fit.rmse < 1e-12 and fit.n_points == 9
    assert fit.c_range == (C.min(), C.max())


def test_power_law_with_noise_is_close_and_unbiased_on_average():
    rng = np.random.default_rng(0)
    alphas = [
        fit_power_law(C, 40 * C ** (-0.1) * np.exp(rng.normal(0, 0.01, C.size))).alpha
        for _ in range(200)
    ]
    assert abs(np.mean(alphas) - 0.1) < 1e-3  # log-normal noise: least squares in logs is unbiased
    assert np.std(alphas) < 0.01


def test_power_law_with_floor_recovers_floor_and_exponent():
    E, a, alpha = 1.2, 400.0, 0.3
    fit = fit_power_law_with_floor(C, E + a * C ** (-alpha))
    assert math.isclose(fit.floor, E, rel_tol=1e-4)
    assert math.isclose(fit.alpha, alpha, rel_tol=1e-3)
    assert math.isclose(fit(3e11), E + a * 3e11 ** (-alpha), rel_tol=1e-6)
    # a law with a floor bends on log-log axes: the pure power law fits it worse
    assert fit_power_law(C, E + a * C ** (-alpha)).rmse > 100 * fit.rmse


def test_floor_fit_of_a_pure_power_law_finds_no_floor():
    fit = fit_power_law_with_floor(C, 30 * C ** (-0.08))
    assert fit.floor < 1e-3 * 30 * C.max() ** (-0.08)
    assert math.isclose(fit.alpha, 0.08, rel_tol=1e-3)


def test_chinchilla_exponent_matches_a_numerical_optimum():
    # minimise L(N, D = C / 6N) over N numerically at two budgets; the slope of the reducible
    # loss between them is the compute exponent derived in closed form
    E, A, B, al, be = (CHINCHILLA[k] for k in ("E", "A", "B", "alpha", "beta"))
    N = np.logspace(6, 14, 200_001)

    def best(Cb):
        return np.min(A / N**al + B / (Cb / (6 * N)) ** be)

    slope = -(math.log(best(1e24)) - math.log(best(1e20))) / (math.log(1e24) - math.log(1e20))
    assert math.isclose(chinchilla_compute_exponent(), slope, rel_tol=1e-4)


def test_isoflop_minima_keeps_the_best_run_per_budget():
    runs = [
        {"budget": 2.0, "val_loss": 2.5, "id": "a"},
        {"budget": 1.0, "val_loss": 3.0, "id": "b"},
        {"budget": 2.0, "val_loss": 2.2, "id": "c"},
        {"budget": 1.0, "val_loss": 3.1, "id": "d"},
    ]
    assert [r["id"] for r in isoflop_minima(runs)] == ["b", "c"]


def test_pareto_frontier_keeps_points_no_cheaper_point_beats():
    pts = [
        {"compute": c, "val_loss": v, "id": i}
        for i, (c, v) in enumerate([(1, 3.0), (2, 3.2), (3, 2.5), (3, 2.4), (5, 2.6), (8, 2.0)])
    ]
    front = pareto_frontier(pts)
    assert [p["id"] for p in front] == [0, 3, 5]
    # brute force: a point is on the frontier iff no point with <= compute has a lower loss
    brute = [
        p
        for p in pts
        if not any(q["compute"] <= p["compute"] and q["val_loss"] < p["val_loss"] for q in pts)
    ]
    assert sorted(p["id"] for p in brute) == [0, 3, 5]
    with pytest.raises(ValueError, match="'compute' and 'val_loss'"):
        pareto_frontier([{"compute": 1.0}])


@pytest.mark.parametrize(
    "compute,loss,match",
    [
        ([1e10, 1e11], [2.0], "one loss per compute"),
        ([1e10], [2.0], "at least 2 points"),
        ([1e10, -1e11], [2.0, 1.5], "must be positive"),
        ([1e10, 1e11], [2.0, 0.0], "must be positive"),
        ([1e10, float("nan")], [2.0, 1.5], "finite"),
        ([1e10, 1e10], [2.0, 1.5], "same compute"),
    ],
)
def test_bad_input_raises_readable_error(compute, loss, match):
    with pytest.raises(ValueError, match=match):
        fit_power_law(compute, loss)


def test_bad_input_other_functions():
    with pytest.raises(ValueError, match="at least 4 points"):
        fit_power_law_with_floor([1e10, 1e11, 1e12], [3.0, 2.5, 2.0])
    with pytest.raises(ValueError, match="no runs"):
        isoflop_minima([])
    with pytest.raises(ValueError, match="'budget' and 'val_loss'"):
        isoflop_minima([{"budget": 1.0}])
    with pytest.raises(ValueError, match="must be positive"):
        chinchilla_compute_exponent(0.0, 0.3)


def test_stored_scaling_runs_are_consistent():
    from course_lib.model import GPTConfig, flops_per_token

    data = load_scaling_runs()
    assert len(data["runs"]) >= 8
    for r in data["runs"]:
        cfg = GPTConfig(
            block_size=data["block_size"],
            n_layer=r["n_layer"],
            n_head=r["n_head"],
            d_model=r["d_model"],
            bias=False,
            vocab_size=81,
        )
        # the compute is the course's FLOP count times the tokens trained, within 2 % of the budget
        assert r["tokens"] == r["steps"] * data["batch_size"] * data["block_size"]
        assert math.isclose(r["compute"], flops_per_token(cfg) * r["tokens"], rel_tol=1e-9)
        assert math.isclose(r["compute"], r["budget"], rel_tol=0.02)
        assert 0 < r["val_loss"] < math.log(81) + 0.1  # below a uniform guess over 81 characters


def test_training_compute_of_the_course_runs_is_flops_per_token_times_tokens():
    from course_lib.labs.scaling import training_compute
    from course_lib.model import GPTConfig, flops_per_token

    bench = load_scaling_runs("train_bench.json")
    for r in bench["runs"].values():
        m = r["config"]["model"]
        cfg = GPTConfig(
            block_size=m["block_size"],
            n_layer=m["n_layer"],
            n_head=m["n_head"],
            d_model=m["d_model"],
            bias=m["bias"],
            vocab_size=r["vocab_size"],
        )
        tokens = r["steps"] * r["config"]["batch_size"] * m["block_size"]
        assert math.isclose(training_compute(r), flops_per_token(cfg) * tokens, rel_tol=1e-12)
    with pytest.raises(ValueError, match="no 'config'"):
        training_compute({"steps": 3})


def test_aic_prefers_the_floor_only_when_the_data_have_one():
    rng = np.random.default_rng(1)
    noise = np.exp(rng.normal(0, 0.005, C.size))
    with_floor = (1.0 + 300 * C ** (-0.3)) * noise
    without = 30 * C ** (-0.08) * noise
    assert fit_power_law_with_floor(C, with_floor).aic < fit_power_law(C, with_floor).aic
    assert fit_power_law(C, without).aic < fit_power_law_with_floor(C, without).aic


def _brute_frontier(points):
    """The points no other point beats, straight from the definition (every pair compared)."""
    return sorted(
        (
            p
            for p in points
            if not any(
                q is not p
                and q["compute"] <= p["compute"]
                and q["val_loss"] <= p["val_loss"]
                and (q["compute"], q["val_loss"]) != (p["compute"], p["val_loss"])
                for q in points
            )
        ),
        key=lambda p: p["compute"],
    )


def test_scaling_study_matches_an_independent_computation():
    """Chapter 1's study of the stored runs, recomputed without the module: the best run per
    budget by min(), the configurations' compute from their JSON, the frontier by comparing
    every pair, the pure power law by np.polyfit, the floored one by scipy's least squares."""
    from scipy.optimize import least_squares

    from course_lib.labs.scaling import scaling_study

    grid, bench = load_scaling_runs(), load_scaling_runs("train_bench.json")
    before = repr(grid["runs"])
    study = scaling_study(grid, bench)
    assert repr(grid["runs"]) == before  # the stored runs are not labelled in place
    assert study.budgets == sorted(grid["budgets"])
    best = [
        min((r for r in grid["runs"] if r["budget"] == b), key=lambda r: r["val_loss"])
        for b in sorted(grid["budgets"])
    ]
    assert [(r["compute"], r["val_loss"]) for r in study.best_per_budget] == [
        (r["compute"], r["val_loss"]) for r in best
    ]
    assert [r["label"] for r in study.best_per_budget] == [
        f"{r['n_layer']} x {r['d_model']}" for r in best
    ]
    configs = {}
    for name, r in bench["runs"].items():
        c = r["config"]
        tokens = r["steps"] * c["batch_size"] * c["model"]["block_size"] * r["world_size"]
        configs[name] = (r["flops_per_token"] * tokens, r["final_val_loss"], tokens)
    assert {p["label"]: (p["compute"], p["val_loss"], p["tokens"]) for p in study.configs} == (
        configs
    )
    points = [dict(p) for p in best] + [
        {"label": k, "compute": c, "val_loss": v} for k, (c, v, _) in configs.items()
    ]
    front = _brute_frontier(points)
    assert [(p["compute"], p["val_loss"]) for p in study.frontier] == [
        (p["compute"], p["val_loss"]) for p in front
    ]
    assert len(front) >= 4  # enough for the floored fit
    logC = np.log([p["compute"] for p in front])
    logL = np.log([p["val_loss"] for p in front])
    slope, _ = np.polyfit(logC, logL, 1)
    assert study.power.alpha == pytest.approx(-slope, rel=1e-9)
    slope, _ = np.polyfit(
        np.log([p["compute"] for p in best]), np.log([p["val_loss"] for p in best]), 1
    )
    assert study.grid_only.alpha == pytest.approx(-slope, rel=1e-9)

    # the floored fit: minimise the same error of ln L over (ln a, alpha, E) with E below min L
    L = np.exp(logL)

    def resid(x):
        log_a, alpha, E = x
        return np.log(E + np.exp(log_a - alpha * logC)) - logL

    f = study.floored
    starts = [(np.log(f.a), f.alpha, f.floor), (np.log(L.max()), 0.1, 0.5 * L.min())]
    fits = [
        least_squares(resid, x0, bounds=([-50, 0, 0], [50, 5, L.min() * (1 - 1e-9)]), xtol=1e-14)
        for x0 in starts
    ]
    best_fit = min(fits, key=lambda r: r.cost)
    rmse = np.sqrt(np.mean(best_fit.fun**2))
    # the module's fit is the minimum itself (a profile start, then Gauss-Newton), not only close
    assert f.rmse <= rmse * (1 + 1e-9)
    assert f.alpha == pytest.approx(best_fit.x[1], rel=1e-5)
    assert f.floor == pytest.approx(best_fit.x[2], rel=1e-5)
    assert f.rmse == pytest.approx(np.sqrt(np.mean(resid((np.log(f.a), f.alpha, f.floor)) ** 2)))


def test_scaling_study_table_lists_the_frontier_and_both_fits():
    from course_lib.labs.scaling import scaling_study

    study = scaling_study()
    lines = study.table().splitlines()
    assert len(lines) == 1 + len(study.frontier) + 3
    for line, p in zip(lines[1:], study.frontier):
        assert line.split("|")[1].split(f"{p['params']:,}")[0].strip() == p["label"]
        assert float(line.rsplit("|", 1)[1]) == pytest.approx(p["val_loss"], abs=5e-4)
    assert f"alpha = {study.power.alpha:.3f}" in lines[-2]
    assert f"E = {study.floored.floor:.2f}" in lines[-1]


def test_scaling_study_bad_input():
    from course_lib.labs.scaling import scaling_study

    bench = load_scaling_runs("train_bench.json")
    with pytest.raises(ValueError, match="grid has no runs"):
        scaling_study({"runs": []}, bench)
    with pytest.raises(ValueError, match="no 'n_layer'"):
        scaling_study({"runs": [{"budget": 1.0, "compute": 1.0, "val_loss": 1.0}]}, bench)
