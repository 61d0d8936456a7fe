"""Command line interface: ``rdpest audit | evaluate | estimate | bench | quickstart``.

Exit codes: 0 success, 1 failure while running, 2 usage errors (argparse's convention; also
``rdpest`` with no command, after printing the help), 3 a violation found by ``rdpest audit
--fail-on-violation``, 130 interrupted. ``docs/guide/cli.rst`` is the reference.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import re
import sys
import warnings
from pathlib import Path

import numpy as np

from rdpest.cli_files import load_samples
from rdpest.cli_parser import ESTIMATORS, EXIT_VIOLATION, build_parser
from rdpest.utils.io import dumps_strict

__all__ = ["ESTIMATORS", "EXIT_VIOLATION", "build_parser", "load_samples", "main"]


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
            raise _UsageError("--estimator hoeffding needs --privacy-loss-bound B (|L| <= B)")
        options["privacy_loss_bound"] = args.privacy_loss_bound
    return getattr(rdpest, ESTIMATORS[args.estimator])(**options)


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
    if not est.certified_:
        # Nothing is certified, so the reported bound is the trivial one; the estimator's own
        # value (which can exceed D_α, and the point estimate) is kept under its own name.
        out["lower_bound"] = 0.0
        out["uncertified_lower_bound"] = est.lower_bound_
        out["note"] = (
            f"not certified: {type(est).__name__} has no certified bound here (from samples "
            "alone it has no exact log ratio), so its lower_bound is 0 and its divergence a "
            "plug-in estimate; uncertified_lower_bound is its bound computed as if its estimated "
            "log ratio were exact, which can exceed the true divergence; --estimator dv or "
            "bernoulli certify a bound from samples"
        )
    if est.alpha > _STEADY_ORDERS:
        # CLI review: quickstart's D_α = 1 was estimated 5.29 at α = 100 and 48408 at α = 1e6,
        # printed as plain results; at α = 64 to 300, n = 2000, DV's estimates ranged 0 to 13
        high = (
            f"at α = {est.alpha:g} the point estimate rests on rare values of the sample moments "
            "of this order, which samples of this size seldom hold: it can be far from the "
            f"divergence either way (the benchmarks measure point estimates up to α = "
            f"{_STEADY_ORDERS})"
            + ("; the certified lower bound stays valid" if est.certified_ else "")
        )
        out["note"] = f"{out['note']}; {high}" if "note" in out else high
    return out


# The highest order at which the benchmarks measure point estimates
# (benchmarks/results/point_estimates/windows/: α up to 32).
_STEADY_ORDERS = 32


def _print_report(report: dict, as_json: bool) -> None:
    if as_json:
        print(dumps_strict(report, indent=2))
        return
    for key, value in report.items():
        text = f"{value:.4f}" if isinstance(value, float) else str(value)
        print(f"{key:>16}: {text}")


def _cmd_quickstart(args) -> int:
    from rdpest import DVRenyiEstimator
    from rdpest.datasets import MAX_SAMPLES, make_renyi_pair
    from rdpest.utils.validation import check_estimation_alpha, check_positive

    # Usage errors naming the flags (status 2), as for the other commands, not the library's
    # messages about parameters the user never named (alpha, n_samples, "X has 4 samples").
    try:
        check_estimation_alpha(args.alpha, "--alpha")
        check_positive(args.divergence, "--divergence", allow_zero=True)
    except ValueError as exc:
        raise _UsageError(str(exc)) from None
    least = DVRenyiEstimator(alpha=args.alpha).min_samples_per_side()
    if not least <= args.n <= MAX_SAMPLES:
        raise _UsageError(
            f"--n must lie in [{least}, {MAX_SAMPLES:.0e}] samples per side, got {args.n}"
        )
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


def _check_order_and_level(args) -> None:
    """``--alpha``, ``--beta`` and (for ``evaluate``) ``--claim`` and
    ``--membership-delta``, (for ``estimate``) ``--privacy-loss-bound`` in range, or a usage
    error naming the flag, before any file is read (as ``rdpest audit`` does for its
    settings)."""
    from rdpest.utils.validation import (
        check_beta,
        check_estimation_alpha,
        check_open_unit,
        check_positive,
    )

    checks = [
        ("alpha", "--alpha", check_estimation_alpha),
        ("beta", "--beta", check_beta),
    ]
    if hasattr(args, "claimed_epsilon"):
        checks.append(
            ("claimed_epsilon", "--claim", lambda v, n: check_positive(v, n, allow_zero=True))
        )
    if hasattr(args, "membership_delta"):
        checks.append(("membership_delta", "--membership-delta", check_open_unit))
    if getattr(args, "privacy_loss_bound", None) is not None:
        if args.estimator != "hoeffding":
            raise _UsageError(
                f"--privacy-loss-bound is used by --estimator hoeffding only, not by "
                f"--estimator {args.estimator}"
            )
        checks.append(("privacy_loss_bound", "--privacy-loss-bound", check_positive))
    for name, flag, check in checks:
        try:
            check(getattr(args, name), flag)
        except ValueError as exc:
            raise _UsageError(str(exc)) from None


def _cmd_estimate(args) -> int:
    _check_order_and_level(args)
    X = load_samples(args.samples_p)
    Y = load_samples(args.samples_q)
    est = _estimator(args)
    try:
        est.fit(X, Y)
    except ValueError as exc:  # name the files, not fit's arguments X and Y (in one pass, and
        # with a function: a path is not a replacement template, and may hold an "X" itself)
        files = {"X": f"{args.samples_p} (P)", "Y": f"{args.samples_q} (Q)"}
        message = re.sub(r"(?<![\w.])[XY](?![\w.])", lambda m: files[m.group()], str(exc))
        raise ValueError(message) from None
    _print_report(_report(est), args.json)
    return 0


def _cmd_evaluate(args) -> int:
    from rdpest.auditing import evaluate

    _check_order_and_level(args)
    estimators = _chosen_estimators(args)
    without, with_ = load_samples(args.without), load_samples(args.with_canary)
    if os.path.samefile(args.without, args.with_canary):  # CLI review: a verdict on O vs O,
        raise ValueError(  # recorded in the store's analyses as a test of its runs
            f"{args.without} and {args.with_canary} are the same file: give the scores without "
            "the canary and those with it"
        )
    store = _store_of(args.without, args.with_canary)
    opened = None
    if store is not None:
        from rdpest.auditing.evaluate import _opened_store, check_runs_of_store
        from rdpest.auditing.scores import checked_scores

        try:
            opened = _opened_store(store)
            try:
                scores = checked_scores(without, with_)
            except ValueError:  # evaluate names the problem below, with the files
                scores = None
            if scores is not None:  # files put beside a store are not its runs for that
                check_runs_of_store(opened, *scores)
        except ValueError as exc:  # the verdict still comes; only its record is missing
            why = _with_file_names(str(exc), args)
            if opened is not None:
                opened.close()
                opened = None
            print(
                f"rdpest evaluate: warning: this analysis is not recorded in "
                f"{store / 'analyses.jsonl'} ({why})",
                file=sys.stderr,
            )
    try:
        result = evaluate(
            without,
            with_,
            args.claimed_epsilon,
            alpha=args.alpha,
            beta=args.beta,
            estimators=estimators,
            random_state=args.seed,
            membership_delta=args.membership_delta,
            store=opened,
        )
    except ValueError as exc:
        raise ValueError(_with_file_names(str(exc), args)) from None
    finally:
        if opened is not None:
            opened.close()
    samples = {"without_canary": args.without, "with_canary": args.with_canary}
    if args.json:
        payload = _compact(result, samples)
        if opened is not None:
            payload["analyses_record"] = str(opened.analyses_path)
        print(dumps_strict(payload, indent=2))
    else:
        print(result.summary())
        print(
            f"runs used: {result.n_runs} per side, O from {args.without}, O' from "
            f"{args.with_canary}"
        )
        if opened is not None:
            print(f"this analysis is recorded in {opened.analyses_path}")
    return 0


def _with_file_names(message: str, args) -> str:
    """``evaluate``'s message with the files named, not the function's arguments (in one pass,
    so that a file named like an argument is not renamed again)."""
    files = {"losses_without_canary": args.without, "losses_with_canary": args.with_canary}
    return re.sub(r"(?<!\w)losses_with(?:out)?_canary(?!\w)", lambda m: files[m.group()], message)


def _store_of(*files: str) -> Path | None:
    """The audit store the score files were written into (both in one directory holding the
    store's config.json and runs.jsonl), whose analyses record this evaluation joins; else
    None."""
    parents = {Path(file).resolve().parent for file in files}
    if len(parents) != 1:
        return None
    directory = parents.pop()
    if (directory / "config.json").is_file() and (directory / "runs.jsonl").is_file():
        return directory
    return None


def _chosen_estimators(args) -> dict | None:
    """The audit's default estimators named by ``--estimators`` (None: all of them)."""
    if args.estimators is None:
        return None
    from rdpest.auditing import default_estimators

    defaults = default_estimators(args.alpha, args.seed)
    chosen = {name: defaults[name] for name in args.estimators}
    if not any(est.will_be_certified() for est in chosen.values()):
        raise _UsageError(
            f"--estimators {','.join(chosen)}: none of them is certified, so the audit could "
            "never find a violation; include dv or bernoulli"
        )
    return chosen


def _compact(result, samples: dict) -> dict:
    """An audit result for ``--json``: everything but the score arrays (those are in files)."""
    payload = json.loads(result.to_json())
    for key in ("format", "losses_without_canary", "losses_with_canary"):
        payload.pop(key, None)
    return {
        "verdict": payload.pop("verdict"),
        "n_runs": result.n_runs,
        **payload,
        "samples": samples,
    }


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
    # Files by those names in a folder that no audit made (no run store) are the user's own:
    # an audit overwrote them without a word (CLI review)
    present = [name for name in _AUDIT_OUTPUTS if (out / name).exists()]
    if present and not (out / "config.json").is_file():
        raise ValueError(
            f"--out {out} holds {', '.join(present)} but no audit's run store (config.json): "
            "the audit would overwrite them; choose another --out, or move them"
        )


class _UsageError(ValueError):
    """A combination of flags that cannot be used: reported like argparse's usage errors (status
    2)."""


def _cmd_audit(args) -> int:
    out = Path(args.out)
    if (args.target_epsilon is None) != (args.target_delta is None):
        given, missing = (
            ("--target-epsilon", "--target-delta")
            if args.target_delta is None
            else ("--target-delta", "--target-epsilon")
        )
        raise _UsageError(f"{given} needs {missing}: the (ε, δ) claim is given by the two together")
    claims = (args.claimed_epsilon, args.noise_multiplier, args.target_epsilon)
    if all(value is None for value in claims):
        args.claimed_epsilon = 1.0  # the default claim when none is given
    missing = [path for path in (out, *out.parents) if not path.exists()]
    _check_out_dir(out)
    try:
        return _run_audit(args, out)
    except BaseException:
        # An audit refused before its first run (a bad file or setting) leaves none of the
        # folders it created behind, as long as they are empty.
        for path in missing:
            if not path.is_dir() or any(path.iterdir()):
                break
            path.rmdir()
        raise


#: DPSGDAuditor's parameters and the ``rdpest audit`` flags that set them.
_AUDIT_FLAGS = {
    "n_runs": "--runs",
    "max_runs": "--max-runs",
    "power_target": "--power-target",
    "claimed_epsilon": "--claimed-epsilon",
    "target_epsilon": "--target-epsilon",
    "target_delta": "--target-delta",
    "noise_multiplier": "--noise-multiplier",
    "max_grad_norm": "--max-grad-norm",
    "learning_rate": "--learning-rate",
    "sample_rate": "--sample-rate",
    "membership_delta": "--membership-delta",
    "n_jobs": "--n-jobs",
    "alpha": "--alpha",
    "beta": "--beta",
    "steps": "--steps",
}


def _with_flag_names(message: str) -> str:
    """A DPSGDAuditor message with its parameter names written as the flags that set them."""
    for name, flag in _AUDIT_FLAGS.items():
        message = re.sub(rf"(?<![\w-]){name}\b", flag, message)
    # a flag left out is the Python API's None: "None" is no value to type after a flag
    return message.replace("must be None or a ", "must be a ")


def _run_audit(args, out: Path) -> int:
    from joblib import parallel_config

    from rdpest.auditing import DPSGDAuditor
    from rdpest.auditing.dpsgd.data import load_data
    from rdpest.utils.processes import end_with_parent

    audit = DPSGDAuditor(
        alpha=args.alpha,
        noise_multiplier=args.noise_multiplier,
        claimed_epsilon=args.claimed_epsilon,
        target_epsilon=args.target_epsilon,
        target_delta=args.target_delta,
        steps=args.steps,
        n_runs=args.runs,
        max_runs=args.max_runs,
        power_target=args.power_target,
        model=args.model,
        canary=args.canary,
        beta=args.beta,
        estimators=_chosen_estimators(args),
        max_grad_norm=args.max_grad_norm,
        learning_rate=args.learning_rate,
        sample_rate=args.sample_rate,
        n_jobs=args.n_jobs,
        device=args.device,
        store=out,
        random_state=args.seed,
        membership_delta=args.membership_delta,
    )
    try:  # a value out of range is a usage error (status 2), found before any file is read
        audit._checked_settings()
    except ValueError as exc:
        raise _UsageError(_with_flag_names(str(exc))) from None
    X, y = load_data(args.data)  # before any training: a bad file ends here in one line
    audit.data = (X, y)
    batches = "full-batch" if args.sample_rate == 1.0 else f"Poisson q = {args.sample_rate:g}"
    print(
        f"Auditing DP-SGD ({args.model}, {args.canary} canary, {args.steps} {batches} "
        f"step{'' if args.steps == 1 else 's'}) "
        f"on {_describe_data(args.data, X)}: {args.runs} runs with and {args.runs} without the "
        "canary"
        + (f", in rounds up to {args.max_runs} each" if args.max_runs else "")
        + f"; finished runs are kept in {out} (re-running resumes).",
        file=sys.stderr,
    )
    try:
        with parallel_config(
            backend="loky",
            idle_worker_timeout=IDLE_WORKER_SECONDS,
            initializer=end_with_parent,
            initargs=(os.getpid(),),  # a worker orphaned while it starts ends itself
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
        samples = {"without_canary": str(out / "O.npy"), "with_canary": str(out / "O_prime.npy")}
        print(
            dumps_strict(
                {**_compact(result, samples), "result": str(out / "result.json")}, indent=2
            )
        )
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


def _stop_workers() -> None:
    """Shut down joblib's worker processes at once (an interrupted audit leaves none behind)."""
    from joblib.externals.loky import get_reusable_executor

    get_reusable_executor().shutdown(wait=False, kill_workers=True)


def _cmd_bench(args) -> int:
    harness = _benchmark_harness()
    out = Path(args.out)
    flags = ["rdpest bench", *(["--quick"] if args.quick else [])]
    flags += [] if args.repetitions is None else ["--repetitions", str(args.repetitions)]
    command = " ".join([*flags, "--out", str(out)])
    try:
        table = harness.main(out, quick=args.quick, repetitions=args.repetitions, command=command)
    except SystemExit as exc:  # the harness's own exits (a bad --out): this command's error line
        if isinstance(exc.code, str):
            raise ValueError(exc.code) from None
        raise
    print(table)
    print(
        f"results: {out / 'results.md'}, {out / 'results.csv'}, {out / 'results.json'}; "
        f"finished cells in {out / 'cells'}",
        file=sys.stderr,  # stdout stays the table, for piping
    )
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


COMMANDS = {
    "audit": _cmd_audit,
    "evaluate": _cmd_evaluate,
    "estimate": _cmd_estimate,
    "bench": _cmd_bench,
    "quickstart": _cmd_quickstart,
}


class _StderrHandler(logging.StreamHandler):
    """Writes to the current ``sys.stderr`` (so a redirected or captured stderr sees it)."""

    @property
    def stream(self):
        return sys.stderr

    @stream.setter
    def stream(self, value):
        pass


def _one_line_warning(command, message, category, filename, lineno, line=None) -> str:
    """A warning as the command's line; one from another package says which file raised it."""
    where = Path(str(filename))
    ours = Path(__file__).resolve().parent in where.resolve().parents
    notes = ([] if category is UserWarning else [category.__name__]) + (
        [] if ours else [f"from {Path(where.parent.name, where.name)}:{lineno}"]
    )
    kind = f" ({', '.join(notes)})" if notes else ""
    return f"rdpest {command}: warning{kind}: {message}\n"


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``rdpest`` console script.

    Exit status: 0 success; 1 an error, reported on one line ``rdpest <command>: error: ...``
    (``--traceback`` shows the full traceback instead); 2 a usage error (argparse's, or flags
    that only work together given alone); 130 when interrupted with Ctrl-C.
    """
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:  # no command: the help, and the usage error's status
        parser.print_help()
        return 2
    logger = logging.getLogger("rdpest")
    handler, level, propagate = None, logger.level, logger.propagate
    if args.verbose:
        handler = _StderrHandler()
        handler.setFormatter(logging.Formatter("rdpest: %(message)s"))
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)
        # Printed here once: not again by the root logger's handlers (Opacus installs one when
        # it is imported, which printed every line a second time in its own format).
        logger.propagate = False
    # Warnings on one line in the command's voice, not Python's "file:line: UserWarning" with
    # the source line (the format only: filters, and pytest's recording, are untouched).
    formatwarning = warnings.formatwarning
    warnings.formatwarning = functools.partial(_one_line_warning, args.command)
    try:
        return COMMANDS[args.command](args)
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
        return 2 if isinstance(exc, _UsageError) else 1
    finally:
        warnings.formatwarning = formatwarning
        if handler is not None:
            logger.removeHandler(handler)
            logger.setLevel(level)
            logger.propagate = propagate


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
