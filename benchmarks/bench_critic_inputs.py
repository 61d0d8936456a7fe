"""What the DV critic sees: ``critic_inputs`` compared on the same samples, beside the floor.

For every cell (family, α, D, n per side) and seed, it fits ``DVRenyiEstimator`` (defaults
otherwise) once per setting in ``SETTINGS`` on the same samples and records the point estimate
``divergence_`` and the certified ``lower_bound_``, with the exact-log-ratio columns of the
known-divergence benchmark on the same samples: ``oracle_all`` (the bracket
α/(α−1)·log mean_P e^{(α−1)L} − log mean_Q e^{αL} with the exact L = log p/q on all rows) and
the P- and Q-form plug-ins ``floor`` / ``floor_q``.

The settings:

- ``standard``: the default, z = (x − mean)/sd into the (64, 64) ReLU network;
- ``quadratic``: z and its products z_i·z_j (i ≤ j) into the same network;
- ``quadratic_linear``: the same inputs into a linear critic (``hidden_layer_sizes=()``): a
  logistic regression on a quadratic form, which contains the log ratio of any two Gaussians.

The log ratio of two Gaussians with different (co)variances is a quadratic form that keeps
growing beyond Q's sample; a network fed z alone levels off near the last value it saw there and
underestimates D_α. Heavy-tailed pairs (Laplace and Student-t shifts) are included to show the
cost where the log ratio levels off instead.

Usage::

    python benchmarks/bench_critic_inputs.py                 # the grid below, 20 seeds
    python benchmarks/bench_critic_inputs.py --quick         # one cell, 4 seeds

Results: one JSON file per cell and seed under benchmarks/results/point_estimates/critic_inputs/
cells/ (atomic writes: an interrupted run resumes), then results.json and results.md there.
"""

from __future__ import annotations

import argparse
import json
import sys
import warnings
from pathlib import Path

from bench_point_estimates import (
    EXACT_COLUMNS,
    _cell_key,
    _cell_path,
    _samples,
    bound_columns,
    cell_of,
    exact_columns,
    realisable_cells,
    summarise,
)
from harness import (
    check_flags,
    refuse_foreign_cells,
    require_jobs,
    results_folder,
    write_json,
)
from joblib import Parallel, delayed
from tqdm.auto import tqdm

from rdpest import DVRenyiEstimator
from rdpest.utils.io import atomic_write_text

RESULTS = Path(__file__).resolve().parent / "results" / "point_estimates" / "critic_inputs"
SETTINGS = {
    "standard": {},
    "quadratic": {"critic_inputs": "quadratic"},
    "quadratic_linear": {"critic_inputs": "quadratic", "hidden_layer_sizes": ()},
}
FAMILIES = (
    "gaussian_scale",
    "multivariate_gaussian",
    "gaussian_shift",
    "subsampled_gaussian",
    "laplace_shift",
    "student_t_shift",
)


def one_seed(family: str, alpha: float, divergence: float, n: int, seed: int, out: Path) -> dict:
    """Fit every setting on one seed's samples; the row is written atomically."""
    path = _cell_path(out, family, alpha, divergence, n, seed)
    if path.exists():
        return json.loads(path.read_text())
    X, Y, truth, log_ratio = _samples(family, alpha, divergence, n, seed)
    row = {
        **_cell_key(family, alpha, divergence, n, seed, truth),
        # The exact log ratio's estimates on the same samples (see the module docstring).
        **exact_columns(log_ratio(X), log_ratio(Y), alpha),
    }
    for name, params in SETTINGS.items():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            est = DVRenyiEstimator(alpha=alpha, random_state=seed, **params).fit(X, Y)
        row[name] = float(est.divergence_)
        row[f"{name}_bound"] = float(est.lower_bound_)
    atomic_write_text(path, json.dumps(row, indent=1))
    return row


def summary_of(rows: list[dict]) -> list[dict]:
    """Per cell: bench_point_estimates.summarise's error columns for every setting and exact
    column, plus each setting's mean certified bound and how often it exceeded the truth."""
    rows = sorted(rows, key=lambda r: r["seed"])  # a fixed order: the same sums every run
    summary = summarise(rows, (*SETTINGS, *EXACT_COLUMNS))
    for entry in summary:
        bound_columns(entry, cell_of(rows, entry), SETTINGS)
    return summary


def table(summary: list[dict], command: str) -> str:
    lines = [
        "# DV critic inputs: the same samples under each `critic_inputs` setting",
        "",
        f"Command: `{command}`. Each cell: median |relative error| of the point estimate over "
        "the seeds (median signed error in brackets), then the exact log ratio's columns on the "
        "same samples (`oracle_all`: the bracket on all rows; `floor` / `floor_q`: the P- and "
        "Q-form plug-ins), then each setting's mean certified bound with the number of seeds "
        "where it exceeded the truth. Settings: see the script's docstring.",
        "",
        "| family | α | D | n | seeds | " + " | ".join((*SETTINGS, *EXACT_COLUMNS)) + " | bounds "
        "(" + " / ".join(SETTINGS) + ") |",
        "|" + "---|" * (5 + len(SETTINGS) + len(EXACT_COLUMNS) + 1),
    ]
    for e in summary:
        cols = [f"{e[c]:.3f} ({e[c + '_bias']:+.2f})" for c in (*SETTINGS, *EXACT_COLUMNS)]
        bounds = " / ".join(f"{e[s + '_bound']:.3f} [{e[s + '_misses']}]" for s in SETTINGS)
        head = f"| {e['family']} | {e['alpha']:g} | {e['divergence']:g} | {e['n']} | {e['seeds']}"
        lines.append(head + " | " + " | ".join(cols) + f" | {bounds} |")
    better = {
        name: sum(e[name] < e["standard"] for e in summary)
        for name in SETTINGS
        if name != "standard"
    }
    lines += [
        "",
        f"Cells: {len(summary)}. Lower median error than `standard`: "
        + ", ".join(f"`{name}` in {count}" for name, count in better.items())
        + ".",
    ]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--quick",
        action="store_true",
        help="a small check, written under benchmarks/results/quick/ unless --out is given",
    )
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--alphas", type=float, nargs="+", default=[1.25, 2.0, 4.0])
    parser.add_argument("--divergences", type=float, nargs="+", default=[1.0, 4.0])
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--families", nargs="+", default=list(FAMILIES))
    parser.add_argument("--n-jobs", type=int, default=2)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    check_flags(parser, args, quick_sets=("families", "alphas", "divergences", "seeds"))
    args.out = results_folder(args.out, RESULTS, args.quick)
    refuse_foreign_cells(parser, args.out, tuple(SETTINGS))
    if args.quick:
        args.families, args.alphas, args.divergences, args.seeds = (
            ["gaussian_scale"],
            [2.0],
            [1.0],
            4,
        )
    cells, _ = realisable_cells(args.families, args.alphas, args.divergences)
    jobs = [(*cell, args.n, seed) for cell in cells for seed in range(args.seeds)]
    require_jobs(jobs)
    rows = Parallel(n_jobs=args.n_jobs, return_as="generator_unordered")(
        delayed(one_seed)(*job, args.out) for job in jobs
    )
    rows = list(tqdm(rows, total=len(jobs), desc="cells x seeds"))
    summary = summary_of(rows)
    command = "python benchmarks/bench_critic_inputs.py " + " ".join(
        argv if argv is not None else sys.argv[1:]
    )
    text = table(summary, command.strip())
    write_json(args.out / "results.json", summary)
    atomic_write_text(args.out / "results.md", text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
