"""Where DVRenyiEstimator's point-estimate error comes from: the critic, or the bracket itself.

For every cell (family, α, D, n per side) and seed, on the same samples and the estimator's own
train/certify split, it records the relative error of

- ``dv``: ``DVRenyiEstimator`` with its defaults but ``point_estimate="split"`` (``divergence_``:
  the clipped bracket α/(α−1)·log mean_P e^{(α−1)g} − log mean_Q e^{αg} of the trained critic g
  on the certifying half; the default before cross-fitted points);
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

``--cross-fit`` measures what ``DVRenyiEstimator(point_estimate="cross_fit")`` gives against the
split estimate, from one fit per seed (``diagnostics.fold_points``: the certified fold's bracket
is the split estimate, the mean with the reverse fold's the cross-fitted one), with the exact-L
columns ``oracle_all`` and ``floor`` / ``floor_q`` (the P- and Q-form plug-ins on all samples)
and the certified bound (the same under both settings). Its grid is set with ``--families``,
``--alphas``, ``--divergences`` and ``--n``; results under
benchmarks/results/point_estimates/cross_fit/. ``--fit-time`` times both settings on the same
samples in one process, one fit at a time (fit_time.json and fit_time.md there).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
from harness import (
    check_flags,
    output_folder,
    refuse_foreign_cells,
    require_jobs,
    results_folder,
    write_json,
)
from joblib import Parallel, delayed
from tqdm.auto import tqdm

from rdpest import DVRenyiEstimator
from rdpest.datasets import family_parameters, log_likelihood_ratio, make_renyi_pair
from rdpest.estimators.critics import _evaluate
from rdpest.estimators.windows import _clipped_bracket
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


def _cell_path(out: Path, family: str, alpha: float, divergence: float, n: int, seed: int):
    return out / "cells" / f"{family}_{alpha:g}_{divergence:g}_{n}_{seed}.json"


def _samples(family: str, alpha: float, divergence: float, n: int, seed: int):
    """One seed's samples, the true divergence and the exact log ratio."""
    X, Y, truth = make_renyi_pair(family, alpha, divergence, n, random_state=seed)
    return X, Y, truth, log_likelihood_ratio(family, family_parameters(family, alpha, divergence))


def _cell_key(family: str, alpha: float, divergence: float, n: int, seed: int, truth: float):
    return {
        "family": family,
        "alpha": alpha,
        "divergence": divergence,
        "n": n,
        "seed": seed,
        "truth": truth,
    }


def one_seed(family: str, alpha: float, divergence: float, n: int, seed: int, out: Path):
    """All columns for one seed of one cell (read back if already written)."""
    path = _cell_path(out, family, alpha, divergence, n, seed)
    if path.exists():
        return json.loads(path.read_text())
    X, Y, truth, L = _samples(family, alpha, divergence, n, seed)
    est = DVRenyiEstimator(alpha=alpha, random_state=seed, point_estimate="split").fit(X, Y)
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
        **_cell_key(family, a, divergence, n, seed, truth),
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


CROSS_FIT_COLUMNS = ("split", "cross_fit", "projected", "oracle_all", "floor", "floor_q")
#: The exact log ratio's columns on all rows (see exact_columns).
EXACT_COLUMNS = ("oracle_all", "floor", "floor_q")


def exact_columns(lp: np.ndarray, lq: np.ndarray, alpha: float) -> dict:
    """The exact log ratio L's estimates from its values lp on P's rows and lq on Q's: the
    bracket ``oracle_all`` and the P- and Q-form plug-ins ``floor`` / ``floor_q``."""
    a = float(alpha)
    return {
        "oracle_all": _dv_bracket(lp, lq, a),
        "floor": log_mean_exp((a - 1) * lp) / (a - 1),
        "floor_q": log_mean_exp(a * lq) / (a - 1),
    }


def cross_fit_seed(family: str, alpha: float, divergence: float, n: int, seed: int, out: Path):
    """The split and cross-fitted point estimates of one fit, and the exact-L columns."""
    path = _cell_path(out, family, alpha, divergence, n, seed)
    if path.exists():
        return json.loads(path.read_text())
    X, Y, truth, L = _samples(family, alpha, divergence, n, seed)
    start = time.perf_counter()
    est = DVRenyiEstimator(alpha=alpha, random_state=seed, point_estimate="cross_fit").fit(X, Y)
    seconds = time.perf_counter() - start
    diagnostics = est.directions_["forward"].diagnostics
    a = float(alpha)
    lp, lq = L(X), L(Y)
    row = {
        **_cell_key(family, a, divergence, n, seed, truth),
        "split": diagnostics.fold_points[0],
        # raw: divergence_ is this raised to the bound where below it (with_projected)
        "cross_fit": float(np.median(diagnostics.repeat_points)),
        **exact_columns(lp, lq, a),
        "lower_bound": est.lower_bound_,
        "seconds": seconds,
    }
    atomic_write_text(path, json.dumps(row))
    return row


def cell_of(rows: list[dict], entry: dict) -> list[dict]:
    """The rows of the cell (family, α, D, n) that a summary entry describes."""
    key = (entry["family"], entry["alpha"], entry["divergence"], entry["n"])
    return [r for r in rows if (r["family"], r["alpha"], r["divergence"], r["n"]) == key]


def bound_columns(entry: dict, cell: list[dict], names) -> None:
    """Adds to ``entry``, for each fit ``name`` whose rows hold ``{name}_bound``, its mean
    certified bound over the cell's rows and the number of rows where it exceeded the truth."""
    for name in names:
        bounds = np.array([r[f"{name}_bound"] for r in cell])
        entry[f"{name}_bound"] = float(bounds.mean())
        entry[f"{name}_misses"] = int((bounds > cell[0]["truth"]).sum())


def summarise(rows: list[dict], columns=COLUMNS) -> list[dict]:
    cells: dict[tuple, list[dict]] = {}
    for r in rows:
        cells.setdefault((r["family"], r["alpha"], r["divergence"], r["n"]), []).append(r)
    summary = []
    for (family, alpha, divergence, n), rs in sorted(cells.items()):
        truth = np.array([r["truth"] for r in rs])
        entry = {"family": family, "alpha": alpha, "divergence": divergence, "n": n}
        entry["seeds"] = len(rs)
        for column in columns:
            values = np.array([r[column] for r in rs])
            with np.errstate(divide="ignore", invalid="ignore"):  # no relative error at D = 0
                error = np.where(truth > 0, (values - truth) / truth, np.nan)
            entry[column] = float(np.median(np.abs(error)))
            entry[column + "_bias"] = float(np.median(error))
            entry[column + "_iqr"] = [float(q) for q in np.percentile(values, [25, 75])]
        if "lower_bound" in rs[0]:
            entry["mean_lower_bound"] = float(np.mean([r["lower_bound"] for r in rs]))
            entry["median_seconds"] = float(np.median([r["seconds"] for r in rs]))
        summary.append(entry)
    return summary


def _header(title: str, command: str, explanation: str) -> list[str]:
    return [
        f"# {title}",
        "",
        f"Command: `{command}`. Median relative error over seeds (median signed error in "
        f"brackets); {explanation}",
        "",
    ]


def table(summary: list[dict], command: str) -> str:
    lines = [
        *_header(
            "Point estimates: the critic's error against the bracket's own",
            command,
            "every column on the same samples and the estimator's own split. Columns: see the "
            "script's docstring (`oracle_bracket`: DV's bracket with the exact log ratio; "
            "`floor`: the P-form plug-in with the exact log ratio on all of P).",
        ),
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


def fit_time(families, alpha: float, n: int, seeds: int, out: Path, command: str) -> str:
    """Seconds per fit of point_estimate="split" and "cross_fit" on the same samples and seed,
    one fit at a time; per family the median of each and the median of the paired ratios."""
    rows = []
    for family in tqdm(families, desc="families"):
        for seed in range(seeds):
            X, Y, _ = make_renyi_pair(family, alpha, 1.0, n, random_state=seed)
            row = {"family": family, "seed": seed}
            for setting in ("split", "cross_fit"):
                start = time.perf_counter()
                DVRenyiEstimator(alpha=alpha, random_state=seed, point_estimate=setting).fit(X, Y)
                row[setting] = time.perf_counter() - start
            rows.append(row)
    lines = [
        "# Fit time: point_estimate='split' against 'cross_fit'",
        "",
        f"Command: `{command}`. α = {alpha:g}, D = 1, n = {n} per side, {seeds} seeds per "
        "family; both settings fit the same samples with the same seed, one fit at a time in one "
        "process. Seconds are medians; `ratio` is the median over seeds of cross_fit / split.",
        "",
        "| family | split s | cross_fit s | ratio |",
        "|---|---|---|---|",
    ]
    for family in families:
        rs = [r for r in rows if r["family"] == family]
        split = np.array([r["split"] for r in rs])
        cross = np.array([r["cross_fit"] for r in rs])
        lines.append(
            f"| {family} | {np.median(split):.2f} | {np.median(cross):.2f} "
            f"| {np.median(cross / split):.2f} |"
        )
    ratios = np.array([r["cross_fit"] / r["split"] for r in rows])
    lines += ["", f"All {len(rows)} pairs: median ratio {np.median(ratios):.2f}."]
    atomic_write_text(out / "fit_time.json", json.dumps(rows, indent=2))
    text = "\n".join(lines) + "\n"
    atomic_write_text(out / "fit_time.md", text)
    return text


CROSS_FIT_EXPLANATION = " ".join(
    [
        "`split` and `cross_fit` come from one fit per seed (the certified fold's bracket, and",
        "its mean with the reverse fold's, raw); `projected`: the cross-fitted estimate raised",
        "to the seed's certified bound where below it (so at least 0), which is what",
        "`divergence_` reports (computed from each seed's stored raw estimate and bound);",
        "`oracle_all`: DV's bracket with the exact log ratio",
        "on all samples (what a perfect critic with cross-fitting would give); `floor` /",
        "`floor_q`: the P- and Q-form plug-ins with the exact log ratio on all samples.",
        "`spread`: the interquartile range of the projected estimates. `bound`: mean",
        "certified lower bound (the same under both settings). `ratio`: projected's error over",
        "split's. `vs floor`: projected's error over the better floor's. `target`: the accuracy",
        "targets for the estimate users get (projected): error <= max(2 x the better",
        "floor's, 0.05) at α <= 4, error <= 0.25 at α >= 8; `(exact ratio misses too)` marks a",
        "missed cell where",
        "the exact log ratio misses the same target: at α <= 4 its bracket on all samples",
        "(`oracle_all`, the estimate with a perfect critic, whose first-order error is that of",
        "the functional's efficient influence function, the least any estimator that learns the",
        "ratio can have), at α >= 8 every exact-ratio column.",
    ]
)


def cross_fit_table(summary: list[dict], command: str) -> str:
    lines = [
        *_header(
            "Point estimates: split against cross-fitted (DVRenyiEstimator point_estimate)",
            command,
            CROSS_FIT_EXPLANATION,
        ),
        "| family | α | D | n | seeds | "
        + " | ".join(CROSS_FIT_COLUMNS)
        + " | ratio | vs floor | spread (projected) | bound | fit s | target |",
        "|---|---|---|---|---|" + "---|" * (len(CROSS_FIT_COLUMNS) + 6),
    ]
    # the targets are for the estimate users get (projected)
    oks = [target_met({**e, "cross_fit": e["projected"]}) for e in summary]
    for e, ok in zip(summary, oks, strict=True):
        cells = " | ".join(f"{e[c]:.3f} ({e[c + '_bias']:+.2f})" for c in CROSS_FIT_COLUMNS)
        floor = min(e["floor"], e["floor_q"])
        ratio = e["projected"] / e["split"] if e["split"] > 0 else float("nan")
        vs_floor = e["projected"] / floor if floor > 0 else float("inf")
        lo, hi = e["projected_iqr"]
        lines.append(
            f"| {e['family']} | {e['alpha']:g} | {e['divergence']:g} | {e['n']} | {e['seeds']} "
            f"| {cells} | {ratio:.2f} | {vs_floor:.1f} | {lo:.3g}–{hi:.3g} "
            f"| {e['mean_lower_bound']:.3f} | {e['median_seconds']:.2f} "
            f"| {'met' if ok else 'NOT met' + unreachable(e)} |"
        )
    better = sum(e["cross_fit"] < e["split"] for e in summary)
    lowered = sum(e["projected"] < e["cross_fit"] for e in summary)
    raised = sum(e["projected"] > e["cross_fit"] for e in summary)
    met = sum(oks)
    beyond = sum(not ok and bool(unreachable(e)) for e, ok in zip(summary, oks, strict=True))
    split_met = sum(target_met({**e, "cross_fit": e["split"]}) for e in summary)
    cross_met = sum(target_met(e) for e in summary)
    lines += [
        "",
        f"Cells: {len(summary)}; cross_fit's error below split's in {better}; projecting onto "
        f"the bound lowered cross_fit's error in {lowered} and raised it in {raised}; target "
        f"met in {met} (cross_fit: {cross_met}, split: {split_met}), not met in "
        f"{len(summary) - met}, of which the exact log ratio misses too in {beyond}.",
    ]
    return "\n".join(lines) + "\n"


def with_projected(rows: list[dict]) -> list[dict]:
    """Each cross-fit row with ``projected``: its raw estimate raised to its certified bound
    (clamped at 0) where below it, which is DVRenyiEstimator's ``divergence_``."""
    return [{**r, "projected": max(r["cross_fit"], max(0.0, r["lower_bound"]))} for r in rows]


def unreachable(entry: dict) -> str:
    """ " (exact ratio misses too)" where the exact log ratio misses the cell's target."""
    yardsticks = ("oracle_all",) if entry["alpha"] <= 4 else ("oracle_all", "floor", "floor_q")
    if all(not target_met({**entry, "cross_fit": entry[y]}) for y in yardsticks):
        return " (exact ratio misses too)"
    return ""


def target(entry: dict) -> float:
    """The accuracy target of one cell, as a median relative error (see cross_fit_table)."""
    if entry["alpha"] <= 4:
        return max(2 * min(entry["floor"], entry["floor_q"]), 0.05)
    return 0.25


def target_met(entry: dict) -> bool:
    """Whether one cell's cross-fitted estimate meets the cell's :func:`target`."""
    return entry["cross_fit"] <= target(entry)


def by_n_and_orders(rows: list[dict]) -> list[tuple[tuple[int, str], list[dict]]]:
    """The rows grouped by n and by order range ("≤ 4" or "≥ 8"), in sorted order."""
    groups: dict[tuple, list[dict]] = {}
    for e in rows:
        groups.setdefault((e["n"], "≤ 4" if e["alpha"] <= 4 else "≥ 8"), []).append(e)
    return sorted(groups.items())


def stored_rows(out: Path) -> list[dict]:
    """Every seed's row written under ``out/cells`` so far (earlier runs' grids too)."""
    return [json.loads(p.read_text()) for p in sorted((out / "cells").glob("*.json"))]


def write_results(out: Path, summary: list[dict], text: str) -> None:
    """The summary as results.json and its table as results.md under ``out``; the table is
    printed."""
    write_json(out / "results.json", summary, indent=2)
    atomic_write_text(out / "results.md", text)
    print(text)


def realisable_cells(families, alphas, divergences) -> tuple[list[tuple], list[str]]:
    """The (family, α, D) cells of a grid that the family can realise, and a line (printed) for
    each one it cannot (some families cannot reach some (α, D))."""
    cells, skipped = [], []
    for f in families:
        for a in alphas:
            for d in divergences:
                try:
                    family_parameters(f, a, d)
                    cells.append((f, a, d))
                except ValueError as error:
                    skipped.append(f"{f} α={a:g} D={d:g}: {error}")
    for line in skipped:
        print("skipped:", line)
    return cells, skipped


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--quick",
        action="store_true",
        help="a small check, written under benchmarks/results/quick/ unless --out is given",
    )
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--alphas", type=float, nargs="+", default=[2.0, 8.0])
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--n-jobs", type=int, default=2)
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--cross-fit", action="store_true")
    parser.add_argument("--fit-time", action="store_true")
    parser.add_argument("--families", nargs="+", default=list(FAMILIES))
    parser.add_argument("--divergences", type=float, nargs="+", default=[1.0])
    args = parser.parse_args(argv)
    check_flags(parser, args, quick_sets=("alphas", "seeds"))  # --quick takes the first family
    families, alphas, seeds = args.families, args.alphas, args.seeds
    if args.quick:
        families, alphas, seeds = families[:1], [2.0], 4
    default = RESULTS / "cross_fit" if args.cross_fit or args.fit_time else RESULTS
    # a folder, or an exit saying why not, before any fit (a file was found by the first write)
    out = output_folder(results_folder(args.out, default, args.quick))
    if not args.fit_time:
        refuse_foreign_cells(parser, out, ("cross_fit",) if args.cross_fit else ("dv", "pform"))
    if args.fit_time:
        command = "python benchmarks/bench_point_estimates.py " + " ".join(argv or sys.argv[1:])
        print(fit_time(families, alphas[0], args.n, seeds, out, command.strip()))
        return 0
    work = cross_fit_seed if args.cross_fit else one_seed
    cells, skipped = realisable_cells(families, alphas, args.divergences)
    jobs = [(f, a, d, args.n, s) for f, a, d in cells for s in range(seeds)]
    require_jobs(jobs)
    rows = Parallel(n_jobs=args.n_jobs, return_as="generator")(
        delayed(work)(*job, out) for job in jobs
    )
    rows = list(tqdm(rows, total=len(jobs), desc="seeds"))
    command = "python benchmarks/bench_point_estimates.py " + " ".join(argv or sys.argv[1:])
    if args.cross_fit:
        # earlier runs' grids too, so the table grows with runs
        rows = with_projected(stored_rows(out))
        summary = summarise(rows, CROSS_FIT_COLUMNS)
        text = cross_fit_table(summary, command.strip())
        if skipped:
            text += "\nNot realisable by the family (skipped in this run):\n\n"
            text += "".join(f"- {line}\n" for line in skipped)
    else:
        summary = summarise(rows)
        text = table(summary, command.strip())
    write_results(out, summary, text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
