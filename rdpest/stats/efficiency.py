"""How precisely any estimator can estimate D_α(P‖Q) from two samples: the efficiency bound.

An estimate of D_α(P‖Q) from n_p draws of P and n_q of Q, with nothing assumed of the two laws (the
nonparametric model, the one rdpest's estimators work in), cannot be more precise than the
efficient influence function allows. Write r = p/q and m = ∫ p^α q^{1−α} = E_P[r^{α−1}] =
E_Q[r^α], so that D_α = log(m)/(α−1). Perturbing P in a direction h changes m by
α·E_h[r^{α−1}] to first order, and perturbing Q changes it by −(α−1)·E_h[r^α] (the von Mises
derivative of a divergence functional; Kandasamy et al. 2015, "Nonparametric von Mises estimators
for entropies, divergences and mutual informations", derive these for the Rényi family). The
efficient influence functions of m are therefore α(r^{α−1}(x) − m) on P's sample and
−(α−1)(r^α(y) − m) on Q's, and no regular estimator of D_α has an asymptotic variance below

    se² = [α²·Var_P(r^{α−1})/n_p + (α−1)²·Var_Q(r^α)/n_q] / ((α−1)·m)²

(the convolution theorem of Hájek and Le Cam; Bickel, Klaassen, Ritov & Wellner 1993, Ch. 3, for
the two-sample case the two samples' terms add). The moments are Rényi divergences at other
orders, E_Q[r^β] = e^{(β−1)·D_β}, so the two relative variances are

    Var_P(r^{α−1})/m² = e^{2(α−1)(D_{2α−1} − D_α)} − 1,
    Var_Q(r^α)/m² = e^{(2α−1)·D_{2α} − 2(α−1)·D_α} − 1.

The variational bracket α/(α−1)·log mean_P e^{(α−1)g} − log mean_Q e^{αg} evaluated at the exact
log ratio g = log r has exactly this delta-method variance: the bracket is the efficient estimator,
and a critic learnt from the samples can at best approach it. The plug-in estimates that *know* r,
log(mean_P r^{α−1})/(α−1) and log(mean_Q r^α)/(α−1), have the first term without its factor α²
and the second term alone: the bound is at least α times the first's error and α − 1 times the
second's, and at least √(α² + (α−1)²) times the better of the two (2.2 times at α = 2, 5 times at
α = 4). No estimator that learns the ratio comes within a factor 2 of the better known-ratio
plug-in at α ≥ 2, except by bias that happens to help (shrinkage towards a favourable value).

Where D_{2α−1} or D_{2α} is infinite (a scale change of a Gaussian or a Laplace law near its
limiting order) the influence function has infinite variance: no estimator reaches the √n rate.
Where the relative variances are large (e^{10} and more), the normal approximation needs far more
samples than an audit has, and the sample moments' skew, not their variance, decides the error.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable

import numpy as np

from rdpest.utils.validation import check_alpha, check_int

__all__ = ["efficient_standard_error"]

# Slack for the monotonicity check of D in its order (quadrature and root finding round).
_ORDER_SLACK = 1e-9


def efficient_standard_error(
    divergence: Callable[[float], float], alpha: float, n_p: int, n_q: int | None = None
) -> float:
    """The smallest asymptotic standard error of any regular estimator of D_α(P‖Q), in nats.

    Parameters
    ----------
    divergence : callable
        ``divergence(order)`` is the exact D_order(P‖Q) of the pair (``inf`` where infinite);
        it is called at orders α, 2α − 1 and 2α.
    alpha : float
        The order α > 1 of the divergence estimated.
    n_p, n_q : int
        Sample sizes of P and Q (n_q defaults to n_p).

    Returns
    -------
    float
        se of the module docstring: the standard error of the exact log ratio's bracket, which no
        regular estimator beats asymptotically. ``inf`` where D_{2α−1} or D_{2α} is infinite, or
        where the variance overflows a float; 0 where P = Q (the error is then of order 1/n).

    Raises
    ------
    ValueError
        If ``divergence`` is not callable, returns a value that is not a real number ≥ 0 (or a
        non-finite D_α), or decreases in the order (then it is not a Rényi divergence); on a bad
        order or sample size.

    Examples
    --------
    Two Gaussians a unit shift apart (the Gaussian mechanism at sensitivity / σ = 1) have
    D_β = β/2 at every order. At α = 2 and 1,000 draws on each side:

    >>> round(efficient_standard_error(lambda order: order / 2, alpha=2.0, n_p=1000), 3)
    0.246
    """
    if not callable(divergence):
        raise ValueError(f"divergence must be a callable of the order, got {divergence!r}")
    alpha = check_alpha(alpha)
    n_p = check_int(n_p, "n_p", 1)
    n_q = n_p if n_q is None else check_int(n_q, "n_q", 1)
    d_alpha, d_odd, d_even = (
        _divergence_at(divergence, order) for order in (alpha, 2.0 * alpha - 1.0, 2.0 * alpha)
    )
    if not math.isfinite(d_alpha):
        raise ValueError(f"divergence({alpha!r}) must be finite to be estimated, got {d_alpha!r}")
    slack = _ORDER_SLACK * (1.0 + d_alpha)
    if d_odd < d_alpha - slack or d_even < d_odd - slack:
        raise ValueError(
            "divergence must not decrease in the order (Rényi divergences do not), got "
            f"D at orders {alpha:g}, {2 * alpha - 1:g}, {2 * alpha:g}: {d_alpha!r}, {d_odd!r}, "
            f"{d_even!r}"
        )
    with np.errstate(over="ignore"):
        p_term = np.expm1(2.0 * (alpha - 1.0) * max(d_odd - d_alpha, 0.0))
        q_term = np.expm1(max((2.0 * alpha - 1.0) * d_even - 2.0 * (alpha - 1.0) * d_alpha, 0.0))
        variance = (alpha**2 * p_term / n_p + (alpha - 1.0) ** 2 * q_term / n_q) / (
            alpha - 1.0
        ) ** 2
    return float(np.sqrt(variance))


def _divergence_at(divergence: Callable[[float], float], order: float) -> float:
    """``divergence(order)`` as a float ≥ 0 or +inf, or a ValueError naming the order."""
    try:
        value = divergence(order)
    except ValueError as exc:  # e.g. an order above what the callable's own checks allow
        raise ValueError(
            f"divergence({order!r}) raised: {exc} (the standard error needs D at orders α, "
            "2α − 1 and 2α)"
        ) from exc
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f"divergence({order!r}) must be a real number, got {value!r}")
    value = float(value)
    if math.isnan(value) or value < 0.0:
        raise ValueError(f"divergence({order!r}) must be ≥ 0 (or inf), got {value!r}")
    return value
