"""
Audit Opacus DP-SGD on scikit-learn's digits and read the verdict
=================================================================

:class:`rdpest.auditing.DPSGDAuditor` trains logistic-regression models with DP-SGD (from a
worst-case pretrained start, with a blank canary) with and without the canary, estimates D_α
between the canary's losses, and compares the certified bounds with the claim, whose noise
multiplier Opacus's RDP accountant solves. Re-running resumes from the store under ``--out``.

Run ``python examples/03_audit_dpsgd.py [--quick] [--out DIR]``: it writes the audit's plot and
prints its path. ``--quick`` (used by the tests and by this page) trains 40 + 40 runs of 10 steps;
the full run 500 + 500 runs of 100 steps on every core. The plot is one audit's: for the spread of
such bounds over repeated audits see :ref:`sphx_glr_auto_examples_04_catch_a_bug.py`.
"""

import argparse
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

from rdpest.auditing import DPSGDAuditor

parser = argparse.ArgumentParser(description="Audit Opacus DP-SGD on the digits.")
parser.add_argument("--quick", action="store_true", help="few runs and steps, for CI")
parser.add_argument("--out", type=Path, default=Path("example-output"))
args = parser.parse_args()

audit = DPSGDAuditor(
    alpha=2.0,
    claimed_epsilon=1.0,  # the claim; the noise multiplier is solved with Opacus's accountant
    steps=10 if args.quick else 100,
    n_runs=40 if args.quick else 500,
    model="lr",
    canary="blank",
    n_jobs=1 if args.quick else -1,
    store=args.out / ("03_audit_quick" if args.quick else "03_audit"),
    random_state=0,
    progress=False,
)
result = audit.run()
print(result.summary())
print(
    "Reading it: a certified lower bound above the claim would prove the claim false; point "
    "estimates and the GDP route are not certificates."
)

# %%
# The audit's plot
# ----------------
# The canary's losses with and without it, each estimator's bound and point estimate against
# the claim, and the ROC of the membership-inference readout.

path = args.out / "03_audit_dpsgd.png"
figure = result.plot()  # a pyplot figure (shown on this page), saved as well
figure.savefig(path, dpi=120)
print(f"figure: {path}")
