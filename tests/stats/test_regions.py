"""rdpest.stats.regions.log_mean_exp: the log of a sample mean of exponentials."""

import math

import numpy as np
import pytest

from rdpest.stats.regions import log_mean_exp


def test_log_mean_exp_matches_the_direct_formula_and_does_not_overflow():
    values = np.random.default_rng(0).normal(0.0, 2.0, 1000)
    assert log_mean_exp(values) == pytest.approx(math.log(np.mean(np.exp(values))), rel=1e-12)
    # e^1000 is not a double; shifting by 1000 must shift the result by exactly that.
    assert log_mean_exp(values + 1000.0) == pytest.approx(log_mean_exp(values) + 1000.0, rel=1e-14)
    assert log_mean_exp([0.0, math.log(3.0)]) == pytest.approx(math.log(2.0), rel=1e-14)


def test_log_mean_exp_of_no_values_is_a_clear_error():
    """Catches the bug where an empty array raised a bare "math domain error" from log(0)."""
    with pytest.raises(ValueError, match="at least one value"):
        log_mean_exp(np.array([]))


def test_log_mean_exp_refuses_nan_and_keeps_infinities():
    """Stats review: a NaN came back as NaN, which ``max(0.0, ...)`` downstream reads as 0.
    Infinities are values (e^{αL} beyond the double range, or a zero ratio) and stay."""
    with pytest.raises(ValueError, match=r"got 1 NaN value"):
        log_mean_exp(np.array([0.0, np.nan]))
    assert log_mean_exp(np.array([0.0, np.inf])) == np.inf
    assert log_mean_exp(np.array([0.0, -np.inf])) == pytest.approx(math.log(0.5), rel=1e-14)
