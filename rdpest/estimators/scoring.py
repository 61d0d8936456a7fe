"""A model-selection criterion for the DV estimator's settings: the critic's held-out loss.

``DVRenyiEstimator.score`` is the fitted critic's clipped bracket on held-out rows, an estimate of
D_α. As a criterion for choosing settings it is biased upward wherever the critic's exponential
moment under Q is heavy-tailed (the −log of a sample mean overestimates the −log of its
expectation), so ``GridSearchCV`` ranking by it favours the settings whose critic grows fastest
in the tails, whether or not they estimate better. :func:`neg_critic_loss` ranks the same fitted
critics by their held-out logistic loss instead, a proper scoring rule: in expectation it is
smallest for the critic equal to the true log ratio log p/q (up to a constant, which it fits),
and it is an average of bounded-slope terms, not an exponential moment, so no tail dominates it.
Pass it as ``scoring=`` (benchmarks/results/point_estimates/selection/ measures both criteria).
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import minimize_scalar
from sklearn.pipeline import Pipeline
from sklearn.utils.validation import check_is_fitted

from rdpest.estimators.critics import _evaluate_parts
from rdpest.estimators.dv import DVRenyiEstimator

__all__ = ["neg_critic_loss"]


def neg_critic_loss(estimator, X, Y=None) -> float:
    """Minus the fitted critic's logistic loss on held-out samples: a scorer for model selection.

    Use it as ``GridSearchCV(DVRenyiEstimator(...), grid, scoring=neg_critic_loss)`` or
    ``cross_val_score(..., scoring=neg_critic_loss)``; higher is better. The loss of a critic g on
    samples X from P and Y from Q is the one the classifier critic is trained on, each sample
    averaged apart,

        ½·mean_X log(1 + e^{−(g+b)}) + ½·mean_Y log(1 + e^{g+b}),

    with the constant b chosen to minimise it on these rows: the bracket and the bound do not
    change when a constant is added to the critic, and a critic trained with ``objective="dv"``
    is defined only up to one, so the criterion does not depend on it either. In expectation the
    loss is smallest for g = log p/q (a proper scoring rule), whatever the sizes of X and Y.
    With ``direction="max"`` it is the mean over the two directions' critics. It ranks critics;
    it is not an estimate of D_α (that is ``score``), and settings that do not change the critic
    (``beta``, ``point_window``, the certificate's options) tie under it.

    Parameters
    ----------
    estimator : fitted DVRenyiEstimator, or a fitted Pipeline ending in one
    X, Y : array-like
        The held-out samples as ``fit`` takes them (with ``pooled=True``: the stacked rows and
        their membership labels).

    Returns
    -------
    float

    Examples
    --------
    >>> from rdpest import DVRenyiEstimator
    >>> from rdpest.datasets import make_renyi_pair
    >>> X, Y, _ = make_renyi_pair("gaussian_shift", 2.0, 1.0, 400, random_state=0)
    >>> est = DVRenyiEstimator(alpha=2.0, max_epochs=20, random_state=0).fit(X[:300], Y[:300])
    >>> bool(neg_critic_loss(est, X[300:], Y[300:]) > -np.log(2))  # better than a constant critic
    True
    """
    if isinstance(estimator, Pipeline):
        X = estimator[:-1].transform(X) if len(estimator) > 1 else X
        estimator = estimator[-1]
    if not isinstance(estimator, DVRenyiEstimator):
        raise ValueError(
            "neg_critic_loss scores the learned critic of a DVRenyiEstimator (or a Pipeline "
            f"ending in one), got {type(estimator).__name__}: the other estimators have no "
            "critic to score; compare them with their score method"
        )
    check_is_fitted(estimator, "critics_")
    X, Y = estimator._two_samples(X, Y, "neg_critic_loss")
    P, Q = estimator._validate_samples(X, Y, reset=False)
    losses = []
    for direction, critic in estimator.critics_.items():
        A, B = (P, Q) if direction == "forward" else (Q, P)
        losses.append(profiled_logistic_loss(*_evaluate_parts(critic, A, B)))
    return -float(np.mean(losses))


def profiled_logistic_loss(g_p: np.ndarray, g_q: np.ndarray) -> float:
    """The balanced logistic loss of critic values, minimised over an added constant.

    min over b of ½·mean log(1 + e^{−(g_p+b)}) + ½·mean log(1 + e^{g_q+b}), a convex function of
    b; :func:`neg_critic_loss` is minus this for a fitted critic's values. Given the values of a
    known log ratio on the same samples, it is the reference a critic's held-out loss is compared
    with: in population no critic's loss is below the exact log ratio's.

    Parameters
    ----------
    g_p, g_q : array-like of shape (n_p,) and (n_q,)
        The critic's values on samples from P and from Q; finite, at least one each.

    Returns
    -------
    float

    Examples
    --------
    >>> round(profiled_logistic_loss([0.0, 0.0], [0.0]), 4)  # a constant critic: log 2
    0.6931
    """
    g_p, g_q = np.asarray(g_p, dtype=float).ravel(), np.asarray(g_q, dtype=float).ravel()
    if g_p.size == 0 or g_q.size == 0 or not (np.isfinite(g_p).all() and np.isfinite(g_q).all()):
        raise ValueError(
            "profiled_logistic_loss needs at least one finite critic value on each sample, got "
            f"{g_p.size} and {g_q.size} values (non-finite values are not allowed)"
        )

    def loss(b: float) -> float:
        return 0.5 * float(np.logaddexp(0.0, -(g_p + b)).mean() + np.logaddexp(0.0, g_q + b).mean())

    # The minimiser lies where the two samples' mean slopes balance, so within the critic's range
    # widened by a margin past which one side's loss is flat to float precision.
    span = float(max(np.abs(g_p).max(), np.abs(g_q).max())) + 40.0
    result = minimize_scalar(loss, bounds=(-span, span), method="bounded", options={"xatol": 1e-7})
    return float(min(result.fun, loss(0.0)))
