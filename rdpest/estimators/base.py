"""Base class shared by every Rényi divergence estimator of rdpest.

It owns what all estimators have in common: the parameters ``alpha``, ``beta`` and ``direction``,
validation of the two samples, the split of ``beta`` across directions, and the fitted attributes
``divergence_``, ``lower_bound_``, ``certified_`` and ``directions_``. A subclass implements one
direction, :meth:`RenyiEstimatorBase._fit_direction` (estimate D_α(P‖Q) from X ~ P and Y ~ Q), and
the held-out score, :meth:`RenyiEstimatorBase._score_direction`.

Directions: ``"forward"`` estimates D_α(P‖Q), ``"reverse"`` D_α(Q‖P) and
``"max"`` the larger of the two, which is what an (α, ε_α)-RDP claim bounds because neighbouring is
symmetric. With ``"max"`` each direction is certified at level β/2: if max(L_f, L_r) exceeded
max(D_f, D_r) then one of the two bounds would exceed its own divergence, an event of probability at
most β/2 + β/2 (union bound).
"""

from __future__ import annotations

import dataclasses
import math
import sys
from abc import ABCMeta, abstractmethod
from numbers import Real

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.pipeline import Pipeline
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_array, check_is_fitted

from rdpest.estimators.results import DirectionResult
from rdpest.utils.validation import (
    MAX_ALPHA,
    MIN_BETA,
    check_estimation_alpha,
    check_int,
    seed_from_random_state,
)

__all__ = ["DirectionResult", "RenyiEstimatorBase"]

DIRECTIONS = ("forward", "reverse", "max")


class RenyiEstimatorBase(BaseEstimator, metaclass=ABCMeta):
    """Common behaviour of rdpest's estimators of D_α between the laws of two samples.

    ``fit(X, Y)`` takes X ~ P and Y ~ Q, array-likes of shape (n,) or (n, d); the two may have
    different numbers of rows. An abstract class: see :class:`rdpest.DVRenyiEstimator` and the
    other estimators of :mod:`rdpest.estimators`.

    A subclass supplies:

    - ``__init__`` storing its parameters unchanged (scikit-learn's convention), and
      ``_parameter_constraints`` extending this class's (``alpha``, ``beta``, ``direction``);
    - ``_fit_direction(X, Y, beta, seed, direction)`` (abstract): one direction's estimate of
      D_α(P‖Q) from X ~ P and Y ~ Q, with a lower bound at level ``beta``, as a
      :class:`DirectionResult`;
    - ``_score_direction(X, Y, direction)`` (abstract): the held-out estimate on new samples;
    - ``min_samples_per_side()`` where its splits need more than 2 rows per sample (or accept 1);
    - ``will_be_certified()`` where its bound is not certified for every parameter setting;
    - optionally the hooks ``_check_params`` (cross-parameter checks), ``_start_fit`` (reset
      per-fit state) and ``_finish_fit`` (derive attributes from ``directions_``).

    The base class validates parameters and samples, splits ``beta`` and the random seed
    between the directions, and sets ``divergence_``, ``lower_bound_``, ``certified_``,
    ``directions_`` and ``n_features_in_``. Where the bound is certified, every direction's
    estimate is at least its bound (a raw estimate below it is raised to it; the raw values
    stay in the diagnostics). A fit
    that raises leaves the estimator unfitted: no attribute of an earlier fit survives it.
    """

    _parameter_constraints: dict = {
        "alpha": [Interval(Real, 1, MAX_ALPHA, closed="right")],
        "beta": [Interval(Real, MIN_BETA, 1, closed="left")],
        "direction": [StrOptions(set(DIRECTIONS))],
        "pooled": ["boolean"],
    }

    def _check_all_params(self) -> None:
        """scikit-learn's parameter constraints, the order an estimate needs (at least
        1 + MIN_ALPHA_GAP, with the reason), then the subclass's cross-parameter checks."""
        self._validate_params()
        check_estimation_alpha(self.alpha)
        self._check_params()

    # ------------------------------------------------------------------ subclass interface
    @abstractmethod
    def _fit_direction(self, X, Y, beta: float, seed: int, direction: str) -> DirectionResult:
        """Estimate D_α(P‖Q) from X ~ P and Y ~ Q with error level ``beta``.

        ``seed`` seeds everything random in this direction; ``direction`` ("forward" or
        "reverse") only names it (the base class has already swapped the samples for
        "reverse").
        """

    @abstractmethod
    def _score_direction(self, X, Y, direction: str) -> float:
        """Held-out estimate of D_α(P‖Q) on new X ~ P and Y ~ Q with the fitted state kept."""

    # ------------------------------------------------------------------ public contract
    def min_samples_per_side(self) -> int:
        """Fewest samples each of the two samples needs with the current parameters.

        ``fit`` refuses fewer with a ``ValueError``; an auditor sizes its runs with it. The
        default, 2, suits estimators that do not split their samples; subclasses that split
        override it.
        """
        return 2

    def will_be_certified(self) -> bool:
        """Whether ``fit`` with the current parameters will give a certified bound.

        A certified bound needs no assumption beyond i.i.d. samples. Known before fitting
        (``certified_`` after fitting equals it), so an auditor can share its level β among the
        certified estimators only. The default is True; subclasses whose bound depends on an
        assumption for some parameters (e.g. an exact log ratio) override it.
        """
        return True

    def max_certifiable(self, n_p: int, n_q: int) -> float:
        """The largest lower bound ``fit`` can certify from ``n_p`` and ``n_q`` rows, whatever
        their values, with the current parameters (``beta``, ``direction``, splits).

        A ceiling: no sample of these sizes gives a larger bound. It is the best of the
        estimator's certificates on perfectly separated values; a fit that chooses its
        certificate on a training split may choose another and stay below it even on perfectly
        separated samples. An audit whose claim is at or above every certified estimator's
        ceiling could not have refuted it, whatever the training did. 0.0 for an estimator that
        will not be certified; ``inf`` where the bound has no ceiling that depends on the sample
        sizes alone (the default; the estimators that certify through a held-out split override
        it).

        Examples
        --------
        >>> from rdpest import BernoulliTPRFPRBaseline
        >>> est = BernoulliTPRFPRBaseline(alpha=2.0, beta=0.05, direction="max")
        >>> 0 < est.max_certifiable(20, 20) < est.max_certifiable(1000, 1000) < 10
        True
        """
        n_p = check_int(n_p, "n_p", minimum=1)
        n_q = check_int(n_q, "n_q", minimum=1)
        self._check_all_params()
        if not self.will_be_certified():
            return 0.0
        beta = float(self.beta) / (2 if self.direction == "max" else 1)
        sizes = {"forward": (n_p, n_q), "reverse": (n_q, n_p)}
        directions = ["forward", "reverse"] if self.direction == "max" else [self.direction]
        return float(max(self._max_certifiable_direction(*sizes[d], beta) for d in directions))

    def _max_certifiable_direction(self, n_p: int, n_q: int, beta: float) -> float:
        """:meth:`max_certifiable` of one direction, P with ``n_p`` rows and Q with ``n_q``."""
        return math.inf

    def _power_designs(self, n_p: int, n_q: int) -> dict:
        """How this estimator certifies in its forward direction from ``n_p`` and ``n_q`` rows,
        for predicting an audit's power (:func:`rdpest.stats.power.detectable_divergence_of`):
        ``threshold`` = (certifying rows of P, of Q, Clopper–Pearson levels of the TPR and the
        FPR) and ``bracket`` = (certifying rows of P, of Q, level, confidence method, critic
        bound), each None where the estimator does not certify that way (both for an
        uncertified estimator); ``tries``: how many directions certify (2 for "max")."""
        tries = 2 if self.direction == "max" else 1
        if not self.will_be_certified():
            return {"threshold": None, "bracket": None, "tries": tries}
        beta = float(self.beta) / tries
        return {**self._power_designs_direction(n_p, n_q, beta), "tries": tries}

    #: Where the power model of this estimator's certificates held when checked against its
    #: realised power: up to this α, and for claims up to this share of the largest bound it can
    #: certify from the sample sizes (:meth:`max_certifiable`); outside, an audit does not count
    #: its power (:meth:`_power_modelled`).
    _power_model_max_alpha: float = math.inf
    _power_model_max_claim_share: float = 1.0

    def _power_model_covers_order(self) -> bool:
        """Whether the power model covers this certified estimator at its α (for some sizes)."""
        return self.will_be_certified() and float(self.alpha) <= self._power_model_max_alpha

    def _power_modelled(self, n_p: int, n_q: int, claim: float, ceiling=None) -> bool:
        """Whether the power model (:func:`rdpest.stats.power.detectable_divergence_of`) may be
        used for this certified estimator at its α, these sample sizes and this claim: outside
        the range where it was checked against audits' realised power, an audit counts no power
        for it. ``ceiling``: :meth:`max_certifiable` of these sizes, where already computed."""
        if not self._power_model_covers_order():
            return False
        share = self._power_model_max_claim_share
        if share >= 1.0:
            return True
        return claim <= share * (self.max_certifiable(n_p, n_q) if ceiling is None else ceiling)

    def _power_designs_direction(self, n_p: int, n_q: int, beta: float) -> dict:
        return {"threshold": None, "bracket": None}

    def _check_params(self) -> None:
        """Cross-parameter checks that constraints cannot express (override as needed)."""

    def _start_fit(self) -> None:
        """Reset per-fit state after validation, before any direction is fitted (a hook)."""

    def _finish_fit(self) -> None:
        """Derive estimator-wide attributes from ``directions_`` at the end of fit (a hook)."""

    # ------------------------------------------------------------------ validation
    def _two_samples(self, X, Y, method: str):
        """(X, Y) as two samples: split from the pooled form when ``pooled`` is set, else
        checked not to come from a Pipeline that transformed X only."""
        if getattr(self, "pooled", False):
            return _unpool(X, Y, type(self).__name__)
        if _in_transforming_pipeline(self):
            raise ValueError(
                f"{type(self).__name__}.{method}(X, Y) was called by a Pipeline with "
                "transforming steps: the Pipeline transforms X but passes the second sample Y "
                "through untransformed, so the two samples are no longer comparable and the "
                "estimate (and its bound) would be a false divergence. Use the pooled form: "
                f"set pooled=True on the {type(self).__name__} and fit the Pipeline on the "
                "stacked samples with a membership label, "
                "pipe.fit(np.concatenate([X, Y]), np.r_[np.ones(len(X)), np.zeros(len(Y))])"
            )
        return X, Y

    def _check_feature_names(self, X, Y, *, reset: bool) -> None:
        """Samples with named columns (DataFrames) are paired by name, never by position alone.

        Two samples whose columns carry the same names in another order would otherwise be
        compared column by column, feature a against feature b. Records ``feature_names_in_`` at
        fit; ``score`` checks its samples against it, as scikit-learn's estimators do.
        """
        names = {"X": _column_names(X), "Y": _column_names(Y)}
        both = [n for n in names.values() if n is not None]
        if len(both) == 2 and both[0] != both[1]:
            if sorted(both[0]) == sorted(both[1]):
                raise ValueError(
                    "X and Y have the same columns in a different order: reorder Y as X "
                    f"(Y[list(X.columns)]) so that each feature is compared with itself; X: "
                    f"{both[0][:6]}, Y: {both[1][:6]}"
                )
            raise ValueError(
                f"X and Y have different column names: X {both[0][:6]}, Y {both[1][:6]}"
            )
        found = both[0] if both else None
        if reset:
            if found is None:
                self.__dict__.pop("feature_names_in_", None)
            else:
                self.feature_names_in_ = np.asarray(found, dtype=object)
            return
        fitted = getattr(self, "feature_names_in_", None)
        if fitted is not None and found is not None and list(fitted) != found:
            raise ValueError(
                f"the samples' column names {found[:6]} are not the ones {type(self).__name__} "
                f"was fitted with, {list(fitted)[:6]}"
            )

    def _validate_samples(self, X, Y, *, reset: bool) -> tuple[np.ndarray, np.ndarray]:
        if Y is None:
            raise ValueError(
                f"{type(self).__name__} requires y to be passed, but the target y is None: "
                "fit(X, Y) needs two samples, X ~ P and Y ~ Q"
            )
        self._check_feature_names(X, Y, reset=reset)
        arrays = []
        for data, name in ((X, "X"), (Y, "Y")):
            try:
                arr = check_array(
                    data,
                    ensure_2d=False,
                    allow_nd=True,
                    dtype=np.float64,
                    ensure_all_finite=True,
                    input_name=name,
                    ensure_min_samples=1,
                )
            except (ValueError, TypeError) as exc:
                raise ValueError(
                    f"{name} (the sample from {'P' if name == 'X' else 'Q'}): {exc}"
                ) from None
            if arr.ndim == 0:
                raise ValueError(f"{name} must be an array of samples, got a scalar")
            if arr.ndim > 2:
                raise ValueError(
                    f"{name} must have shape (n,) or (n, d), got {arr.ndim}-D shape {arr.shape}"
                )
            arrays.append(arr.reshape(-1, 1) if arr.ndim == 1 else arr)
        P, Q = arrays
        if P.shape[1] != Q.shape[1]:
            raise ValueError(
                f"X and Y must have the same number of features, got {P.shape[1]} and {Q.shape[1]}"
            )
        if reset:
            self.n_features_in_ = P.shape[1]
        elif P.shape[1] != self.n_features_in_:
            raise ValueError(
                f"X has {P.shape[1]} features, but {type(self).__name__} was fitted with "
                f"{self.n_features_in_} features"
            )
        needed = int(self.min_samples_per_side())
        for arr, name in ((P, "X"), (Q, "Y")):
            if reset and arr.shape[0] < needed:
                # A row of many values is more likely one sample laid out as a row than many
                # features: say so (a user passing X[None, :] read only "X has 1 samples").
                row = f" (shape {arr.shape}: pass one-dimensional values as a 1-D array)"
                raise ValueError(
                    f"{name} has {arr.shape[0]} samples; {type(self).__name__} with these "
                    f"parameters needs at least {needed} per sample"
                    + (row if arr.shape[1] >= needed else "")
                )
        return P, Q

    # ------------------------------------------------------------------ public API
    def fit(self, X, Y=None):
        """Estimate D_α between the laws of X and Y and a lower confidence bound on it.

        Parameters
        ----------
        X : array-like of shape (n_p,) or (n_p, d)
            Sample from P.
        Y : array-like of shape (n_q,) or (n_q, d)
            Sample from Q.

        Returns
        -------
        self

        Raises
        ------
        ValueError
            For bad parameters or samples; the estimator is then unfitted, as after any fit
            that raises (a refit that failed half-way kept the earlier fit's bounds beside an
            empty ``directions_``).
        """
        try:
            return self._fit(X, Y)
        except BaseException:
            self._forget_fit()
            raise

    def _forget_fit(self) -> None:
        """Drop every fitted attribute (scikit-learn's mark: a name ending in ``_``)."""
        params = set(self.get_params(deep=False))
        for name in [n for n in vars(self) if n.endswith("_") and not n.startswith("__")]:
            if name not in params:
                delattr(self, name)

    def _fit(self, X, Y):
        self._check_all_params()
        X, Y = self._two_samples(X, Y, "fit")
        P, Q = self._validate_samples(X, Y, reset=True)
        self._start_fit()
        seed_forward, seed_reverse = np.random.default_rng(
            seed_from_random_state(getattr(self, "random_state", None))
        ).integers(0, 2**31 - 1, size=2)
        beta = float(self.beta)
        self.directions_: dict[str, DirectionResult] = {}
        if self.direction in ("forward", "max"):
            beta_f = beta / 2 if self.direction == "max" else beta
            self.directions_["forward"] = self._fit_direction(
                P, Q, beta_f, int(seed_forward), "forward"
            )
        if self.direction in ("reverse", "max"):
            beta_r = beta / 2 if self.direction == "max" else beta
            self.directions_["reverse"] = self._fit_direction(
                Q, P, beta_r, int(seed_reverse), "reverse"
            )
        for name, result in self.directions_.items():
            if result.divergence < result.lower_bound and self.will_be_certified():
                # Wherever the bound holds, the bound is never further from D_α than a raw
                # estimate below it (the Markov bound's better form can exceed the P-form
                # estimate); the raw value stays in the direction's diagnostics. A bound that
                # is not certified may overshoot, and is no reason to move the estimate.
                self.directions_[name] = dataclasses.replace(result, divergence=result.lower_bound)
        results = list(self.directions_.values())
        self.divergence_ = float(max(r.divergence for r in results))
        self.lower_bound_ = float(max(r.lower_bound for r in results))
        self.certified_ = bool(self.will_be_certified())
        self._finish_fit()
        return self

    def score(self, X, Y=None) -> float:
        """Held-out estimate of D_α on new samples with everything fitted kept fixed.

        Higher is better, so that ``GridSearchCV`` and ``cross_val_score`` pick the estimator whose
        fitted statistic separates the new samples best. With ``direction="max"`` the larger of the
        two directions' scores.

        On finite samples the score is biased upward where the fitted statistic's exponential
        moment under Q is heavy-tailed (the −log of a sample mean overestimates the −log of its
        expectation), so a search over settings that change the statistic's tails, such as the
        DV critic's ``critic_inputs``, favours the one whose tails grow fastest, whether or not its
        estimates are better (benchmarks/results/point_estimates/ideas/). To choose the DV
        estimator's settings by cross-validation, pass ``scoring=rdpest.neg_critic_loss``
        instead: it ranks the fitted critics by their held-out classification loss, which no
        tail dominates (benchmarks/results/point_estimates/selection/); or choose the settings
        from what is known of the mechanism.
        """
        check_is_fitted(self, "directions_")
        X, Y = self._two_samples(X, Y, "score")
        P, Q = self._validate_samples(X, Y, reset=False)
        scores = []
        if "forward" in self.directions_:
            scores.append(self._score_direction(P, Q, "forward"))
        if "reverse" in self.directions_:
            scores.append(self._score_direction(Q, P, "reverse"))
        return float(max(scores))

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        # Y is the second sample, not a target: fit(X) alone is meaningless.
        tags.target_tags.required = True
        # Unseeded, a fit draws its direction seeds afresh (subclasses whose fit draws nothing
        # say so); a store's record of analyses counts such repeats as new tests.
        tags.non_deterministic = getattr(self, "random_state", 0) is None
        if getattr(self, "pooled", False):
            # In the pooled form y is a 0/1 membership label: declared a classifier of it,
            # scikit-learn's cross-validation stratifies the folds (StratifiedKFold), so every
            # fold holds rows of both samples whatever their sizes.
            tags.estimator_type = "classifier"
        return tags


def _unpool(Z, membership, owner: str) -> tuple[np.ndarray, np.ndarray]:
    """The two samples (rows of P, rows of Q) of the pooled form, each in its original order."""
    if membership is None:
        raise ValueError(
            f"{owner} with pooled=True needs the membership label: fit(Z, membership) with "
            "membership[i] = 1 for a row of the sample from P and 0 for one from Q"
        )
    try:
        Z = check_array(
            Z,
            ensure_2d=False,
            allow_nd=True,
            dtype=np.float64,
            ensure_all_finite=True,
            input_name="Z",
        )
    except (ValueError, TypeError) as exc:  # named as the user passed it, not as X
        raise ValueError(f"Z (the pooled sample): {exc}") from None
    if Z.ndim > 2:  # else reported as X's shape after the split
        raise ValueError(f"Z must have shape (n,) or (n, d), got {Z.ndim}-D shape {Z.shape}")
    label = np.asarray(membership)
    if label.ndim != 1 or Z.ndim == 0 or len(label) != len(Z):
        raise ValueError(
            f"membership must be 1-D with one label per row of Z: got shape {label.shape} for "
            f"Z of shape {Z.shape} (its length must equal the number of rows)"
        )
    if label.dtype.kind not in "biuf" or not np.isin(label, (0, 1)).all():
        raise ValueError(
            "membership must hold only 0 and 1 (1: the row is from P, 0: from Q), got values "
            f"{np.unique(label)[:5]!r}"
        )
    in_p = label.astype(bool)
    if in_p.all() or not in_p.any():
        raise ValueError(
            "membership must mark rows of both samples (some 1 for P and some 0 for Q), got "
            f"only {int(in_p[0])}"
        )
    return Z[in_p], Z[~in_p]


def _in_transforming_pipeline(estimator) -> bool:
    """Whether ``estimator`` is being called as the final step of a scikit-learn Pipeline
    whose earlier steps transform X.

    A Pipeline passes the transformed X and the raw y to its final step, so the second sample
    of fit(X, Y) would not be transformed; this cannot be seen in the arguments, so the calling
    frames are searched for the Pipeline that owns ``estimator``.
    """
    frame = sys._getframe(1)
    for _ in range(16):
        if frame is None:
            return False
        owner = frame.f_locals.get("self")
        if isinstance(owner, Pipeline) and owner.steps and owner.steps[-1][1] is estimator:
            return any(step not in (None, "passthrough") for _, step in owner.steps[:-1])
        frame = frame.f_back
    return False


def _column_names(data) -> list[str] | None:
    """The column names of a DataFrame-like sample (all strings), else None."""
    columns = getattr(data, "columns", None)
    if columns is None:
        return None
    names = list(columns)
    return names if names and all(isinstance(n, str) for n in names) else None
