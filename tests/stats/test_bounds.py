"""Tests of rdpest.stats.bounds: coverage of every confidence bound, tightness, bad input."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from rdpest.stats import bounds
from tests.helpers import assert_coverage

BETA = 0.05
# (sampler, true mean, support) — Bernoulli(1/2) is the worst case for Hoeffding, Bernoulli(0.02)
# is nearly degenerate (bets grow large), Beta(2, 5) is a smooth continuous case on [0, 1], and the
# uniform on [-3, 5] exercises rescaling.
DISTRIBUTIONS = {
    "bernoulli_half": (lambda rng, n: (rng.uniform(size=n) < 0.5).astype(float), 0.5, (0.0, 1.0)),
    "bernoulli_rare": (lambda rng, n: (rng.uniform(size=n) < 0.02).astype(float), 0.02, (0.0, 1.0)),
    "beta_2_5": (lambda rng, n: rng.beta(2.0, 5.0, size=n), 2.0 / 7.0, (0.0, 1.0)),
    "uniform_shifted": (lambda rng, n: rng.uniform(-3.0, 5.0, size=n), 1.0, (-3.0, 5.0)),
}


def _coverage_failures(method, side, dist, n, repetitions, seed):
    sampler, truth, (lo, hi) = DISTRIBUTIONS[dist]
    rng = np.random.default_rng(seed)
    failures = 0
    for _ in range(repetitions):
        x = sampler(rng, n)
        if side == "lower":
            failures += bounds.mean_lower_bound(x, BETA, lo, hi, method=method) > truth
        else:
            failures += bounds.mean_upper_bound(x, BETA, lo, hi, method=method) < truth
    return failures


@pytest.mark.parametrize("method", bounds.MEAN_BOUND_METHODS)
@pytest.mark.parametrize("side", ["lower", "upper"])
@pytest.mark.parametrize("dist", sorted(DISTRIBUTIONS))
def test_mean_bound_coverage_quick(method, side, dist):
    repetitions = 200
    failures = _coverage_failures(method, side, dist, n=60, repetitions=repetitions, seed=11)
    assert_coverage(failures, repetitions, BETA)


@pytest.mark.slow
@pytest.mark.parametrize("method", bounds.MEAN_BOUND_METHODS)
@pytest.mark.parametrize("side", ["lower", "upper"])
@pytest.mark.parametrize("dist", sorted(DISTRIBUTIONS))
@pytest.mark.parametrize("n", [10, 300])
def test_mean_bound_coverage_slow(method, side, dist, n):
    repetitions = 2000
    failures = _coverage_failures(method, side, dist, n, repetitions, seed=1000 + n)
    assert_coverage(failures, repetitions, BETA)


def test_bounds_order_and_tightness_on_low_variance_data():
    # Low-variance data: the variance-adaptive bounds must beat Hoeffding, and the order of the
    # three measured on this project (betting >= Bernstein >= Hoeffding) must hold.
    x = np.random.default_rng(3).beta(20.0, 50.0, size=2000)
    b = bounds.betting_lower_bound(x, BETA)
    e = bounds.bernstein_lower_bound(x, BETA)
    h = bounds.hoeffding_lower_bound(x, BETA)
    assert b > e > h
    assert b <= x.mean()
    # Betting tracks the sub-Gaussian rate of the true variance: radius within 2x of the CLT radius.
    clt_radius = stats.norm.ppf(1 - BETA) * x.std() / math.sqrt(x.size)
    assert x.mean() - b < 2 * clt_radius


@settings(max_examples=60, deadline=None)
@given(
    n=st.integers(min_value=20, max_value=400),
    p=st.floats(min_value=0.0, max_value=1.0),
    seed=st.integers(min_value=0, max_value=2**31),
    beta=st.sampled_from([0.01, 0.05, 0.2]),
)
def test_betting_never_much_looser_than_hoeffding(n, p, seed, beta):
    # Bernoulli data are Hoeffding's best case (variance up to 1/4). The predictable bets start
    # from a prior guess, so betting can lose slightly for small n; measured worst case over
    # n >= 20 was 4.5% of the Hoeffding radius, so 10% of that radius is the "tiny margin".
    x = (np.random.default_rng(seed).uniform(size=n) < p).astype(float)
    b = bounds.betting_lower_bound(x, beta)
    h = bounds.hoeffding_lower_bound(x, beta)
    radius = math.sqrt(math.log(1 / beta) / (2 * n))
    assert b >= h - 0.1 * radius


def test_betting_covers_half_bernoulli_at_n_200():
    # Regression test: sorting the values and applying a fixed permutation (an earlier way of
    # making the bound order-invariant) broke exchangeability; this case then missed 9.8% of the
    # time at beta = 0.05. Tolerance: the suite's binomial test (tests.helpers).
    rng = np.random.default_rng(123)
    repetitions = 1000
    failures = sum(
        bounds.betting_lower_bound((rng.uniform(size=200) < 0.5).astype(float), BETA) > 0.5
        for _ in range(repetitions)
    )
    assert_coverage(failures, repetitions, BETA)


def test_betting_permutation_is_seeded():
    x = np.random.default_rng(5).uniform(size=300)
    seeded = bounds.betting_lower_bound(x, BETA, random_state=3)
    assert seeded == bounds.betting_lower_bound(x, BETA, random_state=3)
    assert seeded == bounds.betting_lower_bound(x[np.random.default_rng(3).permutation(300)], BETA)


def test_upper_bound_reflects_lower_bound():
    x = np.random.default_rng(6).uniform(2.0, 4.0, size=500)
    for method in bounds.MEAN_BOUND_METHODS:
        lo = bounds.mean_lower_bound(x, BETA, 2.0, 4.0, method=method)
        hi = bounds.mean_upper_bound(x, BETA, 2.0, 4.0, method=method)
        assert 2.0 <= lo < x.mean() < hi <= 4.0


def test_constant_data_gives_finite_bounds():
    for method in bounds.MEAN_BOUND_METHODS:
        for value in (0.0, 1.0, 0.4):
            x = np.full(50, value)
            lo = bounds.mean_lower_bound(x, BETA, method=method)
            hi = bounds.mean_upper_bound(x, BETA, method=method)
            assert 0.0 <= lo <= value <= hi <= 1.0


@pytest.mark.parametrize("n", [1, 7, 40, 200])
@pytest.mark.parametrize("p", [0.0, 0.03, 0.5, 0.91, 1.0])
def test_clopper_pearson_exact_coverage(n, p):
    # Exact, not simulated: sum the binomial probabilities of the counts whose bound misses p.
    k = np.arange(n + 1)
    pmf = stats.binom.pmf(k, n, p)
    lower = np.array([bounds.clopper_pearson_lower_bound(int(i), n, BETA) for i in k])
    upper = np.array([bounds.clopper_pearson_upper_bound(int(i), n, BETA) for i in k])
    assert pmf[lower > p].sum() <= BETA + 1e-12
    assert pmf[upper < p].sum() <= BETA + 1e-12


def test_clopper_pearson_matches_scipy_binomtest():
    # scipy's two-sided exact interval at level 1 - 2 beta has one-sided beta tails.
    # Tolerance: rdpest moves each limit outwards by bounds._CP_MARGIN (1e-7 relative) and one
    # float, so it is the exact limit to 2e-7 and never inside it.
    ci = stats.binomtest(37, 120).proportion_ci(confidence_level=1 - 2 * BETA, method="exact")
    lower = bounds.clopper_pearson_lower_bound(37, 120, BETA)
    upper = bounds.clopper_pearson_upper_bound(37, 120, BETA)
    assert lower == pytest.approx(ci.low, rel=2e-7) and lower <= ci.low
    assert upper == pytest.approx(ci.high, rel=2e-7) and upper >= ci.high


def test_clopper_pearson_kernel_matches_one_sided_binomtest():
    # The one vectorised kernel behind every Clopper–Pearson limit of rdpest: array counts, one
    # n, scalar or array levels. scipy's one-sided exact limits ("greater": lower limit, "less":
    # upper limit) at confidence 1 - beta are the one-sided (1 - beta) Clopper–Pearson limits.
    for n in (1, 2, 7, 40, 333):
        k = np.arange(n + 1)
        for beta in (1e-6, 0.001, 0.025, 0.05, 0.3):
            lower = bounds._clopper_pearson(k, n, beta, "lower")
            upper = bounds._clopper_pearson(k, n, beta, "upper")
            for i in k:
                greater = stats.binomtest(int(i), n, alternative="greater")
                less = stats.binomtest(int(i), n, alternative="less")
                lo = greater.proportion_ci(confidence_level=1 - beta, method="exact").low
                hi = less.proportion_ci(confidence_level=1 - beta, method="exact").high
                # outwards by the kernel's relative margin (1e-7) and one float: see above
                assert lower[i] == pytest.approx(lo, rel=2e-7, abs=1e-12) and lower[i] <= lo
                assert upper[i] == pytest.approx(hi, rel=2e-7, abs=1e-12) and upper[i] >= hi
                assert bounds.clopper_pearson_lower_bound(int(i), n, beta) == lower[i]
                assert bounds.clopper_pearson_upper_bound(int(i), n, beta) == upper[i]
    # Several levels for one count (the joint confidence region's use), nested in the level.
    levels = np.array([1e-4, 0.01, 0.2])
    lows = bounds._clopper_pearson(5, 30, levels, "lower")
    highs = bounds._clopper_pearson(5, 30, levels, "upper")
    assert np.all(np.diff(lows) > 0) and np.all(np.diff(highs) < 0)
    for j, level in enumerate(levels):
        assert lows[j] == bounds.clopper_pearson_lower_bound(5, 30, float(level))
        assert highs[j] == bounds.clopper_pearson_upper_bound(5, 30, float(level))


def _binomial_tail_at_least(n: int, k: int, p: float) -> float:
    """P(Bin(n, p) >= k) summed exactly at 40 digits (mpmath), relative to nothing in scipy."""
    import mpmath as mp

    with mp.workdps(40):
        p = mp.mpf(p)
        return float(
            mp.fsum(mp.binomial(n, j) * p**j * (1 - p) ** (n - j) for j in range(k, n + 1))
        )


@pytest.mark.parametrize("level", [1e-30, 5e-101])
def test_clopper_pearson_limits_stay_valid_at_the_smallest_levels(level, recwarn):
    """Bug: below about 1e-90 stats.beta.ppf's root finder stopped short (with a RuntimeWarning)
    and the lower limits for k = 2..6 of 100 had tails up to 8e7 times the level: invalid
    bounds at an accepted beta. And 1 − level rounded to 1, so every upper limit was 1."""
    n = 100
    k = np.arange(n + 1)
    lower = bounds._clopper_pearson(k, n, level, "lower")
    upper = bounds._clopper_pearson(k, n, level, "upper")
    assert not [w for w in recwarn.list if issubclass(w.category, RuntimeWarning)]
    for i in range(1, 13):
        # A valid lower limit L has P(Bin(n, L) >= k) <= level; an exact one, equality. The
        # limits are moved outwards by a relative 1e-7 (bounds._CP_MARGIN), which moves the
        # tail by about k times that: at most 1.2e-6 here.
        tail = _binomial_tail_at_least(n, i, lower[i])
        assert tail <= level * (1 + 1e-9) and tail >= level * (1 - 1e-5)
        # The upper limit by symmetry: P(Bin(n, U) <= k) = P(Bin(n, 1 − U) >= n − k).
        tail = _binomial_tail_at_least(n, n - (i - 1), 1.0 - upper[i - 1])
        assert tail <= level * (1 + 1e-9)
    assert upper[0] < 1.0 and lower[n] > 0.0


@pytest.mark.parametrize("k, n", [(0, 10**12), (1, 10**16), (10, 10**17), (1, 2**62)])
def test_clopper_pearson_upper_limit_is_a_bound_where_it_is_tiny(k, n):
    """Bug: the upper limit was computed as 1 − (a quantile near 1), which cancels where the
    limit is below about 1e-12: for k = 1 of n = 1e16 it was 4.44e-16 where the exact limit
    is 4.74e-16, so P(Bin(n, limit) <= k) was 0.064 at level 0.05, not a bound (and 5e-324 for
    n = 2**62, an accepted trial count). Tolerance: the limits are accurate to ~1e-15 relative,
    which moves the tail by about k·n·limit times that, far below 1e-9 of the level."""
    level = 0.05
    upper = bounds.clopper_pearson_upper_bound(k, n, level)
    tail = stats.binom.cdf(k, n, upper)
    assert tail <= level * (1 + 1e-9)
    assert tail >= level * (1 - 1e-6)  # and not conservative by much: the exact limit


@pytest.mark.parametrize("n", [10**12, 10**14, 10**16])
@pytest.mark.parametrize("missing", [0, 1])
@pytest.mark.parametrize("level", [0.05, 1e-5])
def test_clopper_pearson_lower_limit_is_a_bound_where_it_is_near_one(n, missing, level):
    """Diff reviewer's finding, the mirror of the upper limit's: a lower limit near 1 taken
    directly lost its last digits, and for k = n − 1 of n = 1e16 its tail P(Bin(n, L) >= k) was
    1.28 times the level. The tail of k >= n − 1 is L^n + n L^(n−1) (1 − L), evaluated in
    mpmath (50 digits) at the float L; it must not exceed the level (to 1e-9)."""
    mpmath = pytest.importorskip("mpmath")
    mpmath.mp.dps = 50
    k = n - missing
    lower = mpmath.mpf(float(bounds._clopper_pearson(k, n, level, "lower")))
    tail = lower**n + (n * lower ** (n - 1) * (1 - lower) if missing else 0)
    assert float(tail) <= level * (1 + 1e-9)


@pytest.mark.parametrize("k, level", [(1, 0.05), (5, 0.05), (1, 0.3), (2, 0.35), (1, 0.25)])
def test_clopper_pearson_upper_limit_covers_the_inverse_s_own_error(k, level):
    """Diff reviewers' findings: scipy's betainccinv is off by up to 1.4e-8 relative at n = 1e9
    (k = 1, level 0.3), so the upper limit's tail exceeded the level (by 1.6e-8 of it at
    level 0.05, 2.3e-8 at k = 2, level 0.35; a first margin of 1e-8 did not cover it); limits
    are moved out by a relative 1e-7. Tail by scipy's binomial CDF (accurate to ~1e-14)."""
    upper = bounds.clopper_pearson_upper_bound(k, 10**9, level)
    assert stats.binom.cdf(k, 10**9, upper) <= level


def test_markov_lower_bound_coverage():
    # Exponential(1) variables: heavy enough that only Markov applies without an upper bound.
    rng = np.random.default_rng(8)
    repetitions = 2000
    failures = sum(
        bounds.markov_lower_bound(rng.exponential(size=30), BETA) > 1.0 for _ in range(repetitions)
    )
    assert_coverage(failures, repetitions, BETA)


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: bounds.hoeffding_lower_bound([0.1, 0.2], beta=0.0), "beta"),
        (lambda: bounds.hoeffding_lower_bound([0.1, 0.2], beta=1.0), "beta"),
        (lambda: bounds.betting_lower_bound([0.1, float("nan")], beta=0.1), "NaN"),
        (lambda: bounds.betting_lower_bound([0.1, np.inf], beta=0.1), "infinite"),
        (lambda: bounds.betting_lower_bound([], beta=0.1), "at least 1"),
        (lambda: bounds.betting_lower_bound([[0.1], [0.2, 0.3]], beta=0.1), "ragged"),
        (lambda: bounds.betting_lower_bound([[0.1, 0.2]], beta=0.1), "1-dimensional"),
        (lambda: bounds.betting_lower_bound([1.5], beta=0.1), r"\[lower, upper\]"),
        (lambda: bounds.betting_lower_bound([0.5], beta=0.1, lower=1.0, upper=0.0), "upper"),
        (lambda: bounds.bernstein_lower_bound([0.5], beta=0.1), "at least 2"),
        (lambda: bounds.mean_lower_bound([0.5], beta=0.1, method="magic"), "method"),
        (lambda: bounds.clopper_pearson_lower_bound(5, 3, 0.1), "successes"),
        (lambda: bounds.clopper_pearson_lower_bound(1.5, 3, 0.1), "successes"),
        (lambda: bounds.clopper_pearson_upper_bound(0, 0, 0.1), "trials"),
        (lambda: bounds.markov_lower_bound([-1.0, 2.0], 0.1), "nonnegative"),
        (lambda: bounds.markov_lower_bound([1.0], float("nan")), "beta"),
    ],
)
def test_bad_input_raises_value_error(call, match):
    with pytest.raises(ValueError, match=match):
        call()


# ----------------------------------------------------------------------------------------------
# Bounds at several levels from one p-value function (used by the joint confidence regions)
# ----------------------------------------------------------------------------------------------
LEVELS = np.array([0.001, 0.01, 0.05, 0.2, 0.5])


@pytest.mark.parametrize("method", bounds.MEAN_BOUND_METHODS)
def test_multi_level_bounds_are_nested_and_match_single_level_bounds(method):
    x = np.random.default_rng(5).beta(2.0, 5.0, size=300)
    lower = bounds.mean_lower_bounds(x, LEVELS, method=method, design_level=0.05)
    upper = bounds.mean_upper_bounds(x, LEVELS, method=method, design_level=0.05)
    assert np.all(np.diff(lower) >= 0) and np.all(np.diff(upper) <= 0)
    # Below the sample mean at the usual levels (at 0.5 the running maximum of a betting capital
    # may reach 2 just above it).
    assert np.all(lower[:-1] < x.mean()) and np.all(upper[:-1] > x.mean())
    # At the design level the betting bets are the single-level bound's own bets: same bound.
    single = bounds.mean_lower_bound(x, 0.05, method=method)
    assert lower[2] == pytest.approx(single, abs=1e-12)


@pytest.mark.parametrize("method", bounds.MEAN_BOUND_METHODS)
@pytest.mark.parametrize("dist", ["bernoulli_half", "beta_2_5"])
def test_multi_level_bounds_cover_at_every_level(method, dist):
    # Each level's bound is a valid bound on its own (the p-value behind them is super-uniform).
    # Tolerance: the binomial test of assert_coverage at every level.
    sampler, truth, (lo, hi) = DISTRIBUTIONS[dist]
    rng = np.random.default_rng(21)
    repetitions = 300
    failures = np.zeros(LEVELS.size, dtype=int)
    for _ in range(repetitions):
        x = sampler(rng, 80)
        failures += bounds.mean_lower_bounds(x, LEVELS, lo, hi, method, design_level=0.01) > truth
    for level, count in zip(LEVELS, failures, strict=True):
        assert_coverage(int(count), repetitions, float(level))


def test_multi_level_bounds_reject_bad_levels():
    with pytest.raises(ValueError, match="levels"):
        bounds.mean_lower_bounds([0.5, 0.5], [0.0, 0.1])
    with pytest.raises(ValueError, match="levels"):
        bounds.mean_upper_bounds([0.5, 0.5], [])
    with pytest.raises(ValueError, match="method"):
        bounds.mean_lower_bounds([0.5, 0.5], [0.1], method="guess")


# --------------------------------------------------------------------------------------------
# Overflow and complex input (issue "Trust: no wrong verdict from any input", item 7)
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "call",
    [
        lambda: bounds.hoeffding_lower_bound([0.0, 1.0], 0.05, lower=-1e308, upper=1e308),
        lambda: bounds.bernstein_lower_bound([0.0, 1.0], 0.05, lower=-1e308, upper=1e308),
        lambda: bounds.betting_lower_bound([0.0, 1.0], 0.05, lower=-1e308, upper=1e308),
        lambda: bounds.mean_lower_bound([0.0, 1.0], 0.05, lower=-1e308, upper=1e308),
        lambda: bounds.mean_upper_bound([0.0, 1.0], 0.05, lower=-1e308, upper=1e308),
        lambda: bounds.mean_lower_bounds([0.0, 1.0], [0.05], lower=-1e308, upper=1e308),
        lambda: bounds.mean_upper_bounds([0.0, 1.0], [0.05], lower=-1e308, upper=1e308),
        # lower + upper overflows (the upper bounds reflect the values through it).
        lambda: bounds.mean_upper_bound([1.5e308], 0.05, lower=1e308, upper=1.7e308),
    ],
)
def test_a_range_that_overflows_is_a_value_error_not_nan(call):
    """Catches the bug where upper − lower = inf turned every bound into NaN silently."""
    with pytest.raises(ValueError, match=r"lower.*upper|upper.*lower"):
        call()


@pytest.mark.parametrize(
    "call",
    [
        lambda x: bounds.hoeffding_lower_bound(x, 0.05),
        lambda x: bounds.mean_upper_bound(x, 0.05),
        lambda x: bounds.markov_lower_bound(x, 0.05),
    ],
)
def test_complex_input_is_refused_not_made_real(call):
    """Catches the bug where complex samples were silently cast to their real part."""
    with pytest.raises(ValueError, match=r"x.*complex"):
        call(np.array([0.5 + 0.5j, 0.25 + 0.0j]))


def test_markov_bound_of_huge_values_is_finite():
    """Catches the bug where the sample mean of [1e308, 1e308] overflowed to an inf bound."""
    assert bounds.markov_lower_bound([1e308] * 2, 0.05) == pytest.approx(0.05 * 1e308)
    assert math.isfinite(bounds.markov_lower_bound([1.7e308] * 3, 0.5))
