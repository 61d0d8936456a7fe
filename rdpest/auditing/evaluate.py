"""Audit scores you already have: the verdict of an audit on given O (without) and O′ (with).

:func:`evaluate` gives exactly what :meth:`rdpest.auditing.Auditor.run` gives for a fixed-size
audit whose runs produced these scores: the same estimators (:func:`default_estimators`), the same
sharing of β among the certified ones, the same verdict ("violation", "not_refuted" or
"underpowered") and the same power report — computed by the auditor's own evaluation, so the two
cannot drift apart. Only the record of the pipeline differs: no score function was run.
"""

from __future__ import annotations

import contextlib

import numpy as np

from rdpest.auditing.auditor import Auditor, _round_record, check_scores_settings
from rdpest.auditing.membership import MEMBERSHIP_DELTA
from rdpest.auditing.result import AuditResult
from rdpest.auditing.runs import first_runs
from rdpest.auditing.scores import checked_scores
from rdpest.auditing.store import RunStore, store_path
from rdpest.utils.io import load_json

__all__ = ["evaluate"]

#: What the result's ``config["pipeline"]`` says when the scores were given, not trained.
GIVEN_SCORES = {"scores": "given to rdpest.auditing.evaluate (no training run here)"}


def _no_training(include_canary, seed):  # pragma: no cover - never called
    """The score function of an audit whose scores are given: it must never train."""
    raise RuntimeError("rdpest.auditing.evaluate was given its scores; it trains nothing")


def evaluate(
    losses_without_canary,
    losses_with_canary,
    claimed_epsilon: float,
    *,
    alpha: float,
    beta: float = 0.05,
    estimators: dict | None = None,
    random_state: int = 0,
    membership_delta: float = MEMBERSHIP_DELTA,
    store=None,
) -> AuditResult:
    """The audit's verdict on scores already collected (O without the canary, O′ with it).

    Parameters
    ----------
    losses_without_canary : array-like of shape (n_runs,) or (n_runs, 1)
        O: the canary's score after each run trained without it.
    losses_with_canary : array-like of shape (n_runs,) or (n_runs, 1)
        O′: the canary's score after each run trained with it. Both sides must have the same
        number of scores, as an audit's do (its power report and its record speak of ``n_runs``
        per side); unequal sides are refused rather than silently truncated.
    claimed_epsilon : float
        The ε_α claimed at order ``alpha`` (>= 0).
    alpha : float
        The Rényi order of the claim (>= 1 + 1e-6).
    beta : float, default=0.05
        A false "violation" verdict has probability at most beta; the certified estimators share
        it (β/k each), exactly as in an audit.
    estimators : dict of str to estimator, optional
        Unfitted rdpest estimators at order ``alpha``; default :func:`default_estimators`.
    random_state : int, default=0
        Seeds the default estimators (the value an audit with ``random_state`` uses).
    membership_delta : float, default=1e-5
        The δ of the membership readouts' certified (ε, δ) bound (``result.membership``), in
        (0, 1), as :class:`~rdpest.auditing.Auditor`'s.
    store : path or RunStore, optional
        The audit store these scores are the runs of (the directory of an audit's ``O.npy`` and
        ``O_prime.npy``, or that store already open). The analysis is then recorded in its
        ``analyses.jsonl`` as an audit's would be, and earlier analyses of the same claim (or a
        larger one at the same order) on those runs under other settings are named
        (``config["earlier_analyses"]``) with a warning: each spent its own β on the same runs.
        The scores must be the store's first ``n`` runs of each arm, in order (what an audit of
        ``n`` runs per side analyses); other scores are a ValueError, as they would be recorded
        as a test of its runs. The store's ``result.json`` is left as the audit wrote it. A path
        is opened (and locked)
        before anything is fitted: a store in use by an audit, or one that cannot be locked, is a
        ValueError at once.

    Returns
    -------
    AuditResult
        With ``n_runs`` the number of scores per side, ``config["pipeline"]`` saying the scores
        were given, and one round (a fixed-size audit).

    Raises
    ------
    ValueError
        On scores that are not 1-D finite real arrays, sides of unequal length, too few scores
        for an estimator's splits, α <= 1, β or ``membership_delta`` outside (0, 1), or a
        negative claim, or, with ``store``, scores that are not its runs.

    Examples
    --------
    >>> import numpy as np
    >>> from rdpest.auditing import evaluate
    >>> rng = np.random.default_rng(0)
    >>> O, O_prime = rng.normal(0, 1, 40), rng.normal(1, 1, 40)
    >>> from rdpest import BernoulliTPRFPRBaseline
    >>> bernoulli = BernoulliTPRFPRBaseline(alpha=2.0, random_state=0)
    >>> result = evaluate(O, O_prime, 1.0, alpha=2.0, estimators={"bernoulli": bernoulli})
    >>> result.n_runs, result.verdict in ("violation", "not_refuted", "underpowered")
    (40, True)
    >>> evaluate(O, O_prime[:30], 1.0, alpha=2.0)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: losses_without_canary has 40 scores but losses_with_canary has 30: ...
    """
    without, with_ = checked_scores(losses_without_canary, losses_with_canary)
    n = len(without)
    estimators = check_scores_settings(
        n,
        claimed_epsilon=claimed_epsilon,
        alpha=alpha,
        beta=beta,
        estimators=estimators,
        n_jobs=1,
        random_state=random_state,
        membership_delta=membership_delta,
    )
    auditor = Auditor(
        _no_training,
        claimed_epsilon,
        alpha=alpha,
        beta=beta,
        n_runs=n,
        estimators=estimators,
        random_state=random_state,
        config=dict(GIVEN_SCORES),
        progress=False,
        membership_delta=membership_delta,
    )
    auditor._config_is_identity = True  # given scores: no training function to identify
    # What Auditor.run does for one round of n runs per side, without the training.
    level = float(beta)
    given = store is None or isinstance(store, RunStore)  # a path is opened before the fit
    with contextlib.nullcontext(store) if given else _opened_store(store) as record:
        if record is not None:
            try:
                check_runs_of_store(record, without, with_)
            except ValueError as exc:
                raise ValueError(f"{exc}: leave store out to evaluate other scores") from None
        result = auditor._evaluate(without, with_, estimators, level)
        records = [_round_record(1, result, level)]
        result = auditor._finish(result, records, estimators, level, [n])
        if record is not None:
            auditor._record_analysis(record, result, estimators)
    return result


def check_runs_of_store(store: RunStore, without: np.ndarray, with_: np.ndarray) -> None:
    """Refuse scores that are not the store's first ``n`` runs of each arm, in order (the runs
    an audit of ``n`` runs per side analyses). Auditor review: the store's runs repeated ten
    times, or other scores altogether, were recorded in its analyses as a test of its runs (a
    false "violation" of an honest pipeline among them), and other scores under the same
    settings passed for a repeat of an earlier analysis, spending no level."""
    finished = store.load()
    n = len(without)
    held = min(sum((arm, i) in finished for i in range(n)) for arm in (0, 1))
    where = f"the store {store.directory}"
    if held < n:
        raise ValueError(
            f"{n} scores per side were given, but {where} holds only {held} finished runs of "
            "each arm from the first"
        )
    stored_without, stored_with = first_runs(finished, n)
    if np.array_equal(without, stored_without) and np.array_equal(with_, stored_with):
        return
    if np.array_equal(without, stored_with) and np.array_equal(with_, stored_without):
        raise ValueError(
            f"the scores are the runs in {where} with the arms swapped: give the scores "
            "without the canary first"
        )
    side, given, stored = next(
        (name, scores, runs)
        for name, scores, runs in (
            ("losses_without_canary", without, stored_without),
            ("losses_with_canary", with_, stored_with),
        )
        if not np.array_equal(scores, runs)
    )
    i = int(np.flatnonzero(given != stored)[0])
    raise ValueError(
        f"the scores are not the runs in {where}: {side}[{i}] is {float(given[i])!r} where its "
        f"run {i} scored {float(stored[i])!r} (an analysis recorded in a store must be of its "
        f"first {n} runs of each arm, in order)"
    )


def _opened_store(directory) -> RunStore:
    """The audit store at ``directory``, opened (and locked) with its own configuration."""
    path = store_path(directory) / "config.json"
    try:
        config = load_json(path.read_text())
    except FileNotFoundError:
        raise ValueError(
            f"{directory} is not an audit store (it has no config.json): leave store out to "
            "evaluate scores that are not a store's runs"
        ) from None
    except (OSError, ValueError, RecursionError) as exc:
        raise ValueError(f"cannot read the store's configuration {path}: {exc}") from None
    return RunStore(directory, config)
