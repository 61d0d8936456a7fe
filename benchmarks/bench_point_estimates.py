"""Where DVRenyiEstimator's point-estimate error comes from: the critic, or the bracket itself.

For every cell (family, α, D, n per side) and seed, on the same samples and the estimator's own
train/certify split, it records the relative error of

- ``dv``: ``DVRenyiEstimator`` with its defaults (``divergence_``: the clipped bracket
  α/(α−1)·log mean_P e^{(α−1)g} − log mean_Q e^{αg} of the trained critic g on the certifying
  half);
- ``oracle_bracket``: the same bracket with the EXACT log ratio L = log p/q in place of g, on the
  same certifying half: what DV would give with a perfect critic;
- ``oracle_all``: that bracket on the whole samples: what a perfect critic would give if every
  point also estimated (cross-fitting);
- ``floor_half`` / ``floor``: the P-form plug-in 1/(α−1)·log mean_P e^{(α−1)L} with the exact L on
  the certifying half / on the whole P sample (the sampling floor of the known-divergence
  benchmark);
- ``pform``: the P-form plug-in with the trained critic, normalised on Q (g − log mean_Q e^g), on
  the certifying half;
- ``ensemble4``: the bracket of the mean of 4 critics trained on the same half (other seeds);
- ``crossfit2``: the mean of the bracket on the certifying half and that of a second critic,
  trained on the certifying half, on the training half (every point estimates once).

The bracket with the exact log ratio is α·D̂_P − (α−1)·D̂_Q to first order, with D̂_P and D̂_Q
the P- and Q-form plug-ins of the two samples: its sampling error is that of both, amplified by
α and α−1, which a better critic cannot remove. It is no accident: with I = ∫ p^α q^{1−α}, the
influence function of I is α·(r^{α−1}(x) − I) on P and (1−α)·(r^α(y) − I) on Q, r = p/q (the von
Mises expansion of Kandasamy et al. 2015, "Nonparametric von Mises estimators for entropies,
divergences and mutual informations", applied to this functional), so no estimator that does
not know r has a smaller asymptotic variance than α²·Var_P(r^{α−1})/n_P + (α−1)²·Var_Q(r^α)/n_Q
(over ((α−1)·I)² for D_α), while the P-form plug-in with r known has Var_P(r^{α−1})/n_P: at least
α times the floor's standard deviation, plus the Q term. ``oracle_all`` estimates what that bound
allows on these samples.

Usage::

    python benchmarks/bench_point_estimates.py            # 6 families, α = 2 and 8, D = 1, n = 2000
    python benchmarks/bench_point_estimates.py --quick    # one family, α = 2, 4 seeds

Results: one JSON file per seed under benchmarks/results/point_estimates/cells/ (atomic writes:
an interrupted run resumes), then results.json and results.md.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
from joblib import Parallel, delayed
from tqdm.auto import tqdm

from rdpest import DVRenyiEstimator
from rdpest.datasets import family_parameters, log_likelihood_ratio, make_renyi_pair
from rdpest.estimators.dv import _clipped_bracket, _evaluate
from rdpest.stats.certificates import _dv_bracket
from rdpest.stats.regions import log_mean_exp
from rdpest.utils.io import atomic_write_text

RESULTS = Path(__file__).resolve().parent / "results" / "point_estimates"
FAMILIES = (
    "gaussian_shift",
    "exponential_rate",
    "poisson_rate",
    "student_t_shift",
    "multivariate_gaussian",
    "gaussian_mixture",
)
COLUMNS = (
    "dv",
    "oracle_bracket",
    "oracle_all",
    "floor_half",
    "floor",
    "pform",
    "ensemble4",
    "crossfit2",
)


def _range(g_p, g_q) -> tuple[float, float]:
    return float(min(g_p.min(), g_q.min())), float(max(g_p.max(), g_q.max()))


def one_seed(family: str, alpha: float, divergence: float, n: int, seed: int, out: Path):
    """All columns for one seed of one cell (read back if already written)."""
    path = out / "cells" / f"{family}_{alpha:g}_{divergence:g}_{n}_{seed}.json"
    if path.exists():
        return json.loads(path.read_text())
    X, Y, truth = make_renyi_pair(family, alpha, divergence, n, random_state=seed)
    L = log_likelihood_ratio(family, family_parameters(family, alpha, divergence))
    est = DVRenyiEstimator(alpha=alpha, random_state=seed).fit(X, Y)
    P, Q = (np.asarray(A, dtype=float).reshape(len(A), -1) for A in (X, Y))
    forward = est.directions_["forward"]
    test_p = np.zeros(len(P), dtype=bool)
    test_p[forward.test_index_p] = True
    test_q = np.zeros(len(Q), dtype=bool)
    test_q[forward.test_index_q] = True
    a = float(alpha)
    lp, lq = L(X[test_p]), L(Y[test_q])
    g_p, g_q = est.log_ratio(X[test_p]), est.log_ratio(Y[test_q])
    lo, hi = est.critic_ranges_["forward"]
    g_p, g_q = np.clip(g_p, lo, hi), np.clip(g_q, lo, hi)
    row = {
        "family": family,
        "alpha": a,
        "divergence": divergence,
        "n": n,
        "seed": seed,
        "truth": truth,
        "dv": est.divergence_,
        "oracle_bracket": _dv_bracket(lp, lq, a),
        "oracle_all": _dv_bracket(L(X), L(Y), a),
        "floor_half": log_mean_exp((a - 1) * lp) / (a - 1),
        "floor": log_mean_exp((a - 1) * L(X)) / (a - 1),
        "pform": log_mean_exp((a - 1) * (g_p - log_mean_exp(g_q))) / (a - 1),
    }
    rng = np.random.default_rng([seed, 17])
    critics = [est.critics_["forward"]]
    for _ in range(3):
        critics.append(est._train_critic(P[~test_p], Q[~test_q], int(rng.integers(2**31)))[0])

    def mean_critic(A):
        return np.mean([_evaluate(c, A) for c in critics], axis=0)

    window = _range(mean_critic(P[~test_p]), mean_critic(Q[~test_q]))
    row["ensemble4"] = _clipped_bracket(mean_critic(P[test_p]), mean_critic(Q[test_q]), window, a)
    second = est._train_critic(P[test_p], Q[test_q], int(rng.integers(2**31)))[0]
    window = _range(_evaluate(second, P[test_p]), _evaluate(second, Q[test_q]))
    other = _clipped_bracket(
        _evaluate(second, P[~test_p]), _evaluate(second, Q[~test_q]), window, a
    )
    row["crossfit2"] = 0.5 * (est.divergence_ + other)
    atomic_write_text(path, json.dumps(row))
    return row


def summarise(rows: list[dict]) -> list[dict]:
    cells: dict[tuple, list[dict]] = {}
    for r in rows:
        cells.setdefault((r["family"], r["alpha"], r["divergence"], r["n"]), []).append(r)
    summary = []
    for (family, alpha, divergence, n), rs in sorted(cells.items()):
        truth = np.array([r["truth"] for r in rs])
        entry = {"family": family, "alpha": alpha, "divergence": divergence, "n": n}
        entry["seeds"] = len(rs)
        for column in COLUMNS:
            error = (np.array([r[column] for r in rs]) - truth) / truth
            entry[column] = float(np.median(np.abs(error)))
            entry[column + "_bias"] = float(np.median(error))
        summary.append(entry)
    return summary


def table(summary: list[dict], command: str) -> str:
    lines = [
        "# Point estimates: the critic's error against the bracket's own",
        "",
        f"Command: `{command}`. Median relative error over seeds (median signed error in "
        "brackets); every column on the same samples and the estimator's own split. Columns: "
        "see the script's docstring (`oracle_bracket`: DV's bracket with the exact log ratio; "
        "`floor`: the P-form plug-in with the exact log ratio on all of P).",
        "",
        "| family | α | D | n | seeds | " + " | ".join(COLUMNS) + " |",
        "|---|---|---|---|---|" + "---|" * len(COLUMNS),
    ]
    for e in summary:
        cells = " | ".join(f"{e[c]:.3f} ({e[c + '_bias']:+.2f})" for c in COLUMNS)
        lines.append(
            f"| {e['family']} | {e['alpha']:g} | {e['divergence']:g} | {e['n']} | {e['seeds']} "
            f"| {cells} |"
        )
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--alphas", type=float, nargs="+", default=[2.0, 8.0])
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--n-jobs", type=int, default=2)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    families, alphas, seeds = FAMILIES, args.alphas, args.seeds
    if args.quick:
        families, alphas, seeds = FAMILIES[:1], [2.0], 4
    jobs = [(f, a, 1.0, args.n, s) for f in families for a in alphas for s in range(seeds)]
    rows = Parallel(n_jobs=args.n_jobs, return_as="generator")(
        delayed(one_seed)(*job, args.out) for job in jobs
    )
    rows = list(tqdm(rows, total=len(jobs), desc="seeds"))
    summary = summarise(rows)
    command = "python benchmarks/bench_point_estimates.py " + " ".join(argv or sys.argv[1:])
    atomic_write_text(args.out / "results.json", json.dumps(summary, indent=2))
    text = table(summary, command.strip())
    atomic_write_text(args.out / "results.md", text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
