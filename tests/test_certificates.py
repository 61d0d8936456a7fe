"""Tests of rdpest.certificates: the bracket, its certificate, window choice, coverage."""

import math

import numpy as np
import pytest
from stat_helpers import assert_coverage

from rdpest.certificates import (
    certified_dv_bracket,
    certified_threshold_bound,
    certify_critic,
    dv_bracket,
    select_threshold,
    select_window,
)


def test_bracket_equals_divergence_at_the_true_log_ratio():
    # Gaussian shift N(mu, 1) vs N(0, 1): L(x) = mu x - mu^2 / 2 and D_alpha = alpha mu^2 / 2.
    # With 400k samples per side the plug-in moments are within ~1% of their expectations.
    rng = np.random.default_rng(0)
    mu, alpha = 0.5, 2.0
    x, y = rng.normal(mu, 1, 400_000), rng.normal(0, 1, 400_000)
    value = dv_bracket(mu * x - mu**2 / 2, mu * y - mu**2 / 2, alpha)
    assert value == pytest.approx(alpha * mu**2 / 2, abs=0.02)


def test_bracket_is_shift_invariant():
    rng = np.random.default_rng(1)
    g_p, g_q = rng.normal(size=50), rng.normal(size=70)
    assert dv_bracket(g_p + 3.7, g_q + 3.7, 1.5) == pytest.approx(dv_bracket(g_p, g_q, 1.5))


def test_narrow_windows_and_extreme_values_are_handled():
    g = np.full(30, 2.0)
    assert certified_dv_bracket(g, g, 2.0, 0.05, (2.0, 2.0)).lower_bound == 0.0
    # Values that are 1 ulp outside the exact range after exponentiation must not fail.
    g_p = np.array([0.0, 4.01e-5, 1e-9])
    cert = certified_dv_bracket(g_p, g_p, 2.0, 0.05, (0.0, 4.01e-5))
    assert math.isfinite(cert.lower_bound)


def test_window_is_chosen_within_the_training_values():
    rng = np.random.default_rng(2)
    g_p, g_q = rng.normal(1, 1, 500), rng.normal(0, 1, 500)
    lo, hi = select_window(g_p, g_q, 2.0, 0.05)
    assert g_q.min() <= lo < hi <= g_p.max()


def test_bad_window_and_method():
    with pytest.raises(ValueError, match="window"):
        certified_dv_bracket([0.0], [0.0], 2.0, 0.05, (1.0, 0.0))
    with pytest.raises(ValueError, match="method"):
        certified_dv_bracket([0.0], [0.0], 2.0, 0.05, (0.0, 1.0), method="guess")


def test_threshold_certificate_selection_and_errors():
    rng = np.random.default_rng(4)
    g_p, g_q = rng.normal(1.5, 1, 600), rng.normal(0, 1, 600)
    t, side, score = select_threshold(g_p, g_q, 2.0, 0.05)
    assert side == "upper" and np.quantile(g_q, 0.0) < t < np.quantile(g_p, 1.0)
    cert = certified_threshold_bound(g_p, g_q, 2.0, 0.05, (t, side))
    # The training score pays for the choice among candidates, so it is below the plain bound.
    assert 0.0 < score <= cert.lower_bound < 2.0 * 1.5**2 / 2
    assert cert.kind == "threshold" and cert.window is None
    with pytest.raises(ValueError, match="side"):
        certified_threshold_bound(g_p, g_q, 2.0, 0.05, (t, "middle"))
    with pytest.raises(ValueError, match="kind"):
        certify_critic(g_p, g_q, g_p, g_q, 2.0, 0.05, kind="best")


@pytest.mark.parametrize("kind", ["bracket", "threshold", "auto"])
@pytest.mark.parametrize("mu", [0.0, 1.0])
def test_oracle_certificate_coverage(mu, kind):
    # The exact log ratio, certified on a split: bounds above the truth at most beta of the time.
    # Tolerance: one-sided binomial test at level 1e-3 (a valid certificate fails < 0.1% of seeds).
    alpha, beta, repetitions = 2.0, 0.1, 300
    truth = alpha * mu**2 / 2
    rng = np.random.default_rng(3)
    failures = 0
    for _ in range(repetitions):
        x, y = rng.normal(mu, 1, 200), rng.normal(0, 1, 200)
        L = mu * x - mu**2 / 2, mu * y - mu**2 / 2
        cert = certify_critic(
            L[0][:100], L[1][:100], L[0][100:], L[1][100:], alpha, beta, kind=kind
        )
        failures += cert.lower_bound > truth
    assert_coverage(failures, repetitions, beta)
