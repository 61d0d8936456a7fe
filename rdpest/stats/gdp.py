"""μ-GDP: its privacy profile, the inverses of the profile, and what μ-GDP implies for RDP.

- μ-GDP → RDP: μ-GDP implies (α, αμ²/2)-RDP for every α > 1 (Bun & Steinke 2016, Prop. 1.6 for
  the Gaussian pair; Dong, Roth & Su 2022, "Gaussian differential privacy", JRSS-B).
- μ-GDP ↔ (ε, δ)-DP: the privacy profile δ(ε) = Φ(−ε/μ + μ/2) − e^ε Φ(−ε/μ − μ/2) (Dong, Roth &
  Su 2022, Cor. 2.13), and its inverses in ε and in μ. The inverse in μ is the (ε, δ) → μ-GDP step
  of the prior black-box DP-SGD audit (Annamalai & De Cristofaro, NeurIPS 2024), which Kim,
  Varshney & Alabi (2026) compare against; it is exact only for Gaussian trade-off curves.

The public functions are re-exported by :mod:`rdpest.stats.conversions`, where they are
documented; they validate their arguments and call the unchecked private versions, which other
modules of rdpest call directly.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from scipy import optimize, special

from rdpest.utils.validation import (
    check_alpha,
    check_open_unit,
    check_positive,
    check_probability,
    check_real,
    finite_result,
)

__all__ = ["GDPFromRates", "gdp_delta", "gdp_epsilon", "gdp_from_rates", "gdp_mu", "gdp_to_rdp"]

# Root finders work on a log scale and stop at this absolute tolerance in the log (i.e. relative
# precision ~1e-13 on μ); far below anything a privacy claim resolves.
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


@finite_result()
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
    return _gdp_to_rdp(mu, alpha)


def _gdp_to_rdp(mu: float, alpha: float) -> float:
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


@finite_result()
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


@finite_result()
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
    delta = check_open_unit(delta, "delta")
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


@finite_result()
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
    delta = check_open_unit(delta, "delta")
    return _gdp_mu(epsilon, delta)


def _gdp_mu(epsilon: float, delta: float) -> float:
    """:func:`gdp_mu` unchecked."""
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


class GDPFromRates(NamedTuple):
    """What a test's rates imply under a Gaussian trade-off curve."""

    epsilon: float
    mu: float
    epsilon_alpha: float


@finite_result(allow_inf=True)
def gdp_from_rates(tpr: float, fpr: float, alpha: float, delta: float) -> GDPFromRates:
    """(ε, δ)-DP, μ-GDP and (α, ε_α)-RDP implied by a test's rates, assuming a Gaussian curve.

    The conversion of Annamalai & De Cristofaro (NeurIPS 2024): an (ε, δ)-DP mechanism has
    TPR <= e^ε FPR + δ for every test, so ε >= log((TPR − δ)/FPR); μ is the GDP parameter whose
    privacy profile passes through (ε, δ) (:func:`gdp_mu`) and μ-GDP implies
    (α, αμ²/2)-RDP (:func:`gdp_to_rdp`). When TPR − δ <= FPR the rates show
    nothing: ε = μ = ε_α = 0. When FPR = 0 < TPR − δ no finite ε explains them: all three are
    ``inf``.

    Parameters
    ----------
    tpr, fpr : float
        Rates in [0, 1] (for a bound: a lower bound on TPR and an upper bound on FPR).
    alpha : float
        Rényi order, > 1.
    delta : float
        δ in (0, 1).

    Returns
    -------
    GDPFromRates
        ``(epsilon, mu, epsilon_alpha)``; only valid if the trade-off curve is Gaussian.

    Examples
    --------
    >>> r = gdp_from_rates(tpr=0.8, fpr=0.1, alpha=2.0, delta=1e-5)
    >>> round(r.epsilon, 4), round(r.mu, 4), round(r.epsilon_alpha, 4)
    (2.0794, 0.5193, 0.2697)
    """
    tpr = check_probability(tpr, "tpr")
    fpr = check_probability(fpr, "fpr")
    alpha = check_alpha(alpha)
    delta = check_open_unit(delta, "delta")
    return _gdp_from_rates(tpr, fpr, alpha, delta)


def _gdp_from_rates(tpr: float, fpr: float, alpha: float, delta: float) -> GDPFromRates:
    """:func:`gdp_from_rates` unchecked."""
    if not tpr - delta > fpr:
        return GDPFromRates(0.0, 0.0, 0.0)
    if fpr == 0.0:
        return GDPFromRates(math.inf, math.inf, math.inf)
    # Annamalai & De Cristofaro (2024): ε = log((TPR − δ)/FPR) > 0 here; never |μ|: gdp_mu's root
    # is positive by construction.
    # As a difference of logarithms: the ratio overflows for a subnormal FPR (below ~5.6e-309).
    epsilon = math.log(tpr - delta) - math.log(fpr)
    mu = _gdp_mu(epsilon, delta)
    return GDPFromRates(epsilon, mu, _gdp_to_rdp(mu, alpha))
