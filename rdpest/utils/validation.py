"""Argument checks shared by the pure-maths modules and the estimators.

Every public function of rdpest validates its scalar arguments with these helpers so that bad input
fails early with a ``ValueError`` that names the argument, instead of a NaN or a crash deep in numpy
or torch. This module imports nothing of rdpest (it is a leaf, like ``bounds`` and ``divergences``).
"""

from __future__ import annotations

import math
import numbers

import numpy as np

__all__ = [
    "check_alpha",
    "check_beta",
    "check_finite_array",
    "check_positive",
    "check_probability",
    "check_real",
]


def check_real(value, name: str) -> float:
    """Return ``value`` as a finite float, or raise ValueError naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real | np.generic):
        raise ValueError(f"{name} must be a real number, got {value!r}")
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"{name} must be finite, got {value!r}")
    return value


def check_alpha(alpha, name: str = "alpha") -> float:
    """Rényi order: a finite real number strictly greater than 1."""
    alpha = check_real(alpha, name)
    if alpha <= 1.0:
        raise ValueError(f"{name} must be > 1 (a Rényi order), got {alpha!r}")
    return alpha


def check_beta(beta, name: str = "beta") -> float:
    """Error probability of a confidence bound: strictly inside (0, 1)."""
    beta = check_real(beta, name)
    if not 0.0 < beta < 1.0:
        raise ValueError(f"{name} must lie strictly between 0 and 1, got {beta!r}")
    return beta


def check_probability(p, name: str) -> float:
    """A probability in the closed interval [0, 1]."""
    p = check_real(p, name)
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"{name} must lie in [0, 1], got {p!r}")
    return p


def check_positive(value, name: str, *, allow_zero: bool = False) -> float:
    """A finite real number > 0 (or >= 0 with ``allow_zero``)."""
    value = check_real(value, name)
    if value < 0.0 or (value == 0.0 and not allow_zero):
        bound = ">= 0" if allow_zero else "> 0"
        raise ValueError(f"{name} must be {bound}, got {value!r}")
    return value


def check_finite_array(x, name: str, *, ndim: int | None = 1, min_size: int = 1) -> np.ndarray:
    """Return ``x`` as float64, rejecting ragged, empty, non-finite or wrongly shaped input."""
    try:
        arr = np.asarray(x, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(
            f"{name} must be a numeric array (ragged or non-numeric input?): {exc}"
        ) from None
    if ndim is not None and arr.ndim != ndim:
        raise ValueError(f"{name} must be {ndim}-dimensional, got shape {arr.shape}")
    if arr.shape[0] < min_size if arr.ndim else True:
        raise ValueError(f"{name} needs at least {min_size} values, got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} contains NaN or infinite values")
    return arr
