"""Benchmark pairs of distributions with a known Rényi divergence, and samplers for them.

Each *family* is a one-parameter pair (P, Q) whose free parameter is solved so that D_α(P‖Q) equals
a requested value (``divergence = 0`` gives P = Q). :func:`make_renyi_pair` draws samples X ~ P and
Y ~ Q together with the true divergence, recomputed from :mod:`rdpest.stats.divergences` for the
solved parameters; :func:`log_likelihood_ratio` gives the exact privacy loss log p/q that the Markov
and Hoeffding bounds of Kim, Varshney & Alabi (2026, Thm 3.1, Thms B.2–B.3) take as input.

Families (Q is always the fixed reference distribution; P moves with the solved parameter):

- ``"gaussian_shift"``: P = N(μ, 1), Q = N(0, 1), μ = sqrt(2D/α) (Gaussian mechanism).
- ``"gaussian_scale"``: P = N(0, s²), Q = N(0, 1), s in (1, sqrt(α/(α−1))).
- ``"laplace_shift"``: P = Laplace(Δ, 1), Q = Laplace(0, 1) (Laplace mechanism).
- ``"subsampled_gaussian"``: P = (1−q) N(0, σ²) + q N(1, σ²), Q = N(0, σ²) with the sampling rate
  q fixed (parameter ``sampling_rate``, default 0.2) and the noise multiplier σ solved (one step of
  DP-SGD, forward direction, as Opacus's accountant reports it).
- ``"multivariate_gaussian"``: P = N(c·1, Σ), Q = N(0, Σ) in ``dimension`` dimensions (default 2),
  Σ with unit variances and equicorrelation ``correlation`` (default 0.5); any d >= 1 (d = 10 is
  tested).
- ``"student_t_shift"``: P = t_ν(μ), Q = t_ν(0) with ``df`` ν (default 3, in [1, 1000]) and the
  shift μ <= 1000 solved; D_α by quadrature over the real line (polynomial tails, bounded
  privacy loss).
- ``"exponential_rate"``: P = Exp(rate λ), Q = Exp(1), λ > 1 solved; closed form
  D = [α log λ − log(αλ + 1 − α)]/(α−1). Privacy loss log λ − (λ−1)x, bounded above.
- ``"gaussian_mixture"``: P = ½ N(−μ, 1) + ½ N(μ, 1), Q = N(0, 1), μ solved; D_α by quadrature
  (closed form for integer α). Privacy loss log cosh(μx) − μ²/2, unbounded above.
- ``"laplace_scale"``: P = Laplace(0, b), Q = Laplace(0, 1), b in (1, α/(α−1)) solved; closed form
  D = −log b − log(α − (α−1)b)/(α−1) (heavy-tailed privacy loss, like gaussian_scale).
- ``"poisson_rate"``: P = Poisson(λ), Q = Poisson(1), λ > 1 solved (a discrete family: samples are
  integer counts stored as float64); closed form D = (λ^α − αλ + α − 1)/(α−1).

Examples
--------
>>> X, Y, truth = make_renyi_pair("gaussian_shift", alpha=2.0, divergence=1.0, n_samples=500,
...                               random_state=0)
>>> X.shape, Y.shape, round(truth, 12)
((500,), (500,), 1.0)
"""

from __future__ import annotations

import contextlib
import math
import numbers
import warnings
from collections.abc import Callable

import numpy as np

from rdpest.datasets._families import (
    FAMILY_OPTIONS,
    MAX_LOCATION,
    SOLVED_KEYS,
    check_options,
    solve_family,
    true_divergence,
)
from rdpest.stats.divergences import _positive_definite_covariance
from rdpest.utils.validation import (
    check_alpha,
    check_finite_array,
    check_option,
    check_positive,
    check_probability,
    check_random_generator,
    check_real,
    finite_result,
)

__all__ = [
    "FAMILIES",
    "family_divergence",
    "family_parameters",
    "log_likelihood_ratio",
    "make_renyi_pair",
]

#: Names of the benchmark families accepted by :func:`make_renyi_pair`.
FAMILIES = tuple(FAMILY_OPTIONS)

# The true divergence of the solved parameters must match the request to this relative accuracy;
# otherwise the request is out of reach in double precision and is refused.
_RELATIVE_TOLERANCE = 1e-9
#: Most samples per side that make_renyi_pair draws (8e8 bytes of float64 per side and feature).
MAX_SAMPLES = 10**8
# ---------------------------------------------------------------------------------------------
# Argument checks
# ---------------------------------------------------------------------------------------------


def _check_family(family) -> str:
    return check_option(family, FAMILIES, "family")


def _check_n_samples(n_samples) -> tuple[int, int]:
    if isinstance(n_samples, np.ndarray) and n_samples.ndim == 1:  # np.array([n_p, n_q])
        n_samples = n_samples.tolist()
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


@contextlib.contextmanager
def _in_double_precision(failure: str):
    """Run the solvers or the quadrature quietly; where they fail, raise ValueError(failure ...).

    Extreme orders and divergences push the solvers and the quadrature out of the float range
    (OverflowError, a root finder that gives up, NaN densities): all of them mean that the pair
    cannot be computed in double precision.
    """
    try:
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            yield
    except OverflowError:  # its own words ("math range error") name no quantity
        raise ValueError(
            f"{failure} in double precision: an intermediate value overflows the float range "
            "(a smaller alpha or divergence may be realisable)"
        ) from None
    except (ArithmeticError, RuntimeError, ValueError) as exc:
        raise ValueError(f"{failure} in double precision: {exc}") from None


def _solve(family, alpha, divergence, params) -> tuple[dict, float]:
    family = _check_family(family)
    alpha = check_alpha(alpha)
    divergence = check_positive(divergence, "divergence", allow_zero=True)
    options = check_options(family, params)
    what = f"alpha={alpha!r} and divergence={divergence!r}"
    with _in_double_precision(f"{what} cannot be realised by family {family!r}"):
        solved = solve_family(family, alpha, divergence, options)
        truth = true_divergence(family, alpha, solved)
    values = np.concatenate([np.ravel(v) for v in solved.values()])
    if not (np.isfinite(values).all() and math.isfinite(truth)):
        raise ValueError(
            f"{what} cannot be realised by family {family!r}: the solved parameters "
            f"{solved!r} are not finite"
        )
    locations = [solved[k] for k in ("mean", "shift") if k in solved]
    if any(np.max(np.abs(v)) > MAX_LOCATION for v in locations):
        raise ValueError(
            f"divergence {divergence!r} is too large for family {family!r} at alpha={alpha!r}: "
            f"it needs a location of {float(np.max(np.abs(locations[0]))):.3g} against unit "
            f"noise, beyond {MAX_LOCATION:.3g}, where float64 draws no longer resolve the noise"
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
        ``dimension`` in [1, 1000] (default 2) and ``correlation`` in (−1/(d−1), 1) (default
        0.5) for ``"multivariate_gaussian"``; ``df`` in [1, 1000] (default 3) for
        ``"student_t_shift"``.
        Other families take none.

    Returns
    -------
    dict
        ``{"mean": μ}`` (gaussian_shift: P = N(μ, 1)), ``{"std": s}`` (gaussian_scale:
        P = N(0, s²)), ``{"shift": Δ}`` (laplace_shift: P = Laplace(Δ, 1)),
        ``{"sampling_rate": q, "noise_multiplier": σ}`` (subsampled_gaussian; for divergence 0 the
        rate is 0 and σ = 1, i.e. P = Q = N(0, 1)), ``{"mean": array (d,), "covariance": array
        (d, d)}`` (multivariate_gaussian: P = N(mean, covariance), Q = N(0, covariance)),
        ``{"df": ν, "shift": μ}`` (student_t_shift: P = t_ν(μ)), ``{"rate": λ}`` (exponential_rate:
        P = Exp(rate λ); poisson_rate: P = Poisson(λ)), ``{"mean": μ}`` (gaussian_mixture:
        P = ½ N(−μ, 1) + ½ N(μ, 1)), ``{"scale": b}`` (laplace_scale: P = Laplace(0, b)).

    Raises
    ------
    ValueError
        On bad input, or when the divergence cannot be reached to relative accuracy 1e-9 in
        double precision (gaussian_scale and laplace_scale close to their boundary: (α−1)·D
        beyond about 6–9;
        subsampled_gaussian outside noise multipliers [0.05, 1e5]), or when the solved law
        cannot be sampled faithfully in double precision (a location beyond 2**32 against unit
        noise, a Poisson rate beyond 2**32, non-finite parameters, e.g. alpha=1e300 or
        divergence=1e300).

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
        Samples from P (2-D only for ``"multivariate_gaussian"``; float64 counts for
        ``"poisson_rate"``).
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
    elif family == "student_t_shift":
        X = solved["shift"] + rng.standard_t(solved["df"], size=n_p)
        Y = rng.standard_t(solved["df"], size=n_q)
    elif family == "exponential_rate":
        X = rng.exponential(1.0 / solved["rate"], size=n_p)
        Y = rng.exponential(1.0, size=n_q)
    elif family == "gaussian_mixture":
        signs = np.where(rng.random(n_p) < 0.5, -1.0, 1.0)
        X = signs * solved["mean"] + rng.standard_normal(n_p)
        Y = rng.standard_normal(n_q)
    elif family == "laplace_scale":
        X = rng.laplace(0.0, solved["scale"], size=n_p)
        Y = rng.laplace(0.0, 1.0, size=n_q)
    elif family == "poisson_rate":
        X = rng.poisson(solved["rate"], size=n_p).astype(np.float64)
        Y = rng.poisson(1.0, size=n_q).astype(np.float64)
    else:
        mean, chol = solved["mean"], np.linalg.cholesky(solved["covariance"])
        X = mean + rng.standard_normal((n_p, mean.size)) @ chol.T
        Y = rng.standard_normal((n_q, mean.size)) @ chol.T
    return X, Y, truth


@finite_result(allow_inf=True)
def family_divergence(family: str, alpha: float, params: dict) -> float:
    """D_α(P‖Q) of a family with solved parameters, at any order α (not only the solved one).

    Parameters
    ----------
    family : str
        One of :data:`FAMILIES`.
    alpha : float
        Rényi order, > 1.
    params : dict
        Solved parameters, as returned by :func:`family_parameters`.

    Returns
    -------
    float
        The exact divergence, recomputed by :mod:`rdpest.stats.divergences`; ``inf`` where it is
        infinite (gaussian_scale and laplace_scale beyond their limiting order). With
        :func:`rdpest.stats.efficiency.efficient_standard_error`: how precisely any estimator can
        estimate the pair's D_α from a given number of samples.

    Examples
    --------
    >>> params = family_parameters("gaussian_shift", alpha=2.0, divergence=1.0)
    >>> round(family_divergence("gaussian_shift", 8.0, params), 12)  # D_β = β μ² / 2, μ² = 1
    4.0
    """
    log_likelihood_ratio(family, params)  # checks the family and the parameters' keys and values
    alpha = check_alpha(alpha)
    what = f"the divergence of family {family!r} at alpha={alpha!r} and params {params!r}"
    with _in_double_precision(f"{what} cannot be computed"):
        value = true_divergence(family, alpha, params)
    if math.isnan(value):
        raise ValueError(f"{what} is not a number in double precision")
    return value


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
        array of shape (n,) of log-likelihood ratios. Outside the support of Q (x < 0 for
        ``"exponential_rate"``, non-integers for ``"poisson_rate"``) the value is that of the
        formula, meaningless there.

    Examples
    --------
    >>> L = log_likelihood_ratio("gaussian_shift", {"mean": 1.0})
    >>> L([0.0, 0.5, 2.0]).tolist()  # μ x − μ²/2
    [-0.5, 0.0, 1.5]
    """
    family = _check_family(family)
    expected = SOLVED_KEYS[family]
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
            with np.errstate(over="ignore"):  # ±inf where the log ratio itself overflows
                return curvature * x * x - math.log(std)

        return scale_ratio

    if family == "laplace_shift":
        shift = check_real(params["shift"], "shift")

        def laplace_ratio(x):
            # |x| − |x − Δ| = clip(2x − Δ, −Δ, Δ) for Δ >= 0 (mirrored for Δ < 0): the difference
            # of two absolute values lost every digit once |x| was beyond about 1e15.
            x = np.asarray(x, dtype=np.float64)
            side, width = (1.0 if shift >= 0 else -1.0), abs(shift)
            return np.clip(2.0 * side * x - width, -width, width)

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

    if family in _NEW_RATIOS:
        return _NEW_RATIOS[family](params)

    # Checked as the divergence checks them: finite, matching shapes, symmetric positive
    # definite (a NaN mean gave NaN ratios, an indefinite covariance a meaningless one).
    mean = check_finite_array(params["mean"], "params['mean']", ndim=1)
    covariance, _ = _positive_definite_covariance(
        params["covariance"], "params['covariance']", mean.size
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


# ---------------------------------------------------------------------------------------------
# Log ratios of the families added for issue 17
# ---------------------------------------------------------------------------------------------


def _student_t_ratio(params: dict):
    df = check_positive(params["df"], "df")
    shift = check_real(params["shift"], "shift")
    power = 0.5 * (df + 1.0)

    def ratio(x):
        # log p − log q = −(ν+1)/2 · [log1p((x−μ)²/ν) − log1p(x²/ν)], the two merged into one
        # log1p: ((x−μ)² − x²)/(ν + x²) = μ(μ − 2x)/(ν + x²).
        x = np.asarray(x, dtype=np.float64)
        # Beyond |x| = 1e150, x² overflowed (the ratio came out 0, with a warning): there the
        # same fraction is μ(μ/x − 2)/(ν/x + x).
        far = np.abs(x) > 1e150
        if not np.any(far):
            return -power * np.log1p(shift * (shift - 2.0 * x) / (df + x * x))
        near = np.where(far, 0.0, x)
        wide = np.where(far, x, 1.0)
        fraction = np.where(
            far,
            shift * (shift / wide - 2.0) / (df / wide + wide),
            shift * (shift - 2.0 * near) / (df + near * near),
        )
        return -power * np.log1p(fraction)

    return ratio


def _exponential_ratio(params: dict):
    rate = check_positive(params["rate"], "rate")
    log_rate = math.log(rate)
    return lambda x: log_rate - (rate - 1.0) * np.asarray(x, dtype=np.float64)


def _mixture_ratio(params: dict):
    mean = check_real(params["mean"], "mean")

    def ratio(x):
        # p/q = ½ e^{μx − μ²/2} + ½ e^{−μx − μ²/2} = e^{−μ²/2} cosh(μx); log cosh y evaluated as
        # |y| + log1p(e^{−2|y|}) − log 2 (no overflow).
        y = np.abs(mean * np.asarray(x, dtype=np.float64))
        return y + np.log1p(np.exp(-2.0 * y)) - math.log(2.0) - 0.5 * mean * mean

    return ratio


def _laplace_scale_ratio(params: dict):
    scale = check_positive(params["scale"], "scale")
    slope, log_scale = 1.0 - 1.0 / scale, math.log(scale)
    return lambda x: slope * np.abs(np.asarray(x, dtype=np.float64)) - log_scale


def _poisson_ratio(params: dict):
    rate = check_positive(params["rate"], "rate")
    log_rate = math.log(rate)
    # log p(k) − log q(k) = k log λ − (λ − 1).
    return lambda x: np.asarray(x, dtype=np.float64) * log_rate - (rate - 1.0)


_NEW_RATIOS = {
    "student_t_shift": _student_t_ratio,
    "exponential_rate": _exponential_ratio,
    "gaussian_mixture": _mixture_ratio,
    "laplace_scale": _laplace_scale_ratio,
    "poisson_rate": _poisson_ratio,
}
