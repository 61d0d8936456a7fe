"""Helper functions shared by the tests: statistical assertions and tensor utilities."""

from functools import cache

from scipy import stats

# The suite's error budget. A valid bound with miscoverage beta misses the truth
# k ~ Binomial(R, beta) times in R seeded repetitions; a statistical assertion fails when a
# one-sided binomial test rejects "miscoverage <= beta" at COVERAGE_PVALUE. Every statistical
# assertion goes through this module and is counted (tests/conftest.py reports the count and fails
# a session that makes more than MAX_STATISTICAL_ASSERTIONS). Bonferroni over the family: one
# pytest session fails spuriously (a valid estimator, unlucky seeds) with probability at most
# MAX_STATISTICAL_ASSERTIONS * COVERAGE_PVALUE = SUITE_ERROR_BUDGET = 1%, so CI's two sessions
# (the default run and `-m slow`) at most 2%.
SUITE_ERROR_BUDGET = 0.01
MAX_STATISTICAL_ASSERTIONS = 500
COVERAGE_PVALUE = SUITE_ERROR_BUDGET / MAX_STATISTICAL_ASSERTIONS

#: How many statistical assertions this session has made (read by tests/conftest.py).
STATISTICAL_ASSERTIONS = {"count": 0}


def _counted() -> None:
    STATISTICAL_ASSERTIONS["count"] += 1


@cache
def rejection_count(repetitions: int, beta: float, level: float = COVERAGE_PVALUE) -> int:
    """The fewest misses in ``repetitions`` that :func:`assert_coverage` rejects at ``beta``."""
    # P(Bin(R, beta) >= k) <= level  <=>  binom.sf(k - 1) <= level; sf decreases in k.
    k = int(stats.binom.isf(level, repetitions, beta))
    while k > 0 and stats.binom.sf(k - 2, repetitions, beta) <= level:
        k -= 1
    while stats.binom.sf(k - 1, repetitions, beta) > level:
        k += 1
    return k


def coverage_power(repetitions: int, beta: float, miss_rate: float) -> float:
    """Probability that :func:`assert_coverage` fails a certificate whose true miss rate is
    ``miss_rate`` (its power against that rate)."""
    return float(stats.binom.sf(rejection_count(repetitions, beta) - 1, repetitions, miss_rate))


def repetitions_for_power(beta: float, power: float = 0.8, factor: float = 2.0) -> int:
    """The fewest repetitions (a multiple of 10) at which :func:`assert_coverage` detects a miss
    rate of ``factor * beta`` with probability at least ``power``."""
    repetitions = 10
    while coverage_power(repetitions, beta, factor * beta) < power:
        repetitions += 10
    return repetitions


def assert_coverage(failures: int, repetitions: int, beta: float) -> None:
    """Fail when ``failures`` misses in ``repetitions`` are too many for miscoverage <= beta."""
    _counted()
    pvalue = stats.binomtest(int(failures), repetitions, beta, alternative="greater").pvalue
    assert pvalue > COVERAGE_PVALUE, (
        f"{failures}/{repetitions} bounds missed the truth (beta={beta}, p-value {pvalue:.2g})"
    )


def assert_binomial_rate(successes: int, trials: int, rate: float) -> None:
    """Fail when ``successes`` in ``trials`` is implausible (two-sided) for a true ``rate``."""
    _counted()
    pvalue = stats.binomtest(int(successes), trials, rate).pvalue
    assert pvalue > COVERAGE_PVALUE, (
        f"{successes}/{trials} is implausible for rate {rate} (p-value {pvalue:.2g})"
    )


def assert_pvalue_above(pvalue: float, what: str) -> None:
    """Fail when a test of a null hypothesis that should hold rejects it at COVERAGE_PVALUE."""
    _counted()
    assert pvalue > COVERAGE_PVALUE, f"{what}: rejected (p-value {pvalue:.2g})"


def flat_parameters(module):
    """Every parameter of a torch module, detached, on the CPU, in one flat tensor."""
    import torch

    return torch.cat([p.detach().cpu().flatten() for p in module.parameters()])


def assert_clone_and_pickle_round_trip(est, score_rel: float = 0.0) -> None:
    """get_params survives clone; a fitted copy survives pickling with its bound and score.

    ``score_rel``: the relative tolerance of the restored score (0: bit for bit).
    """
    import pickle

    import pytest
    from sklearn.base import clone

    from rdpest.datasets import make_renyi_pair

    params = est.get_params()
    assert clone(est).get_params() == params
    X, Y, _ = make_renyi_pair("gaussian_shift", 2.0, 0.5, 300, random_state=0)
    fitted = clone(est).fit(X, Y)
    restored = pickle.loads(pickle.dumps(fitted))
    assert restored.lower_bound_ == fitted.lower_bound_
    assert restored.score(X, Y) == pytest.approx(fitted.score(X, Y), rel=score_rel, abs=0.0)
    assert clone(est).set_params(beta=0.2).beta == 0.2


def null_score(include_canary: bool, seed: int) -> float:
    """A pipeline the canary does not affect at all (P = Q): any claim >= 0 is honest."""
    import numpy as np

    return float(np.random.default_rng(seed).normal())


def false_violations(pipeline: str, alpha: float, audits: int, estimators, **settings) -> int:
    """How many of ``audits`` independent audits of an honest pipeline say "violation".

    ``pipeline``: "at_the_claim" (a Gaussian mechanism whose true ε_α equals its claim, the
    hardest honest case) or "canary_has_no_effect" (:func:`null_score`, claim 0).
    ``estimators(audit)`` gives each audit's estimators; ``settings`` go to the Auditor.
    """
    from rdpest.auditing import Auditor, GaussianMechanismScore

    if pipeline == "at_the_claim":
        score_fn = GaussianMechanismScore(sensitivity=1.0, noise_std=1.0)
        claim = score_fn.claimed_epsilon(alpha)
    else:
        score_fn, claim = null_score, 0.0
    count = 0
    for audit in range(audits):
        result = Auditor(
            score_fn,
            claim,
            alpha=alpha,
            estimators=estimators(audit),
            random_state=audit,
            progress=False,
            **settings,
        ).run()
        count += result.verdict == "violation"
    return count
