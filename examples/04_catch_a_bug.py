"""
Catch a bug: audit a trainer that adds less noise than it claims
================================================================

Two pipelines claim the same ε₂ = 1: one honest, one whose noise is 4x smaller than claimed (a
deliberate fault, injected with ``noise_scale_bug``). First with a synthetic Gaussian mechanism
through the generic :class:`rdpest.auditing.Auditor` (any black-box trainer plugs in the same
way), then with real DP-SGD through :class:`rdpest.auditing.DPSGDAuditor`. An audit is random (its
runs and the estimator's split), so each one is repeated over several seeds: the figure shows the
DV estimator's certified lower bound of every seed (dots) and their median (bar) with the min–max
range, against the claim.

Run ``python examples/04_catch_a_bug.py [--quick] [--out DIR]``: it writes the figure and prints
its path. ``--quick`` (used by the tests and by this page) audits 60 + 60 runs three times per
pipeline; the full run 500 + 500 runs, ten times for the Gaussian mechanism and five for DP-SGD.
"""

import argparse
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

from rdpest import DVRenyiEstimator
from rdpest.auditing import Auditor, DPSGDAuditor, GaussianMechanismScore

parser = argparse.ArgumentParser(description="Catch a trainer that adds too little noise.")
parser.add_argument("--quick", action="store_true", help="few runs and seeds, for CI")
parser.add_argument("--out", type=Path, default=Path("example-output"))
args = parser.parse_args()

n_runs = 60 if args.quick else 500
seeds = {"gaussian": range(3 if args.quick else 10), "dpsgd": range(3 if args.quick else 5)}

# %%
# The audits, one per pipeline and seed
# -------------------------------------
# A user's own pipeline is any picklable ``score_fn(include_canary, seed) -> float``; here the
# Gaussian mechanism stands for it. Each audit fits only the DV estimator (the bound the figure
# shows; an audit's default also fits the Bernoulli baseline and the GDP route, and takes the DV
# point estimate as the median of five fits), which keeps the repetitions cheap.


def dv_only(seed):
    return {"dv": DVRenyiEstimator(alpha=2.0, random_state=seed)}


rows = []
for bug in (1.0, 0.25):
    mechanism = GaussianMechanismScore(sensitivity=1.0, noise_std=1.0, noise_scale_bug=bug)
    claim = mechanism.claimed_epsilon(2.0)
    gaussian = [
        Auditor(
            mechanism,
            claim,
            alpha=2.0,
            n_runs=n_runs,
            estimators=dv_only(seed),
            random_state=seed,
            progress=False,
        ).run()
        for seed in seeds["gaussian"]
    ]
    rows.append((f"Gaussian mechanism, noise x{bug:g}", gaussian))
    dpsgd = [
        DPSGDAuditor(
            alpha=2.0,
            claimed_epsilon=1.0,
            steps=10 if args.quick else 100,
            n_runs=n_runs,
            noise_scale_bug=bug,
            estimators=dv_only(seed),
            n_jobs=1 if args.quick else -1,
            random_state=seed,
            progress=False,
        ).run()
        for seed in seeds["dpsgd"]
    ]
    rows.append((f"DP-SGD, noise x{bug:g}", dpsgd))

bounds = [np.array([r.estimates["dv"]["lower_bound"] for r in results]) for _, results in rows]
for (name, results), values in zip(rows, bounds, strict=True):
    verdicts = sorted({r.verdict for r in results})
    print(
        f"{name:<32} claim {results[0].claimed_epsilon:.2f}  DV bound {np.median(values):.3f} "
        f"(median; {values.min():.3f} to {values.max():.3f} over {len(values)} seeds)  "
        f"verdicts {','.join(verdicts)}"
    )

# %%
# The bounds against the claim
# ----------------------------
# The honest pipelines' bounds stay below the claim at every seed; the buggy ones' exceed it at
# every seed, which proves their claim false.

args.out.mkdir(parents=True, exist_ok=True)
fig, ax = plt.subplots(figsize=(8, 3.8))
names = [name for name, _ in rows]
medians = np.array([np.median(values) for values in bounds])
spread = np.array([medians - [v.min() for v in bounds], [v.max() for v in bounds] - medians])
ax.barh(names, medians, xerr=spread, color="tab:green", alpha=0.6, capsize=4)
for k, values in enumerate(bounds):
    ax.plot(values, [k] * len(values), "k.", label="one seed" if k == 0 else None)
ax.axvline(1.0, color="tab:red", ls="--", label="claimed ε₂ = 1")
ax.set_xlabel("certified lower bound on D_2 (DV estimator)")
ax.set_title("median (bar) and min–max (whisker) over the seeds", fontsize="small")
ax.legend()
fig.tight_layout()
path = args.out / "04_catch_a_bug.png"
fig.savefig(path, dpi=110)
print(f"figure: {path}")
