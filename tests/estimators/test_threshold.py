"""Tests of rdpest.estimators.threshold: the threshold-test (TPR/FPR) baseline, GDP conversion."""

import math

import numpy as np
import pytest
from scipy import optimize, stats

from rdpest.datasets import family_parameters, log_likelihood_ratio, make_renyi_pair
from rdpest.estimators.threshold import BernoulliTPRFPRBaseline
from rdpest.stats.conversions import gdp_from_rates
from rdpest.stats.divergences import bernoulli_renyi_divergence
from tests.helpers import assert_clone_and_pickle_round_trip, assert_coverage

BETA = 0.05


def _sampler(family, alpha, divergence, **params):
    """Samples and truth; for "randomized_response", ``divergence`` is the gap p − q instead."""
    if family == "randomized_response":
        # Two-valued outputs: every threshold ties many samples (atoms in the score law).
        p, q = 0.5 + divergence, 0.5

        def sample(n, seed):
            rng = np.random.default_rng(seed)
            X, Y = (rng.random(n) < p).astype(float), (rng.random(n) < q).astype(float)
            return X, Y, bernoulli_renyi_divergence(alpha, p, q)

        return sample

    def sample(n, seed):
        return make_renyi_pair(family, alpha, divergence, n, random_state=seed, **params)

    return sample


def _failures(family, divergence, threshold, n, repetitions, seed, alpha=2.0, **kwargs):
    sample = _sampler(family, alpha, divergence)
    failures = 0
    for r in range(repetitions):
        X, Y, truth = sample(n, seed + r)
        est = BernoulliTPRFPRBaseline(
            alpha, BETA, threshold=threshold, random_state=seed + r, **kwargs
        ).fit(X, Y)
        assert est.certified_
        failures += est.lower_bound_ > truth
    return failures


# ------------------------------------------------------------------ validity


@pytest.mark.parametrize("threshold", ["split", "bonferroni"])
@pytest.mark.parametrize("family", ["gaussian_shift", "laplace_shift"])
@pytest.mark.parametrize("divergence", [0.0, 0.5, 2.0])
def test_direct_coverage_quick(threshold, family, divergence):
    repetitions = 200
    failures = _failures(family, divergence, threshold, 150, repetitions, 100)
    assert_coverage(failures, repetitions, BETA)


@pytest.mark.parametrize("threshold", ["split", "bonferroni"])
def test_direct_coverage_with_ties_quick(threshold):
    repetitions = 200
    failures = _failures("randomized_response", 0.3, threshold, 100, repetitions, 300)
    assert_coverage(failures, repetitions, BETA)


# Randomized response has p = 0.5 + divergence, so only divergences below 0.5 exist for it.
SLOW_DIRECT_CASES = [
    (family, divergence, alpha)
    for family in ("gaussian_shift", "laplace_shift", "randomized_response")
    for divergence in (0.0, 0.1, 0.4, 3.0)
    for alpha in (1.25, 2.0, 4.0)
    if not (family == "randomized_response" and divergence >= 0.5)
]


@pytest.mark.slow
@pytest.mark.parametrize("threshold", ["split", "bonferroni"])
@pytest.mark.parametrize("family, divergence, alpha", SLOW_DIRECT_CASES)
def test_direct_coverage_slow(threshold, family, divergence, alpha):
    repetitions = 1000
    failures = _failures(family, divergence, threshold, 60, repetitions, 20_000, alpha=alpha)
    assert_coverage(failures, repetitions, BETA)


@pytest.mark.slow
@pytest.mark.parametrize("threshold", ["split", "bonferroni"])
@pytest.mark.parametrize("direction", ["reverse", "max"])
def test_direct_coverage_directions_slow(threshold, direction):
    # |x| separates N(0, s²) from N(0, 1); the pair is asymmetric, so the two truths differ.
    from rdpest.stats.divergences import gaussian_renyi_divergence

    alpha, divergence = 2.0, 0.3
    std = family_parameters("gaussian_scale", alpha, divergence)["std"]
    reverse = gaussian_renyi_divergence(alpha, 0.0, 1.0, 0.0, std)
    truth = reverse if direction == "reverse" else max(reverse, divergence)
    repetitions, failures = 1000, 0
    for r in range(repetitions):
        X, Y, _ = make_renyi_pair("gaussian_scale", alpha, divergence, 100, random_state=r)
        est = BernoulliTPRFPRBaseline(
            alpha, BETA, direction, threshold=threshold, score_function=np.abs, random_state=r
        ).fit(X, Y)
        failures += est.lower_bound_ > truth
    assert_coverage(failures, repetitions, BETA)


@pytest.mark.slow
def test_direct_coverage_multivariate_slow():
    alpha, divergence = 2.0, 0.5
    params = family_parameters("multivariate_gaussian", alpha, divergence, dimension=3)
    score = log_likelihood_ratio("multivariate_gaussian", params)
    repetitions, failures = 1000, 0
    for r in range(repetitions):
        X, Y, truth = make_renyi_pair(
            "multivariate_gaussian", alpha, divergence, 100, random_state=r, dimension=3
        )
        est = BernoulliTPRFPRBaseline(alpha, BETA, score_function=score, random_state=r)
        failures += est.fit(X, Y).lower_bound_ > truth
    assert_coverage(failures, repetitions, BETA)


def test_bonferroni_levels_cover_every_threshold():
    # The band of _uniform_band_levels: at a fixed n the worst case over ALL thresholds of
    # "true TPR < Clopper–Pearson lower bound" must have probability <= n·level. Uniform scores:
    # G(t) = 1 − t, and the worst threshold for count k sits just below the (n−k+1)-th order
    # statistic, where G is Beta(k, n−k+1) distributed (exact for continuous laws).
    from rdpest.stats.bounds import _clopper_pearson

    n, level, repetitions = 20, BETA / 20, 4000
    rng = np.random.default_rng(0)
    lows = _clopper_pearson(np.arange(n + 1), n, level, "lower")
    failures = 0
    for _ in range(repetitions):
        u = np.sort(rng.random(n))
        # Just below u[j] the count above is n − j and the true rate is 1 − u[j] (at the limit).
        failures += bool(np.any(1.0 - u < lows[n - np.arange(n)]))
    assert_coverage(failures, repetitions, beta=n * level)


# ------------------------------------------------------------------ exact values


def _two_valued(k_p, n_p, k_q, n_q):
    X = np.r_[np.ones(k_p), np.zeros(n_p - k_p)]
    Y = np.r_[np.ones(k_q), np.zeros(n_q - k_q)]
    return X, Y


def _gdp_mu_by_hand(epsilon, delta):
    # Dong, Roth & Su: δ(ε) = Φ(−ε/μ + μ/2) − e^ε Φ(−ε/μ − μ/2), solved for μ with scipy.
    def excess(mu):
        norm = stats.norm
        return (
            norm.cdf(-epsilon / mu + mu / 2)
            - math.exp(epsilon) * norm.cdf(-epsilon / mu - mu / 2)
            - delta
        )

    return optimize.brentq(excess, 1e-3, 50.0, xtol=1e-14)


def test_gdp_from_rates_matches_hand_computation():
    tpr, fpr, alpha, delta = 0.8, 0.1, 2.0, 1e-5
    epsilon = math.log((tpr - delta) / fpr)
    mu = _gdp_mu_by_hand(epsilon, delta)
    result = gdp_from_rates(tpr, fpr, alpha, delta)
    assert result.epsilon == pytest.approx(epsilon, rel=1e-12)
    assert result.mu == pytest.approx(mu, rel=1e-8)
    assert result.epsilon_alpha == pytest.approx(alpha * mu**2 / 2, rel=1e-8)


def test_gdp_from_rates_at_a_false_positive_rate_of_zero_is_infinite():
    """Catches the bug where the documented inf (no finite ε explains TPR − δ > 0 = FPR) was
    turned into "has no finite result ... an argument is too extreme" by the result check."""
    assert gdp_from_rates(0.5, 0.0, 2.0, 1e-5) == (math.inf, math.inf, math.inf)
    assert gdp_from_rates(1e-6, 0.0, 2.0, 1e-5) == (0.0, 0.0, 0.0)  # TPR <= δ shows nothing


def test_gdp_from_rates_without_evidence_is_zero():
    assert gdp_from_rates(0.3, 0.3, 2.0, 1e-5) == (0.0, 0.0, 0.0)
    assert gdp_from_rates(0.1, 0.5, 2.0, 1e-5) == (0.0, 0.0, 0.0)  # never |μ| of a negative ε


@pytest.mark.parametrize("conversion", ["direct", "gdp"])
def test_bonferroni_reproduces_hand_computed_bound(conversion):
    # One cut point (0.5) between the two values; the "upper" side gives TPR 0.8, FPR 0.1.
    n, alpha, delta = 100, 2.0, 1e-5
    X, Y = _two_valued(80, n, 10, n)
    est = BernoulliTPRFPRBaseline(
        alpha, BETA, threshold="bonferroni", conversion=conversion, delta=delta
    ).fit(X, Y)
    level = BETA / (4 * n)  # four uniform bands, n counts each
    tpr_lo = stats.beta.ppf(level, 80, n - 80 + 1)
    fpr_hi = stats.beta.ppf(1 - level, 10 + 1, n - 10)
    epsilon = math.log((tpr_lo - delta) / fpr_hi)
    mu = _gdp_mu_by_hand(epsilon, delta)
    if conversion == "direct":
        moment = tpr_lo**alpha * fpr_hi ** (1 - alpha) + (1 - tpr_lo) ** alpha * (1 - fpr_hi) ** (
            1 - alpha
        )
        expected = math.log(moment) / (alpha - 1)
        plug_in = bernoulli_renyi_divergence(alpha, 0.8, 0.1)
    else:
        expected = alpha * mu**2 / 2
        plug_in = alpha * _gdp_mu_by_hand(math.log((0.8 - delta) / 0.1), delta) ** 2 / 2
    # rel 1e-5: the Clopper–Pearson limits are moved outwards by a relative 1e-7
    # (bounds._CP_MARGIN), which the bound's sensitivity to the rates amplifies a little.
    assert est.lower_bound_ == pytest.approx(expected, rel=1e-5) and est.lower_bound_ <= expected
    assert est.divergence_ == pytest.approx(plug_in, rel=1e-8)
    assert est.certified_ == (conversion == "direct")
    assert (est.threshold_, est.side_) == (0.5, "upper")
    assert est.epsilon_ == pytest.approx(epsilon, rel=1e-6)  # the limits' 1e-7 margin, as above
    assert est.mu_ == pytest.approx(mu, rel=1e-5)


def test_split_bound_is_consistent_with_its_counts():
    X, Y, _ = make_renyi_pair("gaussian_shift", 2.0, 1.0, (600, 400), random_state=0)
    est = BernoulliTPRFPRBaseline(2.0, BETA, test_fraction=0.4, random_state=1).fit(X, Y)
    result = est.directions_["forward"]
    d = result.diagnostics
    assert result.n_test == (240, 160) and result.n_train == (360, 240)
    k_p, k_q = d.successes
    assert d.tpr_lower == pytest.approx(stats.beta.ppf(BETA / 2, k_p, 240 - k_p + 1))
    assert d.fpr_upper == pytest.approx(stats.beta.ppf(1 - BETA / 2, k_q + 1, 160 - k_q))
    assert est.lower_bound_ == pytest.approx(
        bernoulli_renyi_divergence(2.0, d.tpr_lower, d.fpr_upper)
    )
    # The certifying counts are those of the fitted threshold on the held-out samples.
    assert k_p == np.sum(X[result.test_index_p] > est.threshold_)
    assert k_q == np.sum(Y[result.test_index_q] > est.threshold_)
    assert est.side_ == "upper" and 0.0 < est.lower_bound_ < 1.0


def test_point_estimate_is_finite_with_zero_counts():
    X, Y = np.full(50, 3.0), np.zeros(50)
    est = BernoulliTPRFPRBaseline(threshold="bonferroni").fit(X, Y)
    assert math.isfinite(est.divergence_) and est.divergence_ > est.lower_bound_ > 0.0


# ------------------------------------------------------------------ directions


def test_reverse_flips_the_side():
    X, Y, _ = make_renyi_pair("gaussian_shift", 2.0, 1.0, 500, random_state=0)
    est = BernoulliTPRFPRBaseline(2.0, direction="max", threshold="bonferroni").fit(X, Y)
    assert est.thresholds_["forward"][1] == "upper"
    assert est.thresholds_["reverse"][1] == "lower"
    assert all(r.beta == BETA / 2 for r in est.directions_.values())
    assert est.lower_bound_ == max(r.lower_bound for r in est.directions_.values())
    # bonferroni is deterministic: reverse on (X, Y) is forward on (Y, X).
    reverse = BernoulliTPRFPRBaseline(2.0, direction="reverse", threshold="bonferroni").fit(X, Y)
    swapped = BernoulliTPRFPRBaseline(2.0, threshold="bonferroni").fit(Y, X)
    assert reverse.lower_bound_ == swapped.lower_bound_
    assert reverse.divergence_ == swapped.divergence_


def test_max_reports_epsilon_of_the_larger_direction():
    # Asymmetric two-valued pair: P(1) = 0.9 vs Q(1) = 0.5.
    X, Y = _two_valued(450, 500, 250, 500)
    est = BernoulliTPRFPRBaseline(2.0, direction="max", conversion="gdp", random_state=0)
    est.fit(X, Y)
    best = max(est.directions_.values(), key=lambda r: r.lower_bound)
    assert est.lower_bound_ == best.lower_bound
    assert est.mu_ == best.diagnostics.mu and est.epsilon_ == best.diagnostics.epsilon
    assert est.mu_ >= 0.0 and not est.certified_


def test_gdp_under_the_null_gives_zero():
    X, Y, _ = make_renyi_pair("gaussian_shift", 2.0, 0.0, 300, random_state=0)
    est = BernoulliTPRFPRBaseline(conversion="gdp", random_state=0).fit(X, Y)
    assert est.lower_bound_ == 0.0 and est.mu_ == 0.0 and est.epsilon_ == 0.0


# ------------------------------------------------------------------ inputs


def test_multivariate_needs_a_score_function():
    X, Y, _ = make_renyi_pair("multivariate_gaussian", 2.0, 1.0, 200, random_state=0, dimension=2)
    with pytest.raises(ValueError, match="score_function"):
        BernoulliTPRFPRBaseline().fit(X, Y)
    est = BernoulliTPRFPRBaseline(score_function=lambda a: a.sum(axis=1), random_state=0)
    assert est.fit(X, Y).lower_bound_ > 0.0
    with pytest.raises(ValueError, match="features"):
        est.score(X[:, :1], Y[:, :1])


@pytest.mark.parametrize(
    ("score_function", "match"),
    [
        (lambda a: np.full(len(a), np.nan), "NaN"),
        (lambda a: np.zeros(2), "shape"),
        (lambda a: np.full(len(a), np.inf), "infinite"),
    ],
)
def test_bad_score_function_output(score_function, match):
    with pytest.raises(ValueError, match=match):
        BernoulliTPRFPRBaseline(score_function=score_function).fit(np.arange(10.0), np.ones(10))


@pytest.mark.parametrize(
    "params",
    [
        {"conversion": "mu"},
        {"threshold": "max"},
        {"delta": 0.0},
        {"delta": 1.0},
        {"test_fraction": 0.0},
        {"score_function": 3},
        {"alpha": 0.5},
        {"direction": "both"},
    ],
)
def test_bad_parameters(params):
    with pytest.raises(ValueError, match=next(iter(params))):
        BernoulliTPRFPRBaseline(**params).fit(np.arange(10.0), np.ones(10))


def test_too_few_samples():
    with pytest.raises(ValueError, match="at least 2"):
        BernoulliTPRFPRBaseline().fit([1.0], [0.0, 1.0])
    BernoulliTPRFPRBaseline(threshold="bonferroni").fit([1.0], [0.0])


# ------------------------------------------------------------------ scikit-learn contract


def test_score_is_plug_in_with_the_fitted_threshold():
    X, Y, _ = make_renyi_pair("gaussian_shift", 2.0, 1.0, 400, random_state=0)
    X2, Y2, _ = make_renyi_pair("gaussian_shift", 2.0, 1.0, 300, random_state=1)
    est = BernoulliTPRFPRBaseline(random_state=0).fit(X, Y)
    t = est.threshold_
    expected = bernoulli_renyi_divergence(2.0, np.mean(X2 > t), np.mean(Y2 > t))
    assert est.score(X2, Y2) == pytest.approx(expected, rel=1e-12)


def test_random_state_reproduces():
    X, Y, _ = make_renyi_pair("laplace_shift", 2.0, 1.0, 300, random_state=0)
    a = BernoulliTPRFPRBaseline(random_state=5).fit(X, Y)
    b = BernoulliTPRFPRBaseline(random_state=5).fit(X, Y)
    assert (a.lower_bound_, a.divergence_, a.threshold_) == (
        b.lower_bound_,
        b.divergence_,
        b.threshold_,
    )


@pytest.mark.parametrize(
    "est",
    [
        BernoulliTPRFPRBaseline(random_state=0),
        BernoulliTPRFPRBaseline(1.5, 0.1, "max", conversion="gdp", threshold="bonferroni"),
        BernoulliTPRFPRBaseline(score_function=np.abs, delta=1e-3, random_state=2),
    ],
)
def test_get_params_clone_pickle(est):
    assert_clone_and_pickle_round_trip(est)


def test_every_estimator_accepts_a_numpy_generator_reproducibly():
    """Catches the bug where random_state=np.random.default_rng(0), documented for all four
    estimators, was refused by their parameter constraints."""
    from rdpest import DVRenyiEstimator, HoeffdingRenyiBound, MarkovRenyiBound

    X, Y, _ = make_renyi_pair("laplace_shift", 2.0, 0.3, 300, random_state=0)
    estimators = [
        lambda rs: DVRenyiEstimator(max_epochs=5, hidden_layer_sizes=(8,), random_state=rs),
        lambda rs: MarkovRenyiBound(random_state=rs),
        lambda rs: HoeffdingRenyiBound(privacy_loss_bound=5.0, random_state=rs),
        lambda rs: BernoulliTPRFPRBaseline(random_state=rs),
    ]
    for make in estimators:
        first = make(np.random.default_rng(0)).fit(X, Y)
        second = make(np.random.default_rng(0)).fit(X, Y)
        assert (first.divergence_, first.lower_bound_) == (second.divergence_, second.lower_bound_)


def test_gdp_from_rates_at_a_subnormal_false_positive_rate_is_finite():
    """Bug: ε was log of the ratio (TPR − δ)/FPR, which overflows for FPR below ~5.6e-309, and
    the μ search then failed ("could not bracket mu"), although ε = 744.44 is finite. μ is
    checked by its defining property, Dong, Roth & Su's δ(ε) at μ equal to δ (e^ε Φ(·) taken
    in logs, as e^744 overflows), to 1e-6 relative: μ is solved to about 1e-12, and δ(ε) moves
    by about μ/2 ≈ 17 times μ's relative error there."""
    epsilon, delta = math.log(1.0 - 1e-5) - math.log(5e-324), 1e-5
    result = gdp_from_rates(1.0, 5e-324, 2.0, delta)
    assert result.epsilon == pytest.approx(epsilon, rel=1e-15)
    mu = result.mu
    at_mu = stats.norm.cdf(-epsilon / mu + mu / 2) - math.exp(
        epsilon + stats.norm.logcdf(-epsilon / mu - mu / 2)
    )
    assert at_mu == pytest.approx(delta, rel=1e-6)
