"""Certified lower bounds on D_α from a FIXED critic: the variational bracket and its certificate.

For any bounded measurable g and α > 1 (Birrell et al. 2021, the variational formula used by Kim,
Varshney & Alabi 2026, Sec. 3),

    D_α(P‖Q) >= α/(α−1) · log E_P[e^{(α−1)g}] − log E_Q[e^{αg}],

with equality at g = log(p/q). (Proof: Hölder's inequality with exponents α and α/(α−1) applied to
E_P[e^{(α−1)g}] = E_Q[(p/q)·e^{(α−1)g}].) The bracket is unchanged when a constant is added to g.

A certificate clips g to a window [lo, hi] chosen WITHOUT the certifying data, so that
A = e^{(α−1)(g−hi)} ∈ [e^{−(α−1)w}, 1] and B = e^{α(g−hi)} ∈ [e^{−αw}, 1] with w = hi − lo
are bounded. By default (``region="joint"``) the bound is the smallest bracket over one joint
(1 − β) confidence region for the two means (:func:`joint_level`); with ``region="bonferroni"``
it is the bracket at a (1 − β/2) lower confidence bound on E_P[A] and a (1 − β/2) upper one on
E_Q[B] (rdpest.stats.bounds). Either holds with probability at least 1 − β. Clipping is a
fixed function of g, so the clipped critic is again a bounded critic and the bracket inequality
applies.

A second certificate thresholds the critic (:mod:`rdpest.stats.threshold_tests`): the test
"g(x) > t" (or "<= t") has Bernoulli outputs, and Clopper–Pearson limits on its rates bound
D_α(Bern(TPR) ‖ Bern(FPR)) <= D_α(P‖Q) (the paper's Table 13 baseline, applied to the learned
critic). It wins at small divergences and small samples; :func:`certify_critic` can choose
between the two on the training split.

All functions here are pure: they take critic values, not critics, so the same certificate serves
learned critics, exact log ratios (the "oracle" used to measure tightness) and thresholds.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from rdpest.stats.bounds import (
    MEAN_BOUND_METHODS,
    _mean_lower,
    _mean_lowers,
    _mean_upper,
    _mean_uppers,
)
from rdpest.stats.regions import (
    CONFIDENCE_REGIONS,
    Certificate,
    _check_region,
    _joint_level,
    _joint_minimum,
    joint_level,
    log_mean_exp,
)
from rdpest.stats.threshold_tests import (
    _certified_threshold_bound,
    _select_threshold,
    certified_threshold_bound,
    select_threshold,
)
from rdpest.utils.validation import (
    check_beta,
    check_estimation_alpha,
    check_finite_array,
    check_option,
    check_pair,
    check_real,
    check_seed,
    finite_result,
)

# The shared pieces (regions, the record) and the threshold certificate are re-exported: this
# module is where a fixed critic is certified, whichever certificate does it.
__all__ = [
    "CERTIFICATE_KINDS",
    "CONFIDENCE_REGIONS",
    "Certificate",
    "certified_dv_bracket",
    "certified_threshold_bound",
    "certify_critic",
    "dv_bracket",
    "joint_level",
    "select_threshold",
    "select_window",
]

# Windows are proposed relative to training-split quantiles of the critic: the upper end from the
# P side (where e^{(α−1)g} carries the signal) and the lower end from the Q side.
_UPPER_QUANTILES = (0.5, 0.75, 0.9, 0.95, 0.99, 1.0)
_LOWER_QUANTILES = (0.0, 0.01, 0.05, 0.1, 0.25, 0.5)
# Window selection only needs a rough ranking of candidates: a subsample keeps it cheap at large n.
_SELECTION_SUBSAMPLE = 4000
# A window narrower than this is a constant critic, whose bracket is exactly 0.
_MIN_WIDTH = 1e-9


#: How a fixed critic is certified: the clipped variational bracket, a threshold test on the
#: critic, or whichever of the two did better on the training split ("auto").
CERTIFICATE_KINDS = ("auto", "bracket", "threshold")


def _check_method(method) -> str:
    return check_option(method, MEAN_BOUND_METHODS, "method")


@finite_result()
def dv_bracket(g_p, g_q, alpha: float) -> float:
    """Plug-in value of the variational bracket, computed stably in log space.

    Parameters
    ----------
    g_p, g_q : array-like of shape (n,)
        Critic values on samples from P and from Q.
    alpha : float
        Rényi order, >= 1 + 1e-6 (closer orders are refused: no bound there is reliable).

    Examples
    --------
    >>> dv_bracket([0.0, 0.0], [0.0, 0.0, 0.0], alpha=2.0)
    0.0
    """
    alpha = check_estimation_alpha(alpha)
    g_p = check_finite_array(g_p, "g_p")
    g_q = check_finite_array(g_q, "g_q")
    with np.errstate(over="ignore", invalid="ignore"):
        value = _dv_bracket(g_p, g_q, alpha)
    if not math.isfinite(value):
        raise ValueError(
            f"the bracket overflows: alpha * g_q or (alpha - 1) * g_p leaves the float range "
            f"(g_p, g_q up to {max(np.abs(g_p).max(), np.abs(g_q).max()):.3g}); a critic that "
            "large is not a useful one, rescale or clip it"
        )
    return value


def _dv_bracket(g_p: np.ndarray, g_q: np.ndarray, alpha: float) -> float:
    return alpha / (alpha - 1.0) * log_mean_exp((alpha - 1.0) * g_p) - log_mean_exp(alpha * g_q)


@finite_result()
def certified_dv_bracket(
    g_p,
    g_q,
    alpha: float,
    beta: float,
    window: tuple[float, float],
    method: str = "betting",
    region: str = "joint",
) -> Certificate:
    """(1 − β) lower confidence bound on D_α(P‖Q) from critic values on held-out samples.

    The critic is clipped to ``window``. ``region="joint"`` (default) bounds the bracket over one
    joint (1 − β) confidence region for the two moments (:func:`joint_level`);
    ``region="bonferroni"`` takes a (1 − β/2) bound on each. The bound is the bracket's, not
    clamped: it can be negative (a wide window, few values), which says nothing, as D_α >= 0
    always holds; the estimators report ``max(0, bound)``. With ``method="betting"`` the values
    are visited in sequence: give them in an order that does not depend on them (never sorted;
    :func:`rdpest.stats.bounds.betting_lower_bound`), or the bound loses its level.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> x, y = rng.normal(1.0, 1.0, 2000), rng.normal(0.0, 1.0, 2000)
    >>> cert = certified_dv_bracket(x - 0.5, y - 0.5, alpha=2.0, beta=0.05, window=(-2.0, 2.0))
    >>> 0.0 < cert.lower_bound < 1.0  # the truth is alpha * 1**2 / 2 = 1
    True
    """
    alpha = check_estimation_alpha(alpha)
    beta = check_beta(beta)
    g_p = check_finite_array(g_p, "g_p")
    g_q = check_finite_array(g_q, "g_q")
    lo, hi = check_pair(window, "window")
    lo, hi = check_real(lo, "window's lo"), check_real(hi, "window's hi")
    if hi < lo:
        raise ValueError(f"window must be a finite (lo, hi) with lo <= hi, got {window!r}")
    _check_method(method)
    _check_region(region)
    return _certified_dv_bracket(g_p, g_q, alpha, beta, lo, hi, method, region)


def _certified_dv_bracket(
    g_p: np.ndarray,
    g_q: np.ndarray,
    alpha: float,
    beta: float,
    lo: float,
    hi: float,
    method: str,
    region: str,
) -> Certificate:
    """:func:`certified_dv_bracket` unchecked, with the window as two floats."""
    width = hi - lo
    if width < _MIN_WIDTH:
        return Certificate(0.0, (lo, hi), 1.0, 1.0)
    a = np.exp((alpha - 1.0) * (np.clip(g_p, lo, hi) - hi))
    b = np.exp(alpha * (np.clip(g_q, lo, hi) - hi))
    # The ranges' lower ends are computed exactly as the values are (same expression, same
    # rounding), so the clipped extremes lie inside them.
    a_min = float(np.exp((alpha - 1.0) * (lo - hi)))
    b_min = float(np.exp(alpha * (lo - hi)))

    # At large α·w the ranges' lower ends underflow to 0, and so may a confidence limit. The true
    # moments are never below e^{(α−1)(lo−hi)} and e^{α(lo−hi)}: a limit that underflowed is
    # replaced by the log of that floor (a lower limit raised to a floor the mean always exceeds
    # stays valid; an upper limit raised is only more conservative). Finite limits keep their
    # value, so the bound changes only where it used to be log(0).
    log_a_floor, log_b_floor = (alpha - 1.0) * (lo - hi), alpha * (lo - hi)

    def bracket(a_mean: float, b_mean: float) -> float:
        log_a = math.log(a_mean) if a_mean > 0.0 else log_a_floor
        log_b = math.log(b_mean) if b_mean > 0.0 else log_b_floor
        return alpha / (alpha - 1.0) * log_a - log_b

    if region == "bonferroni":
        a_lower = _mean_lower(a, beta / 2, a_min, 1.0, method)
        b_upper = _mean_upper(b, beta / 2, b_min, 1.0, method)
        return Certificate(bracket(a_lower, b_upper), (lo, hi), float(a_lower), float(b_upper))
    # The bets are tuned for the level of the region's symmetric point, p_A = p_B = sqrt(c).
    design = math.sqrt(_joint_level(beta))
    bound, a_lower, b_upper = _joint_minimum(
        lambda levels: _mean_lowers(a, levels, a_min, 1.0, method, design),
        lambda levels: _mean_uppers(b, levels, b_min, 1.0, method, design),
        bracket,
        beta,
    )
    return Certificate(bound, (lo, hi), a_lower, b_upper)


@finite_result()
def select_window(
    g_p, g_q, alpha: float, beta: float, method: str = "betting", random_state: int = 0
) -> tuple[float, float]:
    """Choose the clipping window on TRAINING critic values by the certificate it would give.

    Candidate windows pair upper quantiles of ``g_p`` with lower quantiles of ``g_q``; each is
    scored by the certified bound (β/2 per moment) it yields on these same (training) values; the
    best is returned. Data used here must be disjoint from the data that certify: a window chosen
    on the certifying data would make the certificate's confidence level invalid.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> lo, hi = select_window(rng.normal(1, 1, 500), rng.normal(0, 1, 500), 2.0, 0.05)
    >>> lo < hi
    True
    """
    alpha = check_estimation_alpha(alpha)
    beta = check_beta(beta)
    g_p = check_finite_array(g_p, "g_p")
    g_q = check_finite_array(g_q, "g_q")
    _check_method(method)
    random_state = check_seed(random_state, "random_state")
    return _best_window(g_p, g_q, alpha, beta, method, random_state=random_state)[0]


def _best_window(
    g_p, g_q, alpha, beta, method, region="bonferroni", random_state=0
) -> tuple[tuple[float, float], float]:
    """The best window and the bound it gives on the (training) values themselves.

    Candidates are ranked with the cheap two-box (Bonferroni) bound, a proxy that orders windows
    like the joint one; the winner's score is then computed with ``region``, so that
    :func:`certify_critic` compares it on the same footing with a threshold test.
    """
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
            cert = _certified_dv_bracket(
                g_p, g_q, alpha, beta, float(lo), float(hi), method, "bonferroni"
            )
            if cert.lower_bound > best:
                best, best_window = cert.lower_bound, (float(lo), float(hi))
    if region != "bonferroni" and math.isfinite(best):
        best = _certified_dv_bracket(
            g_p, g_q, alpha, beta, *best_window, method, region
        ).lower_bound
    return best_window, best


@finite_result()
def certify_critic(
    g_p_train,
    g_q_train,
    g_p_test,
    g_q_test,
    alpha: float,
    beta: float,
    method: str = "betting",
    kind: str = "bracket",
    region: str = "joint",
) -> Certificate:
    """Choose how to certify on the training values, then certify on the disjoint test values.

    ``kind="bracket"`` selects a clipping window (:func:`select_window`) and certifies the
    bracket; ``kind="threshold"`` selects a threshold test on the critic
    (:func:`select_threshold`) and certifies its rates; ``kind="auto"`` computes both choices'
    bounds on the training values and certifies only the better one, at the full level beta (the
    choice uses training data only, so it costs nothing, and it adapts to whichever certificate
    suits the pair; see benchmarks/results/estimators/). The threshold test's training score
    pays for its search over thresholds (level β/(2K)), except where the training values are
    perfectly separated (every P value above every Q value), where it is scored at β.
    ``region`` combines the two samples' confidence statements (:data:`CONFIDENCE_REGIONS`;
    "joint" by default, see :func:`joint_level`). The test values must come in an order that
    does not depend on them (never sorted): the betting bounds visit them in sequence.

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
    check_option(kind, CERTIFICATE_KINDS, "kind")
    _check_region(region)
    if kind != "threshold":
        _check_method(method)
    alpha = check_estimation_alpha(alpha)
    beta = check_beta(beta)
    values = [
        check_finite_array(g, name)
        for g, name in (
            (g_p_train, "g_p_train"),
            (g_q_train, "g_q_train"),
            (g_p_test, "g_p_test"),
            (g_q_test, "g_q_test"),
        )
    ]
    return _certify_critic(*values, alpha, beta, method, kind, region)


def _certify_critic(
    g_p_train: np.ndarray,
    g_q_train: np.ndarray,
    g_p_test: np.ndarray,
    g_q_test: np.ndarray,
    alpha: float,
    beta: float,
    method: str,
    kind: str,
    region: str,
) -> Certificate:
    """:func:`certify_critic` unchecked."""
    use_bracket = kind == "bracket"
    if kind != "threshold":
        window, bracket_score = _best_window(g_p_train, g_q_train, alpha, beta, method, region)
    if kind != "bracket":
        threshold, side, threshold_score = _select_threshold(
            np.sort(g_p_train), np.sort(g_q_train), alpha, beta, region
        )
        if kind == "auto" and g_p_train.min() > g_q_train.max():
            # Perfectly separated training values: the search's optimism, which its score pays
            # for at β/(2K), is the gap's, and separated values certify more by the threshold test
            # than by any window (the bracket's moments reach their extremes only in the limit);
            # it is compared at its own level. The choice still sees training values only, so the
            # certificate keeps its level (DV on 20 audit runs per side 100 sd apart certified
            # about 0.17 by the bracket, against the threshold test's ceiling of 0.596). Only P
            # above Q counts: the critic is trained to score P higher.
            threshold_score = _certified_threshold_bound(
                g_p_train, g_q_train, alpha, beta, threshold, side, region
            ).lower_bound
        use_bracket = kind == "auto" and bracket_score >= threshold_score
    if use_bracket:
        return _certified_dv_bracket(g_p_test, g_q_test, alpha, beta, *window, method, region)
    return _certified_threshold_bound(g_p_test, g_q_test, alpha, beta, threshold, side, region)


@functools.lru_cache(maxsize=256)
def _separated_bracket_ceiling(
    n_p: int, n_q: int, alpha: float, beta: float, critic_bound: float, method: str, region: str
) -> float:
    """The bracket certificate of perfectly separated critic values (P's at the top of the
    window, Q's at its bottom), for the best window width up to 2·critic_bound.

    A coarse grid of widths, then a finer one around the best (the bound is unimodal in the
    width: wider windows raise the Q moment's contrast and lower the P moment's floor).
    """

    def at(width: float) -> float:
        half = width / 2
        return _certified_dv_bracket(
            np.full(n_p, half), np.full(n_q, -half), alpha, beta, -half, half, method, region
        ).lower_bound

    widths = np.geomspace(1e-2, 2 * critic_bound, 12)
    values = [at(float(w)) for w in widths]
    i = int(np.argmax(values))
    fine = np.geomspace(widths[max(i - 1, 0)], widths[min(i + 1, len(widths) - 1)], 9)
    return float(max(0.0, *values, *(at(float(w)) for w in fine)))
