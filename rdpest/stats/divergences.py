"""Rényi divergences of known distribution families: closed forms and stable quadrature.

Every function returns D_α(P‖Q) = 1/(α−1) · log E_Q[(p/q)^α] for an order α > 1, in the standard
RDP scale of Mironov (2017, "Rényi Differential Privacy", CSF), with natural logarithms. Where
the divergence is infinite the functions return ``math.inf``. These are the ground truths against
which the estimators of Kim, Varshney & Alabi (2026) are measured, and the reference values used
by :mod:`rdpest.datasets`.

Numerical notes. A Rényi moment E = E_Q[(p/q)^α] can be astronomically large (so it is handled
in log space) or within rounding of 1 (so D is computed from E − 1 with log1p, never as log E).
The subsampled Gaussian and the Bernoulli divergence compute E − 1 = E_Q[φ_α(u)] directly, with
u = p/q − 1 and the nonnegative excess φ_β(u) = (1+u)^β − 1 − βu (valid because E_Q[u] = 0);
the Gaussian and Laplace closed forms use power series where their terms cancel. All are
accurate to a relative precision of about 1e-12 whatever the size of the divergence.

This module imports nothing of rdpest except the argument checks and its quadrature machinery
(:mod:`rdpest.stats.quadrature`).

Examples
--------
>>> round(gaussian_renyi_divergence(2.0, 1.0, 1.0, 0.0, 1.0), 12)  # α Δμ² / (2σ²)
1.0
"""

from __future__ import annotations

import math

import numpy as np
from scipy.linalg import solve_triangular

from rdpest.stats.quadrature import (
    _log_abs_expm1,
    _log_abs_expm1_scalar,
    _log_excess,
    _log_excess_scalar,
    _log_integral,
    _logaddexp_scalar,
    _sampled_gaussian_log_moment,
    renyi_divergence_quadrature,
)
from rdpest.utils.validation import (
    check_alpha,
    check_finite_array,
    check_option,
    check_positive,
    check_probability,
    check_real,
    finite_result,
)

__all__ = [
    "bernoulli_renyi_divergence",
    "gaussian_renyi_divergence",
    "laplace_renyi_divergence",
    "multivariate_gaussian_renyi_divergence",
    "renyi_divergence_quadrature",
    "subsampled_gaussian_renyi_divergence",
]

_LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)
# Below this σ the subsampled Gaussian's quadrature misses peaks of width σ (it returned 0 at
# σ = 3e-18, a divergence of 1e35); only the forward binomial sum is computed there.
_MIN_QUADRATURE_SIGMA = 1e-4


# ---------------------------------------------------------------------------------------------
# Closed forms
# ---------------------------------------------------------------------------------------------


@finite_result(allow_inf=True)
def gaussian_renyi_divergence(
    alpha: float, mean_p: float, std_p: float, mean_q: float, std_q: float
) -> float:
    """Rényi divergence between two univariate Gaussians, D_α(N(μ_p, σ_p²) ‖ N(μ_q, σ_q²)).

    Parameters
    ----------
    alpha : float
        Rényi order, > 1.
    mean_p, std_p : float
        Mean and standard deviation (> 0) of P.
    mean_q, std_q : float
        Mean and standard deviation (> 0) of Q.

    Returns
    -------
    float
        The divergence, ``math.inf`` when α σ_q² + (1 − α) σ_p² <= 0 (then E_Q[(p/q)^α] diverges).

    References
    ----------
    Gil, Alajaji & Linder (2013), "Rényi divergence measures for commonly used univariate
    continuous distributions", Information Sciences 249, Table 2.

    Examples
    --------
    >>> d = gaussian_renyi_divergence(alpha=4.0, mean_p=0.0, std_p=1.0, mean_q=2.0, std_q=1.0)
    >>> round(d, 12)
    8.0
    >>> gaussian_renyi_divergence(alpha=2.0, mean_p=0.0, std_p=2.0, mean_q=0.0, std_q=1.0)
    inf
    """
    alpha = check_alpha(alpha)
    mean_p = check_real(mean_p, "mean_p")
    std_p = check_positive(std_p, "std_p")
    mean_q = check_real(mean_q, "mean_q")
    std_q = check_positive(std_q, "std_q")
    return _gaussian_renyi_divergence(alpha, mean_p, std_p, mean_q, std_q)


def _gaussian_renyi_divergence(
    alpha: float, mean_p: float, std_p: float, mean_q: float, std_q: float
) -> float:
    """:func:`gaussian_renyi_divergence` unchecked."""
    # Gil, Alajaji & Linder (2013), Table 2: with s² = α σ_q² + (1−α) σ_p² > 0,
    # D = ln(σ_q/σ_p) + ln(σ_q²/s²) / (2(α−1)) + α (μ_p − μ_q)² / (2 s²).
    # Evaluated with v = σ_p²/σ_q² − 1 and s²/σ_q² = 1 + (1−α) v through log1p: the two log terms
    # cancel to first order in v, and log1p keeps their difference (≈ α v²/4) accurate when
    # σ_p ≈ σ_q; equal variances give exactly 0. Everything is in units of σ_q, so no square of
    # a standard deviation over- or underflows, and d = (σ_p − σ_q)/σ_q is formed from the exact
    # difference (σ_p/σ_q − 1 would carry the rounding of the ratio into a tiny v).
    d = (std_p - std_q) / std_q
    v = d * (d + 2.0)
    z = 1.0 + (1.0 - alpha) * v
    if not z > 0.0:
        return math.inf
    # ln(σ_q/σ_p) = −½ log1p(v) loses σ_p²/σ_q² once it is below the rounding of 1 (v rounds
    # to −1): there, the logarithms of the two deviations themselves.
    log_variance_ratio = 2.0 * (math.log(std_p) - math.log(std_q)) if v <= -0.5 else None
    variance_part = _variance_part(alpha, v, log_variance_ratio)
    return variance_part + alpha / (2.0 * z) * ((mean_p - mean_q) / std_q) ** 2


def _variance_part(alpha: float, v: float, log_variance_ratio: float | None = None) -> float:
    """ln(σ_q/σ_p) + ln(σ_q²/s²)/(2(α−1)), the variance term of the Gaussian D_α, from
    v = σ_p²/σ_q² − 1 (with 1 + (1−α)v > 0); ``log_variance_ratio`` = ln(σ_p²/σ_q²), which the
    caller must give where v <= −0.5 (v then carries too little of σ_p²/σ_q²)."""
    if abs(v) * max(1.0, alpha - 1.0) <= 0.1:
        # Expanding both log1p: ½ Σ_{k>=2} [(α−1)^{k−1} + (−1)^k] v^k / k, terms shrinking by a
        # factor <= 0.1 (the k = 1 terms cancel exactly).
        total = 0.0
        for k in range(20, 1, -1):
            total += ((alpha - 1.0) ** (k - 1) + (-1.0) ** k) * v**k / k
        return 0.5 * total
    log_ratio = -0.5 * (math.log1p(v) if v > -0.5 else log_variance_ratio)
    return log_ratio - math.log1p((1.0 - alpha) * v) / (2.0 * (alpha - 1.0))


def _symmetric_covariance(cov, name: str, dimension: int) -> np.ndarray:
    cov = check_finite_array(cov, name, ndim=2)
    if cov.shape != (dimension, dimension):
        raise ValueError(
            f"{name} must have shape ({dimension}, {dimension}) to match the means, got {cov.shape}"
        )
    if not np.allclose(cov, cov.T, rtol=1e-10, atol=1e-12 * float(np.max(np.abs(cov)))):
        raise ValueError(f"{name} must be symmetric")
    return 0.5 * (cov + cov.T)


def _positive_definite_covariance(cov, name: str, dimension: int) -> tuple[np.ndarray, float]:
    """``cov`` checked finite, (dimension, dimension), symmetric and positive definite, and its
    log det (a ValueError naming ``name`` otherwise)."""
    cov = _symmetric_covariance(cov, name, dimension)
    log_det = _log_det_positive_definite(cov)
    if log_det is None:
        raise ValueError(f"{name} must be positive definite")
    return cov, log_det


def _log_det_positive_definite(cov: np.ndarray) -> float | None:
    """log det of a symmetric matrix via Cholesky, or None when it is not positive definite."""
    try:
        chol = np.linalg.cholesky(cov)
    except np.linalg.LinAlgError:
        return None
    return 2.0 * float(np.sum(np.log(np.diag(chol))))


@finite_result(allow_inf=True)
def multivariate_gaussian_renyi_divergence(alpha: float, mean_p, cov_p, mean_q, cov_q) -> float:
    """Rényi divergence between two multivariate Gaussians, D_α(N(μ_p, Σ_p) ‖ N(μ_q, Σ_q)).

    Parameters
    ----------
    alpha : float
        Rényi order, > 1.
    mean_p, mean_q : array-like of shape (d,)
        Means of P and Q.
    cov_p, cov_q : array-like of shape (d, d)
        Symmetric positive definite covariance matrices of P and Q.

    Returns
    -------
    float
        The divergence, ``math.inf`` when Σ_α = α Σ_q + (1 − α) Σ_p is not positive definite.

    Raises
    ------
    ValueError
        If shapes disagree, or a covariance is not symmetric positive definite.

    References
    ----------
    Gil, Alajaji & Linder (2013), "Rényi divergence measures for commonly used univariate
    continuous distributions", Information Sciences 249, which also derives the multivariate
    Gaussian case.

    Examples
    --------
    >>> import numpy as np
    >>> d = multivariate_gaussian_renyi_divergence(
    ...     alpha=2.0, mean_p=[1.0, 1.0], cov_p=np.eye(2), mean_q=[0.0, 0.0], cov_q=np.eye(2))
    >>> round(d, 12)  # α |Δ|² / 2
    2.0
    """
    alpha = check_alpha(alpha)
    mean_p = check_finite_array(mean_p, "mean_p", ndim=1)
    mean_q = check_finite_array(mean_q, "mean_q", ndim=1)
    if mean_p.shape != mean_q.shape:
        raise ValueError(
            f"mean_p and mean_q must have the same shape, got {mean_p.shape} and {mean_q.shape}"
        )
    dimension = mean_p.shape[0]
    cov_p, log_det_p = _positive_definite_covariance(cov_p, "cov_p", dimension)
    cov_q, log_det_q = _positive_definite_covariance(cov_q, "cov_q", dimension)

    # Gil, Alajaji & Linder (2013), multivariate Gaussian: with Σ_α = α Σ_q + (1−α) Σ_p positive
    # definite,
    # D = α/2 Δᵀ Σ_α⁻¹ Δ − 1/(2(α−1)) · ln( det Σ_α / (det Σ_p^{1−α} det Σ_q^α) ).
    # Evaluated in the basis that whitens Σ_q (L the Cholesky factor of Σ_q) and diagonalises
    # E = L⁻¹(Σ_p − Σ_q)L⁻ᵀ = V diag(v) Vᵀ, where Σ_α becomes diag(1 + (1−α)v) and the laws are
    # independent coordinates: D is the sum of the univariate variance terms of the v_i
    # (_variance_part, whose series keeps ≈ α v²/4 accurate as Σ_p → Σ_q; the log-determinants
    # of Σ_α, Σ_p and Σ_q, differenced, lost it: Σ_p = (1 + 1e-10)·Σ_q gave half the divergence)
    # and α/2 Σ_i w_i² / (1 + (1−α)v_i), w = Vᵀ L⁻¹ Δ. Σ_p == Σ_q gives v = 0 and exactly the
    # mean term.
    chol_q = np.linalg.cholesky(cov_q)
    half = solve_triangular(chol_q, cov_p - cov_q, lower=True)
    excess = solve_triangular(chol_q, half.T, lower=True)
    v, basis = np.linalg.eigh(0.5 * (excess + excess.T))
    z = 1.0 + (1.0 - alpha) * v
    if not np.all(z > 0.0):
        return math.inf
    w = basis.T @ solve_triangular(chol_q, mean_p - mean_q, lower=True)
    mahalanobis = float(np.sum(w**2 / z))
    low = v <= -0.5
    variance = sum(_variance_part(alpha, float(x)) for x in v[~low])
    if np.any(low):
        # Where v_i <= −0.5, ln(1 + v_i) from v_i alone loses a tiny eigenvalue of Σ_q⁻¹Σ_p: the
        # log-determinants give the low coordinates' sum, less the others' log1p.
        log_low = (log_det_p - log_det_q) - float(np.sum(np.log1p(v[~low])))
        shrink = float(np.sum(np.log1p((1.0 - alpha) * v[low])))
        variance += -0.5 * log_low - shrink / (2.0 * (alpha - 1.0))
    return variance + 0.5 * alpha * mahalanobis


@finite_result()
def laplace_renyi_divergence(alpha: float, shift: float, scale: float = 1.0) -> float:
    """Rényi divergence D_α(Laplace(shift, b) ‖ Laplace(0, b)) of the Laplace mechanism.

    Parameters
    ----------
    alpha : float
        Rényi order, > 1.
    shift : float
        Location of P (Q is centred at 0); the sign does not matter.
    scale : float, default=1.0
        Common scale b > 0.

    Returns
    -------
    float
        The divergence (finite for every shift).

    References
    ----------
    Mironov (2017), "Rényi Differential Privacy", CSF, Table II (Laplace mechanism, sensitivity
    ``abs(shift)``, scale b).

    Examples
    --------
    >>> round(laplace_renyi_divergence(alpha=2.0, shift=1.0), 6)
    0.619124
    >>> laplace_renyi_divergence(alpha=2.0, shift=0.0)
    0.0
    """
    alpha = check_alpha(alpha)
    shift = check_real(shift, "shift")
    scale = check_positive(scale, "scale")
    return _laplace_renyi_divergence(alpha, shift, scale)


def _laplace_renyi_divergence(alpha: float, shift: float, scale: float) -> float:
    """:func:`laplace_renyi_divergence` unchecked."""
    d = abs(shift) / scale
    if d == 0.0:
        return 0.0
    # Mironov (2017), Table II: D = 1/(α−1) · log( α/(2α−1) e^{(α−1)d} + (α−1)/(2α−1) e^{−αd} ).
    if alpha * d <= 0.5:
        # The two terms cancel to first order in d, so for small d expand E − 1 as the power series
        # α(α−1)/(2α−1) Σ_{k≥2} [(α−1)^{k−1} + (−1)^k α^{k−1}] d^k / k!, whose k = 2 term is
        # α(α−1) d²/2 and whose terms shrink at least geometrically (ratio <= α d <= 1/2).
        # Each power of α or α−1 is carried with its d^k/k! (products of factors <= α d <= 1/2):
        # α^k alone overflowed from α ≈ 2e5 (α^58 > 1e308) though its term was tiny.
        excess = 0.0
        term_a1, term_a = d, d  # (α−1)^{k−1} d^k/k! and (−α)^{k−1} d^k/k! at k = 1
        for k in range(2, 60):
            term_a1 *= (alpha - 1.0) * d / k
            term_a *= -alpha * d / k
            excess += term_a1 - term_a
        excess *= alpha * (alpha - 1.0) / (2.0 * alpha - 1.0)
        return math.log1p(excess) / (alpha - 1.0)
    if alpha - 1.0 < 0.01 and (alpha - 1.0) * d <= 1.0:
        # Near α = 1 the log of the moment below lost eps/(α−1) of D's precision; its excess over
        # 1 is [α·expm1((α−1)d) + (α−1)·expm1(−αd)]/(2α−1) exactly (no cancellation for αd > ½).
        gamma = alpha - 1.0
        excess = (alpha * math.expm1(gamma * d) + gamma * math.expm1(-alpha * d)) / (alpha + gamma)
        return math.log1p(excess) / gamma
    log_moment = np.logaddexp(
        math.log(alpha / (2.0 * alpha - 1.0)) + (alpha - 1.0) * d,
        math.log((alpha - 1.0) / (2.0 * alpha - 1.0)) - alpha * d,
    )
    return float(log_moment) / (alpha - 1.0)


@finite_result()
def subsampled_gaussian_renyi_divergence(
    alpha: float, sampling_rate: float, noise_multiplier: float, direction: str = "forward"
) -> float:
    """Rényi divergence of the Poisson-subsampled Gaussian mechanism (one step of DP-SGD).

    With P = (1−q)·N(0, σ²) + q·N(1, σ²) and Q = N(0, σ²) (sensitivity 1, sampling rate q, noise
    multiplier σ), returns D_α(P‖Q) (``"forward"``) or D_α(Q‖P) (``"reverse"``).

    Parameters
    ----------
    alpha : float
        Rényi order, > 1.
    sampling_rate : float
        q in [0, 1]; q = 0 gives 0 and q = 1 the Gaussian mechanism α/(2σ²).
    noise_multiplier : float
        σ > 0.
    direction : {"forward", "reverse"}, default="forward"
        Which of the two divergences; "forward" is what Opacus's RDP accountant reports.

    Returns
    -------
    float
        The divergence.

    Notes
    -----
    Computed by quadrature of the excess moment E − 1 = E_Q[φ_β(p/q − 1)] (β = α forward,
    β = 1 − α reverse, φ_β(u) = (1+u)^β − 1 − βu) in log space, then D = log1p(E − 1)/(α−1). The
    relative error is about 1e-10 or better for σ in [0.3, 100], q in (0, 1] and α in [1.01, 64];
    outside that range the quadrature's error estimate is checked, and a ``RuntimeWarning`` says
    when it exceeds 1e-10 (at integer α up to 5000 the value matches the binomial sum below to
    1e-12). Below σ = 1e-4 the forward value at integer α is the binomial sum, and other orders
    and the reverse direction raise ``ValueError`` (the peak is narrower than the quadrature).
    For integer α the forward value has the closed form of Mironov, Talwar & Zhang (2019),
    "Rényi Differential Privacy of the Sampled Gaussian Mechanism", Sec. 3.3:
    E = Σ_k C(α, k) (1−q)^{α−k} q^k exp((k² − k)/(2σ²)).

    Examples
    --------
    >>> round(subsampled_gaussian_renyi_divergence(2.0, sampling_rate=1.0, noise_multiplier=1.0), 9)
    1.0
    >>> d = subsampled_gaussian_renyi_divergence(2.0, sampling_rate=0.1, noise_multiplier=1.0)
    >>> round(d, 9) == round(math.log1p(0.01 * math.expm1(1.0)), 9)  # binomial closed form
    True
    """
    alpha = check_alpha(alpha)
    q = check_probability(sampling_rate, "sampling_rate")
    sigma = check_positive(noise_multiplier, "noise_multiplier")
    check_option(direction, ("forward", "reverse"), "direction")
    try:
        return _subsampled_gaussian_renyi_divergence(alpha, q, sigma, direction)
    except ValueError as exc:  # the integrand left double precision
        raise ValueError(
            f"cannot compute D_alpha of the subsampled Gaussian for alpha={alpha!r}, "
            f"sampling_rate={q!r}, noise_multiplier={sigma!r} in double precision ({exc})"
        ) from None


def _subsampled_gaussian_renyi_divergence(
    alpha: float, q: float, sigma: float, direction: str
) -> float:
    """:func:`subsampled_gaussian_renyi_divergence` unchecked."""
    if q == 0.0:
        return 0.0
    if q == 1.0:
        # Two Gaussians with equal variance: the divergence is symmetric, α Δμ²/(2σ²) with Δμ = 1.
        return alpha / (2.0 * sigma**2)
    if sigma < _MIN_QUADRATURE_SIGMA:  # a peak narrower than the quadrature resolves
        if direction == "forward" and alpha == int(alpha):
            return _sampled_gaussian_log_moment(int(alpha), q, sigma) / (alpha - 1.0)
        raise ValueError(
            f"below noise_multiplier {_MIN_QUADRATURE_SIGMA:g} only the forward direction at an "
            "integer alpha is computed (a closed form; the quadrature cannot resolve the peak)"
        )

    # forward: E_Q[(p/q)^α]; reverse: E_P[(q/p)^α] = E_Q[(p/q)^{1−α}].
    beta = alpha if direction == "forward" else 1.0 - alpha
    log_q, log1m_q = math.log(q), math.log1p(-q)
    inv_var = 1.0 / sigma**2
    log_norm = -math.log(sigma) - _LOG_SQRT_2PI

    def log_integrand(x: np.ndarray) -> np.ndarray:
        # p(x)/q(x) = 1 + u(x) with u = q (e^t − 1), t = (2x − 1)/(2σ²) (Mironov et al. 2019).
        t = (x - 0.5) * inv_var
        log1p_u = np.logaddexp(log1m_q, log_q + t)
        log_abs_u = log_q + _log_abs_expm1(t)
        return log_norm - 0.5 * x * x * inv_var + _log_excess(beta, log1p_u, log_abs_u, np.sign(t))

    def log_integrand_scalar(x: float) -> float:
        t = (x - 0.5) * inv_var
        log1p_u = _logaddexp_scalar(log1m_q, log_q + t)
        log_abs_u = log_q + _log_abs_expm1_scalar(t)
        excess = _log_excess_scalar(beta, log1p_u, log_abs_u, math.copysign(1.0, t))
        return log_norm - 0.5 * x * x * inv_var + excess

    # All mass of q·(p/q)^β lies within [0, α] (forward) or [1−α, 0] (reverse), the stationary
    # points of its logarithm, plus Gaussian tails of width σ on either side (and the βu and
    # constant parts of φ add tails around 0 and 1). 40σ leaves out less than e^{-800}.
    centre_low, centre_high = (0.0, alpha) if beta > 0 else (1.0 - alpha, 1.0)
    lower, upper = centre_low - 40.0 * sigma, centre_high + 40.0 * sigma
    log_excess_moment = _log_integral(
        log_integrand,
        log_integrand_scalar,
        lower,
        upper,
        scale=sigma,
        points=(0.0, 0.5, 1.0, 1.0 - alpha, alpha),
    )
    return float(np.logaddexp(0.0, log_excess_moment)) / (alpha - 1.0)


@finite_result(allow_inf=True)
def bernoulli_renyi_divergence(alpha: float, p: float, q: float) -> float:
    """Rényi divergence between Bernoulli distributions, D_α(Bern(p) ‖ Bern(q)).

    Parameters
    ----------
    alpha : float
        Rényi order, > 1.
    p, q : float
        Success probabilities in [0, 1].

    Returns
    -------
    float
        The divergence: 0 when p == q, ``math.inf`` when an outcome has positive probability under
        P and zero under Q.

    References
    ----------
    Definition of D_α for discrete distributions (Rényi 1961; van Erven & Harremoës 2014, Eq. 2):
    D = 1/(α−1) log( p^α q^{1−α} + (1−p)^α (1−q)^{1−α} ). It is the divergence of the two-valued
    statistic of a threshold test, hence a lower bound on D_α of the underlying outputs by
    post-processing (Kim, Varshney & Alabi 2026, Table 13 baseline).

    Examples
    --------
    >>> round(bernoulli_renyi_divergence(alpha=2.0, p=0.5, q=0.25), 6)
    0.287682
    >>> bernoulli_renyi_divergence(alpha=2.0, p=0.5, q=0.0)
    inf
    """
    alpha = check_alpha(alpha)
    p = check_probability(p, "p")
    q = check_probability(q, "q")
    return _bernoulli_renyi_divergence(alpha, p, q)


def _bernoulli_renyi_divergence(alpha: float, p: float, q: float) -> float:
    """:func:`bernoulli_renyi_divergence` unchecked."""
    if p == q:
        return 0.0
    if (q == 0.0 and p > 0.0) or (q == 1.0 and p < 1.0):
        return math.inf
    # Here 0 < q < 1. E − 1 = q φ_α(p/q − 1) + (1−q) φ_α((1−p)/(1−q) − 1) because the linear parts
    # cancel (q u₁ + (1−q) u₂ = 0); this keeps D accurate when p is close to q.
    with np.errstate(divide="ignore"):
        log_ratios = np.log([p, 1.0 - p]) - np.log([q, 1.0 - q])
        log_abs_u = np.log(abs(p - q)) - np.log([q, 1.0 - q])
    # log1p of the relative gap u (p − q exact when close) keeps the digits that the difference
    # of two logarithms rounds away: α multiplies that rounding (2.9e-9 relative at α = 1e6,
    # p = 0.01000001, q = 0.01). Below u = −0.5, u itself has lost the ratio's digits.
    with np.errstate(over="ignore"):
        u = np.array([p - q, q - p]) / np.array([q, 1.0 - q])
    near = np.isfinite(u) & (u > -0.5)
    log_ratios[near] = np.log1p(u[near])
    sign_u = np.array([1.0, -1.0]) * math.copysign(1.0, p - q)
    log_terms = np.log([q, 1.0 - q]) + _log_excess(alpha, log_ratios, log_abs_u, sign_u)
    log_excess_moment = np.logaddexp(log_terms[0], log_terms[1])
    return float(np.logaddexp(0.0, log_excess_moment)) / (alpha - 1.0)
