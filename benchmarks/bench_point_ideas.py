"""Point-estimate ideas measured on the same samples: which of them would help DV, and where.

Every seed of a cell (family, α, D, n per side) fits ``DVRenyiEstimator`` with its defaults
once, with a probe on its folds (the certified fold and the reverse, point-only fold): on each
fold's training rows the probe also trains the critic the fold would train under
``critic_inputs="quadratic"`` (same seed, so the same fit/validation split), and records, for
both critics, the fold's clipped bracket on the held-out rows and two held-out criteria on the
fold's validation rows (the rows that early stopping watched; never the certifying rows). From
these, each column below is a point estimate (the mean over the two folds, as the default's):

- ``default``: the defaults' ``divergence_`` (the standard critic's folds);
- ``quadratic``: the quadratic critic's folds;
- ``by_val_loss``: per fold, the critic with the lower validation loss (the logistic loss that
  early stopping minimises: a proper scoring rule, minimised by the true log ratio);
- ``by_val_bracket``: per fold, the critic with the larger clipped bracket
  α/(α−1)·log mean_P e^{(α−1)g} − log mean_Q e^{αg} on the validation rows (a lower bound on
  D_α in population for any fixed critic, so larger is better there);
- ``mean_inputs``: the mean of the two critics' estimates;
- ``calibrated``: the standard critic times a slope s fitted on the validation rows, s from the
  logistic regression of membership on g (Platt scaling, Platt 1999, "Probabilistic outputs for
  support vector machines"; the intercept is left out because the bracket does not change when a
  constant is added to g);
- ``patience60`` / ``weight_decay0``: separate fits with ``n_iter_no_change=60`` and
  ``weight_decay=0`` (same seed);

beside the exact log ratio's columns (``oracle_all``, ``floor``, ``floor_q``: see
bench_point_estimates.exact_columns), each fit's certified bound, and the fit time of the
separate fits against a plain default fit on the same samples (which must equal the probed
fit's ``divergence_``: a check that the probe changed nothing).

``--grid-search`` measures the tuning route scikit-learn users reach for: on the cells in
GRID_CELLS, ``GridSearchCV(DVRenyiEstimator(alpha=α), {"critic_inputs": ["standard",
"quadratic"]}, cv=3)`` fitted on the same samples, which compares the candidates by their mean
``score`` (the clipped bracket of the fitted critic on the held-out fold); it records the pick, the
refit's ``divergence_`` and each candidate's mean held-out score (gridsearch.json and
gridsearch.md).

Usage::

    python benchmarks/bench_point_ideas.py                  # the cells in CELLS, 20 seeds, n = 2000
    python benchmarks/bench_point_ideas.py --quick          # two cells, 3 seeds
    python benchmarks/bench_point_ideas.py --grid-search    # GRID_CELLS, 20 seeds, n = 2000

Results: one JSON file per cell and seed under benchmarks/results/point_estimates/ideas/cells/
(grid_cells/ for ``--grid-search``; atomic writes: an interrupted run resumes), then
results.json and results.md there.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import torch
from bench_point_estimates import (
    EXACT_COLUMNS,
    _cell_key,
    _cell_path,
    _samples,
    bound_columns,
    cell_of,
    exact_columns,
    summarise,
    target_met,
)
from harness import check_flags, require_jobs, results_folder
from joblib import Parallel, delayed
from scipy.optimize import minimize_scalar
from sklearn.model_selection import GridSearchCV
from tqdm.auto import tqdm

from rdpest import DVRenyiEstimator
from rdpest.estimators.critics import _classifier_loss
from rdpest.estimators.splits import split_indices
from rdpest.estimators.windows import _clipped_bracket, point_estimate_window
from rdpest.utils.io import atomic_write_text

RESULTS = Path(__file__).resolve().parent / "results" / "point_estimates" / "ideas"
# Cells where the default misses its target while the exact log ratio meets it, cells where
# critic_inputs="quadratic" won or lost in ../critic_inputs/, and cells the default gets right.
CELLS = (
    ("gaussian_scale", 1.25, 1.0),
    ("gaussian_scale", 2.0, 1.0),
    ("subsampled_gaussian", 2.0, 1.0),
    ("subsampled_gaussian", 2.0, 4.0),
    ("subsampled_gaussian", 4.0, 4.0),
    ("multivariate_gaussian", 1.25, 4.0),
    ("multivariate_gaussian", 2.0, 1.0),
    ("multivariate_gaussian", 2.0, 4.0),
    ("multivariate_gaussian", 4.0, 1.0),
    ("student_t_shift", 1.25, 4.0),
    ("student_t_shift", 2.0, 1.0),
    ("student_t_shift", 4.0, 4.0),
    ("laplace_shift", 1.25, 4.0),
    ("laplace_shift", 2.0, 1.0),
    ("laplace_scale", 1.25, 1.0),
    ("laplace_scale", 1.25, 4.0),
    ("gaussian_shift", 2.0, 1.0),
    ("gaussian_shift", 2.0, 4.0),
    ("exponential_rate", 2.0, 1.0),
    ("gaussian_mixture", 2.0, 1.0),
)
# Where quadratic inputs were much worse than the default in CELLS (the first four) and much
# better (the last two).
GRID_CELLS = (
    ("laplace_scale", 1.25, 1.0),
    ("gaussian_mixture", 2.0, 1.0),
    ("multivariate_gaussian", 2.0, 4.0),
    ("student_t_shift", 4.0, 4.0),
    ("gaussian_scale", 1.25, 1.0),
    ("subsampled_gaussian", 2.0, 4.0),
)
GRID = {"critic_inputs": ["standard", "quadratic"]}
PROBED = ("default", "quadratic", "by_val_loss", "by_val_bracket", "mean_inputs", "calibrated")
SEPARATE = {"patience60": {"n_iter_no_change": 60}, "weight_decay0": {"weight_decay": 0.0}}
COLUMNS = (*PROBED, *SEPARATE)


def platt_slope(g_p: np.ndarray, g_q: np.ndarray) -> float:
    """The slope s of the logistic regression of membership (P: 1, Q: 0) on s·g + b, each
    sample's loss averaged apart (as the critic's training loss)."""

    def loss(s: float) -> float:
        # Profile out the intercept: for each slope, the best b by a bounded 1-D search.
        def at(b: float) -> float:
            return float(
                np.mean(np.logaddexp(0.0, -(s * g_p + b))) + np.mean(np.logaddexp(0.0, s * g_q + b))
            )

        return minimize_scalar(at, bounds=(-50.0, 50.0), method="bounded").fun

    return float(minimize_scalar(loss, bounds=(0.05, 20.0), method="bounded").x)


def _fold_record(est, result, p_train, q_train, seed) -> dict:
    """One critic's fold: its point estimate and the held-out criteria on its validation rows."""
    _, history, g, window, point = result
    # The validation rows of DVRenyiEstimator._train_critic (the same draws from its seed); the
    # check below fails if they ever stop being the rows early stopping watched.
    rng = np.random.default_rng(seed)
    _, val_p = split_indices(len(p_train), est._n_validation(len(p_train)), rng)
    _, val_q = split_indices(len(q_train), est._n_validation(len(q_train)), rng)
    gp, gq = g[0][val_p], g[1][val_q]
    val_loss = float(_classifier_loss(torch.as_tensor(gp), torch.as_tensor(gq)))
    best = min(h["validation_loss"] for h in history)
    if not np.isclose(val_loss, best, rtol=1e-4, atol=1e-5):
        raise RuntimeError(f"validation rows out of step with the estimator: {val_loss} vs {best}")
    alpha = float(est.alpha)
    slope = platt_slope(gp, gq)
    # The scaled critic's own window, by the estimator's rule on its training values.
    scaled_window = point_estimate_window(slope * g[0], slope * g[1], alpha, est.point_window)
    return {
        "point": float(point),
        "val_loss": val_loss,
        "val_bracket": float(_clipped_bracket(gp, gq, window, alpha)),
        "slope": slope,
        "calibrated": float(_clipped_bracket(slope * g[2], slope * g[3], scaled_window, alpha)),
    }


def probed_fit(X, Y, alpha: float, seed: int) -> tuple[DVRenyiEstimator, list[dict]]:
    """The default fit, each fold also training the quadratic critic (module docstring)."""
    est = DVRenyiEstimator(alpha=alpha, random_state=seed)
    folds: list[dict] = []
    fit_fold = est._fit_fold

    def probe(p_train, q_train, p_test, q_test, fold_seed):
        result = fit_fold(p_train, q_train, p_test, q_test, fold_seed)
        record = {"standard": _fold_record(est, result, p_train, q_train, fold_seed)}
        est.critic_inputs = "quadratic"
        try:
            other = fit_fold(p_train, q_train, p_test, q_test, fold_seed)
        finally:
            est.critic_inputs = "standard"
        record["quadratic"] = _fold_record(est, other, p_train, q_train, fold_seed)
        folds.append(record)
        return result

    est._fit_fold = probe  # the instance attribute shadows the method for this fit only
    est.fit(X, Y)
    return est, folds


def probed_columns(folds: list[dict]) -> dict:
    """Each PROBED column from the folds' records (the mean over folds, as the default's)."""

    def mean(pick) -> float:
        return float(np.mean([pick(f) for f in folds]))

    return {
        "quadratic": mean(lambda f: f["quadratic"]["point"]),
        "by_val_loss": mean(lambda f: min(f.values(), key=lambda r: r["val_loss"])["point"]),
        "by_val_bracket": mean(lambda f: max(f.values(), key=lambda r: r["val_bracket"])["point"]),
        "mean_inputs": mean(lambda f: (f["standard"]["point"] + f["quadratic"]["point"]) / 2),
        "calibrated": mean(lambda f: f["standard"]["calibrated"]),
        "picked_quadratic_by_loss": mean(
            lambda f: f["quadratic"]["val_loss"] < f["standard"]["val_loss"]
        ),
        "picked_quadratic_by_bracket": mean(
            lambda f: f["quadratic"]["val_bracket"] > f["standard"]["val_bracket"]
        ),
        "slope": mean(lambda f: f["standard"]["slope"]),
    }


def _timed_fit(X, Y, alpha: float, seed: int, **params) -> tuple[DVRenyiEstimator, float]:
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = DVRenyiEstimator(alpha=alpha, random_state=seed, **params).fit(X, Y)
    return est, time.perf_counter() - start


def one_seed(family: str, alpha: float, divergence: float, n: int, seed: int, out: Path) -> dict:
    """Every column of one seed; the row is written atomically."""
    path = _cell_path(out, family, alpha, divergence, n, seed)
    if path.exists():
        return json.loads(path.read_text())
    X, Y, truth, log_ratio = _samples(family, alpha, divergence, n, seed)
    row = {**_cell_key(family, alpha, divergence, n, seed, truth)}
    row.update(exact_columns(log_ratio(X), log_ratio(Y), alpha))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        probed, folds = probed_fit(X, Y, alpha, seed)
    plain, seconds = _timed_fit(X, Y, alpha, seed)
    if plain.divergence_ != probed.divergence_ or plain.lower_bound_ != probed.lower_bound_:
        raise RuntimeError("the probe changed the default fit's results")
    row.update(default=float(plain.divergence_), default_bound=float(plain.lower_bound_))
    row["default_seconds"] = seconds
    row.update(probed_columns(folds))
    for name, params in SEPARATE.items():
        est, seconds = _timed_fit(X, Y, alpha, seed, **params)
        row[name], row[f"{name}_bound"] = float(est.divergence_), float(est.lower_bound_)
        row[f"{name}_seconds"] = seconds
    atomic_write_text(path, json.dumps(row, indent=1))
    return row


def summary_of(rows: list[dict]) -> list[dict]:
    """bench_point_estimates.summarise's error columns, with the bounds, the choice rules' picks
    and the separate fits' time ratios."""
    rows = sorted(rows, key=lambda r: (r["family"], r["alpha"], r["divergence"], r["seed"]))
    summary = summarise(rows, (*COLUMNS, *EXACT_COLUMNS))
    for entry in summary:
        cell = cell_of(rows, entry)
        bound_columns(entry, cell, ("default", *SEPARATE))
        for name in SEPARATE:
            ratios = [r[f"{name}_seconds"] / r["default_seconds"] for r in cell]
            entry[f"{name}_time_ratio"] = float(np.median(ratios))
        for name in ("picked_quadratic_by_loss", "picked_quadratic_by_bracket", "slope"):
            entry[name] = float(np.mean([r[name] for r in cell]))
        for name in COLUMNS:
            entry[f"{name}_met"] = target_met({**entry, "cross_fit": entry[name]})
    return summary


def table(summary: list[dict], command: str) -> str:
    lines = [
        "# Point-estimate ideas for DV, on the same samples",
        "",
        f"Command: `{command}`. Each cell: median |relative error| over the seeds (median signed "
        "error in brackets; `*`: the cell's target, max(2 × min(floor, floor_q), 0.05), is met). "
        "Columns: see the script's docstring. `picks`: the share of folds where the choice by "
        "validation loss / by validation bracket took the quadratic critic. `slope`: the mean "
        "Platt slope of the standard critic. `bounds`: mean certified bound of the default / "
        "patience60 / weight_decay0 fits, with the number of seeds above the truth. `time`: "
        "median fit time of patience60 / weight_decay0 over the default's, paired by seed.",
        "",
        "| family | α | D | n | seeds | "
        + " | ".join((*COLUMNS, "oracle_all", "floor"))
        + " | picks | slope | bounds | time |",
        "|" + "---|" * (5 + len(COLUMNS) + 2 + 4),
    ]
    for e in summary:
        cols = [
            f"{e[c]:.3f} ({e[c + '_bias']:+.2f}){'*' if e[c + '_met'] else ''}" for c in COLUMNS
        ]
        cols += [f"{e[c]:.3f}" for c in ("oracle_all", "floor")]
        picks = f"{e['picked_quadratic_by_loss']:.2f} / {e['picked_quadratic_by_bracket']:.2f}"
        bounds = " / ".join(
            f"{e[s + '_bound']:.3f} [{e[s + '_misses']}]" for s in ("default", *SEPARATE)
        )
        times = " / ".join(f"{e[s + '_time_ratio']:.2f}" for s in SEPARATE)
        head = f"| {e['family']} | {e['alpha']:g} | {e['divergence']:g} | {e['n']} | {e['seeds']}"
        lines.append(
            f"{head} | {' | '.join(cols)} | {picks} | {e['slope']:.2f} | {bounds} | {times} |"
        )
    lower = {c: sum(e[c] < e["default"] for e in summary) for c in COLUMNS if c != "default"}
    higher = {c: sum(e[c] > 1.1 * e["default"] for e in summary) for c in COLUMNS if c != "default"}
    mean_error = {c: float(np.mean([e[c] for e in summary])) for c in COLUMNS}
    met = {c: sum(e[c + "_met"] for e in summary) for c in COLUMNS}
    lines += ["", f"Cells: {len(summary)}.", ""]
    lines += ["| column | cells below default | cells > 1.1 × default | targets met | mean error |"]
    lines += ["|---|---|---|---|---|"]
    for c in COLUMNS:
        below = lower.get(c, "")
        above = higher.get(c, "")
        lines.append(f"| {c} | {below} | {above} | {met[c]} | {mean_error[c]:.3f} |")
    return "\n".join(lines) + "\n"


def grid_seed(family: str, alpha: float, divergence: float, n: int, seed: int, out: Path) -> dict:
    """GridSearchCV over GRID on one seed's samples (module docstring); written atomically."""
    path = out / "grid_cells" / _cell_path(out, family, alpha, divergence, n, seed).name
    if path.exists():
        return json.loads(path.read_text())
    X, Y, truth, _ = _samples(family, alpha, divergence, n, seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        search = GridSearchCV(DVRenyiEstimator(alpha=alpha, random_state=seed), GRID, cv=3)
        search.fit(X, Y)
    row = {**_cell_key(family, alpha, divergence, n, seed, truth)}
    row["picked"] = search.best_params_["critic_inputs"]
    row["estimate"] = float(search.best_estimator_.divergence_)
    for params, score in zip(
        search.cv_results_["params"], search.cv_results_["mean_test_score"], strict=True
    ):
        row[f"score_{params['critic_inputs']}"] = float(score)
    atomic_write_text(path, json.dumps(row, indent=1))
    return row


def grid_table(rows: list[dict], command: str) -> tuple[list[dict], str]:
    """Per cell: how often the search picked quadratic inputs, the refit's error, and each
    candidate's mean held-out score beside the truth."""
    rows = sorted(rows, key=lambda r: (r["family"], r["alpha"], r["divergence"], r["seed"]))
    summary = summarise(rows, ("estimate",))
    lines = [
        "# GridSearchCV over critic_inputs: what the held-out score picks",
        "",
        f"Command: `{command}`. Per cell (20 seeds unless stated): the share of seeds where "
        '`GridSearchCV(..., cv=3)` picked `critic_inputs="quadratic"`, the median |relative '
        "error| of the refit's `divergence_` (median signed error in brackets), and each "
        "candidate's held-out score (the mean over folds, then over seeds) beside the truth. "
        "Compare the errors of the two settings in results.md.",
        "",
        "| family | α | D | n | seeds | picked quadratic | refit error | score standard | "
        "score quadratic | truth |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for entry in summary:
        cell = cell_of(rows, entry)
        entry["truth"] = truth = cell[0]["truth"]
        entry["picked_quadratic"] = float(np.mean([r["picked"] == "quadratic" for r in cell]))
        for name in GRID["critic_inputs"]:
            entry[f"score_{name}"] = float(np.mean([r[f"score_{name}"] for r in cell]))
        lines.append(
            f"| {entry['family']} | {entry['alpha']:g} | {entry['divergence']:g} | {entry['n']} "
            f"| {entry['seeds']} | {entry['picked_quadratic']:.2f} | {entry['estimate']:.3f} "
            f"({entry['estimate_bias']:+.2f}) | {entry['score_standard']:.3f} | "
            f"{entry['score_quadratic']:.3f} | {truth:.3f} |"
        )
    return summary, "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--quick",
        action="store_true",
        help="a small check, written under benchmarks/results/quick/ unless --out is given",
    )
    parser.add_argument("--grid-search", action="store_true")
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--n-jobs", type=int, default=2)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    check_flags(parser, args, quick_sets=("seeds",))
    args.out = results_folder(args.out, RESULTS, args.quick)
    cells = GRID_CELLS if args.grid_search else CELLS
    cells = cells[:2] if args.quick else cells
    seeds = 3 if args.quick else args.seeds
    jobs = [(*cell, args.n, seed) for cell in cells for seed in range(seeds)]
    require_jobs(jobs)
    task = grid_seed if args.grid_search else one_seed
    rows = Parallel(n_jobs=args.n_jobs, return_as="generator_unordered")(
        delayed(task)(*job, args.out) for job in jobs
    )
    rows = list(tqdm(rows, total=len(jobs), desc="cells x seeds"))
    command = "python benchmarks/bench_point_ideas.py " + " ".join(
        argv if argv is not None else sys.argv[1:]
    )
    if args.grid_search:
        summary, text = grid_table(rows, command.strip())
        atomic_write_text(args.out / "gridsearch.json", json.dumps(summary, indent=1))
        atomic_write_text(args.out / "gridsearch.md", text)
        print(text)
        return 0
    summary = summary_of(rows)
    text = table(summary, command.strip())
    atomic_write_text(args.out / "results.json", json.dumps(summary, indent=1))
    atomic_write_text(args.out / "results.md", text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
