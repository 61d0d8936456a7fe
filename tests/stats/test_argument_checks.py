"""Arguments of rdpest.stats functions that were once accepted silently or failed deep inside
numpy: each case names the bug it catches."""

import numpy as np
import pytest

from rdpest.stats.bounds import betting_lower_bound, mean_lower_bounds
from rdpest.stats.certificates import select_window
from rdpest.stats.threshold_tests import select_threshold

RNG = np.random.default_rng(0)
X = RNG.uniform(size=200)
G_P, G_Q = RNG.normal(1, 1, 300), RNG.normal(0, 1, 300)


@pytest.mark.parametrize(
    ("call", "match"),
    [
        # select_threshold took any region (None, "foo") as the joint one.
        (lambda: select_threshold(G_P, G_Q, 2.0, 0.05, region="foo"), "region"),
        (lambda: select_threshold(G_P, G_Q, 2.0, 0.05, region=None), "region"),
        # mean_lower_bounds flattened 2-D levels, returning more bounds than levels' length.
        (lambda: mean_lower_bounds(X, [[0.1, 0.2]]), "levels"),
        # Seeds: 'a' and 1.5 raised numpy's TypeError, -1 a ValueError naming nothing.
        (lambda: betting_lower_bound(X, 0.05, random_state="a"), "random_state"),
        (lambda: betting_lower_bound(X, 0.05, random_state=1.5), "random_state"),
        (lambda: betting_lower_bound(X, 0.05, random_state=-1), "random_state"),
        (lambda: select_window(G_P, G_Q, 2.0, 0.05, random_state=1.5), "random_state"),
    ],
)
def test_bad_arguments_are_named(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_good_arguments_still_pass():
    assert mean_lower_bounds(X, [0.1, 0.2]).shape == (2,)
    assert select_threshold(G_P, G_Q, 2.0, 0.05, region="joint")[1] in ("upper", "lower")
    assert betting_lower_bound(X, 0.05, random_state=np.int64(3)) < X.mean()
    assert betting_lower_bound(X, 0.05, random_state=None) < X.mean()


def test_counts_beyond_64_bits_are_refused_by_name():
    """Catches the bug where clopper_pearson_lower_bound(2**69, 2**70, 0.05) raised scipy's bare
    "ufunc '_beta_ppf' not supported" TypeError."""
    from rdpest.stats.bounds import clopper_pearson_lower_bound

    with pytest.raises(ValueError, match="trials must be at most"):
        clopper_pearson_lower_bound(2**69, 2**70, 0.05)
    assert 0.49 < clopper_pearson_lower_bound(2**61, 2**62, 0.05) < 0.5
