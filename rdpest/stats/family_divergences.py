"""Rényi divergences of the further benchmark families of :mod:`rdpest.datasets` (private).

The ground truths of the families beyond the mechanisms of :mod:`rdpest.stats.divergences`:
exponential and Poisson rate pairs, Laplace scale pairs, Student-t location shifts and a
Gaussian mixture against a Gaussian. Each returns D_α(P‖Q) for the family's Q (its reference
distribution) and the given parameter of P, in the same conventions and to the same precision
as :mod:`rdpest.stats.divergences` (closed forms with series where terms cancel, or the stable
quadrature of :mod:`rdpest.stats.quadrature`). Their arguments are checked by the callers.
"""

from __future__ import annotations

import math

import numpy as np

from rdpest.stats.divergences import _LOG_SQRT_2PI
from rdpest.stats.quadrature import _log_excess_moment_real_line


def _bernoulli_gap(c: float, v: float) -> float:
    """c·log(1+v) − log(1+c·v) >= 0 (Bernoulli's inequality), accurate when v is small.

    ``math.inf`` when 1 + c·v <= 0. For max(1, |c|)·|v| <= 0.1 the series
    Σ_{k>=2} (−1)^k (c^k − c) v^k / k is summed (the k = 1 terms cancel exactly; terms shrink by
    a factor <= 0.1), else the two log1p are subtracted (losing at most ~1e-13 relative).
    """
    if not 1.0 + c * v > 0.0:
        return math.inf
    if v == 0.0:
        return 0.0
    if abs(v) * max(1.0, abs(c)) <= 0.1:
        # c^k − c = c·expm1((k − 1) log c) near c = 1, where c**k − c cancels (and the gap is
        # then divided by c − 1 = α − 1: at α = 1 + 1e-12, 4 digits were left).
        log_c = math.log(c) if 0.5 < c < 2.0 else None
        total = 0.0
        for k in range(24, 1, -1):
            gain = c * math.expm1((k - 1) * log_c) if log_c is not None else c**k - c
            total += (-1.0) ** k * gain * v**k / k
        return total
    return c * math.log1p(v) - math.log1p(c * v)


def _exponential_rate_renyi_divergence(alpha: float, rate: float) -> float:
    """D_α(Exp(rate λ) ‖ Exp(1)).

    ∫_0^∞ (λ e^{−λx})^α (e^{−x})^{1−α} dx = λ^α / (αλ + 1 − α) when αλ + 1 − α > 0 (else the
    integral diverges), so D = [α log λ − log(1 + α(λ − 1))]/(α − 1) (Gil, Alajaji & Linder 2013,
    Table 2, exponential distributions), i.e. the Bernoulli gap with c = α and v = λ − 1.
    """
    v, a = rate - 1.0, alpha - 1.0
    if alpha >= 2.0 or abs(v) * alpha <= 0.1 or not 1.0 + alpha * v > 0.0:
        return _bernoulli_gap(alpha, v) / a
    # Near α = 1 the gap is a difference of two nearly equal logs, divided by α − 1 (at
    # α = 1 + 1e-12 only 4 digits were left). With w = (α − 1)v/λ, 1 + αv = λ(1 + w), so
    # gap/(α − 1) = log λ − v/λ · log1p(w)/w, with no division of a difference by it (λ itself,
    # not 1 + v, which rounds away a small rate's low digits).
    w = a * v / rate
    return math.log(rate) - v / rate * (math.log1p(w) / w if w != 0.0 else 1.0)


def _laplace_scale_renyi_divergence(alpha: float, scale: float) -> float:
    """D_α(Laplace(0, b) ‖ Laplace(0, 1)).

    ∫ (e^{−|x|/b}/(2b))^α (e^{−|x|}/2)^{1−α} dx = b^{−α} ∫_0^∞ e^{−(α/b + 1 − α)x} dx
    = b^{1−α} / (α + (1 − α) b) when α + (1 − α) b > 0 (Gil, Alajaji & Linder 2013, Table 2,
    Laplace distributions), so D = −log b − log(1 + (1 − α)(b − 1))/(α − 1): the Bernoulli gap with
    c = 1 − α and v = b − 1. (|X| ~ Exp(1/b): the same value as the exponential family at λ = 1/b.)
    """
    return _bernoulli_gap(1.0 - alpha, scale - 1.0) / (alpha - 1.0)


def _poisson_rate_renyi_divergence(alpha: float, rate: float) -> float:
    """D_α(Poisson(λ) ‖ Poisson(1)).

    Σ_k (e^{−λ} λ^k/k!)^α (e^{−1}/k!)^{1−α} = e^{−αλ − (1−α)} Σ_k (λ^α)^k/k! = exp(λ^α − αλ + α − 1)
    (van Erven & Harremoës 2014, Eq. 2 summed as a Poisson series), so with u = log λ,
    D = (e^{αu} − α e^u + α − 1)/(α − 1) = [expm1(αu) − α expm1(u)]/(α − 1).
    """
    u = math.log(rate)
    if abs(alpha * u) <= 0.5:
        # Σ_{k>=2} (α^k − α) u^k / k!: the k = 1 terms cancel; terms shrink by a factor <= 1/2.
        # Each term is (αu)^k/k! − α u^k/k!, two sequences that neither over- nor underflow
        # before they stop mattering (α^k alone overflows for large α); below α = 2, where the
        # two nearly cancel, (α^k − α) = α expm1((k − 1) log α) instead.
        total, scaled, plain = 0.0, alpha * u, u
        log_alpha = math.log(alpha)
        for k in range(2, 60):
            scaled *= alpha * u / k
            plain *= u / k
            if alpha < 2.0:
                total += plain * alpha * math.expm1((k - 1) * log_alpha)
            else:
                total += scaled - alpha * plain
        return total / (alpha - 1.0)
    try:
        if alpha < 2.0:
            # expm1(αu) − α·expm1(u) = e^u·expm1((α − 1)u) − (α − 1)·expm1(u): divided by α − 1
            # with no cancellation near α = 1 (the direct difference kept 4 digits at
            # α = 1 + 1e-12); here |u| > 1/4, so the final subtraction loses at most one digit.
            a = alpha - 1.0
            return math.exp(u) * (math.expm1(a * u) / a) - math.expm1(u)
        return (math.expm1(alpha * u) - alpha * math.expm1(u)) / (alpha - 1.0)
    except OverflowError:  # e^{αu} beyond double range: so is the divergence
        return math.inf


def _student_t_log_pdf(df: float):
    log_norm = math.lgamma(0.5 * (df + 1.0)) - math.lgamma(0.5 * df) - 0.5 * math.log(df * math.pi)
    power = 0.5 * (df + 1.0)

    def vector(x):
        return log_norm - power * np.log1p(np.asarray(x) ** 2 / df)

    def scalar(x: float) -> float:
        return log_norm - power * math.log1p(x * x / df)

    return vector, scalar


def _student_t_shift_renyi_divergence(alpha: float, shift: float, df: float) -> float:
    """D_α(t_ν(μ) ‖ t_ν(0)) by quadrature of E_Q[φ_α(p/q − 1)] over the real line.

    L = log p/q = −(ν+1)/2 · log1p(μ(μ − 2x)/(ν + x²)) (the two log1p of the densities merged, so
    no cancellation when μ is small); the excess integrand decays like |x|^{−(ν+3)}.
    """
    if shift == 0.0:
        return 0.0
    log_q, log_q_scalar = _student_t_log_pdf(df)
    power = 0.5 * (df + 1.0)

    def log_ratio(x):
        x = np.asarray(x)
        return -power * np.log1p(shift * (shift - 2.0 * x) / (df + x * x))

    def log_ratio_scalar(x: float) -> float:
        return -power * math.log1p(shift * (shift - 2.0 * x) / (df + x * x))

    # The mass of p^α q^{1−α} lies between μ (heavy tails) and αμ (the Gaussian limit ν → ∞).
    log_excess = _log_excess_moment_real_line(
        alpha,
        log_q,
        log_ratio,
        log_q_scalar,
        log_ratio_scalar,
        points=(0.0, shift, alpha * shift),
        width=min(1.0, math.sqrt(df / ((df + 1.0) * alpha))),  # width of p^α at μ
    )
    return float(np.logaddexp(0.0, log_excess)) / (alpha - 1.0)


_LOG2 = math.log(2.0)


def _log_cosh(y):
    """log cosh y, accurate for small |y| (log1p(2 sinh²(y/2))) and without overflow for large."""
    y = np.abs(np.asarray(y, dtype=np.float64))
    small = np.minimum(y, 1.0)
    return np.where(
        y <= 1.0, np.log1p(2.0 * np.sinh(0.5 * small) ** 2), y + np.log1p(np.exp(-2.0 * y)) - _LOG2
    )


def _log_cosh_scalar(y: float) -> float:
    y = abs(y)
    if y <= 1.0:
        return math.log1p(2.0 * math.sinh(0.5 * y) ** 2)
    return y + math.log1p(math.exp(-2.0 * y)) - _LOG2


def _gaussian_mixture_renyi_divergence(alpha: float, mean: float) -> float:
    """D_α(½N(−μ, 1) + ½N(μ, 1) ‖ N(0, 1)) by quadrature of E_Q[φ_α(p/q − 1)].

    p/q = e^{−μ²/2} cosh(μx); the mass of q·(p/q)^α lies around ±αμ. For integer α the binomial
    expansion of cosh^α gives the closed form E = 2^{−α} e^{−αμ²/2} Σ_k C(α, k) e^{(2k−α)²μ²/2}
    (used by the tests as an independent check).
    """
    if mean == 0.0:
        return 0.0
    half_square = 0.5 * mean * mean

    def log_q(x):
        return -0.5 * np.asarray(x) ** 2 - _LOG_SQRT_2PI

    def log_q_scalar(x: float) -> float:
        return -0.5 * x * x - _LOG_SQRT_2PI

    def log_ratio(x):
        return _log_cosh(mean * np.asarray(x)) - half_square

    def log_ratio_scalar(x: float) -> float:
        return _log_cosh_scalar(mean * x) - half_square

    reach = abs(mean) * alpha
    log_excess = _log_excess_moment_real_line(
        alpha,
        log_q,
        log_ratio,
        log_q_scalar,
        log_ratio_scalar,
        points=(-reach, -abs(mean), 0.0, abs(mean), reach),
        width=1.0 / math.sqrt(alpha),
    )
    return float(np.logaddexp(0.0, log_excess)) / (alpha - 1.0)
