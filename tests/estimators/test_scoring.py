"""Tests of neg_critic_loss: what it computes, that it ranks critics rightly where the held-out
bracket does not, its use with scikit-learn's model selection, and bad input."""

import numpy as np
import pytest
from sklearn.exceptions import NotFittedError
from sklearn.model_selection import GridSearchCV, cross_val_score
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from rdpest import DVRenyiEstimator, MarkovRenyiBound, neg_critic_loss
from rdpest.datasets import family_parameters, log_likelihood_ratio, make_renyi_pair
from rdpest.estimators.critics import _evaluate_parts
from rdpest.estimators.scoring import profiled_logistic_loss
from rdpest.estimators.windows import _clipped_bracket

FAST = {"max_epochs": 30, "hidden_layer_sizes": (16,), "random_state": 0}


def _raw_loss(g_p, g_q, b=0.0):
    return 0.5 * (np.logaddexp(0, -(g_p + b)).mean() + np.logaddexp(0, g_q + b).mean())


def test_profiled_loss_is_the_minimum_over_constants_and_ignores_them():
    rng = np.random.default_rng(0)
    g_p, g_q = rng.normal(0.8, 1.2, 700), rng.normal(-0.3, 0.9, 400)
    value = profiled_logistic_loss(g_p, g_q)
    grid = np.linspace(-5, 5, 20001)
    brute = min(_raw_loss(g_p, g_q, b) for b in grid)
    # The grid's step 5e-4 leaves at most ~(5e-4)²·curvature ≈ 1e-7 above the true minimum.
    assert brute - 1e-6 <= value <= brute + 1e-12
    assert value <= _raw_loss(g_p, g_q)
    for shift in (-7.5, 3.0, 25.0):
        assert profiled_logistic_loss(g_p + shift, g_q + shift) == pytest.approx(value, abs=1e-9)


@pytest.mark.parametrize("family", ["gaussian_shift", "laplace_scale", "student_t_shift"])
def test_the_exact_log_ratio_has_the_smallest_loss(family):
    """A proper scoring rule: distorting the true log ratio (scaled by ½ or 2, or clipped to
    [−1, 1]) raises the loss. Each gap must exceed 4 standard errors of the paired difference
    of the (unprofiled) per-point losses on the same 5000 + 5000 points."""
    X, Y, _ = make_renyi_pair(family, 2.0, 1.0, 5000, random_state=0)
    L = log_likelihood_ratio(family, family_parameters(family, 2.0, 1.0))
    lp, lq = L(X), L(Y)
    exact = profiled_logistic_loss(lp, lq)
    for distort in (lambda g: 0.5 * g, lambda g: 2.0 * g, lambda g: np.clip(g, -1.0, 1.0)):
        dp, dq = distort(lp), distort(lq)
        diff_p = np.logaddexp(0, -dp) - np.logaddexp(0, -lp)
        diff_q = np.logaddexp(0, dq) - np.logaddexp(0, lq)
        se = 0.5 * np.sqrt(diff_p.var() / len(lp) + diff_q.var() / len(lq))
        assert profiled_logistic_loss(dp, dq) - exact > 4 * se


@pytest.mark.parametrize("family, alpha", [("laplace_scale", 1.25), ("gaussian_mixture", 2.0)])
def test_loss_prefers_the_true_ratio_where_the_held_out_bracket_prefers_heavy_tails(family, alpha):
    """Positive control for the reason the scorer exists. A critic that adds 0.3·max(L, 0)² to
    the exact log ratio L has a population bracket below D_α (every fixed critic's is), yet on
    held-out folds of 667 points per side (cv=3 of 2000) its clipped bracket, what ``score``
    computes, averages above both the truth and L's own bracket: the Q moment misses the tail.
    The loss ranks them rightly. Over 100 replicate folds (fixed seeds), each mean comparison
    must exceed 4 standard errors of the paired differences."""
    L = log_likelihood_ratio(family, family_parameters(family, alpha, 1.0))

    def tail(g):
        return g + 0.3 * np.maximum(g, 0.0) ** 2

    X, Y, truth = make_renyi_pair(family, alpha, 1.0, 1333, random_state=99)
    windows = {  # as score: each critic clipped to its range on rows it did not score
        name: (min(f(L(X)).min(), f(L(Y)).min()), max(f(L(X)).max(), f(L(Y)).max()))
        for name, f in (("exact", lambda g: g), ("tail", tail))
    }
    brackets, losses = [], []
    for rep in range(100):
        X, Y, _ = make_renyi_pair(family, alpha, 1.0, 667, random_state=1000 + rep)
        lp, lq = L(X), L(Y)
        brackets.append(
            [
                _clipped_bracket(lp, lq, windows["exact"], alpha),
                _clipped_bracket(tail(lp), tail(lq), windows["tail"], alpha),
            ]
        )
        losses.append([profiled_logistic_loss(lp, lq), profiled_logistic_loss(tail(lp), tail(lq))])
    brackets, losses = np.array(brackets), np.array(losses)

    def gap(a, b):  # mean of a − b and its standard error over the replicates
        d = a - b
        return d.mean(), d.std(ddof=1) / np.sqrt(len(d))

    mean, se = gap(brackets[:, 1], brackets[:, 0])
    assert mean > 4 * se  # the bracket prefers the wrong critic ...
    mean, se = gap(brackets[:, 1], np.full(len(brackets), truth))
    assert mean > 4 * se  # ... whose held-out bracket overshoots the truth
    mean, se = gap(losses[:, 1], losses[:, 0])
    assert mean > 4 * se  # the loss prefers the exact log ratio


def test_scorer_is_minus_the_profiled_loss_of_the_fitted_critics():
    X, Y, _ = make_renyi_pair("gaussian_shift", 2.0, 1.0, 600, random_state=1)
    est = DVRenyiEstimator(**FAST).fit(X[:400], Y[:400])
    held_out = X[400:].reshape(-1, 1), Y[400:].reshape(-1, 1)
    g_p, g_q = _evaluate_parts(est.critics_["forward"], *held_out)
    assert neg_critic_loss(est, X[400:], Y[400:]) == -profiled_logistic_loss(g_p, g_q)
    both = DVRenyiEstimator(direction="max", **FAST).fit(X[:400], Y[:400])
    forward = profiled_logistic_loss(*_evaluate_parts(both.critics_["forward"], *held_out))
    reverse = profiled_logistic_loss(
        *_evaluate_parts(both.critics_["reverse"], *reversed(held_out))
    )
    assert neg_critic_loss(both, X[400:], Y[400:]) == pytest.approx(-(forward + reverse) / 2)
    # Both objectives are scored: a DV-objective critic is defined up to a constant only.
    dv = DVRenyiEstimator(objective="dv", **FAST).fit(X[:400], Y[:400])
    assert -np.log(2) < neg_critic_loss(dv, X[400:], Y[400:]) < 0


def test_grid_search_cross_validation_and_pipelines_take_it_as_scoring():
    X, Y, _ = make_renyi_pair("gaussian_shift", 2.0, 1.0, 600, random_state=4)
    grid = GridSearchCV(
        DVRenyiEstimator(alpha=2.0, max_epochs=20, random_state=0),
        {"hidden_layer_sizes": [(8,), (32, 32)], "learning_rate": [1e-4, 1e-3]},
        scoring=neg_critic_loss,
        cv=3,
    ).fit(X, Y)
    scores = grid.cv_results_["mean_test_score"]
    assert np.all(np.isfinite(scores)) and np.all(scores < 0)
    assert grid.best_score_ == scores.max()
    assert cross_val_score(DVRenyiEstimator(**FAST), X, Y, cv=3, scoring=neg_critic_loss).shape == (
        3,
    )
    Z = np.concatenate([X, Y]).reshape(-1, 1)
    member = np.r_[np.ones(len(X)), np.zeros(len(Y))]
    pipe = make_pipeline(StandardScaler(), DVRenyiEstimator(pooled=True, **FAST))
    pooled = cross_val_score(pipe, Z, member, cv=3, scoring=neg_critic_loss)
    assert np.all(np.isfinite(pooled))


def test_bad_input_is_named():
    X, Y, _ = make_renyi_pair("gaussian_shift", 2.0, 1.0, 200, random_state=0)
    with pytest.raises(ValueError, match=r"DVRenyiEstimator.*MarkovRenyiBound"):
        neg_critic_loss(MarkovRenyiBound(alpha=2.0).fit(X, Y), X, Y)
    with pytest.raises(NotFittedError):
        neg_critic_loss(DVRenyiEstimator(), X, Y)
    est = DVRenyiEstimator(**FAST).fit(X, Y)
    with pytest.raises(ValueError, match="feature"):
        neg_critic_loss(est, np.zeros((10, 2)), np.zeros((10, 2)))
    with pytest.raises(ValueError, match=r"NaN|finite|infinity"):
        neg_critic_loss(est, np.r_[X[:9], np.nan], Y[:10])
    for g_p, g_q in (([], [0.0]), ([0.0], []), ([np.inf], [0.0]), ([0.0], [np.nan])):
        with pytest.raises(ValueError, match="profiled_logistic_loss needs"):
            profiled_logistic_loss(g_p, g_q)
