"""Command line interface: ``rdpest audit | estimate | bench | quickstart``.

Exit codes: 0 success, 1 failure while running, 2 usage errors (argparse's convention).
"""

from __future__ import annotations

import argparse
import json
import os
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


#: The exit status of ``rdpest audit --fail-on-violation`` when the audit finds a violation (0 is
#: success, 1 an error, 2 a usage error, 130 an interrupt).
EXIT_VIOLATION = 3


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
    """Read a sample from .npy, .npz (first array), .csv or .txt (whitespace separated).

    The result is a float64 array of shape (n,) or (n, d); anything else (an empty or 0-d file,
    a structured or complex array, a directory) is a ValueError naming the file.
    """
    file = Path(path)
    if file.is_dir():
        raise ValueError(f"{path} is a directory, not a file of samples")
    if not file.is_file():
        raise ValueError(f"no such file: {path}")
    suffix = file.suffix.lower()
    if suffix not in (".npy", ".npz", ".csv", ".txt"):
        raise ValueError(f"unsupported format {suffix!r} for {path}: use .npy, .npz, .csv, .txt")
    try:
        if suffix == ".npy":
            data = np.load(file, allow_pickle=False)
        elif suffix == ".npz":
            with np.load(file, allow_pickle=False) as archive:
                if not archive.files:
                    raise ValueError("it holds no arrays")
                data = archive[archive.files[0]]
        else:
            data = np.loadtxt(file, delimiter="," if suffix == ".csv" else None, ndmin=1)
    except (OSError, ValueError, EOFError, UnicodeDecodeError) as exc:
        raise ValueError(f"cannot read {path}: {exc or type(exc).__name__}") from None
    data = np.asarray(data)
    if data.dtype.names is not None or data.dtype.kind not in "biuf":
        raise ValueError(
            f"{path} holds a {data.dtype} array; samples must be real numbers (integer or float)"
        )
    if data.ndim not in (1, 2) or data.shape[0] == 0:
        raise ValueError(
            f"{path} must hold a non-empty array of shape (n,) or (n, d), got shape {data.shape}"
        )
    return data.astype(np.float64)


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


# The files an audit writes into --out, besides the run store's own.
_AUDIT_OUTPUTS = ("result.json", "O.npy", "O_prime.npy", "audit.png")
# Seconds an idle joblib worker of `rdpest audit` lives (loky's default is 300 s). Workers also
# end with the audit's process on Linux (rdpest.utils.processes.end_with_parent), which covers
# SIGKILL, the one signal no handler sees; Ctrl-C shuts them down explicitly.
IDLE_WORKER_SECONDS = 10


def _check_out_dir(out: Path) -> None:
    """Fail before any training if the audit could not write its results under ``out``."""
    for parent in [out, *out.parents]:
        if parent.exists() and not parent.is_dir():
            raise ValueError(f"--out {out}: {parent} exists and is not a directory")
    try:
        out.mkdir(parents=True, exist_ok=True)
        probe = out / f".rdpest-write-test-{os.getpid()}"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        raise ValueError(
            f"--out {out} is not a writable directory: {exc.strerror or exc}"
        ) from None
    for name in _AUDIT_OUTPUTS:
        target = out / name
        if target.exists() and not target.is_file():
            raise ValueError(f"--out {out}: {target} exists and is not a file")


def _cmd_audit(args) -> int:
    from joblib import parallel_config

    from rdpest.auditing import DPSGDAuditor
    from rdpest.auditing.dpsgd.data import load_data
    from rdpest.utils.processes import end_with_parent

    out = Path(args.out)
    if (args.claimed_epsilon is None) == (args.noise_multiplier is None):
        if args.noise_multiplier is None:
            args.claimed_epsilon = 1.0  # the default claim when neither is given
        else:
            raise ValueError("give only one of --claimed-epsilon and --noise-multiplier")
    _check_out_dir(out)
    X, y = load_data(args.data)  # before any training: a bad file ends here in one line
    print(
        f"Auditing DP-SGD ({args.model}, {args.canary} canary, {args.steps} full-batch steps) "
        f"on {_describe_data(args.data, X)}: {args.runs} runs with and {args.runs} without the "
        "canary"
        + (f", in rounds up to {args.max_runs} each" if args.max_runs else "")
        + f"; finished runs are kept in {out} (re-running resumes).",
        file=sys.stderr,
    )
    audit = DPSGDAuditor(
        alpha=args.alpha,
        noise_multiplier=args.noise_multiplier,
        claimed_epsilon=args.claimed_epsilon,
        steps=args.steps,
        n_runs=args.runs,
        max_runs=args.max_runs,
        target_epsilon=args.target_epsilon,
        model=args.model,
        canary=args.canary,
        data=(X, y),
        beta=args.beta,
        n_jobs=args.n_jobs,
        device=args.device,
        store=out,
        random_state=args.seed,
    )
    try:
        with parallel_config(
            backend="loky",
            idle_worker_timeout=IDLE_WORKER_SECONDS,
            initializer=end_with_parent,
        ):
            result = audit.run()
    except KeyboardInterrupt:
        _stop_workers()
        raise
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
    if args.fail_on_violation and result.verdict == "violation":
        return EXIT_VIOLATION
    return 0


def _describe_data(spec: str, X: np.ndarray) -> str:
    """The audited data in words: where it comes from, and how many examples of what shape."""
    if X.ndim > 2:
        size = f"{len(X)} images of " + "x".join(str(s) for s in X.shape[1:])
    else:
        size = f"{len(X)} examples of {X.shape[1]} values"
    if spec == "digits":
        return f"scikit-learn's digits ({size})"
    kind, _, path = spec.partition(":")
    return f"{kind} from {path} ({size})"


def _data_spec(text: str) -> str:
    """argparse type of ``--data``: a well-formed ``KIND:PATH`` (the files are read later)."""
    from rdpest.auditing.dpsgd.data import parse_data_spec

    try:
        kind, path = parse_data_spec(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return kind if path is None else f"{kind}:{path}"


def _stop_workers() -> None:
    """Shut down joblib's worker processes at once (an interrupted audit leaves none behind)."""
    from joblib.externals.loky import get_reusable_executor

    get_reusable_executor().shutdown(wait=False, kill_workers=True)


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


def _positive_int(text: str) -> int:
    """argparse type: an integer >= 1 (a usage error otherwise)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="rdpest", description="Estimate Rényi divergences and audit Rényi DP claims."
    )
    parser.add_argument(
        "--traceback", action="store_true", help="show the full traceback of an error"
    )
    sub = parser.add_subparsers(dest="command", required=True)

    audit = sub.add_parser(
        "audit", help="audit Opacus DP-SGD on the embedded digits or on MNIST / CIFAR-10 files"
    )
    audit.add_argument("--runs", type=_positive_int, default=500, help="runs per arm (default 500)")
    audit.add_argument(
        "--max-runs",
        type=_positive_int,
        default=None,
        help="sequential audit: train in rounds from --runs up to this many runs per arm, "
        "stopping at the first certified violation (default: one round of --runs)",
    )
    audit.add_argument(
        "--target-epsilon",
        type=float,
        default=None,
        help="sequential audit: also stop once the audit detects epsilon_alpha >= this with 80%% "
        "probability",
    )
    audit.add_argument("--alpha", type=float, default=2.0)
    audit.add_argument("--beta", type=float, default=0.05)
    claim = audit.add_mutually_exclusive_group()
    claim.add_argument(
        "--claimed-epsilon", type=float, default=None, help="claimed ε_α (default 1)"
    )
    claim.add_argument("--noise-multiplier", type=float, default=None, help="DP-SGD's sigma")
    audit.add_argument("--steps", type=_positive_int, default=100, help="DP-SGD steps (full batch)")
    audit.add_argument(
        "--data",
        type=_data_spec,
        default="digits",
        metavar="KIND:PATH",
        help="data to audit on, from files you already have (nothing is downloaded): "
        "mnist:DIR (MNIST's IDX files, maybe .gz), cifar10:DIR (CIFAR-10's binary version, "
        "cifar-10-batches-bin), npz:FILE (arrays X and y, or x_train and y_train) or digits "
        "(scikit-learn's embedded digits; the default)",
    )
    audit.add_argument(
        "--model",
        default="lr",
        choices=["lr", "mlp", "cnn", "mnist_cnn", "cifar10_cnn"],
        help="lr, mlp, cnn (small, for the 8x8 digits), mnist_cnn (1x28x28 images) or "
        "cifar10_cnn (3x32x32 images) (default lr)",
    )
    audit.add_argument("--canary", default="blank", choices=["blank", "clipbkd"])
    audit.add_argument("--out", default="rdpest-audit", help="directory for runs and results")
    audit.add_argument("--n-jobs", type=int, default=-1, help="parallel workers (-1: all cores)")
    audit.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
    audit.add_argument("--seed", type=int, default=0)
    audit.add_argument("--json", action="store_true", help="print the result as JSON")
    audit.add_argument(
        "--fail-on-violation",
        action="store_true",
        help=f"exit with status {EXIT_VIOLATION} when the verdict is a violation (for CI pipelines;"
        " 0: no violation, 1: an error, 2: bad arguments)",
    )
    audit.set_defaults(func=_cmd_audit)

    bench = sub.add_parser("bench", help="run the known-divergence benchmark")
    bench.add_argument("--quick", action="store_true", help="two cells, 5 repetitions")
    bench.add_argument(
        "--repetitions", type=_positive_int, default=None, help="repetitions per cell"
    )
    bench.add_argument("--out", default="rdpest-bench", help="directory for the results")
    bench.set_defaults(func=_cmd_bench)

    quick = sub.add_parser("quickstart", help="estimate D_alpha of generated Gaussian samples")
    quick.add_argument("--alpha", type=float, default=2.0)
    quick.add_argument("--divergence", type=float, default=1.0, help="true D_alpha to generate")
    quick.add_argument("--n", type=_positive_int, default=2000, help="samples per side")
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
    """Entry point of the ``rdpest`` console script.

    Exit status: 0 success; 1 an error, reported on one line ``rdpest <command>: error: ...``
    (``--traceback`` shows the full traceback instead); 2 a usage error (argparse); 130 when
    interrupted with Ctrl-C.
    """
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except KeyboardInterrupt:
        print(f"rdpest {args.command}: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # every failure ends in one line, unless --traceback asks
        if args.traceback:
            raise
        if isinstance(exc, ValueError):
            message = str(exc)
        elif isinstance(exc, OSError) and exc.filename is not None:
            message = f"{exc.filename}: {exc.strerror or exc}"
        else:
            message = f"{type(exc).__name__}: {exc}"
        print(f"rdpest {args.command}: error: {message}", file=sys.stderr)
        return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
