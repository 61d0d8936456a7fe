"""The DV critic's input transform (``DVRenyiEstimator(critic_inputs=...)``), compared on the same
samples and seeds.

For every cell (family, α, D, n per side) and seed it fits the estimator once per transform of
``COMPARED`` ("standard" and "asinh"; its defaults otherwise, except the point window: "range",
the rule these cells were first measured with, unless ``--point-window`` says) and records the point
estimate, the certified bound and the fit time, beside the exact log ratio's columns of
bench_point_estimates.py (``oracle_all``: the bracket with the exact log ratio on all rows;
``floor`` / ``floor_q``: the P- and Q-form plug-ins with it). The table gives per cell and
transform the median relative error (median signed error in brackets), the standard deviation of
the estimates over the seeds, the mean bound, the median fit time, and whether the point-estimate
target of the known-divergence benchmark is met (α ≤ 4: at most max(2 × the better floor, 0.05);
α ≥ 8: at most 0.25).

Usage::

    python benchmarks/bench_point_inputs.py --families student_t_shift --alphas 2 4 8 \
        --divergences 1 4 --n 500 --seeds 20

Results: one JSON file per seed under benchmarks/results/point_estimates/inputs/cells/ (atomic
writes: an interrupted run resumes); results.json and results.md summarise every cell written so
far, so the table grows with runs of other grids. ``--point-window balanced`` fits both
transforms with that point window instead of the default; its cells and tables go to a folder of
their own (``inputs/balanced/``). The third transform, "quadratic", has its own comparison
(bench_critic_inputs.py): it is for the opposite kind of pair.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
from bench_point_estimates import (
    EXACT_COLUMNS,
    _cell_key,
    _cell_path,
    _samples,
    exact_columns,
    realisable_cells,
    stored_rows,
    summarise,
    target_met,
    write_results,
)
from harness import check_flags, require_jobs
from joblib import Parallel, delayed
from tqdm.auto import tqdm

from rdpest import DVRenyiEstimator
from rdpest.datasets import FAMILIES
from rdpest.estimators.windows import WINDOW_RULES
from rdpest.utils.io import atomic_write_text

RESULTS = Path(__file__).resolve().parent / "results" / "point_estimates" / "inputs"
# The transforms this table compares (the stored cells hold these two).
COMPARED = ("standard", "asinh")


def one_seed(
    family: str, alpha: float, divergence: float, n: int, seed: int, out: Path, window: str
) -> dict:
    """The compared transforms' fits of one seed with ``point_window=window``, and the exact-L
    columns (read back if written)."""
    path = _cell_path(out, family, alpha, divergence, n, seed)
    if path.exists():
        row = json.loads(path.read_text())
        stored = row.get("point_window", "range")  # older cells: range
        if stored != window:  # never report one window's fits under another's name
            raise SystemExit(
                f"{path} holds fits with --point-window {stored}, not {window}; "
                "use another --out for this window"
            )
        return row
    X, Y, truth, L = _samples(family, alpha, divergence, n, seed)
    a = float(alpha)
    lp, lq = L(X), L(Y)
    row = {
        **_cell_key(family, a, divergence, n, seed, truth),
        **exact_columns(lp, lq, a),
        "point_window": window,
    }
    for inputs in COMPARED:
        start = time.perf_counter()
        est = DVRenyiEstimator(
            alpha=a, random_state=seed, critic_inputs=inputs, point_window=window
        ).fit(X, Y)
        row[f"seconds_{inputs}"] = time.perf_counter() - start
        row[inputs] = est.divergence_
        row[f"lower_bound_{inputs}"] = est.lower_bound_
    atomic_write_text(path, json.dumps(row))
    return row


def summary_of(rows: list[dict]) -> list[dict]:
    """Per cell: summarise()'s error columns, plus each transform's sd, mean bound, fit time and
    target."""
    summary = summarise(rows, (*COMPARED, *EXACT_COLUMNS))
    for entry in summary:
        cell = [
            r
            for r in rows
            if (r["family"], r["alpha"], r["divergence"], r["n"])
            == (entry["family"], entry["alpha"], entry["divergence"], entry["n"])
        ]
        entry["point_window"] = cell[0].get("point_window", "range")  # older cells: range
        for inputs in COMPARED:
            entry[f"sd_{inputs}"] = float(np.std([r[inputs] for r in cell]))
            entry[f"bound_{inputs}"] = float(np.mean([r[f"lower_bound_{inputs}"] for r in cell]))
            entry[f"seconds_{inputs}"] = float(np.median([r[f"seconds_{inputs}"] for r in cell]))
            entry[f"target_{inputs}"] = target_met({**entry, "cross_fit": entry[inputs]})
    return summary


def table(summary: list[dict], command: str) -> str:
    names = " / ".join(COMPARED)
    lines = [
        "# Point estimates: the critic's input transform (DVRenyiEstimator critic_inputs)",
        "",
        f"Point window: `{summary[0]['point_window'] if summary else 'range'}`.",
        "",
        f"Command (last run): `{command}`. Every pair of columns is {names} on the same samples "
        "and seeds: median relative error over the seeds (median signed error in brackets), the "
        "standard deviation of the estimates, the mean certified bound, the median fit time and "
        "the point-estimate target (α ≤ 4: ≤ max(2 × better floor, 0.05); α ≥ 8: ≤ 0.25). "
        "`floor`: the better of the P- and Q-form plug-ins with the exact log ratio.",
        "",
        "| family | α | D | n | seeds | error | floor | sd | bound | fit s | target |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for e in summary:

        def pair(key: str, spec: str, e=e) -> str:
            return " / ".join(format(e[f"{key}_{t}"], spec) for t in COMPARED)

        errors = " / ".join(f"{e[t]:.3f} ({e[t + '_bias']:+.2f})" for t in COMPARED)
        targets = " / ".join("met" if e[f"target_{t}"] else "no" for t in COMPARED)
        lines.append(
            f"| {e['family']} | {e['alpha']:g} | {e['divergence']:g} | {e['n']} | {e['seeds']} "
            f"| {errors} | {min(e['floor'], e['floor_q']):.3f} | {pair('sd', '.3g')} "
            f"| {pair('bound', '.3f')} | {pair('seconds', '.2f')} | {targets} |"
        )
    first, second = COMPARED
    better = sum(e[second] < e[first] for e in summary)
    steadier = sum(e[f"sd_{second}"] < e[f"sd_{first}"] for e in summary)
    met = {t: sum(e[f"target_{t}"] for e in summary) for t in COMPARED}
    lines += [
        "",
        f"Cells: {len(summary)}. {second}'s median error below {first}'s in {better}, its sd "
        f"below in {steadier}; target met in {met[first]} ({first}) and {met[second]} "
        f"({second}).",
    ]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    parser.add_argument("--families", nargs="+", default=list(FAMILIES))
    parser.add_argument("--alphas", type=float, nargs="+", default=[2.0])
    parser.add_argument("--divergences", type=float, nargs="+", default=[1.0])
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--n-jobs", type=int, default=2)
    parser.add_argument("--point-window", choices=WINDOW_RULES, default="range")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    check_flags(parser, args)
    # Another window's cells go to their own folder: a table never mixes windows.
    out = args.out or (RESULTS if args.point_window == "range" else RESULTS / args.point_window)
    cells, _ = realisable_cells(args.families, args.alphas, args.divergences)
    jobs = [(f, a, d, args.n, s) for f, a, d in cells for s in range(args.seeds)]
    require_jobs(jobs)
    rows = Parallel(n_jobs=args.n_jobs, return_as="generator")(
        delayed(one_seed)(*job, out, args.point_window) for job in jobs
    )
    list(tqdm(rows, total=len(jobs), desc="seeds"))
    summary = summary_of(stored_rows(out))
    command = "python benchmarks/bench_point_inputs.py " + " ".join(argv or sys.argv[1:])
    write_results(out, summary, table(summary, command.strip()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
