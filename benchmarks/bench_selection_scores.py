"""Which held-out criterion lets GridSearchCV pick DV settings that estimate better.

``DVRenyiEstimator.score`` is the clipped bracket α/(α−1)·log mean_P e^{(α−1)g} − log mean_Q e^{αg}
of the fitted critic g on the held-out fold. It lower-bounds D_α in population for any fixed
critic, so larger is better there; on a finite fold it is biased upward where e^{αg} is
heavy-tailed under Q (Jensen: −log of a sample mean overestimates −log of its expectation), and
``GridSearchCV`` then favours the settings whose critic grows fastest
(results/point_estimates/ideas/gridsearch.md). This benchmark runs one ``GridSearchCV`` per seed
with several criteria at once (``scoring`` as a dict, ``refit=False``), fits every candidate on
the whole samples, and reports, per criterion, the median |relative error| of the candidate that
criterion picks. The criteria, each on the held-out fold with everything fitted kept fixed:

- ``bracket``: ``score`` itself;
- ``delta``: the bracket with each log-mean-exp term corrected for its first-order bias,
  E[log m̂] ≈ log m − Var(w)/(2·n·m²) for the sample mean m̂ of n values w (the delta method;
  e.g. van der Vaart 1998, "Asymptotic Statistics", Ch. 3), with the sample variance in place of
  Var(w);
- ``jackknife``: each log-mean-exp term replaced by its jackknife bias-corrected value
  n·θ̂ − (n−1)·mean_i θ̂_(−i) (Quenouille 1956; Efron & Stein 1981);
- ``held_out_bound``: the largest bonferroni certificate the critic gives on the fold
  (rdpest.stats.certificates._best_window on the fold itself: a ranking, not a valid bound);
- ``neg_loss``: minus the critic's logistic loss (each sample averaged apart, as in training; a
  proper scoring rule, minimised by the true log ratio);
- ``neg_critic_loss``: ``rdpest.neg_critic_loss``, the same loss with the critic's constant
  fitted on the fold (what the package ships as a ``scoring=`` criterion).

Two grids: ``inputs`` ({"critic_inputs": ["standard", "quadratic"]}, where the standard
candidate is the default) and ``readme`` (the README's {"hidden_layer_sizes": [(32,), (100,
100)], "learning_rate": [1e-4, 1e-3]}), on GRID_CELLS (ideas/: where quadratic inputs were much
worse than the default, and where they were better), cv=3, n = 2000 per side. ``oracle`` is the
candidate with the smallest error on each seed (no criterion can do better), ``default`` the
default settings' fit on the same samples.

Usage::

    python benchmarks/bench_selection_scores.py --grid inputs   # 6 cells x 20 seeds
    python benchmarks/bench_selection_scores.py --grid readme   # 6 cells x 20 seeds
    python benchmarks/bench_selection_scores.py --quick         # 2 cells x 3 seeds

Results: one JSON file per cell and seed under benchmarks/results/point_estimates/selection/
{grid}_cells/ (atomic writes: an interrupted run resumes), then {grid}.json and {grid}.md there.
"""

from __future__ import annotations

import argparse
import json
import sys
import warnings
from pathlib import Path

import numpy as np
from bench_point_estimates import _cell_key, _samples, cell_of, summarise
from bench_point_ideas import GRID_CELLS
from harness import check_flags, require_jobs, results_folder
from joblib import Parallel, delayed
from sklearn.model_selection import GridSearchCV, ParameterGrid
from tqdm.auto import tqdm

from rdpest import DVRenyiEstimator, neg_critic_loss
from rdpest.estimators.critics import _evaluate
from rdpest.estimators.windows import _clipped_bracket
from rdpest.stats.certificates import _best_window
from rdpest.stats.regions import log_mean_exp
from rdpest.utils.io import atomic_write_text

RESULTS = Path(__file__).resolve().parent / "results" / "point_estimates" / "selection"
GRIDS = {
    "inputs": {"critic_inputs": ["standard", "quadratic"]},
    "readme": {"hidden_layer_sizes": [(32,), (100, 100)], "learning_rate": [1e-4, 1e-3]},
}
CRITERIA = ("bracket", "delta", "jackknife", "held_out_bound", "neg_loss", "neg_critic_loss")
BETA = 0.05


def _log_mean_delta(x: np.ndarray) -> float:
    """log mean e^x plus its first-order bias Var(w)/(2·n·m²), w = e^x (module docstring)."""
    w = np.exp(x - x.max())
    return float(log_mean_exp(x) + w.var(ddof=1) / (2.0 * len(x) * w.mean() ** 2))


def _log_mean_jackknife(x: np.ndarray) -> float:
    """The jackknife bias-corrected log mean e^x (module docstring)."""
    top = x.max()
    w = np.exp(x - top)
    n, total = len(x), w.sum()
    # Leave-one-out sums; a point holding all the mass leaves (almost) nothing behind.
    loo = np.log(np.maximum(total - w, np.finfo(float).tiny) / (n - 1)) + top
    return float(n * log_mean_exp(x) - (n - 1) * loo.mean())


def _value(name: str, g_p, g_q, window, alpha) -> float:
    """Criterion ``name`` of critic values on the held-out fold (module docstring). Only the
    named one is computed: GridSearchCV calls each criterion's scorer apart, and the held-out
    certificate searches windows."""
    if name == "bracket":
        return _clipped_bracket(g_p, g_q, window, alpha)
    if name == "held_out_bound":
        return _best_window(g_p, g_q, alpha, BETA, "betting")[1]
    if name == "neg_loss":
        return -0.5 * float(np.logaddexp(0, -g_p).mean() + np.logaddexp(0, g_q).mean())
    log_mean = {"delta": _log_mean_delta, "jackknife": _log_mean_jackknife}[name]
    lo, hi = window
    cp, cq = np.clip(g_p, lo, hi), np.clip(g_q, lo, hi)
    return alpha / (alpha - 1.0) * log_mean((alpha - 1.0) * cp) - log_mean(alpha * cq)


def _criterion(name: str):
    """A scikit-learn scorer: ``name``'s value on the held-out fold, the larger of the fitted
    directions' (as ``score``)."""

    def scorer(estimator, X, Y) -> float:
        P, Q = estimator._validate_samples(X, Y, reset=False)
        values = []
        for direction in estimator.directions_:
            A, B = (P, Q) if direction == "forward" else (Q, P)
            critic = estimator.critics_[direction]
            g_p, g_q = _evaluate(critic, A), _evaluate(critic, B)
            window = estimator.critic_ranges_[direction]
            values.append(_value(name, g_p, g_q, window, estimator.alpha))
        return float(max(values))

    return scorer


def _label(params: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(params.items()))


def grid_seed(grid: str, family: str, alpha: float, divergence: float, n: int, seed: int, out):
    """One seed: the search's mean held-out criteria and every candidate's full fit."""
    path = out / f"{grid}_cells" / f"{family}_{alpha:g}_{divergence:g}_{n}_{seed}.json"
    if path.exists():
        return json.loads(path.read_text())
    X, Y, truth, _ = _samples(family, alpha, divergence, n, seed)
    scoring = {name: _criterion(name) for name in CRITERIA[:-1]}
    scoring["neg_critic_loss"] = neg_critic_loss
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        base = DVRenyiEstimator(alpha=alpha, random_state=seed)
        search = GridSearchCV(base, GRIDS[grid], scoring=scoring, refit=False, cv=3)
        search.fit(X, Y)
        row = {**_cell_key(family, alpha, divergence, n, seed, truth), "candidates": {}}
        defaults = base.get_params()
        for i, params in enumerate(search.cv_results_["params"]):
            fitted = DVRenyiEstimator(alpha=alpha, random_state=seed, **params).fit(X, Y)
            row["candidates"][_label(params)] = {
                "estimate": float(fitted.divergence_),
                **{c: float(search.cv_results_[f"mean_test_{c}"][i]) for c in CRITERIA},
            }
            if all(defaults[k] == v for k, v in params.items()):
                row["default"] = float(fitted.divergence_)  # the same fit: same seed, same settings
        if "default" not in row:
            row["default"] = float(base.fit(X, Y).divergence_)
    atomic_write_text(path, json.dumps(row, indent=1))
    return row


def _picks(row: dict) -> dict:
    """Per criterion (and the per-seed oracle), the picked candidate's label."""
    cands = row["candidates"]
    picks = {c: max(cands, key=lambda k, c=c: cands[k][c]) for c in CRITERIA}
    picks["oracle"] = min(cands, key=lambda k: abs(cands[k]["estimate"] - row["truth"]))
    return picks


def table(grid: str, rows: list[dict], command: str) -> tuple[list[dict], str]:
    labels = [_label(p) for p in ParameterGrid(GRIDS[grid])]
    flat = []
    for r in rows:
        picks = _picks(r)
        flat.append(
            {
                **{k: r[k] for k in ("family", "alpha", "divergence", "n", "seed", "truth")},
                "default": r["default"],
                **{c: r["candidates"][picks[c]]["estimate"] for c in (*CRITERIA, "oracle")},
                **{f"fixed {k}": r["candidates"][k]["estimate"] for k in labels},
                **{f"pick_{c}": picks[c] for c in CRITERIA},
            }
        )
    columns = ("default", *CRITERIA, "oracle", *(f"fixed {k}" for k in labels))
    summary = summarise(flat, columns)
    lines = [
        f"# GridSearchCV's selection criterion on the {grid!r} grid {GRIDS[grid]}",
        "",
        f"Command: `{command}`. Per cell (seeds as stated, n per side, cv=3): the median "
        "|relative error| of the refit each criterion would pick (the candidate with the "
        "largest mean held-out criterion), of the default settings, of the per-seed best "
        "candidate (oracle), and of each candidate used on every seed. The last line averages "
        "the cells' medians. Criteria: see the script's docstring.",
        "",
        "| family | α | D | seeds | " + " | ".join(columns) + " |",
        "|---|---|---|---|" + "---|" * len(columns),
    ]
    for entry in summary:
        cell = cell_of(flat, entry)
        for c in CRITERIA:
            entry[f"picks_{c}"] = {k: sum(r[f"pick_{c}"] == k for r in cell) for k in labels}
        lines.append(
            f"| {entry['family']} | {entry['alpha']:g} | {entry['divergence']:g} | "
            f"{entry['seeds']} | " + " | ".join(f"{entry[c]:.3f}" for c in columns) + " |"
        )
    means = [np.mean([e[c] for e in summary]) for c in columns]
    lines.append("| mean | | | | " + " | ".join(f"{m:.3f}" for m in means) + " |")
    lines += ["", "Picks per criterion (seeds per candidate, in the grid's order):", ""]
    for entry in summary:
        picks = "; ".join(
            f"{c} " + "/".join(str(v) for v in entry[f"picks_{c}"].values()) for c in CRITERIA
        )
        lines.append(f"- {entry['family']} α {entry['alpha']:g} D {entry['divergence']:g}: {picks}")
    lines.append(f"\nCandidates in order: {'; '.join(labels)}.")
    return summary, "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--grid", choices=sorted(GRIDS), default="inputs")
    parser.add_argument(
        "--quick",
        action="store_true",
        help="a small check, written under benchmarks/results/quick/ unless --out is given",
    )
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--n-jobs", type=int, default=2)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    check_flags(parser, args, quick_sets=("seeds",))
    args.out = results_folder(args.out, RESULTS, args.quick)
    cells = GRID_CELLS[:2] if args.quick else GRID_CELLS
    seeds = 3 if args.quick else args.seeds
    jobs = [(*cell, args.n, seed) for cell in cells for seed in range(seeds)]
    require_jobs(jobs)
    rows = Parallel(n_jobs=args.n_jobs, return_as="generator_unordered")(
        delayed(grid_seed)(args.grid, *job, args.out) for job in jobs
    )
    rows = list(tqdm(rows, total=len(jobs), desc=f"{args.grid}: cells x seeds"))
    command = "python benchmarks/bench_selection_scores.py " + " ".join(
        argv if argv is not None else sys.argv[1:]
    )
    summary, text = table(args.grid, rows, command.strip())
    atomic_write_text(args.out / f"{args.grid}.json", json.dumps(summary, indent=1))
    atomic_write_text(args.out / f"{args.grid}.md", text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
