"""Random splits of a sample and the smallest sample that a split leaves room in.

Every estimator that holds data out draws its split here, so that all of them consume the
random generator in the same way: one permutation of the row indices per split, whose first
``n_second`` entries are the held-out (second) part. Part sizes are ``round(n * fraction)``
(Python's round, half to even).

The minimum sample sizes are computed in closed form: each condition "part >= m rows" is
monotone in n, the closed form gives the boundary up to the rounding of ``n * fraction``, and a
step or two of the exact condition settles that rounding.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["in_random_order", "min_dv_sample_size", "min_two_way_sample_size", "split_indices"]

# The minimum sample sizes were once found by trying every n below this bound; a fraction that
# needs more keeps being refused with the same error.
_SEARCH_LIMIT = 100_000


def split_indices(
    n: int, n_second: int, rng: np.random.Generator, *, sort_first: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """A random split of ``range(n)``: (first part, second part of ``n_second`` indices).

    The second part is the first ``n_second`` entries of ``rng.permutation(n)``, in that random
    order (the betting bounds visit the certifying part in sequence, so its order must not depend
    on the values); the first part is the rest, in permuted order, or in increasing order with
    ``sort_first``.
    """
    perm = rng.permutation(n)
    first, second = perm[n_second:], perm[:n_second]
    return (np.sort(first) if sort_first else first), second


def in_random_order(seed: int, *parts: np.ndarray) -> list[np.ndarray]:
    """Each part's rows in a random order drawn from ``seed`` (a generator of its own, so that
    the caller's generator draws as before): for certifying on rows kept in the caller's order,
    which the betting bounds would visit in sequence (sorted rows made them invalid)."""
    rng = np.random.default_rng([int(seed), 1])
    return [part[rng.permutation(len(part))] for part in parts]


def _smallest(condition, estimate: int, start: int) -> int:
    """The smallest n >= start satisfying a condition monotone in n, searched from ``estimate``."""
    n = max(start, estimate)
    while n > start and condition(n - 1):
        n -= 1
    while not condition(n):
        n += 1
    return n


def _at_least(fraction: float, rows: int) -> int:
    """About the smallest n with round(n * fraction) >= rows (exact up to rounding)."""
    return math.floor((rows - 0.5) / fraction) + 1


def min_two_way_sample_size(test_fraction: float, train_rows: int = 1) -> int:
    """Smallest n >= 2 whose split into round(n * test_fraction) held-out rows and the rest
    leaves at least one held-out row and ``train_rows`` rows to fit.

    Examples
    --------
    >>> min_two_way_sample_size(0.5), min_two_way_sample_size(0.1)
    (2, 6)
    >>> min_two_way_sample_size(0.5, train_rows=2)  # a fitted variance needs two rows
    4
    """

    def fits(n: int) -> bool:
        n_test = round(n * test_fraction)
        return n_test >= 1 and n - n_test >= train_rows

    estimate = max(_at_least(test_fraction, 1), _at_least(1.0 - test_fraction, train_rows))
    n = _smallest(fits, estimate, 2)
    if n >= _SEARCH_LIMIT:
        raise ValueError(f"test_fraction={test_fraction} leaves no room for both splits")
    return n


def min_dv_sample_size(test_fraction: float, validation_fraction: float) -> int:
    """Smallest n >= 5 split into >= 2 rows to fit, >= 1 to validate and >= 2 to certify.

    The certifying part has round(n * test_fraction) rows; the validation part
    max(1, round(n_train * validation_fraction)) of the remaining n_train rows.

    Examples
    --------
    >>> min_dv_sample_size(0.5, 0.2), min_dv_sample_size(0.1, 0.2)
    (5, 15)
    """

    def fits(n: int) -> bool:
        n_test = round(n * test_fraction)
        n_train = n - n_test
        n_val = max(1, round(n_train * validation_fraction))
        return n_train - n_val >= 2 and n_test >= 2

    # n_test >= 2 needs n·f_test >= 1.5; n_fit >= 2 needs n_train >= 3 and
    # n_train·(1 − f_val) >= 1.5, with n_train about n·(1 − f_test).
    n_train = max(3, _at_least(1.0 - validation_fraction, 2))
    estimate = max(_at_least(test_fraction, 2), math.ceil(n_train / (1.0 - test_fraction)))
    n = _smallest(fits, estimate, 5)
    if n >= _SEARCH_LIMIT:
        raise ValueError(
            f"test_fraction={test_fraction} and validation_fraction={validation_fraction} "
            "leave no room for all three splits"
        )
    return n
