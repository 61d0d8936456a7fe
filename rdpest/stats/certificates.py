"""Certified lower bounds on D_α from a FIXED critic: the variational bracket and its certificate.

For any bounded measurable g and α > 1 (Birrell et al. 2021, the variational formula used by Kim,
Varshney & Alabi 2026, Sec. 3),

    D_α(P‖Q) >= α/(α−1) · log E_P[e^{(α−1)g}] − log E_Q[e^{αg}],

with equality at g = log(p/q). (Proof: Hölder's inequality with exponents α and α/(α−1) applied to
E_P[e^{(α−1)g}] = E_Q[(p/q)·e^{(α−1)g}].) The bracket is unchanged when a constant is added to g.

A certificate clips g to a window [lo, hi] chosen WITHOUT the certifying data, so that
A = e^{(α−1)(g−hi)} ∈ [e^{−(α−1)w}, 1] and B = e^{α(g−hi)} ∈ [e^{−αw}, 1] with w = hi − lo
are bounded; a (1 − β/2) lower confidence bound on E_P[A] and a (1 − β/2) upper one on E_Q[B]
(rdpest.stats.bounds) then give a bound that holds with probability at least 1 − β (union bound).
Clipping is a fixed function of g, so the clipped critic is again a bounded critic and the bracket
inequality applies.

A second certificate thresholds the critic: the test "g(x) > t" (or "<= t") has Bernoulli outputs,
and Clopper–Pearson limits on its rates bound D_α(Bern(TPR) ‖ Bern(FPR)) <= D_α(P‖Q) (the
paper's Table 13 baseline, applied to the learned critic). It wins at small divergences and small
samples; :func:`certify_critic` can choose between the two on the training split.

All functions here are pure: they take critic values, not critics, so the same certificate serves
learned critics, exact log ratios (the "oracle" used to measure tightness) and thresholds.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np
from scipy import optimize
from scipy.special import logsumexp

from rdpest.stats.bounds import (
    MEAN_BOUND_METHODS,
    _clopper_pearson,
    _mean_lower,
    _mean_lowers,
    _mean_upper,
    _mean_uppers,
)
from rdpest.stats.divergences import _bernoulli_renyi_divergence
from rdpest.utils.validation import check_alpha, check_beta, check_finite_array

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
_THRESHOLD_QUANTILES = np.linspace(0.02, 0.98, 25)
# A window narrower than this is a constant critic, whose bracket is exactly 0.
_MIN_WIDTH = 1e-9


#: How a fixed critic is certified: the clipped variational bracket, a threshold test on the
#: critic, or whichever of the two did better on the training split ("auto").
CERTIFICATE_KINDS = ("auto", "bracket", "threshold")

#: How the two one-sided confidence statements (one per sample) are combined: "joint" (one
#: confidence region from the product of the two p-values) or "bonferroni" (beta/2 each).
CONFIDENCE_REGIONS = ("joint", "bonferroni")
# Grid of the joint region's boundary: s in {0, 1/J, ..., 1}, see _joint_minimum.
_JOINT_GRID = 16


@dataclass(frozen=True)
class Certificate:
    """A certified lower bound and what produced it.

    For ``kind="bracket"``: the clipping ``window`` and the confidence limits of the two moments.
    For ``kind="threshold"``: ``threshold`` (value, side) and the Clopper–Pearson limits TPR_lo
    (in ``mean_p_lower``) and FPR_hi (in ``mean_q_upper``).
    """

    lower_bound: float
    window: tuple[float, float] | None
    mean_p_lower: float
    mean_q_upper: float
    kind: str = "bracket"
    threshold: tuple[float, str] | None = None


def _log_mean_exp(values: np.ndarray) -> float:
    return float(logsumexp(values) - math.log(values.size))


def joint_level(beta: float) -> float:
    """The cut-off c of the product test: c (1 − log c) = β.

    For independent p-values p₁, p₂ that are valid (super-uniform) at the true parameters,
    P(p₁ p₂ <= c) <= c (1 − log c), the distribution function of a product of two independent
    uniforms (the two-sample case behind Fisher's combination of p-values, R. A. Fisher,
    Statistical Methods for Research Workers, 4th ed., 1932). So {(a, b): p₁(a) p₂(b) > c} is a
    (1 − β) joint confidence region for the two parameters: one region for both samples,
    instead of a box of two separate (1 − β/2) intervals (Bonferroni). The region lets the two
    confidence statements trade level against each other, and the certified bounds over it are
    typically tighter than over the box (see benchmarks/results/estimators/).

    Examples
    --------
    >>> c = joint_level(0.05)
    >>> round(c, 6), round(c * (1 - math.log(c)), 12)
    (0.008705, 0.05)
    """
    return _joint_level(check_beta(beta))


@functools.lru_cache(maxsize=256)
def _joint_level(beta: float) -> float:
    """:func:`joint_level` unchecked and cached: its root finding would otherwise run on every
    certificate, always for the same few levels."""
    c = float(
        optimize.brentq(
            lambda c: c * (1.0 - math.log(c)) - beta, 1e-300, beta, xtol=1e-300, rtol=1e-15
        )
    )
    # c (1 − log c) increases in c: step down past rounding so the region's level is >= 1 − β.
    while c * (1.0 - math.log(c)) > beta:
        c = math.nextafter(c, 0.0)
    return c


def _joint_minimum(lower_at, upper_at, objective, beta: float) -> tuple[float, float, float]:
    """Minimum of ``objective(a, b)`` over the joint region {p_A(a) p_B(b) > c}, conservatively.

    ``objective`` increases in a and decreases in b; ``lower_at(levels)`` and ``upper_at(levels)``
    return nested one-sided bounds for a and for b (the bounds of ONE p-value function each). On
    the region's boundary p_A = c^s and p_B = c^(1−s) for some s in [0, 1]. For s in
    [s_j, s_{j+1}] of a grid, a point of the region has a >= lower_at(c^{s_{j+1}}) and
    b <= upper_at(c^{1−s_j}) (a larger p-value means a bound at a larger level, nested), so the
    minimum over j of objective at those two limits is a valid lower bound for every point of the
    region: gridding only makes it more conservative. Returns (bound, a, b) at the minimiser.
    """
    c = _joint_level(beta)
    s = np.linspace(0.0, 1.0, _JOINT_GRID + 1)
    a = np.asarray(lower_at(c ** s[1:]), dtype=float)  # levels c^{s_{j+1}}, j = 0..J-1
    b = np.asarray(upper_at(c ** (1.0 - s[:-1])), dtype=float)  # levels c^{1-s_j}
    values = np.array([objective(float(ai), float(bi)) for ai, bi in zip(a, b, strict=True)])
    j = int(np.argmin(values))
    return float(values[j]), float(a[j]), float(b[j])


def _check_method(method) -> str:
    if not isinstance(method, str) or method not in MEAN_BOUND_METHODS:
        raise ValueError(f"method must be one of {MEAN_BOUND_METHODS}, got {method!r}")
    return method


def _check_region(region: str) -> str:
    if region not in CONFIDENCE_REGIONS:
        raise ValueError(f"region must be one of {CONFIDENCE_REGIONS}, got {region!r}")
    return region


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
    return _dv_bracket(g_p, g_q, alpha)


def _dv_bracket(g_p: np.ndarray, g_q: np.ndarray, alpha: float) -> float:
    return alpha / (alpha - 1.0) * _log_mean_exp((alpha - 1.0) * g_p) - _log_mean_exp(alpha * g_q)


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
    ``region="bonferroni"`` takes a (1 − β/2) bound on each.

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

    def bracket(a_mean: float, b_mean: float) -> float:
        return alpha / (alpha - 1.0) * math.log(a_mean) - math.log(b_mean)

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
    alpha = check_alpha(alpha)
    beta = check_beta(beta)
    g_p = check_finite_array(g_p, "g_p")
    g_q = check_finite_array(g_q, "g_q")
    _check_method(method)
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
    suits the pair; see benchmarks/results/estimators/). ``region`` combines the two samples'
    confidence statements (:data:`CONFIDENCE_REGIONS`; "joint" by default, see
    :func:`joint_level`).

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
    if kind not in CERTIFICATE_KINDS:
        raise ValueError(f"kind must be one of {CERTIFICATE_KINDS}, got {kind!r}")
    _check_region(region)
    if kind != "threshold":
        _check_method(method)
    alpha = check_alpha(alpha)
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
        use_bracket = kind == "auto" and bracket_score >= threshold_score
    if use_bracket:
        return _certified_dv_bracket(g_p_test, g_q_test, alpha, beta, *window, method, region)
    return _certified_threshold_bound(g_p_test, g_q_test, alpha, beta, threshold, side, region)


# ---------------------------------------------------------------------------------------------
# Threshold certificates: a test that thresholds the critic (or any fixed score)
# ---------------------------------------------------------------------------------------------

#: The two sides of a threshold test: "upper" says P when s > t, "lower" when s <= t.
SIDES = ("upper", "lower")


def bernoulli_divergences(a: np.ndarray, b: np.ndarray, alpha: float) -> np.ndarray:
    """D_α(Bern(a) ‖ Bern(b)) where a > b (0 elsewhere); for ranking thresholds only."""
    out = np.zeros(np.broadcast(a, b).shape)
    a, b = np.broadcast_arrays(a, b)
    ok = (a > b) & (b > 0.0) & (a < 1.0)
    la, lb = np.log(a[ok]), np.log(b[ok])
    l1a, l1b = np.log1p(-a[ok]), np.log1p(-b[ok])
    log_moment = np.logaddexp(alpha * la + (1.0 - alpha) * lb, alpha * l1a + (1.0 - alpha) * l1b)
    out[ok] = np.maximum(log_moment, 0.0) / (alpha - 1.0)
    # a == 1 > b: the moment is b^{1−α} + 0, finite; b == 0 < a: infinite (cannot occur for the
    # Clopper–Pearson upper bound, which is > 0).
    edge = (a > b) & (a >= 1.0) & (b > 0.0)
    out[edge] = -np.log(b[edge])
    return out


def counts_above(sorted_scores: np.ndarray, thresholds: np.ndarray) -> np.ndarray:
    """#{s > t} for each threshold t."""
    return sorted_scores.size - np.searchsorted(sorted_scores, thresholds, side="right")


def cut_points(s_p: np.ndarray, s_q: np.ndarray) -> np.ndarray:
    """Midpoints between consecutive distinct pooled scores (every partition by a threshold)."""
    values = np.unique(np.concatenate([s_p, s_q]))
    if values.size == 1:
        return values
    return values[:-1] / 2.0 + values[1:] / 2.0


def positives(scores: np.ndarray, threshold: float, side: str) -> np.ndarray:
    return scores > threshold if side == "upper" else scores <= threshold


def _search_thresholds(
    s_p: np.ndarray,
    s_q: np.ndarray,
    candidates: np.ndarray,
    level_p: float,
    level_q: float,
    objective,
    *,
    margin_ties: bool,
) -> tuple[int, str, int, int] | None:
    """The threshold test with the largest ``objective`` over ``candidates`` and both sides.

    The one search kernel of threshold tests. ``s_p`` and ``s_q`` are SORTED scores; a candidate t
    on side "upper" says P when s > t, on side "lower" when s <= t. Each (t, side) is scored by
    ``objective(TPR_lo, FPR_hi)`` (arrays over the candidates) with TPR_lo and FPR_hi the
    Clopper–Pearson limits of its counts at ``level_p`` and ``level_q``; the limits depend on
    the counts only, so one table per sample serves every candidate.

    Ties: with ``margin_ties`` a tie in the objective goes to the larger margin TPR_lo − FPR_hi
    (then the first candidate), within a side and between sides; without it, to the first
    candidate within a side and to "upper" between sides. Returns (index of the candidate, side,
    TPR count, FPR count), or None if no candidate has an objective above −∞ (or NaN only).
    """
    n_p, n_q = s_p.size, s_q.size
    above_p = counts_above(s_p, candidates)
    above_q = counts_above(s_q, candidates)
    lo_table = _clopper_pearson(np.arange(n_p + 1), n_p, level_p, "lower")
    hi_table = _clopper_pearson(np.arange(n_q + 1), n_q, level_q, "upper")
    best_key: tuple[float, ...] = (-math.inf, -math.inf) if margin_ties else (-math.inf,)
    best = None
    for side in SIDES:
        k_p = above_p if side == "upper" else n_p - above_p
        k_q = above_q if side == "upper" else n_q - above_q
        lo_p, hi_q = lo_table[k_p], hi_table[k_q]
        values = objective(lo_p, hi_q)
        if margin_ties:
            margin = lo_p - hi_q
            i = int(np.lexsort((-margin, -values))[0])
            key: tuple[float, ...] = (float(values[i]), float(margin[i]))
        else:
            i = int(np.argmax(values))
            key = (float(values[i]),)
        if key > best_key:
            best_key, best = key, (i, side, int(k_p[i]), int(k_q[i]))
    return best


def select_threshold(
    s_p, s_q, alpha: float, beta: float, region: str = "bonferroni"
) -> tuple[float, str, float]:
    """Threshold and side of a test "s says P" chosen on TRAINING scores, and a training score.

    A grid of pooled quantiles and both sides are tried; each is scored by the bound
    :func:`certified_threshold_bound` would give on these same scores. The third value is the
    chosen test's bound with the choice paid for (a union bound over the candidates), the score
    that :func:`certify_critic` compares with the bracket's.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> t, side, bound = select_threshold(rng.normal(2, 1, 400), rng.normal(0, 1, 400), 2.0, 0.05)
    >>> side, bound > 0
    ('upper', True)
    """
    alpha = check_alpha(alpha)
    beta = check_beta(beta)
    s_p = np.sort(check_finite_array(s_p, "s_p"))
    s_q = np.sort(check_finite_array(s_q, "s_q"))
    return _select_threshold(s_p, s_q, alpha, beta, region)


def _select_threshold(
    s_p: np.ndarray, s_q: np.ndarray, alpha: float, beta: float, region: str
) -> tuple[float, str, float]:
    """:func:`select_threshold` unchecked, on SORTED scores."""
    # A fixed grid of pooled quantiles, like the windows' grid: choosing among all cut points
    # overfits the training split, and "auto" would then prefer thresholds that do not certify
    # better on new data (see benchmarks/results/estimators/).
    candidates = np.unique(np.quantile(np.concatenate([s_p, s_q]), _THRESHOLD_QUANTILES))
    n_p, n_q = s_p.size, s_q.size
    found = _search_thresholds(
        s_p,
        s_q,
        candidates,
        beta / 2,
        beta / 2,
        lambda lo_p, hi_q: bernoulli_divergences(lo_p, hi_q, alpha),
        margin_ties=False,
    )
    i, side, k_p, k_q = (0, "upper", 0, 0) if found is None else found
    # The returned score pays for the choice among the 2K candidates (level beta / (2K) instead
    # of beta, combined by ``region``): the search is optimistic on the data it searched, and
    # this puts it on the footing of the window search when certify_critic(kind="auto") compares
    # the two (without it "auto" prefers thresholds that then certify less on new data).
    score = _rates_bound(k_p, n_p, k_q, n_q, alpha, beta / (2 * candidates.size), region)[0]
    return float(candidates[i]), side, float(score)


def _rates_bound(
    k_p: int, n_p: int, k_q: int, n_q: int, alpha: float, beta: float, region: str
) -> tuple[float, float, float]:
    """(bound, TPR_lo, FPR_hi): the least D_α(Bern(TPR) ‖ Bern(FPR)) over a confidence region.

    The Clopper–Pearson limits are the inversions of the exact binomial tail p-values
    P_t(K_p >= k_p) and P_f(K_q <= k_q), so they serve both the Bonferroni box and the joint
    region (:func:`joint_level`).
    """

    def divergence(tpr: float, fpr: float) -> float:
        return _bernoulli_renyi_divergence(alpha, tpr, fpr) if tpr > fpr else 0.0

    if region == "bonferroni":
        tpr_lo = float(_clopper_pearson(k_p, n_p, beta / 2, "lower"))
        fpr_hi = float(_clopper_pearson(k_q, n_q, beta / 2, "upper"))
        return float(divergence(tpr_lo, fpr_hi)), tpr_lo, fpr_hi
    return _joint_minimum(
        lambda levels: _clopper_pearson(k_p, n_p, levels, "lower"),
        lambda levels: _clopper_pearson(k_q, n_q, levels, "upper"),
        divergence,
        beta,
    )


def certified_threshold_bound(
    s_p, s_q, alpha: float, beta: float, threshold: tuple[float, str], region: str = "joint"
) -> Certificate:
    """(1 − β) lower bound D_α(Bern(TPR_lo) ‖ Bern(FPR_hi)) of a FIXED threshold test.

    The test says P when s > t (side "upper") or s <= t ("lower"); by post-processing its Bernoulli
    outputs have D_α <= D_α(P‖Q) (Kim, Varshney & Alabi 2026, Table 13; see
    rdpest.estimators.threshold). The bound is the least such divergence over a (1 − β) confidence
    region for (TPR, FPR) from the exact binomial tests: ``region="joint"`` (default, one region
    from the product of the two p-values, :func:`joint_level`) or ``"bonferroni"`` (Clopper–Pearson
    limits at β/2 each, the paper's baseline).

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> cert = certified_threshold_bound(rng.normal(2, 1, 400), rng.normal(0, 1, 400), 2.0, 0.05,
    ...                                  (1.0, "upper"))
    >>> 0.0 < cert.lower_bound < 4.0  # the truth is D_2 = 2 * 2**2 / 2 = 4
    True
    """
    alpha = check_alpha(alpha)
    beta = check_beta(beta)
    s_p = check_finite_array(s_p, "s_p")
    s_q = check_finite_array(s_q, "s_q")
    value, side = float(threshold[0]), threshold[1]
    if side not in SIDES:
        raise ValueError(f"the threshold's side must be one of {SIDES}, got {side!r}")
    _check_region(region)
    return _certified_threshold_bound(s_p, s_q, alpha, beta, value, side, region)


def _certified_threshold_bound(
    s_p: np.ndarray,
    s_q: np.ndarray,
    alpha: float,
    beta: float,
    value: float,
    side: str,
    region: str,
) -> Certificate:
    """:func:`certified_threshold_bound` unchecked."""
    k_p = int(np.sum(positives(s_p, value, side)))
    k_q = int(np.sum(positives(s_q, value, side)))
    bound, tpr_lo, fpr_hi = _rates_bound(k_p, s_p.size, k_q, s_q.size, alpha, beta, region)
    return Certificate(float(bound), None, float(tpr_lo), float(fpr_hi), "threshold", (value, side))
