"""The one home of rdpest's argument checks.

Public functions and classes validate their arguments here, at the boundary, so that bad input
fails early with a ``ValueError`` that names the argument instead of a NaN or a crash deep in
numpy or torch; the private implementations they call trust what they are given. Estimator
parameters are declared with scikit-learn's ``_parameter_constraints`` and checked in ``fit``;
these helpers cover plain functions and the auditing classes. This module imports nothing of
rdpest and no torch.
"""

from __future__ import annotations

import functools
import inspect
import math
import numbers
from collections.abc import Sequence

import numpy as np

__all__ = [
    "MAX_ALPHA",
    "MIN_ALPHA_GAP",
    "MIN_BETA",
    "check_alpha",
    "check_beta",
    "check_counts",
    "check_estimation_alpha",
    "check_finite_array",
    "check_int",
    "check_open_unit",
    "check_option",
    "check_positive",
    "check_probability",
    "check_random_generator",
    "check_real",
    "check_sample_rate",
    "check_seed",
    "check_seeds",
    "check_steps",
    "finite_result",
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


#: The largest Rényi order accepted: far above any order an RDP analysis uses (Opacus's default
#: orders stop at 256), and below the orders at which the moments overflow double precision.
MAX_ALPHA = 1e6


def check_alpha(alpha, name: str = "alpha") -> float:
    """Rényi order: a real number in (1, MAX_ALPHA]."""
    alpha = check_real(alpha, name)
    if alpha <= 1.0:
        raise ValueError(f"{name} must be > 1 (a Rényi order), got {alpha!r}")
    if alpha > MAX_ALPHA:
        raise ValueError(f"{name} must be at most {MAX_ALPHA:g}, got {alpha!r}")
    return alpha


#: The smallest α − 1 an estimator or a certificate accepts. Closer to 1 the moments
#: E[e^{(α−1)g}] they bound differ from 1 by so little that double rounding leaves D_α a relative
#: error of about eps/(α−1), either way: a Bernoulli baseline at α = 1 + 2^-52 certified 2.40 for
#: a pair whose D_α is 1.76. (The exact divergences of rdpest.stats keep their precision there.)
MIN_ALPHA_GAP = 1e-6


def check_estimation_alpha(alpha, name: str = "alpha") -> float:
    """Rényi order of an estimate or a certified bound: in [1 + MIN_ALPHA_GAP, MAX_ALPHA]."""
    alpha = check_alpha(alpha, name)
    if alpha < 1.0 + MIN_ALPHA_GAP:
        raise ValueError(
            f"{name} must be at least 1 + {MIN_ALPHA_GAP:g} to estimate or certify D_alpha, got "
            f"{alpha!r}: closer to 1 the moments e^((α-1)g) differ from 1 by too little for "
            "double precision to resolve, and a certified bound could exceed the truth"
        )
    return alpha


#: The smallest error probability accepted: below it the quantiles and roots the bounds need are
#: no longer computable in double precision (and no audit needs a level closer to 1).
MIN_BETA = 1e-100


def check_beta(beta, name: str = "beta") -> float:
    """Error probability of a confidence bound: in [MIN_BETA, 1)."""
    beta = check_open_unit(beta, name)
    if beta < MIN_BETA:
        raise ValueError(f"{name} must be at least {MIN_BETA:g}, got {beta!r}")
    return beta


def check_pair(value, name: str) -> tuple:
    """A sequence of exactly two items (e.g. a window (lo, hi) or a threshold (value, side))."""
    if isinstance(value, str | bytes) or not isinstance(value, Sequence) or len(value) != 2:
        raise ValueError(f"{name} must be a pair of two values, got {value!r}")
    return tuple(value)


def check_levels(levels, name: str = "levels") -> np.ndarray:
    """A non-empty 1-D array of error levels, each in [MIN_BETA, 1)."""
    if isinstance(levels, str | bytes | dict) or levels is None:
        raise ValueError(f"{name} must be a sequence of numbers in (0, 1), got {levels!r}")
    try:
        arr = np.asarray(levels)
        if arr.dtype.kind not in "biuf" or arr.ndim > 1:
            raise TypeError("not a flat sequence of real numbers")
        arr = arr.astype(np.float64).reshape(-1)
    except (TypeError, ValueError):
        raise ValueError(
            f"{name} must be a sequence of numbers in (0, 1), got {levels!r}"
        ) from None
    if arr.size == 0 or not np.all((arr >= MIN_BETA) & (arr < 1.0)):
        raise ValueError(f"{name} must be numbers in [{MIN_BETA:g}, 1), got {levels!r}")
    return arr


def check_option(value, options, name: str) -> str:
    """One of the strings ``options`` (a ValueError naming ``name`` for anything else)."""
    if not isinstance(value, str) or value not in options:
        raise ValueError(f"{name} must be one of {', '.join(options)}; got {value!r}")
    return value


def check_open_unit(value, name: str) -> float:
    """A probability strictly inside (0, 1) with no floor (e.g. a DP δ, which may be tiny)."""
    value = check_real(value, name)
    if not 0.0 < value < 1.0:
        raise ValueError(f"{name} must lie strictly between 0 and 1, got {value!r}")
    return value


def finite_result(*, allow_inf: bool = False):
    """Decorator for a public function: a result that is not finite becomes a ValueError.

    The message shows the scalar arguments, so the one whose value is too extreme for double
    precision is named. ``allow_inf``: +inf is a correct answer (an exact divergence between
    laws that are not absolutely continuous); NaN and −inf never are.
    """

    def decorate(function):
        signature = inspect.signature(function)

        def refuse(args, kwargs, why: str) -> ValueError:
            bound = signature.bind(*args, **kwargs)
            shown = ", ".join(_show(k, v) for k, v in bound.arguments.items())
            return ValueError(
                f"{function.__name__}({shown}) {why} in double precision: an argument is too "
                "extreme"
            )

        @functools.wraps(function)
        def checked(*args, **kwargs):
            # Overflow shows up as a non-finite result (checked below), not as a warning.
            with np.errstate(over="ignore", invalid="ignore", divide="ignore", under="ignore"):
                try:
                    result = function(*args, **kwargs)
                except (ArithmeticError, RuntimeError) as exc:  # overflow, non-convergence
                    raise refuse(args, kwargs, f"cannot be computed ({exc})") from None
                except ValueError as exc:
                    if str(exc) != "math domain error":
                        raise
                    raise refuse(args, kwargs, "cannot be computed (math domain error)") from None
            if not all(_acceptable(a, allow_inf) for a in _arrays_in(result)):
                raise refuse(args, kwargs, "has no finite result")
            return result

        return checked

    return decorate


def _show(name: str, value) -> str:
    """An argument for an error message: scalars as they are, arrays by shape and range."""
    if isinstance(value, numbers.Real | str):
        return f"{name}={value!r}"
    try:
        arr = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        return f"{name}=<{type(value).__name__}>"
    if arr.size == 0:
        return f"{name}=<empty>"
    return f"{name}=<shape {arr.shape}, values in [{arr.min():.3g}, {arr.max():.3g}]>"


def _acceptable(values: np.ndarray, allow_inf: bool) -> bool:
    if allow_inf:
        return not (np.isnan(values).any() or (values == -np.inf).any())
    return bool(np.isfinite(values).all())


def _arrays_in(value) -> list[np.ndarray]:
    """The numbers inside a result, as arrays (of floats, arrays, tuples, dicts, dataclasses)."""
    if isinstance(value, bool | str) or value is None:
        return []
    if isinstance(value, numbers.Real):
        return [np.asarray(float(value))]
    if isinstance(value, np.ndarray):
        return [value] if value.dtype.kind in "biuf" else []
    if hasattr(value, "__dataclass_fields__"):
        return [a for f in value.__dataclass_fields__ for a in _arrays_in(getattr(value, f))]
    if isinstance(value, dict):
        return [a for v in value.values() for a in _arrays_in(v)]
    if isinstance(value, tuple | list):
        return [a for v in value for a in _arrays_in(v)]
    return []


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


#: The largest binomial count accepted (scipy's beta quantiles need 64-bit integers).
_MAX_TRIALS = 2**62


def check_counts(successes, trials) -> tuple[int, int]:
    """Binomial counts: integers (not bools), ``trials >= 1`` and ``0 <= successes <= trials``."""
    for value, name in ((successes, "successes"), (trials, "trials")):
        if isinstance(value, bool) or not isinstance(value, int | np.integer):
            raise ValueError(f"{name} must be an integer, got {value!r}")
    k, n = int(successes), int(trials)
    if n < 1:
        raise ValueError(f"trials must be >= 1, got {n}")
    if n > _MAX_TRIALS:
        # scipy's beta quantiles take 64-bit integers at most (2**63 raised a bare TypeError).
        raise ValueError(f"trials must be at most 2**62, got {n}")
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
