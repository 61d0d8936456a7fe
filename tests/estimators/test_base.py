"""The estimator contract's input handling shared by all four estimators."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from rdpest import BernoulliTPRFPRBaseline, DVRenyiEstimator, HoeffdingRenyiBound, MarkovRenyiBound

ESTIMATORS = [
    DVRenyiEstimator(hidden_layer_sizes=(8,), max_epochs=5, random_state=0),
    MarkovRenyiBound(random_state=0),
    HoeffdingRenyiBound(privacy_loss_bound=50.0, random_state=0),
    BernoulliTPRFPRBaseline(score_function=lambda A: A.sum(axis=1), random_state=0),
]


def _frames(seed=0):
    rng = np.random.default_rng(seed)
    X = pd.DataFrame({"a": rng.normal(1.0, 1.0, 300), "b": rng.normal(0.0, 0.1, 300)})
    Y = pd.DataFrame({"a": rng.normal(0.0, 1.0, 300), "b": rng.normal(0.0, 0.1, 300)})
    return X, Y


@pytest.mark.parametrize("est", ESTIMATORS, ids=lambda e: type(e).__name__)
def test_dataframes_are_paired_by_column_name(est):
    """Bug: DataFrames with the same column names in another order were paired by position,
    so feature a of X was compared with feature b of Y (a false divergence)."""
    X, Y = _frames()
    fitted = est.fit(X, Y)
    assert list(fitted.feature_names_in_) == ["a", "b"]
    with pytest.raises(ValueError, match="different order"):
        est.fit(X, Y[["b", "a"]])
    with pytest.raises(ValueError, match="different column names"):
        est.fit(X, Y.rename(columns={"b": "c"}))
    est.fit(X, Y)
    with pytest.raises(ValueError, match="not the ones"):
        est.score(X[["b", "a"]], Y[["b", "a"]])
    # Arrays after DataFrames forget the names.
    est.fit(X.to_numpy(), Y.to_numpy())
    assert not hasattr(est, "feature_names_in_")
