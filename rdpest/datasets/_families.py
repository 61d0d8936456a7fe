"""The benchmark families of :mod:`rdpest.datasets`: their options and their solvers.

Each solver returns the parameters of its family for which D_α(P‖Q) equals the requested value;
:func:`true_divergence` recomputes D_α from them with :mod:`rdpest.stats.divergences`.
"""

from __future__ import annotations

import functools
import math
import numbers
from collections.abc import Callable

import numpy as np
from scipy import optimize

from rdpest.stats.divergences import (
    _gaussian_renyi_divergence,
    _laplace_renyi_divergence,
    _subsampled_gaussian_renyi_divergence,
    multivariate_gaussian_renyi_divergence,
)
from rdpest.stats.family_divergences import (
    _exponential_rate_renyi_divergence,
    _gaussian_mixture_renyi_divergence,
    _laplace_scale_renyi_divergence,
    _poisson_rate_renyi_divergence,
    _student_t_shift_renyi_divergence,
)
from rdpest.utils.validation import check_positive, check_probability, check_real

# Optional keyword parameters of each family and their defaults (the keys, in order, are the
# families: rdpest.datasets.FAMILIES).
FAMILY_OPTIONS: dict[str, dict[str, float]] = {
    "gaussian_shift": {},
    "gaussian_scale": {},
    "laplace_shift": {},
    "subsampled_gaussian": {"sampling_rate": 0.2},
    "multivariate_gaussian": {"dimension": 2, "correlation": 0.5},
    "student_t_shift": {"df": 3.0},
    "exponential_rate": {},
    "gaussian_mixture": {},
    "laplace_scale": {},
    "poisson_rate": {},
}

# Keys of the solved-parameter dictionaries (family_parameters' output, log_likelihood_ratio's
# input).
SOLVED_KEYS: dict[str, tuple[str, ...]] = {
    "gaussian_shift": ("mean",),
    "gaussian_scale": ("std",),
    "laplace_shift": ("shift",),
    "subsampled_gaussian": ("sampling_rate", "noise_multiplier"),
    "multivariate_gaussian": ("mean", "covariance"),
    "student_t_shift": ("df", "shift"),
    "exponential_rate": ("rate",),
    "gaussian_mixture": ("mean",),
    "laplace_scale": ("scale",),
    "poisson_rate": ("rate",),
}

# Noise multipliers over which the subsampled Gaussian divergence is solved (its quadrature is
# accurate to about 1e-12 there).
_NOISE_MULTIPLIER_RANGE = (0.05, 1e5)
# Largest |location| of a solved law with unit noise: ulp(2^32) = 2^-20 ≈ 1e-6, so draws still
# resolve the noise. Beyond it N(μ, 1) rounds to a handful of values and the "exact" truth no
# longer describes the samples (divergence=1e300 gave N(1e150, 1), every draw exactly 1e150).
MAX_LOCATION = 2.0**32
# Largest exponential rate (draws of size 1/λ stay normal floats).
_LOG_MAX_RATE = math.log(1e300)
# Largest Poisson rate: counts near 2^32 are exact in float64 and numpy's sampler accepts them.
_MAX_POISSON_RATE = 2.0**32
# Degrees of freedom and shifts of student_t_shift: its quadrature was checked against 30-digit
# mpmath integration over df in [1, 1000], shifts up to 1000 and orders up to 64 (agreement to
# about 1e-12 relative).
_DF_RANGE = (1.0, 1e3)
_MAX_T_SHIFT = 1e3
# The largest dimension of the multivariate Gaussian pair (its dense covariance: 8 MB at 1,000).
MAX_DIMENSION = 1000


def check_options(family: str, params: dict) -> dict:
    allowed = FAMILY_OPTIONS[family]
    unknown = sorted(set(params) - set(allowed))
    if unknown:
        accepted = ", ".join(allowed) if allowed else "no parameters"
        raise ValueError(
            f"unknown parameter(s) {', '.join(unknown)} for family {family!r}; "
            f"it accepts {accepted}"
        )
    options = {**allowed, **params}
    if family == "subsampled_gaussian":
        rate = check_probability(options["sampling_rate"], "sampling_rate")
        if rate == 0.0:
            raise ValueError("sampling_rate must lie in (0, 1], got 0.0")
        options["sampling_rate"] = rate
    if family == "multivariate_gaussian":
        dimension = options["dimension"]
        if isinstance(dimension, bool) or not isinstance(dimension, numbers.Integral):
            raise ValueError(f"dimension must be an integer >= 1, got {dimension!r}")
        if not 1 <= dimension <= MAX_DIMENSION:
            # The family's covariance is a dense d x d matrix (8·d² bytes; 80 GB at 10⁵).
            raise ValueError(
                f"dimension must be between 1 and {MAX_DIMENSION} (the pair's covariance is a "
                f"dense d x d matrix), got {dimension!r}"
            )
        correlation = check_real(options["correlation"], "correlation")
        # Σ = (1−ρ) I + ρ 11ᵀ has eigenvalues 1 − ρ and 1 + (d−1)ρ: positive definite iff
        # −1/(d−1) < ρ < 1 (for d = 1, −1 < ρ < 1 by convention, ρ being unused).
        low = -1.0 / (dimension - 1) if dimension > 1 else -1.0
        if not low < correlation < 1.0:
            raise ValueError(
                f"correlation must lie in ({low:g}, 1) for dimension {dimension} (else the "
                f"covariance is not positive definite), got {correlation!r}"
            )
        options["dimension"] = int(dimension)
        options["correlation"] = correlation
    if family == "student_t_shift":
        df = check_positive(options["df"], "df")
        if not _DF_RANGE[0] <= df <= _DF_RANGE[1]:
            raise ValueError(
                f"df must lie in [{_DF_RANGE[0]:g}, {_DF_RANGE[1]:g}] (degrees of freedom of "
                f"Student's t), got {df!r}"
            )
        options["df"] = df
    return options


def _closest_root(func: Callable[[float], float], root: float) -> float:
    """The float among ``root`` and its two neighbours where |func| is smallest.

    brentq stops within a few ulps; near a steep part of the curve one ulp of the parameter is
    worth much more than one ulp of the divergence, so the last step is taken by hand.
    """
    candidates = (np.nextafter(root, -np.inf), root, np.nextafter(root, np.inf))
    return float(min(candidates, key=lambda x: abs(func(float(x)))))


def _solve_gaussian_shift(alpha: float, divergence: float) -> dict:
    # D_α(N(μ,1) ‖ N(0,1)) = α μ² / 2 (Gil, Alajaji & Linder 2013, equal variances).
    return {"mean": math.sqrt(2.0 * divergence / alpha)}


def _solve_gaussian_scale(alpha: float, divergence: float) -> dict:
    if divergence == 0.0:
        return {"std": 1.0}

    def excess(std: float) -> float:
        return _gaussian_renyi_divergence(alpha, 0.0, std, 0.0, 1.0) - divergence

    # D grows from 0 at s = 1 to +inf as s² → α/(α−1), where α·1 + (1−α)s² reaches 0: take the
    # largest float s below that boundary with a finite divergence.
    upper = math.sqrt(alpha / (alpha - 1.0))
    while not math.isfinite(_gaussian_renyi_divergence(alpha, 0.0, upper, 0.0, 1.0)):
        upper = float(np.nextafter(upper, 0.0))
    if excess(upper) < 0.0:
        raise ValueError(
            f"divergence {divergence!r} is not reachable by family 'gaussian_scale' at alpha="
            f"{alpha!r} in double precision (at most about "
            f"{_gaussian_renyi_divergence(alpha, 0.0, upper, 0.0, 1.0):.4g})"
        )
    root = optimize.brentq(excess, 1.0, upper, xtol=1e-300, rtol=4 * np.finfo(float).eps)
    return {"std": _closest_root(excess, root)}


def _solve_laplace_shift(alpha: float, divergence: float) -> dict:
    if divergence == 0.0:
        return {"shift": 0.0}

    def excess(shift: float) -> float:
        return _laplace_renyi_divergence(alpha, shift, 1.0) - divergence

    # Mironov (2017), Table II: Δ − log((2α−1)/α)/(α−1) <= D_α <= Δ, so the root lies in
    # [D, D + log((2α−1)/α)/(α−1)].
    upper = divergence + math.log((2.0 * alpha - 1.0) / alpha) / (alpha - 1.0) + 1.0
    # Bisection steps from [0, ~1] down to a root as small as 1e-150 need a few hundred steps.
    root = optimize.brentq(
        excess, 0.0, upper, xtol=1e-300, rtol=4 * np.finfo(float).eps, maxiter=2000
    )
    return {"shift": _closest_root(excess, root)}


def _solve_subsampled_gaussian(alpha: float, divergence: float, sampling_rate: float) -> dict:
    if divergence == 0.0:
        # P = Q needs σ = ∞ at a positive sampling rate; the subsampling rate 0 realises it with
        # finite noise (P = Q = N(0, 1)).
        return {"sampling_rate": 0.0, "noise_multiplier": 1.0}
    if sampling_rate == 1.0:
        # Gaussian mechanism: D = α/(2σ²).
        return {"sampling_rate": 1.0, "noise_multiplier": math.sqrt(alpha / (2.0 * divergence))}

    def excess(log_sigma: float) -> float:
        return (
            _subsampled_gaussian_renyi_divergence(
                alpha, sampling_rate, math.exp(log_sigma), "forward"
            )
            - divergence
        )

    # D decreases in σ; solve in log σ over the range where the quadrature is validated.
    low, high = (math.log(s) for s in _NOISE_MULTIPLIER_RANGE)
    if excess(low) < 0.0 or excess(high) > 0.0:
        raise ValueError(
            f"divergence {divergence!r} is not reachable by family 'subsampled_gaussian' at "
            f"alpha={alpha!r}, sampling_rate={sampling_rate!r} with a noise multiplier in "
            f"[{_NOISE_MULTIPLIER_RANGE[0]:g}, {_NOISE_MULTIPLIER_RANGE[1]:g}]"
        )
    # Start from the small-q approximation D ≈ α q²/(2σ²) (Mironov, Talwar & Zhang 2019) and
    # widen the bracket by factors of 2 so brentq starts close to the root.
    guess = min(max(math.log(sampling_rate * math.sqrt(alpha / (2.0 * divergence))), low), high)
    a, b = max(guess - math.log(2.0), low), min(guess + math.log(2.0), high)
    while excess(a) < 0.0:
        a = max(a - 2.0, low)
    while excess(b) > 0.0:
        b = min(b + 2.0, high)
    log_sigma = optimize.brentq(excess, a, b, xtol=1e-14, rtol=4 * np.finfo(float).eps)
    return {"sampling_rate": sampling_rate, "noise_multiplier": math.exp(log_sigma)}


def _equicorrelation(dimension: int, correlation: float) -> np.ndarray:
    return (1.0 - correlation) * np.eye(dimension) + correlation * np.ones((dimension, dimension))


def _solve_multivariate_gaussian(
    alpha: float, divergence: float, dimension: int, correlation: float
) -> dict:
    # Equal covariances: D = α/2 · Δᵀ Σ⁻¹ Δ. For Δ = c·1, 1 is an eigenvector of Σ with eigenvalue
    # 1 + (d−1)ρ, so Δᵀ Σ⁻¹ Δ = c² d / (1 + (d−1)ρ).
    eigenvalue = 1.0 + (dimension - 1) * correlation
    shift = math.sqrt(2.0 * divergence * eigenvalue / (alpha * dimension))
    return {
        "mean": np.full(dimension, shift),
        "covariance": _equicorrelation(dimension, correlation),
    }


def _bracketed_root(excess: Callable[[float], float], low: float, high: float) -> float:
    """The root of an increasing ``excess`` in [low, high], to the last float."""
    root = optimize.brentq(
        excess, low, high, xtol=1e-300, rtol=4 * np.finfo(float).eps, maxiter=2000
    )
    return _closest_root(excess, root)


def _solve_exponential_rate(alpha: float, divergence: float) -> dict:
    if divergence == 0.0:
        return {"rate": 1.0}

    def excess(rate: float) -> float:
        return _exponential_rate_renyi_divergence(alpha, rate) - divergence

    # D increases in λ > 1, and log(αλ + 1 − α) <= log(αλ) gives D >= log λ − log(α)/(α−1):
    # the root lies below λ = exp(D + log(α)/(α−1)).
    log_upper = divergence + math.log(alpha) / (alpha - 1.0)
    if log_upper > _LOG_MAX_RATE and excess(math.exp(_LOG_MAX_RATE)) < 0.0:
        raise ValueError(
            f"divergence {divergence!r} is too large for family 'exponential_rate' at alpha="
            f"{alpha!r}: it needs a rate beyond 1e300"
        )
    upper = math.exp(min(log_upper, _LOG_MAX_RATE))
    return {"rate": _bracketed_root(excess, 1.0, upper)}


def _solve_laplace_scale(alpha: float, divergence: float) -> dict:
    if divergence == 0.0:
        return {"scale": 1.0}

    def excess(scale: float) -> float:
        return _laplace_scale_renyi_divergence(alpha, scale) - divergence

    # D grows from 0 at b = 1 to +inf as b → α/(α−1) (where α + (1−α) b reaches 0), as for
    # gaussian_scale: take the largest float below that boundary with a finite divergence.
    upper = alpha / (alpha - 1.0)
    while not math.isfinite(_laplace_scale_renyi_divergence(alpha, upper)):
        upper = float(np.nextafter(upper, 0.0))
    if excess(upper) < 0.0:
        raise ValueError(
            f"divergence {divergence!r} is not reachable by family 'laplace_scale' at alpha="
            f"{alpha!r} in double precision (at most about "
            f"{_laplace_scale_renyi_divergence(alpha, upper):.4g})"
        )
    return {"scale": _bracketed_root(excess, 1.0, upper)}


def _solve_poisson_rate(alpha: float, divergence: float) -> dict:
    if divergence == 0.0:
        return {"rate": 1.0}

    def excess(rate: float) -> float:
        return _poisson_rate_renyi_divergence(alpha, rate) - divergence

    if excess(_MAX_POISSON_RATE) < 0.0:
        raise ValueError(
            f"divergence {divergence!r} is too large for family 'poisson_rate' at alpha="
            f"{alpha!r}: it needs a rate beyond {_MAX_POISSON_RATE:.3g}, where float64 counts "
            "no longer resolve the law"
        )
    upper = 2.0
    while excess(upper) < 0.0:
        upper = min(upper * upper, _MAX_POISSON_RATE)
    # At large α the divergence overflows (α·log λ > 709) long before λ = 2: the bracket's end
    # is moved down to a finite divergence (still above the target, or the target is refused).
    while not math.isfinite(excess(upper)):
        upper = 1.0 + (upper - 1.0) / 2.0
    if excess(upper) < 0.0:
        raise ValueError(
            f"divergence {divergence!r} is not reachable by family 'poisson_rate' at alpha="
            f"{alpha!r} in double precision"
        )
    return {"rate": _bracketed_root(excess, 1.0, upper)}


def _solve_by_doubling(
    divergence_of: Callable[[float], float],
    divergence: float,
    name: str,
    alpha: float,
    start: float,
    limit: float,
) -> float:
    """Root in (0, limit] of an increasing divergence_of(x) = divergence, bracketed by doubling."""

    def excess(x: float) -> float:
        return divergence_of(x) - divergence

    low, high = 0.0, min(start, limit)
    while excess(high) < 0.0:
        if high >= limit:
            raise ValueError(
                f"divergence {divergence!r} is too large for family {name!r} at alpha={alpha!r}: "
                f"it needs a location beyond {limit:.3g}"
            )
        low, high = high, min(2.0 * high, limit)
    return _bracketed_root(excess, low, high)


@functools.lru_cache(maxsize=256)
def _solve_student_t_shift(alpha: float, divergence: float, df: float) -> dict:
    if divergence == 0.0:
        return {"df": df, "shift": 0.0}
    shift = _solve_by_doubling(
        lambda m: _student_t_shift_renyi_divergence(alpha, m, df),
        divergence,
        "student_t_shift",
        alpha,
        1.0,
        _MAX_T_SHIFT,
    )
    return {"df": df, "shift": shift}


@functools.lru_cache(maxsize=256)
def _solve_gaussian_mixture(alpha: float, divergence: float) -> dict:
    if divergence == 0.0:
        return {"mean": 0.0}
    # cosh y ∈ [e^{|y|}/2, e^{|y|}] bounds E_Q[(p/q)^α] and gives
    # αμ²/2 − α log 2/(α−1) <= D <= αμ²/2 + log 2/(α−1): start the doubling at the lower end.
    start = math.sqrt(max(2.0 * (divergence - math.log(2.0) / (alpha - 1.0)) / alpha, 0.0))
    if start > MAX_LOCATION:
        raise ValueError(
            f"divergence {divergence!r} is too large for family 'gaussian_mixture' at alpha="
            f"{alpha!r}: it needs component means beyond {MAX_LOCATION:.3g}"
        )
    mean = _solve_by_doubling(
        lambda m: _gaussian_mixture_renyi_divergence(alpha, m),
        divergence,
        "gaussian_mixture",
        alpha,
        max(start, 0.5),
        MAX_LOCATION,
    )
    return {"mean": mean}


_SOLVERS: dict[str, Callable[..., dict]] = {
    "gaussian_shift": _solve_gaussian_shift,
    "gaussian_scale": _solve_gaussian_scale,
    "laplace_shift": _solve_laplace_shift,
    "subsampled_gaussian": _solve_subsampled_gaussian,
    "multivariate_gaussian": _solve_multivariate_gaussian,
    "student_t_shift": _solve_student_t_shift,
    "exponential_rate": _solve_exponential_rate,
    "gaussian_mixture": _solve_gaussian_mixture,
    "laplace_scale": _solve_laplace_scale,
    "poisson_rate": _solve_poisson_rate,
}


def solve_family(family: str, alpha: float, divergence: float, options: dict) -> dict:
    """The solved-parameter dictionary of a (checked) family, order, divergence and options."""
    solved = _SOLVERS[family](alpha, divergence, **options)
    return dict(solved)  # a copy: the cached solvers' dictionaries stay untouched


def true_divergence(family: str, alpha: float, solved: dict) -> float:
    """D_α(P‖Q) recomputed from the solved parameters with rdpest.stats.divergences."""
    if family == "gaussian_shift":
        return _gaussian_renyi_divergence(alpha, solved["mean"], 1.0, 0.0, 1.0)
    if family == "gaussian_scale":
        return _gaussian_renyi_divergence(alpha, 0.0, solved["std"], 0.0, 1.0)
    if family == "laplace_shift":
        return _laplace_renyi_divergence(alpha, solved["shift"], 1.0)
    if family == "subsampled_gaussian":
        return _subsampled_gaussian_renyi_divergence(
            alpha, solved["sampling_rate"], solved["noise_multiplier"], "forward"
        )
    if family == "student_t_shift":
        return _student_t_shift_renyi_divergence(alpha, solved["shift"], solved["df"])
    if family == "exponential_rate":
        return _exponential_rate_renyi_divergence(alpha, solved["rate"])
    if family == "gaussian_mixture":
        return _gaussian_mixture_renyi_divergence(alpha, solved["mean"])
    if family == "laplace_scale":
        return _laplace_scale_renyi_divergence(alpha, solved["scale"])
    if family == "poisson_rate":
        return _poisson_rate_renyi_divergence(alpha, solved["rate"])
    mean, covariance = solved["mean"], solved["covariance"]
    return multivariate_gaussian_renyi_divergence(
        alpha, mean, covariance, np.zeros_like(mean), covariance
    )
