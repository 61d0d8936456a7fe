"""Conversions between privacy notions: RDP, (ε, δ)-DP, μ-GDP, and the RDP claim of DP-SGD.

Pure functions, natural logarithms, RDP in the standard scale of Mironov (2017): a mechanism is
(α, ε_α)-RDP when D_α(M(D)‖M(D′)) ≤ ε_α with D_α = 1/(α−1) · log E_Q[(p/q)^α].

- μ-GDP → RDP: μ-GDP implies (α, αμ²/2)-RDP for every α > 1 (Bun & Steinke 2016, Prop. 1.6 for
  the Gaussian pair; Dong, Roth & Su 2022, "Gaussian differential privacy", JRSS-B).
- μ-GDP ↔ (ε, δ)-DP: the privacy profile δ(ε) = Φ(−ε/μ + μ/2) − e^ε Φ(−ε/μ − μ/2) (Dong, Roth &
  Su 2022, Cor. 2.13), and its inverses in ε and in μ. The inverse in μ is the (ε, δ) → μ-GDP step
  of the prior black-box DP-SGD audit (Annamalai & De Cristofaro, NeurIPS 2024), which Kim,
  Varshney & Alabi (2026) compare against; it is exact only for Gaussian trade-off curves.
- RDP → (ε, δ)-DP: Mironov (2017, Prop. 3) and the tighter conversion of Balle et al. (2020,
  "Hypothesis testing interpretations and Rényi differential privacy", Thm 21), also in Canonne,
  Kamath & Steinke (2020). Opacus's ``get_privacy_spent`` implements the latter.
- DP-SGD: the RDP of the subsampled Gaussian mechanism composed over T steps, through Opacus's RDP
  analysis (Mironov, Talwar & Zhang 2019); at sampling rate 1 it is the composition of T Gaussian
  mechanisms, ε_α = Tα/(2σ²), i.e. √T/σ-GDP (Dong, Roth & Su 2022, Cor. 3.3).

Every function validates its arguments and raises ``ValueError`` naming the offending argument.

Examples
--------
>>> mu = gdp_mu_of_dpsgd(noise_multiplier=2.0, steps=4)       # full-batch DP-SGD, √4/2 = 1
>>> gdp_to_rdp(mu, alpha=2.0)
1.0
>>> round(gdp_epsilon(delta=1e-5, mu=mu), 4)
4.3772
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable

import numpy as np
from numpy.typing import ArrayLike
from scipy import optimize, special

from rdpest.utils.validation import (
    check_alpha,
    check_beta,
    check_finite_array,
    check_positive,
    check_real,
    check_sample_rate,
    check_steps,
)

__all__ = [
    "RDP_TO_DP_METHODS",
    "dpsgd_epsilon_alpha",
    "gdp_delta",
    "gdp_epsilon",
    "gdp_mu",
    "gdp_mu_of_dpsgd",
    "gdp_to_rdp",
    "noise_multiplier_for_epsilon_alpha",
    "rdp_of_gaussian_mechanism",
    "rdp_to_dp",
]

# Root finders work on a log scale and stop at this absolute tolerance in the log (i.e. relative
# precision ~1e-13 on μ or σ); far below anything a privacy claim resolves.
_LOG_XTOL = 1e-13
# Geometric bracket searches double or halve at most this many times: 2^±1100 spans every positive
# double, so running out means the function is not monotone as assumed (or is NaN).
_MAX_BRACKET_STEPS = 1100
# Floor for log-δ differences handed to brentq: -inf (δ underflowing to 0) would break its
# interpolation, and any value this negative carries the same sign information.
_LOG_FLOOR = -1e6
# Below this value of a = −ε/μ + μ/2, δ(ε) is computed through the Mills ratio (no overflow of
# erfcx(−a/√2) for a < ~37); above it, Φ(a) > 1 − 3e-7 and the log-Φ form is accurate.
_MILLS_SWITCH = 5.0
_SQRT_HALF_PI = math.sqrt(math.pi / 2.0)
# 16-point Gauss–Legendre rule on [-1, 1] for the Mills-ratio integral of _log_gdp_delta.
_GL_NODES, _GL_WEIGHTS = np.polynomial.legendre.leggauss(16)


# --------------------------------------------------------------------------------------------
# Argument checks specific to this module (the generic ones live in rdpest.utils.validation)
# --------------------------------------------------------------------------------------------


def _as_scalar_or_array(x):
    """Unwrap 0-d numpy arrays so that they pass the scalar checks."""
    if isinstance(x, np.ndarray) and x.ndim == 0:
        return x[()]
    return x


# --------------------------------------------------------------------------------------------
# Gaussian mechanism and μ-GDP
# --------------------------------------------------------------------------------------------


def rdp_of_gaussian_mechanism(alpha: float, sensitivity: float, noise_std: float) -> float:
    """Rényi DP of the Gaussian mechanism: ``alpha * sensitivity**2 / (2 * noise_std**2)``.

    Parameters
    ----------
    alpha : float
        Rényi order, > 1.
    sensitivity : float
        L2 sensitivity Δ of the released function, >= 0.
    noise_std : float
        Standard deviation σ of the added Gaussian noise, > 0.

    Returns
    -------
    float
        ε_α such that the mechanism is (α, ε_α)-RDP; it equals D_α(N(0, σ²)‖N(Δ, σ²)).

    Examples
    --------
    >>> rdp_of_gaussian_mechanism(alpha=2.0, sensitivity=1.0, noise_std=0.5)
    4.0
    """
    alpha = check_alpha(alpha)
    sensitivity = check_positive(sensitivity, "sensitivity", allow_zero=True)
    noise_std = check_positive(noise_std, "noise_std")
    # Mironov (2017), "Rényi differential privacy", Table II (Gaussian mechanism): α Δ² / (2σ²).
    # Written with a ratio so that extreme inputs give inf rather than an OverflowError.
    ratio = sensitivity / noise_std
    return alpha * ratio * ratio / 2.0


def gdp_to_rdp(mu: float, alpha: float) -> float:
    """RDP implied by μ-GDP: ``alpha * mu**2 / 2``.

    Parameters
    ----------
    mu : float
        GDP parameter μ >= 0.
    alpha : float
        Rényi order, > 1.

    Returns
    -------
    float
        ε_α such that every μ-GDP mechanism is (α, ε_α)-RDP (the Rényi divergence of the
        Gaussian pair N(0, 1), N(μ, 1), which is the worst case for μ-GDP).

    Examples
    --------
    >>> gdp_to_rdp(mu=2.0, alpha=2.0)
    4.0
    """
    mu = check_positive(mu, "mu", allow_zero=True)
    alpha = check_alpha(alpha)
    # Dong, Roth & Su (2022); Bun & Steinke (2016), Prop. 1.6: μ-GDP ⇒ (α, αμ²/2)-RDP.
    return alpha * mu * mu / 2.0


def _log1mexp(r: float) -> float:
    """log(1 - e^r) for r < 0, accurate near 0 and for very negative r (Mächler 2012)."""
    if r > -math.log(2.0):
        return math.log(-math.expm1(r))
    return math.log1p(-math.exp(r))


def _mills_ratio(t: np.ndarray | float) -> np.ndarray | float:
    """Mills ratio R(t) = Φ(−t)/φ(t) = √(π/2) erfcx(t/√2), without overflow for t >= 0."""
    return _SQRT_HALF_PI * special.erfcx(np.asarray(t) / math.sqrt(2.0))


def _log_gdp_delta_ndtr(epsilon: float, mu: float) -> float:
    """log δ(ε) from log Φ: accurate when Φ(a) is not small (a = −ε/μ + μ/2 large)."""
    # δ = Φ(a) · (1 − exp(ε + log Φ(b) − log Φ(a))) so that neither e^ε nor a vanishing normal
    # tail overflows or underflows.
    a = -epsilon / mu + mu / 2.0
    b = a - mu
    log_phi_a = float(special.log_ndtr(a))
    log_phi_b = float(special.log_ndtr(b))
    if log_phi_a == -math.inf:
        return -math.inf
    if log_phi_b == -math.inf:
        return log_phi_a
    r = epsilon + log_phi_b - log_phi_a
    # r <= 0 in exact arithmetic (δ >= 0); rounding may push it to or above 0 when δ ≈ 0.
    if r >= 0.0:
        return -math.inf
    return log_phi_a + _log1mexp(r)


def _log_gdp_delta(epsilon: float, mu: float) -> float:
    """log δ(ε) of μ-GDP for μ > 0, accurate to ~1e-12 relative in δ; may be -inf (δ = 0)."""
    if epsilon == 0.0:
        # δ(0) = Φ(μ/2) − Φ(−μ/2) = erf(μ / (2√2)): exact, with no cancellation at small μ.
        value = float(special.erf(mu / (2.0 * math.sqrt(2.0))))
        return math.log(value) if value > 0.0 else -math.inf
    # Dong, Roth & Su (2022), Cor. 2.13: δ(ε) = Φ(a) − e^ε Φ(b), a = −ε/μ + μ/2, b = a − μ.
    a = -epsilon / mu + mu / 2.0
    if a >= _MILLS_SWITCH:
        return _log_gdp_delta_ndtr(epsilon, mu)
    # Since e^ε φ(b) = φ(a) exactly, δ = φ(a) · (R(−a) − R(−b)) with R the Mills ratio, and
    # R(y) − R(y + μ) = ∫_y^{y+μ} (1 − t R(t)) dt because R′(t) = t R(t) − 1. For small μ the
    # integral (Gauss–Legendre; the integrand is entire and smooth) avoids the cancellation that
    # costs the log-Φ form up to 1e-3 relative accuracy at μ = 1e-8.
    log_phi_a = -0.5 * a * a - 0.5 * math.log(2.0 * math.pi)
    if log_phi_a == -math.inf:
        return -math.inf
    y = -a
    if mu < 1.0:
        t = y + 0.5 * mu * (_GL_NODES + 1.0)
        difference = 0.5 * mu * float(np.dot(_GL_WEIGHTS, 1.0 - t * _mills_ratio(t)))
    else:
        difference = float(_mills_ratio(y) - _mills_ratio(y + mu))
    if not (difference > 0.0 and math.isfinite(difference)):
        # Far in the tail (|a| > ~1e4) the integrand loses all digits; δ underflows there anyway.
        return _log_gdp_delta_ndtr(epsilon, mu)
    return log_phi_a + math.log(difference)


def gdp_delta(epsilon: float, mu: float) -> float:
    """Privacy profile of μ-GDP: the smallest δ such that μ-GDP implies (ε, δ)-DP.

    ``δ(ε) = Φ(−ε/μ + μ/2) − e^ε Φ(−ε/μ − μ/2)``, computed in log space so that it is accurate
    and finite for large ε and μ.

    Parameters
    ----------
    epsilon : float
        Any finite real ε (negative values are allowed: then δ >= 1 − e^ε).
    mu : float
        GDP parameter μ >= 0. At μ = 0 (identical distributions) δ(ε) = max(0, 1 − e^ε), the
        limit of the formula.

    Returns
    -------
    float
        δ in [0, 1], decreasing in ε and increasing in μ.

    Examples
    --------
    >>> round(gdp_delta(epsilon=1.0, mu=1.0), 6)
    0.126937
    """
    epsilon = check_real(epsilon, "epsilon")
    mu = check_positive(mu, "mu", allow_zero=True)
    if mu == 0.0:
        return max(0.0, -math.expm1(epsilon))
    log_delta = _log_gdp_delta(epsilon, mu)
    return min(1.0, max(0.0, math.exp(log_delta)))


def gdp_epsilon(delta: float, mu: float) -> float:
    """Smallest ε >= 0 such that μ-GDP implies (ε, δ)-DP (inverse of :func:`gdp_delta` in ε).

    Parameters
    ----------
    delta : float
        Target δ in (0, 1).
    mu : float
        GDP parameter μ >= 0.

    Returns
    -------
    float
        ε >= 0 with ``gdp_delta(ε, mu) == delta``, or 0.0 when ``delta >= gdp_delta(0, mu)``
        (the guarantee already holds at ε = 0).

    Examples
    --------
    >>> round(gdp_epsilon(delta=1e-5, mu=1.0), 4)
    4.3772
    >>> gdp_epsilon(delta=0.5, mu=0.1)
    0.0
    """
    delta = check_beta(delta, "delta")
    mu = check_positive(mu, "mu", allow_zero=True)
    if mu == 0.0:
        return 0.0
    log_target = math.log(delta)

    # δ is decreasing in ε (Dong, Roth & Su 2022, Cor. 2.13). The search runs over s = ε/μ, on
    # which log δ has slope ~s rather than ~ε/μ²: an absolute tolerance then suits every μ.
    def excess(scaled_eps: float) -> float:
        return max(_log_gdp_delta(mu * scaled_eps, mu) - log_target, _LOG_FLOOR)

    if excess(0.0) <= 0.0:
        return 0.0
    # δ(ε) <= Φ(−ε/μ + μ/2), which equals δ at ε/μ = μ/2 − Φ⁻¹(δ) > 0: a valid upper bracket.
    upper = mu / 2.0 - float(special.ndtri(delta))
    for _ in range(_MAX_BRACKET_STEPS):
        if excess(upper) <= 0.0:
            break
        upper *= 2.0  # only rounding can get here
    else:  # pragma: no cover - unreachable for a monotone profile
        raise RuntimeError("could not bracket epsilon in gdp_epsilon")
    if excess(upper) == 0.0:
        return mu * upper
    return mu * float(optimize.brentq(excess, 0.0, upper, xtol=_LOG_XTOL))


def gdp_mu(epsilon: float, delta: float) -> float:
    """The μ whose GDP privacy profile passes through (ε, δ): inverse of :func:`gdp_delta` in μ.

    This is the (ε, δ) → μ-GDP step of Annamalai & De Cristofaro (NeurIPS 2024). It reads an
    (ε, δ) pair as a point of a Gaussian trade-off curve, so the μ it returns (and any RDP derived
    from it with :func:`gdp_to_rdp`) is valid only under that assumption; it is not a certificate.

    Parameters
    ----------
    epsilon : float
        ε >= 0.
    delta : float
        δ in (0, 1).

    Returns
    -------
    float
        μ > 0 with ``gdp_delta(epsilon, μ) == delta``. δ(ε, μ) increases from 0 (μ → 0) to 1
        (μ → ∞) for every ε >= 0, so the root exists and is positive for every valid input.

    Examples
    --------
    >>> epsilon = gdp_epsilon(delta=1e-5, mu=1.5)
    >>> round(gdp_mu(epsilon, delta=1e-5), 10)
    1.5
    """
    epsilon = check_positive(epsilon, "epsilon", allow_zero=True)
    delta = check_beta(delta, "delta")
    if epsilon == 0.0:
        # δ(0, μ) = erf(μ / (2√2)), inverted exactly.
        return float(2.0 * math.sqrt(2.0) * special.erfinv(delta))
    log_target = math.log(delta)

    def excess(log_mu: float) -> float:
        return max(_log_gdp_delta(epsilon, math.exp(log_mu)) - log_target, _LOG_FLOOR)

    # δ(ε, μ) <= Φ(−ε/μ + μ/2) <= δ as long as μ²/2 − zμ − ε <= 0 with z = Φ⁻¹(δ), i.e. up to the
    # positive root z + sqrt(z² + 2ε) (written without cancellation for z < 0): a lower bracket.
    z = float(special.ndtri(delta))
    root = math.sqrt(z * z + 2.0 * epsilon)
    lower = 2.0 * epsilon / (root - z) if z < 0.0 else z + root
    # δ(ε, μ) <= δ(0, μ) for ε >= 0, so the exact root at ε = 0 is a lower bracket as well.
    lower = max(lower, float(2.0 * math.sqrt(2.0) * special.erfinv(delta)))
    log_lower = math.log(lower)
    log_upper = log_lower
    for _ in range(_MAX_BRACKET_STEPS):
        if excess(log_upper) >= 0.0:
            break
        log_lower = log_upper
        log_upper += math.log(2.0)
    else:  # pragma: no cover - unreachable for a monotone profile
        raise RuntimeError("could not bracket mu in gdp_mu")
    if excess(log_upper) == 0.0:
        return math.exp(log_upper)
    if excess(log_lower) >= 0.0:  # rounding at the analytic bound: it is the root
        return math.exp(log_lower)
    return math.exp(optimize.brentq(excess, log_lower, log_upper, xtol=_LOG_XTOL))


# --------------------------------------------------------------------------------------------
# RDP → (ε, δ)-DP
# --------------------------------------------------------------------------------------------


def _mironov_epsilon(epsilon_alpha: np.ndarray, alpha: np.ndarray, delta: float) -> np.ndarray:
    # Mironov (2017), Prop. 3: (α, ε_α)-RDP ⇒ (ε_α + log(1/δ)/(α−1), δ)-DP.
    return epsilon_alpha + math.log(1.0 / delta) / (alpha - 1.0)


def _balle_epsilon(epsilon_alpha: np.ndarray, alpha: np.ndarray, delta: float) -> np.ndarray:
    # Balle, Barthe, Gaboardi, Hsu & Sato (2020), Thm 21; Canonne, Kamath & Steinke (2020):
    # ε = ε_α + log((α−1)/α) − (log δ + log α)/(α−1). Smaller than Mironov's by
    # log(α/(α−1)) + log(α)/(α−1) > 0 at every α > 1.
    return (
        epsilon_alpha
        + np.log((alpha - 1.0) / alpha)
        - (math.log(delta) + np.log(alpha)) / (alpha - 1.0)
    )


# Registry by name: later code (and the CLI) may list the available conversions.
_RDP_TO_DP: dict[str, Callable[[np.ndarray, np.ndarray, float], np.ndarray]] = {
    "balle": _balle_epsilon,
    "mironov": _mironov_epsilon,
}
#: Names accepted by ``method`` of :func:`rdp_to_dp`.
RDP_TO_DP_METHODS = tuple(_RDP_TO_DP)


def _rdp_curve(epsilon_alpha, alpha) -> tuple[np.ndarray, np.ndarray]:
    """Validate matching scalars or 1-D arrays of RDP values and orders."""
    epsilon_alpha = _as_scalar_or_array(epsilon_alpha)
    alpha = _as_scalar_or_array(alpha)
    if np.ndim(epsilon_alpha) == 0 and np.ndim(alpha) == 0:
        eps = check_positive(epsilon_alpha, "epsilon_alpha", allow_zero=True)
        return np.array([eps]), np.array([check_alpha(alpha)])
    eps = check_finite_array(epsilon_alpha, "epsilon_alpha")
    orders = check_finite_array(alpha, "alpha")
    if eps.shape != orders.shape:
        raise ValueError(
            "epsilon_alpha and alpha must have the same length (one RDP value per order), "
            f"got shapes {eps.shape} and {orders.shape}"
        )
    if np.any(eps < 0.0):
        raise ValueError(f"epsilon_alpha must be >= 0, got minimum {eps.min()!r}")
    if np.any(orders <= 1.0):
        raise ValueError(f"alpha must be > 1 (Rényi orders), got minimum {orders.min()!r}")
    return eps, orders


def rdp_to_dp(
    epsilon_alpha: float | ArrayLike,
    alpha: float | ArrayLike,
    delta: float,
    method: str = "balle",
    *,
    return_order: bool = False,
) -> float | tuple[float, float]:
    """(ε, δ)-DP implied by Rényi DP, minimised over the given orders.

    Parameters
    ----------
    epsilon_alpha : float or array-like of shape (k,)
        RDP values ε_α >= 0, one per order (finite: drop orders with infinite RDP first).
    alpha : float or array-like of shape (k,)
        Rényi orders, each > 1, matching ``epsilon_alpha``.
    delta : float
        Target δ in (0, 1).
    method : {"balle", "mironov"}, default "balle"
        ``"mironov"``: ε = ε_α + log(1/δ)/(α−1) (Mironov 2017, Prop. 3).
        ``"balle"``: ε = ε_α + log((α−1)/α) − (log δ + log α)/(α−1) (Balle et al. 2020,
        Thm 21), always at least as small; it is what Opacus's ``get_privacy_spent`` computes.
    return_order : bool, default False
        If True, also return the order attaining the minimum.

    Returns
    -------
    float or (float, float)
        ε >= 0 (the "balle" value is clipped below at 0, where the conversion is vacuous), and
        with ``return_order`` the minimising order α.

    Examples
    --------
    >>> round(rdp_to_dp(1.0, 2.0, delta=1e-5, method="mironov"), 4)
    12.5129
    >>> eps, order = rdp_to_dp([0.5, 1.0, 2.0], [2.0, 4.0, 8.0], delta=1e-5, return_order=True)
    >>> round(eps, 4), order
    (3.2141, 8.0)
    """
    delta = check_beta(delta, "delta")
    if method not in _RDP_TO_DP:
        raise ValueError(f"method must be one of {RDP_TO_DP_METHODS}, got {method!r}")
    eps_alpha, orders = _rdp_curve(epsilon_alpha, alpha)
    epsilons = _RDP_TO_DP[method](eps_alpha, orders, delta)
    best = int(np.argmin(epsilons))
    epsilon = max(0.0, float(epsilons[best]))
    if return_order:
        return epsilon, float(orders[best])
    return epsilon


# --------------------------------------------------------------------------------------------
# DP-SGD
# --------------------------------------------------------------------------------------------


def _opacus_epsilon_alpha(
    noise_multiplier: float, sample_rate: float, steps: int, alpha: float
) -> float:
    # Imported here: opacus imports torch, which costs seconds and is not needed by the rest of
    # this module.
    from opacus.accountants.analysis.rdp import compute_rdp

    # Opacus's RDP analysis of the sampled Gaussian mechanism (Mironov, Talwar & Zhang 2019,
    # "Rényi differential privacy of the sampled Gaussian mechanism", Sec. 3.3), composed over
    # `steps` by additivity of RDP (Mironov 2017, Prop. 1).
    try:
        rdp = compute_rdp(
            q=sample_rate, noise_multiplier=noise_multiplier, steps=steps, orders=alpha
        )
    except (OverflowError, ZeroDivisionError):
        # σ so small that σ² underflows (or a term overflows): no privacy at all.
        return math.inf
    return float(rdp)


def dpsgd_epsilon_alpha(
    noise_multiplier: float, sample_rate: float, steps: int, alpha: float
) -> float:
    """The RDP ε_α claimed for DP-SGD by Opacus's RDP accountant.

    Parameters
    ----------
    noise_multiplier : float
        σ, the noise standard deviation divided by the clipping norm, > 0.
    sample_rate : float
        Poisson sampling rate q in (0, 1]; 1 is full-batch training.
    steps : int
        Number of noisy gradient steps T >= 1.
    alpha : float
        Rényi order, > 1 (fractional orders are supported).

    Returns
    -------
    float
        ε_α of T compositions of the sampled Gaussian mechanism; at q = 1 it is Tα/(2σ²).

    Examples
    --------
    >>> dpsgd_epsilon_alpha(noise_multiplier=2.0, sample_rate=1.0, steps=8, alpha=2.0)
    2.0
    >>> round(dpsgd_epsilon_alpha(noise_multiplier=1.0, sample_rate=0.01, steps=100, alpha=2.0), 4)
    0.0172
    """
    noise_multiplier = check_positive(noise_multiplier, "noise_multiplier")
    sample_rate = check_sample_rate(sample_rate)
    steps = check_steps(steps)
    alpha = check_alpha(alpha)
    return _opacus_epsilon_alpha(noise_multiplier, sample_rate, steps, alpha)


def noise_multiplier_for_epsilon_alpha(
    epsilon_alpha: float, sample_rate: float, steps: int, alpha: float
) -> float:
    """The noise multiplier σ at which DP-SGD is claimed to be (α, ε_α)-RDP.

    Inverse of :func:`dpsgd_epsilon_alpha` in σ: closed form √(Tα/(2ε_α)) at sample rate 1,
    otherwise a root search (ε_α is decreasing in σ).

    Parameters
    ----------
    epsilon_alpha : float
        Target ε_α > 0.
    sample_rate : float
        Poisson sampling rate q in (0, 1].
    steps : int
        Number of steps T >= 1.
    alpha : float
        Rényi order, > 1.

    Returns
    -------
    float
        σ > 0 with ``dpsgd_epsilon_alpha(σ, sample_rate, steps, alpha) == epsilon_alpha``.

    Examples
    --------
    >>> noise_multiplier_for_epsilon_alpha(epsilon_alpha=2.0, sample_rate=1.0, steps=8, alpha=2.0)
    2.0
    >>> sigma = noise_multiplier_for_epsilon_alpha(1.0, sample_rate=0.1, steps=50, alpha=4.0)
    >>> round(dpsgd_epsilon_alpha(sigma, 0.1, 50, 4.0), 8)
    1.0
    """
    epsilon_alpha = check_positive(epsilon_alpha, "epsilon_alpha")
    sample_rate = check_sample_rate(sample_rate)
    steps = check_steps(steps)
    alpha = check_alpha(alpha)
    # At q = 1, T compositions of the Gaussian mechanism: ε_α = Tα/(2σ²) (Mironov 2017, Table II
    # and Prop. 1).
    full_batch_sigma = math.sqrt(steps * alpha / (2.0 * epsilon_alpha))
    if sample_rate == 1.0:
        return full_batch_sigma

    def excess(log_sigma: float) -> float:
        sigma = math.exp(log_sigma)
        return _opacus_epsilon_alpha(sigma, sample_rate, steps, alpha) - epsilon_alpha

    # Subsampling only reduces ε_α, so the full-batch σ is an upper bracket; halve downwards.
    log_upper = math.log(full_batch_sigma)
    if excess(log_upper) >= 0.0:  # rounding: subsampling changed nothing measurable
        return full_batch_sigma
    log_lower = log_upper
    for _ in range(_MAX_BRACKET_STEPS):
        log_lower -= math.log(2.0)
        if excess(log_lower) >= 0.0:
            break
        log_upper = log_lower
    else:  # pragma: no cover - unreachable: ε_α → ∞ as σ → 0
        raise RuntimeError("could not bracket the noise multiplier")
    return math.exp(optimize.brentq(excess, log_lower, log_upper, xtol=_LOG_XTOL))


def gdp_mu_of_dpsgd(noise_multiplier: float, steps: int) -> float:
    """μ-GDP of full-batch DP-SGD: ``sqrt(steps) / noise_multiplier``.

    Valid at sample rate 1 only, where T steps are the composition of T Gaussian mechanisms with
    sensitivity 1 and noise σ; each is (1/σ)-GDP and μ-GDP composes as √(Σ μ_i²) (Dong, Roth &
    Su 2022, Cor. 3.3). With subsampling the trade-off curve is not Gaussian; do not use it there.

    Parameters
    ----------
    noise_multiplier : float
        σ > 0.
    steps : int
        Number of full-batch steps T >= 1.

    Returns
    -------
    float
        μ = √T / σ.

    Examples
    --------
    >>> gdp_mu_of_dpsgd(noise_multiplier=2.0, steps=16)
    2.0
    """
    noise_multiplier = check_positive(noise_multiplier, "noise_multiplier")
    steps = check_steps(steps)
    return math.sqrt(steps) / noise_multiplier
