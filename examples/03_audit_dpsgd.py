"""Audit Opacus DP-SGD on scikit-learn's digits and read the verdict.

Run: python examples/03_audit_dpsgd.py [--quick] [--out DIR]
Trains logistic-regression models with DP-SGD (worst-case pretrained start, blank canary) with and
without the canary, estimates D_α between the canary's losses, and compares the certified bounds
with the claim from Opacus's RDP accountant. Re-running resumes from DIR. Writes the audit plot and
prints its path.
"""

import argparse
from pathlib import Path

from rdpest.auditing import DPSGDAuditor

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
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
)
result = audit.run()
print(result.summary())
print(
    "Reading it: a certified lower bound above the claim would prove the claim false; point "
    "estimates and the GDP route are not certificates."
)
path = args.out / "03_audit_dpsgd.png"
result.plot(path)
print(f"figure: {path}")
