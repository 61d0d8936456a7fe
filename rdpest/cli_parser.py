"""The ``rdpest`` command line's arguments: every command, flag, help text and default.

:mod:`rdpest.cli` runs the commands; this module only describes them (``docs/guide/cli.rst`` is
the reference page). Each subcommand's name is ``args.command``.
"""

from __future__ import annotations

import argparse

__all__ = ["ESTIMATORS", "EXIT_VIOLATION", "build_parser"]


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


def _data_spec(text: str) -> str:
    """argparse type of ``--data``: a well-formed ``KIND:PATH`` (the files are read later)."""
    from rdpest.auditing.dpsgd.data import parse_data_spec

    try:
        kind, path = parse_data_spec(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return kind if path is None else f"{kind}:{path}"


def _positive_int(text: str) -> int:
    """argparse type: an integer >= 1 (a usage error otherwise)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def _folder(text: str) -> str:
    """argparse type of ``--out``: a non-empty path (an empty one is the current directory, where
    an audit's store or a benchmark's cells would land among the user's files)."""
    if not text.strip():
        raise argparse.ArgumentTypeError("must name a folder, got an empty path")
    return text


def _seed(text: str) -> int:
    """argparse type of ``--seed``: an integer in [0, 2**32 - 1], the estimators' seeds (a usage
    error otherwise)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if not 0 <= value < 2**32:
        raise argparse.ArgumentTypeError(f"must lie in [0, 4294967295], got {value}")
    return value


def _estimator_names(text: str) -> list[str]:
    """argparse type of ``--estimators``: a comma list of the audit's estimators."""
    from rdpest.auditing.auditor import default_estimators

    known = list(default_estimators(2.0, 0))
    names = [name.strip() for name in text.split(",") if name.strip()]
    unknown = [name for name in names if name not in known]
    if unknown or not names:
        raise argparse.ArgumentTypeError(
            f"{text!r}: give a comma list of {', '.join(known)}"
            + (f" ({', '.join(unknown)} unknown)" if unknown else "")
        )
    return list(dict.fromkeys(names))


class _HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Shows each option's default, unless its help already says it or it has none to show."""

    def _get_help_string(self, action):
        text = action.help or ""
        default = action.default
        if "default" in text or default is None or default is False or default == argparse.SUPPRESS:
            return text
        return super()._get_help_string(action)


def _verbose(parser, default=argparse.SUPPRESS) -> None:
    parser.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        default=default,
        help="show the library's progress messages (logging INFO) on stderr",
    )


def _add_audit_estimators(parser) -> None:
    parser.add_argument(
        "--estimators",
        type=_estimator_names,
        default=None,
        metavar="NAMES",
        help="comma list of the audit's estimators: dv, bernoulli, gdp_route (certified dv and "
        "bernoulli share beta; gdp_route assumes a Gaussian trade-off and never decides the "
        "verdict) (default: all three)",
    )


def _add_membership_delta(parser) -> None:
    parser.add_argument(
        "--membership-delta",
        type=float,
        default=1e-5,
        metavar="DELTA",
        help="delta of the membership-inference readout's certified (epsilon, delta) lower "
        "bound, in (0, 1); a readout only, the verdict does not use it",
    )


def build_parser() -> argparse.ArgumentParser:
    from rdpest import __version__

    parser = argparse.ArgumentParser(
        prog="rdpest",
        description="Estimate Rényi divergences and audit Rényi DP claims.",
        epilog="exit status: 0 success, 1 error, 2 usage error (also: no command given), "
        f"{EXIT_VIOLATION} violation with audit --fail-on-violation, 130 interrupted",
        formatter_class=_HelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"rdpest {__version__}")
    parser.add_argument(
        "--traceback", action="store_true", help="show the full traceback of an error"
    )
    _verbose(parser, default=False)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    def add(name, **kwargs):
        command = sub.add_parser(name, formatter_class=_HelpFormatter, **kwargs)
        _verbose(command)
        return command

    audit = add(
        "audit", help="audit Opacus DP-SGD on the embedded digits or on MNIST / CIFAR-10 files"
    )
    audit.add_argument("--runs", type=_positive_int, default=500, help="runs per arm")
    audit.add_argument(
        "--max-runs",
        type=_positive_int,
        default=None,
        help="sequential audit: train in rounds from --runs up to this many runs per arm, "
        "stopping at the first certified violation (default: one round of --runs)",
    )
    audit.add_argument(
        "--power-target",
        type=float,
        default=None,
        help="sequential audit: also stop once the audit detects epsilon_alpha >= this with 80%% "
        "probability (default: none; stop only at a violation or at --max-runs)",
    )
    audit.add_argument("--alpha", type=float, default=2.0, help="Rényi order of the claim")
    audit.add_argument(
        "--beta", type=float, default=0.05, help="probability of a false violation verdict"
    )
    claim = audit.add_mutually_exclusive_group()
    claim.add_argument(
        "--claimed-epsilon", type=float, default=None, help="claimed ε_α (default: 1)"
    )
    claim.add_argument(
        "--noise-multiplier",
        type=float,
        default=None,
        help="DP-SGD's sigma; the claim is then its RDP accounting (default: solved for the claim)",
    )
    claim.add_argument(
        "--target-epsilon",
        type=float,
        default=None,
        help="the claim as Opacus's (epsilon, delta) budget, with --target-delta: sigma is "
        "Opacus's get_noise_multiplier for it and the audited claim its epsilon_alpha "
        "(default: none)",
    )
    audit.add_argument(
        "--target-delta",
        type=float,
        default=None,
        help="delta of --target-epsilon (default: none)",
    )
    audit.add_argument("--steps", type=_positive_int, default=100, help="DP-SGD steps")
    audit.add_argument(
        "--max-grad-norm", type=float, default=1.0, help="DP-SGD's per-example clipping norm C"
    )
    audit.add_argument("--learning-rate", type=float, default=1.0, help="DP-SGD's learning rate")
    audit.add_argument(
        "--sample-rate",
        type=float,
        default=1.0,
        help="Poisson sampling rate of DP-SGD's batches (1: full batch)",
    )
    _add_audit_estimators(audit)
    _add_membership_delta(audit)
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
        "cifar10_cnn (3x32x32 images)",
    )
    audit.add_argument(
        "--canary",
        default="blank",
        choices=["blank", "clipbkd"],
        help="the audited example: a blank input or ClipBKD's",
    )
    audit.add_argument(
        "--out",
        type=_folder,
        default="rdpest-audit",
        help="directory for the runs (resumed on re-run), result.json, O.npy (scores without "
        "the canary), O_prime.npy (with) and audit.png",
    )
    audit.add_argument("--n-jobs", type=int, default=-1, help="parallel workers (-1: all cores)")
    audit.add_argument(
        "--device", default="auto", choices=["auto", "cpu", "cuda"], help="where to train"
    )
    audit.add_argument("--seed", type=_seed, default=0, help="seed of the runs and estimators")
    audit.add_argument(
        "--json",
        action="store_true",
        help="print the verdict, estimates, power, configuration and runs used as JSON (the "
        "scores stay in the files under --out)",
    )
    audit.add_argument(
        "--fail-on-violation",
        action="store_true",
        help=f"exit with status {EXIT_VIOLATION} when the verdict is a violation (for CI pipelines;"
        " 0: no violation, 1: an error, 2: bad arguments)",
    )

    evaluate = add(
        "evaluate",
        help="an audit's verdict on scores you already have (e.g. the O.npy and O_prime.npy "
        "rdpest audit wrote)",
        description="Give an audit's verdict on scores already collected: the same estimators, "
        "beta sharing, verdict and power report as rdpest audit, which it reproduces exactly on "
        "the O.npy and O_prime.npy an audit wrote (same --alpha, --beta, --seed, --estimators).",
    )
    evaluate.add_argument("without", help="scores without the canary, O (e.g. O.npy)")
    evaluate.add_argument("with_canary", help="scores with the canary, O' (e.g. O_prime.npy)")
    evaluate.add_argument(
        "--claim",
        "--claimed-epsilon",
        dest="claimed_epsilon",
        type=float,
        required=True,
        help="the claimed ε_α at order --alpha",
    )
    evaluate.add_argument("--alpha", type=float, required=True, help="Rényi order of the claim")
    evaluate.add_argument(
        "--beta", type=float, default=0.05, help="probability of a false violation verdict"
    )
    _add_audit_estimators(evaluate)
    _add_membership_delta(evaluate)
    evaluate.add_argument("--seed", type=_seed, default=0, help="the audit's --seed (estimators)")
    evaluate.add_argument(
        "--json", action="store_true", help="print the verdict, estimates and power as JSON"
    )

    bench = add("bench", help="run the known-divergence benchmark")
    bench.add_argument("--quick", action="store_true", help="two cells, 5 repetitions")
    bench.add_argument(
        "--repetitions",
        type=_positive_int,
        default=None,
        help="repetitions per cell (default: 50, or 5 with --quick)",
    )
    bench.add_argument(
        "--out",
        type=_folder,
        default="rdpest-bench",
        help="directory for the results (resumed on re-run)",
    )

    quick = add("quickstart", help="estimate D_alpha of generated Gaussian samples")
    quick.add_argument("--alpha", type=float, default=2.0, help="Rényi order")
    quick.add_argument("--divergence", type=float, default=1.0, help="true D_alpha to generate")
    quick.add_argument("--n", type=_positive_int, default=2000, help="samples per side")
    quick.add_argument("--seed", type=_seed, default=0, help="seed of the samples and estimator")
    quick.add_argument("--json", action="store_true", help="machine-readable output")

    est = add(
        "estimate",
        help="estimate D_alpha between two samples read from files",
        description="Estimate D_alpha(P || Q), P = the first file, Q = the second, with one "
        "estimator at the full --beta. An audit instead orders (O' || O) (with the canary "
        "first), takes --direction max, and shares beta among its certified estimators, so "
        "these numbers differ from an audit's on the same files: `rdpest evaluate O.npy "
        "O_prime.npy --claim EPS --alpha A` reproduces an audit's.",
    )
    est.add_argument("samples_p", help="sample from P (.npy, .npz, .csv or .txt)")
    est.add_argument("samples_q", help="sample from Q (same formats)")
    est.add_argument("--alpha", type=float, default=2.0, help="Rényi order")
    est.add_argument(
        "--beta",
        type=float,
        default=0.05,
        help="the bound's error probability, all of it for this one estimator",
    )
    est.add_argument(
        "--estimator",
        default="dv",
        choices=sorted(ESTIMATORS),
        help="markov and hoeffding are not certified from samples (lower bound 0)",
    )
    est.add_argument(
        "--direction",
        default="forward",
        choices=["forward", "reverse", "max"],
        help="forward D(P||Q), reverse D(Q||P), or the larger (an audit's)",
    )
    est.add_argument(
        "--privacy-loss-bound",
        type=float,
        default=None,
        help="B with |log p/q| <= B (hoeffding only, which requires it; default: none)",
    )
    est.add_argument("--seed", type=_seed, default=0, help="seed of the estimator's splits")
    est.add_argument("--json", action="store_true", help="machine-readable output")
    return parser
