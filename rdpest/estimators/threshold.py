"""BernoulliTPRFPRBaseline: the threshold-test baseline of Kim, Varshney & Alabi (2026, Table 13).

A membership test thresholds a scalar score s(x): it says "P" when s(x) > t (side ``"upper"``)
or when s(x) <= t (side ``"lower"``). Its outputs are Bernoulli with success probabilities
TPR = P_P(test says P) and FPR = P_Q(test says P), and by post-processing (data processing
inequality for Rényi divergences; van Erven & Harremoës 2014, Thm 9)

    D_α(P‖Q) >= D_α(Bern(TPR) ‖ Bern(FPR)).

Two conversions of the test into a lower bound on D_α:

- ``"direct"`` (the paper's Table 13 estimate, made a certificate): with a (1 − β/2) lower
  Clopper–Pearson bound TPR_lo and a (1 − β/2) upper one FPR_hi, with probability 1 − β both hold
  (union bound), and then D_α(Bern(TPR_lo) ‖ Bern(FPR_hi)) <= D_α(Bern(TPR) ‖ Bern(FPR)) when
  TPR_lo > FPR_hi, because the Bernoulli divergence is non-decreasing in TPR and non-increasing in
  FPR on {TPR >= FPR} (joint quasi-convexity, van Erven & Harremoës 2014, Thm 13, and it is 0 on
  the diagonal). Certified.
- ``"gdp"`` (the prior state of the art, Annamalai & De Cristofaro, NeurIPS 2024): the rates
  imply (ε, δ)-DP at best ε = log((TPR_lo − δ)/FPR_hi); reading that as a point of a Gaussian
  trade-off curve gives μ-GDP and then (α, αμ²/2)-RDP. Valid only if the trade-off curve is
  Gaussian (it fails on Laplace pairs, see benchmarks/results/estimators/): NOT certified.

The threshold must not be chosen on the data that certify it (the Clopper–Pearson limits hold
for a threshold fixed in advance): ``"split"`` chooses it on a training split; ``"bonferroni"``
uses all data and pays for the choice with a confidence band uniform over every threshold (see
:func:`_uniform_band_levels`).
"""

from __future__ import annotations

from numbers import Real

import numpy as np
from sklearn.utils._param_validation import Interval, StrOptions

from rdpest.estimators.base import RenyiEstimatorBase
from rdpest.estimators.log_ratios import call_on_samples
from rdpest.estimators.results import DirectionResult, ThresholdDiagnostics
from rdpest.estimators.splits import min_two_way_sample_size, split_indices
from rdpest.stats.bounds import _clopper_pearson
from rdpest.stats.divergences import _bernoulli_renyi_divergence
from rdpest.stats.gdp import _gdp_from_rates
from rdpest.stats.threshold_tests import (
    _search_thresholds,
    bernoulli_divergences,
    cut_points,
    positives,
)

__all__ = ["BernoulliTPRFPRBaseline"]


# ---------------------------------------------------------------------------------------------
# Vectorised helpers for the threshold search
# ---------------------------------------------------------------------------------------------


def _objective(
    lo_p: np.ndarray, hi_q: np.ndarray, alpha: float, conversion: str, delta: float
) -> np.ndarray:
    """The bound each candidate would give (monotone transform of it for "gdp")."""
    if conversion == "direct":
        return bernoulli_divergences(lo_p, hi_q, alpha)
    # ε = log((TPR_lo − δ)/FPR_hi) ranks candidates like αμ(ε)²/2 (μ increases with ε).
    gap = lo_p - delta
    out = np.zeros(lo_p.shape)
    ok = gap > hi_q
    out[ok] = np.log(gap[ok]) - np.log(hi_q[ok])
    return out


def _uniform_band_levels(beta: float, n_p: int, n_q: int) -> tuple[float, float]:
    """Per-count Clopper–Pearson levels that make the bound uniform over ALL thresholds.

    Why a union bound over the data-dependent cut points is rigorous. Let G(t) = P(s(X) > t) and
    N(t) = #{i : s(X_i) > t} for the n i.i.d. X_i ~ P, and c_k the level-b Clopper–Pearson lower
    bound for k successes in n. For each k, {t : G(t) < c_k} is an up-set [s_k, ∞) or (s_k, ∞)
    (G is non-increasing and right-continuous) and N is non-increasing, so "some t has N(t) >= k
    and G(t) < c_k" is the event N(s_k) >= k, with G(s_k) < c_k in the first case and
    G(s_k) = c_k in the second; either way its probability is at most
    P(Bin(n, c_k) >= k) = b by the definition of c_k. A union over k = 1..n gives
    P(∃ t ∈ ℝ: G(t) < c_{N(t)}) <= n·b. The union thus runs over the n possible counts, not over
    the thresholds, and covers every real threshold, in particular the cut points chosen from the
    same data. The same holds for the upper bands (the "lower" side uses the complement counts).

    Four bands are needed: TPR lower bounds for the "upper" and the "lower" side (n_p counts
    each) and FPR upper bounds for both sides (n_q counts each). With b_p = β/(4 n_p) and
    b_q = β/(4 n_q) all four hold with probability at least 1 − β, and then every threshold and
    side has TPR >= TPR_lo and FPR <= FPR_hi simultaneously, so the maximum over them of the
    Bernoulli bound is a valid (1 − β) lower bound.
    """
    return beta / (4.0 * n_p), beta / (4.0 * n_q)


class BernoulliTPRFPRBaseline(RenyiEstimatorBase):
    """Lower bound on D_α(P‖Q) from a threshold test's TPR and FPR (the paper's Table 13 baseline).

    A test that says "P" when a scalar score lies on one side of a threshold has Bernoulli outputs
    with rates TPR (under P) and FPR (under Q); by post-processing
    D_α(P‖Q) >= D_α(Bern(TPR) ‖ Bern(FPR)). Clopper–Pearson bounds on the two rates on data that
    did not choose the threshold make this a certified lower bound (``conversion="direct"``); the
    route of the prior black-box DP-SGD audit through (ε, δ)-DP and μ-GDP (``conversion="gdp"``)
    is reported for comparison and is not certified.

    Parameters
    ----------
    alpha : float, default=2.0
        Rényi order, >= 1 + 1e-6 (closer orders are refused: no bound there is reliable).
    beta : float, default=0.05
        The lower bound holds with probability at least 1 − beta.
    direction : {"forward", "reverse", "max"}, default="forward"
        D_α(P‖Q), D_α(Q‖P), or the larger of the two (beta is split across directions).
    conversion : {"direct", "gdp"}, default="direct"
        ``"direct"``: D_α(Bern(TPR_lo) ‖ Bern(FPR_hi)) if TPR_lo > FPR_hi, else 0 (Kim, Varshney
        & Alabi 2026, Table 13), certified. ``"gdp"``: ε = log((TPR_lo − δ)/FPR_hi) (clipped at
        0), μ = ``gdp_mu(ε, δ)``, bound αμ²/2 (Annamalai & De Cristofaro 2024); valid only for a
        Gaussian trade-off curve, so ``certified_`` is False.
    threshold : {"split", "bonferroni"}, default="split"
        How the threshold and its side are chosen. ``"split"``: on a training split, maximising
        the bound that the training split itself would certify; the rest (``test_fraction``)
        certifies, TPR_lo and FPR_hi at beta/2 each. ``"bonferroni"``: no split; the best
        threshold over all cut points of the pooled sample and both sides, with Clopper–Pearson
        levels beta/(4 n_p) and beta/(4 n_q) that make the bounds hold uniformly over every
        threshold (a union over the possible counts; see ``_uniform_band_levels``).
    score_function : callable or None, default=None
        Maps samples of shape (n, d) to scores of shape (n,). Required when d > 1; for d = 1
        the default is the sample itself. Must be fixed in advance (not fitted on these data).
    test_fraction : float, default=0.5
        Part of each sample that certifies with ``threshold="split"``.
    delta : float, default=1e-5
        δ of the (ε, δ) step of ``conversion="gdp"`` (also used for ``epsilon_``/``mu_``).
    random_state : int, RandomState, Generator or None, default=None
        Seeds the split.
    pooled : bool, default=False
        False: ``fit(X, Y)``, X ~ P and Y ~ Q. True: the pooled form ``fit(Z, membership)``, the
        two samples stacked in Z and ``membership[i]`` 1 for a row from P, 0 for one from Q
        (same results; usable in a Pipeline and in stratified cross-validation), see
        :class:`rdpest.DVRenyiEstimator`.

    Attributes
    ----------
    divergence_ : float
        Point estimate: the conversion applied to the plug-in rates of the fitted threshold on
        the certifying data (D_α(Bern(TPR̂) ‖ Bern(FPR̂)) for "direct", αμ̂²/2 for "gdp"). Rates
        are kept in [1/(2n), 1 − 1/(2n)] (a continuity correction) so that a count of 0 does not
        give an infinite estimate. Also what ``score`` returns on new data.
    lower_bound_ : float
        One-sided (1 − beta) lower confidence bound (certified for "direct").
    certified_ : bool
        True for ``conversion="direct"``, False for ``"gdp"``.
    epsilon_, mu_ : float
        The ε (at ``delta``) and μ-GDP implied by TPR_lo and FPR_hi
        (:func:`rdpest.stats.conversions.gdp_from_rates`), for either conversion; with
        ``direction="max"`` those of the direction with the larger lower bound. Informative only:
        they assume a Gaussian trade-off curve.
    threshold_ : float
        The fitted threshold of that direction; ``side_`` ("upper": s > t says P; "lower":
        s <= t says P) its side.
    thresholds_ : dict of str to (float, str)
        Threshold and side per direction.
    directions_ : dict of str to DirectionResult
        Per direction; ``diagnostics`` is a
        :class:`~rdpest.estimators.results.ThresholdDiagnostics` (counts, rates, their bounds, ε
        and μ).
    n_features_in_ : int

    Notes
    -----
    ``divergence_`` is the divergence of the fitted test's two rates, a quantity of the
    lower-bound kind (a test sees at most D_α of the pair), not an estimate of D_α: at
    N(1, 1) against N(0, 1) it stays below the true value.

    Parameters chosen by a search on the audited samples (``GridSearchCV`` over ``threshold``,
    ``test_fraction``, ...) cost the refit's ``lower_bound_`` its level 1 − beta, as for
    :class:`rdpest.DVRenyiEstimator` (see its Notes): choose them on other data, or certify
    every candidate at beta / (number of candidates).

    See Also
    --------
    rdpest.DVRenyiEstimator : certified bound from a learned critic, tighter at large D_α.

    References
    ----------
    B. D. Kim, L. R. Varshney, D. Alabi. Optimal Guarantees for Auditing Rényi Differentially
    Private Machine Learning, 2026, Table 13. M. S. M. S. Annamalai, E. De Cristofaro. Nearly
    tight black-box auditing of differentially private machine learning, NeurIPS 2024.
    C. J. Clopper, E. S. Pearson. The use of confidence or fiducial limits illustrated in the
    case of the binomial, Biometrika 26, 1934. T. van Erven, P. Harremoës. Rényi divergence and
    Kullback–Leibler divergence, IEEE Trans. Inf. Theory 60, 2014.

    Examples
    --------
    >>> import numpy as np
    >>> from rdpest.estimators.threshold import BernoulliTPRFPRBaseline
    >>> rng = np.random.default_rng(0)
    >>> X, Y = rng.normal(1.0, 1.0, 2000), rng.normal(0.0, 1.0, 2000)  # D_2 = 1
    >>> est = BernoulliTPRFPRBaseline(alpha=2.0, random_state=0).fit(X, Y)
    >>> est.certified_, 0.0 < est.lower_bound_ < 1.0, est.side_
    (True, True, 'upper')
    """

    _parameter_constraints: dict = {
        **RenyiEstimatorBase._parameter_constraints,
        "conversion": [StrOptions({"direct", "gdp"})],
        "threshold": [StrOptions({"split", "bonferroni"})],
        "score_function": [callable, None],
        "test_fraction": [Interval(Real, 0, 1, closed="neither")],
        "delta": [Interval(Real, 0, 1, closed="neither")],
        "random_state": ["random_state", np.random.Generator],
    }

    def __init__(
        self,
        alpha=2.0,
        beta=0.05,
        direction="forward",
        *,
        conversion="direct",
        threshold="split",
        score_function=None,
        test_fraction=0.5,
        delta=1e-5,
        random_state=None,
        pooled=False,
    ):
        self.alpha = alpha
        self.beta = beta
        self.direction = direction
        self.conversion = conversion
        self.threshold = threshold
        self.score_function = score_function
        self.test_fraction = test_fraction
        self.delta = delta
        self.random_state = random_state
        self.pooled = pooled

    # ------------------------------------------------------------------ checks
    def min_samples_per_side(self) -> int:
        if self.threshold == "bonferroni":
            return 1
        return min_two_way_sample_size(self.test_fraction)

    def _scores(self, A: np.ndarray, name: str) -> np.ndarray:
        if self.score_function is None:
            if A.shape[1] != 1:
                raise ValueError(
                    f"{type(self).__name__} thresholds a scalar score: samples with "
                    f"{A.shape[1]} features need a score_function mapping (n, d) to (n,)"
                )
            return A[:, 0]
        return call_on_samples(self.score_function, A, name, what="score_function")

    def will_be_certified(self) -> bool:
        # The GDP route assumes a Gaussian trade-off curve; only the direct conversion certifies.
        return self.conversion == "direct"

    def _certifying_design(self, n_p: int, n_q: int, beta: float):
        """(certifying rows of P, of Q, Clopper–Pearson level of the TPR, of the FPR) of one
        direction at level ``beta``, as ``_fit_direction`` certifies; None if a part is empty."""
        if self.threshold == "split":
            m_p, m_q = round(n_p * self.test_fraction), round(n_q * self.test_fraction)
            return (m_p, m_q, beta / 2, beta / 2) if min(m_p, m_q) >= 1 else None
        return (n_p, n_q, *_uniform_band_levels(beta, n_p, n_q))

    def _max_certifiable_direction(self, n_p: int, n_q: int, beta: float) -> float:
        # Perfect separation: every certifying P score on the chosen side, no Q score. The bound
        # grows with k_p and falls with k_q, so (n_p, 0) positives give the largest one.
        design = self._certifying_design(n_p, n_q, beta)
        if design is None:
            return 0.0
        n_p, n_q, level_p, level_q = design
        tpr_lo = float(_clopper_pearson(n_p, n_p, level_p, "lower"))
        fpr_hi = float(_clopper_pearson(0, n_q, level_q, "upper"))
        if tpr_lo <= fpr_hi:
            return 0.0
        return float(_bernoulli_renyi_divergence(float(self.alpha), tpr_lo, fpr_hi))

    def _power_designs_direction(self, n_p: int, n_q: int, beta: float) -> dict:
        design = self._certifying_design(n_p, n_q, beta)
        if (
            design is not None
            and self.threshold == "split"
            and min(n_p - design[0], n_q - design[1]) >= 1
        ):
            # the threshold is the one the training split (the other rows) certifies best
            design = (*design, n_p - design[0], n_q - design[1])
        return {"threshold": design, "bracket": None}

    # ------------------------------------------------------------------ fitting
    def _start_fit(self) -> None:
        self.thresholds_: dict[str, tuple[float, str]] = {}

    def _finish_fit(self) -> None:
        chosen = max(self.directions_.values(), key=lambda r: r.lower_bound)
        self.epsilon_ = chosen.diagnostics.epsilon
        self.mu_ = chosen.diagnostics.mu
        self.threshold_ = chosen.diagnostics.threshold
        self.side_ = chosen.diagnostics.side

    def _fit_direction(self, P, Q, beta, seed, direction) -> DirectionResult:
        name_p, name_q = ("Y", "X") if direction == "reverse" else ("X", "Y")
        s_p, s_q = self._scores(P, name_p), self._scores(Q, name_q)
        alpha, delta = float(self.alpha), float(self.delta)
        if self.threshold == "split":
            rng = np.random.default_rng(seed)
            train_p, test_p = split_indices(len(s_p), round(len(s_p) * self.test_fraction), rng)
            train_q, test_q = split_indices(len(s_q), round(len(s_q) * self.test_fraction), rng)
            threshold, side = self._search(s_p[train_p], s_q[train_q], beta / 2, beta / 2)
            cert_p, cert_q = s_p[test_p], s_q[test_q]
            level_p = level_q = beta / 2  # union bound over the two rates
            n_train = (len(train_p), len(train_q))
            test_index_p, test_index_q = test_p, test_q
        else:
            cert_p, cert_q = s_p, s_q
            level_p, level_q = _uniform_band_levels(beta, len(s_p), len(s_q))
            threshold, side = self._search(cert_p, cert_q, level_p, level_q)
            n_train, test_index_p, test_index_q = (0, 0), None, None
        self.thresholds_[direction] = (threshold, side)
        n_p, n_q = len(cert_p), len(cert_q)
        k_p = int(np.sum(positives(cert_p, threshold, side)))
        k_q = int(np.sum(positives(cert_q, threshold, side)))
        tpr_lo = float(_clopper_pearson(k_p, n_p, level_p, "lower"))
        fpr_hi = float(_clopper_pearson(k_q, n_q, level_q, "upper"))
        implied = _gdp_from_rates(tpr_lo, fpr_hi, alpha, delta)
        if self.conversion == "direct":
            # Table 13 of Kim, Varshney & Alabi (2026) with the rates' confidence limits: valid
            # by post-processing and monotonicity of the Bernoulli divergence (module docstring).
            bound = _bernoulli_renyi_divergence(alpha, tpr_lo, fpr_hi) if tpr_lo > fpr_hi else 0.0
        else:
            bound = implied.epsilon_alpha
        return DirectionResult(
            divergence=self._point_estimate(k_p, n_p, k_q, n_q),
            lower_bound=max(0.0, float(bound)),
            beta=beta,
            raw_lower_bound=bound,
            n_train=n_train,
            n_test=(n_p, n_q),
            test_index_p=test_index_p,
            test_index_q=test_index_q,
            diagnostics=ThresholdDiagnostics(
                threshold=threshold,
                side=side,
                successes=(k_p, k_q),
                tpr=k_p / n_p,
                fpr=k_q / n_q,
                tpr_lower=tpr_lo,
                fpr_upper=fpr_hi,
                levels=(level_p, level_q),
                epsilon=implied.epsilon,
                mu=implied.mu,
            ),
        )

    def _search(self, s_p, s_q, level_p, level_q) -> tuple[float, str]:
        """Threshold and side with the largest bound at the given Clopper–Pearson levels."""
        candidates = cut_points(s_p, s_q)
        alpha, delta = float(self.alpha), float(self.delta)
        found = _search_thresholds(
            np.sort(s_p),
            np.sort(s_q),
            candidates,
            level_p,
            level_q,
            lambda lo_p, hi_q: _objective(lo_p, hi_q, alpha, self.conversion, delta),
            # Ties (e.g. every bound 0 under P = Q) go to the largest margin TPR_lo − FPR_hi,
            # which gives a sensible threshold for the point estimate.
            margin_ties=True,
        )
        if found is None:
            return float(candidates[0]), "upper"
        return float(candidates[found[0]]), found[1]

    def _point_estimate(self, k_p: int, n_p: int, k_q: int, n_q: int) -> float:
        # Plug-in rates with a continuity correction: a count of 0 (or n) would give an infinite
        # Bernoulli divergence.
        tpr = min(max(k_p / n_p, 0.5 / n_p), 1.0 - 0.5 / n_p)
        fpr = min(max(k_q / n_q, 0.5 / n_q), 1.0 - 0.5 / n_q)
        if self.conversion == "direct":
            return _bernoulli_renyi_divergence(float(self.alpha), tpr, fpr)
        return _gdp_from_rates(tpr, fpr, float(self.alpha), float(self.delta)).epsilon_alpha

    def _score_direction(self, X, Y, direction) -> float:
        name_p, name_q = ("Y", "X") if direction == "reverse" else ("X", "Y")
        threshold, side = self.thresholds_[direction]
        k_p = int(np.sum(positives(self._scores(X, name_p), threshold, side)))
        k_q = int(np.sum(positives(self._scores(Y, name_q), threshold, side)))
        return self._point_estimate(k_p, len(X), k_q, len(Y))

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.non_deterministic = self.threshold == "split" and self.random_state is None
        return tags
