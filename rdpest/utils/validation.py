"""The one home of rdpest's argument checks.

Public functions and classes validate their arguments here, at the boundary, so that bad input
fails early with a ``ValueError`` that names the argument instead of a NaN or a crash deep in
numpy or torch; the private implementations they call trust what they are given. Estimator
parameters are declared with scikit-learn's ``_parameter_constraints`` and checked in ``fit``;
these helpers cover plain functions and the auditing classes. This module imports nothing of
rdpest and no torch.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence

import numpy as np

__all__ = [
    "check_alpha",
    "check_beta",
    "check_counts",
    "check_finite_array",
    "check_int",
    "check_positive",
    "check_probability",
    "check_random_generator",
    "check_real",
    "check_sample_rate",
    "check_seed",
    "check_seeds",
    "check_steps",
    "seed_from_random_state",
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
    """Return ``x`` as float64, rejecting ragged, empty, complex, non-finite or wrongly shaped
    input."""
    try:
        arr = np.asarray(x)
        complex_input = np.iscomplexobj(arr)
        if not complex_input:
            arr = arr.astype(np.float64, copy=False)
    except (TypeError, ValueError) as exc:
        raise ValueError(
            f"{name} must be a numeric array (ragged or non-numeric input?): {exc}"
        ) from None
    if complex_input:
        # A cast to float64 would silently keep the real part only.
        raise ValueError(f"{name} must be real: got complex values")
    if ndim is not None and arr.ndim != ndim:
        raise ValueError(f"{name} must be {ndim}-dimensional, got shape {arr.shape}")
    if arr.shape[0] < min_size if arr.ndim else True:
        raise ValueError(f"{name} needs at least {min_size} values, got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} contains NaN or infinite values")
    return arr


def check_counts(successes, trials) -> tuple[int, int]:
    """Binomial counts: integers (not bools), ``trials >= 1`` and ``0 <= successes <= trials``."""
    for value, name in ((successes, "successes"), (trials, "trials")):
        if isinstance(value, bool) or not isinstance(value, int | np.integer):
            raise ValueError(f"{name} must be an integer, got {value!r}")
    k, n = int(successes), int(trials)
    if n < 1:
        raise ValueError(f"trials must be >= 1, got {n}")
    if not 0 <= k <= n:
        raise ValueError(f"successes must lie in [0, trials] = [0, {n}], got {k}")
    return k, n


def check_int(value, name: str, minimum: int) -> int:
    """An integer (not a bool) >= ``minimum``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return int(value)


def check_steps(steps, name: str = "steps") -> int:
    """A number of DP-SGD steps: an integer >= 1 (integral floats such as 5.0 are accepted)."""
    if isinstance(steps, bool) or not isinstance(steps, numbers.Real | np.generic):
        raise ValueError(f"{name} must be an integer >= 1, got {steps!r}")
    value = check_real(steps, name)
    if not value.is_integer() or value < 1:
        raise ValueError(f"{name} must be an integer >= 1, got {steps!r}")
    return int(value)


def check_sample_rate(sample_rate, name: str = "sample_rate") -> float:
    """Poisson sampling rate of DP-SGD: in (0, 1] (1 is full batch)."""
    q = check_real(sample_rate, name)
    if not 0.0 < q <= 1.0:
        raise ValueError(f"{name} must lie in (0, 1], got {sample_rate!r}")
    return q


def check_seed(seed, name: str = "seed") -> int:
    """A non-negative integer seed."""
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or seed < 0:
        raise ValueError(f"{name} must be a non-negative integer, got {seed!r}")
    return int(seed)


def check_seeds(seeds, name: str = "seeds") -> list[int]:
    """A non-empty 1-D sequence of seeds, as a list of ints."""
    if (
        isinstance(seeds, str | bytes)
        or not isinstance(seeds, Sequence | np.ndarray)
        or np.ndim(seeds) != 1
    ):
        raise ValueError(f"{name} must be a 1-D sequence of integers, got {seeds!r}")
    seeds = [check_seed(s.item() if isinstance(s, np.generic) else s) for s in seeds]
    if not seeds:
        raise ValueError(f"{name} is empty: give at least one seed")
    return seeds


def check_random_generator(random_state) -> np.random.Generator:
    """A numpy ``Generator`` from ``None``, a non-negative int, a ``Generator`` (used as is) or a
    ``RandomState`` (one seed drawn from it)."""
    if random_state is None or isinstance(random_state, np.random.Generator):
        return np.random.default_rng(random_state)
    if isinstance(random_state, numbers.Integral) and not isinstance(random_state, bool):
        if random_state < 0:
            raise ValueError(f"random_state must be a non-negative int, got {random_state!r}")
        return np.random.default_rng(int(random_state))
    if isinstance(random_state, np.random.RandomState):
        return np.random.default_rng(int(random_state.randint(0, 2**31 - 1)))
    raise ValueError(
        f"random_state must be None, an int or a numpy Generator/RandomState, got {random_state!r}"
    )


def seed_from_random_state(random_state) -> int | None:
    """An integer seed from ``None``, an int or a ``RandomState``/``Generator`` (drawn once)."""
    if random_state is None or isinstance(random_state, numbers.Integral):
        return None if random_state is None else int(random_state)
    if isinstance(random_state, np.random.RandomState):
        return int(random_state.randint(0, 2**31 - 1))
    if isinstance(random_state, np.random.Generator):
        return int(random_state.integers(0, 2**31 - 1))
    raise ValueError(
        f"random_state must be None, an int or a numpy generator, got {random_state!r}"
    )
