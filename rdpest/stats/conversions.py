"""Conversions between privacy notions: RDP, (ε, δ)-DP, μ-GDP, and the RDP claim of DP-SGD.

Pure functions, natural logarithms, RDP in the standard scale of Mironov (2017): a mechanism is
(α, ε_α)-RDP when D_α(M(D)‖M(D′)) ≤ ε_α with D_α = 1/(α−1) · log E_Q[(p/q)^α].

- μ-GDP → RDP and μ-GDP ↔ (ε, δ)-DP: implemented in :mod:`rdpest.stats.gdp` and re-exported
  here (``gdp_to_rdp``, ``gdp_delta``, ``gdp_epsilon``, ``gdp_mu``, ``gdp_from_rates``).
- RDP → (ε, δ)-DP: Mironov (2017, Prop. 3) and the tighter conversion of Balle et al. (2020,
  "Hypothesis testing interpretations and Rényi differential privacy", Thm 21), also in Canonne,
  Kamath & Steinke (2020). Opacus's ``get_privacy_spent`` implements the latter.
- DP-SGD: the RDP of the subsampled Gaussian mechanism composed over T steps, through Opacus's RDP
  analysis (Mironov, Talwar & Zhang 2019), checked against rdpest's own quadrature (whose value
  is used where Opacus's series loses precision); at sampling rate 1 it is the composition of T
  Gaussian mechanisms, ε_α = Tα/(2σ²), i.e. √T/σ-GDP (Dong, Roth & Su 2022, Cor. 3.3).

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
import warnings
from collections.abc import Callable

import numpy as np
from numpy.typing import ArrayLike
from scipy import optimize

from rdpest.stats.gdp import (
    GDPFromRates,
    gdp_delta,
    gdp_epsilon,
    gdp_from_rates,
    gdp_mu,
    gdp_to_rdp,
)
from rdpest.utils.validation import (
    MAX_ALPHA,
    check_alpha,
    check_finite_array,
    check_open_unit,
    check_option,
    check_positive,
    check_sample_rate,
    check_steps,
    finite_result,
)

# The μ-GDP conversions live in rdpest.stats.gdp; this module is the one place users import every
# privacy conversion from, so it re-exports them.
__all__ = [
    "RDP_TO_DP_METHODS",
    "GDPFromRates",
    "dpsgd_epsilon_alpha",
    "gdp_delta",
    "gdp_epsilon",
    "gdp_from_rates",
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


@finite_result()
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


# --------------------------------------------------------------------------------------------
# RDP → (ε, δ)-DP
# --------------------------------------------------------------------------------------------


def _mironov_epsilon(
    epsilon_alpha: np.ndarray, alpha: np.ndarray, delta: float
) -> tuple[float, float]:
    # Mironov (2017), Prop. 3: (α, ε_α)-RDP ⇒ (ε_α + log(1/δ)/(α−1), δ)-DP.
    epsilons = epsilon_alpha + math.log(1.0 / delta) / (alpha - 1.0)
    best = int(np.argmin(epsilons))
    return float(epsilons[best]), float(alpha[best])


def _balle_epsilon(
    epsilon_alpha: np.ndarray, alpha: np.ndarray, delta: float
) -> tuple[float, float]:
    # Balle, Barthe, Gaboardi, Hsu & Sato (2020), Thm 21; Canonne, Kamath & Steinke (2020):
    # ε = ε_α + log((α−1)/α) − (log δ + log α)/(α−1), smaller than Mironov's by
    # log(α/(α−1)) + log(α)/(α−1) > 0 at every α > 1. Opacus's get_privacy_spent computes it;
    # imported here so that importing rdpest.stats never imports Opacus (and torch).
    from opacus.accountants.analysis.rdp import get_privacy_spent

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Opacus warns when the optimum is an end order
        epsilon, order = get_privacy_spent(orders=alpha, rdp=epsilon_alpha, delta=delta)
    return float(epsilon), float(order)


# Registry by name: later code (and the CLI) may list the available conversions. Each returns
# the smallest ε over the orders and the order attaining it.
_RDP_TO_DP: dict[str, Callable[[np.ndarray, np.ndarray, float], tuple[float, float]]] = {
    "balle": _balle_epsilon,
    "mironov": _mironov_epsilon,
}
#: Names accepted by ``method`` of :func:`rdp_to_dp`.
RDP_TO_DP_METHODS = tuple(_RDP_TO_DP)


def _rdp_curve(epsilon_alpha, alpha) -> tuple[np.ndarray, np.ndarray]:
    """Validate matching scalars or 1-D arrays of RDP values and orders."""
    epsilon_alpha = _as_scalar_or_array(epsilon_alpha)
    alpha = _as_scalar_or_array(alpha)
    for value, name in ((epsilon_alpha, "epsilon_alpha"), (alpha, "alpha")):
        try:
            np.ndim(value)
        except ValueError:  # ragged nested sequences
            raise ValueError(f"{name} must be a number or a 1-D array, got {value!r}") from None
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
    if np.any(orders <= 1.0) or np.any(orders > MAX_ALPHA):
        raise ValueError(
            f"alpha must lie in (1, {MAX_ALPHA:g}] (Rényi orders), got values in "
            f"[{orders.min()!r}, {orders.max()!r}]"
        )
    return eps, orders


@finite_result()
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
    delta = check_open_unit(delta, "delta")
    check_option(method, RDP_TO_DP_METHODS, "method")
    eps_alpha, orders = _rdp_curve(epsilon_alpha, alpha)
    epsilon, order = _RDP_TO_DP[method](eps_alpha, orders, delta)
    epsilon = max(0.0, epsilon)
    if return_order:
        return epsilon, order
    return epsilon


# --------------------------------------------------------------------------------------------
# DP-SGD
# --------------------------------------------------------------------------------------------


# Opacus's value is used where it agrees with rdpest's own quadrature to this relative tolerance;
# elsewhere the quadrature's (see _opacus_epsilon_alpha).
_OPACUS_AGREEMENT = 1e-6


def _opacus_epsilon_alpha(
    noise_multiplier: float, sample_rate: float, steps: int, alpha: float
) -> float:
    """ε_α of ``steps`` compositions of the sampled Gaussian mechanism: Opacus's RDP analysis,
    checked against :func:`rdpest.stats.divergences.subsampled_gaussian_renyi_divergence`.

    Opacus's series for fractional orders (Mironov, Talwar & Zhang 2019, Sec. 3.3) cancels
    catastrophically at high orders and tiny sampling rates: it returned −0.358 for σ = 30,
    q = 0.3, α = 200.5 (the divergence is 0.0105), so a claim could be negative, and a noise
    multiplier solved from it far too small. Both compute D_α(P‖Q) of one step for
    P = (1−q)·N(0, σ²) + q·N(1, σ²) and Q = N(0, σ²); where they differ by more than
    ``_OPACUS_AGREEMENT`` (relative), or Opacus's value is not in [0, α/(2σ²)] (a step's RDP
    lies between 0 and the unsampled Gaussian mechanism's), the quadrature's value is used.
    """
    # Imported here: opacus imports torch, which is slow to import and not needed by the rest of
    # this module.
    from opacus.accountants.analysis.rdp import compute_rdp

    from rdpest.stats.divergences import _subsampled_gaussian_renyi_divergence

    # Opacus's RDP analysis of the sampled Gaussian mechanism (Mironov, Talwar & Zhang 2019,
    # "Rényi differential privacy of the sampled Gaussian mechanism", Sec. 3.3), composed over
    # `steps` by additivity of RDP (Mironov 2017, Prop. 1).
    # The step's RDP at q = 1 (Mironov 2017), divided twice: σ² overflows from σ ≈ 1.3e154,
    # where the value is 0 to the float.
    gaussian = alpha / (2.0 * noise_multiplier) / noise_multiplier
    if gaussian == 0.0:
        return 0.0
    if math.isinf(gaussian):
        # σ so small that α/(2σ²) overflows (σ² subnormal from σ ≈ 1e-154; Opacus's series
        # never ended at σ = 1e-155): no privacy worth a number.
        return math.inf
    try:
        per_step = float(
            compute_rdp(q=sample_rate, noise_multiplier=noise_multiplier, steps=1, orders=alpha)
        )
    except (OverflowError, ZeroDivisionError):
        if noise_multiplier > 1.0:
            # σ² overflows (σ from about 1.3e154): ε_α is below the unsampled mechanism's
            # α/(2σ²), a subnormal float, which is taken (a claim that is never too small).
            return gaussian * steps
        # σ so small that σ² underflows (or a term overflows): no privacy at all.
        return math.inf
    except ValueError:
        # Its series for fractional orders takes logs that fail a float below some integers
        # (α = 2 − 2^-52: "math domain error"): the quadrature's value is used.
        per_step = math.nan
    if math.isinf(per_step) and per_step > 0:
        return math.inf
    plausible = 0.0 <= per_step <= gaussian * (1.0 + 1e-12)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            own = _subsampled_gaussian_renyi_divergence(
                alpha, sample_rate, noise_multiplier, "forward"
            )
        except (ValueError, OverflowError, ZeroDivisionError):
            own = math.nan
    if plausible and not abs(per_step - own) > _OPACUS_AGREEMENT * own:  # NaN: own failed
        return per_step * steps
    if not math.isfinite(own):
        # Neither computation has a value (Opacus's series gives NaN from about α = 2000 at
        # q = 0.1; a root search on it failed with scipy's "function value is NaN").
        raise ValueError(
            f"Opacus's RDP analysis gives no value at alpha={alpha:g} (noise_multiplier="
            f"{noise_multiplier:g}, sample_rate={sample_rate:g}): its series loses precision at "
            "such orders; use a lower order"
        )
    for warning in caught:  # the quadrature's own accuracy warnings, where its value is used
        warnings.warn_explicit(warning.message, warning.category, warning.filename, warning.lineno)
    return own * steps


@finite_result()
def dpsgd_epsilon_alpha(
    noise_multiplier: float, sample_rate: float, steps: int, alpha: float
) -> float:
    """The RDP ε_α claimed for DP-SGD by Opacus's RDP accountant.

    Opacus's value is checked against
    :func:`~rdpest.stats.divergences.subsampled_gaussian_renyi_divergence` (× T); where they
    differ by more than 1e-6 (relative), which happens where Opacus's series for fractional
    orders loses precision (high orders, tiny sampling rates), the latter's value is returned.

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


@finite_result()
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
    if math.isinf(full_batch_sigma):
        raise ValueError(
            f"epsilon_alpha={epsilon_alpha:g} is too small: the noise multiplier that gives it "
            f"at alpha={alpha:g} over {steps} steps exceeds the float range"
        )
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


@finite_result()
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
