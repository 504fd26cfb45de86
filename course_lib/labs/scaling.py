"""Scaling laws: fit validation loss against training compute, and the published laws beside it.

Chapter 1 reads the course's own scaling runs (``course_lib/results/scaling.json``, written by
``benchmarks/scaling_runs.py``), keeps the best run at every compute budget (the
compute-efficient frontier) and fits a power law to it:

    L(C) = a * C^(-alpha)                 (a straight line on log-log axes), or
    L(C) = E + a * C^(-alpha)             (with an irreducible loss E the fit estimates).

The published constants below are quoted from the papers (not computed here); they describe
far larger models on other corpora and tokenizers, so only their exponents are comparable.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from importlib.resources import files
from typing import NamedTuple

import numpy as np

__all__ = [
    "KAPLAN_ALPHA_C",
    "KAPLAN_C_C_PF_DAYS",
    "CHINCHILLA",
    "chinchilla_compute_exponent",
    "PowerLaw",
    "fit_power_law",
    "fit_power_law_with_floor",
    "isoflop_minima",
    "pareto_frontier",
    "training_compute",
    "load_scaling_runs",
    "ScalingStudy",
    "scaling_study",
]

#: Kaplan et al. (2020), eq. (1.3) and Fig. 1: L(C_min) = (C_c / C_min)^alpha_C with
#: alpha_C = 0.050 and C_c = 3.1e8 PF-days (loss in nats per BPE token of WebText2).
KAPLAN_ALPHA_C = 0.050
KAPLAN_C_C_PF_DAYS = 3.1e8

#: Hoffmann et al. (2022, "Chinchilla"), eq. (10), approach 3:
#: L(N, D) = E + A / N^alpha + B / D^beta (N parameters, D training tokens, MassiveText).
CHINCHILLA = {"E": 1.69, "A": 406.4, "B": 410.7, "alpha": 0.34, "beta": 0.28}


def chinchilla_compute_exponent(
    alpha: float = CHINCHILLA["alpha"], beta: float = CHINCHILLA["beta"]
) -> float:
    """The exponent of the reducible loss against compute, L(C) - E ~ C^(-gamma), for a model
    sized compute-optimally under L(N, D) = E + A/N^alpha + B/D^beta with C = 6 N D.

    Substituting D = C / (6N) and minimising over N gives N_opt ~ C^(beta/(alpha+beta)),
    D_opt ~ C^(alpha/(alpha+beta)), and both loss terms then fall like
    C^(-alpha*beta/(alpha+beta)): gamma = alpha * beta / (alpha + beta).
    """
    if alpha <= 0 or beta <= 0:
        raise ValueError(
            f"chinchilla_compute_exponent: alpha and beta must be positive; got {alpha}, {beta}."
        )
    return alpha * beta / (alpha + beta)


class PowerLaw(NamedTuple):
    """L(C) = floor + a * C^(-alpha), fitted to ``n_points`` points spanning ``c_range``.
    ``rmse``: root-mean-square error of log L at the points (0 for a perfect fit);
    ``params``: how many numbers were fitted (2 without a floor, 3 with one)."""

    a: float
    alpha: float
    floor: float
    rmse: float
    n_points: int
    c_range: tuple[float, float]

    params: int = 2

    def __call__(self, C):
        """The fitted loss at compute C (a number or an array)."""
        return self.floor + self.a * np.asarray(C, dtype=float) ** (-self.alpha)

    @property
    def aic(self) -> float:
        """Akaike's information criterion, n ln(rmse^2) + 2k for k fitted parameters (least
        squares with Gaussian errors in log L): lower is better, and each extra parameter must
        buy its keep, so a fit with a floor is preferred only if it fits clearly better."""
        return self.n_points * math.log(max(self.rmse, 1e-300) ** 2) + 2 * self.params


def _check(compute, loss, min_points: int, who: str) -> tuple[np.ndarray, np.ndarray]:
    C = np.asarray(compute, dtype=float).ravel()
    L = np.asarray(loss, dtype=float).ravel()
    if C.shape != L.shape:
        raise ValueError(
            f"{who}: compute has {C.size} values but loss has {L.size}; give one loss per compute."
        )
    if C.size < min_points:
        raise ValueError(f"{who}: need at least {min_points} points to fit; got {C.size}.")
    if not (np.all(np.isfinite(C)) and np.all(np.isfinite(L))):
        raise ValueError(f"{who}: compute and loss must be finite numbers (no NaN or inf).")
    if np.any(C <= 0) or np.any(L <= 0):
        raise ValueError(
            f"{who}: compute and loss must be positive (a power law lives on log axes)."
        )
    if np.unique(C).size < 2:
        raise ValueError(
            f"{who}: all points have the same compute; give at least two different budgets."
        )
    return C, L


def _log_fit(C: np.ndarray, R: np.ndarray) -> tuple[float, float, float]:
    """Least squares of log R = log a - alpha log C; returns (a, alpha, rmse in log R)."""
    X = np.stack([np.ones_like(C), np.log(C)], axis=1)  # (n, 2)
    coef, *_ = np.linalg.lstsq(X, np.log(R), rcond=None)
    resid = np.log(R) - X @ coef
    return float(math.exp(coef[0])), float(-coef[1]), float(np.sqrt(np.mean(resid**2)))


def fit_power_law(compute: Sequence[float], loss: Sequence[float]) -> PowerLaw:
    """Fit L(C) = a * C^(-alpha) by least squares on log L against log C (a straight line on
    log-log axes; every point weighs the same in relative terms). Needs >= 2 points."""
    C, L = _check(compute, loss, 2, "fit_power_law")
    a, alpha, _ = _log_fit(C, L)
    rmse = float(np.sqrt(np.mean((np.log(L) - np.log(a * C ** (-alpha))) ** 2)))
    return PowerLaw(a, alpha, 0.0, rmse, C.size, (float(C.min()), float(C.max())))


def fit_power_law_with_floor(
    compute: Sequence[float], loss: Sequence[float], grid: int = 2000
) -> PowerLaw:
    """Fit L(C) = E + a * C^(-alpha) with an irreducible loss E in [0, min L), minimising the
    squared error of log L. A start: for each E on a fine grid, a straight-line fit of
    log(L - E) (a profile that is close to, not at, the minimum), the best E refined by
    golden-section search; then damped Gauss-Newton steps on all three numbers at once reach
    the minimum of the error itself. Needs >= 4 points (three parameters and at least one
    degree of freedom)."""
    C, L = _check(compute, loss, 4, "fit_power_law_with_floor")
    top = float(L.min()) * (1 - 1e-9)

    def err(E: float) -> float:
        a, alpha, _ = _log_fit(C, L - E)
        return float(np.mean((np.log(L) - np.log(E + a * C ** (-alpha))) ** 2))

    Es = np.linspace(0.0, top, grid, endpoint=False)
    errs = [err(E) for E in Es]
    k = int(np.argmin(errs))
    lo, hi = Es[max(k - 1, 0)], Es[k + 1] if k + 1 < grid else top
    g = (math.sqrt(5) - 1) / 2
    for _ in range(100):  # golden-section refinement inside the best grid cell
        m1, m2 = hi - g * (hi - lo), lo + g * (hi - lo)
        if err(m1) < err(m2):
            hi = m2
        else:
            lo = m1
    E = (lo + hi) / 2
    a, alpha, _ = _log_fit(C, L - E)
    log_a, alpha, E = _polish_floored(np.log(C), np.log(L), math.log(a), alpha, E, top)
    rmse = math.sqrt(float(np.mean(_floored_residual(np.log(C), np.log(L), log_a, alpha, E) ** 2)))
    return PowerLaw(
        math.exp(log_a), alpha, E, rmse, C.size, (float(C.min()), float(C.max())), params=3
    )


def _floored_residual(logC, logL, log_a: float, alpha: float, E: float) -> np.ndarray:
    """ln(E + a C^-alpha) - ln L at every point: the error the floored fit minimises."""
    return np.log(E + np.exp(log_a - alpha * logC)) - logL


def _polish_floored(logC, logL, log_a, alpha, E, top, steps: int = 200):
    """Levenberg-Marquardt on (ln a, alpha, E) from a close start, E kept in [0, top]: a step
    is taken only if it lowers the squared error (else the damping grows), so the result is
    never worse than the start."""
    x = np.array([log_a, alpha, E])
    r = _floored_residual(logC, logL, *x)
    damping = 1e-3
    for _ in range(steps):
        power = np.exp(x[0] - x[1] * logC)  # a C^-alpha, (n,)
        model = x[2] + power
        J = np.stack([power / model, -power * logC / model, 1 / model], axis=1)  # (n, 3)
        A, grad = J.T @ J, J.T @ r
        step = np.linalg.solve(A + damping * np.diag(np.diag(A)), -grad)
        trial = x + step
        trial[2] = min(max(trial[2], 0.0), top)
        r_trial = _floored_residual(logC, logL, *trial)
        if r_trial @ r_trial < r @ r:
            done = (r @ r - r_trial @ r_trial) <= 1e-15 * (r @ r)
            x, r, damping = trial, r_trial, max(damping / 10, 1e-12)
            if done:
                break
        else:
            damping *= 10
            if damping > 1e12:
                break
    return float(x[0]), float(x[1]), float(x[2])


def isoflop_minima(runs: Sequence[dict]) -> list[dict]:
    """The best run (lowest ``val_loss``) of every compute ``budget`` in an IsoFLOP grid, in
    order of budget: the compute-efficient frontier the power law is fitted to."""
    if not runs:
        raise ValueError("isoflop_minima: no runs; give dicts with 'budget' and 'val_loss'.")
    best: dict[float, dict] = {}
    for r in runs:
        if "budget" not in r or "val_loss" not in r:
            raise ValueError(
                f"isoflop_minima: every run needs 'budget' and 'val_loss'; got keys {sorted(r)}."
            )
        if r["budget"] not in best or r["val_loss"] < best[r["budget"]]["val_loss"]:
            best[r["budget"]] = r
    return [best[b] for b in sorted(best)]


def pareto_frontier(points: Sequence[dict]) -> list[dict]:
    """The points (dicts with ``compute`` and ``val_loss``) that no other point beats with
    the same or less compute: sorted by compute, each has a lower loss than every point
    before it. The lower envelope of all runs, whatever grid or recipe they came from."""
    if not points:
        raise ValueError("pareto_frontier: no points; give dicts with 'compute' and 'val_loss'.")
    for r in points:
        if "compute" not in r or "val_loss" not in r:
            raise ValueError(
                "pareto_frontier: every point needs 'compute' and 'val_loss'; got keys "
                f"{sorted(r)}."
            )
    front, best = [], math.inf
    for r in sorted(points, key=lambda r: (r["compute"], r["val_loss"])):
        if r["val_loss"] < best:
            front.append(r)
            best = r["val_loss"]
    return front


def training_compute(result: dict) -> float:
    """Training FLOPs of a finished ``course_lib.train.run`` (a results dict, as stored in
    ``results/train_bench.json``): its FLOPs per token (``model.flops_per_token``, the same
    count the scaling runs use) times the tokens it trained on, steps x batch x context x ranks."""
    try:
        tokens = _trained_tokens(result)
        return float(result["flops_per_token"]) * tokens
    except KeyError as e:
        raise ValueError(
            f"training_compute: the result has no {e}; pass a dict written by course_lib.train.run."
        ) from None


def _trained_tokens(result: dict) -> int:
    """Tokens a finished run trained on: steps x batch x context x ranks (KeyError if absent)."""
    cfg = result["config"]
    return (
        result["steps"]
        * cfg["batch_size"]
        * cfg["model"]["block_size"]
        * result.get("world_size", 1)
    )


def load_scaling_runs(name: str = "scaling.json") -> dict:
    """The stored results of ``benchmarks/scaling_runs.py`` (or another results file)."""
    return json.loads(files("course_lib").joinpath("results", name).read_text())


class ScalingStudy(NamedTuple):
    """Chapter 1's scaling study (``scaling_study``). Points are dicts with ``label``,
    ``compute`` (FLOPs), ``val_loss``, ``params`` and ``tokens``.

    runs: the IsoFLOP grid's runs, each labelled "layers x width"; budgets: its compute
    budgets; configs: the course's configurations trained for longer (Chapter 8), as points;
    best_per_budget: the grid's best run at each budget; frontier: the points of both that no
    cheaper point beats; power and floored: L = a C^-alpha and L = E + a C^-alpha fitted to
    the frontier; grid_only: L = a C^-alpha fitted to the grid's best runs alone (to test an
    extrapolation to the configurations)."""

    runs: list[dict]
    budgets: list[float]
    configs: list[dict]
    best_per_budget: list[dict]
    frontier: list[dict]
    power: PowerLaw
    floored: PowerLaw
    grid_only: PowerLaw

    def table(self) -> str:
        """The frontier, one line per point (compute, best model, its parameters, tokens per
        parameter, validation loss), then the two fits with their errors and AIC."""
        lines = [
            f"{'compute (FLOPs)':>15} | {'best model':>10} {'params':>9} {'tokens/param':>12} "
            f"| {'val loss':>8}"
        ]
        for r in self.frontier:
            lines.append(
                f"{r['compute']:>15.1e} | {r['label']:>10} {r['params']:>9,} "
                f"{r['tokens'] / r['params']:>12.1f} | {r['val_loss']:>8.3f}"
            )
        p, f = self.power, self.floored
        lines += [
            "",
            f"L = a C^-alpha:      alpha = {p.alpha:.3f}, rms error of ln L {p.rmse:.3f}, "
            f"AIC {p.aic:.1f}",
            f"L = E + a C^-alpha:  alpha = {f.alpha:.3f}, E = {f.floor:.2f}, "
            f"rms error of ln L {f.rmse:.3f}, AIC {f.aic:.1f}",
        ]
        return "\n".join(lines)


def scaling_study(grid: dict | None = None, bench: dict | None = None) -> ScalingStudy:
    """Chapter 1's measurement: the compute-efficient frontier of the course's training runs
    and the power laws fitted to it.

    grid: the IsoFLOP grid of ``benchmarks/scaling_runs.py`` (default: the stored
    ``results/scaling.json``; its ``runs`` carry ``budget``, ``compute``, ``val_loss``,
    ``params``, ``tokens``, ``n_layer`` and ``d_model``); bench: the training benchmark's
    results (default ``results/train_bench.json``), whose runs are the course's
    configurations, their compute counted by ``training_compute``. Keeps the best grid run
    per budget (``isoflop_minima``), the frontier of those and the configurations together
    (``pareto_frontier``), and fits ``fit_power_law`` and ``fit_power_law_with_floor`` to
    it. The inputs are not changed (the points are copies)."""
    grid = load_scaling_runs() if grid is None else grid
    bench = load_scaling_runs("train_bench.json") if bench is None else bench
    for name, data in (("grid", grid), ("bench", bench)):
        if not isinstance(data, dict) or not data.get("runs"):
            raise ValueError(
                f"scaling_study: {name} has no runs; give a results dict with a non-empty "
                "'runs' (as load_scaling_runs returns)."
            )
    try:
        runs = [dict(r, label=f"{r['n_layer']} x {r['d_model']}") for r in grid["runs"]]
    except KeyError as e:
        raise ValueError(
            f"scaling_study: a grid run has no {e}; pass the results of benchmarks/scaling_runs.py."
        ) from None
    configs = []
    for name, r in bench["runs"].items():
        compute = training_compute(r)
        configs.append(
            {
                "label": name,
                "compute": compute,
                "val_loss": r["final_val_loss"],
                "params": r["params"],
                "tokens": _trained_tokens(r),
            }
        )
    best = isoflop_minima(runs)
    frontier = pareto_frontier(best + configs)
    C = [r["compute"] for r in frontier]
    L = [r["val_loss"] for r in frontier]
    return ScalingStudy(
        runs=runs,
        budgets=sorted({r["budget"] for r in runs}),
        configs=configs,
        best_per_budget=best,
        frontier=frontier,
        power=fit_power_law(C, L),
        floored=fit_power_law_with_floor(C, L),
        grid_only=fit_power_law([r["compute"] for r in best], [r["val_loss"] for r in best]),
    )
