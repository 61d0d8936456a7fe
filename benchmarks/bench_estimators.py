"""Known-divergence benchmark of rdpest's estimators.

For each cell (family, α, D, n per side) it draws ``--repetitions`` seeded sample pairs with
``rdpest.datasets.make_renyi_pair`` and records, per estimator: the point estimate, the certified
lower bound, whether the bound exceeds the truth (coverage failure), the seconds spent in ``fit``,
and for the DV estimator the "oracle" bound (the exact log ratio certified with the same split and
certificate: the practical limit of any critic).

Results: one JSON file per finished cell under ``<out>/cells/`` (written atomically, so an
interrupted run resumes where it stopped), then ``<out>/results.csv``, ``results.json`` and
``results.md`` (one table: truth, point mean ± sd, bound mean, coverage, oracle bound, seconds).

Usage::

    python benchmarks/bench_estimators.py                 # the grid of the DV issue's targets
    python benchmarks/bench_estimators.py --quick         # a few cells, for smoke tests
    python benchmarks/bench_estimators.py --scale         # n = 100,000 per side: time and memory
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from tqdm.auto import tqdm

from rdpest import DVRenyiEstimator
from rdpest.certificates import certify_critic
from rdpest.datasets import family_parameters, log_likelihood_ratio, make_renyi_pair

RESULTS = Path(__file__).resolve().parent / "results" / "estimators"
BETA = 0.05


def _atomic_write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(fd, "w") as handle:
        handle.write(text)
    os.replace(tmp, path)


def _oracle_bound(est, X, Y, log_ratio, alpha) -> float:
    """The exact log ratio certified on the estimator's own split with its certificate."""
    details = est.directions_["forward"].details
    in_test_p = np.zeros(len(X), dtype=bool)
    in_test_p[details["test_index_p"]] = True
    in_test_q = np.zeros(len(Y), dtype=bool)
    in_test_q[details["test_index_q"]] = True

    def L(A):
        return np.asarray(log_ratio(A), dtype=np.float64).reshape(len(A))

    cert = certify_critic(
        L(X[~in_test_p]),
        L(Y[~in_test_q]),
        L(X[in_test_p]),
        L(Y[in_test_q]),
        alpha=alpha,
        beta=est.directions_["forward"].beta,
        method=est.confidence,
    )
    return max(0.0, cert.lower_bound)


def run_cell(family: str, alpha: float, divergence: float, n: int, repetitions: int) -> dict:
    params = family_parameters(family, alpha, divergence)
    log_ratio = log_likelihood_ratio(family, params)
    rows = []
    for rep in range(repetitions):
        X, Y, truth = make_renyi_pair(family, alpha, divergence, n, random_state=10_000 + rep)
        start = time.perf_counter()
        est = DVRenyiEstimator(alpha=alpha, beta=BETA, random_state=rep).fit(X, Y)
        seconds = time.perf_counter() - start
        rows.append(
            {
                "point": est.divergence_,
                "bound": est.lower_bound_,
                "raw_bound": est.directions_["forward"].details["raw_lower_bound"],
                "oracle": _oracle_bound(est, X, Y, log_ratio, alpha),
                "seconds": seconds,
                "truth": truth,
            }
        )
    point = np.array([r["point"] for r in rows])
    truth = rows[0]["truth"]
    return {
        "estimator": "dv",
        "family": family,
        "alpha": alpha,
        "n": n,
        "truth": truth,
        "repetitions": repetitions,
        "point_mean": float(point.mean()),
        "point_sd": float(point.std(ddof=1)) if len(point) > 1 else 0.0,
        "point_median_rel_error": (
            float(np.median(np.abs(point - truth)) / truth) if truth > 0 else float("nan")
        ),
        "point_max": float(point.max()),
        "bound_mean": float(np.mean([r["bound"] for r in rows])),
        # Coverage failure: the raw (unclamped) bound above the truth; the target is <= beta.
        "miscoverage": float(np.mean([r["raw_bound"] > truth for r in rows])),
        "oracle_mean": float(np.mean([r["oracle"] for r in rows])),
        "seconds_median": float(np.median([r["seconds"] for r in rows])),
    }


def grid(quick: bool) -> list[tuple[str, float, float, int]]:
    if quick:
        return [("gaussian_shift", 2.0, 1.0, 500), ("laplace_shift", 2.0, 0.0, 500)]
    cells = [
        ("gaussian_shift", alpha, d, n)
        for n in (500, 5000)
        for alpha in (1.25, 2.0)
        for d in (0.0, 0.5, 1.0, 2.0, 4.0)
    ]
    cells += [
        (family, 2.0, d, 500)
        for family in (
            "gaussian_scale",
            "laplace_shift",
            "subsampled_gaussian",
            "multivariate_gaussian",
        )
        for d in (0.0, 1.0, 4.0)
    ]
    return cells


def _cell_path(out: Path, cell, repetitions: int) -> Path:
    family, alpha, d, n = cell
    return out / "cells" / f"dv_{family}_a{alpha:g}_d{d:g}_n{n}_r{repetitions}.json"


def write_tables(records: list[dict], out: Path) -> None:
    columns = [
        "estimator", "family", "alpha", "n", "truth", "point_mean", "point_sd",
        "point_median_rel_error", "point_max", "bound_mean", "miscoverage", "oracle_mean",
        "seconds_median", "repetitions",
    ]  # fmt: skip
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile("w", dir=out, delete=False, newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=columns, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(records)
    os.replace(handle.name, out / "results.csv")
    _atomic_write(out / "results.json", json.dumps(records, indent=2))
    lines = [
        "| estimator | family | α | n | truth | point mean ± sd | median rel. err | bound mean "
        "| miscoverage | oracle bound | bound/oracle | s/fit (median) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in records:
        ratio = r["bound_mean"] / r["oracle_mean"] if r["oracle_mean"] > 0 else float("nan")
        lines.append(
            f"| {r['estimator']} | {r['family']} | {r['alpha']:g} | {r['n']} | {r['truth']:.3g} "
            f"| {r['point_mean']:.3f} ± {r['point_sd']:.3f} | {r['point_median_rel_error']:.3f} "
            f"| {r['bound_mean']:.3f} | {r['miscoverage']:.3f} | {r['oracle_mean']:.3f} "
            f"| {ratio:.2f} | {r['seconds_median']:.2f} |"
        )
    _atomic_write(out / "results.md", "\n".join(lines) + "\n")
    print("\n".join(lines))


def scale_run(n: int) -> dict:
    """Fit once at n per side in a fresh process; report seconds and peak resident memory."""
    code = (
        "import time, resource, json, numpy as np\n"
        "from rdpest import DVRenyiEstimator\n"
        "from rdpest.datasets import make_renyi_pair\n"
        f"X, Y, t = make_renyi_pair('gaussian_shift', 2.0, 1.0, {n}, random_state=0)\n"
        "s = time.perf_counter(); e = DVRenyiEstimator(alpha=2.0, random_state=0).fit(X, Y)\n"
        "sec = time.perf_counter() - s\n"
        "peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024\n"
        "print(json.dumps({'n': %d, 'seconds': sec, 'peak_mb': peak, 'truth': t,"
        " 'point': e.divergence_, 'bound': e.lower_bound_}))\n" % n
    )
    output = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    return json.loads(output.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="two small cells, 5 repetitions")
    parser.add_argument("--repetitions", type=int, default=None)
    parser.add_argument("--scale", action="store_true", help="time one fit at n = 100,000")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    if args.scale:
        result = scale_run(100_000)
        _atomic_write(args.out / "scale.json", json.dumps(result, indent=2))
        _atomic_write(
            args.out / "scale.md",
            "| n per side | seconds | peak MB | truth | point | bound |\n"
            "|---|---|---|---|---|---|\n"
            f"| {result['n']} | {result['seconds']:.1f} | {result['peak_mb']:.0f} "
            f"| {result['truth']:.3f} | {result['point']:.3f} | {result['bound']:.3f} |\n",
        )
        print(json.dumps(result, indent=2))
        return 0
    repetitions = args.repetitions or (5 if args.quick else 50)
    records = []
    for cell in tqdm(grid(args.quick), desc="cells"):
        path = _cell_path(args.out, cell, repetitions)
        if path.exists():  # finished in an earlier run: resume
            records.append(json.loads(path.read_text()))
            continue
        record = run_cell(*cell, repetitions)
        _atomic_write(path, json.dumps(record, indent=2))
        records.append(record)
    write_tables(records, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
