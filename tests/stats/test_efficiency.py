"""The efficiency bound of rdpest.stats.efficiency: its closed form, and that the exact log ratio's
bracket attains it while the known-ratio plug-in sits below it by at least the factor α."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from rdpest.stats.divergences import gaussian_renyi_divergence
from rdpest.stats.efficiency import efficient_standard_error


@pytest.mark.parametrize(
    ("alpha", "mean", "n_p", "n_q"),
    [(2.0, 1.0, 1000, 1000), (1.25, 0.3, 500, 2000), (8.0, 0.1, 5000, 700)],
)
def test_matches_the_gaussian_shift_closed_form(alpha, mean, n_p, n_q):
    """For N(μ, 1) against N(0, 1), D_β = βμ²/2, so the two relative variances are
    e^{(α−1)²μ²} − 1 and e^{α²μ²} − 1 (written out here, independently of the module)."""
    expected = math.sqrt(
        (
            alpha**2 * math.expm1((alpha - 1) ** 2 * mean**2) / n_p
            + (alpha - 1) ** 2 * math.expm1(alpha**2 * mean**2) / n_q
        )
        / (alpha - 1) ** 2
    )
    divergence = lambda order: gaussian_renyi_divergence(order, mean, 1.0, 0.0, 1.0)  # noqa: E731
    assert efficient_standard_error(divergence, alpha, n_p, n_q) == pytest.approx(expected, 1e-12)


@pytest.mark.parametrize(("alpha", "mean"), [(1.25, 1.0), (2.0, 0.5), (4.0, 0.25)])
def test_the_exact_ratio_bracket_attains_the_bound_and_the_known_ratio_plug_in_beats_it(
    alpha, mean
):
    """Positive control: over 1,000 Gaussian-shift samples of n = 2,000 per side, the spread of the
    bracket at the exact log ratio is the bound (the bracket is the efficient estimator). Negative
    control: the plug-in that knows the ratio, log(mean_P r^{α−1})/(α−1), spreads at least α times
    less, which is why no estimator that learns the ratio can come within a factor α of it.

    Tolerance: the sample standard deviation of R draws has relative standard error
    sqrt((κ − 1)/(4R)), κ their kurtosis (measured, about 3); four of those (about 0.09) also
    cover the bound's O(1/n) error, about 1% here (measured with R = 4,000 at n = 500–8,000)."""
    n, repeats = 2000, 1000
    rng = np.random.default_rng(20261205)
    half = mean**2 / 2  # the log ratio is L(x) = μx − μ²/2
    log_ratio_p = mean * rng.normal(mean, 1.0, (repeats, n)) - half
    log_ratio_q = mean * rng.normal(0.0, 1.0, (repeats, n)) - half
    p_moment = np.log(np.mean(np.exp((alpha - 1) * log_ratio_p), axis=1))
    q_moment = np.log(np.mean(np.exp(alpha * log_ratio_q), axis=1))
    bracket = alpha / (alpha - 1) * p_moment - q_moment
    plug_in = p_moment / (alpha - 1)

    bound = efficient_standard_error(lambda order: order * half, alpha, n)
    spread = bracket.std(ddof=1)
    tolerance = 4 * math.sqrt((stats.kurtosis(bracket, fisher=False) - 1) / (4 * repeats))
    assert abs(spread / bound - 1) <= tolerance, (spread, bound, tolerance)
    assert bound >= alpha * plug_in.std(ddof=1) * (1 - tolerance)


def test_infinite_where_a_needed_moment_is_infinite():
    """N(0, s²) against N(0, 1) with s² = 1.3 has D_β = ∞ from β = s²/(s² − 1) ≈ 4.3 on: at α = 2,
    D_4 is finite, and at α = 2.5, D_5 is not."""
    divergence = lambda order: gaussian_renyi_divergence(order, 0.0, math.sqrt(1.3), 0.0, 1.0)  # noqa: E731
    assert math.isfinite(efficient_standard_error(divergence, 2.0, 100))
    assert efficient_standard_error(divergence, 2.5, 100) == math.inf


def test_zero_when_the_laws_are_equal():
    assert efficient_standard_error(lambda order: 0.0, 3.0, 10) == 0.0


@pytest.mark.parametrize(
    ("divergence", "match"),
    [
        ("not callable", "callable"),
        (lambda order: math.nan, r"divergence\(2.0\) must be ≥ 0"),
        (lambda order: -0.1, r"divergence\(2.0\) must be ≥ 0"),
        (lambda order: "1.5", r"divergence\(2.0\) must be a real number"),
        (lambda order: 1 + 2j, r"divergence\(2.0\) must be a real number"),
        (lambda order: math.inf, r"divergence\(2.0\) must be finite"),
        (lambda order: 1.0 / order, "must not decrease in the order"),
    ],
)
def test_refuses_what_is_not_a_renyi_divergence(divergence, match):
    with pytest.raises(ValueError, match=match):
        efficient_standard_error(divergence, 2.0, 100)


@pytest.mark.parametrize(
    ("kwargs", "match"), [({"alpha": 1.0}, "alpha"), ({"n_p": 0}, "n_p"), ({"n_q": 0}, "n_q")]
)
def test_refuses_bad_orders_and_sizes(kwargs, match):
    arguments = {"divergence": lambda order: order / 2, "alpha": 2.0, "n_p": 10, **kwargs}
    with pytest.raises(ValueError, match=match):
        efficient_standard_error(**arguments)


def test_a_refusal_at_a_higher_order_says_why_that_order_was_asked_for():
    # rdpest's own divergences refuse orders above 1e6: at α = 6e5 the message named an order
    # 1199999 the user never passed, with nothing saying where it came from.
    def divergence(order):
        return gaussian_renyi_divergence(order, 0.0, 1.0, 1e-3, 1.0)

    with pytest.raises(ValueError, match=r"divergence\(1199999.0\) raised: .* orders α, 2α − 1"):
        efficient_standard_error(divergence, 6e5, 100)
