"""Clipping windows for DVRenyiEstimator's point estimate, compared on the same fitted critics.

The point estimate is the bracket α/(α−1)·log mean_P e^{(α−1)g} − log mean_Q e^{αg} of a trained
critic g, clipped to a window, on rows the critic was not trained on (cross-fitted: two folds).
Any window that is a fixed function of the critic's training rows keeps the bracket a lower
bound on D_α in population, so the window is free to be chosen for accuracy. Which window is
best depends on the pair: where P and Q are well separated, the critic extrapolates above the
log ratio in regions that Q's sample barely reaches, the Q moment misses the mass that would
cancel it, and the estimate overshoots; where P's tails carry the divergence (scale changes),
clipping them away underestimates.

This script fits the estimator once per seed (its defaults) and stores each fold's critic values
on its training and its held-out rows under ``critic_values/`` (compressed ``.npz``, not
committed: regenerate them with the command in the table's header; a re-run skips the seeds
already stored). ``--summarise`` then recomputes every fold's point estimate under each window
rule of ``rdpest.estimators.windows`` from the stored values (exactly what the estimator computes
with that ``point_window``, from the same critics) and writes results.json and results.md: the
median relative error per cell and rule over the seeds, beside the exact log ratio's columns.

Usage::

    python benchmarks/bench_point_windows.py --families gaussian_shift laplace_shift \
        --alphas 2 8 --divergences 1 --n 5000 --seeds 20
    python benchmarks/bench_point_windows.py --summarise
"""

from __future__ import annotations

import argparse
import os
import sys
from collections import Counter
from pathlib import Path

import numpy as np
from bench_point_estimates import (
    EXACT_COLUMNS,
    _cell_key,
    _samples,
    by_n_and_orders,
    exact_columns,
    realisable_cells,
    summarise,
    target_met,
    unreachable,
    write_results,
)
from harness import check_flags, require_jobs
from joblib import Parallel, delayed
from tqdm.auto import tqdm

from rdpest import DVRenyiEstimator
from rdpest.datasets import FAMILIES, make_renyi_pair
from rdpest.estimators.windows import WINDOW_RULES, point_estimate, point_estimate_window
from rdpest.utils.io import atomic_write_text

RESULTS = Path(__file__).resolve().parent / "results" / "point_estimates" / "windows"
PARTS = ("p_train", "q_train", "p_test", "q_test")


def _values_path(out: Path, family: str, alpha: float, divergence: float, n: int, seed: int):
    return out / "critic_values" / f"{family}_{alpha:g}_{divergence:g}_{n}_{seed}.npz"


def collect_seed(family: str, alpha: float, divergence: float, n: int, seed: int, out: Path):
    """Fit once and store each fold's critic values (skipped where already stored)."""
    path = _values_path(out, family, alpha, divergence, n, seed)
    if path.exists():
        return
    X, Y, truth = make_renyi_pair(family, alpha, divergence, n, random_state=seed)
    est = DVRenyiEstimator(alpha=alpha, random_state=seed)
    folds = []
    fit_fold = est._fit_fold

    def recording(*args):
        result = fit_fold(*args)
        folds.append(result[2])
        return result

    est._fit_fold = recording  # the instance attribute shadows the method for this fit only
    est.fit(X, Y)
    arrays = {"truth": np.float64(truth), "divergence": np.float64(est.divergence_)}
    arrays["lower_bound"] = np.float64(est.lower_bound_)
    for i, g in enumerate(folds):
        arrays.update({f"fold{i}_{part}": values for part, values in zip(PARTS, g, strict=True)})
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.stem}.{os.getpid()}.npz")
    np.savez_compressed(partial, **arrays)
    os.replace(partial, path)


def fold_windows(values: dict, fold: int, alpha: float) -> dict:
    """Each rule's window for one fold, chosen on its training rows."""
    g_p, g_q = values[f"fold{fold}_p_train"], values[f"fold{fold}_q_train"]
    return {rule: point_estimate_window(g_p, g_q, alpha, rule) for rule in WINDOW_RULES}


def seed_row(path: Path) -> dict:
    """One stored fit: each rule's cross-fitted point estimate and the exact-L columns."""
    family, alpha, divergence, n, seed = path.stem.rsplit("_", 4)
    a, d, n, seed = float(alpha), float(divergence), int(n), int(seed)
    with np.load(path) as data:
        values = {k: data[k] for k in data.files}
    # The same samples again (make_renyi_pair is deterministic in its seed), for the exact L.
    X, Y, truth, L = _samples(family, a, d, n, seed)
    row = _cell_key(family, a, d, n, seed, truth)
    folds = sum(1 for k in values if k.endswith("_p_test"))
    windows = [fold_windows(values, i, a) for i in range(folds)]

    def cross_fitted(rule: str, form: str = "bracket") -> float:
        """The mean over the folds of the held-out estimate under ``rule``'s window."""
        points = [
            point_estimate(values[f"fold{i}_p_test"], values[f"fold{i}_q_test"], w[rule], a, form)
            for i, w in enumerate(windows)
        ]
        return float(np.mean(points))

    for rule in WINDOW_RULES:
        row[rule] = cross_fitted(rule)
    # The "shrunk" point form with the default (guarded) window.
    row["shrunk"] = cross_fitted("guarded", "shrunk")
    # What divergence_ reports: the cross-fitted estimate raised to the certified bound.
    bound = float(values["lower_bound"])
    for form in ("guarded", "shrunk"):
        row[f"{form}_projected"] = max(row[form], bound)
    # Folds where "guarded" left the range window (its guard fired), out of ``folds``.
    row["guard_fired"] = sum(w["guarded"] != w["range"] for w in windows)
    row["folds"] = folds
    row.update(exact_columns(L(X), L(Y), a))
    return row


ESTIMATES = (*WINDOW_RULES, "shrunk")
COLUMNS = (*ESTIMATES, *EXACT_COLUMNS)
PROJECTED = ("guarded_projected", "shrunk_projected")


def met(entry: dict, rule: str) -> bool:
    return target_met({**entry, "cross_fit": entry[rule]})


def guard_counts(rows: list[dict]) -> str:
    """Per (n, α): the folds where the guarded rule's guard fired, out of all folds."""
    fired, total = Counter(), Counter()
    for r in rows:
        fired[(r["n"], r["alpha"])] += r["guard_fired"]
        total[(r["n"], r["alpha"])] += r["folds"]
    return "; ".join(
        f"n = {n}, α = {a:g}: {fired[n, a]} of {total[n, a]}" for n, a in sorted(total)
    )


def table(summary: list[dict], command: str, fired: str = "", zero_rows=()) -> str:
    lines = [
        "# Point-estimate windows of DVRenyiEstimator: the same critics under each rule",
        "",
        f"Last collecting command: `{command}`, then `python benchmarks/bench_point_windows.py "
        "--summarise` (all commands: README.md).",
        "",
        "Each cell: median |relative error| over the seeds (median signed error in brackets) of",
        "the cross-fitted point estimate (the mean of the two folds' brackets) under each",
        "`point_window` rule of `rdpest.estimators.windows`, from the same fitted critics, and",
        '`shrunk`: the `point_form="shrunk"` estimate with the default (guarded) window; the',
        "exact log ratio's bracket on all samples (`oracle_all`) and its P- and Q-form plug-ins",
        "(`floor`, `floor_q`) on the same samples. Target (as in ../cross_fit/): at α ≤ 4, error",
        "≤ max(2 × the better floor, 0.05); at α ≥ 8, error ≤ 0.25. The certified bound does not",
        "depend on the rule or the form. The estimator's defaults are the guarded window and the",
        "bracket form; `rdpest.estimators.windows` says when the others are the better choice.",
        "",
        "| family | α | D | n | seeds | "
        + " | ".join(COLUMNS)
        + " | spread (range) | target "
        + " / ".join(ESTIMATES)
        + " |",
        "|---|---|---|---|---|" + "---|" * (len(COLUMNS) + 2),
    ]
    for e in summary:
        cells = " | ".join(f"{e[c]:.3f} ({e[c + '_bias']:+.2f})" for c in COLUMNS)
        lo, hi = e["range_iqr"]
        verdicts = " / ".join("met" if met(e, r) else "NOT met" for r in ESTIMATES)
        exact = unreachable({**e, "cross_fit": e["range"]}) if not met(e, "range") else ""
        lines.append(
            f"| {e['family']} | {e['alpha']:g} | {e['divergence']:g} | {e['n']} | {e['seeds']} "
            f"| {cells} | {lo:.3g}–{hi:.3g} | {verdicts}{exact} |"
        )
    counts = {r: sum(met(e, r) for e in summary) for r in WINDOW_RULES}
    missed = [e for e in summary if not met(e, "range")]
    beyond = sum(bool(unreachable({**e, "cross_fit": e["range"]})) for e in missed)
    against = []
    for rule in WINDOW_RULES[1:]:
        better = sum(e[rule] < e["range"] for e in summary)
        worse = sum(e[rule] > 1.1 * e["range"] for e in summary)
        largest = max(e[rule] for e in summary)
        against.append(
            f"{rule}: below the range's error in {better} cells, more than 10% above it in "
            f"{worse}, largest error {largest:.3f}"
        )
    lines += [
        "",
        f"Cells: {len(summary)}. Against the range window (largest error "
        f"{max(e['range'] for e in summary):.3f}): "
        + "; ".join(against)
        + ". Target met: "
        + ", ".join(f"{r} {counts[r]}" for r in WINDOW_RULES)
        + f" (guarded is the default); of the {len(missed)} cells the range window misses, the "
        f"exact log ratio misses too in {beyond}.",
    ]
    if fired:
        lines += ["", f"Folds where the guarded rule took the balanced window: {fired}."]
    lines += ["", *_forms_summary(summary), *_equal_pairs(zero_rows)]
    return "\n".join(lines) + "\n"


def _forms_summary(summary: list[dict]) -> list[str]:
    """The shrunk form against the bracket (both with the guarded window), as ``divergence_``
    reports them (raised to the certified bound), per order group and n."""
    lines = [
        "## The shrunk point form against the bracket",
        "",
        "Both with the guarded window, raised to each seed's certified bound (what "
        "`divergence_` reports); the main table's columns are the raw estimates.",
        "",
        "| n | α | cells | target met: bracket / shrunk | shrunk's error below the bracket's by "
        "over 10% | above it by over 10% | mean error: bracket / shrunk |",
        "|---|---|---|---|---|---|---|",
    ]
    bracket, shrunk = PROJECTED
    for (n, orders), es in by_n_and_orders(summary):
        counts = [sum(met(e, c) for e in es) for c in (bracket, shrunk)]
        better = sum(e[shrunk] < e[bracket] / 1.1 for e in es)
        worse = sum(e[shrunk] > 1.1 * e[bracket] for e in es)
        means = [np.mean([e[c] for e in es]) for c in (bracket, shrunk)]
        lines.append(
            f"| {n} | {orders} | {len(es)} | {counts[0]} / {counts[1]} | {better} | {worse} "
            f"| {means[0]:.3f} / {means[1]:.3f} |"
        )
    return lines


def _equal_pairs(rows: list[dict]) -> list[str]:
    """At P = Q (D = 0, no relative error): the mean and 90th percentile of each form's
    estimate as ``divergence_`` reports it, in nats."""
    if not rows:
        return []
    lines = [
        "",
        "## P = Q",
        "",
        "The estimate as `divergence_` reports it (raised to the certified bound), in nats: mean "
        "(90th percentile) over the seeds. The truth is 0.",
        "",
        "| family | α | n | seeds | bracket | shrunk |",
        "|---|---|---|---|---|---|",
    ]
    cells: dict[tuple, list[dict]] = {}
    for r in rows:
        cells.setdefault((r["family"], r["alpha"], r["n"]), []).append(r)
    for (family, alpha, n), rs in sorted(cells.items()):
        stats = []
        for c in PROJECTED:
            values = np.array([r[c] for r in rs])
            stats.append(f"{values.mean():.3f} ({np.quantile(values, 0.9):.3f})")
        lines.append(f"| {family} | {alpha:g} | {n} | {len(rs)} | {stats[0]} | {stats[1]} |")
    return lines


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--alphas", type=float, nargs="+", default=[2.0, 8.0])
    parser.add_argument("--divergences", type=float, nargs="+", default=[1.0])
    parser.add_argument("--n", type=int, default=5000)
    parser.add_argument("--n-jobs", type=int, default=2)
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--families", nargs="+", default=list(FAMILIES))
    parser.add_argument("--summarise", action="store_true")
    args = parser.parse_args(argv)
    check_flags(parser, args)
    out = args.out
    given = list(argv if argv is not None else sys.argv[1:])
    if "--out" in given:  # where the values went is this machine's business, not the table's
        del given[given.index("--out") : given.index("--out") + 2]
    command = "python benchmarks/bench_point_windows.py " + " ".join(given)
    if not args.summarise:
        cells, _ = realisable_cells(args.families, args.alphas, args.divergences)
        jobs = [(f, a, d, args.n, s) for f, a, d in cells for s in range(args.seeds)]
        require_jobs(jobs)
        runs = Parallel(n_jobs=args.n_jobs, return_as="generator")(
            delayed(collect_seed)(*job, out) for job in jobs
        )
        for _ in tqdm(runs, total=len(jobs), desc="fits"):
            pass
        atomic_write_text(out / "command.txt", command.strip() + "\n")
        return 0
    # Not the hidden partial files (".name.PID.npz") a killed run may leave behind.
    paths = sorted(p for p in (out / "critic_values").glob("*.npz") if not p.name.startswith("."))
    rows = Parallel(n_jobs=args.n_jobs)(delayed(seed_row)(path) for path in tqdm(paths))
    # P = Q has no relative error: those seeds get their own section.
    zero = [r for r in rows if r["truth"] == 0]
    rows = [r for r in rows if r["truth"] != 0]
    summary = summarise(rows, (*COLUMNS, *PROJECTED))
    collected = (out / "command.txt").read_text().strip() if (out / "command.txt").exists() else ""
    text = table(summary, collected or command.strip(), guard_counts(rows), zero)
    write_results(out, summary, text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
