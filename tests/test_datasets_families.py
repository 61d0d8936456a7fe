"""The benchmark families of issue 17: exact D_α checked against independent computations.

For student_t_shift, exponential_rate, gaussian_mixture, laplace_scale, poisson_rate and the
10-dimensional multivariate Gaussian: the solved truth equals the request; the exact D_α agrees
with a computation that shares no code with rdpest (scipy quadrature of p^α q^{1−α} from
scipy.stats densities, a closed form, a direct series, Monte Carlo); the log ratio is a difference
of scipy.stats log-densities; the samples follow the law (Kolmogorov–Smirnov, moments); bad
options are ValueErrors.
"""

import decimal
import itertools
import math
import warnings

import numpy as np
import pytest
from scipy import integrate, special, stats

from rdpest import datasets
from rdpest.stats import family_divergences as fam

NEW = ("student_t_shift", "exponential_rate", "gaussian_mixture", "laplace_scale", "poisson_rate")
ALPHAS = (1.25, 2.0, 4.0, 8.0)


def _truth(family, alpha, params):
    if family == "student_t_shift":
        return fam._student_t_shift_renyi_divergence(alpha, params["shift"], params["df"])
    if family == "exponential_rate":
        return fam._exponential_rate_renyi_divergence(alpha, params["rate"])
    if family == "gaussian_mixture":
        return fam._gaussian_mixture_renyi_divergence(alpha, params["mean"])
    if family == "laplace_scale":
        return fam._laplace_scale_renyi_divergence(alpha, params["scale"])
    return fam._poisson_rate_renyi_divergence(alpha, params["rate"])


def _laws(family, params):
    """(P, Q) as frozen scipy.stats laws; None for the mixture (no scipy law)."""
    if family == "student_t_shift":
        return stats.t(params["df"], loc=params["shift"]), stats.t(params["df"])
    if family == "exponential_rate":
        return stats.expon(scale=1.0 / params["rate"]), stats.expon()
    if family == "laplace_scale":
        return stats.laplace(scale=params["scale"]), stats.laplace()
    if family == "poisson_rate":
        return stats.poisson(params["rate"]), stats.poisson(1.0)
    return None


def _mixture_cdf(mean):
    return lambda x: 0.5 * (stats.norm.cdf(x + mean) + stats.norm.cdf(x - mean))


def _plain_quadrature(alpha, log_p, log_q, edges):
    """1/(α−1) log ∫ p^α q^{1−α} by scipy quad on the pieces between ``edges`` (may be ±inf),
    straight from the densities (no excess form, no log-space rescaling): independent of rdpest."""

    def piece(a, b):
        return integrate.quad(
            lambda x: math.exp(alpha * log_p(x) + (1 - alpha) * log_q(x)),
            a,
            b,
            epsabs=0.0,
            epsrel=1e-13,
            limit=1000,
        )[0]

    total = sum(piece(a, b) for a, b in itertools.pairwise(edges))
    return math.log(total) / (alpha - 1)


# ---------------------------------------------------------------------------------------------
# The solved truth equals the request
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("family", NEW)
@pytest.mark.parametrize("alpha", ALPHAS)
@pytest.mark.parametrize("divergence", [0.0, 0.05, 0.5, 2.0])
def test_solved_truth_equals_request(family, alpha, divergence):
    params = datasets.family_parameters(family, alpha, divergence)
    assert set(params) == set(datasets.SOLVED_KEYS[family])
    _, _, truth = datasets.make_renyi_pair(family, alpha, divergence, 5, random_state=0)
    assert truth == pytest.approx(divergence, rel=1e-9, abs=0.0)
    assert _truth(family, alpha, params) == truth
    if divergence == 0.0:  # P = Q: the solved parameter is the reference's
        free = {k: v for k, v in params.items() if k != "df"}
        assert next(iter(free.values())) in (0.0, 1.0)


@pytest.mark.parametrize("df", [3.0, 5.0, 10.0])
@pytest.mark.parametrize("alpha", ALPHAS)
def test_student_t_solves_for_several_degrees_of_freedom(df, alpha):
    params = datasets.family_parameters("student_t_shift", alpha, 1.0, df=df)
    assert params["df"] == df and params["shift"] > 0
    assert _truth("student_t_shift", alpha, params) == pytest.approx(1.0, rel=1e-9)


def test_solved_parameters_sit_on_the_documented_side():
    # exponential and Poisson rates above 1, the Laplace scale in (1, α/(α−1)).
    assert datasets.family_parameters("exponential_rate", 2.0, 1.0)["rate"] > 1.0
    assert datasets.family_parameters("poisson_rate", 2.0, 2.0)["rate"] == pytest.approx(
        1 + math.sqrt(2), rel=1e-12
    )  # (λ − 1)² = (α−1)D at α = 2
    assert 1.0 < datasets.family_parameters("laplace_scale", 4.0, 1.0)["scale"] < 4.0 / 3.0


# ---------------------------------------------------------------------------------------------
# Exact D_α against independent computations
# ---------------------------------------------------------------------------------------------

# scipy's quad is asked for 1e-13 relative accuracy on ∫ p^α q^{1−α} = e^{(α−1)D}; the error of
# D is that divided by (α−1)·D, at most about 1e-10 for the cases below; 1e-8 leaves room for
# the rounding of the scipy densities.
QUAD_REL = 1e-8


@pytest.mark.parametrize("alpha", ALPHAS)
@pytest.mark.parametrize("rate", [1.3, 4.0, 50.0])
def test_exponential_closed_form_matches_quadrature(alpha, rate):
    P, Q = stats.expon(scale=1 / rate), stats.expon()
    reference = _plain_quadrature(alpha, P.logpdf, Q.logpdf, [0.0, 1.0, 50.0, np.inf])
    assert fam._exponential_rate_renyi_divergence(alpha, rate) == pytest.approx(
        reference, rel=QUAD_REL
    )


@pytest.mark.parametrize("alpha", ALPHAS)
def test_laplace_scale_closed_form_matches_quadrature_and_its_boundary(alpha):
    boundary = alpha / (alpha - 1)
    for scale in (1.0 + 0.2 * (boundary - 1), 1.0 + 0.9 * (boundary - 1)):
        # Laplace log-densities −|x|/b − log 2b written out: scipy's laplace.logpdf is the log of
        # its pdf and returns −inf beyond |x| ≈ 745, where this integrand still has mass.
        def log_p(x, b=scale):
            return -abs(x) / b - math.log(2 * b)

        def log_q(x):
            return -abs(x) - math.log(2)

        assert log_p(3.0) == pytest.approx(stats.laplace(scale=scale).logpdf(3.0), rel=1e-13)
        # |x| ~ Exp: integrate the half line and double it (the integrand is even); it decays
        # like e^{−cx} with c = α/b + 1 − α, so e^{−60} of it is left beyond 60/c.
        decay = alpha / scale + 1 - alpha
        edges = [0.0, 1.0, 10.0, 60.0 / decay]
        reference = _plain_quadrature(alpha, log_p, log_q, sorted(set(edges)))
        reference += math.log(2.0) / (alpha - 1)
        assert fam._laplace_scale_renyi_divergence(alpha, scale) == pytest.approx(
            reference, rel=QUAD_REL
        )
        # |X| ~ Exp(rate 1/b): the same divergence as the exponential family at λ = 1/b.
        assert fam._laplace_scale_renyi_divergence(alpha, scale) == pytest.approx(
            fam._exponential_rate_renyi_divergence(alpha, 1.0 / scale), rel=1e-12
        )
    # At and beyond b = α/(α−1) the integral diverges.
    assert fam._laplace_scale_renyi_divergence(alpha, boundary * 1.001) == math.inf


@pytest.mark.parametrize("alpha", [32.01, 64.0, 256.0, 1e4])
@pytest.mark.parametrize("divergence", [0.01, 1.0, 10.0])
def test_poisson_rate_solves_at_orders_above_32(alpha, divergence):
    """Bug: every request above α = 32 was refused ("math range error"): the solver first
    evaluated the divergence at its largest rate, 2**32, and e^{α log λ} overflowed. The rate
    solved is checked against the closed form (λ^α − αλ + α − 1)/(α − 1) (van Erven & Harremoës
    2014) at 60 digits, not against the package's own evaluation."""
    rate = datasets.family_parameters("poisson_rate", alpha, divergence)["rate"]
    _, _, truth = datasets.make_renyi_pair("poisson_rate", alpha, divergence, 5, random_state=0)
    assert truth == pytest.approx(divergence, rel=1e-9)
    with decimal.localcontext() as context:
        context.prec = 60
        lam, a = decimal.Decimal(rate), decimal.Decimal(alpha)
        exact = ((a * lam.ln()).exp() - a * lam + a - 1) / (a - 1)
    assert float(exact) == pytest.approx(divergence, rel=1e-9)
    assert fam._poisson_rate_renyi_divergence(alpha, 2.0**32) == math.inf  # beyond double range


@pytest.mark.parametrize("alpha", ALPHAS)
@pytest.mark.parametrize("rate", [1.05, 2.0, 3.0])
def test_poisson_closed_form_matches_the_direct_series(alpha, rate):
    # Σ_k p(k)^α q(k)^{1−α} summed term by term in log space from scipy's pmfs, far enough that
    # the tilted law (Poisson(λ^α)) has no mass left: its mean plus 40 standard deviations.
    top = int(rate**alpha + 40 * math.sqrt(rate**alpha) + 50)
    k = np.arange(top + 1)
    terms = alpha * stats.poisson(rate).logpmf(k) + (1 - alpha) * stats.poisson(1).logpmf(k)
    reference = special.logsumexp(terms) / (alpha - 1)
    assert fam._poisson_rate_renyi_divergence(alpha, rate) == pytest.approx(reference, rel=1e-10)


@pytest.mark.parametrize("alpha", ALPHAS)
@pytest.mark.parametrize("df, shift", [(3.0, 0.4), (3.0, 2.0), (5.0, 1.0), (10.0, 8.0)])
def test_student_t_quadrature_matches_plain_quadrature(alpha, df, shift):
    # The textbook density Γ((ν+1)/2)/(Γ(ν/2) sqrt(νπ)) (1 + x²/ν)^{−(ν+1)/2}, written out with
    # math (scipy.stats' per-call overhead made this test take 15 s); checked against scipy here.
    norm = math.lgamma((df + 1) / 2) - math.lgamma(df / 2) - 0.5 * math.log(df * math.pi)

    def log_t(x):
        return norm - (df + 1) / 2 * math.log(1 + x * x / df)

    assert log_t(0.7) == pytest.approx(stats.t(df).logpdf(0.7), rel=1e-13)
    edges = [-np.inf, -100.0, 0.0, shift, alpha * shift + 10, 1e4, np.inf]
    reference = _plain_quadrature(alpha, lambda x: log_t(x - shift), log_t, edges)
    assert fam._student_t_shift_renyi_divergence(alpha, shift, df) == pytest.approx(
        reference, rel=QUAD_REL
    )


def _mixture_closed_form(alpha: int, mean: float) -> float:
    """Integer α: cosh^α = 2^{−α} Σ_k C(α,k) e^{(2k−α)y} and E_Q[e^{tZ}] = e^{t²/2} give
    E − 1 = 2^{−α} Σ_k C(α,k) expm1(((2k−α)² − α) μ²/2) (the C(α,k) 2^{−α} sum to 1)."""
    k = np.arange(alpha + 1)
    weights = special.comb(alpha, k) / 2.0**alpha
    excess = float(np.sum(weights * np.expm1(((2 * k - alpha) ** 2 - alpha) * mean**2 / 2)))
    return math.log1p(excess) / (alpha - 1)


@pytest.mark.parametrize("alpha", [2, 4, 8])
@pytest.mark.parametrize("mean", [0.05, 0.5, 1.5, 4.0])
def test_gaussian_mixture_quadrature_matches_the_integer_order_closed_form(alpha, mean):
    # The closed form loses about 1e-16/μ² relative to cancellation (1e-13 at μ = 0.05).
    assert fam._gaussian_mixture_renyi_divergence(float(alpha), mean) == pytest.approx(
        _mixture_closed_form(alpha, mean), rel=1e-9
    )


def test_gaussian_mixture_quadrature_at_a_fractional_order():
    mean, alpha = 1.2, 1.25

    def log_p(x):
        return np.logaddexp(stats.norm.logpdf(x, -mean), stats.norm.logpdf(x, mean)) - math.log(2)

    reference = _plain_quadrature(alpha, log_p, stats.norm.logpdf, [-np.inf, -3, 0, 3, np.inf])
    assert fam._gaussian_mixture_renyi_divergence(alpha, mean) == pytest.approx(
        reference, rel=QUAD_REL
    )


# Monte Carlo of E_Q[(p/q)^α] = e^{(α−1)D} from the samples and the exact log ratio: within 5
# standard errors (estimated from the same draws), which a correct pair misses with probability
# below 1e-6 under the normal approximation. Restricted to cells where e^{αL(Y)} has a finite
# variance (bounded or light-tailed privacy loss); the seed is fixed.
@pytest.mark.parametrize(
    "family, alpha, divergence",
    [
        ("student_t_shift", 2.0, 0.5),
        ("student_t_shift", 4.0, 1.0),
        ("exponential_rate", 8.0, 0.5),
        ("gaussian_mixture", 1.25, 0.5),
        ("gaussian_mixture", 2.0, 0.3),
        ("poisson_rate", 4.0, 0.5),
        ("laplace_scale", 1.25, 0.05),  # Var finite: 2α(1 − 1/b) < 1
    ],
)
def test_monte_carlo_renyi_moment_matches_the_truth(family, alpha, divergence):
    n = 200_000
    params = datasets.family_parameters(family, alpha, divergence)
    _, Y, truth = datasets.make_renyi_pair(family, alpha, divergence, (1, n), random_state=17)
    z = np.exp(alpha * datasets.log_likelihood_ratio(family, params)(Y))
    standard_error = z.std(ddof=1) / math.sqrt(n)
    assert abs(z.mean() - math.exp((alpha - 1) * truth)) < 5 * standard_error


# ---------------------------------------------------------------------------------------------
# Log ratios and samples
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("family", NEW)
@pytest.mark.parametrize("alpha, divergence", [(1.25, 0.3), (8.0, 2.0)])
def test_log_ratio_is_the_difference_of_scipy_log_densities(family, alpha, divergence):
    params = datasets.family_parameters(family, alpha, divergence)
    X, Y, _ = datasets.make_renyi_pair(family, alpha, divergence, 300, random_state=3)
    x = np.concatenate([X, Y])
    laws = _laws(family, params)
    if laws is None:
        mu = params["mean"]
        log_p = np.logaddexp(stats.norm.logpdf(x, -mu), stats.norm.logpdf(x, mu)) - math.log(2)
        reference = log_p - stats.norm.logpdf(x)
    elif family == "poisson_rate":
        reference = laws[0].logpmf(x) - laws[1].logpmf(x)
    else:
        reference = laws[0].logpdf(x) - laws[1].logpdf(x)
    loss = datasets.log_likelihood_ratio(family, params)(x)
    np.testing.assert_allclose(loss, reference, rtol=1e-9, atol=1e-9)


# Kolmogorov–Smirnov against the scipy law: a correct sampler gives p > 1e-4 with probability
# 1 − 1e-4 per test; the seeds are fixed, so the test is deterministic.
@pytest.mark.parametrize(
    "family, options",
    [
        ("student_t_shift", {"df": 3.0}),
        ("student_t_shift", {"df": 5.0}),
        ("student_t_shift", {"df": 10.0}),
        ("exponential_rate", {}),
        ("gaussian_mixture", {}),
        ("laplace_scale", {}),
    ],
)
def test_continuous_samples_follow_their_laws(family, options):
    params = datasets.family_parameters(family, 2.0, 0.8, **options)
    X, Y, _ = datasets.make_renyi_pair(family, 2.0, 0.8, 5000, random_state=23, **options)
    laws = _laws(family, params)
    if laws is None:
        cdf_p, cdf_q = _mixture_cdf(params["mean"]), stats.norm.cdf
    else:
        cdf_p, cdf_q = laws[0].cdf, laws[1].cdf
    assert stats.kstest(X, cdf_p).pvalue > 1e-4
    assert stats.kstest(Y, cdf_q).pvalue > 1e-4


def test_poisson_samples_are_counts_with_the_right_mean_and_variance():
    # Integer counts; mean λ within 5 standard errors sqrt(λ/n), and the sample variance within
    # 5 standard errors of λ (Var of (X−λ)² is 2λ² + λ for a Poisson law).
    n = 20_000
    rate = datasets.family_parameters("poisson_rate", 2.0, 1.0)["rate"]
    X, Y, _ = datasets.make_renyi_pair("poisson_rate", 2.0, 1.0, n, random_state=29)
    assert X.dtype == np.float64 and np.all(X == np.round(X)) and X.min() >= 0
    for sample, lam in ((X, rate), (Y, 1.0)):
        assert abs(sample.mean() - lam) < 5 * math.sqrt(lam / n)
        assert abs(sample.var() - lam) < 5 * math.sqrt((2 * lam**2 + lam) / n)
    # Chi-square goodness of fit on the cells {0, …, 5, >= 6} of Poisson(λ).
    cells = np.minimum(X.astype(int), 6)
    observed = np.bincount(cells, minlength=7)
    expected = np.append(stats.poisson(rate).pmf(np.arange(6)), stats.poisson(rate).sf(5)) * n
    assert stats.chisquare(observed, expected).pvalue > 1e-4


# ---------------------------------------------------------------------------------------------
# Multivariate Gaussian in 10 dimensions
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("alpha", ALPHAS)
@pytest.mark.parametrize("correlation", [0.3, -0.1])
def test_multivariate_gaussian_in_ten_dimensions(alpha, correlation):
    options = {"dimension": 10, "correlation": correlation}
    params = datasets.family_parameters("multivariate_gaussian", alpha, 1.5, **options)
    mean, cov = params["mean"], params["covariance"]
    assert mean.shape == (10,) and cov.shape == (10, 10)
    # Equal covariances: D = α/2 · Δᵀ Σ⁻¹ Δ, computed here with a generic solve.
    assert alpha / 2 * mean @ np.linalg.solve(cov, mean) == pytest.approx(1.5, rel=1e-9)
    X, Y, truth = datasets.make_renyi_pair(
        "multivariate_gaussian", alpha, 1.5, 300, random_state=31, **options
    )
    assert X.shape == (300, 10) and truth == pytest.approx(1.5, rel=1e-9)
    x = np.concatenate([X, Y])
    reference = stats.multivariate_normal(mean, cov).logpdf(x) - stats.multivariate_normal(
        np.zeros(10), cov
    ).logpdf(x)
    loss = datasets.log_likelihood_ratio("multivariate_gaussian", params)(x)
    np.testing.assert_allclose(loss, reference, rtol=1e-9, atol=1e-9)


def test_multivariate_gaussian_ten_dimensional_samples():
    # Means within 5 standard errors (unit variances); covariance entries within 5·sqrt(2/n)
    # (Var(X_i X_j) = 1 + ρ² <= 2 for unit variances).
    n = 20_000
    options = {"dimension": 10, "correlation": 0.3}
    params = datasets.family_parameters("multivariate_gaussian", 2.0, 1.0, **options)
    X, Y, _ = datasets.make_renyi_pair(
        "multivariate_gaussian", 2.0, 1.0, n, random_state=37, **options
    )
    assert np.all(np.abs(X.mean(axis=0) - params["mean"]) < 5 / math.sqrt(n))
    assert np.all(np.abs(Y.mean(axis=0)) < 5 / math.sqrt(n))
    assert np.all(np.abs(np.cov(X, rowvar=False) - params["covariance"]) < 5 * math.sqrt(2 / n))


# ---------------------------------------------------------------------------------------------
# Bad input
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "family, options, match",
    [
        ("student_t_shift", {"df": 0.0}, "df"),
        ("student_t_shift", {"df": -3.0}, "df"),
        ("student_t_shift", {"df": math.nan}, "df"),
        ("student_t_shift", {"df": 0.5}, "df"),
        ("student_t_shift", {"df": 1e5}, "df"),
        ("student_t_shift", {"df": "3"}, "df"),
        ("student_t_shift", {"dof": 3.0}, "dof"),
        ("exponential_rate", {"df": 3.0}, "df"),
        ("gaussian_mixture", {"weight": 0.3}, "weight"),
        ("laplace_scale", {"scale": 2.0}, "scale"),
        ("poisson_rate", {"rate": 2.0}, "rate"),
    ],
)
def test_bad_options_are_value_errors(family, options, match):
    with pytest.raises(ValueError, match=match):
        datasets.make_renyi_pair(family, 2.0, 1.0, 10, **options)


@pytest.mark.parametrize(
    "family, alpha, divergence, match",
    [
        ("laplace_scale", 8.0, 5.0, "not reachable"),  # past its infinite boundary's reach
        ("laplace_scale", 2.0, 30.0, "not reachable"),
        ("poisson_rate", 1.25, 1e15, "too large"),  # a rate beyond 2**32
        ("student_t_shift", 2.0, 1000.0, "too large"),  # a shift beyond 1000
        ("gaussian_mixture", 2.0, 1e20, "too large"),  # means beyond 2**32
        ("exponential_rate", 2.0, 1e4, "too large"),  # a rate beyond 1e300
        ("exponential_rate", 2.0, 1e-14, "not reachable"),  # λ − 1 below float resolution
        # An overflow inside the solver was passed on as "math range error", naming nothing
        ("student_t_shift", 1e6, 10.0, "overflows the float range"),
        ("subsampled_gaussian", 1e6, 10.0, "overflows the float range"),
    ],
)
def test_unreachable_divergences_are_value_errors(family, alpha, divergence, match):
    with pytest.raises(ValueError, match=match):
        datasets.family_parameters(family, alpha, divergence)


@pytest.mark.parametrize(
    "family, params, match",
    [
        ("student_t_shift", {"df": 0.0, "shift": 1.0}, "df"),
        ("student_t_shift", {"shift": 1.0}, "params"),
        ("exponential_rate", {"rate": -1.0}, "rate"),
        ("gaussian_mixture", {"mean": math.inf}, "mean"),
        ("laplace_scale", {"scale": 0.0}, "scale"),
        ("poisson_rate", {"rate": math.nan}, "rate"),
        # The multivariate ratio took its parameters unchecked: a NaN mean gave NaN ratios, an
        # indefinite covariance a meaningless one (0.333), a singular one numpy's LinAlgError.
        ("multivariate_gaussian", {"mean": [math.nan, 0.0], "covariance": np.eye(2)}, "mean"),
        ("multivariate_gaussian", {"mean": [1.0, 1.0], "covariance": [[1, 2], [2, 1]]}, "definite"),
        ("multivariate_gaussian", {"mean": [1.0, 1.0], "covariance": [[1, 1], [1, 1]]}, "definite"),
        ("multivariate_gaussian", {"mean": [1.0, 1.0], "covariance": [[1, 0.5], [0, 1]]}, "symm"),
        (
            "multivariate_gaussian",
            {"mean": [1.0, 1.0], "covariance": [[math.inf, 0], [0, 1]]},
            "cov",
        ),
        ("multivariate_gaussian", {"mean": [1.0] * 3, "covariance": np.eye(2)}, "shape"),
    ],
)
def test_log_ratio_bad_params(family, params, match):
    with pytest.raises(ValueError, match=match):
        datasets.log_likelihood_ratio(family, params)


def test_log_ratios_far_in_the_tails_neither_warn_nor_lose_the_value():
    """x² overflowed beyond |x| = 1e150: the Student-t ratio came out 0 (its value is about
    (ν + 1)μ/x) with an overflow warning, and the Gaussian scale ratio warned on its correct inf.
    The reference is the same fraction's leading term, −(ν+1)/2 · μ(μ − 2x)/x² ≈ (ν + 1)μ/x,
    exact to O(1/x) relative there."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        t = datasets.log_likelihood_ratio("student_t_shift", {"df": 3.0, "shift": 1.5})
        x = np.array([1e200, -1e300, 1e151, 3.0])
        got = t(x)
        np.testing.assert_allclose(got[:3], 4.0 * 1.5 / x[:3], rtol=1e-12)
        assert got[3] == t(np.array([3.0]))[0]  # below 1e150, the formula as before
        scale = datasets.log_likelihood_ratio("gaussian_scale", {"std": 2.0})
        assert scale(np.array([1e200]))[0] == math.inf
