"""Evidence for DVRenyiEstimator's defaults: critic objective, width and learning rate.

Compares, on the same seeded samples (gaussian_shift and laplace_shift, α = 2, D ∈ {1, 4},
n ∈ {500, 5000} per side, 10 repetitions): the default (classifier critic, (64, 64), lr 1e-3),
the paper's recipe (DV objective with moving-average gradients, (100, 100), lr 1.25e-4, batch 400),
and variations of the default. Reports the point estimate's median relative error and largest
value (blow-up), the mean certified bound and the median seconds per fit.

Command: ``python benchmarks/bench_dv_defaults.py`` (``--out DIR`` to write elsewhere). Results:
benchmarks/results/dv_defaults/{cells/*.json, results.json, results.md}; resumes.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
from harness import output_folder
from tqdm.auto import tqdm

from rdpest import DVRenyiEstimator
from rdpest.datasets import make_renyi_pair
from rdpest.utils.io import atomic_write_text

OUT = Path(__file__).resolve().parent / "results" / "dv_defaults"
REPETITIONS = 10
VARIANTS = {
    "default (classifier, 64x64, lr 1e-3)": {},
    "paper recipe (dv, 100x100, lr 1.25e-4, batch 400)": {
        "objective": "dv",
        "hidden_layer_sizes": (100, 100),
        "learning_rate": 1.25e-4,
        "batch_size": 400,
    },
    "classifier, 100x100": {"hidden_layer_sizes": (100, 100)},
    "classifier, 32": {"hidden_layer_sizes": (32,)},
    "classifier, lr 1e-2": {"learning_rate": 1e-2},
    "classifier, lr 1e-4": {"learning_rate": 1e-4},
}
VARIANTS_KEYS = {name: f"v{i}" for i, name in enumerate(VARIANTS)}
CELLS = [
    (family, d, n)
    for family in ("gaussian_shift", "laplace_shift")
    for d in (1.0, 4.0)
    for n in (500, 5000)
]


def run(name: str, params: dict, family: str, d: float, n: int) -> dict:
    points, bounds, seconds = [], [], []
    for rep in range(REPETITIONS):
        X, Y, truth = make_renyi_pair(family, 2.0, d, n, random_state=20_000 + rep)
        start = time.perf_counter()
        est = DVRenyiEstimator(alpha=2.0, random_state=rep, **params).fit(X, Y)
        seconds.append(time.perf_counter() - start)
        points.append(est.divergence_)
        bounds.append(est.lower_bound_)
    points = np.array(points)
    return {
        "variant": name,
        "family": family,
        "truth": d,
        "n": n,
        "median_rel_error": float(np.median(np.abs(points - truth)) / truth),
        "point_max": float(points.max()),
        "bound_mean": float(np.mean(bounds)),
        "seconds_median": float(np.median(seconds)),
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=OUT, help="results folder (resumes)")
    arguments = sys.argv[1:] if argv is None else list(argv)
    # a file as --out failed with a traceback after the first cell (benchmark review)
    out = output_folder(parser.parse_args(arguments).out)
    command = " ".join(["python benchmarks/bench_dv_defaults.py", *arguments])
    records = []
    jobs = [(name, cell) for cell in CELLS for name in VARIANTS]
    for name, (family, d, n) in tqdm(jobs, desc="dv defaults"):
        path = out / "cells" / f"{VARIANTS_KEYS[name]}_{family}_d{d:g}_n{n}.json"
        if path.exists():
            records.append(json.loads(path.read_text()))
            continue
        record = run(name, VARIANTS[name], family, d, n)
        atomic_write_text(path, json.dumps(record))
        records.append(record)
    atomic_write_text(out / "results.json", json.dumps(records, indent=2))
    lines = [
        f"Command: `{command}`",
        "",
        "| variant | family | D | n | median rel. error | max point | mean bound | s/fit |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in records:
        lines.append(
            f"| {r['variant']} | {r['family']} | {r['truth']:g} | {r['n']} "
            f"| {r['median_rel_error']:.3f} | {r['point_max']:.2f} | {r['bound_mean']:.3f} "
            f"| {r['seconds_median']:.2f} |"
        )
    atomic_write_text(out / "results.md", "\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
