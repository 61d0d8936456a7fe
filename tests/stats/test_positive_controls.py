"""Positive controls: the coverage harness rejects a known-invalid certificate.

A coverage test that an invalid certificate would also pass proves nothing. Here the same
assertion (:func:`tests.helpers.assert_coverage`, a one-sided binomial test at 1e-3) that the
threshold certificate passes is shown to FAIL for the classic invalid audit: a threshold chosen
on the very scores that certify it (every cut point and both sides tried on the certifying data,
the best bound reported). The null cell has a non-degenerate score (P = Q = N(0, 1), so every
positive bound is a miss and the exact answer is not trivially 0 for every critic).

Power, computed: the invalid variant misses in about 9.5% of null samples at n = 250 per side
and beta = 0.05 (19 of 200 measured; the issue that asked for this control measured 9.2% at
n = 500). With R = 800 repetitions the binomial test at 1e-3 rejects "miss rate <= 0.05" from 61
misses on (P(Bin(800, 0.05) >= 61) = 0.0009), which Bin(800, 0.095) reaches with probability
0.97: a miss rate of about 2 beta is caught with power 0.97. A valid certificate fails the same
assertion with probability below 0.001.
"""

from __future__ import annotations

import numpy as np
import pytest

from rdpest.stats.threshold_tests import certified_threshold_bound, select_threshold
from tests.helpers import assert_coverage

ALPHA, BETA, N, REPETITIONS = 2.0, 0.05, 250, 800


def _null_scores(rep: int):
    """Training and certifying scores of the two samples, all from N(0, 1) (P = Q, truth 0)."""
    rng = np.random.default_rng(1000 + rep)
    return tuple(rng.normal(size=N) for _ in range(4))


def _valid_bound(train_p, train_q, test_p, test_q) -> float:
    threshold, side, _ = select_threshold(train_p, train_q, ALPHA, BETA)
    return certified_threshold_bound(
        test_p, test_q, ALPHA, BETA, (threshold, side), region="bonferroni"
    ).lower_bound


def _peeking_bound(test_p, test_q) -> float:
    """INVALID by construction: every threshold and side tried on the certifying scores."""
    pooled = np.unique(np.concatenate([test_p, test_q]))
    cuts = (pooled[:-1] + pooled[1:]) / 2
    return max(
        certified_threshold_bound(test_p, test_q, ALPHA, BETA, (t, side), "bonferroni").lower_bound
        for t in cuts[::2]  # every other cut point: enough to overfit, half the cost
        for side in ("upper", "lower")
    )


@pytest.mark.slow
def test_the_coverage_assertion_rejects_threshold_selection_on_the_certifying_data():
    valid = peeking = 0
    for rep in range(REPETITIONS):
        train_p, train_q, test_p, test_q = _null_scores(rep)
        valid += _valid_bound(train_p, train_q, test_p, test_q) > 0.0
        peeking += _peeking_bound(test_p, test_q) > 0.0
    assert_coverage(valid, REPETITIONS, BETA)  # the certificate passes ...
    with pytest.raises(AssertionError, match="bounds missed the truth"):
        assert_coverage(peeking, REPETITIONS, BETA)  # ... and the same assertion catches peeking


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
        cert = certify_critic(train_p, train_q, test_p, test_q, alpha=ALPHA, beta=BETA, kind=kind)
        choices.add((cert.kind, cert.window, cert.threshold))
    assert len(choices) == 1, choices
