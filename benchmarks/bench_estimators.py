"""Known-divergence benchmark of rdpest's four estimators (the harness is benchmarks/harness.py).

Usage::

    python benchmarks/bench_estimators.py            # full grid, 50 repetitions per cell
    python benchmarks/bench_estimators.py --quick    # two cells, 5 repetitions
    python benchmarks/bench_estimators.py --families gaussian_shift laplace_shift  # some families
    python benchmarks/bench_estimators.py --scale    # one DV fit at n = 100,000: seconds, memory

Results go to benchmarks/results/estimators/ (per-cell JSON, results.csv/.json/.md); a re-run
resumes from the finished cells.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import harness

from rdpest.utils.io import atomic_write_text

RESULTS = Path(__file__).resolve().parent / "results" / "estimators"

_SCALE_CODE = """
import json, resource, time
from rdpest import DVRenyiEstimator
from rdpest.datasets import make_renyi_pair
X, Y, truth = make_renyi_pair("gaussian_shift", 2.0, 1.0, {n}, random_state=0)
start = time.perf_counter()
est = DVRenyiEstimator(alpha=2.0, random_state=0).fit(X, Y)
seconds = time.perf_counter() - start
peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps({{"n": {n}, "seconds": seconds, "peak_mb": peak_mb, "truth": truth,
                  "point": est.divergence_, "bound": est.lower_bound_}}))
"""


def scale_run(n: int) -> dict:
    """One DV fit at n per side in a fresh process: seconds and peak resident memory."""
    done = subprocess.run(
        [sys.executable, "-c", _SCALE_CODE.format(n=n)], capture_output=True, text=True, check=True
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--quick",
        action="store_true",
        help="a small check, written under benchmarks/results/quick/ unless --out is given",
    )
    parser.add_argument("--repetitions", type=int, default=None)
    parser.add_argument("--scale", action="store_true")
    parser.add_argument(
        "--families",
        nargs="+",
        default=None,
        help="only these families' cells (default: all; 'classic' for the first benchmark's five)",
    )
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    given = list(argv if argv is not None else sys.argv[1:])
    command = " ".join(["python benchmarks/bench_estimators.py", *given])
    args.out = harness.results_folder(args.out, RESULTS, args.quick)
    if args.scale:
        harness.output_folder(args.out)  # a folder, or an exit saying why not, before the fit
        result = scale_run(100_000)
        atomic_write_text(args.out / "scale.json", json.dumps(result, indent=2))
        atomic_write_text(
            args.out / "scale.md",
            f"Command: `{command}`\n\n"
            "| n per side | seconds | peak MB | truth | point | bound |\n"
            "|---|---|---|---|---|---|\n"
            f"| {result['n']} | {result['seconds']:.1f} | {result['peak_mb']:.0f} "
            f"| {result['truth']:.3f} | {result['point']:.3f} | {result['bound']:.3f} |\n",
        )
        print(json.dumps(result, indent=2))
        return 0
    families = args.families
    if families == ["classic"]:
        families = harness.CLASSIC_FAMILIES
    table = harness.main(
        args.out,
        quick=args.quick,
        repetitions=args.repetitions,
        families=families,
        command=command,
    )
    print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
