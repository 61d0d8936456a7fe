"""Auditor: black-box Rényi DP audit of any training pipeline (the paper's Algorithm 3).

The auditor calls ``score_fn(include_canary, seed)`` ``n_runs`` times with the canary and ``n_runs``
times without it, collecting O′ and O (the canary's score after each run), then fits every
estimator to (O′, O) with ``direction="max"`` — an (α, ε_α)-RDP claim bounds both directions — and
returns an :class:`AuditResult`. The verdict is "violation" when a certified lower bound exceeds
the claimed ε_α (Kim, Varshney & Alabi 2026, Lemma 2.5: a level-β test of the claim); otherwise
"underpowered" when no certified bound could exceed the claim at these sample sizes (the
certificates' ceiling, :mod:`rdpest.auditing.power`) or the scores are perfectly separated yet
no bound exceeds it, else "not_refuted", reported with the ε_α the audit would have detected.

Validity of the verdict: the certified estimators share the level β (each gets β/k), so the
probability of accusing an honest pipeline is at most β by a union bound.

Reliability: each run's seed is derived from ``random_state``, the arm
and the run index alone, so results do not depend on ``n_jobs`` or on the joblib backend (loky,
Dask, Ray through ``joblib.parallel_config``); finished runs are appended to a store as they finish
and a re-run resumes; a run that raises stops the audit once the runs in flight are stored.
A score function that trains several runs at once (``score_many``) is given
fixed groups of run indices, so this holds for it too.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import warnings
from numbers import Integral

import numpy as np
from joblib import delayed
from sklearn.base import clone
from tqdm.auto import tqdm

from rdpest.auditing.analyses import earlier_analyses, retest_message, settings_text, warn_unseeded
from rdpest.auditing.identity import score_fn_identity
from rdpest.auditing.membership import MEMBERSHIP_DELTA, membership_readouts
from rdpest.auditing.power import audit_power, runs_needed, unsized, verdict_of
from rdpest.auditing.result import AuditResult, provenance
from rdpest.auditing.runs import (
    WITH_CANARY,
    WITHOUT_CANARY,
    _guarded,
    _one_run,
    _run_group,
    first_runs,
    results_as_finished,
    run_seed,
    runs_per_call,
)
from rdpest.auditing.scores import checked_scores
from rdpest.auditing.sequential import round_sizes
from rdpest.auditing.store import RunStore
from rdpest.estimators.base import RenyiEstimatorBase
from rdpest.utils.validation import check_beta, check_estimation_alpha, check_open_unit, check_real

__all__ = [
    "AUDIT_SETTINGS",
    "Auditor",
    "check_audit_settings",
    "default_estimators",
    "run_seed",
    "runs_per_call",
]

logger = logging.getLogger(__name__)


def default_estimators(alpha: float, random_state: int) -> dict:
    """The estimators an audit reports by default.

    ``dv`` (certified), ``bernoulli`` (the threshold baseline, certified) and ``gdp_route`` (the
    prior state of the art's (ε, δ) → μ-GDP → RDP route; assumes a Gaussian trade-off curve, so
    it is reported but never decides the verdict). The DV point estimate is the median over five
    train/certify partitions (``n_repeats=5``), each cross-fitted (the estimator's default): an
    audit reports it as its headline number, five partitions make it markedly steadier than one,
    and the extra critic fits cost seconds next to the training runs (only the first partition's
    first critic certifies, so the bound keeps its level).
    """
    from rdpest import BernoulliTPRFPRBaseline, DVRenyiEstimator

    return {
        "dv": DVRenyiEstimator(
            alpha=alpha, direction="max", n_repeats=5, random_state=random_state
        ),
        "bernoulli": BernoulliTPRFPRBaseline(
            alpha=alpha, direction="max", conversion="direct", random_state=random_state
        ),
        "gdp_route": BernoulliTPRFPRBaseline(
            alpha=alpha, direction="max", conversion="gdp", random_state=random_state
        ),
    }


#: The generic audit's settings besides the claim, as :class:`Auditor` names them (and
#: :func:`check_audit_settings` takes them).
AUDIT_SETTINGS = (
    "alpha",
    "beta",
    "n_runs",
    "max_runs",
    "power_target",
    "estimators",
    "n_jobs",
    "random_state",
    "membership_delta",
)


def check_audit_settings(
    *,
    claimed_epsilon,
    alpha,
    beta,
    n_runs,
    estimators,
    n_jobs,
    random_state,
    max_runs=None,
    power_target=None,
    membership_delta=MEMBERSHIP_DELTA,
) -> dict:
    """Validate an audit's settings (everything but the score function); return its estimators.

    :class:`Auditor` runs it before any training, and so does
    :class:`~rdpest.auditing.dpsgd.DPSGDAuditor` before pretraining. ``estimators=None`` gives
    :func:`default_estimators`. Each estimator must be at the audit's order and have room for its
    splits in ``n_runs`` runs per arm (its public ``min_samples_per_side()``).
    ``membership_delta`` (the δ of the membership readout's (ε, δ) bound) must lie in (0, 1).
    """
    claimed = check_real(claimed_epsilon, "claimed_epsilon")
    if claimed < 0:
        raise ValueError(f"claimed_epsilon must be >= 0, got {claimed}")
    check_estimation_alpha(alpha)
    check_beta(beta)
    check_open_unit(membership_delta, "membership_delta")
    for value, name in ((n_runs, "n_runs"), (random_state, "random_state")):
        if isinstance(value, bool) or not isinstance(value, Integral):
            raise ValueError(f"{name} must be an integer, got {value!r}")
    if not 0 <= random_state < 2**32:  # the estimators' seeds (scikit-learn's range)
        raise ValueError(f"random_state must lie in [0, 2**32 - 1], got {random_state}")
    if max_runs is not None:
        if isinstance(max_runs, bool) or not isinstance(max_runs, Integral) or max_runs < n_runs:
            raise ValueError(
                f"max_runs, where given, must be an integer >= n_runs={n_runs}, got {max_runs!r}"
            )
    if power_target is not None:
        target = check_real(power_target, "power_target")
        if not (math.isfinite(target) and target > 0):
            raise ValueError(f"power_target must be None or a finite number > 0, got {target}")
        if target <= claimed:
            raise ValueError(
                f"power_target must exceed the claimed ε_α = {claimed:g}, got {target:g}: no "
                "audit detects a divergence at or below the claim (it would train up to max_runs "
                "for nothing)"
            )
    if isinstance(n_jobs, bool) or not isinstance(n_jobs, Integral) or n_jobs == 0:
        raise ValueError(f"n_jobs must be a nonzero integer, got {n_jobs!r}")
    if estimators is None:
        estimators = default_estimators(alpha, int(random_state))
    if not isinstance(estimators, dict) or not estimators:
        raise ValueError("estimators must be a non-empty dict of name -> rdpest estimator")
    for name, est in estimators.items():
        if not isinstance(est, RenyiEstimatorBase):
            raise ValueError(f"estimator {name!r} is not an rdpest estimator: {est!r}")
        if est.alpha != alpha:
            raise ValueError(
                f"estimator {name!r} has alpha={est.alpha}, but the audit's alpha is "
                f"{alpha}: the bound must be at the claim's order"
            )
        needed = est.min_samples_per_side()
        if n_runs < needed:
            raise ValueError(
                f"n_runs={n_runs} is too small: estimator {name!r} needs at least "
                f"{needed} runs per arm for its splits"
            )
    if not any(est.will_be_certified() for est in estimators.values()):
        # Only certified bounds decide the verdict: without one the audit could never find a
        # violation, and "underpowered" would blame the number of runs for a choice of estimators.
        raise ValueError(
            f"none of the estimators ({', '.join(estimators)}) is certified, so the audit could "
            "never find a violation: include a certified one (the defaults dv and bernoulli are)"
        )
    warn_unseeded(estimators)
    return estimators


def check_scores_settings(n_scores: int, **settings) -> dict:
    """:func:`check_audit_settings` for given scores, ``n_scores`` per side (no runs to train):
    too few is said in terms of the scores."""
    try:
        return check_audit_settings(**{**settings, "n_runs": n_scores})
    except ValueError as exc:
        if str(exc).startswith(f"n_runs={n_scores} is too small"):
            raise ValueError(
                f"too few scores: {n_scores} per side; " + str(exc).split(": ", 1)[1]
            ) from None
        raise


class Auditor:
    """Audit a black-box training pipeline's Rényi DP claim.

    Parameters
    ----------
    score_fn : callable ``(include_canary: bool, seed: int) -> float``
        Trains once (with or without the canary) and returns the canary's score, e.g. its loss.
        Must be picklable for ``n_jobs != 1``. It may also train several runs at once: with a
        method ``score_many(include_canary, seeds)`` returning one score per seed and an integer
        attribute ``runs_per_call`` = B, the auditor hands it fixed groups of B runs (see
        :func:`runs_per_call`; :class:`~rdpest.auditing.dpsgd.run.DPSGDRun` stacks small models
        this way).
    claimed_epsilon : float
        The ε_α the pipeline claims at order ``alpha``.
    alpha : float, default=2.0
    beta : float, default=0.05
        Probability of a false "violation" verdict at most beta.
    n_runs : int, default=500
        Runs per arm (with and without the canary); the first round of a sequential audit.
    max_runs : int or None, default=None
        Runs per arm a sequential audit may spend (:mod:`rdpest.auditing.sequential`): it trains
        in rounds from ``n_runs`` (about 1.5× more each round) and stops at the first round
        whose certified bound exceeds the claim, each of the K rounds at level beta/K (a union
        bound keeps the false-violation probability at most beta). None: one round of
        ``n_runs`` (a fixed-size audit, level beta).
    power_target : float or None, default=None
        A sequential audit also stops, without a violation, once it detects ε_α >=
        ``power_target`` with 80% probability (``result.power``); if ``max_runs`` is spent
        first, ``result.power["runs_needed"]`` says how many runs per side would reach it in a
        round at this audit's per-round level (β/K): a follow-up audit with more rounds tests
        each at a smaller level and needs somewhat more, a fixed-size one at β fewer.
    estimators : dict of str to estimator, optional
        rdpest estimators (unfitted); default :func:`default_estimators`. Each is cloned, given
        ``direction="max"``'s samples (O′, O) and its share of beta. Each keeps its own
        ``random_state`` (the audit's is not passed on): seed them for an audit that repeats,
        and resumes, bit for bit.
    n_jobs : int, default=1
        joblib workers (-1: all cores). Results do not depend on it.
    store : path or None
        Directory where finished runs are persisted; a re-run with the same configuration resumes.
        A score function that trains groups of B runs has its last group trained whole where
        B <= n_runs / 4, so the store may hold up to B - 1 runs per arm beyond ``n_runs`` (or
        ``max_runs``); they stay unused until an audit with more runs takes them.
    random_state : int, default=0
    config : dict, optional
        What else identifies the pipeline in the store (settings the score function reads from
        globals, say), recorded beside the score function's own identity (``describe()`` if it
        has one, else its name, code digest and arguments:
        :func:`rdpest.auditing.identity.score_fn_identity`). For a score function without a
        readable identity (a lambda, a closure), ``config`` alone names the pipeline.
    progress : bool, default=True
        Show a tqdm progress bar over runs.
    membership_delta : float, default=1e-5
        The δ of the certified (ε, δ) bound among the membership-inference readouts
        (``result.membership``, :func:`rdpest.auditing.membership.membership_readouts`); in
        (0, 1). A readout only: it changes neither the verdict nor the runs, so a store's runs
        are reused under another δ and the readouts recomputed from them.

    Examples
    --------
    >>> from rdpest.auditing import Auditor, GaussianMechanismScore
    >>> mech = GaussianMechanismScore(sensitivity=1.0, noise_std=1.0, noise_scale_bug=0.25)
    >>> result = Auditor(mech, mech.claimed_epsilon(2.0), alpha=2.0, n_runs=500,
    ...                  progress=False).run()  # doctest: +SKIP
    >>> result.verdict  # doctest: +SKIP
    'violation'
    """

    def __init__(
        self,
        score_fn,
        claimed_epsilon: float,
        *,
        alpha: float = 2.0,
        beta: float = 0.05,
        n_runs: int = 500,
        max_runs: int | None = None,
        power_target: float | None = None,
        estimators: dict | None = None,
        n_jobs: int = 1,
        store=None,
        random_state: int = 0,
        config: dict | None = None,
        progress: bool = True,
        membership_delta: float = MEMBERSHIP_DELTA,
    ):
        self.score_fn = score_fn
        self.claimed_epsilon = claimed_epsilon
        self.alpha = alpha
        self.beta = beta
        self.n_runs = n_runs
        self.max_runs = max_runs
        self.power_target = power_target
        self.estimators = estimators
        self.n_jobs = n_jobs
        self.store = store
        self.random_state = random_state
        self.config = config
        self.progress = progress
        self.membership_delta = membership_delta

    # ------------------------------------------------------------------ validation
    def _validate(self) -> dict:
        if not callable(self.score_fn):
            raise ValueError(f"score_fn must be callable, got {self.score_fn!r}")
        runs_per_call(self.score_fn)
        return check_audit_settings(claimed_epsilon=self.claimed_epsilon, **self._settings())

    def _settings(self) -> dict:
        """The audit's settings that :func:`check_audit_settings` checks, by name."""
        return {name: getattr(self, name) for name in AUDIT_SETTINGS}

    def _fingerprint(self) -> dict:
        """What identifies this audit in a store: the pipeline and the seed of its runs.

        The pipeline is the score function's identity
        (:func:`rdpest.auditing.identity.score_fn_identity`: its ``describe()``, or its code and
        arguments) with ``config`` beside it (:meth:`_pipeline`); a score function whose identity
        cannot be read is refused for a store unless ``config`` names it.
        """
        return {"pipeline": self._pipeline(for_store=True), "random_state": int(self.random_state)}

    # Set by DPSGDAuditor: its config is the complete identity (its stores record that alone);
    # a claim made in (ε, δ) goes into the result, not the identity (the runs depend on σ).
    _config_is_identity, _dp_claim = False, None

    def _pipeline(self, for_store: bool) -> dict:
        """The pipeline as the store and the result record it: ``config`` adds to the score
        function's identity (a user's config naming globals must not switch off the checks of
        its code, data and canary); it stands alone only for a score function without a readable
        identity (a lambda), or where the library built it as the complete identity."""
        if self.config is not None and self._config_is_identity:
            return self.config
        try:
            identity = score_fn_identity(self.score_fn)
        except ValueError:
            if self.config is not None:
                return self.config
            if for_store:
                raise
            return _identity_or_name(self.score_fn)
        return identity if self.config is None else {"score_fn": identity, "config": self.config}

    def _open_store(self):
        """The locked run store of this audit (a null context without ``store``)."""
        if self.store is None:
            return contextlib.nullcontext(None)
        seed = int(self.random_state)
        return RunStore(
            self.store,
            self._fingerprint(),
            expected_seed=lambda arm, index: run_seed(seed, arm, index),
        )

    # ------------------------------------------------------------------ running
    def collect(self) -> tuple[np.ndarray, np.ndarray]:
        """Run (or resume) every training run; return (O without canary, O′ with canary)."""
        self._validate()
        with self._open_store() as store:
            return self._collect(store, int(self.n_runs))

    def _collect(
        self, store: RunStore | None, n_runs: int, kept: dict | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """The first ``n_runs`` runs of each arm, trained where not already in ``store`` (or,
        without a store, in ``kept``, which gains the runs trained: a sequential audit's rounds
        share it)."""
        finished = store.load() if store is not None else {} if kept is None else kept
        tasks = self._tasks(finished, n_runs)
        missing = 2 * n_runs - sum((arm, i) in finished for i in range(n_runs) for arm in (0, 1))
        if missing < 2 * n_runs:
            logger.info(  # from the store, or from an earlier round of a sequential audit
                "%d of %d runs already finished, %d to go",
                2 * n_runs - missing,
                2 * n_runs,
                missing,
            )
        bar = tqdm(
            total=2 * n_runs,
            initial=2 * n_runs - missing,
            desc="training runs",
            disable=not self.progress,
        )
        errors: list[tuple[BaseException, str]] = []

        def dispatched():  # read by joblib as it dispatches: nothing new once a run has failed
            for task in tasks:
                if errors:
                    return
                yield task

        try:
            if tasks:
                for runs, error, text in results_as_finished(self.n_jobs, dispatched()):
                    if error is not None and errors:  # raised too, while the first one's ran
                        logger.warning("another run failed as well: %r", error)
                    elif error is not None:
                        errors.append((error, text))
                    for arm, index, seed, score in runs:
                        if (arm, index) in finished:  # recomputed with its group, kept as stored
                            continue
                        if store is not None:
                            store.append(arm=arm, index=index, seed=seed, score=score)
                        finished[(arm, index)] = score
                        bar.update(int(index < n_runs))  # the last group's extra runs aside
        finally:
            bar.close()
        if errors:
            error, text = errors[0]
            if error.__traceback__ is None:  # raised in another process: keep its traceback
                error.add_note(f"raised in a worker:\n{text}")
            raise error
        return first_runs(finished, n_runs)

    def _tasks(self, finished: dict, n_runs: int) -> list:
        """The joblib tasks for the runs not in ``finished``, each one run or one fixed group.

        With ``runs_per_call`` B > 1, group j of an arm is always the runs j·B, ..., j·B + B - 1,
        whatever ``n_jobs`` is and whatever finished before, and a group with a missing run is
        trained whole: every score is then what an uninterrupted audit with the same group size
        gives, bit for bit (scores already stored are kept). The last group too is trained whole
        where that costs at most a quarter more runs (B <= n_runs / 4, as for ``DPSGDAuditor``'s
        automatic stacks); its runs past ``n_runs`` are stored for an audit with more runs, not
        used, so raising ``n_runs`` gives the runs of an audit that had it from the start. A
        group may share randomness among its runs (``DPSGDRun`` draws a stack's noise together),
        so a score function whose scores depend on the group size says so in its store identity
        (``DPSGDRun.describe`` does).
        """
        group = runs_per_call(self.score_fn)
        whole = group <= max(1, n_runs // 4)
        tasks = []
        for start in range(0, n_runs, group):
            for arm in (WITHOUT_CANARY, WITH_CANARY):
                indices = list(range(start, start + group if whole else min(start + group, n_runs)))
                if all((arm, i) in finished for i in indices if i < n_runs):
                    continue
                seeds = [run_seed(self.random_state, arm, i) for i in indices]
                if group == 1:
                    work = (_one_run, self.score_fn, arm, indices[0], seeds[0])
                else:
                    work = (_run_group, self.score_fn, arm, indices, seeds)
                task = delayed(_guarded)(work[0], os.getpid(), *work[1:])
                tasks.append(task)
        return tasks

    def rounds(self) -> list[int]:
        """Runs per arm after each round (one round, ``n_runs``, without ``max_runs``)."""
        max_runs = self.n_runs if self.max_runs is None else self.max_runs
        return round_sizes(int(self.n_runs), int(max_runs), group=runs_per_call(self.score_fn))

    def run(self) -> AuditResult:
        """Collect the runs, fit every estimator, and give the verdict (round by round for a
        sequential audit, stopping as soon as it can decide).

        With a ``store``, the store is held (locked) from the first run to ``result.json``.
        """
        estimators = self._validate()
        sizes = self.rounds()
        level = float(self.beta) / len(sizes)  # a union bound over the rounds
        records, kept = [], {}
        with self._open_store() as store:
            for number, n_runs in enumerate(sizes, start=1):
                without, with_ = self._collect(store, n_runs, kept)
                result = self._evaluate(without, with_, estimators, level)
                records.append(_round_record(number, result, level))
                if len(sizes) > 1:
                    logger.info(
                        "round %d of at most %d: %d runs per side, verdict %s",
                        number,
                        len(sizes),
                        n_runs,
                        result.verdict,
                    )
                if result.verdict == "violation" or self._power_reached(result):
                    break
            result = self._finish(result, records, estimators, level, sizes)
            if store is not None:
                self._record_analysis(store, result, estimators)
                result.to_json(store.directory / "result.json")
        return result

    def _record_analysis(self, store: RunStore, result: AuditResult, estimators: dict) -> None:
        """Record this analysis in the store, and name in the result (and a warning) the earlier
        ones that tested this claim (or a larger one) on these runs under other settings: each
        spent its own β on the same runs, so the chance that one of them accuses an honest
        pipeline is at most the sum of their levels (a union bound), not β."""
        claim = {"alpha": float(self.alpha), "claimed_epsilon": float(self.claimed_epsilon)}
        settings = {
            "beta": float(self.beta),
            "n_runs": int(self.n_runs),
            "max_runs": int(result.config["max_runs"]),
            # the power target changes a schedule of rounds (when it stops), not one round
            "power_target": None
            if self.power_target is None or len(result.config["rounds_planned"]) == 1
            else float(self.power_target),
            # each estimator's settings: refitting with other hyperparameters is a new test too
            "estimators": {name: settings_text(est) for name, est in sorted(estimators.items())},
        }
        earlier = earlier_analyses(store.analyses(), claim, settings)
        store.record_analysis({**claim, **settings, "verdict": result.verdict})
        if earlier:
            result.config["earlier_analyses"] = earlier
            warnings.warn(
                retest_message(store.directory, claim, earlier, float(self.beta)),
                UserWarning,
                stacklevel=3,
            )

    def _power_reached(self, result: AuditResult) -> bool:
        # Perfectly separated scores that certify no violation call for more runs, whatever
        # the power model predicts (the verdict says "underpowered ... run more").
        detectable = result.power.get("detectable_epsilon")
        return (
            self.power_target is not None
            and detectable is not None
            and detectable <= float(self.power_target)
            and not result.power.get("separated", False)
            and not result.power.get("constant", False)
        )

    def _finish(self, result, records, estimators, level, sizes) -> AuditResult:
        """Record the rounds; say how many runs the power target needs if it was not met."""
        result.beta = float(self.beta)
        result.rounds = records
        result.config["max_runs"] = int(sizes[-1])
        result.config["rounds_planned"] = list(sizes)
        if self._dp_claim is not None:
            result.config["dp_claim"] = dict(self._dp_claim)
        if self.power_target is not None:
            result.power["power_target"] = float(self.power_target)
            if result.verdict != "violation" and not self._power_reached(result):
                shares = self._shares(estimators, level)
                # Where the power model covers none of the estimators, no number of runs is named;
                # nor for scores that one number or a perfect separation explains (power.py).
                if unsized(result.power, float(self.claimed_epsilon)):
                    result.power["runs_needed"] = None
                elif any(e._power_model_covers_order() for e in shares.values()):
                    result.power["runs_needed"] = runs_needed(
                        shares,
                        float(self.claimed_epsilon),
                        float(self.alpha),
                        float(self.power_target),
                        start=int(sizes[-1]),
                    )
        return result

    def _shares(self, estimators: dict, beta: float) -> dict:
        """Each estimator with its share of ``beta`` (β/k for the k certified, β for others)."""
        certified = [n for n, e in estimators.items() if e.will_be_certified()]
        share = beta / max(1, len(certified))
        return {
            name: clone(est).set_params(beta=share if name in certified else beta, direction="max")
            for name, est in estimators.items()
        }

    def evaluate(self, without, with_, estimators: dict | None = None) -> AuditResult:
        """Fit the estimators to given samples (O, O′) and give the verdict (writes no file).

        The samples must be 1-D (or single columns), finite, real and equally long (ValueError
        otherwise)."""
        without, with_ = checked_scores(without, with_, ("without", "with_"))
        # The checks an audit's estimators get (order, certification, room for the splits):
        # given estimators were once fitted unchecked, and one at another order "refuted" a claim.
        settings = {**self._settings(), "max_runs": None, "power_target": None}
        if estimators is not None:
            settings["estimators"] = estimators
        estimators = check_scores_settings(
            len(without), claimed_epsilon=self.claimed_epsilon, **settings
        )
        return self._evaluate(without, with_, estimators, float(self.beta))

    def _evaluate(self, without, with_, estimators: dict, beta: float) -> AuditResult:
        """:meth:`evaluate` at level ``beta``."""
        claimed = float(self.claimed_epsilon)
        shares = self._shares(estimators, beta)
        estimates = {}
        for name, est in shares.items():
            est = clone(est).fit(with_, without)  # P: with the canary (O′), Q: without (O)
            estimates[name] = {
                "estimator": type(est).__name__,
                "divergence": float(est.divergence_),
                "lower_bound": float(est.lower_bound_),
                "certified": bool(est.certified_),
                "beta": float(est.beta),
            }
        violation = any(e["certified"] and e["lower_bound"] > claimed for e in estimates.values())
        power = audit_power(shares, len(with_), len(without), claimed, float(self.alpha))
        # Perfectly separated scores: the most its runs can show (rdpest.auditing.power)
        power["separated"] = bool(with_.min() > without.max() or with_.max() < without.min())
        power["constant"] = bool(with_.min() == with_.max() == without.min() == without.max())
        pipeline = self._pipeline(for_store=False)
        return AuditResult(
            losses_without_canary=np.asarray(without, dtype=float),
            losses_with_canary=np.asarray(with_, dtype=float),
            claimed_epsilon=claimed,
            alpha=float(self.alpha),
            beta=float(beta),
            estimates=estimates,
            verdict=verdict_of(violation, power, claimed),
            config={
                "pipeline": pipeline,
                "random_state": int(self.random_state),
                "n_runs": len(without),
            },
            provenance=provenance(),
            power=power,
            membership=self._membership(without, with_, beta),
        )

    def _membership(self, without, with_, beta: float) -> dict:
        """Membership-inference readouts (:mod:`rdpest.auditing.membership`) at δ
        ``membership_delta``; not part of the verdict: the ε bound has its own level ``beta``
        (the round's: a union bound covers a sequential audit's rounds), no share of the
        certified estimators' β. Empty when an arm has too few runs to split."""
        if min(len(without), len(with_)) < 2:
            return {}
        return membership_readouts(
            without,
            with_,
            beta=beta,
            delta=self.membership_delta,
            random_state=int(self.random_state),
        )


def _round_record(number: int, result: AuditResult, level: float) -> dict:
    """What a round of a sequential audit reports: its size, level, bounds and verdict."""
    certified = [e["lower_bound"] for e in result.estimates.values() if e["certified"]]
    return {
        "round": number,
        "n_runs": result.n_runs,
        "beta": level,
        "lower_bound": max(certified, default=0.0),
        "lower_bounds": {name: e["lower_bound"] for name, e in result.estimates.items()},
        "verdict": result.verdict,
        "detectable_epsilon": result.power.get("detectable_epsilon"),
    }


def _identity_or_name(score_fn) -> dict:
    """The score function's identity where it has one, else its name (for the record only)."""
    try:
        return score_fn_identity(score_fn)
    except ValueError:
        name = getattr(score_fn, "__qualname__", type(score_fn).__qualname__)
        return {"unidentified": f"{getattr(score_fn, '__module__', '?')}.{name}"}
