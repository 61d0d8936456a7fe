"""Command line interface: ``rdpest audit | estimate | bench | quickstart``.

Exit codes: 0 success, 1 failure while running, 2 usage errors (argparse's convention).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

__all__ = ["main"]


# Estimator names on the command line, mapped to rdpest's public classes.
ESTIMATORS = {
    "dv": "DVRenyiEstimator",
    "markov": "MarkovRenyiBound",
    "hoeffding": "HoeffdingRenyiBound",
    "bernoulli": "BernoulliTPRFPRBaseline",
}


def _estimator(args):
    import rdpest

    options = {
        "alpha": args.alpha,
        "beta": args.beta,
        "direction": args.direction,
        "random_state": args.seed,
    }
    if args.estimator == "hoeffding":
        if args.privacy_loss_bound is None:
            raise ValueError("--estimator hoeffding needs --privacy-loss-bound B (|L| <= B)")
        options["privacy_loss_bound"] = args.privacy_loss_bound
    return getattr(rdpest, ESTIMATORS[args.estimator])(**options)


def load_samples(path: str) -> np.ndarray:
    """Read a sample from .npy, .npz (first array), .csv or .txt (whitespace separated)."""
    file = Path(path)
    if not file.is_file():
        raise ValueError(f"no such file: {path}")
    suffix = file.suffix.lower()
    try:
        if suffix == ".npy":
            data = np.load(file, allow_pickle=False)
        elif suffix == ".npz":
            with np.load(file, allow_pickle=False) as archive:
                if not archive.files:
                    raise ValueError(f"{path} holds no arrays")
                data = archive[archive.files[0]]
        elif suffix == ".csv":
            data = np.loadtxt(file, delimiter=",", ndmin=1)
        elif suffix == ".txt":
            data = np.loadtxt(file, ndmin=1)
        else:
            raise ValueError(
                f"unsupported format {suffix!r} for {path}: use .npy, .npz, .csv, .txt"
            )
    except (OSError, ValueError) as exc:
        if "unsupported format" in str(exc) or "holds no arrays" in str(exc):
            raise
        raise ValueError(f"cannot read {path}: {exc}") from None
    return np.asarray(data, dtype=np.float64)


def _report(est, truth: float | None = None) -> dict:
    out = {
        "estimator": type(est).__name__,
        "alpha": float(est.alpha),
        "beta": float(est.beta),
        "direction": est.direction,
        "divergence": est.divergence_,
        "lower_bound": est.lower_bound_,
        "certified": est.certified_,
    }
    if truth is not None:
        out["true_divergence"] = truth
    return out


def _print_report(report: dict, as_json: bool) -> None:
    if as_json:
        print(json.dumps(report, indent=2))
        return
    for key, value in report.items():
        text = f"{value:.4f}" if isinstance(value, float) else str(value)
        print(f"{key:>16}: {text}")


def _cmd_quickstart(args) -> int:
    from rdpest import DVRenyiEstimator
    from rdpest.datasets import make_renyi_pair

    X, Y, truth = make_renyi_pair(
        "gaussian_shift", args.alpha, args.divergence, args.n, random_state=args.seed
    )
    print(
        f"Two Gaussian samples of {args.n} each with known D_{args.alpha:g}(P||Q) = {truth:.4f}; "
        "fitting DVRenyiEstimator ...",
        file=sys.stderr,
    )
    est = DVRenyiEstimator(alpha=args.alpha, random_state=args.seed, verbose=1).fit(X, Y)
    _print_report(_report(est, truth), args.json)
    return 0


def _cmd_estimate(args) -> int:
    X = load_samples(args.samples_p)
    Y = load_samples(args.samples_q)
    est = _estimator(args).fit(X, Y)
    _print_report(_report(est), args.json)
    return 0


def _cmd_audit(args) -> int:
    from rdpest.auditing import DPSGDAuditor

    out = Path(args.out)
    if (args.claimed_epsilon is None) == (args.noise_multiplier is None):
        if args.noise_multiplier is None:
            args.claimed_epsilon = 1.0  # the default claim when neither is given
        else:
            raise ValueError("give only one of --claimed-epsilon and --noise-multiplier")
    print(
        f"Auditing DP-SGD ({args.model}, {args.canary} canary, {args.steps} full-batch steps) "
        f"on scikit-learn's digits: {args.runs} runs with and {args.runs} without the canary; "
        f"finished runs are kept in {out} (re-running resumes).",
        file=sys.stderr,
    )
    result = DPSGDAuditor(
        alpha=args.alpha,
        noise_multiplier=args.noise_multiplier,
        claimed_epsilon=args.claimed_epsilon,
        steps=args.steps,
        n_runs=args.runs,
        model=args.model,
        canary=args.canary,
        beta=args.beta,
        n_jobs=args.n_jobs,
        device=args.device,
        store=out,
        random_state=args.seed,
    ).run()
    np.save(out / "O.npy", result.losses_without_canary)
    np.save(out / "O_prime.npy", result.losses_with_canary)
    try:
        result.plot(out / "audit.png")
        figure = f"plot: {out / 'audit.png'}"
    except ImportError as exc:
        figure = f"no plot ({exc})"
    if args.json:
        print(result.to_json())
    else:
        print(result.summary())
        print(f"result: {out / 'result.json'}; samples: {out / 'O.npy'}, {out / 'O_prime.npy'}")
        print(figure)
    return 0


def _cmd_bench(args) -> int:
    harness = _benchmark_harness()
    print(harness.main(Path(args.out), quick=args.quick, repetitions=args.repetitions))
    return 0


def _benchmark_harness():
    """The known-divergence benchmark harness of a source checkout (benchmarks/harness.py).

    The harness is not part of the library package: ``rdpest bench`` loads it from the checkout
    this package was installed from (``pip install -e .``), and says so when it is not there.
    """
    import importlib.util

    path = Path(__file__).resolve().parent.parent / "benchmarks" / "harness.py"
    if not path.is_file():
        raise ValueError(
            f"rdpest bench runs the benchmark harness of a source checkout, and {path} does not "
            "exist: install rdpest from its repository with `pip install -e .`"
        )
    spec = importlib.util.spec_from_file_location("rdpest_benchmark_harness", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="rdpest", description="Estimate Rényi divergences and audit Rényi DP claims."
    )
    sub = parser.add_subparsers(dest="command", required=True)

    audit = sub.add_parser("audit", help="audit Opacus DP-SGD on the embedded digits data")
    audit.add_argument("--runs", type=int, default=500, help="runs per arm (default 500)")
    audit.add_argument("--alpha", type=float, default=2.0)
    audit.add_argument("--beta", type=float, default=0.05)
    claim = audit.add_mutually_exclusive_group()
    claim.add_argument(
        "--claimed-epsilon", type=float, default=None, help="claimed ε_α (default 1)"
    )
    claim.add_argument("--noise-multiplier", type=float, default=None, help="DP-SGD's sigma")
    audit.add_argument("--steps", type=int, default=100, help="DP-SGD steps (full batch)")
    audit.add_argument("--model", default="lr", choices=["lr", "mlp", "cnn"])
    audit.add_argument("--canary", default="blank", choices=["blank", "clipbkd"])
    audit.add_argument("--out", default="rdpest-audit", help="directory for runs and results")
    audit.add_argument("--n-jobs", type=int, default=-1, help="parallel workers (-1: all cores)")
    audit.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
    audit.add_argument("--seed", type=int, default=0)
    audit.add_argument("--json", action="store_true", help="print the result as JSON")
    audit.set_defaults(func=_cmd_audit)

    bench = sub.add_parser("bench", help="run the known-divergence benchmark")
    bench.add_argument("--quick", action="store_true", help="two cells, 5 repetitions")
    bench.add_argument("--repetitions", type=int, default=None)
    bench.add_argument("--out", default="rdpest-bench", help="directory for the results")
    bench.set_defaults(func=_cmd_bench)

    quick = sub.add_parser("quickstart", help="estimate D_alpha of generated Gaussian samples")
    quick.add_argument("--alpha", type=float, default=2.0)
    quick.add_argument("--divergence", type=float, default=1.0, help="true D_alpha to generate")
    quick.add_argument("--n", type=int, default=2000, help="samples per side")
    quick.add_argument("--seed", type=int, default=0)
    quick.add_argument("--json", action="store_true", help="machine-readable output")
    quick.set_defaults(func=_cmd_quickstart)

    est = sub.add_parser("estimate", help="estimate D_alpha between two samples read from files")
    est.add_argument("samples_p", help="sample from P (.npy, .npz, .csv or .txt)")
    est.add_argument("samples_q", help="sample from Q")
    est.add_argument("--alpha", type=float, default=2.0)
    est.add_argument("--beta", type=float, default=0.05)
    est.add_argument("--estimator", default="dv", choices=sorted(ESTIMATORS))
    est.add_argument("--direction", default="forward", choices=["forward", "reverse", "max"])
    est.add_argument(
        "--privacy-loss-bound",
        type=float,
        default=None,
        help="B with |log p/q| <= B (hoeffding only)",
    )
    est.add_argument("--seed", type=int, default=0)
    est.add_argument("--json", action="store_true", help="machine-readable output")
    est.set_defaults(func=_cmd_estimate)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``rdpest`` console script."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except ValueError as exc:
        print(f"rdpest {args.command}: error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
