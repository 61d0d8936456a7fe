"""Coverage of DVRenyiEstimator as users run it: the defaults, cross-fitting, every confidence
method and region, with ``direction="max"`` (what every audit fits).

Each cell fits R seeded pairs and counts misses (a bound above the truth); the assertion is the
suite's one-sided binomial test (tests.helpers.assert_coverage). R = 300 at β = 0.1 is the
smallest number of repetitions that detects a miss rate of 2β = 0.2 with power ≥ 0.8 at the
suite's per-assertion level (tests.helpers.repetitions_for_power, checked below); the positive
controls in tests/stats/test_positive_controls.py show that the same assertion fails for invalid
certificates of every family used here.

The critic is small (8 hidden units, 20 epochs) to keep the cells affordable. Validity does not
depend on the critic: it is trained on the training rows only (no-peeking tests in
tests/stats/test_positive_controls.py), and the certificate holds for ANY critic fixed before the
certifying rows are seen. ``n_repeats`` (5 in audits) only stabilises the point estimate; a quick
test below checks that it leaves the bound bit for bit unchanged, so the cells use 1.

``critic_inputs="asinh"`` and ``"quadratic"`` change what the critic is a function of (still of
the training rows only), so they have cells of their own.

The cells are nulls with a learned, non-degenerate critic (P = Q, truth 0: every positive bound
is a miss, and unlike an exact log-ratio, which is identically 0 there, a learned critic can
produce one) and one small divergence where the certified bound is often positive.
"""

from __future__ import annotations

import pytest

from rdpest import DVRenyiEstimator
from rdpest.datasets import make_renyi_pair
from tests.helpers import assert_coverage, coverage_power

ALPHA, BETA, N, REPETITIONS = 2.0, 0.1, 300, 300
SMALL_CRITIC = {"hidden_layer_sizes": (8,), "max_epochs": 20}

CELLS = {
    # name: (divergence, options besides alpha, beta, direction="max" and the small critic)
    "defaults": (0.0, {}),
    "defaults_small_divergence": (0.25, {}),
    "asinh_inputs": (0.0, {"critic_inputs": "asinh"}),
    "asinh_inputs_small_divergence": (0.25, {"critic_inputs": "asinh"}),
    "quadratic_inputs": (0.0, {"critic_inputs": "quadratic"}),
    "quadratic_inputs_small_divergence": (0.25, {"critic_inputs": "quadratic"}),
    "cross_fit": (0.0, {"cross_fit": True}),
    "bonferroni_region": (0.0, {"confidence_region": "bonferroni"}),
    "bracket_betting": (0.0, {"certificate": "bracket", "confidence": "betting"}),
    "bracket_bernstein": (0.0, {"certificate": "bracket", "confidence": "bernstein"}),
    "bracket_hoeffding": (0.0, {"certificate": "bracket", "confidence": "hoeffding"}),
    "threshold_bonferroni": (
        0.0,
        {"certificate": "threshold", "confidence_region": "bonferroni"},
    ),
}


def test_repetitions_detect_twice_beta_with_power():
    """Bug caught: the cells' repetitions cut below what detects a 2β miss rate."""
    assert coverage_power(REPETITIONS, BETA, 2 * BETA) >= 0.8


def test_n_repeats_leaves_the_bound_unchanged():
    """Audits fit with n_repeats=5; the extra partitions must not touch the certificate.
    Bug caught: a bound taken over the repeats (a maximum over five partitions, each at the full
    level beta, would miss up to five times as often)."""
    for seed in range(3):
        X, Y, _ = make_renyi_pair("gaussian_shift", ALPHA, 0.5, N, random_state=seed)
        options = {"alpha": ALPHA, "beta": BETA, "direction": "max", "random_state": seed}
        one = DVRenyiEstimator(**options, **SMALL_CRITIC).fit(X, Y)
        five = DVRenyiEstimator(**options, **SMALL_CRITIC, n_repeats=5).fit(X, Y)
        assert five.lower_bound_ == one.lower_bound_
        for direction, result in five.directions_.items():
            assert result.raw_lower_bound == one.directions_[direction].raw_lower_bound
            assert len(result.diagnostics.repeat_points) == 5


@pytest.mark.slow
@pytest.mark.parametrize("cell", list(CELLS))
def test_coverage_of_what_users_run(cell):
    divergence, options = CELLS[cell]
    misses = 0
    for rep in range(REPETITIONS):
        X, Y, truth = make_renyi_pair("gaussian_shift", ALPHA, divergence, N, random_state=rep)
        est = DVRenyiEstimator(
            alpha=ALPHA, beta=BETA, direction="max", random_state=rep, **SMALL_CRITIC, **options
        ).fit(X, Y)
        misses += est.lower_bound_ > truth
    assert_coverage(misses, REPETITIONS, BETA)
