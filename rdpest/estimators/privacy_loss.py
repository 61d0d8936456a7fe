"""Privacy-loss based bounds on D_α: Markov (lower) and Hoeffding (lower and upper).

Both estimators work from the privacy loss L(x) = log p(x)/q(x) of the two laws, as in Kim, Varshney
& Alabi (2026, Sec. 3.2 and App. B). With Z = e^{αL(Y)}, Y ~ Q, and W = e^{(α−1)L(X)}, X ~ P,

    E_Q[Z] = E_P[W] = e^{(α−1) D_α(P‖Q)},

so D̂ = 1/(α−1) · log(sample mean) estimates D_α, and a confidence bound on the mean of Z (or W)
gives one on D_α:

- :class:`MarkovRenyiBound` (the paper's Theorem 3.1): Markov's inequality needs nothing but
  nonnegativity, so the lower bound D̂ − log(1/β)/(α−1) holds for every pair (P, Q).
- :class:`HoeffdingRenyiBound` (Theorems B.2 and B.3): if L ≤ B then Z ∈ [0, e^{αB}] and Hoeffding's
  inequality gives a lower and an upper bound.

Both bounds are certificates only when L is the TRUE privacy loss (``log_ratio`` a callable).
With an estimated L̂ the identity above fails: E_Q[e^{αL̂}] is not e^{(α−1)D_α}; it may be larger,
so the "bound" may exceed D_α (``certified_`` is then False). For a certified bound from an
estimated ratio use the variational bracket
(:func:`rdpest.stats.certificates.certify_critic`), which is valid for any fixed critic.

The callable's input: ``log_ratio`` receives the samples as the (n, d) float array that
:meth:`fit` validated. For d = 1 a function written for (n,) arrays also works: if the call on the
(n, 1) array raises or does not return n values, it is called again on the (n,) array. Its output
must have shape (n,) (or (n, 1) for d = 1) and be finite.
"""

from __future__ import annotations

import copy
import math
from numbers import Real

import numpy as np
from scipy.special import logsumexp
from sklearn.base import clone
from sklearn.utils._param_validation import HasMethods, Interval, StrOptions

from rdpest.estimators.base import RenyiEstimatorBase
from rdpest.estimators.log_ratios import (
    _DirectedLogRatio,
    _GaussianLogRatio,
)
from rdpest.estimators.results import (
    DirectionResult,
    HoeffdingDiagnostics,
    MarkovDiagnostics,
)
from rdpest.estimators.splits import min_two_way_sample_size, split_indices
from rdpest.stats.bounds import _hoeffding_lower, _mean_upper
from rdpest.stats.regions import log_mean_exp

__all__ = ["HoeffdingRenyiBound", "MarkovRenyiBound"]

# A given privacy loss is checked against what every log p/q satisfies (a change of measure):
# E_Q[e^{L(Y)}] = P(q > 0) <= 1 and E_P[e^{-L(X)}] = Q(p > 0) <= 1. Each is tested by betting
# against it (Waudby-Smith & Ramdas 2024, "Estimating means of bounded random variables by
# betting", JRSS-B, Sec. 2): for Z >= 0 with E[Z] <= 1 and a bet λ in [0, 1), the capital
# Π_i (1 + λ(Z_i − 1)) has expectation at most 1 over independent rows, and so has the average
# of the capitals over a fixed grid of bets; by Markov's inequality it reaches 2/LEVEL with
# probability at most LEVEL/2. A capital that does shows, with error probability at most
# _RATIO_CHECK_LEVEL over the two tests, that L is not the privacy loss of the laws that drew the
# samples (a flipped sign, a log in another base, densities' normalising constants that do not
# cancel), whose Markov and Hoeffding "bounds" need not be bounds. Constant bets make the capital
# a product, so the test does not depend on the rows' order (a predictable, adaptive bet would,
# and refused true losses on sorted samples), and need no bound on Z.
_RATIO_CHECK_LEVEL = 1e-6
_RATIO_CHECK_BETS = np.concatenate([2.0 ** -np.arange(1, 21), 1.0 - 2.0 ** -np.arange(2, 11)])

# Rounding slack when checking L ≤ B: L computed exactly at B (e.g. |x| − |x − Δ| for x > Δ in
# the Laplace mechanism) may exceed it by a few ulps.
_BOUND_TOLERANCE = 1e-9


# ---------------------------------------------------------------------------------------------
# Shared machinery of the two privacy-loss estimators
# ---------------------------------------------------------------------------------------------


class _PrivacyLossEstimator(RenyiEstimatorBase):
    """Resolves ``log_ratio`` per direction; subclasses compute the bound from loss values."""

    def _ratio_kind(self) -> str:
        if self.log_ratio is None:
            return "gaussian"
        if hasattr(self.log_ratio, "log_ratio"):
            return "estimator"
        owner = getattr(self.log_ratio, "__self__", None)
        if hasattr(owner, "log_ratio") and hasattr(owner, "fit"):
            # a fitted estimator's method is an estimate: taken as a callable it would be
            # "exact", and its bound labelled certified
            raise ValueError(
                f"log_ratio is the method {type(owner).__name__}.{self.log_ratio.__name__} of a "
                "fitted estimator, an ESTIMATE of log p/q: pass the estimator itself "
                "(log_ratio=est), so the bound is reported as uncertified; a callable is taken "
                "as the exact privacy loss"
            )
        return "exact"

    def __sklearn_clone__(self):
        """``sklearn.base.clone``, except that an estimator given as ``log_ratio`` stays fitted.

        The default clone re-creates every parameter that has ``get_params`` unfitted, which
        would turn the documented ``log_ratio=<fitted DVRenyiEstimator>`` into an unfitted
        estimator in every clone (GridSearchCV, auditors). Here such a ``log_ratio`` is
        deep-copied with its fitted state (the clone is still independent of the original);
        every other parameter is cloned as usual.
        """
        ratio = self.log_ratio
        if not hasattr(ratio, "get_params") or isinstance(ratio, type):
            return super().__sklearn_clone__()
        params = {
            name: copy.deepcopy(value) if name == "log_ratio" else clone(value, safe=False)
            for name, value in self.get_params(deep=False).items()
        }
        new = type(self)(**params)
        for attribute in ("_metadata_request", "_sklearn_output_config"):
            if hasattr(self, attribute):
                setattr(new, attribute, copy.deepcopy(getattr(self, attribute)))
        return new

    def min_samples_per_side(self) -> int:
        if self._ratio_kind() != "gaussian":
            return 1
        # The smallest n leaving two rows to fit (a fitted variance needs two) and one to
        # certify.
        return min_two_way_sample_size(self.test_fraction, train_rows=2)

    def _start_fit(self) -> None:
        self.log_ratios_: dict = {}

    def will_be_certified(self) -> bool:
        # Only the true privacy loss certifies (Markov and Hoeffding need E_Q[e^{αL}] exactly).
        return self._ratio_kind() == "exact"

    def _directed_loss(self, P, Q, seed, direction):
        """The privacy loss of this direction, the samples that certify with it, and the split.

        The split is given as the :class:`DirectionResult` fields ``n_train``, ``n_test``,
        ``test_index_p`` and ``test_index_q``.
        """
        if self._ratio_kind() != "gaussian":
            # A given ratio was not fitted on these samples: all of them certify.
            ratio = _DirectedLogRatio(self.log_ratio, -1.0 if direction == "reverse" else 1.0)
            return ratio, P, Q, {"n_train": (0, 0), "n_test": (len(P), len(Q))}
        rng = np.random.default_rng(seed)
        train_p, test_p = split_indices(len(P), round(len(P) * self.test_fraction), rng)
        train_q, test_q = split_indices(len(Q), round(len(Q) * self.test_fraction), rng)
        # Fitted on the swapped samples in the reverse direction, so it estimates log q/p there.
        ratio = _GaussianLogRatio(P[train_p], Q[train_q], _sample_names(direction))
        split = {
            "n_train": (len(train_p), len(train_q)),
            "n_test": (len(test_p), len(test_q)),
            "test_index_p": test_p,
            "test_index_q": test_q,
        }
        return ratio, P[test_p], Q[test_q], split

    def _check_exact_loss(self, loss_on, direction: str) -> None:
        """For a callable ``log_ratio``: refuse it where the samples show it is not log p/q
        (:func:`_check_privacy_loss`), checked as given, of the forward pair (X ~ P, Y ~ Q).
        ``loss_on(form)`` gives the direction's loss on its P ("p") or Q ("q") sample, the
        values the fit computes anyway (the user's callable is not called again)."""
        checked = direction == "reverse" and self.direction == "max"  # by the forward fit
        if self._ratio_kind() == "exact" and not checked:
            # Forward: L on Y is the loss on Q's sample. Reverse: the loss is −L, on P = Y.
            if direction == "reverse":
                _check_privacy_loss(-loss_on("p"), -loss_on("q"))
            else:
                _check_privacy_loss(loss_on("q"), loss_on("p"))

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.non_deterministic = self.log_ratio is None and self.random_state is None
        return tags


def _log_capital(log_z: np.ndarray) -> float:
    """log of the average over _RATIO_CHECK_BETS of the capitals Π_i (1 + λ(Z_i − 1)), from
    log Z (each factor is log((1 − λ) + λ·Z), computed without forming Z); the rows are summed in
    sorted order, so that the result does not depend on theirs even by rounding."""
    log_z = np.sort(log_z)
    logs = [
        float(np.logaddexp(math.log1p(-bet), math.log(bet) + log_z).sum())
        for bet in _RATIO_CHECK_BETS
    ]
    return float(logsumexp(logs)) - math.log(len(logs))


def _check_privacy_loss(loss_y, loss_x) -> None:
    """Refuse a given privacy loss L of the forward pair (X ~ P, Y ~ Q), whose values on Y and X
    are given, that the samples show is not log p/q (see _RATIO_CHECK_LEVEL): a ValueError
    naming the mean that exceeds 1 and what usually causes it."""
    checks = (
        (loss_y, 1.0, "e^L over Y (the sample from Q)", "E_Q[p/q] <= 1"),
        (loss_x, -1.0, "e^-L over X (the sample from P)", "E_P[q/p] <= 1"),
    )
    threshold = math.log(len(checks) / _RATIO_CHECK_LEVEL)
    for loss, sign, what, identity in checks:
        log_z = sign * loss
        evidence = _log_capital(log_z)
        if evidence >= threshold:
            log_mean = log_mean_exp(log_z)  # shown as a power of e where e^x overflows
            mean = f"{math.exp(log_mean):.4g}" if log_mean < 700 else f"e^{log_mean:.6g}"
            raise ValueError(
                f"log_ratio is not log p/q of the laws that drew these samples: the mean of "
                f"{what} is {mean}, above 1 beyond chance (a "
                f"test at level {_RATIO_CHECK_LEVEL:g}), while for the privacy loss L = log p/q "
                f"its expectation is at most 1 ({identity}). Markov and Hoeffding bounds "
                "computed with it need not be lower bounds. Check its sign (log p/q with X ~ P "
                "and Y ~ Q, not swapped), its base (natural logarithms) and the densities' "
                "normalising constants"
            )


def _sample_names(direction: str) -> tuple[str, str]:
    """Which user sample plays P and Q in a direction (for error messages)."""
    return ("Y", "X") if direction == "reverse" else ("X", "Y")


# ---------------------------------------------------------------------------------------------
# Markov
# ---------------------------------------------------------------------------------------------


class MarkovRenyiBound(_PrivacyLossEstimator):
    """Lower confidence bound on D_α(P‖Q) from the privacy loss, by Markov's inequality.

    The paper's Theorem 3.1 (Kim, Varshney & Alabi 2026). With L = log p/q and Z_i = e^{αL(Y_i)},
    Y_i ~ Q, E_Q[Z] = e^{(α−1)D_α}; Markov's inequality on the sample mean Ẑ gives, with
    probability at least 1 − β,

        D_α(P‖Q) ≥ D̂_Q − log(1/β)/(α−1),   D̂_Q = 1/(α−1) · log Ẑ   (the "Q form").

    The same argument applies to W_i = e^{(α−1)L(X_i)}, X_i ~ P, since E_P[W] = E_Q[Z] (the
    "P form", D̂_P = 1/(α−1) · log Ŵ); it is far tighter at large D_α, where Ẑ is dominated by
    rare Q samples. Markov needs no bound on L, so the bound holds for every pair (P, Q) — but
    only with the TRUE privacy loss.

    Parameters
    ----------
    alpha : float, default=2.0
        Rényi order, >= 1 + 1e-6 (closer orders are refused: no bound there is reliable).
    beta : float, default=0.05
        The lower bound holds with probability at least 1 − beta.
    direction : {"forward", "reverse", "max"}, default="forward"
        D_α(P‖Q), D_α(Q‖P), or the larger of the two (beta is split across directions).
    log_ratio : callable, fitted estimator or None, default=None
        The privacy loss x ↦ log p(x)/q(x) of the FORWARD pair (X ~ P, Y ~ Q), in every
        direction (it is negated for ``direction="reverse"``).

        - A callable: the exact loss, vectorised; it receives the (n, d) sample array (a function
          of (n,) arrays also works for d = 1) and returns n finite values. ``certified_`` is
          True and all samples certify. A fitted estimator's bound method (``est.log_ratio``)
          is refused: pass the estimator itself. So is a callable that the samples show is not
          log p/q (a ValueError): every privacy loss has E_Q[e^L] <= 1 and E_P[e^-L] <= 1, and
          a test of each at level 1e-6 (by betting, whatever the rows' order) catches a flipped
          sign, a logarithm in another base or a constant that does not cancel, where the
          samples suffice to see it.
        - An estimator with a ``log_ratio`` method, e.g. a :class:`rdpest.DVRenyiEstimator`
          fitted by the user on OTHER data with X ~ P and Y ~ Q: its estimate is used on all
          samples; ``certified_`` is False. ``sklearn.base.clone`` (GridSearchCV, auditors)
          keeps it fitted: the clone gets a deep copy with its fitted state, where the default
          clone would re-create it unfitted. ``get_params(deep=True)`` lists its parameters
          as ``log_ratio__*``; do not tune them (changing them does not refit it).
        - None: a Gaussian (multivariate, with a small ridge) is fitted to the training part of
          each sample and their log density ratio estimates L; the other part (``test_fraction``)
          certifies. ``certified_`` is False.

        With an estimated L̂, E_Q[e^{αL̂}] ≠ e^{(α−1)D_α} in general (it can be larger), so the
        Markov argument does not apply and the bound is only as good as the estimate.
    sample : {"both", "p", "q"}, default="both"
        Which form bounds D_α: "q" (the paper's Z on Q), "p" (W on P), each at level beta, or
        "both", each at beta/2 (union bound), reporting the larger bound.
    test_fraction : float, default=0.5
        Part of each sample that certifies when ``log_ratio`` is None (ignored otherwise).
    random_state : int, RandomState, Generator or None, default=None
        Seeds the split when ``log_ratio`` is None.
    pooled : bool, default=False
        False: ``fit(X, Y)``, X ~ P and Y ~ Q. True: the pooled form ``fit(Z, membership)``, the
        two samples stacked in Z and ``membership[i]`` 1 for a row from P, 0 for one from Q
        (same results; usable in a Pipeline and in stratified cross-validation), see
        :class:`rdpest.DVRenyiEstimator`.

    Attributes
    ----------
    divergence_ : float
        Point estimate: the P-form plug-in D̂_P when P samples are used (``sample`` "both" or
        "p"), else the Q-form D̂_Q, clamped at 0 and raised to the direction's certified bound where
        the other form's bound exceeds it (the raw value is in ``diagnostics``); the larger
        direction for ``direction="max"``. ``score`` computes the same plug-in
        (unclamped) on new samples with the same privacy loss.
    lower_bound_ : float
        One-sided (1 − beta) lower confidence bound, clamped at 0, where ``certified_`` is True.
        With an estimated privacy loss (``certified_`` False) it is the same formula evaluated
        with the estimate: it has no level, and can exceed D_α and ``divergence_`` (by orders
        of magnitude with a Gaussian fitted to a few rows).
    certified_ : bool
        True when ``log_ratio`` is a callable (the exact privacy loss), else False.
    directions_ : dict of str to DirectionResult
        Per direction; ``diagnostics`` is a
        :class:`~rdpest.estimators.results.MarkovDiagnostics` (the form used, the estimate and
        unclamped bound of each form).
    log_ratios_ : dict of str to callable
        The privacy loss used in each direction (``log_ratios_[d](A, name)``).
    n_features_in_ : int

    See Also
    --------
    HoeffdingRenyiBound : lower and upper bounds when the privacy loss is bounded.
    rdpest.DVRenyiEstimator : certified bounds without knowing the privacy loss.

    References
    ----------
    B. D. Kim, L. R. Varshney, D. Alabi. Optimal Guarantees for Auditing Rényi Differentially
    Private Machine Learning, 2026, Theorem 3.1.

    Examples
    --------
    >>> import numpy as np
    >>> from rdpest.estimators.privacy_loss import MarkovRenyiBound
    >>> rng = np.random.default_rng(0)
    >>> X, Y = rng.normal(2.0, 1.0, 2000), rng.normal(0.0, 1.0, 2000)  # D_2 = 2·2²/2 = 4
    >>> est = MarkovRenyiBound(alpha=2.0, log_ratio=lambda x: 2.0 * x - 2.0).fit(X, Y)
    >>> est.certified_, 3.0 < est.divergence_ < 5.0, 0.0 < est.lower_bound_ < 4.0
    (True, True, True)
    """

    _parameter_constraints: dict = {
        **RenyiEstimatorBase._parameter_constraints,
        "log_ratio": [callable, HasMethods(["log_ratio"]), None],
        "sample": [StrOptions({"both", "p", "q"})],
        "test_fraction": [Interval(Real, 0, 1, closed="neither")],
        "random_state": ["random_state", np.random.Generator],
    }

    def __init__(
        self,
        alpha=2.0,
        beta=0.05,
        direction="forward",
        *,
        log_ratio=None,
        sample="both",
        test_fraction=0.5,
        random_state=None,
        pooled=False,
    ):
        self.alpha = alpha
        self.beta = beta
        self.direction = direction
        self.log_ratio = log_ratio
        self.sample = sample
        self.test_fraction = test_fraction
        self.random_state = random_state
        self.pooled = pooled

    def _fit_direction(self, P, Q, beta, seed, direction) -> DirectionResult:
        ratio, P_cert, Q_cert, split = self._directed_loss(P, Q, seed, direction)
        self.log_ratios_[direction] = ratio
        name_p, name_q = _sample_names(direction)
        values: dict[str, np.ndarray] = {}

        def loss_on(form: str) -> np.ndarray:  # each sample's loss, computed once
            if form not in values:
                values[form] = ratio(P_cert, name_p) if form == "p" else ratio(Q_cert, name_q)
            return values[form]

        self._check_exact_loss(loss_on, direction)
        alpha = float(self.alpha)
        forms = ("p", "q") if self.sample == "both" else (self.sample,)
        form_beta = beta / len(forms)  # union bound over the forms used
        estimates, raw_bounds = {}, {}
        for form in forms:
            if form == "p":
                # E_P[e^{(α−1)L}] = E_Q[(p/q)^α] = e^{(α−1)D_α} (the definition of D_α).
                log_mean = log_mean_exp((alpha - 1.0) * loss_on("p"))
            else:
                # Kim, Varshney & Alabi (2026), Thm 3.1: Z = e^{αL(Y)}, E_Q[Z] = e^{(α−1)D_α}.
                log_mean = log_mean_exp(alpha * loss_on("q"))
            estimates[form] = log_mean / (alpha - 1.0)
            # Thm 3.1: Markov gives P(mean > E/β) <= β, i.e. log E >= log mean − log(1/β).
            raw_bounds[form] = (log_mean - math.log(1.0 / form_beta)) / (alpha - 1.0)
        best = max(raw_bounds, key=raw_bounds.get)
        point = estimates["p"] if "p" in estimates else estimates["q"]
        return DirectionResult(
            # D_α >= 0: a negative plug-in (an estimated loss, or sampling error near D = 0) is
            # reported as 0; the raw value stays in ``diagnostics.estimates``.
            divergence=max(0.0, float(point)),
            lower_bound=max(0.0, float(raw_bounds[best])),
            beta=beta,
            raw_lower_bound=raw_bounds[best],
            **split,
            diagnostics=MarkovDiagnostics(
                log_ratio=self._ratio_kind(),
                form=best,
                form_beta=form_beta,
                estimates=estimates,
                raw_lower_bounds=raw_bounds,
            ),
        )

    def _score_direction(self, X, Y, direction) -> float:
        ratio = self.log_ratios_[direction]
        name_p, name_q = _sample_names(direction)
        alpha = float(self.alpha)
        if self.sample in ("both", "p"):
            return log_mean_exp((alpha - 1.0) * ratio(X, name_p)) / (alpha - 1.0)
        return log_mean_exp(alpha * ratio(Y, name_q)) / (alpha - 1.0)


# ---------------------------------------------------------------------------------------------
# Hoeffding
# ---------------------------------------------------------------------------------------------


class HoeffdingRenyiBound(_PrivacyLossEstimator):
    """Lower and upper confidence bounds on D_α(P‖Q) under a bounded privacy loss (Hoeffding).

    The paper's Theorems B.2 and B.3 (Kim, Varshney & Alabi 2026). Under its Assumption B.1,
    L = log p/q ≤ B everywhere, Z = e^{αL(Y)} with Y ~ Q lies in [0, M], M = e^{αB}, and
    E_Q[Z] = e^{(α−1)D_α}. With Ẑ the sample mean of n values of Z,

    - lower (Thm B.3, one-sided Hoeffding at level β):
      D_α ≥ 1/(α−1) · log max{1, Ẑ − M·√(log(1/β)/(2n))};
    - upper (Thm B.2, at level β): D_α ≤ 1/(α−1) · log(Ẑ + M·√(log(2/β)/(2n))), further capped
      at αB/(α−1) since Ẑ ≤ M.

    Each bound holds with probability at least 1 − β on its own. Theorem B.2 takes its radius
    from the TWO-sided Hoeffding inequality (β/2 per side), so the interval [Ẑ − t, Ẑ + t] with
    t = M·√(log(2/β)/(2n)) holds jointly at 1 − β: its lower end is reported in
    ``directions_[...].diagnostics.interval`` together with the upper bound; ``lower_bound_`` is
    the tighter one-sided Theorem B.3 bound. (``lower_bound_`` and ``upper_bound_`` taken
    together hold with probability at least 1 − 2β.)

    For pure ε-DP mechanisms B = ε is exact; for others the assumption is a truncation model.
    Samples whose privacy loss exceeds B refute the assumption: ``fit`` raises ``ValueError``
    rather than report a wrong interval.

    Parameters
    ----------
    alpha : float, default=2.0
        Rényi order, >= 1 + 1e-6 (closer orders are refused: no bound there is reliable).
    beta : float, default=0.05
        Each bound holds with probability at least 1 − beta.
    direction : {"forward", "reverse", "max"}, default="forward"
        D_α(P‖Q), D_α(Q‖P), or the larger of the two (beta is split across directions; the upper
        bound of "max" is the larger of the two upper bounds). The privacy loss of the reverse
        direction is −L.
    privacy_loss_bound : float
        B > 0 with ``|L| <= B``: a bound on the absolute privacy loss, as for an ε-DP mechanism
        (B = ε). Theorems B.2 and B.3 use L ≤ B (−L ≤ B in reverse); a loss below −B is refused
        as well, since no privacy loss of an ε-DP pair goes there and a loss that does (e.g. a
        constant −50) is not a privacy loss at all. Required.
    log_ratio : callable, fitted estimator or None, default=None
        The privacy loss log p/q of the forward pair, as in :class:`MarkovRenyiBound`: a callable
        (exact, ``certified_`` True; refused where the samples refute it) receiving the (n, d)
        sample array, an estimator with a ``log_ratio`` method fitted on other data, or None
        (Gaussian fit on a training split).
        Estimated losses are clipped to [−B, B] (the assumption says the true loss is), and
        ``certified_`` is False: the bound then needs the estimate to be exact.
    test_fraction : float, default=0.5
        Part of each sample that certifies when ``log_ratio`` is None (ignored otherwise).
    random_state : int, RandomState, Generator or None, default=None
        Seeds the split when ``log_ratio`` is None.
    pooled : bool, default=False
        False: ``fit(X, Y)``, X ~ P and Y ~ Q. True: the pooled form ``fit(Z, membership)``, the
        two samples stacked in Z and ``membership[i]`` 1 for a row from P, 0 for one from Q
        (same results; usable in a Pipeline and in stratified cross-validation), see
        :class:`rdpest.DVRenyiEstimator`.

    Attributes
    ----------
    divergence_ : float
        Point estimate D̂ = 1/(α−1) · log Ẑ, clamped at 0 (the larger direction for
        ``direction="max"``). Ẑ averages over the Q sample, so its spread grows like
        1/((α − 1)√n) as α approaches 1; there, read the bounds, or the point estimate of
        :class:`MarkovRenyiBound`, which averages over the P sample.
    lower_bound_ : float
        One-sided (1 − beta) lower confidence bound (Thm B.3), >= 0, where ``certified_`` is
        True; with an estimated privacy loss, the formula evaluated with the estimate (no level).
    upper_bound_ : float
        (1 − beta) upper confidence bound (Thm B.2), with the same proviso; the larger
        direction's for "max".
    certified_ : bool
        True when ``log_ratio`` is a callable (the exact privacy loss), else False. Both bounds
        also need the assumption ``|L| <= B``, which ``fit`` checks on every sample it evaluates.
    directions_ : dict of str to DirectionResult
        Per direction, with ``upper_bound`` set; ``diagnostics`` is a
        :class:`~rdpest.estimators.results.HoeffdingDiagnostics` (Ẑ/M, the Hoeffding radii and
        the joint two-sided interval).
    log_ratios_ : dict of str to callable
        The privacy loss used in each direction.
    n_features_in_ : int

    See Also
    --------
    MarkovRenyiBound : lower bound without assuming a bounded privacy loss.

    References
    ----------
    B. D. Kim, L. R. Varshney, D. Alabi. Optimal Guarantees for Auditing Rényi Differentially
    Private Machine Learning, 2026, Assumption B.1, Theorems B.2 and B.3. W. Hoeffding.
    Probability inequalities for sums of bounded random variables, JASA 58, 1963.

    Examples
    --------
    >>> import numpy as np
    >>> from rdpest.estimators.privacy_loss import HoeffdingRenyiBound
    >>> rng = np.random.default_rng(0)
    >>> X, Y = rng.laplace(0.5, 1.0, 5000), rng.laplace(0.0, 1.0, 5000)  # 0.5-DP Laplace pair
    >>> L = lambda x: np.abs(x) - np.abs(x - 0.5)
    >>> est = HoeffdingRenyiBound(alpha=2.0, privacy_loss_bound=0.5, log_ratio=L).fit(X, Y)
    >>> est.lower_bound_ <= est.divergence_ <= est.upper_bound_  # truth: D_2 ≈ 0.201
    True
    """

    _parameter_constraints: dict = {
        **RenyiEstimatorBase._parameter_constraints,
        "privacy_loss_bound": [Interval(Real, 0, None, closed="neither")],
        "log_ratio": [callable, HasMethods(["log_ratio"]), None],
        "test_fraction": [Interval(Real, 0, 1, closed="neither")],
        "random_state": ["random_state", np.random.Generator],
    }

    def __init__(
        self,
        alpha=2.0,
        beta=0.05,
        direction="forward",
        *,
        privacy_loss_bound,
        log_ratio=None,
        test_fraction=0.5,
        random_state=None,
        pooled=False,
    ):
        self.alpha = alpha
        self.beta = beta
        self.direction = direction
        self.privacy_loss_bound = privacy_loss_bound
        self.log_ratio = log_ratio
        self.test_fraction = test_fraction
        self.random_state = random_state
        self.pooled = pooled

    def _finish_fit(self) -> None:
        self.upper_bound_ = float(max(r.upper_bound for r in self.directions_.values()))

    def _bounded_loss(self, values, name, direction) -> tuple[np.ndarray, int]:
        """Loss values (on the samples of ``name``), checked (exact ratio) or clipped
        (estimated ratio) to [−B, B].

        Returns the values and how many were clipped.
        """
        bound = float(self.privacy_loss_bound)
        limit = bound + _BOUND_TOLERANCE * max(1.0, bound)
        if self._ratio_kind() == "exact":
            sign = "−log p/q" if direction == "reverse" else "log p/q"
            for value, side in ((values.max(), "above "), (values.min(), "below −")):
                if abs(value) > limit:
                    raise ValueError(
                        f"the privacy loss {sign} reaches {value:.6g} on a sample of {name}, "
                        f"{side}privacy_loss_bound={bound:g}: the bounded privacy loss "
                        "assumption of HoeffdingRenyiBound does not hold (privacy_loss_bound "
                        "must bound |log p/q|)"
                    )
        n_clipped = int(np.sum(np.abs(values) > limit))
        return np.clip(values, -bound, bound), n_clipped

    def _fit_direction(self, P, Q, beta, seed, direction) -> DirectionResult:
        ratio, P_cert, Q_cert, split = self._directed_loss(P, Q, seed, direction)
        self.log_ratios_[direction] = ratio
        name_p, name_q = _sample_names(direction)
        alpha, bound = float(self.alpha), float(self.privacy_loss_bound)
        raw = {}  # the loss on each sample, unclipped (also what the exact loss's check reads)
        if self._ratio_kind() == "exact":
            # Assumption B.1 is about every x: a violation on the P samples refutes it too.
            raw["p"] = ratio(P_cert, name_p)
            self._bounded_loss(raw["p"], name_p, direction)
        raw["q"] = ratio(Q_cert, name_q)
        loss, n_clipped = self._bounded_loss(raw["q"], name_q, direction)
        self._check_exact_loss(raw.__getitem__, direction)  # after the checks naming B
        n = loss.size
        # Z / M = e^{α(L − B)} ∈ [0, 1] (Assumption B.1), scaled so that M = e^{αB} never
        # overflows; log Ẑ = αB + log mean(Z/M).
        scaled = np.exp(alpha * (loss - bound))
        # Thm B.3: one-sided Hoeffding, Ẑ/M − √(log(1/β)/(2n)) (clamped at 0 by the library).
        lower_mean = _hoeffding_lower(scaled, beta, 0.0, 1.0)
        # Thm B.2: Ẑ/M + √(log(2/β)/(2n)) = the one-sided Hoeffding upper bound at β/2, capped
        # at 1 (i.e. Ẑ ≤ M) by the library.
        upper_mean = _mean_upper(scaled, beta / 2.0, 0.0, 1.0, "hoeffding")
        radius_two_sided = math.sqrt(math.log(2.0 / beta) / (2.0 * n))
        joint_lower_mean = max(0.0, float(scaled.mean()) - radius_two_sided)
        log_m = alpha * bound

        def to_divergence(mean_over_m: float) -> float:
            # D = 1/(α−1) · log max{1, M·mean}: E_Q[Z] >= 1 because D_α >= 0.
            if mean_over_m <= 0.0:
                return 0.0
            return max(0.0, (log_m + math.log(mean_over_m)) / (alpha - 1.0))

        raw_lower = (
            (log_m + math.log(lower_mean)) / (alpha - 1.0) if lower_mean > 0.0 else -math.inf
        )
        upper = (log_m + math.log(upper_mean)) / (alpha - 1.0)
        return DirectionResult(
            # D_α >= 0; an estimated loss (clipped to [−B, B]) can make the plug-in negative.
            divergence=max(0.0, log_mean_exp(alpha * loss) / (alpha - 1.0)),
            lower_bound=to_divergence(lower_mean),
            beta=beta,
            upper_bound=upper,
            raw_lower_bound=raw_lower,
            **split,
            diagnostics=HoeffdingDiagnostics(
                log_ratio=self._ratio_kind(),
                scaled_mean=float(scaled.mean()),
                radius_lower=math.sqrt(math.log(1.0 / beta) / (2.0 * n)),
                radius_upper=radius_two_sided,
                interval=(to_divergence(joint_lower_mean), upper),
                n_clipped=n_clipped,
            ),
        )

    def _score_direction(self, X, Y, direction) -> float:
        ratio = self.log_ratios_[direction]
        _, name_q = _sample_names(direction)
        loss, _ = self._bounded_loss(ratio(Y, name_q), name_q, direction)
        return log_mean_exp(float(self.alpha) * loss) / (float(self.alpha) - 1.0)
