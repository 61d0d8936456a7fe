"""What an estimator found in one direction: :class:`DirectionResult` and its typed diagnostics.

Every estimator reports, per direction, a :class:`DirectionResult` with the fields all of them
share (estimate, bound, level, unclamped bound, split sizes and the certifying rows) and, in
``diagnostics``, a small frozen dataclass specific to the estimator: :class:`DVDiagnostics`,
:class:`ThresholdDiagnostics`, :class:`MarkovDiagnostics` or :class:`HoeffdingDiagnostics`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

__all__ = [
    "DVDiagnostics",
    "DirectionResult",
    "HoeffdingDiagnostics",
    "MarkovDiagnostics",
    "ThresholdDiagnostics",
]


@dataclass(frozen=True)
class DVDiagnostics:
    """Diagnostics of :class:`rdpest.DVRenyiEstimator` in one direction.

    Attributes
    ----------
    certificate : str
        How the critic was certified: "bracket" or "threshold".
    window : tuple of float or None
        The bracket's clipping window (None for a threshold certificate).
    threshold : tuple of (float, str) or None
        The threshold test's value and side (None for a bracket certificate).
    critic_range : tuple of float
        The point estimate's clipping window, chosen on the critic's training split by
        ``point_window``: the critic's range there under "range", possibly a lower top under
        "balanced" and "guarded" (``critic_ranges_`` of the estimator holds the same).
    best_epoch : int
        The epoch kept by early stopping.
    fold_lower_bounds : list of float
        The unclamped bound of each fold (two with ``cross_fit``).
    repeat_points : list of float
        The point estimate of each partition (``n_repeats`` of them).
    fold_points : list of float
        The first partition's point estimate of each fold: the certified critic's estimate (its
        bracket, or the ``point_form`` chosen) on the certifying part first; with ``cross_fit``
        or ``point_estimate="cross_fit"`` also the reverse fold's on the training part.
        ``repeat_points[0]`` is their mean.
    """

    certificate: str
    window: tuple[float, float] | None
    threshold: tuple[float, str] | None
    critic_range: tuple[float, float]
    best_epoch: int
    fold_lower_bounds: list[float]
    repeat_points: list[float]
    fold_points: list[float] = field(default_factory=list)


@dataclass(frozen=True)
class ThresholdDiagnostics:
    """Diagnostics of :class:`rdpest.BernoulliTPRFPRBaseline` in one direction.

    Attributes
    ----------
    threshold : float
        The fitted threshold; ``side`` ("upper": s > t says P; "lower": s <= t) its side.
    side : str
    successes : tuple of int
        The test's positives on the certifying P and Q samples.
    tpr, fpr : float
        The plug-in rates on the certifying samples.
    tpr_lower, fpr_upper : float
        Their Clopper–Pearson limits at ``levels``.
    levels : tuple of float
        The Clopper–Pearson levels of the two rates.
    epsilon, mu : float
        The ε (at the estimator's δ) and μ-GDP implied by the limits (Gaussian assumption).
    """

    threshold: float
    side: str
    successes: tuple[int, int]
    tpr: float
    fpr: float
    tpr_lower: float
    fpr_upper: float
    levels: tuple[float, float]
    epsilon: float
    mu: float


@dataclass(frozen=True)
class MarkovDiagnostics:
    """Diagnostics of :class:`rdpest.MarkovRenyiBound` in one direction.

    Attributes
    ----------
    log_ratio : str
        Where the privacy loss came from: "exact", "estimator" or "gaussian".
    form : str
        The form whose bound is reported: "p" (W on P) or "q" (Z on Q).
    form_beta : float
        The level spent on each form used.
    estimates : dict of str to float
        The plug-in estimate of each form used.
    raw_lower_bounds : dict of str to float
        The unclamped bound of each form used.
    """

    log_ratio: str
    form: str
    form_beta: float
    estimates: dict[str, float]
    raw_lower_bounds: dict[str, float]


@dataclass(frozen=True)
class HoeffdingDiagnostics:
    """Diagnostics of :class:`rdpest.HoeffdingRenyiBound` in one direction.

    Attributes
    ----------
    log_ratio : str
        Where the privacy loss came from: "exact", "estimator" or "gaussian".
    scaled_mean : float
        The sample mean of Z/M = e^{α(L − B)}.
    radius_lower, radius_upper : float
        The Hoeffding radii of the one-sided lower bound and of the two-sided interval.
    interval : tuple of float
        The two-sided interval on D_α that holds jointly at 1 − β.
    n_clipped : int
        Estimated loss values clipped at B.
    """

    log_ratio: str
    scaled_mean: float
    radius_lower: float
    radius_upper: float
    interval: tuple[float, float]
    n_clipped: int


@dataclass
class DirectionResult:
    """What an estimator found in one direction (P‖Q for ``"forward"``, Q‖P for ``"reverse"``).

    Attributes
    ----------
    divergence : float
        Point estimate of D_α in the standard RDP scale.
    lower_bound : float
        One-sided lower confidence bound at the direction's level ``beta``, clamped at 0 (since
        D_α >= 0).
    beta : float
        The error level spent on this direction.
    upper_bound : float
        Upper confidence bound where the estimator has one, else ``nan``.
    raw_lower_bound : float
        The lower bound before clamping at 0 (``nan`` if not set); comparing it with a known
        truth measures coverage.
    n_train, n_test : tuple of int
        Rows of the (P, Q) samples used to fit and to certify.
    test_index_p, test_index_q : numpy.ndarray or None
        Which rows of the P and Q samples certified, in the order they were visited, where the
        estimator split its samples (None where all rows certify).
    diagnostics : dataclass or None
        What is specific to the estimator: a :class:`DVDiagnostics`,
        :class:`ThresholdDiagnostics`, :class:`MarkovDiagnostics` or
        :class:`HoeffdingDiagnostics`.
    """

    divergence: float
    lower_bound: float
    beta: float
    upper_bound: float = math.nan
    raw_lower_bound: float = math.nan
    n_train: tuple[int, int] = (0, 0)
    n_test: tuple[int, int] = (0, 0)
    test_index_p: np.ndarray | None = None
    test_index_q: np.ndarray | None = None
    diagnostics: (
        DVDiagnostics | ThresholdDiagnostics | MarkovDiagnostics | HoeffdingDiagnostics | None
    ) = None
