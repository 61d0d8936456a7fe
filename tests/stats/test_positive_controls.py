"""Positive controls: the coverage assertion rejects known-invalid certificates.

A coverage test that an invalid certificate would also pass proves nothing. Every certificate
family here is run on a null cell with a non-degenerate fixed score (P = Q = N(0, 1): the truth is
0, every positive bound is a miss, and the scores are not constant, so a bound can miss) beside a
deliberately invalid variant defined in this file, and the SAME assertion
(:func:`tests.helpers.assert_coverage`) must pass the certificate and FAIL the invalid variant.

The invalid variants are the mistakes an audit actually makes:

- **threshold chosen on the certifying scores** (every cut point and side tried on the data that
  certify, the best bound reported): the classic invalid audit, for the threshold certificate
  with either confidence region and for the Bernoulli baseline (there, the threshold searched on
  all scores with per-rate Clopper–Pearson levels, i.e. without the uniform band that pays for
  the search);
- **a critic fitted on the certifying data** (a k-nearest-neighbour log-ratio whose neighbours
  include the point itself, as an over-fitted network memorises its training points) for the
  variational bracket with every confidence method and region;
- **sorted input to the betting bound** (largest values first): the betting capital process is a
  supermartingale only for exchangeable, unsorted data.

(Choosing only the bracket's window, or a step critic, on the certifying data was tried first and
missed in 0-1% of nulls: the bracket's confidence slack hides that much selection, so it could
not serve as a control.)

Repetitions: every cell detects a miss rate of 2β with power ≥ 0.8 at the suite's per-assertion
level (tests.helpers.repetitions_for_power: R ≥ 300 at β = 0.1), checked by a quick test below
so R cannot be lowered silently.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from rdpest.stats.certificates import _best_window, _certified_dv_bracket
from rdpest.stats.threshold_tests import certified_threshold_bound, select_threshold
from tests.helpers import assert_coverage, coverage_power, repetitions_for_power

ALPHA = 2.0

#: (beta, repetitions, n per sample) of the controls. The threshold test chosen on the
#: certifying data gains more the more cut points there are: at n = 1000 and beta = 0.1 it misses
#: in about 20% of nulls (22% measured in 300), and R = 1000 detects 20% with power > 0.999 (the
#: assertion rejects from 142 misses on). The bracket's selection costs more per repetition:
#: n = 250, R = 300 (power 0.83 against 2 beta).
THRESHOLD_CELL = (0.1, 1000, 1000)
BRACKET_CELL = (0.1, 300, 250)
BERNOULLI_CELL = (0.1, 300, 1000)


def _null_scores(rep: int, n: int):
    """Training and certifying scores of the two samples, all from N(0, 1) (P = Q, truth 0)."""
    rng = np.random.default_rng(1000 + rep)
    return tuple(rng.normal(size=n) for _ in range(4))


def _assert_control(valid_misses: int, invalid_misses: int, repetitions: int, beta: float):
    assert_coverage(valid_misses, repetitions, beta)  # the certificate passes ...
    with pytest.raises(AssertionError, match="bounds missed the truth"):
        assert_coverage(invalid_misses, repetitions, beta)  # ... the invalid variant is caught


def test_control_repetitions_detect_twice_beta_with_power():
    """Bug caught: a control (or coverage cell) whose repetitions were cut so far that a miss
    rate of 2β would slip through more than one time in five."""
    for beta, repetitions, _ in (THRESHOLD_CELL, BRACKET_CELL, BERNOULLI_CELL):
        assert repetitions >= repetitions_for_power(beta)
        assert coverage_power(repetitions, beta, 2 * beta) >= 0.8


# --- the threshold certificate, both confidence regions --------------------------------------


def _valid_threshold_bound(train_p, train_q, test_p, test_q, beta, region) -> float:
    threshold, side, _ = select_threshold(train_p, train_q, ALPHA, beta, region)
    return certified_threshold_bound(
        test_p, test_q, ALPHA, beta, (threshold, side), region=region
    ).lower_bound


def _peeking_threshold_bound(test_p, test_q, beta, region) -> float:
    """INVALID by construction: threshold and side chosen on the certifying scores themselves."""
    return _valid_threshold_bound(test_p, test_q, test_p, test_q, beta, region)


@pytest.mark.slow
@pytest.mark.parametrize("region", ["bonferroni", "joint"])
def test_threshold_selection_on_the_certifying_data_is_caught(region):
    """Measured: the peeking variant misses in about 20% of null samples (22% and 21.7% of
    300 for the two regions) at n = 1000 and β = 0.1."""
    beta, repetitions, n = THRESHOLD_CELL
    valid = peeking = 0
    for rep in range(repetitions):
        train_p, train_q, test_p, test_q = _null_scores(rep, n)
        valid += _valid_threshold_bound(train_p, train_q, test_p, test_q, beta, region) > 0.0
        peeking += _peeking_threshold_bound(test_p, test_q, beta, region) > 0.0
    _assert_control(valid, peeking, repetitions, beta)


# --- the variational bracket, every confidence method and region -----------------------------


def _knn_critic(test_p, test_q, k: int = 5):
    """INVALID by construction: a log-ratio critic fitted on the certifying data itself.

    g(x) = log((#P + 1/2) / (#Q + 1/2)) among the k nearest certifying points of x, x included:
    each point votes for its own sample, as a critic trained on the data it certifies memorises
    them. (k = 5 overfits enough to miss in nearly every null sample for every method.)
    """
    points = np.concatenate([test_p, test_q])
    from_p = np.r_[np.ones(test_p.size), np.zeros(test_q.size)]
    nearest = np.argsort(np.abs(points[:, None] - points[None, :]), axis=1)[:, :k]
    votes = from_p[nearest].sum(axis=1)
    g = np.log((votes + 0.5) / (k - votes + 0.5))
    return g[: test_p.size], g[test_p.size :]


def _bracket_bound(train_p, train_q, test_p, test_q, beta, method, region) -> float:
    window, _ = _best_window(train_p, train_q, ALPHA, beta, method)
    return _certified_dv_bracket(test_p, test_q, ALPHA, beta, *window, method, region).lower_bound


@pytest.mark.slow
@pytest.mark.parametrize("region", ["joint", "bonferroni"])
@pytest.mark.parametrize("method", ["betting", "bernstein", "hoeffding"])
def test_bracket_with_a_critic_fitted_on_the_certifying_data_is_caught(method, region):
    """The fixed critic g(x) = x is certified on held-out values with a window chosen on the
    training values; the invalid variant fits its critic and window on the certifying values."""
    beta, repetitions, n = BRACKET_CELL
    valid = overfit = 0
    for rep in range(repetitions):
        train_p, train_q, test_p, test_q = _null_scores(rep, n)
        valid += _bracket_bound(train_p, train_q, test_p, test_q, beta, method, region) > 0.0
        g_p, g_q = _knn_critic(test_p, test_q)
        overfit += _bracket_bound(g_p, g_q, g_p, g_q, beta, method, region) > 0.0
    _assert_control(valid, overfit, repetitions, beta)


@pytest.mark.slow
@pytest.mark.parametrize("region", ["joint", "bonferroni"])
def test_betting_on_sorted_input_is_caught(region):
    """The betting bound's capital process is valid for exchangeable data only: fed the P
    values largest first (and the Q values smallest first) it bets on a trend that is not there."""
    beta, repetitions, n = BRACKET_CELL
    valid = ordered = 0
    for rep in range(repetitions):
        train_p, train_q, test_p, test_q = _null_scores(rep, n)
        window, _ = _best_window(train_p, train_q, ALPHA, beta, "betting")
        valid += (
            _certified_dv_bracket(
                test_p, test_q, ALPHA, beta, *window, "betting", region
            ).lower_bound
            > 0.0
        )
        ordered += (
            _certified_dv_bracket(
                np.sort(test_p)[::-1], np.sort(test_q), ALPHA, beta, *window, "betting", region
            ).lower_bound
            > 0.0
        )
    _assert_control(valid, ordered, repetitions, beta)


# --- the Bernoulli TPR/FPR baseline ----------------------------------------------------------


@pytest.mark.slow
def test_bernoulli_baseline_threshold_on_the_certifying_scores_is_caught(monkeypatch):
    """The baseline with ``threshold="bonferroni"`` searches all scores and pays for it with a
    band uniform over thresholds; the invalid variant keeps the search but certifies at the
    pointwise levels beta/2 per rate (monkeypatched), i.e. picks its threshold on the data that
    certify it (measured: 41% of 300 nulls at n = 1000, beta = 0.1)."""
    from rdpest import BernoulliTPRFPRBaseline
    from rdpest.estimators import threshold as threshold_module

    beta, repetitions, n = BERNOULLI_CELL

    def misses(est) -> int:
        count = 0
        for rep in range(repetitions):
            _, _, test_p, test_q = _null_scores(rep, n)
            count += est.fit(test_p, test_q).directions_["forward"].raw_lower_bound > 0.0
        return count

    split = misses(BernoulliTPRFPRBaseline(alpha=ALPHA, beta=beta, random_state=0))
    banded = misses(BernoulliTPRFPRBaseline(alpha=ALPHA, beta=beta, threshold="bonferroni"))
    monkeypatch.setattr(
        threshold_module, "_uniform_band_levels", lambda beta, n_p, n_q: (beta / 2, beta / 2)
    )
    pointwise = misses(BernoulliTPRFPRBaseline(alpha=ALPHA, beta=beta, threshold="bonferroni"))
    assert_coverage(split, repetitions, beta)
    _assert_control(banded, pointwise, repetitions, beta)


# --- no peeking -------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["auto", "bracket", "threshold"])
def test_certificates_do_not_peek_at_the_certifying_values(kind):
    """What a certificate chooses (window, threshold, side, kind) depends on the training values
    only: replacing the certifying values must not change it. Bug caught: any selection step that
    reads the test values (the classic invalid audit)."""
    from rdpest.stats.certificates import certify_critic

    rng = np.random.default_rng(0)
    train_p, train_q = rng.normal(0.5, 1, 300), rng.normal(0, 1, 300)
    choices = set()
    for seed in range(5):
        other = np.random.default_rng(100 + seed)
        test_p, test_q = other.normal(0.5 * seed, 1, 300), other.normal(0, 2, 300)
        cert = certify_critic(train_p, train_q, test_p, test_q, alpha=ALPHA, beta=0.1, kind=kind)
        choices.add((cert.kind, cert.window, cert.threshold))
    assert len(choices) == 1, choices


def _replace_certifying_rows(X, test_index, rng):
    """A copy of X whose rows at ``test_index`` are replaced by fresh, very different values."""
    X = np.array(X, dtype=float, copy=True)
    X[test_index] = rng.normal(3.0, 2.0, size=X[test_index].shape)
    return X


def test_dv_choices_do_not_depend_on_the_certifying_rows():
    """DVRenyiEstimator trains its critic, picks its window or threshold and the certificate's
    kind on the training rows only. Replacing every certifying row (same seed, so the same
    partition) must leave the critic's parameters and those choices unchanged, and may change the
    bound. Bug caught: a critic early-stopped on, or a window chosen from, the certifying rows."""
    from rdpest import DVRenyiEstimator
    from rdpest.datasets import make_renyi_pair

    X, Y, _ = make_renyi_pair("gaussian_shift", ALPHA, 0.5, 400, random_state=3)
    params = {"alpha": ALPHA, "max_epochs": 20, "hidden_layer_sizes": (8,), "random_state": 7}
    first = DVRenyiEstimator(**params).fit(X, Y)
    result = first.directions_["forward"]
    rng = np.random.default_rng(0)
    X2 = _replace_certifying_rows(X, result.test_index_p, rng)
    Y2 = _replace_certifying_rows(Y, result.test_index_q, rng)
    second = DVRenyiEstimator(**params).fit(X2, Y2)
    again = second.directions_["forward"]
    np.testing.assert_array_equal(again.test_index_p, result.test_index_p)
    for a, b in zip(first.critic_.parameters(), second.critic_.parameters(), strict=True):
        assert np.array_equal(a.detach().numpy(), b.detach().numpy())
    cert, cert2 = result.diagnostics, again.diagnostics
    assert (cert2.certificate, cert2.window, cert2.threshold, cert2.critic_range) == (
        cert.certificate,
        cert.window,
        cert.threshold,
        cert.critic_range,
    )
    assert again.raw_lower_bound != result.raw_lower_bound  # the certifying rows did change


def test_bernoulli_baseline_threshold_does_not_depend_on_the_certifying_scores():
    """The split baseline picks its threshold and side on the training scores only. Bug caught:
    a search over the certifying scores (the invalid audit the positive control above catches
    statistically, here caught deterministically)."""
    from rdpest import BernoulliTPRFPRBaseline

    rng = np.random.default_rng(5)
    s_p, s_q = rng.normal(1.0, 1.0, 400), rng.normal(0.0, 1.0, 400)
    first = BernoulliTPRFPRBaseline(alpha=ALPHA, random_state=2).fit(s_p, s_q)
    result = first.directions_["forward"]
    other = np.random.default_rng(6)
    s_p2 = _replace_certifying_rows(s_p, result.test_index_p, other)
    s_q2 = _replace_certifying_rows(s_q, result.test_index_q, other)
    second = BernoulliTPRFPRBaseline(alpha=ALPHA, random_state=2).fit(s_p2, s_q2)
    assert second.thresholds_["forward"] == first.thresholds_["forward"]
    assert second.directions_["forward"].raw_lower_bound != result.raw_lower_bound
    assert math.isfinite(second.lower_bound_)
