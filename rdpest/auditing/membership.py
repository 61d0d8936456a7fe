"""Membership-inference readouts of an audit: AUROC, TPR at low FPR and a certified (ε, δ) bound.

Membership-inference audits (Jagielski, Ullman & Oprea 2020; Nasr et al. 2021; Carlini et al.
2022) report how well a test tells the runs trained WITH the canary (O′, the "member" class) from
those trained without it (O). Every :class:`~rdpest.auditing.AuditResult` carries them in its
``membership`` dict (:func:`membership_readouts`), next to the Rényi quantities:

- ``auroc`` and ``tpr_at_fpr`` (TPR at FPR 1% and 0.1%): POINT ESTIMATES, not certified.
- ``epsilon_lower_bound``: a CERTIFIED lower bound on the ε of (ε, δ)-DP at ``delta``, valid with
  probability at least 1 − ``beta``.

Orientation. The score may rise with the canary (a Gaussian mechanism's output) or fall (a
model's loss on the canary, which is lower when the canary was trained on). As in
:class:`rdpest.BernoulliTPRFPRBaseline`, the side is not assumed: the scores of each arm are split
(half trains, half certifies); a threshold and a side ("upper": a score above the threshold says
"member"; "lower": at or below it says "member", the usual loss attack) are chosen on the training
half, maximising the ε bound that half would certify, and ``side`` records the choice. The AUROC
and the TPR at FPR are those of the score in that orientation on the certifying half, so the
choice of side does not inflate them (AUROC 0.5 is chance whatever the side).

The certificate. For any test with rates TPR (on O′) and FPR (on O), (ε, δ)-DP in both directions
implies TPR ≤ e^ε·FPR + δ and 1 − FPR ≤ e^ε·(1 − TPR) + δ (the hypothesis-testing
characterisation of DP: Kairouz, Oh & Viswanath 2015; used for auditing by Jagielski et al. 2020
and Nasr et al. 2021), so ε ≥ max(log((TPR − δ)/FPR), log((1 − FPR − δ)/(1 − TPR))). Both terms
grow with TPR and shrink with FPR, so on the certifying half, with a one-sided Clopper–Pearson
lower bound TPR_lo and upper bound FPR_hi at ``beta/2`` each (both hold with probability 1 − β by
a union bound), the formula at (TPR_lo, FPR_hi), clamped at 0, is a (1 − β) lower bound on ε. The
threshold must not be chosen on the certifying half: the limits hold for a test fixed in advance.
"""

from __future__ import annotations

import math
from decimal import ROUND_CEILING, Decimal
from numbers import Integral

import numpy as np
from sklearn.metrics import roc_auc_score, roc_curve

from rdpest.estimators.splits import split_indices
from rdpest.stats.bounds import _clopper_pearson
from rdpest.stats.threshold_tests import _search_thresholds, cut_points, positives
from rdpest.utils.validation import check_beta, check_finite_array, check_open_unit

__all__ = [
    "MEMBERSHIP_DELTA",
    "MEMBERSHIP_FPRS",
    "epsilon_from_rates",
    "membership_line",
    "membership_readouts",
    "oriented_scores",
    "tpr_ceiling",
]

#: The δ of the certified (ε, δ) readout of an audit.
MEMBERSHIP_DELTA = 1e-5
#: The false-positive rates at which an audit reports the TPR (keys of ``tpr_at_fpr``).
MEMBERSHIP_FPRS = ("0.01", "0.001")


def epsilon_from_rates(tpr, fpr, delta: float):
    """The smallest ε for which a test with these rates is consistent with (ε, δ)-DP.

    max(log((TPR − δ)/FPR), log((1 − FPR − δ)/(1 − TPR)), 0) (Kairouz, Oh & Viswanath 2015): a
    term whose numerator is not positive gives no evidence (−∞); a zero denominator with a
    positive numerator gives +∞. Vectorised over ``tpr`` and ``fpr``.

    Examples
    --------
    >>> round(float(epsilon_from_rates(0.5, 0.05, 1e-5)), 4)  # log(0.49999 / 0.05)
    2.3026
    >>> float(epsilon_from_rates(0.3, 0.3, 1e-5))
    0.0
    """
    tpr, fpr = np.broadcast_arrays(np.asarray(tpr, dtype=float), np.asarray(fpr, dtype=float))
    with np.errstate(divide="ignore", invalid="ignore"):
        first = np.where(tpr - delta > 0, np.log(tpr - delta) - np.log(fpr), -np.inf)
        second = np.where(1.0 - fpr - delta > 0, np.log1p(-fpr - delta) - np.log1p(-tpr), -np.inf)
    out = np.maximum(np.maximum(first, second), 0.0)
    return out if out.ndim else out[()]


def _certified_epsilon(train_p, train_q, test_p, test_q, delta: float, beta: float) -> dict:
    """The certificate: threshold and side chosen on (train_p, train_q), rates certified on
    (test_p, test_q) with Clopper–Pearson limits at beta/2 each. P: member (O′), Q: O."""
    level = beta / 2  # union bound over the two rates
    candidates = cut_points(train_p, train_q)
    found = _search_thresholds(
        np.sort(train_p),
        np.sort(train_q),
        candidates,
        level,
        level,
        lambda lo_p, hi_q: epsilon_from_rates(lo_p, hi_q, delta),
        # Ties (every bound 0, e.g. under P = Q) go to the largest margin TPR_lo − FPR_hi.
        margin_ties=True,
    )
    index, side = (0, "upper") if found is None else found[:2]
    threshold = float(candidates[index])
    k_p = int(np.sum(positives(test_p, threshold, side)))
    k_q = int(np.sum(positives(test_q, threshold, side)))
    tpr_lo = float(_clopper_pearson(k_p, test_p.size, level, "lower"))
    fpr_hi = float(_clopper_pearson(k_q, test_q.size, level, "upper"))
    return {
        "epsilon_lower_bound": float(epsilon_from_rates(tpr_lo, fpr_hi, delta)),
        "threshold": threshold,
        "side": side,
        "tpr_lower": tpr_lo,
        "fpr_upper": fpr_hi,
    }


def oriented_scores(member, non_member, side: str) -> tuple[np.ndarray, np.ndarray]:
    """(labels, scores) of the membership test: 1 for a member (O′) and 0 for O, and the scores
    signed so that a larger one says "member" (``side`` "upper" keeps them, "lower" negates
    them), as ``sklearn.metrics.roc_curve`` and ``roc_auc_score`` take them."""
    member, non_member = np.asarray(member, dtype=float), np.asarray(non_member, dtype=float)
    sign = 1.0 if side == "upper" else -1.0
    labels = np.r_[np.ones(member.size), np.zeros(non_member.size)]
    return labels, sign * np.r_[member, non_member]


def _roc_readouts(member, non_member, side: str) -> dict:
    """AUROC and TPR at the FPRs of :data:`MEMBERSHIP_FPRS` of the score oriented by ``side``."""
    labels, scores = oriented_scores(member, non_member, side)
    fpr, tpr, _ = roc_curve(labels, scores, drop_intermediate=False)
    # The best TPR of a threshold whose FPR is at most the target (a step, not an interpolation:
    # a rate some threshold test attains). roc_curve starts at (0, 0), so every target has one.
    at = {key: float(tpr[fpr <= float(key)].max()) for key in MEMBERSHIP_FPRS}
    return {"auroc": float(roc_auc_score(labels, scores)), "tpr_at_fpr": at}


def membership_readouts(
    losses_without_canary,
    losses_with_canary,
    *,
    delta: float = MEMBERSHIP_DELTA,
    beta: float = 0.05,
    test_fraction: float = 0.5,
    random_state: int = 0,
) -> dict:
    """Membership-inference readouts of an audit's scores (see the module docstring).

    Parameters
    ----------
    losses_without_canary, losses_with_canary : array-like of shape (n,)
        O and O′ (the member class); at least 2 finite scores each.
    delta : float, default=1e-5
        δ of the certified (ε, δ) lower bound, in (0, 1).
    beta : float, default=0.05
        The ε bound holds with probability at least 1 − beta.
    test_fraction : float, default=0.5
        Part of each arm that certifies (and gives the point estimates); the rest chooses the
        threshold and side.
    random_state : int, default=0
        Seeds the split.

    Returns
    -------
    dict
        ``auroc``, ``tpr_at_fpr`` ({"0.01": TPR, "0.001": TPR}; point estimates on the
        certifying part, whose FPR resolution is 1/``n_test[1]``: below it the TPR is that at
        zero false positives), ``epsilon_lower_bound`` (certified at ``delta`` and level
        1 − ``beta``), ``delta``, ``beta``, ``certified`` (True for the ε bound only), ``side``,
        ``threshold``, ``tpr_lower``, ``fpr_upper``, ``n_train`` and ``n_test`` ((member,
        non-member) counts).

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> r = membership_readouts(rng.normal(0, 1, 1000), rng.normal(2, 1, 1000))
    >>> r["side"], 0.85 < r["auroc"] < 0.99, r["epsilon_lower_bound"] > 0
    ('upper', True, True)
    """
    delta = check_open_unit(delta, "delta")
    beta = check_beta(beta)
    test_fraction = check_open_unit(test_fraction, "test_fraction")
    if isinstance(random_state, bool) or not isinstance(random_state, Integral):
        raise ValueError(f"random_state must be an integer, got {random_state!r}")
    q = check_finite_array(losses_without_canary, "losses_without_canary")
    p = check_finite_array(losses_with_canary, "losses_with_canary")
    rng = np.random.default_rng(int(random_state))
    parts = []
    for scores, name in ((p, "losses_with_canary"), (q, "losses_without_canary")):
        n_test = round(scores.size * test_fraction)
        if not 1 <= n_test < scores.size:
            raise ValueError(
                f"{name} has {scores.size} scores: too few to split into a training and a "
                f"certifying part at test_fraction={test_fraction}"
            )
        train, test = split_indices(scores.size, n_test, rng)
        parts.append((scores[train], scores[test]))
    (train_p, test_p), (train_q, test_q) = parts
    cert = _certified_epsilon(train_p, train_q, test_p, test_q, delta, beta)
    return {
        **_roc_readouts(test_p, test_q, cert["side"]),
        "epsilon_lower_bound": cert["epsilon_lower_bound"],
        "delta": delta,
        "beta": beta,
        "certified": True,
        "side": cert["side"],
        "threshold": cert["threshold"],
        "tpr_lower": cert["tpr_lower"],
        "fpr_upper": cert["fpr_upper"],
        "n_train": [int(train_p.size), int(train_q.size)],
        "n_test": [int(test_p.size), int(test_q.size)],
    }


def membership_line(
    membership: dict,
    alpha: float | None = None,
    claimed_epsilon: float | None = None,
    config: dict | None = None,
) -> str:
    """The summary's line on the membership-inference readouts.

    With the claim (``alpha`` and ``claimed_epsilon``), the line also says what the claim
    allows, so that what the audit measured is not read as the claim's own scale: the ε at
    this δ that ε_α at this one order implies (:func:`rdpest.stats.conversions.rdp_to_dp`,
    Balle et al. 2020, Thm 21), the claimed ε itself where the claim was made in (ε, δ) at this
    δ (``config["dp_claim"]``), and the largest TPR it allows (:func:`tpr_ceiling`) at the FPR
    of the printed TPR's threshold, (k + 1)/(m + 1) on average where that threshold admits k
    false positives among the m certifying runs without the canary
    (:func:`_false_positives_allowed`; 1% FPR without ``n_test``).

    Examples
    --------
    >>> line = membership_line({"auroc": 0.75, "tpr_at_fpr": {"0.01": 0.1},
    ...                         "epsilon_lower_bound": 0.5, "delta": 1e-5, "beta": 0.05})
    >>> line.split("; ")[0]
    'membership inference: AUROC 0.750, TPR 0.100 at 1% FPR (point estimates)'
    >>> line = membership_line({"auroc": 0.75, "tpr_at_fpr": {"0.01": 0.1},
    ...                         "epsilon_lower_bound": 0.5, "delta": 1e-5, "beta": 0.05}, 2, 1)
    >>> first, second = line.split("; ")
    >>> print(first[first.index("(") : first.index(": the")])
    (point estimates, which chance can lift above the true TPR
    >>> print(first[first.index("the claim") :])
    the claim allows a true TPR of at most 0.1405)
    >>> print(second[second.index("(ε_") :])
    (ε_2 = 1 at this one order implies ε <= 11.13 at this δ)
    """
    from rdpest.auditing.power import claim_text, dp_claim_of
    from rdpest.stats.conversions import rdp_to_dp

    tpr = membership["tpr_at_fpr"].get("0.01")
    at = "n/a" if tpr is None else f"{tpr:.3f}"
    n_test = membership.get("n_test")
    fpr, resolved = 0.01, ""
    if tpr is not None and isinstance(n_test, list | tuple) and len(n_test) == 2:
        m = n_test[1]
        if isinstance(m, int) and not isinstance(m, bool) and m > 0:
            k = _false_positives_allowed(m)
            if k == 0:  # 1% is finer than 1/m
                at += f" (no false positive among the {m} certifying runs without the canary)"
            # DP-SGD review: an honest pipeline's TPR above the ceiling at 1% read as beating
            # the claim, where the threshold's true FPR is (k + 1)/(m + 1) on average
            fpr = (k + 1) / (m + 1)
            resolved = f" at that threshold's FPR ({k + 1}/{m + 1} on average)"
    delta = membership["delta"]
    allows, implies = "", ""
    if alpha is not None and claimed_epsilon is not None:
        epsilon = rdp_to_dp(claimed_epsilon, alpha, delta)
        ceiling = tpr_ceiling(alpha, claimed_epsilon, fpr)
        # four significant digits, rounded up: never below what the claim allows, and close to
        # it at small ceilings too (three decimals printed 0.011 for 0.0100001)
        places = max(0, 3 - math.floor(math.log10(ceiling)))
        shown = min(1.0, math.ceil(ceiling * 10.0**places) / 10.0**places)
        # The point estimate is the best of the certifying runs' thresholds, so chance lifts it
        # above the true TPR: an honest Gaussian mechanism exactly at ε_2 = 1 printed a TPR above
        # this ceiling in 6% (m = 400) to 20% (m = 50 to 100) of 2000 simulated audits per m.
        allows = (
            f", which chance can lift above the true TPR: the claim allows a true TPR of at most "
            f"{shown:.{places}f}{resolved}"
        )
        dp = dp_claim_of(config)
        stated = (  # the user's own (ε, δ) claim, which holds at this δ too if δ' <= δ
            f"the claim: ε <= {dp['epsilon']:g} at this δ; "
            if dp is not None and dp["delta"] <= delta
            else ""
        )
        implies = (
            f" ({stated}ε_{alpha:g} = {claim_text(claimed_epsilon)} at this one order implies ε <= "
            f"{_rounded_up(epsilon)} at this δ)"
        )
    return (
        f"membership inference: AUROC {membership['auroc']:.3f}, TPR {at} at 1% FPR (point "
        f"estimates{allows}); certified (ε, δ = {delta:g})-DP lower bound ε >= "
        f"{membership['epsilon_lower_bound']:.3f} at level {1 - membership['beta']:.3g}{implies}"
    )


def _false_positives_allowed(m: int) -> int:
    """The most false positives k among ``m`` runs without the canary at which the readout's
    FPR k/m is at most 1% (the comparison ``_roc_readouts`` makes). The threshold of that TPR
    lies just above the (k + 1)-th largest of the m scores, so its true FPR is Beta(k + 1, m − k)
    distributed, (k + 1)/(m + 1) on average (order statistics of uniforms).

    >>> _false_positives_allowed(50), _false_positives_allowed(100), _false_positives_allowed(250)
    (0, 1, 2)
    """
    k = int(0.01 * m)
    while (k + 1) / m <= 0.01:
        k += 1
    while k > 0 and k / m > 0.01:
        k -= 1
    return k


def _rounded_up(value: float, digits: int = 4) -> str:
    """``value`` with ``digits`` significant digits, rounded up, so that a ceiling printed is
    never below the ceiling itself (``.4g`` rounds to nearest: 11.1249 printed as 11.12).

    >>> _rounded_up(11.12491), _rounded_up(11.13), _rounded_up(123456.0), _rounded_up(0.0)
    ('11.13', '11.13', '1.235e+5', '0')
    """
    if not math.isfinite(value) or value <= 0.0:
        return f"{value:.{digits}g}"
    places = digits - 1 - math.floor(math.log10(value))
    # the shortest decimal that reads back as the same double (repr), rounded up exactly in
    # Decimal: 11.13 stays 11.13, where the double's binary expansion (11.1300000000000008)
    # would print 11.14
    rounded = Decimal(repr(value)).quantize(Decimal(1).scaleb(-places), rounding=ROUND_CEILING)
    return format(rounded, f".{digits}g")  # 1e20 as 1.000e+20, not twenty-one digits


def tpr_ceiling(alpha: float, claimed_epsilon: float, fpr: float) -> float:
    """The largest true-positive rate at false-positive rate ``fpr`` of any test between two
    laws whose Rényi divergences of order α, in both directions, are at most ``claimed_epsilon``.

    A test with rates (TPR, FPR) maps the laws to Bern(TPR) and Bern(FPR), which by the data
    processing inequality (van Erven & Harremoës 2014, Thm 9) keeps both divergences within the
    claim; conversely that Bernoulli pair itself meets the claim, so the ceiling is attained: the
    largest TPR >= FPR with D_α(Bern(TPR) ‖ Bern(FPR)) and D_α(Bern(FPR) ‖ Bern(TPR)) both at most
    the claim (both grow with TPR beyond FPR). Tighter than the (ε, δ) test bounds of the
    implied (ε, δ) and than Mironov (2017, Prop. 10), which the line once took.

    Examples
    --------
    >>> round(tpr_ceiling(2.0, 1.0, 0.01), 4)
    0.1404
    >>> tpr_ceiling(2.0, 0.0, 0.01)
    0.01
    """
    from scipy.optimize import brentq

    from rdpest.stats.divergences import _bernoulli_renyi_divergence

    if claimed_epsilon <= 0.0:
        return float(fpr)

    def excess(tpr: float) -> float:
        worst = max(
            _bernoulli_renyi_divergence(alpha, tpr, fpr),
            _bernoulli_renyi_divergence(alpha, fpr, tpr),
        )
        return worst - claimed_epsilon

    top = math.nextafter(1.0, 0.0)
    if excess(top) <= 0.0:  # within the claim up to the last double below 1
        return 1.0
    return float(brentq(excess, fpr, top, xtol=1e-15, rtol=1e-13))
