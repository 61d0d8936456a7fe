"""Auditing benchmarks: DP-SGD throughput, audit memory, and the paper's protocol on digits.

1. Throughput (``--throughput``): models per second on this machine for logistic regression and
   the small CNN at 100 full-batch DP-SGD steps, with n_jobs = 1 and 2.
2. Protocol (``--protocol``, the default): the set-up of Kim, Varshney & Alabi (2026), Tables 1/2,
   at small scale on scikit-learn's digits: worst-case (pretrained) initialisation, blank canary,
   full batch, C = 1, 100 steps, 500 runs with and 500 without the canary, for μ in
   {0.5, 1, √2, 2, √10} (ε₂ = 0.25, 1, 2, 4, 10; ε₁.₂₅ = 1.25 μ²/2). The runs of one μ serve
   both orders (the training does not depend on α). Reports the claim, the DV point estimate,
   the DV certified bound, the Bernoulli bound and the GDP-route estimate, plus the peak memory
   of the audit processes.

Finished runs are stored under benchmarks/results/auditing/stores/ (append-only JSON lines), so
an interrupted benchmark resumes; tables are written to benchmarks/results/auditing/.
"""

from __future__ import annotations

import argparse
import json
import math
import resource
import sys
import time
from pathlib import Path

from rdpest._io import atomic_write_text
from rdpest.auditing import DPSGDAuditor

OUT = Path(__file__).resolve().parent / "results" / "auditing"
MUS = {"0.5": 0.5, "1": 1.0, "sqrt2": math.sqrt(2.0), "2": 2.0, "sqrt10": math.sqrt(10.0)}
STEPS = 100


def throughput() -> list[dict]:
    rows = []
    for model, n_runs in (("lr", 100), ("cnn", 8)):
        for n_jobs in (1, 2):
            audit = DPSGDAuditor(
                noise_multiplier=1.0,
                epochs=STEPS,
                n_runs=n_runs,
                model=model,
                n_jobs=n_jobs,
                device="cpu",
                progress=True,
                random_state=1,
            ).auditor()
            if n_jobs > 1:  # start the worker pool first: its start-up is not training
                audit.n_runs = 10
                audit.collect()
                audit.n_runs = n_runs
            start = time.perf_counter()
            audit.collect()
            seconds = time.perf_counter() - start
            rows.append(
                {
                    "model": model,
                    "n_jobs": n_jobs,
                    "steps": STEPS,
                    "models": 2 * n_runs,
                    "seconds": seconds,
                    "models_per_second": 2 * n_runs / seconds,
                }
            )
            print(rows[-1], flush=True)
    lines = [
        "| model | n_jobs | steps | models | seconds | models/s |",
        "|---|---|---|---|---|---|",
    ]
    lines += [
        f"| {r['model']} | {r['n_jobs']} | {r['steps']} | {r['models']} | {r['seconds']:.1f} "
        f"| {r['models_per_second']:.2f} |"
        for r in rows
    ]
    atomic_write_text(OUT / "throughput.json", json.dumps(rows, indent=2))
    atomic_write_text(OUT / "throughput.md", "\n".join(lines) + "\n")
    return rows


def protocol(n_runs: int, n_jobs: int) -> list[dict]:
    rows = []
    for label, mu in MUS.items():
        sigma = math.sqrt(STEPS) / mu  # full batch: mu = sqrt(T) / sigma
        for alpha in (2.0, 1.25):
            start = time.perf_counter()
            result = DPSGDAuditor(
                alpha=alpha,
                noise_multiplier=sigma,
                epochs=STEPS,
                n_runs=n_runs,
                n_jobs=n_jobs,
                device="cpu",
                store=OUT / "stores" / f"mu_{label}",
                random_state=0,
            ).run()
            e = result.estimates
            rows.append(
                {
                    "mu": mu,
                    "alpha": alpha,
                    "claimed_epsilon": result.claimed_epsilon,
                    "dv_point": e["dv"]["divergence"],
                    "dv_bound": e["dv"]["lower_bound"],
                    "bernoulli_bound": e["bernoulli"]["lower_bound"],
                    "bernoulli_point": e["bernoulli"]["divergence"],
                    "gdp_route": e["gdp_route"]["divergence"],
                    "gdp_route_bound": e["gdp_route"]["lower_bound"],
                    "verdict": result.verdict,
                    "n_runs": n_runs,
                    "seconds": time.perf_counter() - start,
                }
            )
            print(json.dumps(rows[-1]), flush=True)
            # Keep the per-α result next to the store (the store's result.json is overwritten).
            result.to_json(OUT / "stores" / f"mu_{label}" / f"result_alpha{alpha:g}.json")
    peak_self = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    peak_children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    memory = {"peak_mb_main": peak_self, "peak_mb_largest_worker": peak_children}
    atomic_write_text(OUT / "protocol.json", json.dumps({"rows": rows, "memory": memory}, indent=2))
    lines = [
        "| α | claimed ε_α | DV point | DV certified bound | Bernoulli bound | GDP route "
        "(not certified) | verdict |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in sorted(rows, key=lambda r: (-r["alpha"], r["claimed_epsilon"])):
        lines.append(
            f"| {r['alpha']:g} | {r['claimed_epsilon']:.3f} | {r['dv_point']:.3f} "
            f"| {r['dv_bound']:.3f} | {r['bernoulli_bound']:.3f} | {r['gdp_route']:.3f} "
            f"| {r['verdict']} |"
        )
    lines.append("")
    lines.append(
        f"{n_runs} + {n_runs} runs per μ (shared by both orders), logistic regression, blank "
        f"canary, {STEPS} full-batch steps, C = 1, pretrained initialisation. Peak memory: main "
        f"process {peak_self:.0f} MB, largest worker {peak_children:.0f} MB."
    )
    atomic_write_text(OUT / "protocol.md", "\n".join(lines) + "\n")
    return rows


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--throughput", action="store_true")
    parser.add_argument("--protocol", action="store_true")
    parser.add_argument("--runs", type=int, default=500)
    parser.add_argument("--n-jobs", type=int, default=2)
    args = parser.parse_args(argv)
    if not args.throughput and not args.protocol:
        args.throughput = args.protocol = True
    if args.throughput:
        throughput()
    if args.protocol:
        protocol(args.runs, args.n_jobs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
