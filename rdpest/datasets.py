"""Benchmark pairs of distributions with a known Rényi divergence, and samplers for them.

Each *family* is a one-parameter pair (P, Q) whose free parameter is solved so that D_α(P‖Q) equals
a requested value (``divergence = 0`` gives P = Q). :func:`make_renyi_pair` draws samples X ~ P and
Y ~ Q together with the true divergence, recomputed from :mod:`rdpest.stats.divergences` for the
solved parameters; :func:`log_likelihood_ratio` gives the exact privacy loss log p/q that the Markov
and Hoeffding bounds of Kim, Varshney & Alabi (2026, Thm 3.1, Thms B.2–B.3) take as input.

Families (Q is always the reference, N(0, 1)-like, distribution):

- ``"gaussian_shift"``: P = N(μ, 1), Q = N(0, 1), μ = sqrt(2D/α) (Gaussian mechanism).
- ``"gaussian_scale"``: P = N(0, s²), Q = N(0, 1), s in (1, sqrt(α/(α−1))).
- ``"laplace_shift"``: P = Laplace(Δ, 1), Q = Laplace(0, 1) (Laplace mechanism).
- ``"subsampled_gaussian"``: P = (1−q) N(0, σ²) + q N(1, σ²), Q = N(0, σ²) with the sampling rate
  q fixed (parameter ``sampling_rate``, default 0.2) and the noise multiplier σ solved (one step of
  DP-SGD, forward direction, as Opacus's accountant reports it).
- ``"multivariate_gaussian"``: P = N(c·1, Σ), Q = N(0, Σ) in ``dimension`` dimensions (default 2),
  Σ with unit variances and equicorrelation ``correlation`` (default 0.5).

Examples
--------
>>> X, Y, truth = make_renyi_pair("gaussian_shift", alpha=2.0, divergence=1.0, n_samples=500,
...                               random_state=0)
>>> X.shape, Y.shape, round(truth, 12)
((500,), (500,), 1.0)
"""

from __future__ import annotations

import math
import numbers
import warnings
from collections.abc import Callable

import numpy as np
from scipy import optimize

from rdpest.stats.divergences import (
    _gaussian_renyi_divergence,
    _laplace_renyi_divergence,
    _subsampled_gaussian_renyi_divergence,
    multivariate_gaussian_renyi_divergence,
)
from rdpest.utils.validation import (
    check_alpha,
    check_option,
    check_positive,
    check_probability,
    check_random_generator,
    check_real,
    finite_result,
)

__all__ = ["FAMILIES", "family_parameters", "log_likelihood_ratio", "make_renyi_pair"]

#: Names of the benchmark families accepted by :func:`make_renyi_pair`.
FAMILIES = (
    "gaussian_shift",
    "gaussian_scale",
    "laplace_shift",
    "subsampled_gaussian",
    "multivariate_gaussian",
)

# Optional keyword parameters of each family and their defaults.
_FAMILY_OPTIONS: dict[str, dict[str, float]] = {
    "gaussian_shift": {},
    "gaussian_scale": {},
    "laplace_shift": {},
    "subsampled_gaussian": {"sampling_rate": 0.2},
    "multivariate_gaussian": {"dimension": 2, "correlation": 0.5},
}

# Keys of the solved-parameter dictionaries (family_parameters' output, log_likelihood_ratio's
# input).
_SOLVED_KEYS: dict[str, tuple[str, ...]] = {
    "gaussian_shift": ("mean",),
    "gaussian_scale": ("std",),
    "laplace_shift": ("shift",),
    "subsampled_gaussian": ("sampling_rate", "noise_multiplier"),
    "multivariate_gaussian": ("mean", "covariance"),
}

# The true divergence of the solved parameters must match the request to this relative accuracy;
# otherwise the request is out of reach in double precision and is refused.
_RELATIVE_TOLERANCE = 1e-9
# Noise multipliers over which the subsampled Gaussian divergence is solved (its quadrature is
# accurate to about 1e-12 there).
_NOISE_MULTIPLIER_RANGE = (0.05, 1e5)
#: Most samples per side that make_renyi_pair draws (8e8 bytes of float64 per side and feature).
MAX_SAMPLES = 10**8
# Largest |location| of a solved law with unit noise: ulp(2^32) = 2^-20 ≈ 1e-6, so draws still
# resolve the noise. Beyond it N(μ, 1) rounds to a handful of values and the "exact" truth no
# longer describes the samples (divergence=1e300 gave N(1e150, 1), every draw exactly 1e150).
_MAX_LOCATION = 2.0**32


# ---------------------------------------------------------------------------------------------
# Argument checks
# ---------------------------------------------------------------------------------------------


def _check_family(family) -> str:
    return check_option(family, FAMILIES, "family")


def _check_options(family: str, params: dict) -> dict:
    allowed = _FAMILY_OPTIONS[family]
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
        if dimension < 1:
            raise ValueError(f"dimension must be >= 1, got {dimension!r}")
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
    return options


def _check_n_samples(n_samples) -> tuple[int, int]:
    pair = tuple(n_samples) if isinstance(n_samples, list | tuple) else (n_samples, n_samples)
    if len(pair) != 2:
        raise ValueError(f"n_samples must be an int or a pair (n_p, n_q), got {n_samples!r}")
    for n in pair:
        if isinstance(n, bool) or not isinstance(n, numbers.Integral):
            raise ValueError(f"n_samples must hold integers, got {n_samples!r}")
        if n < 1:
            raise ValueError(f"n_samples must be >= 1, got {n_samples!r}")
        if n > MAX_SAMPLES:
            raise ValueError(
                f"n_samples must be at most {MAX_SAMPLES:.0e} per side (MAX_SAMPLES), got "
                f"{n_samples!r}"
            )
    return int(pair[0]), int(pair[1])


# ---------------------------------------------------------------------------------------------
# Solvers: one per family, each returning the solved-parameter dictionary
# ---------------------------------------------------------------------------------------------


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


_SOLVERS: dict[str, Callable[..., dict]] = {
    "gaussian_shift": _solve_gaussian_shift,
    "gaussian_scale": _solve_gaussian_scale,
    "laplace_shift": _solve_laplace_shift,
    "subsampled_gaussian": _solve_subsampled_gaussian,
    "multivariate_gaussian": _solve_multivariate_gaussian,
}


def _true_divergence(family: str, alpha: float, solved: dict) -> float:
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
    mean, covariance = solved["mean"], solved["covariance"]
    return multivariate_gaussian_renyi_divergence(
        alpha, mean, covariance, np.zeros_like(mean), covariance
    )


def _solve(family, alpha, divergence, params) -> tuple[dict, float]:
    family = _check_family(family)
    alpha = check_alpha(alpha)
    divergence = check_positive(divergence, "divergence", allow_zero=True)
    options = _check_options(family, params)
    what = f"alpha={alpha!r} and divergence={divergence!r}"
    try:
        # Extreme orders and divergences push the solvers and the quadrature out of the float
        # range (OverflowError, a root finder that gives up, NaN densities): all of them mean
        # that this pair cannot be realised in double precision.
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            solved = _SOLVERS[family](alpha, divergence, **options)
            truth = _true_divergence(family, alpha, solved)
    except (ArithmeticError, RuntimeError, ValueError) as exc:
        raise ValueError(
            f"{what} cannot be realised by family {family!r} in double precision: {exc}"
        ) from None
    values = np.concatenate([np.ravel(v) for v in solved.values()])
    if not (np.isfinite(values).all() and math.isfinite(truth)):
        raise ValueError(
            f"{what} cannot be realised by family {family!r}: the solved parameters "
            f"{solved!r} are not finite"
        )
    locations = [solved[k] for k in ("mean", "shift") if k in solved]
    if any(np.max(np.abs(v)) > _MAX_LOCATION for v in locations):
        raise ValueError(
            f"divergence {divergence!r} is too large for family {family!r} at alpha={alpha!r}: "
            f"it needs a location of {float(np.max(np.abs(locations[0]))):.3g} against unit "
            f"noise, beyond {_MAX_LOCATION:.3g}, where float64 draws no longer resolve the noise"
        )
    if not abs(truth - divergence) <= _RELATIVE_TOLERANCE * divergence:
        raise ValueError(
            f"divergence {divergence!r} is not reachable by family {family!r} at alpha={alpha!r} "
            f"to relative accuracy {_RELATIVE_TOLERANCE:g} in double precision (closest: {truth!r})"
        )
    return solved, truth


# ---------------------------------------------------------------------------------------------
# Public functions
# ---------------------------------------------------------------------------------------------


@finite_result()
def family_parameters(family: str, alpha: float, divergence: float, **params) -> dict:
    """Parameters of a benchmark family solved so that D_α(P‖Q) equals ``divergence``.

    Parameters
    ----------
    family : str
        One of :data:`FAMILIES`.
    alpha : float
        Rényi order, > 1.
    divergence : float
        Target D_α(P‖Q) >= 0; 0 gives P = Q.
    **params
        Family options: ``sampling_rate`` in (0, 1] for ``"subsampled_gaussian"`` (default 0.2);
        ``dimension`` >= 1 (default 2) and ``correlation`` in (−1/(d−1), 1) (default 0.5) for
        ``"multivariate_gaussian"``. Other families take none.

    Returns
    -------
    dict
        ``{"mean": μ}`` (gaussian_shift: P = N(μ, 1)), ``{"std": s}`` (gaussian_scale:
        P = N(0, s²)), ``{"shift": Δ}`` (laplace_shift: P = Laplace(Δ, 1)),
        ``{"sampling_rate": q, "noise_multiplier": σ}`` (subsampled_gaussian; for divergence 0 the
        rate is 0 and σ = 1, i.e. P = Q = N(0, 1)), ``{"mean": array (d,), "covariance": array
        (d, d)}`` (multivariate_gaussian: P = N(mean, covariance), Q = N(0, covariance)).

    Raises
    ------
    ValueError
        On bad input, or when the divergence cannot be reached to relative accuracy 1e-9 in
        double precision (gaussian_scale close to its boundary: (α−1)·D beyond about 6–9;
        subsampled_gaussian outside noise multipliers [0.05, 1e5]), or when the solved law
        cannot be sampled faithfully in double precision (a location beyond 2**32 against unit
        noise, non-finite parameters, e.g. alpha=1e300 or divergence=1e300).

    Examples
    --------
    >>> params = family_parameters("gaussian_shift", alpha=2.0, divergence=4.0)
    >>> round(params["mean"], 12)
    2.0
    """
    solved, _ = _solve(family, alpha, divergence, params)
    return solved


@finite_result()
def make_renyi_pair(
    family: str,
    alpha: float,
    divergence: float,
    n_samples,
    random_state=None,
    **params,
) -> tuple[np.ndarray, np.ndarray, float]:
    """Samples from a pair (P, Q) with D_α(P‖Q) equal to ``divergence``, and the exact value.

    Parameters
    ----------
    family : str
        One of :data:`FAMILIES`.
    alpha : float
        Rényi order, > 1.
    divergence : float
        Target D_α(P‖Q) >= 0; 0 gives P = Q.
    n_samples : int or (int, int)
        Number of samples from P and from Q (one int for both, or a pair ``(n_p, n_q)``), at
        most ``rdpest.datasets.MAX_SAMPLES`` (10**8) per side.
    random_state : None, int, numpy.random.Generator or numpy.random.RandomState
        Source of randomness; the same int gives the same arrays. X is drawn before Y.
    **params
        Family options, see :func:`family_parameters`.

    Returns
    -------
    X : ndarray of shape (n_p,) or (n_p, d)
        Samples from P (2-D only for ``"multivariate_gaussian"``).
    Y : ndarray of shape (n_q,) or (n_q, d)
        Samples from Q.
    true_divergence : float
        D_α(P‖Q) recomputed from the solved parameters (equal to ``divergence`` to 1e-9).

    Examples
    --------
    >>> X, Y, truth = make_renyi_pair("multivariate_gaussian", alpha=1.25, divergence=0.5,
    ...                               n_samples=(100, 200), random_state=1, dimension=3)
    >>> X.shape, Y.shape, round(truth, 9)
    ((100, 3), (200, 3), 0.5)
    """
    n_p, n_q = _check_n_samples(n_samples)
    solved, truth = _solve(family, alpha, divergence, params)
    rng = check_random_generator(random_state)
    if family == "gaussian_shift":
        X = rng.normal(solved["mean"], 1.0, size=n_p)
        Y = rng.normal(0.0, 1.0, size=n_q)
    elif family == "gaussian_scale":
        X = solved["std"] * rng.standard_normal(n_p)
        Y = rng.standard_normal(n_q)
    elif family == "laplace_shift":
        X = rng.laplace(solved["shift"], 1.0, size=n_p)
        Y = rng.laplace(0.0, 1.0, size=n_q)
    elif family == "subsampled_gaussian":
        sigma, rate = solved["noise_multiplier"], solved["sampling_rate"]
        included = rng.random(n_p) < rate
        X = sigma * rng.standard_normal(n_p) + included.astype(np.float64)
        Y = sigma * rng.standard_normal(n_q)
    else:
        mean, chol = solved["mean"], np.linalg.cholesky(solved["covariance"])
        X = mean + rng.standard_normal((n_p, mean.size)) @ chol.T
        Y = rng.standard_normal((n_q, mean.size)) @ chol.T
    return X, Y, truth


def log_likelihood_ratio(family: str, params: dict) -> Callable[[np.ndarray], np.ndarray]:
    """The exact privacy loss x ↦ log p(x)/q(x) of a family with solved parameters.

    Parameters
    ----------
    family : str
        One of :data:`FAMILIES`.
    params : dict
        Solved parameters, as returned by :func:`family_parameters`.

    Returns
    -------
    callable
        Vectorised: maps an array of shape (n,) (or (n, d) for ``"multivariate_gaussian"``) to an
        array of shape (n,) of log-likelihood ratios.

    Examples
    --------
    >>> L = log_likelihood_ratio("gaussian_shift", {"mean": 1.0})
    >>> L([0.0, 0.5, 2.0]).tolist()  # μ x − μ²/2
    [-0.5, 0.0, 1.5]
    """
    family = _check_family(family)
    expected = _SOLVED_KEYS[family]
    if not isinstance(params, dict) or set(params) != set(expected):
        got = sorted(params) if isinstance(params, dict) else params
        raise ValueError(
            f"params for family {family!r} must be a dict with keys {', '.join(expected)} "
            f"(as returned by family_parameters), got {got!r}"
        )

    if family == "gaussian_shift":
        mean = check_real(params["mean"], "mean")
        return lambda x: mean * np.asarray(x, dtype=np.float64) - 0.5 * mean**2

    if family == "gaussian_scale":
        std = check_positive(params["std"], "std")
        curvature = 0.5 * (1.0 - 1.0 / std**2)

        def scale_ratio(x):
            x = np.asarray(x, dtype=np.float64)
            return curvature * x * x - math.log(std)

        return scale_ratio

    if family == "laplace_shift":
        shift = check_real(params["shift"], "shift")

        def laplace_ratio(x):
            x = np.asarray(x, dtype=np.float64)
            return np.abs(x) - np.abs(x - shift)

        return laplace_ratio

    if family == "subsampled_gaussian":
        rate = check_probability(params["sampling_rate"], "sampling_rate")
        sigma = check_positive(params["noise_multiplier"], "noise_multiplier")

        def subsampled_ratio(x):
            # p/q = 1 − q + q·exp((2x − 1)/(2σ²)) (Mironov, Talwar & Zhang 2019, Sec. 3).
            t = (np.asarray(x, dtype=np.float64) - 0.5) / sigma**2
            if rate == 0.0:
                return np.zeros_like(t)
            if rate == 1.0:
                return t
            return np.logaddexp(math.log1p(-rate), math.log(rate) + t)

        return subsampled_ratio

    mean = np.asarray(params["mean"], dtype=np.float64)
    covariance = np.asarray(params["covariance"], dtype=np.float64)
    if mean.ndim != 1 or covariance.shape != (mean.size, mean.size):
        raise ValueError(
            f"params['mean'] must have shape (d,) and params['covariance'] shape (d, d), got "
            f"{mean.shape} and {covariance.shape}"
        )
    # log N(x; μ, Σ) − log N(x; 0, Σ) = wᵀx − wᵀμ/2 with w = Σ⁻¹μ.
    weights = np.linalg.solve(covariance, mean)
    offset = 0.5 * float(weights @ mean)

    def multivariate_ratio(x):
        x = np.asarray(x, dtype=np.float64)
        if x.shape[-1] != mean.size:
            raise ValueError(f"x must have {mean.size} columns, got shape {x.shape}")
        return x @ weights - offset

    return multivariate_ratio
