"""Certified lower bounds on D_α from a FIXED threshold test on a score.

The test "s(x) > t" (side "upper") or "s(x) <= t" (side "lower") has Bernoulli outputs with rates
TPR under P and FPR under Q, and by post-processing D_α(Bern(TPR) ‖ Bern(FPR)) <= D_α(P‖Q) (Kim,
Varshney & Alabi 2026, Table 13). Exact Clopper–Pearson limits on the two rates, combined into one
(1 − β) region (:mod:`rdpest.stats.regions`), give the certified bound. The threshold is chosen on
TRAINING scores only (:func:`select_threshold`): choosing it on the certifying scores is the
classic invalid audit. The score may be a learned critic, an exact log ratio, or any fixed
function of the sample; :class:`rdpest.BernoulliTPRFPRBaseline` and
:func:`rdpest.stats.certificates.certify_critic` both use these functions.
"""

from __future__ import annotations

import math

import numpy as np

from rdpest.stats.bounds import _clopper_pearson
from rdpest.stats.divergences import _bernoulli_renyi_divergence
from rdpest.stats.regions import Certificate, _check_region, _joint_minimum
from rdpest.utils.validation import (
    check_beta,
    check_estimation_alpha,
    check_finite_array,
    check_option,
    check_pair,
    check_real,
    finite_result,
)

__all__ = ["SIDES", "certified_threshold_bound", "select_threshold"]

# The thresholds a search tries: pooled quantiles of the training scores.
_THRESHOLD_QUANTILES = np.linspace(0.02, 0.98, 25)

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


@finite_result()
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
    alpha = check_estimation_alpha(alpha)
    beta = check_beta(beta)
    region = _check_region(region)
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
    region (:func:`~rdpest.stats.regions.joint_level`).
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


@finite_result()
def certified_threshold_bound(
    s_p, s_q, alpha: float, beta: float, threshold: tuple[float, str], region: str = "joint"
) -> Certificate:
    """(1 − β) lower bound D_α(Bern(TPR_lo) ‖ Bern(FPR_hi)) of a FIXED threshold test.

    The test says P when s > t (side "upper") or s <= t ("lower"); by post-processing its Bernoulli
    outputs have D_α <= D_α(P‖Q) (Kim, Varshney & Alabi 2026, Table 13; see
    rdpest.estimators.threshold). The bound is the least such divergence over a (1 − β) confidence
    region for (TPR, FPR) from the exact binomial tests: ``region="joint"`` (default, one region
    from the product of the two p-values, :func:`~rdpest.stats.regions.joint_level`) or
    ``"bonferroni"`` (Clopper–Pearson limits at β/2 each, the paper's baseline).

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> cert = certified_threshold_bound(rng.normal(2, 1, 400), rng.normal(0, 1, 400), 2.0, 0.05,
    ...                                  (1.0, "upper"))
    >>> 0.0 < cert.lower_bound < 4.0  # the truth is D_2 = 2 * 2**2 / 2 = 4
    True
    """
    alpha = check_estimation_alpha(alpha)
    beta = check_beta(beta)
    s_p = check_finite_array(s_p, "s_p")
    s_q = check_finite_array(s_q, "s_q")
    value, side = check_pair(threshold, "threshold")
    value = check_real(value, "threshold's value")
    check_option(side, SIDES, "threshold's side")
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
