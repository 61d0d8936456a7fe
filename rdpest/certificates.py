"""Certified lower bounds on D_α from a FIXED critic: the variational bracket and its certificate.

For any bounded measurable g and α > 1 (Birrell et al. 2021, the variational formula used by Kim,
Varshney & Alabi 2026, Sec. 3),

    D_α(P‖Q) >= α/(α−1) · log E_P[e^{(α−1)g}] − log E_Q[e^{αg}],

with equality at g = log(p/q). (Proof: Hölder's inequality with exponents α and α/(α−1) applied to
E_P[e^{(α−1)g}] = E_Q[(p/q)·e^{(α−1)g}].) The bracket is unchanged when a constant is added to g.

A certificate clips g to a window [lo, hi] chosen WITHOUT the certifying data, so that
A = e^{(α−1)(g−hi)} ∈ [e^{−(α−1)w}, 1] and B = e^{α(g−hi)} ∈ [e^{−αw}, 1] with w = hi − lo
are bounded; a (1 − β/2) lower confidence bound on E_P[A] and a (1 − β/2) upper one on E_Q[B]
(rdpest.bounds) then give a bound that holds with probability at least 1 − β (union bound).
Clipping is a fixed function of g, so the clipped critic is again a bounded critic and the bracket
inequality applies.

All functions here are pure: they take critic values, not critics, so the same certificate serves
learned critics, exact log ratios (the "oracle" used to measure tightness) and thresholds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.special import logsumexp

from rdpest._checks import check_alpha, check_beta, check_finite_array
from rdpest.bounds import MEAN_BOUND_METHODS, mean_lower_bound, mean_upper_bound

__all__ = ["Certificate", "certified_dv_bracket", "certify_critic", "dv_bracket", "select_window"]

# Windows are proposed relative to training-split quantiles of the critic: the upper end from the
# P side (where e^{(α−1)g} carries the signal) and the lower end from the Q side.
_UPPER_QUANTILES = (0.5, 0.75, 0.9, 0.95, 0.99, 1.0)
_LOWER_QUANTILES = (0.0, 0.01, 0.05, 0.1, 0.25, 0.5)
# Window selection only needs a rough ranking of candidates: a subsample keeps it cheap at large n.
_SELECTION_SUBSAMPLE = 4000
# A window narrower than this is a constant critic, whose bracket is exactly 0.
_MIN_WIDTH = 1e-9


@dataclass(frozen=True)
class Certificate:
    """A certified lower bound with the window that produced it."""

    lower_bound: float
    window: tuple[float, float]
    mean_p_lower: float
    mean_q_upper: float


def _log_mean_exp(values: np.ndarray) -> float:
    return float(logsumexp(values) - math.log(values.size))


def dv_bracket(g_p, g_q, alpha: float) -> float:
    """Plug-in value of the variational bracket, computed stably in log space.

    Parameters
    ----------
    g_p, g_q : array-like of shape (n,)
        Critic values on samples from P and from Q.
    alpha : float
        Rényi order, > 1.

    Examples
    --------
    >>> dv_bracket([0.0, 0.0], [0.0, 0.0, 0.0], alpha=2.0)
    0.0
    """
    alpha = check_alpha(alpha)
    g_p = check_finite_array(g_p, "g_p")
    g_q = check_finite_array(g_q, "g_q")
    return alpha / (alpha - 1.0) * _log_mean_exp((alpha - 1.0) * g_p) - _log_mean_exp(alpha * g_q)


def certified_dv_bracket(
    g_p, g_q, alpha: float, beta: float, window: tuple[float, float], method: str = "betting"
) -> Certificate:
    """(1 − β) lower confidence bound on D_α(P‖Q) from critic values on held-out samples.

    The critic is clipped to ``window``; β is split equally between the two moments.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> x, y = rng.normal(1.0, 1.0, 2000), rng.normal(0.0, 1.0, 2000)
    >>> cert = certified_dv_bracket(x - 0.5, y - 0.5, alpha=2.0, beta=0.05, window=(-2.0, 2.0))
    >>> 0.0 < cert.lower_bound < 1.0  # the truth is alpha * 1**2 / 2 = 1
    True
    """
    alpha = check_alpha(alpha)
    beta = check_beta(beta)
    g_p = check_finite_array(g_p, "g_p")
    g_q = check_finite_array(g_q, "g_q")
    lo, hi = float(window[0]), float(window[1])
    if not (math.isfinite(lo) and math.isfinite(hi)) or hi < lo:
        raise ValueError(f"window must be a finite (lo, hi) with lo <= hi, got {window!r}")
    if method not in MEAN_BOUND_METHODS:
        raise ValueError(f"method must be one of {MEAN_BOUND_METHODS}, got {method!r}")
    width = hi - lo
    if width < _MIN_WIDTH:
        return Certificate(0.0, (lo, hi), 1.0, 1.0)
    a = np.exp((alpha - 1.0) * (np.clip(g_p, lo, hi) - hi))
    b = np.exp(alpha * (np.clip(g_q, lo, hi) - hi))
    # The ranges' lower ends are computed exactly as the values are (same expression, same
    # rounding), so the clipped extremes lie inside them.
    a_min = float(np.exp((alpha - 1.0) * (lo - hi)))
    b_min = float(np.exp(alpha * (lo - hi)))
    a_lower = mean_lower_bound(a, beta / 2, a_min, 1.0, method=method)
    b_upper = mean_upper_bound(b, beta / 2, b_min, 1.0, method=method)
    bound = alpha / (alpha - 1.0) * math.log(a_lower) - math.log(b_upper)
    return Certificate(float(bound), (lo, hi), float(a_lower), float(b_upper))


def select_window(
    g_p, g_q, alpha: float, beta: float, method: str = "betting", random_state: int = 0
) -> tuple[float, float]:
    """Choose the clipping window on TRAINING critic values by the certificate it would give.

    Candidate windows pair upper quantiles of ``g_p`` with lower quantiles of ``g_q``; each is
    scored by the certified bound it yields on these same (training) values; the best is returned.
    Data used here must be disjoint from the data that certify (DESIGN.md, statistical rule 2).

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> lo, hi = select_window(rng.normal(1, 1, 500), rng.normal(0, 1, 500), 2.0, 0.05)
    >>> lo < hi
    True
    """
    g_p = check_finite_array(g_p, "g_p")
    g_q = check_finite_array(g_q, "g_q")
    rng = np.random.default_rng(random_state)
    if g_p.size > _SELECTION_SUBSAMPLE:
        g_p = rng.choice(g_p, _SELECTION_SUBSAMPLE, replace=False)
    if g_q.size > _SELECTION_SUBSAMPLE:
        g_q = rng.choice(g_q, _SELECTION_SUBSAMPLE, replace=False)
    uppers = np.unique(np.quantile(g_p, _UPPER_QUANTILES))
    lowers = np.unique(np.quantile(g_q, _LOWER_QUANTILES))
    best, best_window = -math.inf, (float(lowers[0]), float(max(uppers[-1], lowers[0])))
    for hi in uppers:
        for lo in lowers:
            if hi - lo < _MIN_WIDTH:
                continue
            cert = certified_dv_bracket(g_p, g_q, alpha, beta, (lo, hi), method)
            if cert.lower_bound > best:
                best, best_window = cert.lower_bound, (float(lo), float(hi))
    return best_window


def certify_critic(
    g_p_train, g_q_train, g_p_test, g_q_test, alpha: float, beta: float, method: str = "betting"
) -> Certificate:
    """Select a window on the training values, then certify on the disjoint test values.

    Examples
    --------
    >>> rng = np.random.default_rng(1)
    >>> log_ratio = lambda x: x - 0.5  # exact log p/q for N(1, 1) against N(0, 1)
    >>> xp, xq = rng.normal(1, 1, 1000), rng.normal(0, 1, 1000)
    >>> cert = certify_critic(log_ratio(xp[:500]), log_ratio(xq[:500]),
    ...                       log_ratio(xp[500:]), log_ratio(xq[500:]), alpha=2.0, beta=0.05)
    >>> 0.0 < cert.lower_bound < 1.0
    True
    """
    window = select_window(g_p_train, g_q_train, alpha, beta, method)
    return certified_dv_bracket(g_p_test, g_q_test, alpha, beta, window, method)
